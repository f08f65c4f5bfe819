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
        self.assertEqual(line, "2 passed, 2 failed")
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
            ev(id={"testSummary": {"label": "//a:ok"}}, testSummary={"overallStatus": "FLAKY"}),
        ]
        rc, line, _ = self.run_summary(lines)
        self.assertEqual((rc, line), (0, "1 passed, 0 failed"))

    def test_nothing_ran_is_a_failure(self):
        rc, line, _ = self.run_summary([])
        self.assertEqual((rc, line), (1, "0 passed, 0 failed"))


if __name__ == "__main__":
    unittest.main()
