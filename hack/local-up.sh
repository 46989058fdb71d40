#!/usr/bin/env bash
# A local cluster for trying the binary: etcd, kube-apiserver, kube-scheduler
# and kwok (3 fake nodes that run pods instantly) from pinned upstream
# modules, plus our kube-controller-manager. Ctrl-C stops everything.
#
# Environment: KCM_LOCAL_NODES (3), KCM_LOCAL_APISERVER_PORT (6443),
# KCM_LOCAL_KCM_FLAGS (extra flags for our binary), KCM_LOCAL_DIR (_output/local),
# KCM_LOCAL_KCM_BINARY (the controller manager to run; default our
# _output/bin/kube-controller-manager, e.g. _output/bin/kube-controller-manager-upstream),
# KCM_LOCAL_APISERVER_FLAGS (extra flags for kube-apiserver, e.g. auditing),
# KCM_LOCAL_KWOK_FLAGS (extra flags for kwok, e.g. --config=FILE),
# KCM_LOCAL_SCHEDULER_FLAGS (extra flags for kube-scheduler),
# KCM_LOCAL_KWOK_PARALLELISM (kwok's workers for pod and node stages; default
# kwok's 4, which serialize every node's pod updates through four requests at
# a time, where a real cluster has one kubelet per node),
# KCM_LOCAL_EXTRA_KCM_BINARY and KCM_LOCAL_EXTRA_KCM_FLAGS (a second controller
# manager beside the first, on its own port and Lease, e.g. upstream's running
# the controllers the first leaves out with --controllers),
# REPLICAS or KCM_LOCAL_REPLICAS (1; more runs that many replicas of the binary,
# the extra ones on free secure ports, with --leader-elect-sharded unless
# KCM_LOCAL_SHARDED=false, which gives upstream's active/passive replicas).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="${ROOT}/_output/bin"
DIR="${KCM_LOCAL_DIR:-${ROOT}/_output/local}"
NODES="${KCM_LOCAL_NODES:-3}"
API_PORT="${KCM_LOCAL_APISERVER_PORT:-6443}"
KCM_PORT="${KCM_LOCAL_KCM_PORT:-10257}"
KCM_BINARY="${KCM_LOCAL_KCM_BINARY:-${BIN}/kube-controller-manager}"
REPLICAS="${KCM_LOCAL_REPLICAS:-${REPLICAS:-1}}"
[[ "${REPLICAS}" =~ ^[1-9][0-9]*$ ]] || { echo "REPLICAS must be a positive number, got '${REPLICAS}'" >&2; exit 1; }
KWOK_PARALLELISM="${KCM_LOCAL_KWOK_PARALLELISM:-}"
[[ -z "${KWOK_PARALLELISM}" || "${KWOK_PARALLELISM}" =~ ^[1-9][0-9]*$ ]] || { echo "KCM_LOCAL_KWOK_PARALLELISM must be a positive number, got '${KWOK_PARALLELISM}'" >&2; exit 1; }
log() { echo "+++ [local-up] $*" >&2; }

"${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok
# Only the binary that runs is built: the bench brings its own, and a cold
# build would eat into its wait for the cluster.
if [[ -z "${KCM_LOCAL_KCM_BINARY:-}" && ! -x "${BIN}/kube-controller-manager" ]]; then
  (cd "${ROOT}" && make build)
fi
[[ -x "${KCM_BINARY}" ]] || { echo "KCM_LOCAL_KCM_BINARY: ${KCM_BINARY} is not an executable" >&2; exit 1; }

# free_ports N: N distinct free loopback ports, all bound at once before any
# is closed (two picks in a row can otherwise get the same port).
free_ports() {
  python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss: s.close()' "$1"
}

rm -rf "${DIR}"
mkdir -p "${DIR}/logs" "${DIR}/certs"
PIDS=()
cleanup() {
  trap - EXIT INT TERM
  log "stopping"
  local pid
  for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
    pid=${PIDS[i]}
    kill -TERM "${pid}" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 100); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
  done
  log "stopped; logs kept in ${DIR}/logs"
}
trap cleanup EXIT
trap "cleanup; exit 0" INT TERM

start() { # name, binary, args...
  local name=$1; shift
  "$@" >"${DIR}/logs/${name}.log" 2>&1 &
  PIDS+=($!)
  log "started ${name} (pid $!), log ${DIR}/logs/${name}.log"
}

