#!/usr/bin/env bash
# Runs upstream Kubernetes v1.37.2's own controller-facing [Conformance] e2e
# specs (test/e2e/apps, apimachinery, auth, network, node, storage, dra,
# compiled from test/conformance into _output/bin/e2e.test) on the local bed
# of hack/local-up.sh (etcd, kube-apiserver, kube-scheduler, kwok fake
# nodes), and compares every spec's result with upstream KCM's on the same
# bed.
#
#   hack/conformance.sh [AREA]            make conformance [AREA=...]
#   ORACLE=1 hack/conformance.sh [AREA]   make conformance ORACLE=1 [AREA=...]
#
# Areas and the controllers they judge (upstream's canonical names):
#   apiserver-crud         specs that only exercise the apiserver (CRUD of
#                          storage, DRA, VAP, Endpoints, Namespace, ...); no
#                          controller is judged by them
#   replicaset-deployment  Deployment, ReplicaSet, ReplicationController specs
#   statefulset-daemonset  StatefulSet, Daemon set, ControllerRevision specs
#   batch                  Job and CronJob specs
#   namespace-gc           Garbage collector, Namespaces, OrderedNamespaceDeletion
#                          and ServiceAccounts specs (service account, token
#                          and kube-root-ca.crt publisher controllers)
#   policy-quota           ResourceQuota and DisruptionController specs
#   network-node           EndpointSlice(Mirroring), Endpoints(Controller),
#                          Service endpoints latency, NoExecuteTaintManager
#   storage-dra-policy     PersistentVolumes, VolumeAttributesClass and
#                          ValidatingAdmissionPolicy status specs
#   all (default)          every spec above; ours runs alone with --controllers=*
# With an area, our binary runs only the area's controllers and upstream's
# v1.37.2 KCM runs all the others beside it (--controllers=*,-<area's>), so an
# area is judged before every controller exists.
#
# ORACLE=1 runs the same specs with upstream's KCM alone and stores its
# results in test/conformance/upstream-results.txt (committed; with an area,
# only that area's lines are replaced). Without it, the run is compared with
# that file: one line per spec (ours, upstream, REGRESSION where upstream
# passes and we do not). A plain `all` run also stores ours in
# test/conformance/ours-results.txt; `make conformance-table` builds the
# README table from the two files.
#
# The run fails closed (exit 1) on: a regression; a non-zero exit of e2e.test
# (a failed spec, or a failed suite set-up or tear-down even when every spec
# passed); a spec ours skipped at runtime that upstream ran; a spec missing
# from the oracle file, or an oracle spec (in focus) missing from the run; a
# broken bed. An oracle run fails on anything upstream does not pass: what
# the bed cannot do belongs in the skip list below, with its reason.
#
# Environment:
#   KCM_BIN                  the controller manager judged as "ours" (default
#                            _output/bin/kube-controller-manager; give
#                            upstream's to check the runner itself)
#   CONFORMANCE_TIMEOUT      --ginkgo.timeout of one run (60m)
#   CONFORMANCE_FOCUS        a regexp replacing the area's focus
#   CONFORMANCE_SKIP         a regexp skipped in addition to the skip list
#   CONFORMANCE_DISABLE      controllers (space-separated) neither binary runs
#                            (the negative control: make conformance-negative)
#   CONFORMANCE_NO_SKIPS=1   do not apply the skip list (to re-check it)
#   CONFORMANCE_DRY_RUN=1    list the specs that would run, run none
#   CONFORMANCE_E2E_ARGS     extra arguments for e2e.test
#   CONFORMANCE_REPORT_ONLY=1  run nothing; redo the comparison from the
#                            report already in _output/conformance
#
# Output under _output/conformance/ (git-ignored): <area>.md (the table),
# <area>/ (e2e.log, junit.xml, report.json, the bed's logs in cluster/).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The tree the judged binary was built from (make builds it just before):
# read now, since commits made during a long run are not in it.
commit="$(git -C "${ROOT}" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "${ROOT}" diff --quiet HEAD 2>/dev/null || echo -dirty)"
BIN="${ROOT}/_output/bin"
OUT="${ROOT}/_output/conformance"
ORACLE_FILE="${ROOT}/test/conformance/upstream-results.txt"
OURS_FILE="${ROOT}/test/conformance/ours-results.txt"
UPSTREAM="${BIN}/kube-controller-manager-upstream"
log() { echo "+++ [conformance] $*" >&2; }

