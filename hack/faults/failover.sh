#!/usr/bin/env bash
# Failover time after node loss, ours vs upstream's kube-controller-manager
# on the same three-node bed (make failover; make image-node first).
# Each round runs TestNodeLoss (test/e2e/faults): the leading node's
# container is killed mid-rollout; "lease" is kill -> the new holder's
# acquireTime, "acting" is kill -> the first controller write (events aside)
# that reaches the new leader's apiserver (its audit log).
# ROUNDS (3), KCMFAULT_PODS (300). Writes _output/faults/failover.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "${ROOT}"
ROUNDS=${ROUNDS:-3}
OUT=_output/faults
mkdir -p "${OUT}"
: > "${OUT}/failover.txt"
go test -c -o "${OUT}/faults.test" ./test/e2e/faults/
for round in $(seq 1 "${ROUNDS}"); do
  for kcm in ours upstream; do
    echo "+++ [failover] round ${round}: ${kcm}" >&2
    log="${OUT}/failover-${kcm}-${round}.log"
    if ! (cd test/e2e/faults && KCMFAULT_IMAGE="${NODE_IMAGE:-kcmclone/control-plane-node:dev}" KCMFAULT_KCM="${kcm}" \
        "${ROOT}/${OUT}/faults.test" -test.run '^TestNodeLoss$' -test.v -test.count=1 -test.timeout 30m) > "${log}" 2>&1; then
      echo "round ${round} (${kcm}) failed: see ${log}" >&2; exit 1
    fi
    grep -o 'FAILOVER .*' "${log}" | tee -a "${OUT}/failover.txt" >&2
  done
done
python3 - "${OUT}/failover.txt" <<'PY' | tee "${OUT}/failover.md"
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = dict(re.findall(r'(\w+)=([\w.]+)', line))
    rows.setdefault(m['kcm'], []).append((float(m['lease'].rstrip('s')), float(m['acting'].rstrip('s')), m['pods']))
print("| controller manager | rounds | pods | kill -> new Lease holder (median, min-max) | kill -> first controller write (median, min-max) |")
print("|---|---|---|---|---|")
for kcm in ("ours", "upstream"):
    r = rows.get(kcm, [])
    if not r:
        continue
    lease = [x[0] for x in r]; act = [x[1] for x in r]
    print(f"| {kcm} | {len(r)} | {r[0][2]} | {statistics.median(lease):.1f}s ({min(lease):.1f}-{max(lease):.1f}) | {statistics.median(act):.1f}s ({min(act):.1f}-{max(act):.1f}) |")
PY
