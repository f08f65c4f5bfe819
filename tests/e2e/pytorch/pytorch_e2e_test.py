"""The PyTorch example job (examples/pytorch/train.py, DP=2 x PP=2, one torchrun per node on two
nodes) under the real controller and agents, on the netns cluster where this process may make
namespaces (loopback otherwise). Ranks are node-major: node0 holds stage 0 (ranks 0, 1), node1
stage 1 (ranks 2, 3), so every pipeline link crosses the nodes and each DP communicator stays
inside one.
  - healthy: the first 70 steps (at least) of each run: its fault begins once detection is armed
    (the detectors' warm-up ended) and the job reached step 70; nothing is mitigated, and no
    culprit is named that did not clear by itself (as the demo report scores a healthy run);
  - compute: a CPU quota on rank 3's process from outside the job (falcon_chaos, slowdown x1.5)
    is localized to rank 3's compute; the job runs the S2 plan (fewer micro-batches for rank 3's
    DP group) from the controller's directive, which recovers part of the slowdown; the fault's
    removal recovers the event and the job returns to the even split;
  - DP link and S3 (netns cluster only): the job runs each pipeline on one node (--rank-order
    replica), so its DP all-reduces cross the nodes; a cap on node0 -> node1 is localized to links
    across the nodes, S3's new layout puts each DP communicator inside a node, the package
    checkpoints and both falcon.launch processes relaunch every rank in that layout at the
    directive's epoch: every step runs once, the loss goes on, the steps are faster;
  - link and S4 (netns cluster only): a bandwidth cap on one direction, node0 -> node1 (htb +
    u32 on node0's veth), is localized to that direction's links (slowest first; a reverse link
    may be named beside them, not a NIC); S3 finds no better layout, so the escalation reaches
    S4: the job checkpoints, node1 leaves,
    falcon.launch relaunches node0 as DP=1 x PP=2 at epoch 1, and the job goes on from its
    checkpoint with the same global batch, every step run once and the loss where it stopped.
On failure the event timelines and the job's per-step log are printed."""

import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as cl  # noqa: E402


def _evidence(c, log_path):
    """The events, the controller's lines about detection and mitigation (the tests delete their
    directory), and the job's per-step log."""
    out = [json.dumps(c.ctl("events"), indent=1)[:6000]]
    keep = ("armed", "event", "probe", "recover", "plan ", "S2", "S3", "S4", "verdict",
            "validation", "environment")
    lines = [line for line in c.log("controller").splitlines() if any(k in line for k in keep)]
    out.append("controller:\n" + "\n".join(line[:400] for line in lines[-80:]))
    if os.path.exists(log_path):
        steps = []
        with open(log_path) as f:
            for line in f:
                try:
                    steps.append(json.loads(line))
                except ValueError:
                    pass  # A line the job is still writing.
        out.append("steps (step: seconds, plan): " + " ".join(
            f"{s['step']}:{s['seconds']:.2f}{'' if s['plan'] == steps[0]['plan'] else s['plan']}"
            for s in steps))
    return "\n".join(out)


