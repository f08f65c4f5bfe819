"""The PyTorch example job (examples/pytorch/train.py, DP=2 x PP=2, one torchrun per node on two
nodes) under the real controller and agents, on the netns cluster where this process may make
namespaces (loopback otherwise):
  - healthy: nothing is mitigated, and no culprit is named that did not clear by itself;
  - compute: a CPU quota on rank 3's process from outside the job (falcon_chaos, slowdown x1.5)
    is localized to rank 3's compute; the job runs the S2 plan (fewer micro-batches for rank 3's
    DP group) from the controller's directive, which recovers part of the slowdown; the fault's
    removal recovers the event and the job returns to the even split.
On failure the event timelines and the job's per-step log are printed."""

import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as cl  # noqa: E402


def _evidence(c, log_path):
    out = [json.dumps(c.ctl("events"), indent=1)[:6000]]
    if os.path.exists(log_path):
        with open(log_path) as f:
            out.append("".join(f.readlines()[-400:])[-8000:])
    return "\n".join(out)


# The example job as the tests run it: 32 micro-batches of 1 (the controller plans in multiples of
# PP, as 1F1B needs, and with 8 no split beats [4, 4] for a x1.3 stage), a small model, and 6 ms
# of emulated device time per micro-batch forward so that the 4 ranks do not saturate 2 cores
# (pure CPU training does, and moving work between ranks then cannot help).
JOB_ARGS = ["--dp", "2", "--pp", "2", "--micro-batches", "32", "--micro-batch-size", "1",
            "--hidden", "32", "--layers", "2", "--device-ms", "6"]


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


