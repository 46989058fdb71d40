#!/usr/bin/env python3
"""The steps of every rollout in a kept audit log (rollout.sh with
BENCH_KEEP_AUDIT=1 BENCH_AUDIT_STEPS=1): the controller manager's successful
ReplicaSet creates and spec updates, grouped by Deployment, as replica changes.

  steps.py AUDIT_LOG [DEPLOYMENTS_TO_SHOW]

Prints, over all Deployments: updates per Deployment, how many changed
spec.replicas, and the sizes of the scale-ups and scale-downs; then the
sequence of the first few Deployments by name, then of the few with the
most updates (seconds since its first update, ReplicaSet hash, old -> new
replicas).
"""
import sys
from collections import Counter, defaultdict

from analyze import kcm_events, ts


def main():
    audit = sys.argv[1]
    show = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    last = {}  # ReplicaSet key -> replicas it last had
    per_deploy = defaultdict(list)
    for ev in kcm_events(audit):
        ref = ev.get("objectRef") or {}
        verb = ev.get("verb")
        if (verb not in ("create", "update") or ref.get("resource") != "replicasets" or ref.get("subresource")
                or ev.get("stage") != "ResponseComplete" or (ev.get("responseStatus") or {}).get("code") not in (200, 201)):
            continue
        body = ev.get("requestObject")
        if not body:
            sys.exit("steps.py: no request bodies in the audit log (run with BENCH_AUDIT_STEPS=1)")
        name = ref.get("name") or (body.get("metadata") or {}).get("name", "")
        deploy = name.rsplit("-", 1)[0]
        key = f"{ref.get('namespace', '')}/{name}"
        want = (body.get("spec") or {}).get("replicas", 1)
        if verb == "create":
            last[key] = want
            continue
        per_deploy[f"{ref.get('namespace', '')}/{deploy}"].append(
            (ts(ev["requestReceivedTimestamp"]), name.rsplit("-", 1)[-1], last.get(key), want))
        last[key] = want
    if not per_deploy:
        sys.exit("steps.py: no ReplicaSet updates found")
    updates, scales, ups, downs = Counter(), Counter(), Counter(), Counter()
    for seq in per_deploy.values():
        updates[len(seq)] += 1
        n = 0
        for _, _, before, after in seq:
            if before is None or before == after:
                continue
            n += 1
            (ups if after > before else downs)[abs(after - before)] += 1
        scales[n] += 1

    def hist(c):
        return ", ".join(f"{k}x{v}" for k, v in sorted(c.items()))
    total = sum(len(s) for s in per_deploy.values())
    print(f"{total} ReplicaSet updates for {len(per_deploy)} Deployments "
          f"({total / len(per_deploy):.2f} each)")
    print(f"updates per Deployment: {hist(updates)}")
    print(f"replica changes per Deployment: {hist(scales)}")
    print(f"scale-up sizes: {hist(ups)}")
    print(f"scale-down sizes: {hist(downs)}")
    longest = sorted(per_deploy, key=lambda d: (-len(per_deploy[d]), d))[:show]
    for deploy in sorted(per_deploy)[:show] + longest:
        seq = per_deploy[deploy]
        t0 = seq[0][0]
        print(f"{deploy}: " + "  ".join(
            f"{t - t0:.1f}s {h} {'?' if b is None else b}->{a}" for t, h, b, a in seq))


if __name__ == "__main__":
    main()