wait_for() { # what, seconds, command...
  local what=$1 secs=$2; shift 2
  for _ in $(seq 1 $((secs * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "timed out waiting for ${what}"; exit 1
}

# etcd, on two distinct ports; picked again if something took one before
# etcd bound it.
for attempt in 1 2 3; do
  read -r ETCD_PORT ETCD_PEER < <(free_ports 2)
  rm -rf "${DIR}/etcd"
  start etcd "${BIN}/etcd" --data-dir="${DIR}/etcd" \
    --listen-client-urls="http://127.0.0.1:${ETCD_PORT}" --advertise-client-urls="http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls="http://127.0.0.1:${ETCD_PEER}" --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER}" \
    --initial-cluster="default=http://127.0.0.1:${ETCD_PEER}" --log-level=warn
  for _ in $(seq 1 150); do
    curl -sf "http://127.0.0.1:${ETCD_PORT}/health" >/dev/null 2>&1 && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.2
  done
  if curl -sf "http://127.0.0.1:${ETCD_PORT}/health" >/dev/null 2>&1; then break; fi
  if [[ ${attempt} -lt 3 ]] && ! kill -0 "${PIDS[-1]}" 2>/dev/null && grep -q "address already in use" "${DIR}/logs/etcd.log"; then
    log "etcd lost its port to another process; picking new ports"
    unset 'PIDS[-1]'; PIDS=("${PIDS[@]}")
    continue
  fi
  log "etcd did not become healthy; see ${DIR}/logs/etcd.log"; exit 1
done

# kube-apiserver: static admin token, RBAC, service account signing key.
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "${TOKEN},admin,admin,\"system:masters\"" > "${DIR}/certs/tokens.csv"
openssl genrsa -out "${DIR}/certs/sa.key" 2048 2>/dev/null
# shellcheck disable=SC2086
start kube-apiserver "${BIN}/kube-apiserver" --etcd-servers="http://127.0.0.1:${ETCD_PORT}" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="${API_PORT}" \
  --cert-dir="${DIR}/certs" --token-auth-file="${DIR}/certs/tokens.csv" --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="${DIR}/certs/sa.key" --service-account-signing-key-file="${DIR}/certs/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --endpoint-reconciler-type=none ${KCM_LOCAL_APISERVER_FLAGS:-}

KUBECONFIG_FILE="${DIR}/kubeconfig"
cat > "${KUBECONFIG_FILE}" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:${API_PORT}
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: ${TOKEN}
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
KCFG
KUBECTL=("${BIN}/kubectl" --kubeconfig="${KUBECONFIG_FILE}")
wait_for kube-apiserver 90 "${KUBECTL[@]}" get --raw /readyz

read -r SCHED_PORT EXTRA_KCM_PORT < <(free_ports 2)
# shellcheck disable=SC2086
start kube-scheduler "${BIN}/kube-scheduler" --kubeconfig="${KUBECONFIG_FILE}" \
  --authentication-kubeconfig="${KUBECONFIG_FILE}" --authorization-kubeconfig="${KUBECONFIG_FILE}" \
  --bind-address=127.0.0.1 --secure-port="${SCHED_PORT}" --leader-elect=false ${KCM_LOCAL_SCHEDULER_FLAGS:-}

# kwok's settings (node Leases) and stages: upstream's for nodes and pod
# deletion, ours (hack/kwok) for how pods start and how Job pods finish.
STAGES=()
for f in "${ROOT}"/_output/kwok-stages/*.yaml "${ROOT}"/hack/kwok/*.yaml; do
  if [[ "${f##*/}" == kwok-config.yaml && -n "${KWOK_PARALLELISM}" ]]; then
    mkdir -p "${DIR}"
    sed -E "s/^(  (pod|node)PlayStageParallelism:).*/\1 ${KWOK_PARALLELISM}/" "${f}" > "${DIR}/kwok-config.yaml"
    # Both keys must have been rewritten, or the bed would not be what it says.
    [[ $(grep -cE "^  (pod|node)PlayStageParallelism: ${KWOK_PARALLELISM}\$" "${DIR}/kwok-config.yaml") == 2 ]] ||
      { echo "could not set kwok's parallelism in ${f}" >&2; exit 1; }
    f="${DIR}/kwok-config.yaml"
  fi
  STAGES+=(--config="${f}")
done
# shellcheck disable=SC2086
start kwok "${BIN}/kwok" --kubeconfig="${KUBECONFIG_FILE}" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr=10.244.0.0/16 --node-ip=127.0.0.1 "${STAGES[@]}" ${KCM_LOCAL_KWOK_FLAGS:-}

for i in $(seq 0 $((NODES - 1))); do
  cat <<NODE | "${KUBECTL[@]}" apply -f - >/dev/null
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-${i}
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0", volumes.kubernetes.io/controller-managed-attach-detach: "true"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-${i}, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
spec: {}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
NODE
done

# The apiserver's self-signed apiserver.crt holds its serving certificate and
# then the CA that signed it. Publish only the CA: the ClusterTrustBundle
# publisher (upstream's too) refuses a bundle whose first entry is no CA.
awk '/BEGIN CERTIFICATE/{block=""} {block=block $0 "\n"} /END CERTIFICATE/{last=block} END{printf "%s", last}' \
  "${DIR}/certs/apiserver.crt" > "${DIR}/certs/ca.crt"

KCM_COMMON=(--kubeconfig="${KUBECONFIG_FILE}"
  --authentication-kubeconfig="${KUBECONFIG_FILE}" --authorization-kubeconfig="${KUBECONFIG_FILE}"
  --bind-address=127.0.0.1
  --service-account-private-key-file="${DIR}/certs/sa.key" --root-ca-file="${DIR}/certs/ca.crt"
  --use-service-account-credentials=true --v=2)
if (( REPLICAS > 1 )) && [[ "${KCM_LOCAL_SHARDED:-true}" == true ]]; then
  KCM_COMMON+=(--leader-elect-sharded)
fi
# shellcheck disable=SC2086
start kube-controller-manager "${KCM_BINARY}" "${KCM_COMMON[@]}" \
  --secure-port="${KCM_PORT}" --cert-dir="${DIR}/kcm-certs" ${KCM_LOCAL_KCM_FLAGS:-}
KCM_PORTS=("${KCM_PORT}")
KCM_PIDS=("${PIDS[-1]}")
for ((i = 2; i <= REPLICAS; i++)); do
  port=$(free_ports 1)
  KCM_PORTS+=("${port}")
  # shellcheck disable=SC2086
  start "kube-controller-manager-${i}" "${KCM_BINARY}" "${KCM_COMMON[@]}" \
    --secure-port="${port}" --cert-dir="${DIR}/kcm-certs-${i}" ${KCM_LOCAL_KCM_FLAGS:-}
  KCM_PIDS+=("${PIDS[-1]}")
done
if [[ -n "${KCM_LOCAL_EXTRA_KCM_BINARY:-}" ]]; then
  # shellcheck disable=SC2086
  start kube-controller-manager-extra "${KCM_LOCAL_EXTRA_KCM_BINARY}" "${KCM_COMMON[@]}" \
    --secure-port="${EXTRA_KCM_PORT}" --cert-dir="${DIR}/kcm-extra-certs" \
    --leader-elect-resource-name=kube-controller-manager-extra ${KCM_LOCAL_EXTRA_KCM_FLAGS:-}
fi

wait_for "${NODES} Ready nodes" 120 bash -c "[[ \$('${BIN}/kubectl' --kubeconfig='${KUBECONFIG_FILE}' get nodes --no-headers 2>/dev/null | grep -c ' Ready ') -ge ${NODES} ]]"
wait_for "the controller manager's lease" 60 bash -c "'${BIN}/kubectl' --kubeconfig='${KUBECONFIG_FILE}' -n kube-system get lease kube-controller-manager -o jsonpath='{.spec.holderIdentity}' | grep -q ."

cat <<MSG

Local cluster is up.
  export KUBECONFIG=${KUBECONFIG_FILE}
  export PATH=${BIN}:\$PATH
  kubectl get nodes
  kubectl create deployment web --image=nginx --replicas=3
Controller manager: https://127.0.0.1:${KCM_PORT}/healthz  logs: ${DIR}/logs/
$( ((REPLICAS > 1)) && echo "Replicas on ports ${KCM_PORTS[*]}; who runs what: kubectl -n kube-system get leases" || true )
Press Ctrl-C to stop everything.
MSG
echo "${KUBECONFIG_FILE}"

# Stay up until interrupted or a component dies.
while true; do
  for pid in "${PIDS[@]}"; do
    # With replicas, one dying is what they are for: the others carry on.
    if (( REPLICAS > 1 )) && [[ " ${KCM_PIDS[*]} " == *" ${pid} "* ]]; then continue; fi
    if ! kill -0 "${pid}" 2>/dev/null; then
      log "a component (pid ${pid}) exited; see ${DIR}/logs"; exit 1
    fi
  done
  sleep 2
done
