#!/usr/bin/env bash
# Deployment scale bench: our kube-controller-manager against upstream's v1.37.2
# (_output/bin/kube-controller-manager-upstream), each on a fresh hack/local-up.sh
# cluster (etcd, kube-apiserver with auditing, kube-scheduler, kwok fake nodes)
# with the same flags. The workload: create N Deployments x R replicas in one
# namespace, wait until all are available, delete the namespace, wait until it
# is gone. Reports, per binary and as a ratio ours/upstream:
#   - seconds until all Deployments are available; seconds until the namespace is gone
#   - the controller manager's CPU seconds (/proc/<pid>/stat utime+stime) over the
#     workload window and over its whole life; its peak RSS (VmHWM)
#   - the API requests it made in the workload window, from the apiserver audit
#     log (userAgent "kube-controller-manager/..."), by verb and by controller
#     (the user agent's trailing name; service accounts with
#     --use-service-account-credentials, which local-up.sh sets).
# The table goes to stdout and to ${BENCH_DIR}/deployments.md.
#
#   make bench                                   # N=100 R=10
#   BENCH_DEPLOYMENTS=20 hack/bench/deployments.sh   # quick run (~2-3 minutes)
#
# Environment:
#   BENCH_DEPLOYMENTS (100)  BENCH_REPLICAS (10)
#   BENCH_TIMEOUT (600)      seconds allowed for each wait (available; namespace gone)
#   BENCH_KCM_FLAGS          extra flags for both controller managers (none:
#                            kwok renews node Leases, hack/kwok/kwok-config.yaml,
#                            so node lifecycle sees healthy nodes under load)
#   BENCH_ONLY (both)        ours | upstream | both
#   BENCH_DIR (_output/bench)
# Needs python3. 110 pods fit on a kwok node; nodes = ceil(N*R/100)+1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN="${ROOT}/_output/bin"
N="${BENCH_DEPLOYMENTS:-100}"
R="${BENCH_REPLICAS:-10}"
TIMEOUT="${BENCH_TIMEOUT:-600}"
ONLY="${BENCH_ONLY:-both}"
OUT="${BENCH_DIR:-${ROOT}/_output/bench}"
KCM_FLAGS="${BENCH_KCM_FLAGS:-}"
NODES=$(( (N * R + 99) / 100 + 1 ))
NS=bench
log() { echo "+++ [bench $(date -u +%H:%M:%S)] $*" >&2; }
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

[[ "${N}" =~ ^[1-9][0-9]*$ && "${R}" =~ ^[0-9]+$ ]] || { log "BENCH_DEPLOYMENTS/BENCH_REPLICAS must be numbers"; exit 2; }
case "${ONLY}" in ours|upstream|both) ;; *) log "BENCH_ONLY must be ours, upstream or both"; exit 2;; esac

"${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok kube-controller-manager-upstream
[[ -x "${BIN}/kube-controller-manager" ]] || (cd "${ROOT}" && make build)
mkdir -p "${OUT}"

# Metadata-level auditing of everything; RequestReceived gives one event per
# request (watches included, at their start), ResponseComplete the status codes.
POLICY="${OUT}/audit-policy.yaml"
cat > "${POLICY}" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted"]
rules:
- level: Metadata
YAML

CLUSTER_PID=""
stop_cluster() {
  local pid=${CLUSTER_PID}
  [[ -n "${pid}" ]] || return 0
  CLUSTER_PID=""
  log "stopping the cluster (pid ${pid})"
  # One TERM: local-up.sh's trap stops its components in order.
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
}
trap stop_cluster EXIT
trap 'stop_cluster; exit 130' INT TERM

cpu_secs() { # pid -> utime+stime in seconds
  python3 - "$1" <<'PY'
import os, sys
s = open(f"/proc/{sys.argv[1]}/stat").read()
f = s[s.rindex(")") + 2:].split()
print(f"{(int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'):.2f}")
PY
}
hwm_mib() { awk '/^VmHWM:/ {printf "%.1f\n", $2/1024}' "/proc/$1/status"; }

# poll WHAT SECONDS COMMAND...: run COMMAND every second until it succeeds;
# returns 1 on timeout or when the cluster died.
poll() {
  local what=$1 secs=$2 deadline; shift 2
  deadline=$(( SECONDS + secs ))
  while (( SECONDS < deadline )); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "${CLUSTER_PID}" 2>/dev/null; then log "the cluster died while waiting for ${what}"; return 1; fi
    sleep 1
  done
  log "timed out after ${secs}s waiting for ${what}"; return 1
}

manifest() {
  local i
  for (( i = 0; i < N; i++ )); do
    cat <<YAML
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench-${i}, namespace: ${NS}}
spec:
  replicas: ${R}
  selector: {matchLabels: {app: bench-${i}}}
  template:
    metadata: {labels: {app: bench-${i}}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]
YAML
  done
}

