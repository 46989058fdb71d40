#!/usr/bin/env bash
# Garbage collector and namespace controller benchmark, ours against
# upstream's kube-controller-manager v1.37.2 on the same local bed:
#
#  1. delete: a namespace holding BENCH_GC_OBJECTS objects spread over ten
#     resource types is deleted; the figure is the time until it is gone.
#  2. memory: BENCH_GC_CONFIGMAPS ConfigMaps of BENCH_GC_CONFIGMAP_KIB KiB
#     each are created; the figure is the controller manager's peak RSS once
#     they are all there (the collector needs their owner references only).
#
#   hack/bench/gc.sh                                   # 5,000 objects; 20,000 x 10 KiB
#   BENCH_GC_OBJECTS=1000 BENCH_GC_CONFIGMAPS=2000 hack/bench/gc.sh   # quick
#
# Environment: BENCH_GC_OBJECTS (5000), BENCH_GC_CONFIGMAPS (20000),
# BENCH_GC_CONFIGMAP_KIB (10), BENCH_ONLY (both|ours|upstream),
# BENCH_TIMEOUT (900 s per wait), BENCH_DIR (_output/bench-gc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN="${ROOT}/_output/bin"
OBJECTS="${BENCH_GC_OBJECTS:-5000}"
CONFIGMAPS="${BENCH_GC_CONFIGMAPS:-20000}"
KIB="${BENCH_GC_CONFIGMAP_KIB:-10}"
ONLY="${BENCH_ONLY:-both}"
TIMEOUT="${BENCH_TIMEOUT:-900}"
OUT="${BENCH_DIR:-${ROOT}/_output/bench-gc}"
log() { echo "+++ [bench-gc $(date -u +%H:%M:%S)] $*" >&2; }
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

for v in "${OBJECTS}" "${CONFIGMAPS}" "${KIB}"; do
  [[ "${v}" =~ ^[1-9][0-9]*$ ]] || { log "counts must be positive numbers"; exit 2; }
done
case "${ONLY}" in ours|upstream|both) ;; *) log "BENCH_ONLY must be ours, upstream or both"; exit 2;; esac

"${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok kube-controller-manager-upstream
[[ -x "${BIN}/kube-controller-manager" ]] || (cd "${ROOT}" && make build)
mkdir -p "${OUT}"

CLUSTER_PID=""
stop_cluster() {
  local pid=${CLUSTER_PID}
  [[ -n "${pid}" ]] || return 0
  CLUSTER_PID=""
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
}
trap stop_cluster EXIT
trap 'stop_cluster; exit 130' INT TERM

rss_mib() { awk '/^VmRSS:/ {printf "%.1f\n", $2/1024}' "/proc/$1/status"; }
hwm_mib() { awk '/^VmHWM:/ {printf "%.1f\n", $2/1024}' "/proc/$1/status"; }

poll() { # what seconds command...
  local what=$1 secs=$2 deadline; shift 2
  deadline=$(( SECONDS + secs ))
  while (( SECONDS < deadline )); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "${CLUSTER_PID}" 2>/dev/null || { log "the cluster died waiting for ${what}"; return 1; }
    sleep 1
  done
  log "timed out after ${secs}s waiting for ${what}"; return 1
}

# objects NS N: N objects over ten namespaced types, in files of 500 for
# parallel creation.
objects() {
  local ns=$1 dir=$3 per=$(( $2 / 10 ))
  python3 - "${ns}" "${per}" "${dir}" <<'PY'
import sys, os
ns, per, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kinds = {
  "configmap":   lambda i: f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}, namespace: {ns}}}\ndata: {{k: v}}\n",
  "secret":      lambda i: f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s-{i}, namespace: {ns}}}\nstringData: {{k: v}}\n",
  "serviceaccount": lambda i: f"apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: sa-{i}, namespace: {ns}}}\n",
  "service":     lambda i: f"apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{i}, namespace: {ns}}}\nspec: {{clusterIP: None, ports: [{{port: 80}}]}}\n",
  "podtemplate": lambda i: f"apiVersion: v1\nkind: PodTemplate\nmetadata: {{name: pt-{i}, namespace: {ns}}}\ntemplate: {{spec: {{containers: [{{name: c, image: pause}}]}}}}\n",
  "limitrange":  lambda i: f"apiVersion: v1\nkind: LimitRange\nmetadata: {{name: lr-{i}, namespace: {ns}}}\nspec: {{limits: [{{type: Container}}]}}\n",
  "role":        lambda i: f"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: r-{i}, namespace: {ns}}}\nrules: []\n",
  "rolebinding": lambda i: f"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: rb-{i}, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: r-{i}}}\nsubjects: []\n",
  "pvc":         lambda i: f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: pvc-{i}, namespace: {ns}}}\nspec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n",
  "lease":       lambda i: f"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: l-{i}, namespace: {ns}}}\n",
}
for kind, mk in kinds.items():
    for start in range(0, per, 500):
        with open(os.path.join(out, f"{kind}-{start}.yaml"), "w") as f:
            f.write("---\n".join(mk(i) for i in range(start, min(per, start + 500))))
