#!/usr/bin/env bash
# Active-active bench: the same rollout of one Deployment of N pods on a fresh
# hack/local-up.sh cluster (kwok nodes), three ways:
#   ours-1      one replica of ours (no kill: the baseline)
#   ours-3      three --leader-elect-sharded replicas; the one running the
#               ReplicaSet controller is killed with SIGKILL a third of the way in
#   upstream-2  upstream's active/passive pair; the leader is killed likewise
# Reports per replica CPU seconds and peak RSS, the seconds to roll out, and
# the longest pause between two pod creations (around the kill).
# The table goes to stdout and ${BENCH_DIR}/sharded.md.
#
#   hack/bench/sharded.sh                    # N=1000
#   BENCH_PODS=200 hack/bench/sharded.sh     # quick
#
# Environment: BENCH_PODS (1000), BENCH_TIMEOUT (900 s per wait),
# BENCH_ONLY (all | ours-1 | ours-3 | upstream-2), BENCH_DIR (_output/bench),
# BENCH_ROUNDS (3): the setups alternate within each round; the summary
# gives the median and the min-max over the rounds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN="${ROOT}/_output/bin"
PODS="${BENCH_PODS:-1000}"
TIMEOUT="${BENCH_TIMEOUT:-900}"
ONLY="${BENCH_ONLY:-all}"
ROUNDS="${BENCH_ROUNDS:-3}"
OUT="${BENCH_DIR:-${ROOT}/_output/bench}"
NODES=$(( (PODS + 99) / 100 + 1 ))
NS=bench
log() { echo "+++ [bench-sharded $(date -u +%H:%M:%S)] $*" >&2; }
source "${ROOT}/hack/bench/lib.sh"
[[ "${PODS}" =~ ^[1-9][0-9]*$ ]] || { log "BENCH_PODS must be a positive number"; exit 2; }
[[ "${ROUNDS}" =~ ^[1-9][0-9]*$ ]] || { log "BENCH_ROUNDS must be a positive number"; exit 2; }
case "${ONLY}" in all|ours-1|ours-3|upstream-2) ;; *) log "BENCH_ONLY must be all, ours-1, ours-3 or upstream-2"; exit 2;; esac

"${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok kube-controller-manager-upstream
[[ -x "${BIN}/kube-controller-manager" ]] || (cd "${ROOT}" && make build)
mkdir -p "${OUT}"

WATCH_PID=""
stop_watch() { [[ -n "${WATCH_PID}" ]] && { kill "${WATCH_PID}" 2>/dev/null || true; WATCH_PID=""; }; return 0; }
BENCH_BEFORE_STOP=stop_watch

