#!/usr/bin/env bash
# The bench's other workloads, ours against upstream's v1.37.2 with the same
# machinery as rollout.sh (same build flags, same flags, fresh bed per run,
# alternating rounds, audit-log request counts; report.py makes the table):
#   jobs      BENCH_SIZE short Jobs (one pod each, ttlSecondsAfterFinished 5)
#             plus one Indexed Job of BENCH_SIZE completions (parallelism
#             100); converge = all Jobs complete and the short ones deleted
#             by their TTL.
#   nodefail  BENCH_SIZE pods (Deployments x 10, tolerating not-ready and
#             unreachable for 10s) on kwok nodes, a tenth more nodes run by
#             a second kwok; that kwok is killed (its nodes stop
#             heartbeating): converge = those nodes tainted, their pods
#             evicted, every Deployment available again on the others.
#   joblatency  BENCH_SIZE one-pod Jobs one after another on a quiet
#             cluster, each created and waited for (Complete) before the
#             next: converge = the sum, plus the median and slowest Job.
#   services  BENCH_SIZE pods (Deployments x 10), a Service per Deployment;
#             converge = every Service's EndpointSlices list 10 ready
#             endpoints; then readiness of every pod flips to false and back
#             (status patches), converge again.
#
#   BENCH_WORKLOAD=jobs BENCH_SIZE=1000 BENCH_ROUNDS=3 hack/bench/workloads.sh
#
# Environment as rollout.sh (BENCH_ROUNDS, BENCH_QPS, BENCH_BURST,
# BENCH_KCM_FLAGS, BENCH_TIMEOUT, BENCH_DIR, BENCH_PPROF: ours' last round takes
# a CPU profile of the workload's first 30 s and a heap profile at its end),
# plus BENCH_WORKLOAD and BENCH_SIZE; BENCH_OURS_BINARY runs another build
# as ours (one change on its own: two builds, BENCH_ONLY=ours, alternating).
# BENCH_ONLY=ours|upstream runs one
# binary (quick iterations: per-run figures, no table); BENCH_KEEP_AUDIT=1
# keeps each run's audit log (for hack/bench/timeline.py).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN="${ROOT}/_output/bin"
WORKLOAD="${BENCH_WORKLOAD:-jobs}"
SIZE="${BENCH_SIZE:-1000}"
ROUNDS="${BENCH_ROUNDS:-3}"
QPS="${BENCH_QPS:-500}"
BURST="${BENCH_BURST:-1000}"
TIMEOUT="${BENCH_TIMEOUT:-900}"
PPROF="${BENCH_PPROF:-1}"
OUT="${BENCH_DIR:-${ROOT}/_output/bench}/${WORKLOAD}"
KCM_FLAGS="--kube-api-qps=${QPS} --kube-api-burst=${BURST} ${BENCH_KCM_FLAGS:-}"
# The scheduler gets the same client limits (see rollout.sh).
SCHEDULER_FLAGS="--kube-api-qps=${QPS} --kube-api-burst=${BURST}"
# kwok's workers (see rollout.sh).
export KCM_LOCAL_KWOK_PARALLELISM="${BENCH_KWOK_PARALLELISM:-16}"
NS=bench
log() { echo "+++ [bench ${WORKLOAD} $(date -u +%H:%M:%S)] $*" >&2; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f\n", b - a}'; }
source "${ROOT}/hack/bench/lib.sh"
case "${WORKLOAD}" in jobs|joblatency|nodefail|services) ;; *) log "BENCH_WORKLOAD must be jobs, joblatency, nodefail or services"; exit 2;; esac
[[ "${SIZE}" =~ ^[1-9][0-9]*0$ ]] || { log "BENCH_SIZE must be a multiple of 10"; exit 2; }

