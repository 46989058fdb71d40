#!/usr/bin/env bash
# Runs upstream Kubernetes v1.37.2's own controller-facing [Conformance] e2e
# specs (test/e2e/apps, apimachinery, network, compiled from test/conformance
# into _output/bin/e2e.test) on the local bed of hack/local-up.sh (etcd,
# kube-apiserver, kube-scheduler, kwok fake nodes), and compares every spec's
# result with upstream KCM's on the same bed.
#
#   hack/conformance.sh [AREA]            make conformance [AREA=...]
#   ORACLE=1 hack/conformance.sh [AREA]   make conformance ORACLE=1 [AREA=...]
#
# Areas and the controllers they judge (upstream's canonical names):
#   replicaset-deployment  Deployment, ReplicaSet, ReplicationController specs
#   statefulset-daemonset  StatefulSet, Daemon set, ControllerRevision specs
#   batch                  Job and CronJob specs
#   namespace-gc           Garbage collector and Namespaces specs
#   network-node           EndpointSlice(Mirroring), Endpoints(Controller) specs
#   all (default)          every spec above; ours runs alone with --controllers=*
# With an area, our binary runs only the area's controllers and upstream's
# v1.37.2 KCM runs all the others beside it (--controllers=*,-<area's>), so an
# area is judged before every controller exists.
#
# ORACLE=1 runs the same specs with upstream's KCM alone and stores its
# results in test/conformance/upstream-results.txt (committed; with an area,
# only that area's lines are replaced). Without it, the run is compared with
# that file: one line per spec (ours, upstream, REGRESSION where upstream
# passes and we do not), and the exit code is non-zero on any regression or a
# broken run. A spec upstream fails on this bed is reported, not counted.
#
# Environment:
#   KCM_BIN                  the controller manager judged as "ours" (default
#                            _output/bin/kube-controller-manager; give
#                            upstream's to check the runner itself)
#   CONFORMANCE_TIMEOUT      --ginkgo.timeout of one run (45m)
#   CONFORMANCE_FOCUS        a regexp replacing the area's focus
#   CONFORMANCE_SKIP         a regexp skipped in addition to the skip list
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
BIN="${ROOT}/_output/bin"
OUT="${ROOT}/_output/conformance"
ORACLE_FILE="${ROOT}/test/conformance/upstream-results.txt"
UPSTREAM="${BIN}/kube-controller-manager-upstream"
log() { echo "+++ [conformance] $*" >&2; }

# ---------------------------------------------------------------- areas
# A focus is a regexp over a spec's full text, e.g.
# "[sig-apps] Deployment deployment should support rollover [Conformance]".
CONF='.*\[Conformance\]'
AREAS=(replicaset-deployment statefulset-daemonset batch namespace-gc network-node storage-dra-policy)
declare -A FOCUS=(
  [replicaset-deployment]="\[sig-apps\] (Deployment|ReplicaSet|ReplicationController) ${CONF}"
  [statefulset-daemonset]="\[sig-apps\] (StatefulSet|Daemon set|ControllerRevision) ${CONF}"
  [batch]="\[sig-apps\] (Job|CronJob) ${CONF}"
  [namespace-gc]="\[sig-api-machinery\] (Garbage collector|Namespaces) ${CONF}"
  [network-node]="\[sig-network\] (EndpointSlice|EndpointSliceMirroring|Endpoints|EndpointsController) ${CONF}"
  [storage-dra-policy]="\[sig-storage\] (PersistentVolumes|VolumeAttachment|CSIStorageCapacity|StorageClasses|VolumeAttributesClass|CSIInlineVolumes|CSINodes) ${CONF}|\[sig-node\] .*DRA.*${CONF}|\[sig-api-machinery\] ValidatingAdmissionPolicy ${CONF}"
)
declare -A CONTROLLERS=(
  [replicaset-deployment]="deployment-controller replicaset-controller replicationcontroller-controller"
  [statefulset-daemonset]="statefulset-controller daemonset-controller"
  [batch]="job-controller cronjob-controller ttl-after-finished-controller pod-garbage-collector-controller"
  [namespace-gc]="namespace-controller garbage-collector-controller"
  [network-node]="endpoints-controller endpointslice-controller endpointslice-mirroring-controller node-lifecycle-controller taint-eviction-controller"
  [storage-dra-policy]="persistentvolume-binder-controller persistentvolume-attach-detach-controller persistentvolume-protection-controller persistentvolumeclaim-protection-controller persistentvolume-expander-controller ephemeral-volume-controller volumeattributesclass-protection-controller resourceclaim-controller device-taint-eviction-controller validatingadmissionpolicy-status-controller storage-version-migrator-controller kube-apiserver-serving-clustertrustbundle-publisher-controller"
)

