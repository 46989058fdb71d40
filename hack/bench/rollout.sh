#!/usr/bin/env bash
# Rollout bench: our kube-controller-manager against upstream's v1.37.2, same
# flags, same build flags (CGO_ENABLED=0 -trimpath -ldflags='-s -w'), same
# bed (hack/local-up.sh: etcd, kube-apiserver with a Metadata audit log,
# kube-scheduler, kwok nodes), rounds alternating ours/upstream on a fresh
# cluster each. The workload, at each size P (pods; P/10 Deployments x 10):
#   1. create the Deployments, wait until every one is available;
#   2. change every pod template at once, wait until every rollout is done
#      (observedGeneration current, 10 updated, 10 available, 10 total);
#   3. delete the namespace, wait until it is gone.
# Figures per run: seconds per phase and in all (converge), the controller
# manager's CPU seconds over the workload, its peak RSS (VmHWM), and from
# the audit log its API requests, writes by resource/subresource and verb,
# 409 conflicts and other refusals. The markdown report (medians, min-max
# spread, ratios ours/upstream; date, commit, machine) goes to stdout and
# ${BENCH_DIR}/rollout.md.
#
#   make bench                                  # BENCH_SIZES=1000, 3 rounds
#   BENCH_SIZES="1000 5000" BENCH_ROUNDS=3 hack/bench/rollout.sh
#
# Environment:
#   BENCH_SIZES (1000)    pod counts, each a multiple of 10
#   BENCH_ROUNDS (3)      rounds per size; each round runs both binaries
#   BENCH_QPS (500) BENCH_BURST (1000)  --kube-api-qps/--kube-api-burst for both
#   BENCH_KCM_FLAGS       further flags for both
#   BENCH_KWOK_PARALLELISM (16)  kwok's workers for pod and node stages (see
#                         local-up.sh; kwok's own default, 4, was the pace of
#                         both binaries' roll-outs; the tables before
#                         2026-12-07 evening ran with 4)
#   BENCH_TIMEOUT (900)   seconds allowed per wait
#   BENCH_PPROF (1)       ours, last round of the largest size: a CPU profile of
#                         the update phase and a heap profile before teardown
#   BENCH_FILLER (0)      memory workload: this many ConfigMaps and as many
#                         Secrets of 10 KiB (namespace filler) created before
#                         the rollout, outside the timed window; peak RSS then
#                         shows what the caches hold
#   BENCH_POD (pause)     the pod template: pause (one container, no more) or
#                         realistic (app container and sidecar with commands,
#                         env, probes, mounts, security contexts)
#   BENCH_DIR (_output/bench)
#   BENCH_ONLY            ours or upstream: run one binary only (for quick
#                         iterations; no ratios, not for the README)
#   BENCH_KEEP_AUDIT (0)  1 keeps each run's audit log (for hack/bench/timeline.py)
#   BENCH_KEEP_LOGS (0)   1 keeps each run's component logs in runs/NAME/logs
#                         (with BENCH_KCM_FLAGS=--v=3, every event recorded)
#   BENCH_AUDIT_STEPS (0) 1 logs ReplicaSet spec updates with their bodies
#                         (with BENCH_KEEP_AUDIT=1, for hack/bench/steps.py)
#   BENCH_NO_ROLLOUT (0)  1 skips the template change: create, then delete
#                         (a mass delete's cost alone, in less time)
#   BENCH_OURS_BINARY     what runs as ours (default the bench build); for
#                         experiments such as a wrapper that sets GOGC
# 110 pods fit on a kwok node; nodes = ceil(P/100)+1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN="${ROOT}/_output/bin"
SIZES="${BENCH_SIZES:-1000}"
ROUNDS="${BENCH_ROUNDS:-3}"
QPS="${BENCH_QPS:-500}"
BURST="${BENCH_BURST:-1000}"
TIMEOUT="${BENCH_TIMEOUT:-900}"
PPROF="${BENCH_PPROF:-1}"
FILLER="${BENCH_FILLER:-0}"
POD_KIND="${BENCH_POD:-pause}"
OUT="${BENCH_DIR:-${ROOT}/_output/bench}"
KCM_FLAGS="--kube-api-qps=${QPS} --kube-api-burst=${BURST} ${BENCH_KCM_FLAGS:-}"
# The scheduler gets the same client limits, so that binding pods (2,000
# per 1,000-pod rollout) is not what both controller managers wait for.
SCHEDULER_FLAGS="--kube-api-qps=${QPS} --kube-api-burst=${BURST}"
# kwok stands in for one kubelet per node; with its default four workers it
# readies and removes every node's pods four requests at a time, and both
# controller managers wait on that instead of on their own work.
export KCM_LOCAL_KWOK_PARALLELISM="${BENCH_KWOK_PARALLELISM:-16}"
R=10
NS=bench
log() { echo "+++ [bench $(date -u +%H:%M:%S)] $*" >&2; }
source "${ROOT}/hack/bench/lib.sh"
for p in ${SIZES}; do
  [[ "${p}" =~ ^[1-9][0-9]*0$ ]] || { log "BENCH_SIZES: ${p} is not a multiple of 10"; exit 2; }