"${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok kube-controller-manager-upstream
COMMIT="$(git -C "${ROOT}" rev-parse --short HEAD)$(git -C "${ROOT}" diff --quiet HEAD -- . ':!README.md' || echo '-dirty')"
(cd "${ROOT}" && make -s bench-build)
OURS="${BENCH_OURS_BINARY:-${BIN}/kube-controller-manager-bench}"
UPSTREAM="${BIN}/kube-controller-manager-upstream"
mkdir -p "${OUT}"
POLICY="${OUT}/audit-policy.yaml"
printf 'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: ["ResponseStarted"]\nrules:\n- level: Metadata\n' > "${POLICY}"


deployments() { # N TOLERATION_SECONDS(or "")
  local i tol=""
  [[ -z "$2" ]] || tol="
      tolerations:
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: $2}
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: $2}"
  for (( i = 0; i < $1; i++ )); do
    cat <<YAML
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d-${i}, namespace: ${NS}}
spec:
  replicas: 10
  selector: {matchLabels: {app: d-${i}}}
  template:
    metadata: {labels: {app: d-${i}}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]${tol}
YAML
  done
}
available() { # N KUBECTL...
  local n=$1; shift
  [[ $("$@" -n "${NS}" get deployments -o jsonpath='{range .items[*]}{.status.availableReplicas}/{.status.replicas}{"\n"}{end}' | grep -cx '10/10') -ge "${n}" ]]
}

# Each workload: prepare (untimed), then phases printed as "name seconds" lines.
wl_jobs() { # KUBECTL...
  local t0 t1 t2 i
  {
    for (( i = 0; i < SIZE; i++ )); do
      printf -- '---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j-%d, namespace: %s}\nspec:\n  ttlSecondsAfterFinished: 5\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox, command: ["true"]}]\n' "${i}" "${NS}"
    done
    printf -- '---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: indexed, namespace: %s}\nspec:\n  completionMode: Indexed\n  completions: %d\n  parallelism: 100\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox, command: ["true"]}]\n' "${NS}" "${SIZE}"
  } > "${RUN_DIR}/jobs.yaml"
  t0=$(now)
  "$@" create -f "${RUN_DIR}/jobs.yaml" >/dev/null
  # shellcheck disable=SC2016
  poll "the Indexed Job" "${TIMEOUT}" bash -c '[[ $("$@" -n '"${NS}"' get job indexed -o jsonpath="{.status.succeeded}") == '"${SIZE}"' ]]' _ "$@" || OK=0
  t1=$(now)
  # shellcheck disable=SC2016
  poll "the short Jobs to go (TTL)" "${TIMEOUT}" bash -c '[[ $("$@" -n '"${NS}"' get jobs -o name | wc -l) -le 1 ]]' _ "$@" || OK=0
  t2=$(now)
  echo "indexed_complete $(secs "${t0}" "${t1}")"
  echo "short_jobs_gone $(secs "${t0}" "${t2}")"
  echo "total $(secs "${t0}" "${t2}")"
}

wl_joblatency() { # KUBECTL...
  local i t0 t1 lat=()
  for (( i = 0; i < SIZE; i++ )); do
    printf -- 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: j-%d, namespace: %s}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox, command: ["true"]}]\n' "${i}" "${NS}" > "${RUN_DIR}/job.yaml"
    t0=$(now)
    "$@" create -f "${RUN_DIR}/job.yaml" >/dev/null
    "$@" -n "${NS}" wait --for=condition=complete --timeout="${TIMEOUT}s" "job/j-${i}" >/dev/null || OK=0
    t1=$(now)
    lat+=("$(awk -v a="${t0}" -v b="${t1}" 'BEGIN {printf "%.3f", b - a}')")
  done
  printf '%s\n' "${lat[@]}" | sort -n | awk '{v[NR] = $1; sum += $1} END {
    printf "job_median %.2f\njob_slowest %.2f\ntotal %.1f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR], sum}'
}

