#!/usr/bin/env bash
# The conformance runner's negative control (make conformance-negative): a
# real run of two ResourceQuota specs with the resourcequota-controller off
# in both binaries must report both specs as regressions and exit non-zero;
# the same run with the controller on (the positive control) must pass, so
# the failure is the controller's absence, not a broken bed. The ginkgo
# timeout bounds the negative run, whose specs would otherwise wait minutes.
# Needs e2e.test (hack/install-test-binaries.sh e2e.test builds it, 10-20
# minutes the first time) and test/conformance/upstream-results.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT="${ROOT}/_output/conformance"
mkdir -p "${OUT}"
FOCUS='\[sig-api-machinery\] ResourceQuota should create a ResourceQuota and (ensure its status is promptly calculated|capture the life of a secret)\. \[Conformance\]'
SPECS=("ensure its status is promptly calculated" "capture the life of a secret")
log() { echo "+++ [conformance-negative] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

log "negative: policy-quota without resourcequota-controller"
CONFORMANCE_DISABLE=resourcequota-controller CONFORMANCE_FOCUS="${FOCUS}" CONFORMANCE_TIMEOUT="${NEGATIVE_TIMEOUT:-150s}" \
  "${ROOT}/hack/conformance.sh" policy-quota 2>&1 | tee "${OUT}/negative.log"
rc=${PIPESTATUS[0]}
[[ ${rc} != 0 ]] || fail "the runner exited 0 with the resourcequota-controller off"
for s in "${SPECS[@]}"; do
  grep -q "REGRESSION  .*${s}" "${OUT}/negative.log" || fail "no REGRESSION reported for \"${s}\""
done
log "negative: exit ${rc}, both specs reported as regressions"

log "positive: policy-quota with every controller"
CONFORMANCE_FOCUS="${FOCUS}" "${ROOT}/hack/conformance.sh" policy-quota 2>&1 | tee "${OUT}/positive.log"
rc=${PIPESTATUS[0]}
[[ ${rc} == 0 ]] || fail "the positive control failed (exit ${rc}): the bed or the controller is broken, not only the negative case"
log "PASS: the runner fails without the controller and passes with it"