done
[[ "${ROUNDS}" =~ ^[1-9][0-9]*$ ]] || { log "BENCH_ROUNDS must be a positive number"; exit 2; }
[[ "${POD_KIND}" == pause || "${POD_KIND}" == realistic ]] || { log "BENCH_POD must be pause or realistic"; exit 2; }

"${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok kube-controller-manager-upstream
# Ours built as install-test-binaries.sh builds upstream's.
# The commit the binary is built from, for the report.
COMMIT="$(git -C "${ROOT}" rev-parse --short HEAD)$(git -C "${ROOT}" diff --quiet HEAD -- . ':!README.md' || echo '-dirty')"
(cd "${ROOT}" && make -s bench-build)
OURS="${BENCH_OURS_BINARY:-${BIN}/kube-controller-manager-bench}"
UPSTREAM="${BIN}/kube-controller-manager-upstream"
mkdir -p "${OUT}"

POLICY="${OUT}/audit-policy.yaml"
# BENCH_AUDIT_STEPS=1: ReplicaSet creates and spec updates, and ReplicaSet and
# Deployment status writes, are logged with their request body, so
# hack/bench/steps.py can show each rollout's steps and hack/bench/statuses.py
# what each status write changed.
STEPS_RULE=""
[[ "${BENCH_AUDIT_STEPS:-0}" != 1 ]] || STEPS_RULE='- level: Request
  verbs: ["create", "update"]
  resources: [{group: apps, resources: [replicasets, replicasets/status, deployments/status]}]'
cat > "${POLICY}" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted"]
rules:
${STEPS_RULE}
- level: Metadata
YAML