wl_nodefail() { # KUBECTL...
  local n=$(( SIZE / 10 )) t0 t1 t2 i
  # The nodes that fail run under a kwok of their own, killed below: a kwok
  # keeps heartbeating every node it has picked up, whatever its annotation
  # says later.
  local up fail kwok_pid
  up=$("$@" get nodes -o name | wc -l)
  fail=$(( (up + 9) / 10 ))
  kwok_pid=$(pgrep -n -f "kwok --kubeconfig=${RUN_DIR}/cluster/kubeconfig ") || { log "no kwok found"; OK=0; return; }
  local argv=()
  mapfile -d '' -t argv < "/proc/${kwok_pid}/cmdline"
  argv=("${argv[@]/kwok.x-k8s.io\/node=fake/kwok.x-k8s.io/node=failing}")
  "${argv[@]}" > "${RUN_DIR}/kwok-failing.log" 2>&1 & FAILING_KWOK=$!
  for (( i = 0; i < fail; i++ )); do
    printf -- '---\napiVersion: v1\nkind: Node\nmetadata:\n  name: failing-node-%d\n  annotations: {kwok.x-k8s.io/node: failing, node.alpha.kubernetes.io/ttl: "0"}\n  labels: {type: kwok, kubernetes.io/hostname: failing-node-%d, kubernetes.io/os: linux, kubernetes.io/arch: amd64}\nstatus:\n  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}\n  capacity: {cpu: "32", memory: 256Gi, pods: "110"}\n' "${i}" "${i}"
  done | "$@" apply -f - >/dev/null
  # shellcheck disable=SC2016
  poll "${fail} failing nodes Ready" 120 bash -c '[[ $("$@" get nodes --no-headers | grep -c "^failing-node-.* Ready ") -ge '"${fail}"' ]]' _ "$@" || OK=0
  deployments "${n}" 10 > "${RUN_DIR}/d.yaml"
  "$@" create -f "${RUN_DIR}/d.yaml" >/dev/null
  poll "${n} Deployments available" "${TIMEOUT}" available "${n}" "$@" || OK=0
  log "$("$@" -n "${NS}" get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c '^failing-node-') pods on the ${fail} nodes about to fail"
  t0=$(now)
  kill "${FAILING_KWOK}"; wait "${FAILING_KWOK}" 2>/dev/null || true
  # shellcheck disable=SC2016
  poll "the failed nodes tainted unreachable" "${TIMEOUT}" bash -c '[[ $("$@" get nodes -o jsonpath="{range .items[*]}{.metadata.name} {.spec.taints[*].key}{\"\\n\"}{end}" | grep "^failing-node-" | grep -c node.kubernetes.io/unreachable) -ge '"${fail}"' ]]' _ "$@" || OK=0
  t1=$(now)
  # Evicted pods stay Terminating on a node that no kubelet answers for;
  # converged is every pod there evicted and every Deployment available again.
  evicted() { ! "$@" -n "${NS}" get pods -o jsonpath='{range .items[*]}{.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}' | grep -qE '^failing-node-[0-9]+ *$'; }
  poll "every pod on the failed nodes evicted" "${TIMEOUT}" evicted "$@" || OK=0
  poll "every Deployment available" "${TIMEOUT}" available "${n}" "$@" || OK=0
  t2=$(now)
  echo "tainted $(secs "${t0}" "${t1}")"
  echo "recovered $(secs "${t0}" "${t2}")"
  echo "total $(secs "${t0}" "${t2}")"
}

wl_services() { # KUBECTL...
  local n=$(( SIZE / 10 )) t0 t1 t2 i
  deployments "${n}" "" > "${RUN_DIR}/d.yaml"
  for (( i = 0; i < n; i++ )); do
    printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: d-%d, namespace: %s}\nspec:\n  selector: {app: d-%d}\n  ports: [{port: 80}]\n' "${i}" "${NS}" "${i}"
  done >> "${RUN_DIR}/d.yaml"
  t0=$(now)
  "$@" create -f "${RUN_DIR}/d.yaml" >/dev/null
  ready_endpoints() { # WANT KUBECTL...
    local want=$1; shift
    [[ $("$@" -n "${NS}" get endpointslices -o jsonpath='{range .items[*]}{range .endpoints[*]}{.conditions.ready}{"\n"}{end}{end}' | grep -c true) -eq "${want}" ]]
  }
  poll "${SIZE} ready endpoints" "${TIMEOUT}" ready_endpoints "${SIZE}" "$@" || OK=0
  t1=$(now)
  # Flap: every pod's Ready condition false, then true again (as a kubelet would).
  local pods p
  mapfile -t pods < <("$@" -n "${NS}" get pods -o name)
  for st in False True; do
    printf '%s\n' "${pods[@]}" | xargs -P 4 -I{} "$@" -n "${NS}" patch {} --subresource=status --type=strategic \
      -p '{"status":{"conditions":[{"type":"Ready","status":"'"${st}"'"}]}}' >/dev/null 2>&1 || true
  done
  poll "${SIZE} ready endpoints after the flap" "${TIMEOUT}" ready_endpoints "${SIZE}" "$@" || OK=0
  t2=$(now)
  echo "endpoints_ready $(secs "${t0}" "${t1}")"
  echo "after_flap $(secs "${t1}" "${t2}")"
  echo "total $(secs "${t0}" "${t2}")"
}

