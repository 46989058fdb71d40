#!/usr/bin/env python3
"""Unit tests of compare.py, the judge of hack/conformance.sh: every way a
run must fail closed, and the ways it must pass. Run by
`make test-conformance-runner` (part of `make test`)."""

import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout

import compare

AREAS = [("crud", r"\[sig-x\] Thing API"), ("quota", r"\[sig-x\] Quota"), ("jobs", r"\[sig-x\] Job")]
FOCUS = "|".join(f for _, f in AREAS)
SKIPS = "needs exec => kwok runs no containers"


def spec(text, state="passed", msg="", kind="It"):
    container, _, leaf = text.partition(" ")
    s = {"LeafNodeType": kind, "ContainerHierarchyTexts": [container], "LeafNodeText": leaf,
         "ContainerHierarchyLabels": [[]], "LeafNodeLabels": ["Conformance"], "State": state, "RunTime": 1e9}
    if msg:
        s["Failure"] = {"Message": msg}
    return s


def report(*specs, succeeded=True, reasons=None):
    return [{"SuiteSucceeded": succeeded, "SpecialSuiteFailureReasons": reasons or [], "SpecReports": list(specs)}]


Q1 = "[sig-x] Quota should count pods"
Q2 = "[sig-x] Quota should count secrets"
J1 = "[sig-x] Job should run"
JX = "[sig-x] Job needs exec"
C1 = "[sig-x] Thing API should patch"
ORACLE = {Q1: ("quota", "passed"), Q2: ("quota", "passed"), J1: ("jobs", "passed"),
          JX: ("jobs", "skipped"), C1: ("crud", "passed")}
ALL_PASS = [spec(Q1), spec(Q2), spec(J1), spec(JX, "skipped"), spec(C1)]


def run(rep, oracle=ORACLE, rc=0, focus=FOCUS):
    results, problems = compare.parse_report(rep, AREAS, focus, compare.parse_skips(SKIPS))
    return compare.judge(results, oracle, focus, rc, problems)