# The pod template's spec (indented for manifest): one pause container, or,
# with BENCH_POD=realistic, what production Deployments tend to carry (an
# app container with a command, twenty env vars, probes, mounts and a
# security context, and a log-shipping sidecar), so that per-pod cache
# costs show at their real size.
if [[ "${POD_KIND}" == realistic ]]; then
  env_vars=""
  for (( e = 0; e < 20; e++ )); do
    env_vars+="
          - {name: APP_SETTING_${e}, value: \"value-of-setting-number-${e}-for-this-application\"}"
  done
  POD_SPEC="      containers:
      - name: app
        image: registry.example.com/team/app:v1.42.7
        imagePullPolicy: IfNotPresent
        command: [/usr/local/bin/app]
        args: [--config=/etc/app/config.yaml, --listen=:8080, --metrics=:9090, --log-format=json]
        ports: [{name: http, containerPort: 8080}, {name: metrics, containerPort: 9090}]
        env:${env_vars}
        envFrom: [{configMapRef: {name: app-defaults, optional: true}}]
        resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 256Mi}}
        readinessProbe: {httpGet: {path: /readyz, port: http}, periodSeconds: 5, failureThreshold: 3}
        livenessProbe: {httpGet: {path: /healthz, port: http}, initialDelaySeconds: 10, periodSeconds: 10}
        securityContext: {runAsNonRoot: true, runAsUser: 10001, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: config, mountPath: /etc/app}, {name: cache, mountPath: /var/cache/app}, {name: logs, mountPath: /var/log/app}]
      - name: log-shipper
        image: registry.example.com/platform/log-shipper:v3.1.0
        args: [--input=/var/log/app/*.log, --output=http://logs.platform.svc:9880, --buffer=/var/cache/shipper]
        resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 64Mi}}
        securityContext: {runAsNonRoot: true, runAsUser: 10002, allowPrivilegeEscalation: false}
        volumeMounts: [{name: logs, mountPath: /var/log/app, readOnly: true}]
      volumes:
      - {name: config, configMap: {name: app-config, optional: true}}
      - {name: cache, emptyDir: {}}
      - {name: logs, emptyDir: {sizeLimit: 1Gi}}"
else
  POD_SPEC="      containers: [{name: c, image: registry.k8s.io/pause:3.10}]"
fi

manifest() { # N
  local i
  for (( i = 0; i < $1; i++ )); do
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
${POD_SPEC}
YAML
  done
}

# done_count KUBECTL... -> Deployments whose rollout is complete at R replicas.
rolled_out() { # N KUBECTL...
  local n=$1; shift
  local got
  got=$("$@" -n "${NS}" get deployments -o jsonpath='{range .items[*]}{.metadata.generation}={.status.observedGeneration} {.status.replicas}/{.status.updatedReplicas}/{.status.availableReplicas}{"\n"}{end}' \
    | awk -v r="${R}" '{split($1,g,"="); if (g[1]==g[2] && $2==r"/"r"/"r) c++} END {print c+0}')
  [[ "${got}" -ge "${n}" ]]
}
ns_gone() { ! "$@" get namespace "${NS}" >/dev/null 2>&1 && "$@" get --raw /readyz >/dev/null; }
filler() { # N DIR: N ConfigMaps and N Secrets of 10 KiB, 500 per file
  python3 - "$@" <<'PY'
import base64, os, sys
n, out = int(sys.argv[1]), sys.argv[2]
blob = "x" * 10240
b64 = base64.b64encode(blob.encode()).decode()
for kind in ("ConfigMap", "Secret"):
    for start in range(0, n, 500):
        with open(os.path.join(out, f"{kind}-{start}.yaml"), "w") as f:
            f.write("---\n".join(
                f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: filler-{i}, namespace: filler}}\n"
                + (f"data: {{blob: {blob}}}\n" if kind == "ConfigMap" else f"data: {{blob: {b64}}}\n")
                for i in range(start, min(n, start + 500))))
PY
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f\n", b - a}'; }

# run_one NAME BINARY PODS WANT_PPROF: a fresh cluster, the workload, NAME.json.
run_one() {
  local name=$1 binary=$2 pods=$3 want_pprof=$4
  local n=$(( pods / R )) nodes=$(( (pods + 99) / 100 + 1 ))
  local dir="${OUT}/runs/${name}"
  rm -rf "${dir}"; mkdir -p "${dir}"
  local audit="${dir}/audit.log" kcm_port
  kcm_port=$(free_port)
  log "[${name}] cluster with ${nodes} kwok nodes, ${n} Deployments x ${R} (${binary##*/})"
  KCM_LOCAL_DIR="${dir}/cluster" KCM_LOCAL_KCM_BINARY="${binary}" KCM_LOCAL_NODES="${nodes}" \
    KCM_LOCAL_APISERVER_PORT="$(free_port)" KCM_LOCAL_KCM_PORT="${kcm_port}" \
    KCM_LOCAL_KCM_FLAGS="${KCM_FLAGS}" \
    KCM_LOCAL_SCHEDULER_FLAGS="${SCHEDULER_FLAGS}" \
    KCM_LOCAL_APISERVER_FLAGS="--audit-policy-file=${POLICY} --audit-log-path=${audit} --audit-log-format=json --audit-log-mode=blocking --max-requests-inflight=1000 --max-mutating-requests-inflight=500" \
    "${ROOT}/hack/local-up.sh" >"${dir}/local-up.log" 2>&1 &
  CLUSTER_PID=$!
  if ! poll "the cluster" 300 grep -q '^Local cluster is up' "${dir}/local-up.log"; then
    tail -20 "${dir}/local-up.log" >&2 || true; return 1
  fi
  local kcm_pid
  kcm_pid=$(sed -n 's/.*started kube-controller-manager (pid \([0-9]*\)).*/\1/p' "${dir}/local-up.log" | tail -1)
  [[ -n "${kcm_pid}" ]] && kill -0 "${kcm_pid}" || { log "[${name}] no controller manager pid"; return 1; }
  local kubeconfig="${dir}/cluster/kubeconfig"
  local K=("${BIN}/kubectl" --kubeconfig="${kubeconfig}")
  local token
  token=$(awk '/token:/ {print $2; exit}' "${kubeconfig}")

  if (( FILLER > 0 )); then
    mkdir -p "${dir}/filler"; filler "${FILLER}" "${dir}/filler"
    "${K[@]}" create namespace filler >/dev/null
    log "[${name}] creating ${FILLER} ConfigMaps and ${FILLER} Secrets of 10 KiB"
    find "${dir}/filler" -name '*.yaml' -print0 | xargs -0 -n 1 -P 4 "${K[@]}" create -f >/dev/null
    rm -rf "${dir}/filler"
  fi
  "${K[@]}" create namespace "${NS}" >/dev/null
  poll "the default ServiceAccount" 120 "${K[@]}" -n "${NS}" get serviceaccount default || return 1
  manifest "${n}" > "${dir}/deployments.yaml"
  sleep 2

  local cpu0 t0 t1 t2 t3 t4 s_create s_update s_delete s_total ok=1 sampler
  anon_sampler "${kcm_pid}" "${dir}/anon-peak" & sampler=$!
  cpu0=$(cpu_secs "${kcm_pid}"); t0=$(now)
  "${K[@]}" create -f "${dir}/deployments.yaml" >/dev/null
  poll "${n} Deployments available" "${TIMEOUT}" rolled_out "${n}" "${K[@]}" || ok=0
  t1=$(now); s_create=$(secs "${t0}" "${t1}")
  log "[${name}] created and available: ${s_create}s; updating every template"
  local prof_pid=""
  if [[ "${want_pprof}" == 1 ]]; then
    curl -sk -H "Authorization: Bearer ${token}" -o "${dir}/cpu.pprof" \
      "https://127.0.0.1:${kcm_port}/debug/pprof/profile?seconds=30" & prof_pid=$!
  fi
  t2=$(now)
  if [[ "${BENCH_NO_ROLLOUT:-0}" != 1 ]]; then
    # A new pod template for every Deployment (one PATCH each, by kubectl).
    "${K[@]}" -n "${NS}" set env deployments --all BENCH_ROUND=2 >/dev/null
    poll "${n} rollouts" "${TIMEOUT}" rolled_out "${n}" "${K[@]}" || ok=0
  fi
  t3=$(now); s_update=$(secs "${t2}" "${t3}")
  [[ -z "${prof_pid}" ]] || wait "${prof_pid}" || true
  if [[ "${want_pprof}" == 1 ]]; then
    curl -sk -H "Authorization: Bearer ${token}" -o "${dir}/heap.pprof" "https://127.0.0.1:${kcm_port}/debug/pprof/heap" || true
  fi
  log "[${name}] rolled out: ${s_update}s; deleting the namespace"
  "${K[@]}" delete namespace "${NS}" --wait=false >/dev/null
  poll "namespace ${NS} to go" "${TIMEOUT}" ns_gone "${K[@]}" || ok=0
  t4=$(now); s_delete=$(secs "${t3}" "${t4}")
  s_total=$(awk -v a="${s_create}" -v b="${s_update}" -v c="${s_delete}" 'BEGIN {printf "%.1f\n", a + b + c}')
  local cpu1 hwm
  cpu1=$(cpu_secs "${kcm_pid}"); hwm=$(hwm_mib "${kcm_pid}")
  kill "${sampler}" 2>/dev/null; wait "${sampler}" 2>/dev/null || true
  sleep 1
  stop_cluster
  log "[${name}] namespace gone: ${s_delete}s; cpu $(awk -v a="${cpu0}" -v b="${cpu1}" 'BEGIN {print b - a}')s, peak RSS ${hwm} MiB"
  cat > "${dir}/facts.txt" <<FACTS