run_one() { # NAME BINARY WANT_PPROF
  local name=$1 binary=$2 want_pprof=$3 kcm_port
  kcm_port=$(free_port)
  RUN_DIR="${OUT}/runs/${name}"
  rm -rf "${RUN_DIR}"; mkdir -p "${RUN_DIR}"
  local nodes=$(( (SIZE + 99) / 100 + 1 ))
  [[ "${WORKLOAD}" != nodefail ]] || nodes=$(( (SIZE + 89) / 90 + 2 ))
  local audit="${RUN_DIR}/audit.log"
  log "[${name}] cluster with ${nodes} kwok nodes (${binary##*/})"
  KCM_LOCAL_DIR="${RUN_DIR}/cluster" KCM_LOCAL_KCM_BINARY="${binary}" KCM_LOCAL_NODES="${nodes}" \
    KCM_LOCAL_APISERVER_PORT="$(free_port)" KCM_LOCAL_KCM_PORT="${kcm_port}" KCM_LOCAL_KCM_FLAGS="${KCM_FLAGS}" \
    KCM_LOCAL_SCHEDULER_FLAGS="${SCHEDULER_FLAGS}" \
    KCM_LOCAL_APISERVER_FLAGS="--audit-policy-file=${POLICY} --audit-log-path=${audit} --audit-log-format=json --audit-log-mode=blocking --max-requests-inflight=1000 --max-mutating-requests-inflight=500" \
    "${ROOT}/hack/local-up.sh" >"${RUN_DIR}/local-up.log" 2>&1 &
  CLUSTER_PID=$!
  poll "the cluster" 300 grep -q '^Local cluster is up' "${RUN_DIR}/local-up.log" || { tail -20 "${RUN_DIR}/local-up.log" >&2; return 1; }
  local kcm_pid
  kcm_pid=$(sed -n 's/.*started kube-controller-manager (pid \([0-9]*\)).*/\1/p' "${RUN_DIR}/local-up.log" | tail -1)
  local K=("${BIN}/kubectl" --kubeconfig="${RUN_DIR}/cluster/kubeconfig")
  "${K[@]}" create namespace "${NS}" >/dev/null
  poll "the default ServiceAccount" 120 "${K[@]}" -n "${NS}" get serviceaccount default || return 1
  sleep 2
  OK=1
  local cpu0 t0 t1 cpu1 sampler token prof_pid=""
  token=$(awk '/token:/ {print $2; exit}' "${RUN_DIR}/cluster/kubeconfig")
  anon_sampler "${kcm_pid}" "${RUN_DIR}/anon-peak" & sampler=$!
  cpu0=$(cpu_secs "${kcm_pid}"); t0=$(now)
  if [[ "${want_pprof}" == 1 ]]; then
    curl -sk -H "Authorization: Bearer ${token}" -o "${RUN_DIR}/cpu.pprof" \
      "https://127.0.0.1:${kcm_port}/debug/pprof/profile?seconds=30" & prof_pid=$!
  fi
  FAILING_KWOK=""
  "wl_${WORKLOAD}" "${K[@]}" > "${RUN_DIR}/phases.txt"
  [[ -z "${FAILING_KWOK}" ]] || kill "${FAILING_KWOK}" 2>/dev/null || true
  t1=$(now); cpu1=$(cpu_secs "${kcm_pid}")
  [[ -z "${prof_pid}" ]] || wait "${prof_pid}" || true
  if [[ "${want_pprof}" == 1 ]]; then
    curl -sk -H "Authorization: Bearer ${token}" -o "${RUN_DIR}/heap.pprof" "https://127.0.0.1:${kcm_port}/debug/pprof/heap" || true
  fi
  {
    echo "binary=${binary##*/}"; echo "pods=${SIZE}"; echo "complete=${OK}"
    echo "window_start=${t0}"; echo "window_end=${t1}"
    awk '{print "secs_" $1 "=" $2}' "${RUN_DIR}/phases.txt"
    echo "cpu_window=$(awk -v a="${cpu0}" -v b="${cpu1}" 'BEGIN {printf "%.2f\n", b - a}')"
    echo "rss_peak_mib=$(hwm_mib "${kcm_pid}")"
    kill "${sampler}" 2>/dev/null; wait "${sampler}" 2>/dev/null || true
    echo "anon_peak_mib=$(cat "${RUN_DIR}/anon-peak")"
  } > "${RUN_DIR}/facts.txt"
  stop_cluster
  python3 "${ROOT}/hack/bench/analyze.py" "${audit}" "${RUN_DIR}/facts.txt" > "${OUT}/runs/${name}.json"
  [[ "${BENCH_KEEP_AUDIT:-0}" == 1 ]] || rm -f "${audit}"* "${audit%.log}"-*.log
  rm -rf "${RUN_DIR}/cluster"
  log "[${name}] $(tr '\n' ' ' < "${RUN_DIR}/phases.txt")"
}

