#!/usr/bin/env python3
"""Where a run's writes go, object by object: for one resource[/subresource]
(default replicasets/status) the controller manager's writes per object from
a kept audit log (BENCH_KEEP_AUDIT=1), as a histogram, and the timeline of
the first objects (seconds since the object's first write, with the code).

  timeline.py AUDIT_LOG [RESOURCE] [OBJECTS]
"""
import sys
from collections import Counter, defaultdict

from analyze import kcm_events, ts

MUTATING = {"create", "update", "patch", "delete"}


def main():
    audit = sys.argv[1]
    want = sys.argv[2] if len(sys.argv) > 2 else "replicasets/status"
    show = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    sent = {}
    per = defaultdict(list)
    for ev in kcm_events(audit):
        if ev.get("verb") not in MUTATING:
            continue
        ref = ev.get("objectRef") or {}
        res = ref.get("resource", "?") + ("/" + ref["subresource"] if ref.get("subresource") else "")
        if res != want:
            continue
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        if ev.get("stage") == "RequestReceived":
            sent[ev["auditID"]] = (key, ts(ev["requestReceivedTimestamp"]))
        elif ev.get("stage") == "ResponseComplete" and ev["auditID"] in sent:
            k, t = sent.pop(ev["auditID"])
            per[k].append((t, (ev.get("responseStatus") or {}).get("code", 0)))
    counts = Counter(len(v) for v in per.values())
    print(f"{want}: {sum(len(v) for v in per.values())} writes to {len(per)} objects")
    print("writes per object: " + ", ".join(f"{n}x{c}" for n, c in sorted(counts.items())))
    for key in sorted(per)[:show]:
        t0 = per[key][0][0]
        print(key + ": " + " ".join(f"{t - t0:.1f}" + ("" if c < 300 else f"({c})") for t, c in sorted(per[key])))


if __name__ == "__main__":
    main()
