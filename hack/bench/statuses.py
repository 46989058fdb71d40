#!/usr/bin/env python3
"""What each ReplicaSet and Deployment status write changed, from a kept
audit log with request bodies (rollout.sh with BENCH_KEEP_AUDIT=1
BENCH_AUDIT_STEPS=1): every successful status write is compared with the
previous one of the same object, and counted by the fields it changed.

  statuses.py AUDIT_LOG [OBJECTS_TO_SHOW]

Prints, for replicasets/status and deployments/status: writes, writes per
object, and how many writes changed each combination of fields ("first" is
an object's first status write); then the sequence of the first few objects.
"""
import sys
from collections import Counter, defaultdict

from analyze import kcm_events, ts

COUNTS = ("replicas", "fullyLabeledReplicas", "updatedReplicas", "readyReplicas",
          "availableReplicas", "unavailableReplicas", "terminatingReplicas")
SHORT = {"replicas": "rep", "fullyLabeledReplicas": "lab", "updatedReplicas": "upd",
         "readyReplicas": "rdy", "availableReplicas": "avl", "unavailableReplicas": "unav",
         "terminatingReplicas": "term"}


def conditions(st):
    return tuple(sorted((c.get("type"), c.get("status"), c.get("reason"))
                        for c in st.get("conditions") or []))


def changed(prev, cur):
    """The fields of status cur that differ from prev, in short names."""
    out = []
    if prev.get("observedGeneration") != cur.get("observedGeneration"):
        out.append("gen")
    for f in COUNTS:
        a, b = prev.get(f, 0), cur.get(f, 0)
        if a != b:
            out.append(SHORT[f] + ("+" if (b or 0) > (a or 0) else "-"))
    if conditions(prev) != conditions(cur):
        out.append("cond")
    return out or ["nothing"]


def main():
    audit = sys.argv[1]
    show = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    per = {"replicasets/status": defaultdict(list), "deployments/status": defaultdict(list)}
    for ev in kcm_events(audit):
        ref = ev.get("objectRef") or {}
        res = f"{ref.get('resource')}/{ref.get('subresource')}"
        if (res not in per or ev.get("verb") != "update" or ev.get("stage") != "ResponseComplete"
                or (ev.get("responseStatus") or {}).get("code") != 200):
            continue
        body = ev.get("requestObject")
        if not body:
            sys.exit("statuses.py: no request bodies in the audit log (run with BENCH_AUDIT_STEPS=1)")
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        per[res][key].append((ts(ev["requestReceivedTimestamp"]), body.get("status") or {}))
    for res, objs in per.items():
        if not objs:
            continue
        kinds, singles, counts = Counter(), Counter(), Counter()
        for seq in objs.values():
            seq.sort(key=lambda x: x[0])
            counts[len(seq)] += 1
            prev = None
            for _, st in seq:
                what = ["first"] if prev is None else changed(prev, st)
                kinds[" ".join(what)] += 1
                for w in what:
                    singles[w] += 1
                prev = st
        total = sum(len(s) for s in objs.values())
        print(f"{res}: {total} writes to {len(objs)} objects ({total / len(objs):.2f} each)")
        print("  writes per object: " + ", ".join(f"{n}x{c}" for n, c in sorted(counts.items())))
        print("  writes changing each field: " + ", ".join(f"{k} {v}" for k, v in singles.most_common()))
        print("  by combination:")
        for k, v in kinds.most_common(25):
            print(f"    {v:6d}  {k}")
        for key in sorted(objs)[:show]:
            seq = objs[key]
            t0 = seq[0][0]
            line, prev = [], None
            for t, st in seq:
                what = "first" if prev is None else ",".join(changed(prev, st))
                vals = "/".join(str(st.get(f, 0) or 0) for f in COUNTS if f in st)
                line.append(f"{t - t0:.1f}s {what} [{vals}]")
                prev = st
            print(f"  {key}: " + "  ".join(line))


if __name__ == "__main__":
    main()
