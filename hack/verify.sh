#!/usr/bin/env bash
# Static checks: gofmt, go vet and golangci-lint (v2, built from the Go
# module proxy into _output/bin) over the root and staging modules.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}
LINT="${ROOT}/_output/bin/golangci-lint"
STAGING=staging/src/github.com/kcmclone/controller-manager

echo "+++ gofmt"
bad=$(gofmt -l $(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))
if [[ -n "${bad}" ]]; then
  echo "gofmt needed on:"; echo "${bad}"; exit 1
fi

echo "+++ go vet"
go vet ./...
(cd "${STAGING}" && go vet ./...)

# As hack/install-test-binaries.sh: the build is also kept outside the
# checkout, for another checkout on this machine (CI's fresh clone).
KEPT="${KCM_TEST_BIN_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/kcmclone/test-bin}/golangci-lint-${VERSION}-$(go env GOVERSION)"
if [[ ! -x "${LINT}" || "$(cat "${LINT}.version" 2>/dev/null)" != "${VERSION}" ]]; then
  mkdir -p "${ROOT}/_output/bin"
  if [[ -x "${KEPT}" ]]; then
    cp "${KEPT}" "${LINT}"
  else
    echo "+++ installing golangci-lint ${VERSION} (first time takes a few minutes)"
    GOBIN="${ROOT}/_output/bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${VERSION}"
    { mkdir -p "$(dirname "${KEPT}")" && cp "${LINT}" "${KEPT}.tmp" && mv "${KEPT}.tmp" "${KEPT}"; } || true
  fi
  echo "${VERSION}" > "${LINT}.version"
fi
echo "+++ golangci-lint"
"${LINT}" run ./...
(cd "${STAGING}" && "${LINT}" run --config "${ROOT}/.golangci.yml" ./...)
echo "verify: ok"
