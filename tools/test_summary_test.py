"""Checks the CI line computed from Build Event Protocol files."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_summary.py")


def ev(**kw):
    return json.dumps(kw)


class TestSummaryTest(unittest.TestCase):
    def run_summary(self, lines, *extra):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            p = subprocess.run([sys.executable, SCRIPT, *extra, f.name + ":v"],
                               capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        return p.returncode, p.stdout.strip().splitlines()[-1], p.stderr

    def test_counts_pass_fail_and_build_failures(self):
        lines = [
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            ev(id={"targetConfigured": {"label": "//a:bad"}}, configured={"testSize": "SMALL"}),
            ev(id={"targetConfigured": {"label": "//a:nobuild"}}, configured={"testSize": "SMALL"}),
            ev(id={"targetConfigured": {"label": "//a:lib"}}, configured={"targetKind": "cc_library rule"}),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
            ev(id={"testSummary": {"label": "//a:bad"}}, testSummary={"overallStatus": "FAILED"}),
            ev(id={"targetCompleted": {"label": "//a:nobuild"}}, completed={"success": False}),
            "not json",
        ]
        rc, line, err = self.run_summary(lines, "--extra", "fmt=PASSED")
        self.assertEqual(line, "2 passed, 2 failed, 0 skipped")
        self.assertEqual(rc, 1)
        self.assertIn("//a:bad [v]", err)
        self.assertIn("FAILED_TO_BUILD", err)

    def test_incompatible_target_is_skipped(self):
        lines = [
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            ev(id={"targetConfigured": {"label": "//a:cuda"}}, configured={"testSize": "SMALL"}),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
            ev(id={"targetCompleted": {"label": "//a:cuda"}},
               aborted={"reason": "SKIPPED", "description": "build was skipped"}),
        ]
        rc, line, _ = self.run_summary(lines)
        self.assertEqual((rc, line), (0, "1 passed, 0 failed, 1 skipped"))

    def test_all_green_exits_zero(self):
        lines = [
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
        ]
        rc, line, _ = self.run_summary(lines)
        self.assertEqual((rc, line), (0, "1 passed, 0 failed, 0 skipped"))

    def test_flaky_counts_as_failed(self):
        lines = [
            ev(id={"targetConfigured": {"label": "//a:f"}}, configured={"testSize": "SMALL"}),
            ev(id={"testSummary": {"label": "//a:f"}}, testSummary={"overallStatus": "FLAKY"}),
        ]
        rc, line, err = self.run_summary(lines)
        self.assertEqual((rc, line), (1, "0 passed, 1 failed, 0 skipped"))
        self.assertIn("flaky", err)

    def write_log(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return "file://" + f.name

    def result(self, label, uri, attempt=1):
        return ev(id={"testResult": {"label": label, "run": 1, "shard": 1, "attempt": attempt}},
                  testResult={"status": "PASSED", "testAttemptDurationMillis": "1500",
                              "testActionOutput": [{"name": "test.log", "uri": uri},
                                                   {"name": "test.xml", "uri": "file:///x"}]})

    def test_skip_marker_in_test_log_counts_as_skipped_with_reason(self):
        skipped = self.write_log("[ RUN      ] A.B\n\nFALCON-TEST-SKIPPED: promtool is not "
                                 "installed\n[  SKIPPED ] A.B\n")
        clean = self.write_log("[ RUN      ] A.B\nmentions FALCON-TEST-SKIPPED: mid-line only\n")
        lines = [
            ev(id={"targetConfigured": {"label": "//a:tool"}}, configured={"testSize": "SMALL"}),
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            self.result("//a:tool", skipped),
            self.result("//a:ok", clean),
            ev(id={"testSummary": {"label": "//a:tool"}}, testSummary={"overallStatus": "PASSED"}),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        self.addCleanup(os.unlink, f.name)
        p = subprocess.run([sys.executable, SCRIPT, f.name + ":v"], capture_output=True, text=True)
        out = p.stdout.strip().splitlines()
        self.assertEqual((p.returncode, out[-1]), (0, "1 passed, 0 failed, 1 skipped"))
        self.assertIn("SKIPPED: //a:tool [v]: promtool is not installed", out)
        self.assertIn("slowest: //a:ok [v] 1.5s, //a:tool [v] 1.5s", out)

    def test_failed_test_with_marker_still_fails(self):
        # Under CI=true the helper fails the test; a failure is never turned into a skip.
        log = self.write_log("FALCON-TEST-SKIPPED: data missing\n")
        lines = [
            ev(id={"targetConfigured": {"label": "//a:d"}}, configured={"testSize": "SMALL"}),
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            self.result("//a:d", log),
            ev(id={"testSummary": {"label": "//a:d"}}, testSummary={"overallStatus": "FAILED"}),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
        ]
        rc, line, err = self.run_summary(lines)
        self.assertEqual((rc, line), (1, "1 passed, 1 failed, 0 skipped"))
        self.assertIn("//a:d [v]", err)

    def test_failed_test_prints_why_under_its_failed_line(self):
        noise = "".join(f"I1202 step {i}\n" for i in range(200))
        log = self.write_log("[ RUN      ] E2E.Compute\n" + noise +
                             "tests/e2e/x.cc:88: Failure\nValue of: report.recall\n"
                             "  Actual: 0.5\n" + noise + "[  FAILED  ] E2E.Compute (90 ms)\n"
                             "last line\n")
        lines = [
            ev(id={"targetConfigured": {"label": "//a:e"}}, configured={"testSize": "SMALL"}),
            self.result("//a:e", log),
            ev(id={"testSummary": {"label": "//a:e"}}, testSummary={"overallStatus": "FAILED"}),
        ]
        rc, line, err = self.run_summary(lines)
        self.assertEqual((rc, line), (1, "0 passed, 1 failed, 0 skipped"))
        err_lines = err.splitlines()
        self.assertEqual(err_lines[0], "FAILED: //a:e [v]: FAILED")
        self.assertEqual(err_lines[1:4], ["    tests/e2e/x.cc:88: Failure",
                                          "    Value of: report.recall", "      Actual: 0.5"])
        self.assertIn("    [  FAILED  ] E2E.Compute (90 ms)", err_lines)
        self.assertEqual(err_lines[-1], "    last line")
        self.assertLessEqual(len(err_lines), 1 + 24 + 1)
        self.assertNotIn("    I1202 step 0", err_lines)

    def test_missing_log_is_not_a_skip(self):
        lines = [
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            self.result("//a:ok", "file:///nonexistent/test.log"),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
        ]
        rc, line, _ = self.run_summary(lines)
        self.assertEqual((rc, line), (0, "1 passed, 0 failed, 0 skipped"))

    def test_extra_skipped_with_reason(self):
        lines = [
            ev(id={"targetConfigured": {"label": "//a:ok"}}, configured={"testSize": "SMALL"}),
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "PASSED"}),
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        self.addCleanup(os.unlink, f.name)
        p = subprocess.run([sys.executable, SCRIPT, "--extra", "links=SKIPPED:no checker",
                            f.name], capture_output=True, text=True)
        self.assertIn("SKIPPED: links: no checker", p.stdout)
        self.assertTrue(p.stdout.strip().endswith("1 passed, 0 failed, 1 skipped"))

    def test_nothing_ran_is_a_failure(self):
        rc, line, _ = self.run_summary([])
        self.assertEqual((rc, line), (1, "0 passed, 0 failed, 0 skipped"))


if __name__ == "__main__":
    unittest.main()