# run_one NAME BINARY REPLICAS SHARDED KILL
run_one() {
  local name=$1 binary=$2 replicas=$3 sharded=$4 kill=$5
  local dir="${OUT}/sharded-${name}"
  rm -rf "${dir}"; mkdir -p "${dir}"
  log "[${name}] starting a cluster with ${NODES} kwok nodes and ${replicas} x ${binary##*/}"
  KCM_LOCAL_DIR="${dir}/cluster" KCM_LOCAL_KCM_BINARY="${binary}" KCM_LOCAL_NODES="${NODES}" \
    KCM_LOCAL_APISERVER_PORT="$(free_port)" KCM_LOCAL_KCM_PORT="$(free_port)" \
    KCM_LOCAL_REPLICAS="${replicas}" KCM_LOCAL_SHARDED="${sharded}" \
    "${ROOT}/hack/local-up.sh" >"${dir}/local-up.log" 2>&1 &
  CLUSTER_PID=$!
  if ! poll "the cluster" 300 grep -q '^Local cluster is up' "${dir}/local-up.log"; then
    tail -20 "${dir}/local-up.log" >&2 || true; return 1
  fi
  local -A pids=()
  local n p
  while read -r n p; do pids[$n]=$p; done < <(sed -n 's/.*started \(kube-controller-manager[-0-9]*\) (pid \([0-9]*\)).*/\1 \2/p' "${dir}/local-up.log")
  local K=("${BIN}/kubectl" --kubeconfig="${dir}/cluster/kubeconfig")
  if [[ "${sharded}" == true ]]; then
    poll "every controller lease held" 180 bash -c '! "$@" -n kube-system get leases -o jsonpath="{range .items[*]}{.metadata.name}={.spec.holderIdentity}{\"\\n\"}{end}" | grep -E "^kube-controller-manager-[a-z-]*controller=$" && "$@" -n kube-system get lease kube-controller-manager-replicaset-controller' _ "${K[@]}" || return 1
    sleep 20 # let the replicas settle on their shares
  fi
  "${K[@]}" create namespace "${NS}" >/dev/null
  poll "the default ServiceAccount" 120 "${K[@]}" -n "${NS}" get serviceaccount default || return 1

  # Pod creations, time-stamped as the watch sees them.
  "${K[@]}" -n "${NS}" get pods --watch-only --output-watch-events -o jsonpath='{.type} {.object.metadata.name}{"\n"}' \
    | python3 -u -c 'import sys,time
for l in sys.stdin: print(f"{time.time():.3f} {l.strip()}", flush=True)' > "${dir}/pod-events.txt" &
  WATCH_PID=$!
  sleep 1
  local -A cpu0=()
  for n in "${!pids[@]}"; do cpu0[$n]=$(cpu_secs "${pids[$n]}"); done
  local t0 t1 killed_at="" victim=""
  t0=$(now)
  "${K[@]}" -n "${NS}" create deployment web --image=registry.k8s.io/pause:3.10 --replicas="${PODS}" >/dev/null
  if [[ "${kill}" == true ]]; then
    poll "a third of the pods" "${TIMEOUT}" bash -c '(( $(grep -c " ADDED " "$0") >= '"$(( PODS / 3 ))"' ))' "${dir}/pod-events.txt" || return 1
    local who
    if [[ "${sharded}" == true ]]; then
      who=$("${K[@]}" -n kube-system get lease kube-controller-manager-replicaset-controller -o jsonpath='{.spec.holderIdentity}')
    else
      who=$("${K[@]}" -n kube-system get lease kube-controller-manager -o jsonpath='{.spec.holderIdentity}')
    fi
    victim=$(grep -l -F "${who}" "${dir}"/cluster/logs/kube-controller-manager*.log | head -1 | xargs -r basename | sed 's/\.log$//')
    [[ -n "${victim}" && -n "${pids[${victim}]:-}" ]] || { log "[${name}] cannot tell which process is ${who}"; return 1; }
    killed_at=$(now)
    cpu0[${victim}]="killed"
    kill -KILL "${pids[${victim}]}"
    log "[${name}] killed ${victim} (${who}) at $(( $(grep -c " ADDED " "${dir}/pod-events.txt") )) pods"
  fi
  # shellcheck disable=SC2016
  poll "${PODS} available" "${TIMEOUT}" bash -c '[[ $("$@" -n '"${NS}"' get deployment web -o jsonpath="{.status.availableReplicas}") == '"${PODS}"' ]]' _ "${K[@]}" || return 1
  t1=$(now)
  local rows=""
  for n in $(printf '%s\n' "${!pids[@]}" | sort); do
    if [[ "${cpu0[$n]}" == killed ]]; then
      rows+="${n}=killed "
    else
      rows+="${n}=$(python3 -c "print(f'{$(cpu_secs "${pids[$n]}") - ${cpu0[$n]}:.1f}')")s/$(hwm_mib "${pids[$n]}")MiB "
    fi
  done
  local pause
  pause=$(python3 - "${dir}/pod-events.txt" "${killed_at:-0}" <<'PY'
import sys
ts = [float(l.split()[0]) for l in open(sys.argv[1]) if " ADDED " in l]
killed = float(sys.argv[2])
gaps = [(b - a, a) for a, b in zip(ts, ts[1:])]
if not gaps:
    print("n/a"); sys.exit()
g, at = max(gaps)
where = f", {at - killed:+.1f}s from the kill" if killed else ""
print(f"{g:.1f}s{where}")
PY
)
  local created
  created=$(grep -c " ADDED " "${dir}/pod-events.txt" || true)
  stop_cluster
  echo "| ${name} | ${ROUND} | $(python3 -c "print(f'{${t1} - ${t0}:.1f}')") | ${pause} | ${created} | ${rows}|" >> "${OUT}/sharded-rows.md"
  log "[${name}] done: $(tail -1 "${OUT}/sharded-rows.md")"
}

rm -f "${OUT}/sharded-rows.md"
for ROUND in $(seq 1 "${ROUNDS}"); do
  if [[ "${ONLY}" == all || "${ONLY}" == ours-1 ]]; then run_one ours-1 "${BIN}/kube-controller-manager" 1 false false; fi
  if [[ "${ONLY}" == all || "${ONLY}" == ours-3 ]]; then run_one ours-3 "${BIN}/kube-controller-manager" 3 true true; fi
  if [[ "${ONLY}" == all || "${ONLY}" == upstream-2 ]]; then run_one upstream-2 "${BIN}/kube-controller-manager-upstream" 2 false true; fi
done
{
  echo "# Active-active bench: one Deployment of ${PODS} pods, ${NODES} kwok nodes, ${ROUNDS} rounds, $(nproc) CPUs, commit $(git -C "${ROOT}" rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "| setup | seconds to roll out, median (min-max) | longest pause between pod creations, median (min-max) |"
  echo "|---|---:|---:|"
  python3 - "${OUT}/sharded-rows.md" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    pause = re.match(r"([0-9.]+)s", cells[3])
    rows.setdefault(cells[0], []).append((float(cells[2]), float(pause.group(1)) if pause else None))
def fmt(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})" if xs else "n/a"
for name, rs in rows.items():
    print(f"| {name} | {fmt([r[0] for r in rs])} | {fmt([r[1] for r in rs])} |")
PY
  echo
  echo "| setup | round | seconds to roll out | longest pause between pod creations | pods created | per replica: CPU seconds over the rollout / peak RSS |"
  echo "|---|---:|---:|---|---:|---|"
  cat "${OUT}/sharded-rows.md"
} | tee "${OUT}/sharded.md"