# The example job as the tests run it: 32 micro-batches of 1 (the controller plans in multiples of
# PP, as 1F1B needs, and with 8 no split beats [4, 4] for a x1.3 stage), a small model, and 6 ms
# of emulated device time per micro-batch forward so that the 4 ranks do not saturate 2 cores
# (pure CPU training does, and moving work between ranks then cannot help).
# --dp is left to the example (the world size / --pp): the S4 relaunch runs the same arguments.
JOB_ARGS = ["--pp", "2", "--micro-batches", "32", "--micro-batch-size", "1",
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
        self.c = None
        self.log = os.path.join(self.tmp, "train.jsonl")

    def _start(self, **kwargs):
        self.c = cl.Cluster(self.tmp, nodes=2, netns=self.netns, **kwargs).start()

    def tearDown(self):
        if self.c is not None:
            self.c.stop()
        outcome = getattr(self, "_outcome", None)
        result = getattr(outcome, "result", None)
        failed = result is not None and any(
            test is self for test, _ in result.errors + result.failures)
        if failed:
            print(f"kept for the failure: {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _await_armed(self, job, iteration, ranks, timeout):
        """The job's view once it reached `iteration` with detection armed on the job series and
        on all `ranks` rank series: a fault that began before the detectors' warm-up ended would
        be taken for the healthy level (seen: a link cap at iteration 70 of an unsettled warm-up
        raised no event)."""
        deadline = time.monotonic() + timeout
        j = None
        while time.monotonic() < deadline:
            try:
                j = self.c.ctl("job", job)
            except RuntimeError:
                j = None  # Not registered yet.
            if j and j.get("last_iteration", -1) >= iteration and \
                    j.get("detection_armed_iteration", -1) >= 0 and \
                    j.get("detection_armed_ranks", 0) >= ranks:
                return j
            time.sleep(0.5)
        self.fail(f"job {job} did not reach iteration {iteration} with detection armed on "
                  f"{ranks} ranks in {timeout} s: {json.dumps(j)[:2000]}\n"
                  f"{_evidence(self.c, self.log)}")

    def _steps(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def test_compute_throttle_is_localized_and_mitigated_by_the_job(self):
        job = "pt-compute"
        self._start()
        self.c.start_job(job, 2, JOB_ARGS + ["--steps", "200", "--log", self.log])
        j = self._await_armed(job, 70, 4, 300)
        # The job registered its communicators with their roles, and its ranks on their nodes.
        kinds = sorted(c["kind"] for c in j["communicators"])
        self.assertEqual(kinds, ["COMM_KIND_DP"] * 2 + ["COMM_KIND_PP"] * 2 + ["COMM_KIND_WORLD"])
        self.assertEqual(j["nodes"], ["node0", "node1"])
        pid = next(r["pid"] for r in j["ranks"] if r["rank"] == 3)
        record = os.path.join(self.tmp, "truth.json")
        # The training thread only (its compute, not Gloo's transport threads): a lowered clock.
        chaos = self.c.chaos(
            [f"compute:pid={pid},slowdown=1.5,period=30ms,thread=train-main,until=35"], record)
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
              f"{plan_at}, fault removed at step {removed}, recovered at "
              f"{e.get('recovery_iteration', -1)}")
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
        # Other events, the healthy steps before the fault's included: closed with nothing
        # blamed, or, as the demo report scores them, a culprit that load from outside the job
        # slowed and that cleared by itself (seen: validation measured rank 1's GEMM x1.9 during
        # the fault on rank 3, and rank 1 was back at x1.02 of its peers 25 steps later).
        self._assert_no_false_alarm(events, [e], evidence)

    def _assert_no_false_alarm(self, events, explained, evidence):
        """Every event but `explained` (and those explained by another) mitigated nothing (S1
        only) and ended CLOSED (nothing blamed) or RECOVERED (its culprit cleared by itself)."""
        for other in events:
            if any(other is e for e in explained) or other.get("explained_by_event_id"):
                continue
            self.assertIn(other.get("state"), ("EVENT_STATE_CLOSED", "EVENT_STATE_RECOVERED"),
                          evidence)
            for a in other.get("actions", []):
                self.assertEqual(a.get("strategy"), "STRATEGY_S1_IGNORE", evidence)

    def _require_netns(self):
        """Skips (fails under CI=true) where the netns cluster cannot be made: falcon_chaos caps
        links between netns nodes only (tests/testing/skip.sh's rule)."""
        if self.netns:
            return
        why = "the link scenario needs the netns cluster (root with CAP_NET_ADMIN)"
        if os.environ.get("CI") in ("true", "1"):
            self.fail(f"CI=true and a precondition is missing: {why}")
        print(f"\nFALCON-TEST-SKIPPED: {why}")
        self.skipTest(why)

    def _run_under_link_cap(self, rate):
        """Caps node0 -> node1 at `rate` until the job (both launchers) ended; the record of the
        fault is truth.json."""
        chaos = self.c.chaos([f"link:src=node0,dst=node1,rate={rate}"],
                             os.path.join(self.tmp, "truth.json"))
        time.sleep(2)
        self.assertIsNone(chaos.poll(), f"falcon_chaos exited {chaos.returncode}:\n"
                                        f"{self.c.log('chaos')[-2000:]}")
        try:
            self.c.wait_job(900)
        except RuntimeError as e:
            self.fail(f"{e}\n{_evidence(self.c, self.log)}")
        chaos.send_signal(signal.SIGTERM)  # The cap until the job is done; the record says when.
        chaos.wait(30)

    def _communication_event(self, evidence):
        """(every event, the one communication event not explained by another)."""
        events = self.c.ctl("events").get("events", [])
        comm = [e for e in events if e.get("cause") == "CAUSE_COMMUNICATION"
                and not e.get("explained_by_event_id")]
        self.assertEqual(len(comm), 1, evidence)
        return events, comm[0]

    def test_dp_link_cap_is_mitigated_by_s3_at_a_relaunch_in_a_new_layout(self):
        job = "pt-s3"
        self._require_netns()
        # S3 costs little here (the escalation takes it within a few slow steps); S4 keeps its
        # default cost, which this run never reaches.
        self._start(link_bytes=65536)
        self.c.ctl("settings", "set", "s3_cost_seconds=2")
        ckpt = os.path.join(self.tmp, "ckpt")
        # Each pipeline on one node (--rank-order replica: node0 holds replica 0, node1 replica
        # 1), so both DP all-reduces (about 270 KB per stage per step with --hidden 64) cross the
        # nodes, while the activations (8 KB per micro-batch, 8 micro-batches) stay inside them.
        self.c.start_job(job, 2, ["--pp", "2", "--rank-order", "replica", "--micro-batches", "8",
                                  "--micro-batch-size", "1", "--hidden", "64", "--layers", "2",
                                  "--device-ms", "6", "--steps", "150", "--log", self.log,
                                  "--checkpoint-dir", ckpt])
        j = self._await_armed(job, 70, 4, 300)
        dp_before = sorted(sorted(c["member_ranks"]) for c in j["communicators"]
                           if c["kind"] == "COMM_KIND_DP")
        self.assertEqual(dp_before, [[0, 2], [1, 3]], json.dumps(j)[:2000])
        self._run_under_link_cap("4mbit")
        evidence = (_evidence(self.c, self.log) + "\n" + self.c.log("torchrun-node0")[-3000:] +
                    "\n" + self.c.log("torchrun-node1")[-2000:])
        events, e = self._communication_event(evidence)
        links = [(k.get("src_rank", 0), k.get("dst_rank", 0)) for k in e.get("links", [])]
        # Localized to links that cross the nodes (node0: ranks 0, 1; node1: 2, 3).
        self.assertTrue(links, evidence)
        self.assertTrue(all((a < 2) != (b < 2) for a, b in links), f"links {links}\n{evidence}")
        applied = [a for a in e.get("actions", []) if int(a.get("directive_id", 0)) != 0
                   and not a.get("dry_run")]
        s3 = [a for a in applied if a.get("strategy") == "STRATEGY_S3_TOPOLOGY"]
        self.assertEqual(len(s3), 1, evidence)
        self.assertFalse(s3[0].get("revert"), evidence)
        self.assertFalse([a for a in applied
                          if a.get("strategy") == "STRATEGY_S4_CHECKPOINT_RESTART"], evidence)
        self.assertEqual(e.get("state"), "EVENT_STATE_MITIGATING", evidence)  # The cap stayed.
        self._assert_no_false_alarm(events, [e], evidence)
        # Both launchers relaunched every rank in the new layout at the S3 directive's epoch;
        # the controller sees the job at that epoch with each DP communicator inside one node.
        # At the directive's iteration, or a boundary or two later where the ranks agreed on it
        # (falcon.agreement: the ranks held it one boundary before), the same on both nodes.
        effective = int(s3[0]["iteration"])
        relaunched = set()
        for node in ("node0", "node1"):
            m = re.findall(r"S3 at iteration (\d+): relaunch 1 in the layout DP 2 x PP 2 x TP 1 "
                           r"at epoch 1", self.c.log(f"torchrun-{node}"))
            self.assertEqual(len(m), 1, f"{node}: {m}\n{evidence}")
            relaunched.add(int(m[0]))
        self.assertEqual(len(relaunched), 1, f"{relaunched}\n{evidence}")
        at = relaunched.pop()
        self.assertTrue(effective <= at <= effective + 2, f"S3 due at {effective}, applied at "
                        f"{at}\n{evidence}")
        j = self.c.ctl("job", job)
        self.assertEqual(int(j.get("epoch", 0)), 1, evidence)
        self.assertEqual(j["nodes"], ["node0", "node1"], evidence)
        dp_after = sorted(sorted(c["member_ranks"]) for c in j["communicators"]
                          if c["kind"] == "COMM_KIND_DP")
        self.assertEqual(dp_after, [[0, 1], [2, 3]], f"{json.dumps(j)[:2000]}\n{evidence}")
        # Every step ran once, logged by the rank at DP index 0 of the last stage: rank 1 in the
        # replica order, from the relaunch the one the new layout puts there (the job's ranks
        # registered their new places); the loss picks up where it stopped.
        steps = self._steps()
        self.assertEqual([s["step"] for s in steps], list(range(150)), evidence)
        logger = [r.get("rank", 0) for r in j["ranks"]
                  if r.get("dp_index", 0) == 0 and r.get("pp_index", 0) == 1]
        self.assertEqual(len(logger), 1, f"{json.dumps(j)[:2000]}\n{evidence}")
        self.assertTrue(all(s["rank"] == 1 for s in steps[:at]), evidence)
        self.assertTrue(all(s["rank"] == logger[0] for s in steps[at:]), evidence)
        self.assertTrue(all(s["plan"] == [4, 4] for s in steps), evidence)
        loss = [s["loss"] for s in steps]
        before, after = _median(loss[at - 5:at]), _median(loss[at:at + 5])
        self.assertGreater(loss[0] - before, 0.5, evidence)
        self.assertLess(abs(after - before), 0.25 * (loss[0] - before), evidence)
        # The new layout is faster under the cap: the controller kept it, and the job's own
        # step times say how much of the slowdown it recovered.
        onset = int(e["onset_iteration"])
        t = [s["seconds"] for s in steps]
        healthy = _median(t[max(0, onset - 30):onset])
        slow = _median(t[onset + 2:at])
        mitigated = _median(t[at + 4:])
        # The relaunch's cost: from the end of the last step before it to the start of the first
        # one after it (checkpoint, exit, torchrun's start, the rendezvous, the model's load).
        gap = (steps[at]["end_unix_ms"] - steps[at - 1]["end_unix_ms"]) / 1000 - t[at]
        print(f"pytorch dp-link/S3: links {links}, onset {onset}, alarm {e['alarm_iteration']}, "
              f"verdict {e['verdict_iteration']}, S3 due at {effective}, relaunch at {at} "
              f"({gap:.1f} s between "
              f"steps); step time healthy "
              f"{healthy:.3f} s, slow {slow:.3f} s, in the new layout {mitigated:.3f} s: "
              f"{(slow - mitigated) / (slow - healthy):.2f} of the slowdown recovered; loss "
              f"{before:.3f} before, {after:.3f} after")
        self.assertIn(f"plan kept job={job} event={e['event_id']}", self.c.log("controller"),
                      evidence)
        self.assertLess(mitigated, slow, evidence)

    def test_link_cap_is_localized_and_s4_relaunches_the_job_without_the_node(self):
        job = "pt-link"
        self._require_netns()
        # Validation's link passes move 64 KiB (0.26 s across the 2 mbit cap, not 17 s for the
        # default 4 MiB); S3 and S4 cost little, so that the escalation reaches S4 within the run.
        self._start(link_bytes=65536)
        self.c.ctl("settings", "set", "s3_cost_seconds=2", "s4_cost_seconds=5")
        ckpt = os.path.join(self.tmp, "ckpt")  # Shared by the nodes (one file system).
        self.c.start_job(job, 2, JOB_ARGS + ["--steps", "150", "--log", self.log,
                                             "--checkpoint-dir", ckpt])
        self._await_armed(job, 70, 4, 300)
        # One direction only: the activations of both pipelines (128 KiB per step) at 2 mbit/s;
        # the gradients node1 -> node0 keep the full rate. node1's launcher leaves (0), node0's
        # relaunches and finishes (0).
        self._run_under_link_cap("2mbit")
        evidence = _evidence(self.c, self.log) + "\n" + self.c.log("torchrun-node0")[-3000:]
        events, e = self._communication_event(evidence)
        # Slowest first (the verdict's order).
        links = [(k.get("src_rank", 0), k.get("dst_rank", 0)) for k in e.get("links", [])]
        # Localized to the capped direction: the slowest link, and most of them, run from
        # node0's ranks to node1's (the pipeline links 0->2 and 1->3, and the cross pairs 0->3
        # and 1->2 validation measures: all cross the cap); every one crosses the nodes; no NIC.
        # A reverse link may be named beside them: the world ring's pass runs 3->0 together with
        # 1->2, and 3->0's acks queue behind 1->2's data in the capped direction (seen: 0->3
        # x385, 3->0 x27). docs/pytorch.md#tests-and-figures.
        forward = [(a, b) for a, b in links if a in (0, 1) and b in (2, 3)]
        self.assertTrue(links, evidence)
        self.assertIn(links[0], forward, f"links {links}\n{evidence}")
        self.assertGreater(len(forward), len(links) / 2, f"links {links}\n{evidence}")
        self.assertTrue(all((a < 2) != (b < 2) for a, b in links), f"links {links}\n{evidence}")
        self.assertFalse(e.get("nodes"), evidence)
        s4 = [a for a in e.get("actions", [])
              if a.get("strategy") == "STRATEGY_S4_CHECKPOINT_RESTART"
              and int(a.get("directive_id", 0)) != 0 and not a.get("dry_run")]
        self.assertEqual(len(s4), 1, evidence)
        self.assertIn("restart without ranks [2, 3]", s4[0].get("reason", ""), evidence)
        self.assertEqual(e.get("state"), "EVENT_STATE_CLOSED", evidence)
        # S3 came before S4 and was not applied: no better layout (a layout with the pipelines
        # inside the nodes puts the heavier DP all-reduces across the cap).
        s3 = [a.get("reason", "") for a in e.get("actions", [])
              if a.get("strategy") == "STRATEGY_S3_TOPOLOGY"]
        self.assertTrue(s3, evidence)
        self.assertTrue(all("no better layout" in r or "failed" in r for r in s3), evidence)
        self._assert_no_false_alarm(events, [e], evidence)
        # The relaunched job: node0 only, DP=1 x PP=2, at epoch 1.
        j = self.c.ctl("job", job)
        self.assertEqual(int(j.get("epoch", 0)), 1, evidence)
        self.assertEqual(j["nodes"], ["node0"], evidence)
        self.assertEqual(sorted(r.get("rank", 0) for r in j["ranks"]), [0, 1], evidence)
        self.assertIn("excluded this node's ranks ([2, 3]): leaving the job",
                      self.c.log("torchrun-node1"), evidence)
        self.assertIn("relaunch 1 without ranks [2, 3] at epoch 1", self.c.log("torchrun-node0"),
                      evidence)
        # Every step ran once: up to the checkpoint at DP=2 (rank 2 logged), from it at DP=1
        # (rank 1), with the same global batch of 32 micro-batches.
        steps = self._steps()
        self.assertEqual([s["step"] for s in steps], list(range(150)), evidence)
        resumed = next((i for i, s in enumerate(steps) if s["plan"] == [32]), None)
        self.assertIsNotNone(resumed, evidence)
        self.assertTrue(all(s["plan"] == [16, 16] for s in steps[:resumed]), evidence)
        self.assertTrue(all(s["plan"] == [32] for s in steps[resumed:]), evidence)
        self.assertGreater(resumed, 70, evidence)
        # The loss picks up where it stopped: the first steps after the restart are far nearer
        # the last ones before it than the start of training (a fresh model would be back there).
        loss = [s["loss"] for s in steps]
        before = _median(loss[resumed - 5:resumed])
        after = _median(loss[resumed:resumed + 5])
        print(f"pytorch link/S4: links {links} (slowest first), alarm {e['alarm_iteration']}, verdict "
              f"{e['verdict_iteration']}, S4 at {s4[0]['iteration']}, resumed at step "
              f"{resumed}; loss {loss[0]:.3f} at step 0, {before:.3f} before, {after:.3f} after")
        self.assertGreater(loss[0] - before, 0.5, evidence)  # It learned.
        self.assertLess(abs(after - before), 0.25 * (loss[0] - before), evidence)


if __name__ == "__main__":
    unittest.main(verbosity=2)
