#!/usr/bin/env python3
"""Judges a conformance run of hack/conformance.sh.

Reads ginkgo's JSON report of one e2e.test run, gives every spec in the run's
focus a result, and either records the results (upstream's KCM: the oracle
file; ours: our results file) or compares them with the oracle. It fails
closed: a non-zero exit of e2e.test, a failed suite node, a spec upstream
ran that ours skipped at runtime or did not run, a spec missing from the
oracle file, and an oracle spec missing from the run all fail the run, each
reported by name.

  compare.py judge  --report R --oracle-file O [--ours-file F] ...
  compare.py table  --oracle-file O --ours-file F

Kept apart from the shell script so that test/conformance/compare_test.py
can check the comparison itself (make test-conformance-runner).
"""

import argparse
import json
import os
import re
import sys

# A spec's result. passed and failed as ginkgo says (panicked, interrupted,
# aborted and timedout count as failed); skipped: by the skip list, with its
# reason; runtime-skipped: the spec skipped itself (e2eskipper), with its
# message; not-run: in the focus, neither skipped by the list nor by itself,
# and not run (the suite timed out, was interrupted or broke).
RAN = ("passed", "failed")


def parse_skips(text):
    out = []
    for line in (text or "").splitlines():
        if line.strip():
            pat, _, why = line.partition(" => ")
            out.append((re.compile(pat), why))
    return out


def why_skipped(full, skips):
    for pat, why in skips:
        if pat.search(full):
            return why
    return ""


def area_of(full, areas):
    """The first area (in order) whose focus matches: apiserver-crud comes
    first, so a CRUD spec that another area's focus also matches is
    counted there."""
    for area, focus in areas:
        if re.search(focus, full):
            return area
    return "custom"


def spec_texts(s):
    text = " ".join((s.get("ContainerHierarchyTexts") or []) + [s.get("LeafNodeText", "")])
    labels = [l for ls in (s.get("ContainerHierarchyLabels") or []) for l in ls] + (s.get("LeafNodeLabels") or [])
    full = text + "".join(f" [{l}]" for l in labels if f"[{l}]" not in text)
    return text, full


def parse_report(reports, areas, focus_re, skips):
    """Returns (results, suite_problems): results maps a spec's text to
    (area, state, seconds, message) for every It in focus_re."""
    results, problems = {}, []
    focus = re.compile(focus_re)
    for r in reports:
        reasons = list(r.get("SpecialSuiteFailureReasons") or [])
        if reasons:
            problems.append("suite: " + "; ".join(reasons))
        for s in r.get("SpecReports") or []:
            state = s.get("State", "?")
            msg = ((s.get("Failure") or {}).get("Message") or "").strip()
            kind = s.get("LeafNodeType")
            if kind != "It":
                if state not in ("passed", "skipped"):
                    problems.append(f"{kind} {state}: {short(msg)}")
                continue
            text, full = spec_texts(s)
            if not focus.search(full):
                continue
            why = why_skipped(full, skips)
            if state == "passed":
                pass
            elif state == "skipped" and why:
                state, msg = "skipped", why
            elif state == "skipped" and msg:
                state = "runtime-skipped"
            elif state in ("skipped", "pending"):
                state = "not-run"
                msg = msg or ("the suite stopped first: " + "; ".join(reasons) if reasons else "not run")
            else:
                state = "failed"
            results[text] = (area_of(full, areas), state, (s.get("RunTime") or 0) / 1e9, msg)
        if not r.get("SuiteSucceeded", True) and not any(v[1] == "failed" for v in results.values()):
            problems.append("suite: ginkgo reports the suite failed though no spec failed")
    return results, problems