# run NAME BINARY WANT_PPROF: run_one, unless BENCH_ONLY names the other binary.
run() {
  [[ -z "${BENCH_ONLY:-}" || "$1" == "${BENCH_ONLY}"-* ]] || return 0
  run_one "$@"
}

rm -rf "${OUT}/runs"; mkdir -p "${OUT}/runs"
for (( r = 1; r <= ROUNDS; r++ )); do
  want=0
  [[ "${PPROF}" == 1 && "${r}" == "${ROUNDS}" ]] && want=1
  if (( r % 2 )); then
    run "ours-${SIZE}-${r}" "${OURS}" "${want}"; run "upstream-${SIZE}-${r}" "${UPSTREAM}" 0
  else
    run "upstream-${SIZE}-${r}" "${UPSTREAM}" 0; run "ours-${SIZE}-${r}" "${OURS}" "${want}"
  fi
done
if [[ -n "${BENCH_ONLY:-}" ]]; then
  for f in "${OUT}"/runs/*.json; do echo "${f##*/}: $(cat "${f}")"; done
  prof="${OUT}/runs/ours-${SIZE}-${ROUNDS}/cpu.pprof"
  [[ ! -s "${prof}" ]] || go tool pprof -top -nodecount=25 "${prof}" 2>/dev/null | sed -n '1,35p'
  exit 0
fi
{
  echo "### ${WORKLOAD} bench: ${SIZE}, ${ROUNDS} rounds"
  echo
  echo "$(date -u +%Y-%m-%d), ours built from commit ${COMMIT}, $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM; flags \`${KCM_FLAGS% }\`; kwok with ${KCM_LOCAL_KWOK_PARALLELISM} workers."
  echo
  python3 "${ROOT}/hack/bench/report.py" --phases "${OUT}/runs" "${SIZE}"
  prof="${OUT}/runs/ours-${SIZE}-${ROUNDS}/cpu.pprof"
  if [[ "${PPROF}" == 1 && -s "${prof}" ]]; then
    echo; echo "CPU profile of ours, first 30 s of the workload (top 12 by own time):"; echo '```'
    go tool pprof -top -nodecount=12 "${prof}" 2>/dev/null | sed -n '1,20p'
    echo '```'
  fi
} > "${OUT}/report.md"
cat "${OUT}/report.md"
