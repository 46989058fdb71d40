#!/usr/bin/env python3
"""Markdown report of hack/bench/rollout.sh runs: per size, the median of the
rounds for ours and upstream with the [min-max] spread, and the ratio of the
medians ours/upstream.   report.py [--who A B] RUNS_DIR SIZE...
(RUNS_DIR holds ours-SIZE-ROUND.json and upstream-SIZE-ROUND.json, or with
--who, A-SIZE-ROUND.json and B-SIZE-ROUND.json: two builds of ours, say.)"""
import glob
import json
import os
import statistics
import sys

FIGURES = [
    ("converge: create, roll out, delete (s)", "secs_total"),
    ("  create until all available (s)", "secs_create"),
    ("  template change until all rolled out (s)", "secs_update"),
    ("  namespace delete until gone (s)", "secs_delete"),
    ("KCM CPU seconds (workload)", "cpu_window"),
    ("KCM peak RSS MiB (VmHWM)", "rss_peak_mib"),
    ("KCM peak anonymous RSS MiB (RssAnon, sampled every 200 ms)", "anon_peak_mib"),
    ("API requests", "requests_total"),
    ("API writes (create/update/patch/delete)", "requests_mutating"),
    ("409 conflicts", ("errors", "409")),
    ("other refusals (4xx/5xx)", ("errors", "4xx/5xx other")),
]
TARGETS = {"secs_total": 0.8, "cpu_window": 0.7, "rss_peak_mib": 0.5, "requests_mutating": 0.6}


def get(run, key):
    if isinstance(key, tuple):
        return float(run.get(key[0], {}).get(key[1], 0))
    v = run.get(key)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def fmt(v):
    if v is None:
        return "-"
    if v == int(v) and abs(v) >= 10:
        return f"{int(v)}"
    return f"{v:.1f}"


def cell(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-", None
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt(m), m
    return f"{fmt(m)} [{fmt(min(vals))}-{fmt(max(vals))}]", m


def ratio(a, b):
    if a is None or b is None:
        return "-"
    if b == 0:
        return "-" if a == 0 else "inf"
    return f"{a / b:.2f}"


def load(d, who, size):
    runs = []
    for p in sorted(glob.glob(os.path.join(d, f"{who}-{size}-*.json"))):
        with open(p) as f:
            runs.append(json.load(f))
    return runs


def main():
    global FIGURES
    args = sys.argv[1:]
    first_name, second_name = "ours", "upstream"
    if args and args[0] == "--who":
        first_name, second_name, args = args[1], args[2], args[3:]
    if args and args[0] == "--phases":
        # workloads.sh: the phases are whatever secs_* facts the runs have.
        args = args[1:]
        first = sorted(glob.glob(os.path.join(args[0], f"{first_name}-*.json")))
        keys = []
        if first:
            with open(first[0]) as f:
                keys = [k for k in json.load(f) if k.startswith("secs_") and k != "secs_total"]
        FIGURES = [("converge (s)", "secs_total")] + [(f"  {k[5:]} (s)", k) for k in keys] + \
            [f for f in FIGURES if not str(f[1]).startswith("secs_")]
    d, sizes = args[0], args[1:]
    for size in sizes:
        ours, up = load(d, first_name, size), load(d, second_name, size)
        if not ours or not up:
            print(f"(no complete runs at {size} pods)\n")
            continue
        incomplete = sum(1 for r in ours + up if r.get("complete") != "1")
        shape = f"{ours[0].get('deployments')} Deployments x 10, {ours[0].get('nodes')} kwok nodes" if "deployments" in ours[0] else "size"
        print(f"#### {size} pods ({shape}), "
              f"{len(ours)} + {len(up)} runs" + (f" ({incomplete} timed out)" if incomplete else ""))
        print()
        print(f"| figure | {first_name} | {second_name} | {first_name}/{second_name} | target |")
        print("|---|---:|---:|---:|---:|")
        for label, key in FIGURES:
            a_s, a = cell([get(r, key) for r in ours])
            b_s, b = cell([get(r, key) for r in up])
            t = TARGETS.get(key) if isinstance(key, str) else None
            print(f"| {label} | {a_s} | {b_s} | {ratio(a, b)} | {('<= ' + str(t)) if t else ''} |")
        # Writes by resource and verb, largest first.
        kinds = set()
        for r in ours + up:
            kinds |= set(r.get("writes", {}))
        rows = []
        for k in kinds:
            a = statistics.median([r.get("writes", {}).get(k, 0) for r in ours])
            b = statistics.median([r.get("writes", {}).get(k, 0) for r in up])
            rows.append((a + b, k, a, b))
        small_a = small_b = 0
        for _, k, a, b in sorted(rows, reverse=True):
            if a < 10 and b < 10:
                # deletecollection per resource and the like: one line.
                small_a, small_b = small_a + a, small_b + b
                continue
            print(f"| writes: {k} | {fmt(a)} | {fmt(b)} | {ratio(a, b)} | |")
        if small_a or small_b:
            print(f"| writes: all others (under 10 each) | {fmt(small_a)} | {fmt(small_b)} | {ratio(small_a, small_b)} | |")
        kinds = set()
        for r in ours + up:
            kinds |= set(r.get("refused", {}))
        rows = []
        for k in kinds:
            a = statistics.median([r.get("refused", {}).get(k, 0) for r in ours])
            b = statistics.median([r.get("refused", {}).get(k, 0) for r in up])
            rows.append((a + b, k, a, b))
        for _, k, a, b in sorted(rows, reverse=True):
            if a or b:
                print(f"| refused: {k} | {fmt(a)} | {fmt(b)} | {ratio(a, b)} | |")
        print()


if __name__ == "__main__":
    main()