binary=${binary##*/}
pods=${pods}
deployments=${n}
nodes=${nodes}
complete=${ok}
window_start=${t0}
window_end=${t4}
secs_create=${s_create}
secs_update=${s_update}
secs_delete=${s_delete}
secs_total=${s_total}
cpu_window=$(awk -v a="${cpu0}" -v b="${cpu1}" 'BEGIN {printf "%.2f\n", b - a}')
rss_peak_mib=${hwm}
anon_peak_mib=$(cat "${dir}/anon-peak")
FACTS
  python3 "${ROOT}/hack/bench/analyze.py" "${audit}" "${dir}/facts.txt" > "${OUT}/runs/${name}.json"
  # The audit logs are large; keep the summaries and profiles only.
  [[ "${BENCH_KEEP_AUDIT:-0}" == 1 ]] || rm -f "${audit}"* "${audit%.log}"-*.log
  [[ "${BENCH_KEEP_LOGS:-0}" != 1 ]] || mv "${dir}/cluster/logs" "${dir}/logs"
  rm -rf "${dir}/cluster"
}

# run NAME BINARY PODS WANT_PPROF: run_one, unless BENCH_ONLY names the other binary.
run() {
  [[ -z "${BENCH_ONLY:-}" || "$1" == "${BENCH_ONLY}"-* ]] || return 0
  run_one "$@"
}