# run_one NAME BINARY: one fresh cluster, the workload, the figures into NAME.json.
run_one() {
  local name=$1 binary=$2
  local dir="${OUT}/${name}"
  rm -rf "${dir}"; mkdir -p "${dir}"
  local audit="${dir}/audit.log"
  log "[${name}] starting a cluster with ${NODES} kwok nodes (${binary##*/}); log ${dir}/local-up.log"
  KCM_LOCAL_DIR="${dir}/cluster" KCM_LOCAL_KCM_BINARY="${binary}" KCM_LOCAL_NODES="${NODES}" \
    KCM_LOCAL_APISERVER_PORT="$(free_port)" KCM_LOCAL_KCM_PORT="$(free_port)" \
    KCM_LOCAL_KCM_FLAGS="${KCM_FLAGS}" \
    KCM_LOCAL_APISERVER_FLAGS="--audit-policy-file=${POLICY} --audit-log-path=${audit} --audit-log-format=json --audit-log-mode=blocking" \
    "${ROOT}/hack/local-up.sh" >"${dir}/local-up.log" 2>&1 &
  CLUSTER_PID=$!
  if ! poll "the cluster" 300 grep -q '^Local cluster is up' "${dir}/local-up.log"; then
    tail -20 "${dir}/local-up.log" >&2 || true; return 1
  fi
  local kcm_pid
  kcm_pid=$(sed -n 's/.*started kube-controller-manager (pid \([0-9]*\)).*/\1/p' "${dir}/local-up.log" | tail -1)
  [[ -n "${kcm_pid}" ]] && kill -0 "${kcm_pid}" || { log "[${name}] no controller manager pid"; return 1; }
  local K=("${BIN}/kubectl" --kubeconfig="${dir}/cluster/kubeconfig")

  "${K[@]}" create namespace "${NS}" >/dev/null
  poll "the default ServiceAccount in ${NS}" 120 "${K[@]}" -n "${NS}" get serviceaccount default || return 1
  manifest > "${dir}/deployments.yaml"
  sleep 2 # let the cluster settle after start-up

  local cpu0 t0 t1 t2 secs_avail secs_gone
  cpu0=$(cpu_secs "${kcm_pid}"); t0=$(now)
  log "[${name}] creating ${N} Deployments x ${R} replicas"
  "${K[@]}" create -f "${dir}/deployments.yaml" >/dev/null
  # shellcheck disable=SC2016
  if poll "${N} available Deployments" "${TIMEOUT}" bash -c '[[ $("$@" -n '"${NS}"' get deployments -o jsonpath="{range .items[*]}{.status.availableReplicas}{\"\\n\"}{end}" | grep -cx '"${R}"') -ge '"${N}"' ]]' _ "${K[@]}"; then
    t1=$(now); secs_avail=$(python3 -c "print(f'{${t1} - ${t0}:.1f}')")
  else
    t1=$(now); secs_avail=timeout
  fi
  "${K[@]}" -n "${NS}" get deployments -o jsonpath='{range .items[*]}{.status.availableReplicas}{"\n"}{end}' > "${dir}/available.txt" || true
  log "[${name}] all available: ${secs_avail}s ($(grep -cx "${R}" "${dir}/available.txt" || true)/${N} Deployments fully available); deleting namespace ${NS}"
  "${K[@]}" delete namespace "${NS}" --wait=false >/dev/null
  # shellcheck disable=SC2016
  if poll "namespace ${NS} to go" "${TIMEOUT}" bash -c '! "$@" get namespace '"${NS}"' >/dev/null 2>&1 && "$@" get --raw /readyz' _ "${K[@]}"; then
    t2=$(now); secs_gone=$(python3 -c "print(f'{${t2} - ${t1}:.1f}')")
  else
    t2=$(now); secs_gone=timeout
  fi
  log "[${name}] namespace gone: ${secs_gone}s"
  local cpu1 hwm
  cpu1=$(cpu_secs "${kcm_pid}"); hwm=$(hwm_mib "${kcm_pid}")
  "${K[@]}" get --raw /metrics 2>/dev/null | grep -E '^apiserver_request_total' > "${dir}/apiserver-metrics.txt" || true
  sleep 1
  stop_cluster
  cat > "${dir}/facts.txt" <<FACTS
binary=${binary##*/}
deployments=${N}
replicas=${R}
nodes=${NODES}
window_start=${t0}
window_end=${t2}
secs_available=${secs_avail}
secs_ns_gone=${secs_gone}
cpu_window=$(python3 -c "print(f'{${cpu1} - ${cpu0}:.2f}')")
cpu_total=${cpu1}
rss_peak_mib=${hwm}
FACTS
  python3 "${ROOT}/hack/bench/analyze.py" "${audit}" "${dir}/facts.txt" > "${OUT}/${name}.json"
  log "[${name}] done: $(python3 -c "import json; d=json.load(open('${OUT}/${name}.json')); print('requests', d['requests_total'], 'agents', d['user_agents'])")"
}

START=${SECONDS}
[[ "${ONLY}" == upstream ]] || run_one ours "${BIN}/kube-controller-manager"
[[ "${ONLY}" == ours ]] || run_one upstream "${BIN}/kube-controller-manager-upstream"

if [[ "${ONLY}" == both ]]; then
  {
    echo "# Deployment bench: ${N} Deployments x ${R} replicas, ${NODES} kwok nodes"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, flags: local-up.sh defaults (--use-service-account-credentials=true --v=2) ${KCM_FLAGS}"
    echo "API requests are those with userAgent kube-controller-manager/* received between the first create and the namespace being gone."
    echo
    python3 "${ROOT}/hack/bench/table.py" "${OUT}/ours.json" "${OUT}/upstream.json"
  } > "${OUT}/deployments.md"
  cat "${OUT}/deployments.md"
  log "table in ${OUT}/deployments.md ($((SECONDS - START))s)"
else
  cat "${OUT}/${ONLY}.json"
fi
