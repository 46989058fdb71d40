#!/usr/bin/env python3
"""Summarises one bench run: the kube-apiserver audit log (requests made by the
controller manager inside the workload window) plus the timings and process
figures the shell script recorded. Prints one JSON object.

  analyze.py AUDIT_LOG FACTS_FILE   (FACTS_FILE: key=value lines)
"""
import glob
import json
import os
import sys
from collections import Counter
from datetime import datetime, timezone

# Client-go names the agent after os.Args[0]: upstream's binary is installed as
# kube-controller-manager-upstream, so its agent starts with that; ours runs
# in the bench as kube-controller-manager-bench.
UA_PREFIXES = ("kube-controller-manager/", "kube-controller-manager-upstream/", "kube-controller-manager-bench/")
SA_PREFIX = "system:serviceaccount:kube-system:"
MUTATING = {"create", "update", "patch", "delete", "deletecollection"}
READING = {"get", "list", "watch"}


def ts(s):
    # 2026-11-23T05:54:20.123456Z
    s = s.rstrip("Z")
    if "." in s:
        head, frac = s.split(".", 1)
        s = head + "." + (frac + "000000")[:6]
        fmt = "%Y-%m-%dT%H:%M:%S.%f"
    else:
        fmt = "%Y-%m-%dT%H:%M:%S"
    return datetime.strptime(s, fmt).replace(tzinfo=timezone.utc).timestamp()


def controller(ua):
    # kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abcdef/system:serviceaccount:kube-system:deployment-controller
    # (no trailing name: the base client).
    parts = ua.split(" ", 2)
    tail = parts[2] if len(parts) == 3 else ""
    bits = tail.split("/", 2)
    name = bits[2] if len(bits) == 3 else "(base client)"
    if name.startswith(SA_PREFIX):
        name = name[len(SA_PREFIX):]
    return name or "(none)"


def audit_files(audit):
    """The audit log and, oldest first, the backups the API server rotated
    it into (at 100 MB, named like audit-2026-11-29T05-00-48.163.log)."""
    stem, ext = os.path.splitext(audit)
    return sorted(glob.glob(glob.escape(stem) + "-*" + ext)) + [audit]


def audit_events(audit):
    """Every event of the audit log (and its rotated backups), in order."""
    for path in audit_files(audit):
        with open(path) as f:
            for line in f:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def kcm_events(audit):
    """The audit log's events of requests by the controller manager."""
    for ev in audit_events(audit):
        if ev.get("userAgent", "").startswith(UA_PREFIXES):
            yield ev


def main():
    audit, facts_file = sys.argv[1], sys.argv[2]
    facts = {}
    with open(facts_file) as f:
        for line in f:
            line = line.strip()
            if "=" in line:
                k, v = line.split("=", 1)
                facts[k] = v
    start, end = float(facts["window_start"]), float(facts["window_end"])

    verbs, ctrls, codes = Counter(), Counter(), Counter()
    ctrl_mut = Counter()
    # Writes by resource[/subresource] and verb, and refusals by code.
    writes = Counter()
    refused = Counter()
    total_all = 0
    uas = set()
    for ev in kcm_events(audit):
        ua = ev["userAgent"]
        stage = ev.get("stage")
        t = ts(ev.get("requestReceivedTimestamp", "1970-01-01T00:00:00Z"))
        if not (start <= t <= end):
            continue
        if stage == "RequestReceived":
            total_all += 1
            v = ev.get("verb", "?")
            verbs[v] += 1
            c = controller(ua)
            ctrls[c] += 1
            if v in MUTATING:
                ctrl_mut[c] += 1
                ref = ev.get("objectRef") or {}
                res = ref.get("resource", "?")
                if ref.get("subresource"):
                    res += "/" + ref["subresource"]
                writes[f"{v} {res}"] += 1
            uas.add(ua.split(" ", 1)[0])
        elif stage == "ResponseComplete":
            code = (ev.get("responseStatus") or {}).get("code", 0)
            if code >= 400:
                ref = ev.get("objectRef") or {}
                refused[f"{code} {ev.get('verb', '?')} {ref.get('resource', '?')}"] += 1
            if code == 409:
                codes["409"] += 1
            elif code >= 400:
                codes["4xx/5xx other"] += 1

    out = {k: facts[k] for k in facts}
    out.update({
        "requests_total": total_all,
        "requests_mutating": sum(n for v, n in verbs.items() if v in MUTATING),
        "requests_reading": sum(n for v, n in verbs.items() if v in READING),
        "verbs": dict(verbs),
        "controllers": dict(ctrls),
        "controllers_mutating": dict(ctrl_mut),
        "errors": dict(codes),
        "writes": dict(writes),
        "refused": dict(refused),
        "user_agents": sorted(uas),
    })
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