START=${SECONDS}
rm -rf "${OUT}/runs"; mkdir -p "${OUT}/runs"
LARGEST=$(tr ' ' '\n' <<<"${SIZES}" | sort -n | tail -1)
for p in ${SIZES}; do
  for (( r = 1; r <= ROUNDS; r++ )); do
    want=0
    [[ "${PPROF}" == 1 && "${p}" == "${LARGEST}" && "${r}" == "${ROUNDS}" ]] && want=1
    # Alternate which binary goes first, so drift on a shared machine
    # does not favour one.
    if (( r % 2 )); then
      run "ours-${p}-${r}" "${OURS}" "${p}" "${want}"
      run "upstream-${p}-${r}" "${UPSTREAM}" "${p}" 0
    else
      run "upstream-${p}-${r}" "${UPSTREAM}" "${p}" 0
      run "ours-${p}-${r}" "${OURS}" "${p}" "${want}"
    fi
  done
done

if [[ -n "${BENCH_ONLY:-}" ]]; then
  for f in "${OUT}"/runs/*.json; do echo "${f##*/}: $(cat "${f}")"; done
  exit 0
fi
{
  echo "### Rollout bench: ${SIZES// /, } pods (Deployments x 10 replicas), ${ROUNDS} rounds$( (( FILLER > 0 )) && echo ", with ${FILLER} ConfigMaps and ${FILLER} Secrets of 10 KiB")$( [[ "${POD_KIND}" == realistic ]] && echo ", realistic pod template (BENCH_POD=realistic)")"
  echo
  echo "$(date -u +%Y-%m-%d), ours built from commit ${COMMIT},"
  echo "$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM."
  echo "Both binaries: \`CGO_ENABLED=0 go build -trimpath -ldflags='-s -w'\`, flags \`${KCM_FLAGS% }\` plus local-up.sh's"
  echo "(\`--use-service-account-credentials --v=2\`, every default controller); kwok with ${KCM_LOCAL_KWOK_PARALLELISM} workers. Medians of ${ROUNDS} rounds, [min-max];"
  echo "requests are those of the controller manager between the first create and the namespace being gone (audit log)."
  echo
  python3 "${ROOT}/hack/bench/report.py" "${OUT}/runs" ${SIZES}
} > "${OUT}/rollout.md"
cat "${OUT}/rollout.md"
if [[ "${PPROF}" == 1 && -s "${OUT}/runs/ours-${LARGEST}-${ROUNDS}/cpu.pprof" ]]; then
  {
    echo; echo "CPU profile of ours, update phase, ${LARGEST} pods (top 15 by own time):"; echo '```'
    go tool pprof -top -nodecount=15 "${OUT}/runs/ours-${LARGEST}-${ROUNDS}/cpu.pprof" 2>/dev/null | sed -n '1,25p'
    echo '```'; echo "Heap (inuse_space) of ours before teardown (top 10):"; echo '```'
    go tool pprof -top -sample_index=inuse_space -nodecount=10 "${OUT}/runs/ours-${LARGEST}-${ROUNDS}/heap.pprof" 2>/dev/null | sed -n '1,18p'
    echo '```'; echo "Allocations (alloc_space) of ours over its life (top 10):"; echo '```'
    go tool pprof -top -sample_index=alloc_space -nodecount=10 "${OUT}/runs/ours-${LARGEST}-${ROUNDS}/heap.pprof" 2>/dev/null | sed -n '1,18p'
    echo '```'
  } > "${OUT}/profiles.md"
  cat "${OUT}/profiles.md"
fi
log "report in ${OUT}/rollout.md ($((SECONDS - START))s)"
