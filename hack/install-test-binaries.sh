#!/usr/bin/env bash
# Builds the test bed's upstream binaries from pinned Go modules into _output/bin.
# Idempotent: a binary is rebuilt only when its tool module's go.mod/go.sum
# (or the Go version) change; builds are kept in KCM_TEST_BIN_CACHE
# (~/.cache/kcmclone/test-bin) for other checkouts on the same machine.
#
#   hack/install-test-binaries.sh [etcd] [kube-apiserver] [kube-scheduler] [kubectl]
#                                 [kube-controller-manager-upstream] [kwok] [e2e.test] [all]
# Without arguments it builds what `make test` needs: etcd and kube-apiserver.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="${ROOT}/_output/bin"
STAGES="${ROOT}/_output/kwok-stages"
mkdir -p "${BIN}"

log() { echo "+++ [install-test-binaries] $*" >&2; }

# Built binaries are also kept outside the checkout, by the hash of what
# they are built from, so another checkout on this machine (CI's fresh
# clone) takes them instead of building them again.
CACHE="${KCM_TEST_BIN_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/kcmclone/test-bin}"
GO_VERSION=$(go env GOVERSION)

# from_cache NAME HASH: NAME built earlier from the same sources, if kept.
from_cache() {
  local name=$1 want=$2 kept="${CACHE}/$1-$2"
  [[ -x "${kept}" ]] || return 1
  cp "${kept}" "${BIN}/${name}.tmp" && mv "${BIN}/${name}.tmp" "${BIN}/${name}" || return 1
  echo "${want}" > "${BIN}/.${name}.stamp"
  log "${name}: built earlier from the same sources (${CACHE})"
}

# to_cache NAME HASH: keeps the binary just built, in place of older ones.
to_cache() {
  local name=$1 want=$2
  mkdir -p "${CACHE}" && cp "${BIN}/${name}" "${CACHE}/${name}-${want}.tmp" &&
    mv "${CACHE}/${name}-${want}.tmp" "${CACHE}/${name}-${want}" || { log "could not keep ${name} in ${CACHE}"; return 0; }
  find "${CACHE}" -maxdepth 1 -name "${name}-*" ! -name "${name}-${want}" -delete 2>/dev/null || true
}

# build NAME TOOLDIR PACKAGE: go build PACKAGE inside the tool module, cached by
# a stamp holding the hash of that module's go.mod and go.sum and the Go version.
build() {
  local name=$1 dir="${ROOT}/hack/tools/$2" pkg=$3
  local stamp="${BIN}/.${name}.stamp" want
  want=$({ cat "${dir}/go.mod" "${dir}/go.sum"; echo "${GO_VERSION}"; } | sha256sum | cut -d' ' -f1)
  if [[ -x "${BIN}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    return 0
  fi
  from_cache "${name}" "${want}" && return 0
  log "building ${name} from ${pkg} (first time takes minutes; cached afterwards)"
  local start=${SECONDS}
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "${BIN}/${name}.tmp" "${pkg}")
  mv "${BIN}/${name}.tmp" "${BIN}/${name}"
  echo "${want}" > "${stamp}"
  to_cache "${name}" "${want}"
  log "built ${name} in $((SECONDS - start))s"
}

kwok_stages() {
  local src
  src=$(cd "${ROOT}/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  rm -rf "${STAGES}"; mkdir -p "${STAGES}"
  # The node and pod lifecycles kwok plays: nodes become Ready and heartbeat
  # through Leases; pods go away when deleted. How pods start (Ready, or
  # stuck pulling an image that does not exist) and how Job pods finish is
  # ours: hack/kwok/pod-*.yaml, which local-up.sh loads beside these.
  local f
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-delete.yaml; do
    [[ -f "${src}/kustomize/stage/${f}" ]] || { log "missing kwok stage ${f}"; exit 1; }
    install -m 0644 "${src}/kustomize/stage/${f}" "${STAGES}/$(basename "${f}")"
  done
}

# e2e.test: upstream v1.37.2's e2e suite (apps, apimachinery, auth, network,
# node, storage and dra specs), compiled from the test/conformance module with go test -c, cached by a stamp
# of that module's go.mod, go.sum and Go files. Used by hack/conformance.sh.
build_e2e_test() {
  local dir="${ROOT}/test/conformance" stamp="${BIN}/.e2e.test.stamp" want
  want=$({ cat "${dir}/go.mod" "${dir}/go.sum" "${dir}"/*.go; echo "${GO_VERSION}"; } | sha256sum | cut -d' ' -f1)
  if [[ -x "${BIN}/e2e.test" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
    return 0
  fi
  from_cache e2e.test "${want}" && return 0
  log "building e2e.test from ${dir} (first time takes 10-20 minutes; cached afterwards)"
  local start=${SECONDS}
  (cd "${dir}" && CGO_ENABLED=0 go test -c -vet=off -trimpath -ldflags='-s -w' -o "${BIN}/e2e.test.tmp" .)
  mv "${BIN}/e2e.test.tmp" "${BIN}/e2e.test"
  echo "${want}" > "${stamp}"
  to_cache e2e.test "${want}"
  log "built e2e.test in $((SECONDS - start))s"
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(etcd kube-apiserver)
for w in "${want[@]}"; do
  case "${w}" in
    etcd) build etcd etcd go.etcd.io/etcd/server/v3 ;;
    kube-apiserver) build kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-scheduler) build kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler ;;
    kubectl) build kubectl kube k8s.io/kubernetes/cmd/kubectl ;;
    kube-controller-manager-upstream) build kube-controller-manager-upstream kube k8s.io/kubernetes/cmd/kube-controller-manager ;;
    kwok) build kwok kwok sigs.k8s.io/kwok/cmd/kwok; kwok_stages ;;
    e2e.test) build_e2e_test ;;
    all) "$0" etcd kube-apiserver kube-scheduler kubectl kwok ;;
    *) log "unknown binary ${w}"; exit 2 ;;
  esac
done