# ---------------------------------------------------------------- skip list
# What the bed cannot do, not what a controller gets wrong: kwok runs no
# containers (no images, no exec, no HTTP from pods, no kubelet admission);
# a Job pod's containers exit as its command says only in the simple form of
# hack/kwok/pod-job-*.yaml; there is no kube-proxy or pod network. Each entry
# is a regexp over the spec's full text, " => ", and the reason, which the
# table prints next to each skipped spec.
#
# Not skipped: [Serial] (e2e.test runs one spec at a time). Not in any area:
# "[sig-network] API Server should have Endpoints and EndpointSlices pointing
# to API Server" (the apiserver's own endpoint reconciler, off in the bed),
# DisruptionController and ResourceQuota specs (controllers of other areas,
# still run by upstream's KCM beside ours).
SKIPS=(
  '\[Slow\] => several minutes each (StatefulSet burst and ordered scaling, CronJob suspend and ForbidConcurrent), kept out to bound a run; the StatefulSet ones also break readiness probes with kubectl exec, which kwok cannot serve'
  '\[Disruptive\] => restarts or breaks cluster components; none among these specs, kept as a guard'
  '\[Flaky\] => known-flaky upstream'
  'should serve a basic image on each replica with a public image => HTTP-proxies to every pod through the apiserver; kwok pods run no containers'
  'deployment should support proportional scaling => stalls the rollout with image webserver:404; kwok makes every pod Ready whatever its image'
  'should rollback without unnecessary restarts => stalls the DaemonSet rollout with image foo:non-existent; kwok makes every pod Ready whatever its image'
  'should perform rolling updates and roll backs of template modifications => breaks a pod readiness probe with kubectl exec; kwok runs no containers'
  'Should recreate evicted statefulset => needs the kubelet to reject a pod for a hostPort conflict; kwok admits it'
  'should execute all indexes despite some failing when using backoffLimitPerIndex => odd indexes must fail and even ones succeed (one shell script); the kwok stages fail every pod whose script says exit 1'
  'should mark indexes as failed when the FailIndex action is matched in podFailurePolicy => odd indexes must fail and even ones succeed; the kwok stages fail every pod whose script says exit 1'
  'with successPolicy (succeededIndexes|succeededCount) rule should succeeded even when some indexes remain pending => odd indexes must fail and even ones succeed; the kwok stages fail every pod whose script says exit 1'
  'should run a job to completion when tasks sometimes fail and are locally restarted => a container must fail once, then succeed when the kubelet restarts it; kwok restarts no container'
  'pod failure policy to ignore failure matching on DisruptionTarget condition => evicts a running pod through the Eviction API, which needs the disruption controller and a kubelet honouring the grace period'
  'should support a Service with multiple (ports|endpoint IPs) specified in multiple EndpointSlices => connects to the Service with kubectl exec and curl from a pod; kwok runs no containers and there is no kube-proxy'
  '\[sig-network\] Services => needs kube-proxy and pod-to-pod traffic (exec pods, curl); there is no pod network'
)

usage() {
  echo "usage: hack/conformance.sh [all|${AREAS[*]// /|}]" >&2
  exit 2
}

# ---------------------------------------------------------------- arguments
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
if [[ "${ORACLE}" == 1 ]]; then
  RUN_NAME="${AREA}-oracle"
  MAIN_BIN="${UPSTREAM}"; MAIN_FLAGS=""; EXTRA_BIN=""; EXTRA_FLAGS=""
elif [[ "${AREA}" == all ]]; then
  RUN_NAME="${AREA}"
  MAIN_BIN="${OURS}"; MAIN_FLAGS=""; EXTRA_BIN=""; EXTRA_FLAGS=""