# ---------------------------------------------------------------- areas
# A focus is a regexp over a spec's full text, e.g.
# "[sig-apps] Deployment deployment should support rollover [Conformance]".
# A spec counts in the first area (in AREAS order) whose focus matches it:
# apiserver-crud comes first and takes the specs that only create, read,
# update and delete objects (the apiserver's work, no controller's), even
# where a later area's focus matches them too; it is run and reported, but
# judges no controller.
CONF='.*\[Conformance\]'
AREAS=(apiserver-crud replicaset-deployment statefulset-daemonset batch namespace-gc policy-quota network-node storage-dra-policy)
declare -A FOCUS=(
  [apiserver-crud]="\[sig-storage\] (VolumeAttachment|CSIStorageCapacity|StorageClasses|CSIInlineVolumes|CSINodes) ${CONF}|\[sig-node\] \[DRA\] CRUD Tests ${CONF}|\[sig-api-machinery\] ValidatingAdmissionPolicy .*should support ValidatingAdmissionPolicy(Binding)? API operations ${CONF}|\[sig-network\] Endpoints should test the lifecycle of an Endpoint ${CONF}|\[sig-network\] EndpointSlice should support creating EndpointSlice API operations ${CONF}|\[sig-api-machinery\] Namespaces should (apply a finalizer to a Namespace|apply an update to a Namespace|apply changes to a namespace status|patch a Namespace) ${CONF}|\[sig-auth\] ServiceAccounts should (create a serviceAccountToken and ensure a successful TokenReview|run through the lifecycle of a ServiceAccount|update a ServiceAccount) ${CONF}|\[sig-apps\] CronJob should support CronJob API operations ${CONF}"
  [replicaset-deployment]="\[sig-apps\] (Deployment|ReplicaSet|ReplicationController) ${CONF}"
  [statefulset-daemonset]="\[sig-apps\] (StatefulSet|Daemon set|ControllerRevision) ${CONF}"
  [batch]="\[sig-apps\] (Job|CronJob) ${CONF}"
  [namespace-gc]="\[sig-api-machinery\] (Garbage collector|Namespaces|OrderedNamespaceDeletion) ${CONF}|\[sig-auth\] ServiceAccounts ${CONF}"
  [policy-quota]="\[sig-api-machinery\] ResourceQuota ${CONF}|\[sig-apps\] DisruptionController ${CONF}"
  [network-node]="\[sig-network\] (EndpointSlice|EndpointSliceMirroring|Endpoints|EndpointsController|Service endpoints latency) ${CONF}|\[sig-node\] NoExecuteTaintManager ${CONF}"
  [storage-dra-policy]="\[sig-storage\] (PersistentVolumes|VolumeAttachment|CSIStorageCapacity|StorageClasses|VolumeAttributesClass|CSIInlineVolumes|CSINodes) ${CONF}|\[sig-node\] .*DRA.*${CONF}|\[sig-api-machinery\] ValidatingAdmissionPolicy ${CONF}"
)
# The controllers an area judges. apiserver-crud judges none: alone it runs
# like all (ours alone with every controller).
declare -A CONTROLLERS=(
  [apiserver-crud]=""
  [replicaset-deployment]="deployment-controller replicaset-controller replicationcontroller-controller"
  [statefulset-daemonset]="statefulset-controller daemonset-controller"
  [batch]="job-controller cronjob-controller ttl-after-finished-controller pod-garbage-collector-controller"
  [namespace-gc]="namespace-controller garbage-collector-controller serviceaccount-controller serviceaccount-token-controller root-ca-certificate-publisher-controller"
  [policy-quota]="resourcequota-controller disruption-controller"
  [network-node]="endpoints-controller endpointslice-controller endpointslice-mirroring-controller node-lifecycle-controller taint-eviction-controller"
  [storage-dra-policy]="persistentvolume-binder-controller persistentvolume-attach-detach-controller persistentvolume-protection-controller persistentvolumeclaim-protection-controller persistentvolume-expander-controller ephemeral-volume-controller volumeattributesclass-protection-controller resourceclaim-controller device-taint-eviction-controller validatingadmissionpolicy-status-controller storage-version-migrator-controller kube-apiserver-serving-clustertrustbundle-publisher-controller"
)