class JudgeTest(unittest.TestCase):
    def test_all_pass(self):
        rows, problems, regressions = run(report(*ALL_PASS))
        self.assertEqual((problems, regressions), ([], 0))
        self.assertEqual(len(rows), 5)
        skipped = [r for r in rows if r[1] == JX][0]
        self.assertEqual((skipped[2], skipped[4]), ("skipped", "kwok runs no containers"))

    def test_negative_control_area_without_its_controller(self):
        # What `make conformance-negative` does for real: the quota specs
        # fail (or the suite times out in the second) with the controller off.
        rep = report(spec(Q1, "timedout", "timed out"), spec(Q2, "skipped"), spec(J1), spec(JX, "skipped"),
                     spec(C1), succeeded=False, reasons=["Timeout"])
        rows, problems, regressions = run(rep, rc=1)
        self.assertEqual(regressions, 2)
        self.assertEqual(sorted(r[1] for r in rows if r[4] == "REGRESSION"), [Q1, Q2])
        self.assertIn("e2e.test exited 1", problems)

    def test_nonzero_exit_fails_though_every_spec_passed(self):
        _, problems, regressions = run(report(*ALL_PASS), rc=1)
        self.assertEqual(regressions, 0)
        self.assertEqual(problems, ["e2e.test exited 1"])

    def test_failed_suite_node_fails(self):
        rep = report(*ALL_PASS, spec("", "failed", "namespace leak", kind="AfterSuite"), succeeded=False)
        _, problems, _ = run(rep)
        self.assertTrue(any(p.startswith("AfterSuite failed") for p in problems), problems)
        self.assertTrue(any("no spec failed" in p for p in problems), problems)

    def test_runtime_skip_of_a_spec_upstream_ran_fails(self):
        rep = report(spec(Q1), spec(Q2, "skipped", "Only supported for providers [gce]"), spec(J1),
                     spec(JX, "skipped"), spec(C1))
        rows, problems, regressions = run(rep)
        self.assertEqual(regressions, 0)
        self.assertEqual(len(problems), 1)
        self.assertIn(Q2, problems[0])
        self.assertEqual([r[2] for r in rows if r[1] == Q2], ["runtime-skipped"])

    def test_runtime_skip_both_sides_passes(self):
        oracle = dict(ORACLE, **{Q2: ("quota", "runtime-skipped")})
        rep = report(spec(Q1), spec(Q2, "skipped", "no gce"), spec(J1), spec(JX, "skipped"), spec(C1))
        _, problems, regressions = run(rep, oracle)
        self.assertEqual((problems, regressions), ([], 0))

    def test_spec_missing_from_oracle_fails(self):
        oracle = {k: v for k, v in ORACLE.items() if k != J1}
        rows, problems, _ = run(report(*ALL_PASS), oracle)
        self.assertEqual(problems, [f"not in the oracle file: {J1}"])
        self.assertIn("MISSING", [r for r in rows if r[1] == J1][0][4])

    def test_oracle_spec_missing_from_run_fails(self):
        rows, problems, _ = run(report(*[s for s in ALL_PASS if compare.spec_texts(s)[0] != Q2]))
        self.assertEqual(len(problems), 1)
        self.assertIn(Q2, problems[0])
        self.assertIn(("quota", Q2, "absent", "passed", "ABSENT FROM THIS RUN"), rows)

    def test_oracle_specs_out_of_focus_are_not_missing(self):
        focus = AREAS[1][1]
        rows, problems, regressions = run(report(spec(Q1), spec(Q2)), focus=focus)
        self.assertEqual((problems, regressions, len(rows)), ([], 0, 2))

    def test_spec_out_of_focus_in_report_is_ignored(self):
        # ginkgo reports specs its focus filtered out as skipped: not ours.
        rep = report(*ALL_PASS, spec("[sig-y] Other should do", "skipped"))
        rows, problems, _ = run(rep)
        self.assertEqual(problems, [])
        self.assertEqual(len(rows), 5)

    def test_not_run_where_upstream_passed_is_a_regression(self):
        rep = report(spec(Q1), spec(Q2, "skipped"), spec(J1), spec(JX, "skipped"), spec(C1), reasons=["Interrupted"])
        _, problems, regressions = run(rep, rc=1)
        self.assertEqual(regressions, 1)

    def test_upstream_failing_too_is_not_a_regression_but_exit_fails(self):
        oracle = dict(ORACLE, **{J1: ("jobs", "failed")})
        rep = report(spec(Q1), spec(Q2), spec(J1, "failed", "boom"), spec(JX, "skipped"), spec(C1))
        _, problems, regressions = run(rep, oracle, rc=1)
        self.assertEqual(regressions, 0)
        self.assertEqual(problems, ["e2e.test exited 1"])

    def test_stale_oracle_fails(self):
        oracle = dict(ORACLE, **{J1: ("jobs", "skipped")})
        _, problems, _ = run(report(*ALL_PASS), oracle)
        self.assertEqual(len(problems), 1)
        self.assertIn("skipped it, ours did not", problems[0])

    def test_crud_area_wins_classification(self):
        areas = [("crud", r"Quota should count pods"), ("quota", r"\[sig-x\] Quota")]
        results, _ = compare.parse_report(report(spec(Q1), spec(Q2)), areas, ".", [])
        self.assertEqual((results[Q1][0], results[Q2][0]), ("crud", "quota"))

    def test_empty_report_fails(self):
        _, problems, _ = run([], rc=99)
        self.assertIn("no spec in the report: the run broke before any spec ran", problems)