else
  RUN_NAME="${AREA}"
  read -r -a names <<<"${CONTROLLERS[${AREA}]}"
  ours_list=$(IFS=,; echo "${names[*]}")
  rest_list="*$(printf ',-%s' "${names[@]}")"
  MAIN_BIN="${OURS}"; MAIN_FLAGS="--controllers=${ours_list}"
  EXTRA_BIN="${UPSTREAM}"; EXTRA_FLAGS="--controllers=${rest_list}"
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
    --ginkgo.timeout="${CONFORMANCE_TIMEOUT:-45m}"
    --ginkgo.no-color
    --ginkgo.v
  )
  [[ -z "${SKIP_RE}" ]] || args+=(--ginkgo.skip="${SKIP_RE}")
  [[ "${CONFORMANCE_DRY_RUN:-0}" != 1 ]] || args+=(--ginkgo.dry-run)
  # shellcheck disable=SC2206
  args+=(${CONFORMANCE_E2E_ARGS:-})
  log "running e2e.test (timeout ${CONFORMANCE_TIMEOUT:-45m}), log ${DIR}/e2e.log"
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

# ---------------------------------------------------------------- comparison
# compare: reads ginkgo's JSON report; with ORACLE=1 rewrites this run's areas
# in the oracle file, otherwise compares with it, prints one line per spec,
# writes <run>.md, and exits 1 on a regression.
compare() {
  python3 - "$@" <<'PY'
import json, os, re, sys

(report, oracle_file, md, run_name, oracle_mode, dry_run, skip_list,
 kcm_bin, *areas_and_focus) = sys.argv[1:]
areas = dict(zip(areas_and_focus[0::2], areas_and_focus[1::2]))
skips = []
for line in skip_list.splitlines():
    if line:
        pat, _, why = line.partition(" => ")
        skips.append((re.compile(pat), why))

def why_skipped(full):
    for pat, why in skips:
        if pat.search(full):
            return why
    return ""

def area_of(full):
    for area, focus in areas.items():
        if re.search(focus, full):
            return area
    return None

results = {}  # spec text -> (area, state, seconds, message)
if os.path.exists(report):
    with open(report) as f:
        reports = json.load(f)
    for r in reports:
        reasons = " ".join(r.get("SpecialSuiteFailureReasons") or [])
        timed_out = "Timeout" in reasons or "Interrupted" in reasons
        for s in r.get("SpecReports") or []:
            if s.get("LeafNodeType") != "It":
                continue
            text = " ".join((s.get("ContainerHierarchyTexts") or []) + [s.get("LeafNodeText", "")])
            labels = [l for ls in (s.get("ContainerHierarchyLabels") or []) for l in ls] + (s.get("LeafNodeLabels") or [])
            full = text + "".join(f" [{l}]" for l in labels if f"[{l}]" not in text)
            area = area_of(full)
            if area is None:
                continue
            state = s.get("State", "?")
            msg = ((s.get("Failure") or {}).get("Message") or "").strip()
            if state == "skipped" and why_skipped(full):
                state, msg = "skipped", why_skipped(full)
            elif state == "skipped" and dry_run != "1":
                state = "not-run" if timed_out else "skipped"
            elif state not in ("passed", "skipped"):
                state = "failed"
            results[text] = (area, state, (s.get("RunTime") or 0) / 1e9, msg)

def load_oracle():
    out = {}
    if os.path.exists(oracle_file):
        with open(oracle_file) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                area, state, text = line.rstrip("\n").split("\t", 2)
                out[text] = (area, state)
    return out

def esc(s):
    return " ".join(s.split()).replace("|", "\\|")

def short(msg, n=300):
    msg = " ".join(msg.split())
    return msg if len(msg) <= n else msg[: n - 3] + "..."

if dry_run == "1":
    for text, (area, state, _, msg) in sorted(results.items(), key=lambda kv: (kv[1][0], kv[0])):
        print(f"{area:22} {'skipped' if state == 'skipped' else 'would run':9}  {text}" + (f"  ({msg})" if state == "skipped" else ""))
    sys.exit(0)

if not results:
    print("no report: the run broke before any spec ran", file=sys.stderr)
    sys.exit(1)

if oracle_mode == "1":
    oracle = load_oracle()
    kept = {t: v for t, v in oracle.items() if v[0] not in areas}
    for text, (area, state, _, _) in results.items():
        kept[text] = (area, state)
    with open(oracle_file, "w") as f:
        f.write("# Upstream kube-controller-manager v1.37.2 alone on the kwok bed: area, result, spec.\n")
        f.write("# Written by `make conformance ORACLE=1`; hack/conformance.sh compares every run with it.\n")
        for text, (area, state) in sorted(kept.items(), key=lambda kv: (kv[1][0], kv[0])):
            f.write(f"{area}\t{state}\t{text}\n")
    counts = {}
    for area, state, *_ in results.values():
        counts.setdefault(area, {}).setdefault(state, 0)
        counts[area][state] += 1
    for area in sorted(counts):
        c = counts[area]
        print(f"{area}: upstream {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, {c.get('skipped', 0)} skipped"
              + (f", {c['not-run']} not run" if c.get("not-run") else ""))
    print(f"wrote {oracle_file}")
    sys.exit(0)

oracle = load_oracle()
regressions, rows = 0, []
per_area = {}
for text in sorted(results, key=lambda t: (results[t][0], t)):
    area, state, secs, msg = results[text]
    up = oracle.get(text, (area, "unknown"))[1]
    note = ""
    if up == "passed" and state != "passed" and state != "skipped":
        note = "REGRESSION"
        regressions += 1
    elif up == "failed" and state == "passed":
        note = "better than upstream"
    elif up == "failed":
        note = "upstream fails it on this bed too (not counted)"
    elif up == "unknown":
        note = "not in the oracle file (run ORACLE=1)"
    elif state == "skipped":
        note = msg
    rows.append((area, text, state, up, note, msg))
    a = per_area.setdefault(area, {"ours": 0, "upstream": 0, "judged": 0})
    if state != "skipped":
        a["judged"] += 1
        a["ours"] += state == "passed"
        a["upstream"] += up == "passed"
    print(f"{area:22} ours={state:8} upstream={up:8} {note + '  ' if note == 'REGRESSION' else ''}{text}")

lines = [f"# Conformance: {run_name}", "",
         f"Upstream v1.37.2 [Conformance] e2e specs on the kwok bed; ours = `{kcm_bin}`; "
         "upstream = test/conformance/upstream-results.txt (upstream's KCM alone on the same bed).", "",
         "| Area | Passed by ours | Passed by upstream | Specs run |", "| --- | --- | --- | --- |"]
for area in sorted(per_area):
    a = per_area[area]
    lines.append(f"| {area} | {a['ours']} | {a['upstream']} | {a['judged']} |")
lines += ["", "| Area | Spec | Ours | Upstream | Note |", "| --- | --- | --- | --- | --- |"]
for area, text, state, up, note, msg in rows:
    lines.append(f"| {area} | {esc(text)} | {state} | {up} | {esc(note)} |")
fails = [(t, m) for _, t, s, _, _, m in rows if s == "failed"]
if fails:
    lines += ["", "## Failures with ours", ""]
    lines += [f"- **{esc(t)}**: {esc(short(m))}" for t, m in fails]
with open(md, "w") as f:
    f.write("\n".join(lines) + "\n")
for area in sorted(per_area):
    a = per_area[area]
    print(f"{area}: ours {a['ours']}/{a['judged']} passed, upstream {a['upstream']}/{a['judged']}")
print(f"{regressions} regression(s); table in {md}")
sys.exit(1 if regressions else 0)
PY
}

# ---------------------------------------------------------------- main
mkdir -p "${OUT}"
log "area ${AREA}$([[ ${ORACLE} != 1 ]] || echo ", oracle run"): focus ${FOCUS_RE}"
RUN_RC=0
[[ "${CONFORMANCE_REPORT_ONLY:-0}" == 1 ]] || run_e2e
SKIP_LINES=$(printf '%s\n' "${SKIPS[@]}")
[[ "${CONFORMANCE_NO_SKIPS:-0}" != 1 ]] || SKIP_LINES=""
AREA_ARGS=()
for a in "${RUN_AREAS[@]}"; do AREA_ARGS+=("${a}" "${FOCUS[${a}]}"); done
set +e
compare "${DIR}/report.json" "${ORACLE_FILE}" "${OUT}/${RUN_NAME}.md" "${RUN_NAME}" "${ORACLE}" \
  "${CONFORMANCE_DRY_RUN:-0}" "${SKIP_LINES}" "${OURS}" "${AREA_ARGS[@]}"
CMP_RC=$?
set -e
if [[ ${RUN_RC} == 99 ]]; then log "the run broke (bed); see ${DIR}"; exit 1; fi
exit "${CMP_RC}"
