#!/usr/bin/env python3
"""Where a namespace teardown's time goes, from a kept audit log
(rollout.sh with BENCH_KEEP_AUDIT=1): from the client's namespace delete to
the namespace's finalize, each request of the namespace controller that took
time (deletecollection and list), with its start (seconds after the delete)
and duration, then totals per resource, the time the namespace was
finalized, the controller manager's other writes after the delete (by
response code, controller, verb and resource), and how many events were
created in the namespace (by client).

  teardown.py AUDIT_LOG [NAMESPACE]   (NAMESPACE: bench)

Both binaries' namespace controllers delete pods first and the other
resources only once no pod is left, one request after the other, so the
teardown is about the sum of these durations plus the waits between passes.
"""
import sys
from collections import defaultdict

from analyze import audit_events, controller, ts, UA_PREFIXES


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    audit = sys.argv[1]
    ns = sys.argv[2] if len(sys.argv) > 2 else "bench"
    deleted_at = None
    rows = []
    finalized = None
    created = defaultdict(int)  # events created in ns, by client
    writes = defaultdict(int)  # the controller manager's other writes after the delete
    for e in audit_events(audit):
        if e.get("stage") != "ResponseComplete":
            continue
        ref = e.get("objectRef") or {}
        ua = e.get("userAgent", "")
        verb = e.get("verb")
        start, end = ts(e["requestReceivedTimestamp"]), ts(e["stageTimestamp"])
        code = (e.get("responseStatus") or {}).get("code")
        if (verb == "create" and ref.get("resource") == "events" and ref.get("namespace") == ns
                and code in (200, 201)):
            created[ua.split("/")[0]] += 1
        if (verb == "delete" and ref.get("resource") == "namespaces" and ref.get("name") == ns
                and not ua.startswith(UA_PREFIXES)):
            deleted_at = start
            continue
        if deleted_at is None or not ua.startswith(UA_PREFIXES):
            continue
        if controller(ua) != "namespace-controller":
            if verb in ("create", "update", "patch", "delete"):
                sub = "/" + ref["subresource"] if ref.get("subresource") else ""
                writes[f"{code} {controller(ua)} {verb} {ref.get('resource')}{sub}"] += 1
            continue
        if ref.get("resource") == "namespaces" and ref.get("subresource") == "finalize" and code == 200:
            finalized = end
        if verb in ("deletecollection", "list") and ref.get("namespace") == ns:
            group = ref.get("apiGroup") or "core"
            rows.append((start - deleted_at, end - start, verb, f"{ref.get('resource')}.{group}", code))
    if deleted_at is None:
        sys.exit(f"no client delete of namespace {ns} in {audit}")
    rows.sort()
    totals = defaultdict(float)
    print(f"namespace {ns}: the namespace controller's requests after the delete (s after it, s taken)")
    for at, took, verb, resource, code in rows:
        totals[(verb, resource)] += took
        if took >= 0.05:
            print(f"  {at:8.2f} {took:7.2f}  {verb} {resource} {code}")
    print("totals over 0.1 s:")
    for (verb, resource), took in sorted(totals.items(), key=lambda kv: -kv[1]):
        if took >= 0.1:
            print(f"  {took:7.2f}  {verb} {resource}")
    print(f"  {sum(totals.values()):7.2f}  all of them")
    if finalized is not None:
        print(f"finalized {finalized - deleted_at:.2f} s after the delete")
    print(f"the controller manager's other writes after the delete: {sum(writes.values())}")
    for what, n in sorted(writes.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {n:7d}  {what}")
    print(f"events created in {ns}: {sum(created.values())} ("
          + ", ".join(f"{n} by {who}" for who, n in sorted(created.items(), key=lambda kv: -kv[1])) + ")")


if __name__ == "__main__":
    main()