# ---------------------------------------------------------------- skip list
# What the bed cannot do, not what a controller gets wrong: kwok runs no
# containers (no exec, no logs, no HTTP from pods, no kubelet admission) and
# there is no kube-proxy or pod network. What it does play (hack/kwok): pods
# turn Ready at once, or once their readiness probes' initialDelaySeconds
# have passed, except those with an image the specs use to mean "cannot be
# pulled" (webserver:404, foo:non-existent, ...), which stay Pending and
# unready; a Job pod finishes as its command says (`exit N` or `false` fails,
# sleep/pause keeps running, a script failing odd completion indexes fails
# odd indexes, anything else succeeds), and with restartPolicy OnFailure a
# failing container restarts every second (restartCount), except a script
# that leaves a marker file, which succeeds after one restart. Each entry is
# a regexp over the spec's full text, " => ", and the reason, which the
# table prints next to each skipped spec.
#
# Run despite their tags: [Slow] (CronJob suspend and ForbidConcurrent take
# minutes each, but judge the CronJob controller) and [Disruptive] (the only
# ones in focus, NoExecuteTaintManager, taint a kwok node and remove the
# taint again). [Serial] needs nothing: e2e.test runs one spec at a time.
# Not in any area: "[sig-network] API Server should have Endpoints and
# EndpointSlices pointing to API Server" (the apiserver's own endpoint
# reconciler, off in the bed).
SKIPS=(
  '\[Flaky\] => known-flaky upstream'
  'Burst scaling should run to completion even with unhealthy pods|Scaling should happen in predictable order and halt if any stateful pod is unhealthy => make pods unready by breaking their readiness probe with kubectl exec; kwok runs no containers'
  'should serve a basic image on each replica with a public image => HTTP-proxies to every pod through the apiserver; kwok pods run no containers'
  'should perform rolling updates and roll backs of template modifications => breaks a pod readiness probe with kubectl exec; kwok runs no containers'
  'Should recreate evicted statefulset => needs the kubelet to reject a pod for a hostPort conflict; kwok admits it'
  'pod failure policy to ignore failure matching on DisruptionTarget condition => its pod must sleep the first time and exit 0 when recreated (a marker file on a hostPath); kwok keeps every sleeping pod running'
  'should support a Service with multiple (ports|endpoint IPs) specified in multiple EndpointSlices => connects to the Service with kubectl exec and curl from a pod; kwok runs no containers and there is no kube-proxy'
  '\[sig-network\] Services => needs kube-proxy and pod-to-pod traffic (exec pods, curl); there is no pod network'
  'ServiceAccounts should mount an API token into pods => reads the mounted token files with kubectl exec; kwok runs no containers'
  'ServiceAccounts should mount projected service account token => reads the token from the log of a container that ran; kwok runs no containers'
  'ServiceAccountIssuerDiscovery should support OIDC discovery => a pod must fetch the issuer discovery document and exit 0; kwok runs no containers'
)

usage() {
  echo "usage: hack/conformance.sh [all|${AREAS[*]// /|}]" >&2
  exit 2
}

# ---------------------------------------------------------------- arguments
if [[ "${1:-}" == --table ]]; then
  # The README table, from the committed results files.
  TABLE_ARGS=(table --oracle-file "${ORACLE_FILE}" --ours-file "${OURS_FILE}" --note "apiserver-crud=(no controller judged)")
  for a in "${AREAS[@]}"; do TABLE_ARGS+=(--area "${a}=${FOCUS[${a}]}"); done
  exec python3 "${ROOT}/test/conformance/compare.py" "${TABLE_ARGS[@]}"
