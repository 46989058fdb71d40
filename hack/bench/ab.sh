#!/usr/bin/env bash
# Two builds of ours in the rollout bench, alternating on fresh beds
# (before, after, after, before, ...), and the table of after/before:
# what one change does on its own, on one machine.
#
#   hack/bench/ab.sh BEFORE_BINARY AFTER_BINARY
#
# Build both as the bench builds ours (CGO_ENABLED=0 go build -trimpath
# -ldflags '-s -w'). Environment: BENCH_SIZES (one size, default 1000),
# BENCH_ROUNDS (runs of each, default 3), BENCH_DIR (_output/bench-ab),
# and what hack/bench/rollout.sh takes (BENCH_POD, BENCH_QPS, ...).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $# -eq 2 && -x "$1" && -x "$2" ]] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY (both executable)" >&2; exit 2; }
declare -A BINARY=([before]="$(realpath "$1")" [after]="$(realpath "$2")")
SIZE="${BENCH_SIZES:-1000}"
ROUNDS="${BENCH_ROUNDS:-3}"
OUT="${BENCH_DIR:-${ROOT}/_output/bench-ab}"
[[ "${SIZE}" =~ ^[1-9][0-9]*0$ ]] || { echo "BENCH_SIZES: one size, a multiple of 10" >&2; exit 2; }
[[ "${ROUNDS}" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_ROUNDS must be a positive number" >&2; exit 2; }
rm -rf "${OUT}"
mkdir -p "${OUT}/runs"
# Each build runs under the bench's name for ours: client-go names its user
# agent after the executable, and analyze.py counts the requests by agent.
for which in before after; do
  mkdir -p "${OUT}/bin-${which}"
  cp "${BINARY[${which}]}" "${OUT}/bin-${which}/kube-controller-manager-bench"
  BINARY[${which}]="${OUT}/bin-${which}/kube-controller-manager-bench"
done

for (( r = 1; r <= ROUNDS; r++ )); do
  order=(before after)
  (( r % 2 )) || order=(after before)
  for which in "${order[@]}"; do
    BENCH_ONLY=ours BENCH_ROUNDS=1 BENCH_PPROF=0 BENCH_SIZES="${SIZE}" \
      BENCH_OURS_BINARY="${BINARY[${which}]}" BENCH_DIR="${OUT}/${which}-${r}" \
      "${ROOT}/hack/bench/rollout.sh"
    cp "${OUT}/${which}-${r}/runs/ours-${SIZE}-1.json" "${OUT}/runs/${which}-${SIZE}-${r}.json"
  done
done
python3 "${ROOT}/hack/bench/report.py" --who after before "${OUT}/runs" "${SIZE}" | tee "${OUT}/ab.md"