class FilesTest(unittest.TestCase):
    def test_main_judge_records_ours_and_table(self):
        with tempfile.TemporaryDirectory() as d:
            rep, oracle_file, ours_file = (os.path.join(d, n) for n in ("report.json", "up.txt", "ours.txt"))
            with open(rep, "w") as f:
                json.dump(report(*ALL_PASS), f)
            compare.write_results(oracle_file, "upstream", {"date": "D1", "commit": "c1", "machine": "m"},
                                  {}, {t: (a, s, 0, "") for t, (a, s) in ORACLE.items()}, "$^")
            args = ["judge", "--report", rep, "--oracle-file", oracle_file, "--ours-file", ours_file,
                    "--focus", FOCUS, "--skip-list", SKIPS, "--mode", "ours", "--record-ours",
                    "--meta", "date=D2", "--meta", "commit=c2", "--meta", "machine=m"]
            args += [x for a, fo in AREAS for x in ("--area", f"{a}={fo}")]
            with redirect_stdout(io.StringIO()):
                self.assertEqual(compare.main(args), 0)
            meta, ours = compare.load_results(ours_file)
            self.assertEqual((meta["date"], meta["verdict"], meta["e2e-exit"]), ("D2", "pass", "0"))
            self.assertEqual(ours[Q1], ("quota", "passed"))
            out = io.StringIO()
            with redirect_stdout(out):
                compare.main(["table", "--oracle-file", oracle_file, "--ours-file", ours_file]
                             + [x for a, fo in AREAS for x in ("--area", f"{a}={fo}")])
            text = out.getvalue()
            self.assertIn("| quota | 2 | 2 | 2 | 0 / 0 |", text)
            self.assertIn("| jobs | 1 | 1 | 1 | 1 / 0 |", text)
            self.assertIn("| **total** | **4** | **4** | **4** | **1 / 0** |", text)
            self.assertIn("ours: D2, commit c2", text)

    def test_main_judge_fails_on_regression_and_still_records(self):
        with tempfile.TemporaryDirectory() as d:
            rep, oracle_file, ours_file = (os.path.join(d, n) for n in ("report.json", "up.txt", "ours.txt"))
            with open(rep, "w") as f:
                json.dump(report(spec(Q1, "failed", "x"), *ALL_PASS[1:]), f)
            compare.write_results(oracle_file, "upstream", {}, {},
                                  {t: (a, s, 0, "") for t, (a, s) in ORACLE.items()}, "$^")
            args = ["judge", "--report", rep, "--oracle-file", oracle_file, "--ours-file", ours_file,
                    "--focus", FOCUS, "--skip-list", SKIPS, "--run-rc", "1", "--record-ours"]
            args += [x for a, fo in AREAS for x in ("--area", f"{a}={fo}")]
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(compare.main(args), 1)
            self.assertIn("REGRESSION", out.getvalue())
            meta, ours = compare.load_results(ours_file)
            self.assertTrue(meta["verdict"].startswith("FAIL"))
            self.assertEqual(ours[Q1], ("quota", "failed"))

    def test_oracle_mode_fails_on_upstream_failure_and_merges(self):
        with tempfile.TemporaryDirectory() as d:
            rep, oracle_file = os.path.join(d, "report.json"), os.path.join(d, "up.txt")
            compare.write_results(oracle_file, "upstream", {}, {},
                                  {t: (a, s, 0, "") for t, (a, s) in ORACLE.items()}, "$^")
            with open(rep, "w") as f:
                json.dump(report(spec(Q1, "failed", "x"), spec(Q2)), f)
            args = ["judge", "--report", rep, "--oracle-file", oracle_file, "--mode", "oracle",
                    "--focus", AREAS[1][1], "--run-rc", "1"] + [x for a, fo in AREAS for x in ("--area", f"{a}={fo}")]
            with redirect_stdout(io.StringIO()):
                self.assertEqual(compare.main(args), 1)
            _, up = compare.load_results(oracle_file)
            self.assertEqual(up[Q1], ("quota", "failed"))
            self.assertEqual(up[J1], ("jobs", "passed"))  # out of this run's focus: kept


if __name__ == "__main__":
    unittest.main()