fi
AREA="${1:-all}"
[[ $# -le 1 ]] || usage
if [[ "${AREA}" == all ]]; then
  RUN_AREAS=("${AREAS[@]}")
elif [[ -n "${FOCUS[${AREA}]:-}" ]]; then
  RUN_AREAS=("${AREA}")
else
  log "unknown area ${AREA}"; usage
fi
FOCUS_RE="${CONFORMANCE_FOCUS:-}"
if [[ -z "${FOCUS_RE}" ]]; then
  for a in "${RUN_AREAS[@]}"; do FOCUS_RE+="${FOCUS_RE:+|}${FOCUS[${a}]}"; done
fi
SKIP_RE=""
if [[ "${CONFORMANCE_NO_SKIPS:-0}" != 1 ]]; then
  for s in "${SKIPS[@]}"; do SKIP_RE+="${SKIP_RE:+|}${s%% => *}"; done
fi
[[ -z "${CONFORMANCE_SKIP:-}" ]] || SKIP_RE+="${SKIP_RE:+|}${CONFORMANCE_SKIP}"

ORACLE="${ORACLE:-0}"
OURS="${KCM_BIN:-${BIN}/kube-controller-manager}"
# CONFORMANCE_DISABLE: controllers that neither binary runs (ours leaves
# them out, upstream's beside it leaves out the area's as always). The
# negative control (make conformance-negative) uses it to show that the
# runner fails when a controller is missing.
read -r -a DISABLED <<<"${CONFORMANCE_DISABLE:-}"
without_disabled() { local c d; for c in "$@"; do for d in "${DISABLED[@]}"; do [[ "${c}" != "${d}" ]] || continue 2; done; echo "${c}"; done; }
if [[ "${ORACLE}" == 1 ]]; then
  RUN_NAME="${AREA}-oracle"
  MAIN_BIN="${UPSTREAM}"; MAIN_FLAGS=""; EXTRA_BIN=""; EXTRA_FLAGS=""
elif [[ "${AREA}" == all || -z "${CONTROLLERS[${AREA}]}" ]]; then
  RUN_NAME="${AREA}"
  MAIN_BIN="${OURS}"; MAIN_FLAGS=""; EXTRA_BIN=""; EXTRA_FLAGS=""
  [[ ${#DISABLED[@]} -eq 0 ]] || MAIN_FLAGS="--controllers=*$(printf ',-%s' "${DISABLED[@]}")"
else
  RUN_NAME="${AREA}"
  read -r -a names <<<"${CONTROLLERS[${AREA}]}"
  mapfile -t ours_names < <(without_disabled "${names[@]}")
  ours_list=$(IFS=,; echo "${ours_names[*]}")
  rest_list="*$(printf ',-%s' "${names[@]}")"
  [[ -n "${ours_list}" ]] || { log "CONFORMANCE_DISABLE leaves ${AREA} no controller of ours"; exit 2; }
  MAIN_BIN="${OURS}"; MAIN_FLAGS="--controllers=${ours_list}"
  EXTRA_BIN="${UPSTREAM}"; EXTRA_FLAGS="--controllers=${rest_list}"
fi
[[ ${#DISABLED[@]} -eq 0 ]] || RUN_NAME+="-without-$(IFS=-; echo "${DISABLED[*]}")"
# Our results are recorded (test/conformance/ours-results.txt) only from a
# plain run of all areas: ours alone, every controller, the whole focus.
RECORD_OURS=0
if [[ "${ORACLE}" != 1 && "${AREA}" == all && -z "${KCM_BIN:-}${CONFORMANCE_FOCUS:-}${CONFORMANCE_SKIP:-}${CONFORMANCE_DISABLE:-}${CONFORMANCE_E2E_ARGS:-}" \
      && "${CONFORMANCE_NO_SKIPS:-0}" != 1 && "${CONFORMANCE_DRY_RUN:-0}" != 1 ]]; then
  RECORD_OURS=1
fi
DIR="${OUT}/${RUN_NAME}"

# ---------------------------------------------------------------- build
if [[ "${CONFORMANCE_REPORT_ONLY:-0}" != 1 ]]; then
  # One build at a time: the first e2e.test build takes 10-20 minutes.
  [[ -n "${MAKELEVEL:-}" || -n "${KCM_BIN:-}" ]] || (cd "${ROOT}" && make build)
  "${ROOT}/hack/install-test-binaries.sh" etcd kube-apiserver kube-scheduler kubectl kwok e2e.test kube-controller-manager-upstream
  [[ -x "${OURS}" ]] || { log "KCM_BIN ${OURS} is not an executable"; exit 2; }
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# ---------------------------------------------------------------- the run
CLUSTER_PID=""
stop_cluster() {
  # One TERM only: local-up.sh's own clean-up stops its components, and a
  # second signal would cut that short.
  local pid=${CLUSTER_PID}
  [[ -n "${pid}" ]] || return 0
  CLUSTER_PID=""
  log "stopping the bed (pid ${pid})"
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
}
E2E_PID=""
# shellcheck disable=SC2317  # called from the traps
stop_e2e() {
  [[ -n "${E2E_PID}" ]] || return 0
  log "interrupting e2e.test (pid ${E2E_PID})"
  kill -INT "${E2E_PID}" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "${E2E_PID}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${E2E_PID}" 2>/dev/null || true
  E2E_PID=""
}
trap 'stop_e2e; stop_cluster' EXIT
trap 'stop_e2e; stop_cluster; exit 130' INT TERM

# start_bed: hack/local-up.sh in the background on free ports, with its state
# and logs in DIR/cluster; returns once it says it is up. The apiserver allows
# privileged containers, as upstream's local-up-cluster.sh does, since some
# specs' pods ask for them.
start_bed() {
  local start=${SECONDS} up=0
  log "starting the bed: ${MAIN_BIN##*/} ${MAIN_FLAGS}${EXTRA_BIN:+, beside ${EXTRA_BIN##*/} ${EXTRA_FLAGS}}"
  KCM_LOCAL_DIR="${DIR}/cluster" KCM_LOCAL_KCM_BINARY="${MAIN_BIN}" KCM_LOCAL_KCM_FLAGS="${MAIN_FLAGS}" \
    KCM_LOCAL_EXTRA_KCM_BINARY="${EXTRA_BIN}" KCM_LOCAL_EXTRA_KCM_FLAGS="${EXTRA_FLAGS}" \
    KCM_LOCAL_APISERVER_PORT="$(free_port)" KCM_LOCAL_KCM_PORT="$(free_port)" \
    KCM_LOCAL_APISERVER_FLAGS="--allow-privileged=true ${KCM_LOCAL_APISERVER_FLAGS:-}" \
    "${ROOT}/hack/local-up.sh" >"${DIR}/local-up.log" 2>&1 &
  CLUSTER_PID=$!
  for _ in $(seq 1 600); do
    if grep -q '^Local cluster is up' "${DIR}/local-up.log" 2>/dev/null; then up=1; break; fi
    kill -0 "${CLUSTER_PID}" 2>/dev/null || break
    sleep 0.5
  done
  if [[ ${up} != 1 ]]; then
    log "the bed did not come up; see ${DIR}/local-up.log and ${DIR}/cluster/logs"
    tail -20 "${DIR}/local-up.log" >&2 || true
    stop_cluster
    return 1
  fi
  log "bed up in $((SECONDS - start))s"
}

# run_e2e: brings the bed up, runs e2e.test, brings it down. Sets RUN_RC
# (e2e.test's exit code, or 99 if the bed broke).
run_e2e() {
  local start
  rm -rf "${DIR}"; mkdir -p "${DIR}"
  if [[ "${CONFORMANCE_DRY_RUN:-0}" == 1 ]]; then
    mkdir -p "${DIR}/cluster"; : > "${DIR}/cluster/kubeconfig"  # a dry run needs no bed
  elif ! start_bed; then
    RUN_RC=99; return 0
  fi
  local args=(
    --kubeconfig="${DIR}/cluster/kubeconfig"
    --provider=local
    --minStartupPods=0
    --kubectl-path="${BIN}/kubectl"
    --e2e-output-dir="${DIR}"
    -report-dir="${DIR}"
    --ginkgo.focus="${FOCUS_RE}"
    --ginkgo.junit-report="${DIR}/junit.xml"
    --ginkgo.json-report="${DIR}/report.json"
    --ginkgo.timeout="${CONFORMANCE_TIMEOUT:-60m}"
    --ginkgo.no-color
    --ginkgo.v
  )
  [[ -z "${SKIP_RE}" ]] || args+=(--ginkgo.skip="${SKIP_RE}")
  [[ "${CONFORMANCE_DRY_RUN:-0}" != 1 ]] || args+=(--ginkgo.dry-run)
  # shellcheck disable=SC2206
  args+=(${CONFORMANCE_E2E_ARGS:-})
  log "running e2e.test (timeout ${CONFORMANCE_TIMEOUT:-60m}), log ${DIR}/e2e.log"
  start=${SECONDS}
  # In the background so that a signal to this script is handled at once:
  # the INT/TERM trap interrupts e2e.test (ginkgo still writes its reports).
  set +e
  "${BIN}/e2e.test" "${args[@]}" >"${DIR}/e2e.log" 2>&1 &
  E2E_PID=$!
  wait "${E2E_PID}"
  RUN_RC=$?
  E2E_PID=""
  set -e
  echo "$((SECONDS - start))" > "${DIR}/duration"
  log "e2e.test exited ${RUN_RC} after $((SECONDS - start))s"
  if [[ -n "${CLUSTER_PID}" ]] && ! kill -0 "${CLUSTER_PID}" 2>/dev/null; then
    log "a bed component died during the run; see ${DIR}/local-up.log"
    RUN_RC=99
  fi
  stop_cluster
}

# ---------------------------------------------------------------- main
# The comparison is test/conformance/compare.py's (unit-tested by
# compare_test.py, make test-conformance-runner).
mkdir -p "${OUT}"
log "area ${AREA}$([[ ${ORACLE} != 1 ]] || echo ", oracle run"): focus ${FOCUS_RE}"
RUN_RC=0
if [[ "${CONFORMANCE_REPORT_ONLY:-0}" == 1 ]]; then
  RUN_RC=$(cat "${DIR}/e2e-exit" 2>/dev/null || echo 98)
else
  run_e2e
  echo "${RUN_RC}" > "${DIR}/e2e-exit"
fi
SKIP_LINES=$(printf '%s\n' "${SKIPS[@]}")
[[ "${CONFORMANCE_NO_SKIPS:-0}" != 1 ]] || SKIP_LINES=""
[[ -z "${CONFORMANCE_SKIP:-}" ]] || SKIP_LINES+=$'\n'"${CONFORMANCE_SKIP} => CONFORMANCE_SKIP (this run only)"
CMP_ARGS=(judge --report "${DIR}/report.json" --oracle-file "${ORACLE_FILE}" --ours-file "${OURS_FILE}"
  --md "${OUT}/${RUN_NAME}.md" --run-name "${RUN_NAME}" --skip-list "${SKIP_LINES}" --focus "${FOCUS_RE}"
  --kcm-bin "${OURS}" --run-rc "${RUN_RC}")
for a in "${AREAS[@]}"; do CMP_ARGS+=(--area "${a}=${FOCUS[${a}]}"); done
if [[ "${CONFORMANCE_DRY_RUN:-0}" == 1 ]]; then
  CMP_ARGS+=(--mode dry-run)
elif [[ "${ORACLE}" == 1 ]]; then
  CMP_ARGS+=(--mode oracle)
else
  CMP_ARGS+=(--mode ours)
  [[ ${RECORD_OURS} != 1 ]] || CMP_ARGS+=(--record-ours)
fi
judged_bin=${MAIN_BIN}
machine="$(uname -m), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | xargs)), $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
CMP_ARGS+=(--meta "date=$(date -u +%Y-%m-%dT%H:%MZ)" --meta "commit=${commit}" --meta "machine=${machine}"
  --meta "binary=${judged_bin##*/} ($("${judged_bin}" --version 2>/dev/null | head -1)$([[ ${judged_bin} != "${UPSTREAM}" ]] || echo ', built from k8s.io/kubernetes v1.37.2'))"
  --meta "run=AREA=${AREA}, e2e.test $(cat "${DIR}/duration" 2>/dev/null || echo '?') s")
set +e
python3 "${ROOT}/test/conformance/compare.py" "${CMP_ARGS[@]}"
CMP_RC=$?
set -e
if [[ ${RUN_RC} == 99 ]]; then log "the run broke (bed); see ${DIR}"; exit 1; fi
if [[ ${CMP_RC} != 0 ]]; then log "FAILED (${RUN_NAME}); see ${OUT}/${RUN_NAME}.md and ${DIR}"; fi
exit "${CMP_RC}"
