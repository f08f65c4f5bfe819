"""plan_sweep.py: its candidates, directive script and figures, and one real sweep of a tiny job
(falcon_plan and falcon_train, given as arguments)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import plan_sweep  # noqa: E402

TRAIN = PLAN = None


class PureTest(unittest.TestCase):
    def test_micro_batches_spread_the_rest_evenly(self):
        self.assertEqual(plan_sweep.micro_batches_with(4, 64, 2, 13), [17, 17, 13, 17])
        self.assertEqual(plan_sweep.micro_batches_with(4, 64, 2, 14), [17, 17, 14, 16])
        self.assertEqual(plan_sweep.micro_batches_with(4, 64, 0, 12), [12, 18, 17, 17])
        self.assertIsNone(plan_sweep.micro_batches_with(4, 64, 2, 0))
        self.assertIsNone(plan_sweep.micro_batches_with(4, 8, 2, 6))  # Leaves a group none.
        self.assertEqual(plan_sweep.micro_batches_with(1, 8, 0, 8), [8])

    def test_candidates_are_the_plan_and_its_neighbours(self):
        split = [[8, 8], [8, 8], [6, 10], [8, 8]]
        m = [17, 17, 13, 17]
        got = plan_sweep.candidates((split, m), 4, 2, 16, 64, 2, 0)
        self.assertEqual([c[0] for c in got],
                         ["planned", "slow stage 5 blocks", "slow stage 7 blocks",
                          "slow group 12 micro-batches", "slow group 14 micro-batches",
                          "even split, same micro-batches"])
        self.assertEqual(got[1][1][2], [5, 11])
        self.assertEqual(got[2][1][2], [7, 9])
        self.assertEqual(got[0][1], split)  # The plan itself is not changed by its neighbours.
        self.assertEqual(got[3][2], [18, 17, 12, 17])
        self.assertEqual(got[5][1], [[8, 8]] * 4)
        # A last-stage slow rank gives blocks to the stage before it; a stage never goes empty.
        got = plan_sweep.candidates(([[1, 3], [2, 2]], [3, 5]), 2, 2, 4, 8, 0, 0)
        self.assertNotIn("slow stage 0 blocks", [c[0] for c in got])
        got = plan_sweep.candidates(([[2, 2], [3, 1]], [5, 3]), 2, 2, 4, 8, 1, 1)
        self.assertEqual([c for c in got if c[0] == "slow stage 2 blocks"][0][1][1], [2, 2])

    def test_directive_script_applies_each_candidate_for_a_segment(self):
        cands = [("planned", [[1, 3], [2, 2]], [3, 5]), ("other", [[2, 2], [2, 2]], [4, 4])]
        lines, segments = plan_sweep.directive_script(cands, 2, 2, 4, 8, 20, 5)
        self.assertEqual(segments, [("planned", 20, 25), ("other", 25, 30),
                                    ("slowed (after)", 30, 35)])
        self.assertEqual([d["directive"]["effective_iteration"] for d in lines], [20, 25, 30])
        self.assertEqual([d["directive"]["plan_version"] for d in lines], [1, 2, 3])
        self.assertEqual(lines[0]["directive"]["layer_split"],
                         {"replicas": [{"stage_blocks": [1, 3]}, {"stage_blocks": [2, 2]}],
                          "micro_batches": [3, 5]})
        # The last one puts the even split back.
        self.assertEqual(lines[2]["directive"]["layer_split"]["micro_batches"], [4, 4])

    def test_shares_against_the_mean_healthy_and_slowed_segments(self):
        rows = [{"rank": 0, "iteration": i, "iteration_time_s": t}
                for i, t in enumerate([9, 1.0, 1.0, 2.0, 2.0, 1.2, 1.2, 1.8, 1.8, 0.9, 0.9])]
        rows.append({"rank": 1, "iteration": 1, "iteration_time_s": 50})  # Not rank 0: ignored.
        segs = [("healthy", 0, 3), ("slowed", 3, 5), ("a", 5, 7), ("slowed (after)", 7, 9),
                ("healthy (after)", 9, 11)]
        times = plan_sweep.segment_times(rows, segs, 1)
        self.assertEqual(times["healthy"], 1.0)  # Iteration 0 settles.
        self.assertEqual(times["slowed"], 2.0)
        self.assertEqual(times["slowed (after)"], 1.8)
        got = plan_sweep.shares(times, ["a"])
        self.assertAlmostEqual(got["a"], (1.9 - 1.2) / (1.9 - 0.95))
        times["slowed"] = times["slowed (after)"] = 0.5  # No slowdown: no share.
        self.assertIsNone(plan_sweep.shares(times, ["a"])["a"])
        self.assertIsNone(plan_sweep.segment_times(rows, [("x", 20, 30)], 0)["x"])


@unittest.skipIf(TRAIN is None and len(sys.argv) < 3, "needs falcon_train and falcon_plan")
class SweepTest(unittest.TestCase):
    def test_a_tiny_job_measures_every_candidate(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "sweep.json")
            proc = subprocess.run(
                [sys.executable, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                              "plan_sweep.py"),
                 f"--train={TRAIN}", f"--plan={PLAN}", "--runs=1", "--dp=2", "--pp=2",
                 "--layers=4", "--micro-batches=8", "--rank=1", "--slowdown=3",
                 "--compute-ms=4", "--segment=6", "--settle=2", f"--out={out}"],
                capture_output=True, text=True, timeout=600)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(out) as f:
                report = json.load(f)
        # The planner's pick for rank 1 (DP 1, stage 0) x3 first, each candidate measured.
        first = report["candidates"][0]
        self.assertEqual(first["candidate"], "planned")
        self.assertLess(first["split"][1][0], 2, first)  # The slow stage is lighter.
        self.assertEqual(sum(first["micro_batches"]), 8)
        self.assertGreaterEqual(len(report["candidates"]), 3)
        times = report["runs"][0]["times_s"]
        for c in report["candidates"]:
            self.assertIsNotNone(times[c["candidate"]], c)
            self.assertEqual(len(c["shares"]), 1, c)
        # The fault really slowed the job (x3 on a device that paces its pipeline).
        self.assertGreater(times["slowed"], times["healthy"])
        self.assertIn("best measured:", proc.stdout)


if __name__ == "__main__":
    if len(sys.argv) >= 3:
        TRAIN, PLAN = sys.argv[1], sys.argv[2]
        del sys.argv[1:3]
    unittest.main()