def load_results(path):
    """(meta, specs): meta from '# key: value' header lines, specs maps a
    spec's text to (area, state)."""
    meta, specs = {}, {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("#"):
                    k, sep, v = line[1:].partition(": ")
                    if sep and " " not in k.strip():
                        meta[k.strip()] = v.strip()
                    continue
                if line.strip():
                    area, state, text = line.split("\t", 2)
                    specs[text] = (area, state)
    return meta, specs


def write_results(path, title, meta, old_specs, results, focus_re):
    """Replaces the specs this run covered (its results, and the old lines
    its focus matches) and keeps the others."""
    focus = re.compile(focus_re)
    kept = {t: v for t, v in old_specs.items() if t not in results and not focus.search(t)}
    for text, (area, state, *_rest) in results.items():
        kept[text] = (area, state)
    with open(path, "w") as f:
        f.write(f"# {title}\n")
        f.write("# Written by hack/conformance.sh; columns: area, result, spec.\n")
        for k in ("date", "commit", "machine", "binary", "run", "e2e-exit", "verdict"):
            if meta.get(k):
                f.write(f"# {k}: {meta[k]}\n")
        for text, (area, state) in sorted(kept.items(), key=lambda kv: (kv[1][0], kv[0])):
            f.write(f"{area}\t{state}\t{text}\n")


def judge(results, oracle, focus_re, run_rc, suite_problems):
    """Compares ours with the oracle. Returns (rows, problems, regressions):
    rows are (area, text, ours, upstream, note); problems are reasons the
    run fails other than regressions."""
    rows, problems, regressions = [], list(suite_problems), 0
    if run_rc != 0:
        problems.append(f"e2e.test exited {run_rc}")
    if not results:
        problems.append("no spec in the report: the run broke before any spec ran")
    for text in sorted(results, key=lambda t: (results[t][0], t)):
        area, state, _, msg = results[text]
        up = oracle.get(text, (area, "missing"))[1]
        note = ""
        if up == "missing":
            note = "MISSING FROM THE ORACLE (run ORACLE=1)"
            problems.append(f"not in the oracle file: {text}")
        elif state == "passed" and up == "passed":
            pass
        elif state in ("failed", "not-run") and up == "passed":
            note = "REGRESSION"
            regressions += 1
        elif state == "runtime-skipped" and up in RAN:
            note = "SKIPPED AT RUNTIME, upstream ran it"
            problems.append(f"ours skipped at runtime what upstream ran: {text} ({short(msg, 120)})")
        elif state in RAN + ("not-run",) and up in ("skipped", "runtime-skipped"):
            note = f"STALE ORACLE: upstream {up} it (run ORACLE=1)"
            problems.append(f"upstream {up} it, ours did not: {text}")
        elif state == "passed" and up == "failed":
            note = "better than upstream"
        elif up == "failed":
            note = "upstream fails it on this bed too (not counted)"
        elif up == "not-run":
            note = "STALE ORACLE: upstream did not run it (run ORACLE=1)"
            problems.append(f"upstream did not run it: {text}")
        elif state in ("skipped", "runtime-skipped"):
            note = msg
        rows.append((area, text, state, up, note))
    focus = re.compile(focus_re)
    for text, (area, up) in sorted(oracle.items()):
        if text not in results and focus.search(text):
            rows.append((area, text, "absent", up, "ABSENT FROM THIS RUN"))
            problems.append(f"in the oracle file ({up}), absent from this run: {text}")
    return rows, problems, regressions


def per_area(specs):
    """specs: text -> (area, state). Returns area -> counts of states."""
    out = {}
    for area, state in specs.values():
        c = out.setdefault(area, {})
        c[state] = c.get(state, 0) + 1
    return out


def esc(s):
    return " ".join(s.split()).replace("|", "\\|")


def short(msg, n=300):
    msg = " ".join((msg or "").split())
    return msg if len(msg) <= n else msg[: n - 3] + "..."


def table(oracle_meta, oracle, ours_meta, ours, area_order, notes=None):
    """The README table: per area, specs passed by ours and by upstream,
    specs run, skipped (skip list) and skipped by the specs themselves."""
    notes = notes or {}
    up_c, our_c = per_area(oracle), per_area(ours)
    areas = [a for a in area_order if a in up_c or a in our_c] + sorted((set(up_c) | set(our_c)) - set(area_order))
    lines = ["| area | ours | upstream | specs run | skipped (list / at runtime) |", "|---|---|---|---|---|"]
    tot = {"ours": 0, "up": 0, "run": 0, "skip": 0, "rt": 0}
    for a in areas:
        u, o = up_c.get(a, {}), our_c.get(a, {})
        run = sum(v for k, v in u.items() if k in RAN + ("not-run",))
        row = {"ours": o.get("passed", 0), "up": u.get("passed", 0), "run": run,
               "skip": u.get("skipped", 0), "rt": u.get("runtime-skipped", 0)}
        for k in tot:
            tot[k] += row[k]
        name = f"{a} {notes[a]}" if a in notes else a
        lines.append(f"| {name} | {row['ours']} | {row['up']} | {row['run']} | {row['skip']} / {row['rt']} |")
    lines.append(f"| **total** | **{tot['ours']}** | **{tot['up']}** | **{tot['run']}** | **{tot['skip']} / {tot['rt']}** |")
    src = []
    for who, meta in (("ours", ours_meta), ("upstream", oracle_meta)):
        src.append(f"{who}: {meta.get('date', '?')}, commit {meta.get('commit', '?')}, {meta.get('machine', '?')}, "
                   f"{meta.get('run', '?')}")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {s}" for s in src) + "\n"


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["judge", "table"])
    p.add_argument("--report")
    p.add_argument("--oracle-file", required=True)
    p.add_argument("--ours-file")
    p.add_argument("--md")
    p.add_argument("--run-name", default="")
    p.add_argument("--mode", choices=["ours", "oracle", "dry-run"], default="ours")
    p.add_argument("--record-ours", action="store_true")
    p.add_argument("--skip-list", default="")
    p.add_argument("--focus", default=".")
    p.add_argument("--kcm-bin", default="")
    p.add_argument("--run-rc", type=int, default=0)
    p.add_argument("--meta", action="append", default=[], help="key=value for the results file header")
    p.add_argument("--area", action="append", default=[], help="area=focus, in classification order")
    p.add_argument("--note", action="append", default=[], help="area=note for the table")
    a = p.parse_args(argv)
    areas = [tuple(x.split("=", 1)) for x in a.area]
    meta = dict(x.split("=", 1) for x in a.meta)
    meta["e2e-exit"] = str(a.run_rc)

    if a.cmd == "table":
        om, oracle = load_results(a.oracle_file)
        um, ours = load_results(a.ours_file)
        sys.stdout.write(table(om, oracle, um, ours, [x[0] for x in areas], dict(x.split("=", 1) for x in a.note)))
        return 0

    reports = []
    if a.report and os.path.exists(a.report):
        with open(a.report) as f:
            reports = json.load(f)
    results, suite_problems = parse_report(reports, areas, a.focus, parse_skips(a.skip_list))

    if a.mode == "dry-run":
        for text, (area, state, _, msg) in sorted(results.items(), key=lambda kv: (kv[1][0], kv[0])):
            would = "skipped" if state == "skipped" else "would run"
            print(f"{area:22} {would:9}  {text}" + (f"  ({msg})" if state == "skipped" else ""))
        print(f"{sum(1 for v in results.values() if v[1] != 'skipped')} would run, "
              f"{sum(1 for v in results.values() if v[1] == 'skipped')} skipped")
        return 0

    if a.mode == "oracle":
        _, old = load_results(a.oracle_file)
        write_results(a.oracle_file, "Upstream kube-controller-manager v1.37.2 alone on the kwok bed.",
                      meta, old, results, a.focus)
        counts = per_area({t: (v[0], v[1]) for t, v in results.items()})
        for area in sorted(counts):
            print(f"{area}: upstream " + ", ".join(f"{n} {s}" for s, n in sorted(counts[area].items())))
        print(f"wrote {a.oracle_file}")
        bad = [f"{v[1]}: {t}" for t, v in results.items() if v[1] in ("failed", "not-run")]
        problems = suite_problems + ([f"e2e.test exited {a.run_rc}"] if a.run_rc else []) + bad
        if not results:
            problems.append("no spec in the report: the run broke before any spec ran")
        for pr in problems:
            print(f"FAIL: {pr}")
        if problems:
            print("upstream does not pass everything it runs: skip what the bed cannot do "
                  "(with its reason) and record again")
        return 1 if problems else 0

    _, oracle = load_results(a.oracle_file)
    rows, problems, regressions = judge(results, oracle, a.focus, a.run_rc, suite_problems)
    for area, text, state, up, note in rows:
        loud = note if note.startswith(("REGRESSION", "MISSING", "SKIPPED", "STALE", "ABSENT")) else ""
        print(f"{area:22} ours={state:15} upstream={up:15} {loud + '  ' if loud else ''}{text}")
    counts = {}
    for area, _, state, up, _ in rows:
        c = counts.setdefault(area, {"ours": 0, "up": 0, "run": 0, "skipped": 0})
        if state in ("skipped", "runtime-skipped"):
            c["skipped"] += 1
        else:
            c["run"] += 1
            c["ours"] += state == "passed"
            c["up"] += up == "passed"
    lines = [f"# Conformance: {a.run_name}", "",
             f"Upstream v1.37.2 [Conformance] e2e specs on the kwok bed; ours = `{a.kcm_bin}`; "
             "upstream = test/conformance/upstream-results.txt (upstream's KCM alone on the same bed).", "",
             "| Area | Passed by ours | Passed by upstream | Specs run | Skipped |", "| --- | --- | --- | --- | --- |"]
    for area in sorted(counts):
        c = counts[area]
        lines.append(f"| {area} | {c['ours']} | {c['up']} | {c['run']} | {c['skipped']} |")
    lines += ["", "| Area | Spec | Ours | Upstream | Note |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r[0]} | {esc(r[1])} | {r[2]} | {r[3]} | {esc(r[4])} |" for r in rows]
    fails = [(t, results[t][3]) for _, t, s, _, _ in rows if s == "failed"]
    if fails:
        lines += ["", "## Failures with ours", ""] + [f"- **{esc(t)}**: {esc(short(m))}" for t, m in fails]
    if problems:
        lines += ["", "## The run fails closed on", ""] + [f"- {esc(pr)}" for pr in problems]
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    for area in sorted(counts):
        c = counts[area]
        print(f"{area}: ours {c['ours']}/{c['run']} passed, upstream {c['up']}/{c['run']}, {c['skipped']} skipped")
    for pr in problems:
        print(f"FAIL: {pr}")
    print(f"{regressions} regression(s), {len(problems)} other failure(s)" + (f"; table in {a.md}" if a.md else ""))
    ok = regressions == 0 and not problems
    if a.record_ours and a.ours_file:
        meta["verdict"] = "pass" if ok else f"FAIL: {regressions} regression(s), {len(problems)} other failure(s)"
        _, old = load_results(a.ours_file)
        write_results(a.ours_file, "Our kube-controller-manager on the kwok bed (hack/conformance.sh).",
                      meta, old, results, a.focus)
        print(f"wrote {a.ours_file}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
