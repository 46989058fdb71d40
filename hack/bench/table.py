#!/usr/bin/env python3
"""Prints the ours/upstream comparison table (markdown) from the two JSON
summaries analyze.py wrote.   table.py OURS.json UPSTREAM.json"""
import json
import sys


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def ratio(a, b):
    if a is None or b is None:
        return "-"
    if b == 0:
        return "-" if a == 0 else "inf"
    return f"{a / b:.2f}"


def num(d, k):
    v = d.get(k)
    if v in (None, "", "timeout"):
        return None
    try:
        return float(v) if "." in str(v) else int(v)
    except ValueError:
        return None


def main():
    ours, up = (json.load(open(p)) for p in sys.argv[1:3])
    rows = [
        ("seconds until all Deployments available", "secs_available"),
        ("seconds from namespace delete until gone", "secs_ns_gone"),
        ("KCM CPU seconds, workload window", "cpu_window"),
        ("KCM CPU seconds, whole process life", "cpu_total"),
        ("KCM peak RSS MiB (VmHWM)", "rss_peak_mib"),
        ("KCM API requests in window, total", "requests_total"),
        ("  mutating (create/update/patch/delete[collection])", "requests_mutating"),
        ("  reading (get/list/watch)", "requests_reading"),
    ]
    print(f"| figure | ours | upstream | ours/upstream |")
    print(f"|---|---:|---:|---:|")
    for label, key in rows:
        a, b = num(ours, key), num(up, key)
        if a is None and ours.get(key) == "timeout":
            a_s = "timeout"
        else:
            a_s = fmt(a)
        b_s = "timeout" if (b is None and up.get(key) == "timeout") else fmt(b)
        print(f"| {label} | {a_s} | {b_s} | {ratio(a, b)} |")

    def section(title, key):
        names = sorted(set(ours.get(key, {})) | set(up.get(key, {})),
                       key=lambda n: -(ours.get(key, {}).get(n, 0) + up.get(key, {}).get(n, 0)))
        for n in names:
            a, b = ours.get(key, {}).get(n, 0), up.get(key, {}).get(n, 0)
            print(f"| {title} {n} | {a} | {b} | {ratio(a, b)} |")

    section("  verb", "verbs")
    section("  by controller (all verbs):", "controllers")
    section("  by controller (mutating):", "controllers_mutating")
    section("  responses", "errors")


if __name__ == "__main__":
    main()