PY
}

configmaps() { # ns n kib dir
  python3 - "$@" <<'PY'
import sys, os
ns, n, kib, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
blob = "x" * (kib * 1024)
for start in range(0, n, 500):
    with open(os.path.join(out, f"cm-{start}.yaml"), "w") as f:
        f.write("---\n".join(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big-{i}, namespace: {ns}}}\ndata: {{blob: {blob}}}\n"
            for i in range(start, min(n, start + 500))))
PY
}

create_all() { # kubectl-args... -- dir
  local dir=${*: -1}
  set -- "${@:1:$#-1}"
  find "${dir}" -name '*.yaml' -print0 | xargs -0 -n 1 -P 4 "$@" create -f >/dev/null
}

run_one() {
  local name=$1 binary=$2 dir="${OUT}/$1"
  rm -rf "${dir}"; mkdir -p "${dir}/objects" "${dir}/configmaps"
  log "[${name}] starting the bed (${binary##*/})"
  KCM_LOCAL_DIR="${dir}/cluster" KCM_LOCAL_KCM_BINARY="${binary}" \
    KCM_LOCAL_APISERVER_PORT="$(free_port)" KCM_LOCAL_KCM_PORT="$(free_port)" \
    "${ROOT}/hack/local-up.sh" >"${dir}/local-up.log" 2>&1 &
  CLUSTER_PID=$!
  poll "the bed" 300 grep -q '^Local cluster is up' "${dir}/local-up.log" || return 1
  local pid K
  pid=$(sed -n 's/.*started kube-controller-manager (pid \([0-9]*\)).*/\1/p' "${dir}/local-up.log" | head -1)
  K=("${BIN}/kubectl" --kubeconfig="${dir}/cluster/kubeconfig")

  # 1. namespace deletion
  "${K[@]}" create namespace gc-bench >/dev/null
  objects gc-bench "${OBJECTS}" "${dir}/objects"
  log "[${name}] creating ${OBJECTS} objects over 10 types"
  create_all "${K[@]}" "${dir}/objects"
  sleep 5
  local t0 t1 secs_delete
  t0=$(now)
  "${K[@]}" delete namespace gc-bench --wait=false >/dev/null
  # shellcheck disable=SC2016
  if poll "namespace gc-bench to go" "${TIMEOUT}" bash -c '! "$@" get namespace gc-bench' _ "${K[@]}"; then
    t1=$(now); secs_delete=$(python3 -c "print(f'{${t1} - ${t0}:.1f}')")
  else
    secs_delete=timeout
  fi
  log "[${name}] namespace of ${OBJECTS} objects gone in ${secs_delete}s"

  # 2. memory with many large ConfigMaps
  local rss0 rss1 hwm
  rss0=$(rss_mib "${pid}")
  "${K[@]}" create namespace gc-mem >/dev/null
  configmaps gc-mem "${CONFIGMAPS}" "${KIB}" "${dir}/configmaps"
  log "[${name}] creating ${CONFIGMAPS} ConfigMaps of ${KIB} KiB (RSS before: ${rss0} MiB)"
  create_all "${K[@]}" "${dir}/configmaps"
  sleep 20 # let every watcher catch up
  rss1=$(rss_mib "${pid}"); hwm=$(hwm_mib "${pid}")
  log "[${name}] RSS ${rss1} MiB, peak ${hwm} MiB"
  stop_cluster
  cat > "${OUT}/${name}.txt" <<FACTS
${name} ${binary##*/}: namespace of ${OBJECTS} objects deleted in ${secs_delete}s; RSS before ConfigMaps ${rss0} MiB, after ${CONFIGMAPS} x ${KIB} KiB ConfigMaps ${rss1} MiB (peak ${hwm} MiB)
FACTS
}

[[ "${ONLY}" == upstream ]] || run_one ours "${BIN}/kube-controller-manager"
[[ "${ONLY}" == ours ]] || run_one upstream "${BIN}/kube-controller-manager-upstream"
cat "${OUT}"/*.txt