class PytorchE2E(unittest.TestCase):
    def setUp(self):
        ok, why = cl.netns_supported()
        if not ok:
            print(f"netns cluster unavailable ({why}); the loopback cluster is used")
        self.netns = ok
        self.tmp = tempfile.mkdtemp(prefix="falcon-pt.", dir="/tmp")
        self.c = cl.Cluster(self.tmp, nodes=2, netns=ok).start()
        self.log = os.path.join(self.tmp, "train.jsonl")

    def tearDown(self):
        self.c.stop()

    def _await_iteration(self, job, iteration, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                j = self.c.ctl("job", job)
                if j and j.get("last_iteration", -1) >= iteration:
                    return j
            except RuntimeError:
                pass  # Not registered yet.
            time.sleep(0.5)
        self.fail(f"job {job} did not reach iteration {iteration} in {timeout} s")

    def _steps(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def test_healthy_job_raises_nothing_to_mitigate(self):
        self.c.start_job("pt-healthy", 2, JOB_ARGS + ["--steps", "100", "--log", self.log])
        self.c.wait_job(600)
        events = self.c.ctl("events").get("events", [])
        for e in events:
            # Nothing mitigated; a culprit named only where load from outside the job slowed it
            # and it cleared by itself (RECOVERED), as the demo report scores a healthy run.
            if e.get("cause", "CAUSE_UNKNOWN") not in ("CAUSE_UNKNOWN", "CAUSE_UNSPECIFIED"):
                self.assertEqual(e.get("state"), "EVENT_STATE_RECOVERED",
                                 _evidence(self.c, self.log))
            for a in e.get("actions", []):
                self.assertEqual(a.get("strategy"), "STRATEGY_S1_IGNORE",
                                 _evidence(self.c, self.log))
        self.assertEqual(len(self._steps()), 100)
        job = self.c.ctl("job", "pt-healthy")
        kinds = sorted(c["kind"] for c in job["communicators"])
        self.assertEqual(kinds, ["COMM_KIND_DP"] * 2 + ["COMM_KIND_PP"] * 2 + ["COMM_KIND_WORLD"])
        self.assertEqual(job["nodes"], ["node0", "node1"])

    def test_compute_throttle_is_localized_and_mitigated_by_the_job(self):
        job = "pt-compute"
        self.c.start_job(job, 2, JOB_ARGS + ["--steps", "300", "--log", self.log])
        j = self._await_iteration(job, 70, 300)
        pid = next(r["pid"] for r in j["ranks"] if r["rank"] == 3)
        record = os.path.join(self.tmp, "truth.json")
        # The training thread only (its compute, not Gloo's transport threads): a lowered clock.
        chaos = self.c.chaos(
            [f"compute:pid={pid},slowdown=1.5,period=30ms,thread=train-main,until=40"], record)
        chaos.wait(120)
        self.assertEqual(chaos.returncode, 0, self.c.log("chaos"))
        self.c.wait_job(900)
        evidence = _evidence(self.c, self.log)
        with open(record) as f:
            fault = json.load(f)["faults"][0]
        events = self.c.ctl("events").get("events", [])
        culprit = [e for e in events if e.get("cause") == "CAUSE_COMPUTE"
                   and e.get("ranks") == [3] and not e.get("explained_by_event_id")]
        self.assertEqual(len(culprit), 1, evidence)
        e = culprit[0]
        s2 = [a for a in e.get("actions", [])
              if a.get("strategy") == "STRATEGY_S2_MICRO_BATCH" and not a.get("revert")
              and not a.get("dry_run") and int(a.get("directive_id", 0)) != 0]
        self.assertTrue(s2, evidence)
        # The job ran the plan: rank 3 is DP index 1, whose group ran fewer micro-batches.
        steps = self._steps()
        self.assertTrue(any(s["plan"][1] < s["plan"][0] for s in steps), evidence)
        # Recovered share from the job's own step times (as the demo's report measures it):
        # healthy before the onset, slow from the onset to the plan, mitigated under the plan
        # until the fault was removed.
        onset, plan_at = int(e["onset_iteration"]), int(s2[0]["iteration"])
        def step_at(unix_ms):
            return next((s["step"] for s in steps if s["end_unix_ms"] >= unix_ms), len(steps))

        applied, removed = step_at(fault["applied_unix_ms"]), step_at(fault["removed_unix_ms"])
        t = {s["step"]: s["seconds"] for s in steps}
        healthy = _median([t[i] for i in range(max(0, onset - 30), onset) if i in t])
        slow = _median([t[i] for i in range(onset + 2, plan_at) if i in t])
        mitigated = _median([t[i] for i in range(plan_at + 4, removed) if i in t])
        recovered = (slow - mitigated) / (slow - healthy)
        print(f"pytorch compute: healthy {healthy:.3f} s, slow {slow:.3f} s, mitigated "
              f"{mitigated:.3f} s: {recovered:.2f} of the slowdown recovered; fault from step "
              f"{applied}, onset "
              f"{onset}, alarm {e['alarm_iteration']}, verdict {e['verdict_iteration']}, S2 at "
              f"{plan_at}, fault removed at step {removed}")
        # The controller judged the plan on its first iterations, with load from outside the job
        # divided out, and kept it until the fault was gone. The share from the job's own step times is printed:
        # it compares medians minutes apart, and a busy 2-core machine drifts between them
        # (seen: steps under the plan rising from 0.78 s to 1.1 s while every rank slowed).
        controller_log = self.c.log("controller")
        self.assertIn(f"plan kept job={job} event={e['event_id']}", controller_log, evidence)
        self.assertNotIn("plan did not help", controller_log, evidence)
        reverted_early = [a for a in e.get("actions", [])
                          if a.get("strategy") == "STRATEGY_S2_MICRO_BATCH" and a.get("revert")
                          and int(a["iteration"]) < removed]
        self.assertFalse(reverted_early, evidence)
        # The fault was removed: the event recovered and the job went back to the even split.
        self.assertEqual(e["state"], "EVENT_STATE_RECOVERED", evidence)
        self.assertEqual(steps[-1]["plan"], [16, 16], evidence)
        # Other events: closed with nothing blamed, or, as the demo report scores them, a culprit
        # that load from outside the job slowed and that cleared by itself: S1 only, RECOVERED
        # (seen: validation measured rank 1's GEMM x1.9 during the fault on rank 3, and rank 1
        # was back at x1.02 of its peers 25 steps later). Never a mitigation.
        for other in events:
            if other is e or other.get("explained_by_event_id"):
                continue
            self.assertIn(other.get("state"), ("EVENT_STATE_CLOSED", "EVENT_STATE_RECOVERED"),
                          evidence)
            for a in other.get("actions", []):
                self.assertEqual(a.get("strategy"), "STRATEGY_S1_IGNORE", evidence)


if __name__ == "__main__":
    unittest.main(verbosity=2)
