"""Tests of the falcon package in one process (a world of one over Gloo) and of the example job's
S2 math over torchrun: environment parsing, communicator ids, init's argument checks, op timing
into the real shim library (no agent: the shim buffers), directive checks, a missing library, and
equal loss trajectories whatever the micro-batch split."""

import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist

import falcon
from falcon import _shim, env, launch

ROOT = os.getcwd()  # The runfiles root (tests run there).
EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "train.py")


def setUpModule():
    global _tmp
    _tmp = tempfile.TemporaryDirectory()
    os.environ.update({"FALCON_JOB": "unit", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                       "FALCON_AGENT_SOCKET": os.path.join(_tmp.name, "absent.sock")})
    store = dist.FileStore(os.path.join(_tmp.name, "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)


def tearDownModule():
    dist.destroy_process_group()
    _tmp.cleanup()


class EnvTest(unittest.TestCase):
    def test_torchrun_variables(self):
        e = env.from_environment({"TORCHELASTIC_RUN_ID": "job7", "RANK": "3", "WORLD_SIZE": "4",
                                  "LOCAL_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "2",
                                  "FALCON_NODE": "n1"})
        self.assertEqual((e.job, e.rank, e.world_size, e.local_rank, e.node, e.restart_count),
                         ("job7", 3, 4, 1, "n1", 2))
        self.assertEqual(e.agent_socket, env.DEFAULT_AGENT_SOCKET)
        self.assertFalse(e.profiling)
        self.assertTrue(env.from_environment({"FALCON_JOB": "j", "RANK": "0", "WORLD_SIZE": "1",
                                              "FALCON_PROFILING": "1"}).profiling)

    def test_slurm_variables(self):
        e = env.from_environment({"SLURM_JOB_ID": "99", "SLURM_PROCID": "5", "SLURM_NTASKS": "8",
                                  "SLURM_LOCALID": "1", "SLURMD_NODENAME": "gpu12"})
        self.assertEqual((e.job, e.rank, e.world_size, e.local_rank, e.node),
                         ("slurm-99", 5, 8, 1, "gpu12"))

    def test_falcon_job_wins_and_torchrun_none_is_no_name(self):
        base = {"RANK": "0", "WORLD_SIZE": "1"}
        self.assertEqual(env.from_environment({**base, "FALCON_JOB": "a",
                                               "TORCHELASTIC_RUN_ID": "b"}).job, "a")
        with self.assertRaisesRegex(env.EnvError, "FALCON_JOB"):
            env.from_environment({**base, "TORCHELASTIC_RUN_ID": "none"})

    def test_bad_values_name_the_variable(self):
        with self.assertRaisesRegex(env.EnvError, "RANK='x' is not an integer"):
            env.from_environment({"FALCON_JOB": "j", "RANK": "x", "WORLD_SIZE": "2"})
        with self.assertRaisesRegex(env.EnvError, "rank 2 is not below the world size 2"):
            env.from_environment({"FALCON_JOB": "j", "RANK": "2", "WORLD_SIZE": "2"})
        with self.assertRaisesRegex(env.EnvError, "WORLD_SIZE=0 is below 1"):
            env.from_environment({"FALCON_JOB": "j", "RANK": "0", "WORLD_SIZE": "0"})
        with self.assertRaisesRegex(env.EnvError, "RANK, SLURM_PROCID"):
            env.from_environment({"FALCON_JOB": "j", "WORLD_SIZE": "2"})
        # Past the shim's 32-bit fields: refused, not wrapped by ctypes (2**64 + 1 became epoch 1).
        base = {"FALCON_JOB": "j", "RANK": "0", "WORLD_SIZE": "1"}
        with self.assertRaisesRegex(env.EnvError, "FALCON_EPOCH=18446744073709551617 is above"):
            env.from_environment({**base, "FALCON_EPOCH": str(2**64 + 1)})
        with self.assertRaisesRegex(env.EnvError, "LOCAL_RANK=4294967296 is above 4294967295"):
            env.from_environment({**base, "LOCAL_RANK": str(2**32)})
        with self.assertRaisesRegex(env.EnvError, "FALCON_AGENT_SOCKET=.* longer than 107"):
            env.from_environment({"FALCON_JOB": "j", "RANK": "0", "WORLD_SIZE": "1",
                                  "FALCON_AGENT_SOCKET": "/" + "s" * 120})
        with self.assertRaisesRegex(env.EnvError, "FALCON_PROFILING='maybe' is not 1/true"):
            env.from_environment({**base, "FALCON_PROFILING": "maybe"})
        for word, on in (("TRUE", True), ("on", True), ("Off", False), ("no", False)):
            self.assertEqual(env.from_environment({**base, "FALCON_PROFILING": word}).profiling,
                             on, word)


class CommIdTest(unittest.TestCase):
    def test_same_on_every_member_and_distinct_by_role_and_job(self):
        a = falcon.comm_id_of("j", "dp", [4, 0])
        self.assertEqual(a, falcon.comm_id_of("j", "dp", [0, 4]))
        self.assertNotEqual(a, falcon.comm_id_of("j", "pp", [0, 4]))
        self.assertNotEqual(a, falcon.comm_id_of("k", "dp", [0, 4]))
        self.assertNotEqual(a, 0)


class LauncherTest(unittest.TestCase):
    def test_adds_redirects_before_the_script_unless_given(self):
        self.assertEqual(launch.torchrun_argv(["--nproc_per_node", "2", "t.py", "--tee", "x"]),
                         ["--nproc_per_node", "2", "--redirects", "1", "--tee", "1", "t.py",
                          "--tee", "x"])
        self.assertEqual(launch.torchrun_argv(["--redirects=3", "-t", "2", "t.py"]),
                         ["--redirects=3", "-t", "2", "t.py"])


# Node 1 of 3 (ranks 2, 3) in static rendezvous.
NODE1_OF_3 = ["--nnodes", "3", "--nproc_per_node", "2", "--node_rank", "1", "--master_addr",
              "10.0.0.1", "--master_port=29000", "t.py", "--steps", "5"]


class RelaunchTest(unittest.TestCase):
    def test_survivors_relaunch_with_fewer_nodes_and_the_excluded_node_leaves(self):
        node2 = list(NODE1_OF_3)
        node2[5] = "2"
        # The new values go just before the script: torchrun takes a flag's last value.
        self.assertEqual(launch.relaunch_argv(node2, {"excluded_ranks": [3, 2]}),
                         node2[:9] + ["--nnodes=2", "--node_rank=1", "--master_port=29001",
                                      "t.py", "--steps", "5"])
        self.assertIsNone(launch.relaunch_argv(NODE1_OF_3, {"excluded_ranks": [2, 3]}))
        # Without --master_port: torchrun's default, plus one; "N:N" node counts are fixed.
        self.assertEqual(
            launch.relaunch_argv(["--nnodes=2:2", "--nproc_per_node", "1", "t.py", "--nnodes",
                                  "9"], {"excluded_ranks": [1]}),
            ["--nnodes=2:2", "--nproc_per_node", "1", "--nnodes=1", "--node_rank=0",
             "--master_port=29501", "t.py", "--nnodes", "9"])
        ns, _ = launch.parse_torchrun(launch.relaunch_argv(node2, {"excluded_ranks": [2, 3]}))
        self.assertEqual((ns.nnodes, ns.node_rank, ns.master_port), ("2", 1, 29001))

    def test_requests_it_cannot_follow_are_named(self):
        for request, why in (({"excluded_ranks": [2]}, r"\[2\] are part of node_rank 1's ranks "
                                                        r"\[2, 3\]: the launcher relaunches "
                                                        "whole nodes"),
                             ({"excluded_ranks": [0, 1]}, "node_rank 0, which holds --master_addr"),
                             ({"excluded_ranks": [6]}, r"\[6\] are not ranks of this job "
                                                      r"\(world 6\)")):
            with self.assertRaisesRegex(launch.RelaunchError, why):
                launch.relaunch_argv(NODE1_OF_3, request)
        # Node 0 itself does not leave quietly (exit 0) either: every launcher hands over.
        node0 = list(NODE1_OF_3)
        node0[5] = "0"
        with self.assertRaisesRegex(launch.RelaunchError, "node_rank 0, which holds"):
            launch.relaunch_argv(node0, {"excluded_ranks": [0, 1]})
        for args, why in ((["--rdzv_backend=c10d"] + NODE1_OF_3, "--rdzv_backend=c10d"),
                          (["--nnodes", "1:3", "--nproc_per_node", "2", "--node_rank", "0",
                            "t.py"], "--nnodes='1:3' is not an integer >= 1"),
                          (["--nnodes", "2", "--nproc_per_node", "auto", "t.py"],
                           "--nproc_per_node='auto' is not an integer"),
                          (["--nnodes", "2", "--node_rank", "2", "t.py"],
                           "--node_rank=2 is not a node of --nnodes=2"),
                          (["--node-rank", "1", "t.py"], "torchrun does not accept")):
            with self.assertRaisesRegex(launch.RelaunchError, why):
                launch.relaunch_argv(args, {"excluded_ranks": [1]})

    def test_max_restarts_is_refused_at_start(self):
        launch.check_supervisable(["--max_restarts", "0", "t.py"])
        launch.check_supervisable(["--nnodes", "1:4", "t.py"])
        for bad in ("0", "abc", "4:1", "1:2:3"):
            with self.assertRaisesRegex(launch.RelaunchError, f"--nnodes='{bad}' is not a node"):
                launch.check_supervisable(["--nnodes", bad, "t.py"])
        with self.assertRaisesRegex(launch.RelaunchError, "--max_restarts=3: torchrun would"):
            launch.check_supervisable(["--max_restarts=3", "t.py"])
        r = subprocess.run([sys.executable, "-m", "falcon.launch", "--max_restarts", "2",
                            "t.py"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--max_restarts=2", r.stderr)

    def test_restart_requests_are_checked_field_by_field(self):
        from falcon.session import write_restart_request
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "restart.json")
            good = {"checkpoint_dir": "/ckpt", "excluded_ranks": [2, 3], "iteration": 40,
                    "epoch": 2}
            write_restart_request(path, good)
            self.assertEqual(launch.read_restart_request(path), good)
            self.assertEqual(os.listdir(tmp), ["restart.json"])  # No temporary file left.
            for text, why in (("{", "not JSON"), ("[1]", "not a JSON object"),
                              ('{"excluded_ranks": []}', '"excluded_ranks" holds \\[\\]'),
                              ('{"excluded_ranks": [1, -2]}', '"excluded_ranks" holds'),
                              ('{"excluded_ranks": [1], "epoch": -1}', '"epoch" holds -1'),
                              ('{"excluded_ranks": [1], "iteration": "x"}', '"iteration" holds'),
                              ('{"excluded_ranks": [1], "checkpoint_dir": 3}',
                               '"checkpoint_dir" holds 3')):
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaisesRegex(launch.RelaunchError, why):
                    launch.read_restart_request(path)


# The layout of a 2-node job, 2 ranks per node, DP 2 x PP 2 with each pipeline on one node.
REPLICA_LAYOUT = {"dp_size": 2, "pp_size": 2, "tp_size": 1,
                  "positions": [[0, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0]], "plan_version": 3}


class LayoutTest(unittest.TestCase):
    def test_a_directives_assignments_make_the_layout(self):
        from falcon import layout
        lay = layout.from_assignments([(2, 1, 0, 0), (0, 0, 0, 0), (3, 1, 1, 0), (1, 0, 1, 0)],
                                      4, plan_version=3)
        self.assertEqual(lay.to_json(), REPLICA_LAYOUT)
        self.assertEqual(layout.from_json(REPLICA_LAYOUT), lay)
        self.assertEqual((lay.dp_size, lay.pp_size, lay.world_size), (2, 2, 4))
        self.assertEqual(lay.position(2), (1, 0, 0))
        self.assertEqual(lay.dp_group(0), [0, 2])  # Stage 0's replicas, by DP index.
        self.assertEqual(lay.pp_group(1), [2, 3])  # Replica 1's stages.
        with self.assertRaisesRegex(layout.LayoutError, "rank 4 is not in the layout's world"):
            lay.position(4)
        for assignments, why in (
                ([(0, 0, 0, 0)], r"assignments: 1 entries, need one per rank \(2\)"),
                ([(0, 0, 0, 0), (0, 1, 0, 0)], r"assignments\[1\].rank: rank 0 is assigned twice"),
                ([(0, 0, 0, 0), (5, 1, 0, 0)], r"assignments\[1\].rank: 5 is not a rank"),
                ([(0, 0, 0, 0), (1, 0, 0, 0)], "= 1 is not the 2 ranks"),
                ([(0, 0, 0, 0), (1, 2**32 - 1, 0, 0)],
                 r"assignments\[1\].dp_index: 4294967295 is not below the world size 2"),
                ([(0, 0, 0, 0), (1, 1, 1, 0)], "dp_size x pp_size x tp_size = 4 is not the 2")):
            with self.assertRaisesRegex(layout.LayoutError, why):
                layout.from_assignments(assignments, 2)
        with self.assertRaisesRegex(layout.LayoutError, "ranks 0 and 1 both sit at dp 0, pp 0"):
            layout.from_assignments([(0, 0, 0, 0), (1, 0, 0, 0), (2, 1, 0, 0), (3, 1, 1, 0)], 4)

    def test_malformed_layouts_are_named_field_by_field(self):
        from falcon import layout

        def bad(**change):
            return dict(REPLICA_LAYOUT, **change)
        for obj, why in (([], "not a JSON object"),
                         (bad(positions=[]), '"positions" holds \\[\\]'),
                         (bad(dp_size=0), '"dp_size" holds 0'),
                         (bad(pp_size=True), '"pp_size" holds True'),
                         (bad(tp_size=2), "= 8 is not the 4 ranks"),
                         (bad(positions=[[0, 0, 0], [0, 1], [1, 0, 0], [1, 1, 0]]),
                          r'"positions"\[1\] holds \[0, 1\]'),
                         (bad(positions=[[0, 0, 0], [0, 2, 0], [1, 0, 0], [1, 1, 0]]),
                          r'"positions"\[1\]: pp index 2 is not below pp_size 2'),
                         (bad(plan_version=-1), '"plan_version" holds -1'),
                         (bad(plan_version=2**63), '"plan_version" holds 9223372036854775808'),
                         (bad(micro_batches=[4]), '"micro_batches" holds \\[4\\], not 2 counts'),
                         (bad(micro_batches=False), '"micro_batches" holds False'),
                         (bad(dp_sizee=2), "unknown fields \\['dp_sizee'\\]")):
            with self.assertRaisesRegex(layout.LayoutError, why):
                layout.from_json(obj, "L")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "layout.json")
            layout.write(path, layout.from_json(REPLICA_LAYOUT))
            self.assertEqual(os.listdir(tmp), ["layout.json"])
            self.assertIsNone(layout.relaunch_layout({"WORLD_SIZE": "4"}))
            self.assertEqual(layout.relaunch_layout({"FALCON_LAYOUT": path, "WORLD_SIZE": "4"}),
                             layout.from_json(REPLICA_LAYOUT))
            with self.assertRaisesRegex(layout.LayoutError, "4 ranks, but WORLD_SIZE is 2"):
                layout.relaunch_layout({"FALCON_LAYOUT": path, "WORLD_SIZE": "2"})
            self.assertEqual(layout.relaunch_layout({"FALCON_LAYOUT": path, "WORLD_SIZE": "²",
                                                     "SLURM_NTASKS": "4"}).world_size, 4)
            with self.assertRaisesRegex(layout.LayoutError, "4 ranks, but SLURM_NTASKS is 8"):
                layout.relaunch_layout({"FALCON_LAYOUT": path, "SLURM_NTASKS": "8"})
            # Whatever the file holds, the error names the variable and the file.
            for data, why in ((b"{", "not JSON"), (b'{"dp_size": "\xff"}', "not UTF-8 text"),
                              (b"[" * 200000, "JSON nested too deep|not JSON"),
                              (b'{"dp_size": ' + b"9" * 5000 + b"}", "not JSON")):
                with open(path, "wb") as f:
                    f.write(data)
                with self.assertRaisesRegex(layout.LayoutError,
                                            f"^FALCON_LAYOUT: {path}: ({why})"):
                    layout.relaunch_layout({"FALCON_LAYOUT": path})
            with self.assertRaisesRegex(layout.LayoutError,
                                        "FALCON_LAYOUT=/nonexistent/l.json: cannot read it"):
                layout.relaunch_layout({"FALCON_LAYOUT": "/nonexistent/l.json"})


class LayerSplitTest(unittest.TestCase):
    SPLIT = {"stage_blocks": [[1, 3], [3, 1]], "micro_batches": [5, 3], "plan_version": 4}

    def test_a_split_is_read_checked_and_carried_by_a_layout(self):
        from falcon import layout
        split = layout.split_from_json(self.SPLIT)
        self.assertEqual((split.dp_size, split.pp_size, split.blocks), (2, 2, 4))
        self.assertEqual(split.to_json(), self.SPLIT)
        self.assertEqual(layout.split_from_json({"stage_blocks": [[2, 2]], "micro_batches": [8]}),
                         layout.LayerSplit(((2, 2),), (8,), 0))
        for obj, why in (([], "not a JSON object"),
                         (dict(self.SPLIT, stage_blocks=[]), '"stage_blocks" holds \\[\\]'),
                         (dict(self.SPLIT, stage_blocks=[[1, 3], [2, 3]]),
                          r'"stage_blocks"\[1\] sums to 5 blocks, not the model\'s 4'),
                         (dict(self.SPLIT, stage_blocks=[[0, 4], [2, 2]]),
                          r'"stage_blocks"\[0\] holds \[0, 4\], not 2 counts in \[1, 4096\]'),
                         (dict(self.SPLIT, stage_blocks=[[1, 3], [4]]),
                          r'"stage_blocks"\[1\] holds \[4\], not 2 counts'),
                         (dict(self.SPLIT, micro_batches=[8]), '"micro_batches" holds \\[8\\], '
                                                               "not 2 counts"),
                         (dict(self.SPLIT, micro_batches=[8, 0]), '"micro_batches" holds'),
                         (dict(self.SPLIT, plan_version=-1), '"plan_version" holds -1'),
                         (dict(self.SPLIT, stage_blockz=1), "unknown fields \\['stage_blockz'\\]")):
            with self.assertRaisesRegex(layout.LayoutError, why):
                layout.split_from_json(obj, "L")
        with self.assertRaisesRegex(layout.LayoutError, "sums to 4 blocks, not the model's 6"):
            layout.layer_split([[2, 2]], [8], blocks=6)
        # An S3 layout carries the split in force; it must fit the layout's sizes.
        lay = layout.from_json(dict(REPLICA_LAYOUT, stage_blocks=[[1, 3], [3, 1]]))
        self.assertEqual(lay.stage_blocks, ((1, 3), (3, 1)))
        self.assertEqual(layout.from_json(lay.to_json()), lay)
        self.assertNotIn("stage_blocks", layout.from_json(REPLICA_LAYOUT).to_json())
        with self.assertRaisesRegex(layout.LayoutError, r'"stage_blocks" holds \[\[4\]\], not 2'):
            layout.from_json(dict(REPLICA_LAYOUT, stage_blocks=[[4]]))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "split.json")
            layout.write_split(path, split)
            self.assertIsNone(layout.relaunch_split({}))
            self.assertEqual(layout.relaunch_split({"FALCON_LAYER_SPLIT": path}), split)
            with open(path, "w") as f:
                json.dump(dict(self.SPLIT, micro_batches=[1]), f)
            with self.assertRaisesRegex(layout.LayoutError,
                                        f"^FALCON_LAYER_SPLIT: {path}: \"micro_batches\""):
                layout.relaunch_split({"FALCON_LAYER_SPLIT": path})
            with self.assertRaisesRegex(layout.LayoutError,
                                        "FALCON_LAYER_SPLIT=/nonexistent/s.json: cannot read it"):
                layout.relaunch_split({"FALCON_LAYER_SPLIT": "/nonexistent/s.json"})

    def test_the_even_split_is_the_controllers(self):
        # common::EvenStageBlocks (common/layer_split_test.cc pins the same table): the later
        # stages get the extra blocks.
        from falcon import layout
        for blocks, stages, want in ((16, 2, [8, 8]), (7, 3, [2, 2, 3]), (10, 4, [2, 3, 2, 3]),
                                     (5, 2, [2, 3]), (4, 4, [1, 1, 1, 1]), (4096, 3,
                                                                            [1365, 1365, 1366])):
            self.assertEqual(layout.even_stage_blocks(blocks, stages), want)
            self.assertEqual(want, [(s + 1) * blocks // stages - s * blocks // stages
                                    for s in range(stages)])
        for blocks, stages in ((2, 3), (4, 0), (4097, 2), (4.0, 2)):
            with self.assertRaisesRegex(ValueError, "even_stage_blocks"):
                layout.even_stage_blocks(blocks, stages)
        self.assertTrue(layout.is_even_split([[2, 2, 3], [3, 3]]))
        self.assertTrue(layout.is_even_split([]))
        self.assertFalse(layout.is_even_split([[2, 2, 3], [3, 2, 2]]))

    def test_s2l_requests_relaunch_in_place_and_are_checked(self):
        from falcon.session import write_restart_request
        request = {"excluded_ranks": [], "layer_split": self.SPLIT}
        self.assertEqual(launch.relaunch_argv(NODE1_OF_3, request),
                         NODE1_OF_3[:9] + ["--nnodes=3", "--node_rank=1", "--master_port=29001",
                                           "t.py", "--steps", "5"])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "restart.json")
            good = {"checkpoint_dir": "", "iteration": 40, "epoch": 2, "layer_split": self.SPLIT}
            write_restart_request(path, good)
            self.assertEqual(launch.read_restart_request(path), dict(good, excluded_ranks=[]))
            for bad, why in (
                    (dict(good, excluded_ranks=[3]), '"excluded_ranks" holds \\[3\\] beside a '
                                                     '"layer_split"'),
                    (dict(good, layout=REPLICA_LAYOUT), '"layer_split" beside a "layout"'),
                    (dict(good, layer_split=dict(self.SPLIT, micro_batches=[])),
                     '"layer_split": "micro_batches" holds \\[\\]')):
                write_restart_request(path, bad)
                with self.assertRaisesRegex(launch.RelaunchError, why):
                    launch.read_restart_request(path)


class S3RelaunchTest(unittest.TestCase):
    def test_an_s3_request_relaunches_every_node_in_place(self):
        six = {"dp_size": 3, "pp_size": 2, "tp_size": 1,
               "positions": [[d, p, 0] for p in range(2) for d in range(3)]}
        self.assertEqual(launch.relaunch_argv(NODE1_OF_3, {"excluded_ranks": [], "layout": six}),
                         NODE1_OF_3[:9] + ["--nnodes=3", "--node_rank=1", "--master_port=29001",
                                           "t.py", "--steps", "5"])
        with self.assertRaisesRegex(launch.RelaunchError, "the S3 layout places 4 ranks, but "
                                                          "--nnodes 3 x --nproc_per_node 2 run 6"):
            launch.relaunch_argv(NODE1_OF_3, {"excluded_ranks": [], "layout": REPLICA_LAYOUT})

    def test_s3_requests_are_checked(self):
        from falcon.session import write_restart_request
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "restart.json")
            good = {"checkpoint_dir": "", "excluded_ranks": [], "iteration": 40, "epoch": 2,
                    "layout": REPLICA_LAYOUT}
            write_restart_request(path, good)
            self.assertEqual(launch.read_restart_request(path), good)
            for request, why in (
                    (dict(good, excluded_ranks=[3]), '"excluded_ranks" holds \\[3\\] beside a '
                                                     '"layout"'),
                    (dict(good, layout=dict(REPLICA_LAYOUT, dp_size=3)),
                     '"layout": dp_size x pp_size x tp_size = 6'),
                    (dict(good, layout=[]), '"layout": not a JSON object'),
                    (dict(good, epoch=2**32), '"epoch" holds 4294967296, not an integer in '
                                              r'\[0, 4294967295\]')):
                write_restart_request(path, request)
                with self.assertRaisesRegex(launch.RelaunchError, why):
                    launch.read_restart_request(path)


# A stand-in job for the launcher's S4 loop: each rank notes its world and epoch; in the first
# launch local rank 0 of every node leaves a restart request excluding rank 1 (node 1) and every
# rank exits with RESTART_EXIT_CODE, as the session does on an S4 directive.
FAKE_JOB = """
import json, os, sys
from falcon.session import RESTART_EXIT_CODE, write_restart_request
epoch = os.environ.get("FALCON_EPOCH", "")
with open(os.path.join(os.environ["FAKE_OUT"], f"epoch{epoch or 0}-rank{os.environ['RANK']}"),
          "w") as f:
    json.dump({"world": int(os.environ["WORLD_SIZE"]), "node": os.environ["FAKE_NODE"]}, f)
if not epoch:
    if os.environ["LOCAL_RANK"] == "0":
        write_restart_request(os.environ["FALCON_RESTART_FILE"],
                              {"checkpoint_dir": "", "excluded_ranks": [1], "iteration": 7,
                               "epoch": 5})
    sys.exit(RESTART_EXIT_CODE)
"""


# The same for S3: in the first launch local rank 0 of every node leaves a request for the layout
# REPLICA_LAYOUT's 2-rank cousin (ranks swapped); the relaunch notes FALCON_LAYOUT's layout.
FAKE_S3_JOB = """
import json, os, sys
from falcon import relaunch_layout
from falcon.session import RESTART_EXIT_CODE, write_restart_request
epoch = os.environ.get("FALCON_EPOCH", "")
layout = relaunch_layout()
with open(os.path.join(os.environ["FAKE_OUT"], f"epoch{epoch or 0}-rank{os.environ['RANK']}"),
          "w") as f:
    json.dump({"world": int(os.environ["WORLD_SIZE"]), "node": os.environ["FAKE_NODE"],
               "position": list(layout.position(int(os.environ["RANK"]))) if layout else None}, f)
if not epoch:
    if os.environ["LOCAL_RANK"] == "0":
        write_restart_request(os.environ["FALCON_RESTART_FILE"],
                              {"checkpoint_dir": "", "excluded_ranks": [], "iteration": 7,
                               "epoch": 4, "layout": {"dp_size": 1, "pp_size": 2, "tp_size": 1,
                                                      "positions": [[0, 1, 0], [0, 0, 0]],
                                                      "plan_version": 2}})
    sys.exit(RESTART_EXIT_CODE)
"""


# The same for S2L: in the first launch local rank 0 of every node leaves a layer split request; the
# relaunch notes FALCON_LAYER_SPLIT's split (and that its places are the default ones still).
FAKE_S2L_JOB = """
import json, os, sys
from falcon import relaunch_layout, relaunch_split
from falcon.session import RESTART_EXIT_CODE, write_restart_request
epoch = os.environ.get("FALCON_EPOCH", "")
split = relaunch_split()
with open(os.path.join(os.environ["FAKE_OUT"], f"epoch{epoch or 0}-rank{os.environ['RANK']}"),
          "w") as f:
    json.dump({"world": int(os.environ["WORLD_SIZE"]), "layout": relaunch_layout() is not None,
               "split": split.to_json() if split else None}, f)
if not epoch:
    if os.environ["LOCAL_RANK"] == "0":
        write_restart_request(os.environ["FALCON_RESTART_FILE"],
                              {"checkpoint_dir": "", "excluded_ranks": [], "iteration": 9,
                               "epoch": 3, "layer_split": {"stage_blocks": [[1, 3]],
                                                           "micro_batches": [8],
                                                           "plan_version": 6}})
    sys.exit(RESTART_EXIT_CODE)
"""


def _run_launchers(tmp, job_text):
    """Two falcon.launch processes (nodes 0 and 1, one rank each) running `job_text`; their
    (exit status, output)."""
    job = os.path.join(tmp, "fake_job.py")
    with open(job, "w") as f:
        f.write(job_text)
    port = _free_port()
    launchers = []
    for node in (0, 1):
        e = dict(os.environ, FAKE_OUT=tmp, FAKE_NODE=str(node), FALCON_JOB="relaunch")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "FALCON_EPOCH", "FALCON_RESTART_FILE",
                  "FALCON_LAYOUT", "FALCON_LAYER_SPLIT"):
            e.pop(k, None)
        launchers.append(subprocess.Popen(
            [sys.executable, "-m", "falcon.launch", "--nnodes", "2", "--nproc_per_node",
             "1", "--node_rank", str(node), "--master_addr", "127.0.0.1",
             "--master_port", str(port), "--log_dir", os.path.join(tmp, f"logs{node}"),
             job], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return [(p.returncode, out) for p, out in
            ((p, p.communicate(timeout=240)[0]) for p in launchers)]


class SupervisionTest(unittest.TestCase):
    def test_a_launcher_told_to_stop_before_torchrun_starts_stops_it(self):
        # The SIGTERM came while a relaunch was prepared: the new torchrun is stopped at once,
        # its job never runs to the end.
        with tempfile.TemporaryDirectory() as tmp:
            job = os.path.join(tmp, "slow.py")
            done = os.path.join(tmp, "done")
            with open(job, "w") as f:
                f.write(f"import time\ntime.sleep(60)\nopen({done!r}, 'w').close()\n")
            e = dict(os.environ, FALCON_JOB="stopped")
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                e.pop(k, None)
            torchrun = launch._Torchrun()
            torchrun.stopping = True
            rc = torchrun.run(launch.torchrun_argv(
                ["--nnodes", "1", "--nproc_per_node", "1", "--master_port", str(_free_port()),
                 "--log_dir", os.path.join(tmp, "logs"), job]), e)
            self.assertNotEqual(rc, 0)
            self.assertFalse(os.path.exists(done))

    def test_an_s3_exit_relaunches_every_node_in_the_new_layout(self):
        with tempfile.TemporaryDirectory() as tmp:
            results = _run_launchers(tmp, FAKE_S3_JOB)
            for rc, out in results:
                self.assertEqual(rc, 0, out[-3000:])
                self.assertIn("S3 at iteration 7: relaunch 1 in the layout DP 1 x PP 2 x TP 1 at "
                              "epoch 4", out)

            def noted(name):
                with open(os.path.join(tmp, name)) as f:
                    return json.load(f)
            self.assertEqual(noted("epoch0-rank0"), {"world": 2, "node": "0", "position": None})
            self.assertEqual(noted("epoch4-rank0"), {"world": 2, "node": "0",
                                                     "position": [0, 1, 0]})
            self.assertEqual(noted("epoch4-rank1"), {"world": 2, "node": "1",
                                                     "position": [0, 0, 0]})

    def test_an_s2l_exit_relaunches_every_node_in_place_with_the_split(self):
        with tempfile.TemporaryDirectory() as tmp:
            results = _run_launchers(tmp, FAKE_S2L_JOB)
            for rc, out in results:
                self.assertEqual(rc, 0, out[-3000:])
                self.assertIn("S2L at iteration 9: relaunch 1 with the layer split [[1, 3]] and "
                              "micro-batches [8] at epoch 3", out)
            for rank in (0, 1):
                with open(os.path.join(tmp, f"epoch0-rank{rank}")) as f:
                    self.assertEqual(json.load(f), {"world": 2, "layout": False, "split": None})
                with open(os.path.join(tmp, f"epoch3-rank{rank}")) as f:
                    self.assertEqual(json.load(f), {
                        "world": 2, "layout": False,
                        "split": {"stage_blocks": [[1, 3]], "micro_batches": [8],
                                  "plan_version": 6}})

    def test_an_s4_exit_relaunches_the_survivors_and_the_excluded_node_leaves(self):
        with tempfile.TemporaryDirectory() as tmp:
            results = _run_launchers(tmp, FAKE_JOB)
            for rc, out in results:
                self.assertEqual(rc, 0, out[-3000:])
            outs = [out for _, out in results]
            self.assertIn("excluded this node's ranks ([1]): leaving the job", outs[1])
            self.assertIn("relaunch 1 without ranks [1] at epoch 5", outs[0])

            def noted(name):
                with open(os.path.join(tmp, name)) as f:
                    return json.load(f)
            self.assertEqual(noted("epoch0-rank0"), {"world": 2, "node": "0"})
            self.assertEqual(noted("epoch0-rank1"), {"world": 2, "node": "1"})
            self.assertEqual(noted("epoch5-rank0"), {"world": 1, "node": "0"})
            self.assertFalse(os.path.exists(os.path.join(tmp, "epoch5-rank1")))

    def test_without_a_request_the_launcher_exits_with_torchruns_status(self):
        with tempfile.TemporaryDirectory() as tmp:
            job = os.path.join(tmp, "fails.py")
            with open(job, "w") as f:
                f.write("import sys\nsys.exit(3)\n")
            e = dict(os.environ, FALCON_JOB="fails")
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                e.pop(k, None)
            r = subprocess.run([sys.executable, "-m", "falcon.launch", "--nnodes", "1",
                                "--nproc_per_node", "1", "--master_port", str(_free_port()),
                                "--log_dir", os.path.join(tmp, "logs"), job],
                               env=e, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 1, r.stderr[-2000:])  # torchrun's, for a failed worker.
            self.assertNotIn("falcon.launch", r.stderr)


def _directive(kind, counts=(), version=1):
    d = _shim.Directive()
    d.struct_size = ctypes.sizeof(d)
    d.kind = kind
    d.plan_version = version
    arr = (ctypes.c_uint32 * max(1, len(counts)))(*counts)
    d.micro_batches = ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint32))
    d.micro_batches_len = len(counts)
    return d, arr


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.fs = falcon.init(global_micro_batches=4, required=True)

    def tearDown(self):
        self.fs.close()

    def test_ops_in_a_step_reach_the_shim_and_async_ones_end_at_wait(self):
        before = self.fs.stats()["records_accepted"]
        with self.fs.step(0) as st:
            t = torch.ones(1000)
            dist.all_reduce(t)
            work = dist.all_reduce(t, async_op=True)
            self.assertIsInstance(work, falcon.ops.TimedWork)
            self.assertEqual(self.fs.stats()["records_accepted"], before + 1)
            work.wait()
            st.loss = 1.5
        self.assertEqual(self.fs.stats()["records_accepted"], before + 2)
        self.assertEqual(self.fs.stats()["connected"], 0)  # No agent: buffered, training goes on.

    def test_an_async_op_ends_when_its_future_completes_once(self):
        before = self.fs.stats()["records_accepted"]
        with self.fs.step(2):
            t = torch.ones(8)
            work = dist.all_reduce(t, async_op=True)
            fut = work.get_future()
            self.assertEqual(fut.wait()[0].tolist(), [1.0] * 8)  # The Work's value.
            self.assertEqual(self.fs.stats()["records_accepted"], before + 1)
            work.wait()  # Already recorded: not twice.
        self.assertEqual(self.fs.stats()["records_accepted"], before + 1)

    def test_ddp_gradient_all_reduces_are_timed_and_the_gradients_unchanged(self):
        from torch.nn.parallel import DistributedDataParallel as DDP
        torch.manual_seed(3)
        plain = torch.nn.Linear(16, 4)
        model = DDP(torch.nn.Linear(16, 4))
        model.module.load_state_dict(plain.state_dict())
        with self.assertRaisesRegex(ValueError, "Linear is not a DistributedDataParallel"):
            self.fs.time_ddp(plain)
        self.assertTrue(self.fs.time_ddp(model))  # On the model's own group (the world here).
        x = torch.randn(5, 16)
        before = self.fs.stats()["records_accepted"]
        with self.fs.step(3):
            model(x).pow(2).sum().backward()
        plain(x).pow(2).sum().backward()
        # One bucket for so small a model: one all-reduce, recorded when DDP's backward waited.
        self.assertEqual(self.fs.stats()["records_accepted"], before + 1)
        for p, q in zip(model.module.parameters(), plain.parameters()):
            self.assertTrue(torch.equal(p.grad, q.grad))
        # A model on a group of its own: the hook reduces over that group, registered as "dp".
        g = dist.new_group([0])
        on_group = DDP(torch.nn.Linear(16, 4), process_group=g)
        self.assertTrue(self.fs.time_ddp(on_group))
        self.assertEqual(self.fs._groups.get(id(g)), falcon.comm_id_of("unit", "dp", [0]))
        before = self.fs.stats()["records_accepted"]
        with self.fs.step(4):
            on_group(x).sum().backward()
        self.assertEqual(self.fs.stats()["records_accepted"], before + 1)

    def test_positional_group_and_async_op_are_read(self):
        g = dist.new_group([0])
        cid = falcon.comm_id_of("unit", "unknown", [0])
        with self.fs.step(1):
            dist.all_reduce(torch.ones(4), dist.ReduceOp.SUM, g)
            self.assertEqual(self.fs._groups.get(id(g)), cid)
            work = dist.all_reduce(torch.ones(4), dist.ReduceOp.SUM, g, True)
            self.assertIsInstance(work, falcon.ops.TimedWork)
            work.wait()

    def test_bad_steps_groups_and_members_are_named(self):
        for bad in ("x", 1.5, None, -1, 2**70, True):
            with self.assertRaisesRegex(ValueError, "step iteration"):
                self.fs.step(bad)
        with self.assertRaisesRegex(ValueError, "'notagroup' is not a process group"):
            self.fs.register_group("notagroup", "dp")
        for members, why in (([0, 2**40], "member 1099511627776"), ([0, -1], "member -1"),
                             ([0, 0], "repeat a rank")):
            with self.assertRaisesRegex(ValueError, why):
                self.fs.register_group(None, "dp", members=members)

    def test_a_second_session_and_a_closed_one_say_so(self):
        with self.assertRaisesRegex(RuntimeError, "already has a session"):
            falcon.init(required=True)
        self.fs.close()
        with self.assertRaisesRegex(RuntimeError, "session is closed"):
            self.fs.step(0)

    def test_close_restores_torch_distributed(self):
        self.assertTrue(hasattr(dist.all_reduce, "__wrapped__"))
        self.fs.close()
        self.assertFalse(hasattr(dist.all_reduce, "__wrapped__"))

    def test_micro_batch_plans_are_checked(self):
        self.assertEqual(self.fs.plan(), [4])
        self.assertEqual(self.fs.loss_scale(), 0.25)
        for counts, why in (((2, 2), "2 counts for 1 DP groups"),
                            ((3,), "sum 3 is not the global 4")):
            d, _keep = _directive(_shim.DIRECTIVE_MICRO_BATCH_PLAN, counts)
            self.assertIn(why, self.fs._apply(d))
        d, _keep = _directive(_shim.DIRECTIVE_MICRO_BATCH_PLAN, (4,), version=3)
        self.assertIsNone(self.fs._apply(d))
        self.assertEqual(self.fs._plan_version, 3)

    def test_restart_checkpoints_and_keeps_the_request_for_the_launcher(self):
        seen = []
        self.fs._checkpoint_fn = lambda *args: seen.append(args)
        d, _keep = _directive(_shim.DIRECTIVE_CHECKPOINT_RESTART)
        excluded = (ctypes.c_uint32 * 2)(2, 3)
        d.excluded_ranks = ctypes.cast(excluded, ctypes.POINTER(ctypes.c_uint32))
        d.excluded_ranks_len = 2
        d.checkpoint_dir = b"/ckpt"
        d.effective_iteration = 40
        d.epoch = 2
        # Applied at boundary 41 (the ranks agreed on it one boundary late): the checkpoint and
        # the relaunch are at 41, where the job stopped, so no step runs twice.
        self.fs._boundary = 41
        self.assertIsNone(self.fs._apply(d))
        self.assertEqual(seen, [("/ckpt", 41, [2, 3])])
        self.assertEqual(self.fs._restart, {"checkpoint_dir": "/ckpt", "excluded_ranks": [2, 3],
                                            "iteration": 41, "epoch": 2})
        # The exit: local rank 0 leaves the request for the launcher, then exit code 75.
        import dataclasses
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "restart.json")
            self.fs.env = dataclasses.replace(self.fs.env, restart_file=path)
            with self.assertRaises(SystemExit) as exited:
                self.fs._exit_for_restart()
            self.assertEqual(exited.exception.code, falcon.RESTART_EXIT_CODE)
            self.assertEqual(launch.read_restart_request(path), self.fs._restart)

    def test_a_topology_change_of_other_sizes_is_refused(self):
        from falcon.session import Session
        penv = env.ProcessEnv(job="sizes", rank=0, world_size=4, local_rank=0, node="n",
                              agent_socket="/nonexistent.sock", restart_count=0,
                              restart_file="/nonexistent/restart.json")
        s = Session(penv, None, dp_size=2, pp_size=2, tp_size=1, dp_index=0, pp_index=0,
                    tp_index=0, global_micro_batches=8, checkpoint_fn=lambda *a: None,
                    time_ops=False, validation_group=None)
        d, keep = _directive(_shim.DIRECTIVE_TOPOLOGY_CHANGE, version=2)
        arr = (_shim.RankAssignment * 4)()
        for r in range(4):
            arr[r].rank, arr[r].dp_index = r, r
        d.assignments = ctypes.cast(arr, ctypes.POINTER(_shim.RankAssignment))
        d.assignments_len = 4
        self.assertIn("the layout is DP 4 x PP 1 x TP 1, the job runs DP 2 x PP 2 x TP 1",
                      s._apply(d))
        self.assertIsNone(s._restart)

    def _split_session(self, world=4, split=None, validation_group="vgroup"):
        """A DP 2 x PP 2 session of rank 0 (DP index 1) over 4 blocks, without a shim; its
        checkpoint calls go to .seen, its live-split agreement all_reduce to .reduced."""
        from falcon.session import Session
        penv = env.ProcessEnv(job="s2l", rank=0, world_size=world, local_rank=0, node="n",
                              agent_socket="/nonexistent.sock", restart_count=0)
        seen = []
        s = Session(penv, None, dp_size=2, pp_size=2, tp_size=1, dp_index=1, pp_index=0,
                    tp_index=0, global_micro_batches=8, checkpoint_fn=lambda *a: seen.append(a),
                    time_ops=False, validation_group=validation_group, pipeline_blocks=4,
                    split=split)
        s.seen, s.reduced = seen, []
        s._all_reduce = lambda flags, group: s.reduced.append((flags.tolist(), group))
        return s

    @staticmethod
    def _split(stage_blocks, plan, version=4, epoch=2):
        d, keep = _directive(_shim.DIRECTIVE_LAYER_SPLIT, plan, version=version)
        flat = [b for stages in stage_blocks for b in stages]
        arr = (ctypes.c_uint32 * len(flat))(*flat)
        d.stage_blocks = ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint32))
        d.stage_blocks_len = len(flat)
        d.pp_stages = len(stage_blocks[0])
        d.epoch = epoch
        return d, (keep, arr)

    def test_layer_splits_are_checked_then_applied_live_or_at_a_relaunch(self):
        s = self._split_session()
        self.assertIsNone(s.layer_split())
        self.assertIsNone(s.stage_blocks())
        split = self._split
        for stage_blocks, plan, why in (
                ([[1, 3]], [8], "a split of DP 1 x PP 2, the job runs DP 2 x PP 2"),
                ([[1, 3], [2, 1]], [5, 3], r'"stage_blocks"\[1\] sums to 3 blocks'),
                ([[1, 2], [2, 1]], [5, 3], "sums to 3 blocks, not the model's 4"),
                ([[1, 3], [3, 1]], [5, 4], "micro_batches sum to 9, not the global 8"),
                ([[1, 3], [3, 1]], [8, 0], '"micro_batches" holds')):
            d, _keep = split(stage_blocks, plan)
            self.assertRegex(s._apply(d), why)
        # Live: the script's function moves the layers, then the ranks agree on the outcome (an
        # all_reduce of a flag per rank on the validation group: here every flag stays 0).
        applied = []
        s.on_layer_split(lambda blocks, plan: applied.append((blocks, plan)))
        d, _keep = split([[1, 3], [3, 1]], [5, 3], version=7)
        self.assertIsNone(s._apply(d))
        self.assertEqual(applied, [([[1, 3], [3, 1]], [5, 3])])
        self.assertEqual(s.reduced, [([0, 0, 0, 0], "vgroup")])
        self.assertEqual((s.layer_split(), s.stage_blocks(), s.plan(), s._plan_version),
                         ([[1, 3], [3, 1]], [3, 1], [5, 3], 7))
        # A revert to the even split: layer_split() is None again (the controller's even rule).
        d, _keep = split([[2, 2], [2, 2]], [4, 4], version=8)
        self.assertIsNone(s._apply(d))
        self.assertEqual((s.layer_split(), s.stage_blocks(), s.plan(), s._plan_version),
                         (None, None, [4, 4], 8))
        with self.assertRaisesRegex(ValueError, "on_layer_split: 3 is not callable"):
            s.on_layer_split(3)
        # Without a live applier: a relaunch, which needs falcon.launch.
        s.on_layer_split(None)
        d, _keep = split([[1, 3], [3, 1]], [5, 3], version=9)
        self.assertIn("FALCON_RESTART_FILE is unset", s._apply(d))
        s._checkpoint_fn = None
        self.assertIn("no checkpoint callback", s._apply(d))
        s._checkpoint_fn = lambda *a: s.seen.append(a)
        import dataclasses
        s.env = dataclasses.replace(s.env, restart_file="/nonexistent/restart.json")
        s._boundary = 33
        self.assertIsNone(s._apply(d))
        self.assertEqual(s.seen, [("", 33, [])])
        self.assertEqual(s._restart, {
            "checkpoint_dir": "", "excluded_ranks": [], "iteration": 33, "epoch": 2,
            "layer_split": {"stage_blocks": [[1, 3], [3, 1]], "micro_batches": [5, 3],
                            "plan_version": 9}})
        later, _keep = _directive(_shim.DIRECTIVE_MICRO_BATCH_PLAN, (4, 4), version=10)
        self.assertIn("exiting for a relaunch (S2L at iteration 33)", s._apply(later))

    def test_a_live_split_that_fails_on_any_rank_stops_every_rank(self):
        d, _keep = self._split([[1, 3], [3, 1]], [5, 3], version=7)

        def refuse(blocks, plan):
            raise RuntimeError("stage 0 is out of memory")
        # It fails here: every rank learns it (this rank's flag), none commits, the job stops.
        s = self._split_session()
        s.on_layer_split(refuse)
        s._boundary = 12
        why = s._apply(d)
        self.assertEqual(why, "layer_split applied live at iteration 12: it failed on rank(s) [0] "
                              "of 4 (here: stage 0 is out of memory); ranks that moved layers "
                              "cannot move them back alone, so the ranks' models no longer "
                              "agree: the job stops (resume it from its last checkpoint)")
        self.assertEqual(s.reduced, [([1, 0, 0, 0], "vgroup")])
        self.assertEqual((s.layer_split(), s.plan(), s._plan_version), (None, [4, 4], 0))
        with self.assertRaisesRegex(RuntimeError, "^falcon: layer_split applied live at "
                                                  "iteration 12: it failed on rank"):
            s._stop_after_failed_split()
        self.assertTrue(s._closed)
        # It moved the layers here but failed on rank 2: this rank does not commit either.
        s = self._split_session()
        moved = []
        s.on_layer_split(lambda blocks, plan: moved.append(blocks))

        def rank2_failed(flags, group):
            flags[2] += 1
        s._all_reduce = rank2_failed
        self.assertRegex(s._apply(d), r"it failed on rank\(s\) \[2\] of 4; ranks that moved")
        self.assertEqual(len(moved), 1)
        self.assertEqual((s.layer_split(), s.plan(), s._plan_version), (None, [4, 4], 0))
        self.assertIsNotNone(s._split_failure)
        # The agreement itself fails (a dead peer): the outcome is unknown, the job stops.
        s = self._split_session()
        s.on_layer_split(lambda blocks, plan: None)

        def dead_peer(flags, group):
            raise RuntimeError("connection reset by rank 3")
        s._all_reduce = dead_peer
        self.assertIn("the ranks could not agree on its outcome (connection reset by rank 3)",
                      s._apply(d))
        self.assertIsNone(s.layer_split())
        # Without the validation group (falcon.init(validation_group=False)) the ranks cannot
        # agree: refused before the function runs.
        s = self._split_session(validation_group=None)
        s.on_layer_split(refuse)
        self.assertIn("needs the ranks to agree on its outcome", s._apply(d))
        self.assertIsNone(s._split_failure)
        # A world of one agrees with itself, without a collective.
        s = self._split_session(world=1)
        s.on_layer_split(lambda blocks, plan: None)
        self.assertIsNone(s._apply(d))
        self.assertEqual((s.reduced, s.layer_split()), ([], [[1, 3], [3, 1]]))

    def test_a_relaunched_session_acks_the_directive_it_was_relaunched_for(self):
        # The S2L relaunch's ack was lost at the exit (a layer split keeps the epoch): the
        # controller sends the same directive again, which must not relaunch the job again.
        from falcon import layout
        s = self._split_session(split=layout.LayerSplit(((1, 3), (3, 1)), (5, 3), 4))
        import dataclasses
        s.env = dataclasses.replace(s.env, restart_file="/nonexistent/restart.json")
        self.assertEqual((s.layer_split(), s.plan(), s._plan_version),
                         ([[1, 3], [3, 1]], [5, 3], 4))
        for version in (4, 3):  # The same directive, or an older plan.
            d, _keep = self._split([[1, 3], [3, 1]], [5, 3], version=version)
            self.assertIsNone(s._apply(d))
            plan, _keep = _directive(_shim.DIRECTIVE_MICRO_BATCH_PLAN, (4, 4), version=version)
            self.assertIsNone(s._apply(plan))
        self.assertEqual((s.seen, s._restart, s.plan(), s._plan_version), ([], None, [5, 3], 4))
        # A newer plan is applied (here at a relaunch: no live applier).
        d, _keep = self._split([[2, 2], [2, 2]], [4, 4], version=5)
        self.assertIsNone(s._apply(d))
        self.assertEqual(s._restart["layer_split"]["plan_version"], 5)
        # A relaunch into the even split: no split in force.
        s = self._split_session(split=layout.LayerSplit(((2, 2), (2, 2)), (4, 4), 6))
        self.assertEqual((s.layer_split(), s.stage_blocks(), s._plan_version), (None, None, 6))

    def test_restart_without_a_checkpoint_callback_is_refused(self):
        d, _keep = _directive(_shim.DIRECTIVE_CHECKPOINT_RESTART)
        self.assertIn("no checkpoint callback", self.fs._apply(d))

    def test_topology_change_checkpoints_and_leaves_the_layout_for_the_launcher(self):
        import dataclasses

        def topology(*assignments):
            d, keep = _directive(_shim.DIRECTIVE_TOPOLOGY_CHANGE, version=5)
            arr = (_shim.RankAssignment * len(assignments))()
            for i, (r, dp, pp, tp) in enumerate(assignments):
                arr[i].rank, arr[i].dp_index, arr[i].pp_index, arr[i].tp_index = r, dp, pp, tp
            d.assignments = ctypes.cast(arr, ctypes.POINTER(_shim.RankAssignment))
            d.assignments_len = len(assignments)
            d.effective_iteration, d.epoch = 30, 3
            return d, (keep, arr)
        d, _keep = topology((0, 0, 0, 0))
        self.assertIn("topology_change: no checkpoint callback", self.fs._apply(d))
        seen = []
        self.fs._checkpoint_fn = lambda *args: seen.append(args)
        self.assertIn("FALCON_RESTART_FILE is unset", self.fs._apply(d))
        self.fs.env = dataclasses.replace(self.fs.env, restart_file="/nonexistent/restart.json")
        for bad, why in ((((0, 0, 0, 0), (0, 0, 0, 0)), "2 entries, need one per rank (1)"),
                         (((1, 0, 0, 0),), "assignments[0].rank: 1 is not a rank")):
            d, _keep = topology(*bad)
            self.assertIn(why, self.fs._apply(d))
        self.assertEqual(seen, [])
        d, _keep = topology((0, 0, 0, 0))
        d.epoch = 2**32
        self.assertIn("epoch 4294967296 is above 4294967295", self.fs._apply(d))
        d, _keep = topology((0, 0, 0, 0))
        self.fs._boundary = 30
        self.assertIsNone(self.fs._apply(d))
        self.assertEqual(seen, [("", 30, [])])
        # Directives after it in the same poll are refused: the relaunch would lose them.
        for later in (_directive(_shim.DIRECTIVE_MICRO_BATCH_PLAN, (4,), version=6),
                      _directive(_shim.DIRECTIVE_CHECKPOINT_RESTART)):
            self.assertIn("the job is exiting for a relaunch (S3 at iteration 30)",
                          self.fs._apply(later[0]))
        self.assertEqual(seen, [("", 30, [])])
        # The plan in force goes on (the DP size is the same); the directive's version with it.
        self.assertEqual(self.fs._restart, {
            "checkpoint_dir": "", "excluded_ranks": [], "iteration": 30, "epoch": 3,
            "layout": {"dp_size": 1, "pp_size": 1, "tp_size": 1, "positions": [[0, 0, 0]],
                       "plan_version": 5, "micro_batches": [4]}})

    def test_link_passes_run_only_while_paused_and_meet_their_peer_first(self):
        from falcon import validation
        task = _shim.ValidationTask()
        task.kind, task.task_id, task.repeats, task.link_bytes = _shim.VALIDATION_LINK_PASS, 9, 1, 8
        links = (_shim.Link * 1)()
        links[0].src_rank, links[0].dst_rank = 0, 0
        task.links = ctypes.cast(links, ctypes.POINTER(_shim.Link))
        task.links_len = 1
        result = _shim.ValidationResult()
        err = ctypes.create_string_buffer(256)
        result.error = ctypes.addressof(err)
        result.error_capacity = 256
        self.assertEqual(self.fs._on_validation(None, ctypes.pointer(task),
                                                ctypes.pointer(result)), 1)
        self.assertIn(b"link pass of task 9 not run: rank 0 is not paused", err.value)
        # The meeting through the store: a peer that never comes is given up after the timeout
        # (a fake clock: no waiting), and at once for the rest of the pause.
        store = dist.distributed_c10d._get_default_store()
        now = [0.0]

        def sleep(s):
            now[0] += s
        meeting = validation.Rendezvous(store, "unit", timeout_s=5, sleep=sleep,
                                        clock=lambda: now[0])
        with self.assertRaisesRegex(validation.PeerAbsent,
                                    "rank 3 did not come to link 0->3 of task 4 within 5 s"):
            meeting.meet(4, 0, 3, 0)
        self.assertGreaterEqual(now[0], 5)
        with self.assertRaisesRegex(validation.PeerAbsent, "rank 3 did not come to an earlier"):
            meeting.meet(5, 3, 0, 0)
        store.add("falcon/unit/validation/6/2-0", 1)  # Rank 2 came first.
        meeting.meet(6, 2, 0, 0)
        self.fs._on_pause(None, 1)
        self.fs._on_pause(None, 0)  # The end of a pause forgets the absent peers.
        self.assertTrue(self.fs._paused is False)

    def test_validation_gemm(self):
        from falcon import validation
        ns, flops = validation.gemm(32, 32, 32, 2, self.fs.now_ns)
        self.assertGreater(ns, 0)
        self.assertAlmostEqual(flops, 2 * 32 ** 3 / (ns * 1e-9))
        with self.assertRaisesRegex(ValueError, "gemm 0x32x32"):
            validation.gemm(0, 32, 32, 2, self.fs.now_ns)
        # A CPU job's session runs it on the CPU; a named device is where it runs.
        self.assertEqual(self.fs.device, torch.device("cpu"))
        ns, _ = validation.gemm(16, 8, 4, 1, self.fs.now_ns, device="cpu")
        self.assertGreater(ns, 0)


class InitTest(unittest.TestCase):
    def test_bad_arguments_are_named(self):
        for kwargs, why in (({"dp_size": 0}, "dp_size=0"),
                            ({"dp_index": 1}, r"dp_index=1 is not in \[0, 1\)"),
                            ({"dp_size": 2, "dp_index": 0}, "is not the world size 1"),
                            ({"global_micro_batches": 0}, "global_micro_batches=0"),
                            ({"global_micro_batches": 2**32 + 3},
                             r"global_micro_batches=4294967299 must be an integer in"),
                            ({"pp_size": 2**32}, r"pp_size=4294967296 must be an integer in"),
                            ({"pipeline_blocks": -1}, r"pipeline_blocks=-1 must be 0 \(unknown\)"),
                            ({"pp_size": 1, "pipeline_blocks": 4097},
                             r"pipeline_blocks=4097 must be 0 \(unknown\) or an integer in "
                             r"\[pp_size \(1\), 4096\]"),
                            ({"pipeline_blocks": True}, "pipeline_blocks=True"),
                            ({"block_state_bytes": 2**50 + 1},
                             r"block_state_bytes=1125899906842625 must be an integer in \[0, "
                             r"2\^50\]"),
                            ({"device": "warp-drive"}, "device='warp-drive' is not a torch device"),
                            ({"device": "cuda:5"}, "device='cuda:5': this process sees")):
            with self.assertRaisesRegex(ValueError, why):
                falcon.init(**kwargs)

    def test_an_s2l_relaunchs_split_must_fit_the_job(self):
        from falcon import layout
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "split.json")
            environment = dict(os.environ, FALCON_LAYER_SPLIT=path)
            layout.write_split(path, layout.LayerSplit(((4,),), (4,), 5))  # A world of one.
            fs = falcon.init(global_micro_batches=4, pipeline_blocks=4, block_state_bytes=1024,
                             environment=environment, required=True)
            try:
                # One stage holding every block is the even split: none in force.
                self.assertEqual((fs.layer_split(), fs.plan(), fs._plan_version),
                                 (None, [4], 5))
            finally:
                fs.close()
            for kwargs, why in (({"pipeline_blocks": 6}, "hold 4 blocks, but pipeline_blocks=6"),
                                ({"global_micro_batches": 3},
                                 r"micro-batch plan \[4\] sums to 4, not global_micro_batches=3")):
                with self.assertRaisesRegex(ValueError, why):
                    falcon.init(**kwargs, environment=environment)
            layout.write_split(path, layout.LayerSplit(((1, 3), (2, 2)), (2, 2), 5))
            with self.assertRaisesRegex(ValueError, "is for DP 2 x PP 2, but init got DP 1 x PP 1"):
                falcon.init(global_micro_batches=4, environment=environment)

    def test_the_default_validation_device(self):
        from types import SimpleNamespace as NS
        from falcon import _default_device

        def fake(available=True, current=0, count=4, bound=None):
            cuda = NS(is_available=lambda: available, current_device=lambda: current,
                      device_count=lambda: count)
            group = NS(bound_device_id=bound)
            c10d = NS(_get_default_group=lambda: group)
            return NS(cuda=cuda, device=torch.device), NS(distributed_c10d=c10d)

        t, d = fake()
        self.assertEqual(_default_device(t, d, False, 2), torch.device("cpu"))  # Gloo world.
        self.assertEqual(_default_device(*fake(available=False), True, 2), torch.device("cpu"))
        self.assertEqual(_default_device(*fake(bound=torch.device("cuda", 3)), True, 1),
                         torch.device("cuda", 3))
        self.assertEqual(_default_device(*fake(current=2), True, 2), torch.device("cuda", 2))
        # Device 0 on local rank 2: the script sets its device after init.
        self.assertEqual(_default_device(*fake(current=0), True, 2), torch.device("cuda", 2))
        # ... unless the node has fewer GPUs (ranks share them).
        self.assertEqual(_default_device(*fake(current=0, count=2), True, 2),
                         torch.device("cuda", 0))

    def test_no_agent_at_the_socket_is_said_once_at_init(self):
        with self.assertLogs("falcon", "WARNING") as logs:
            fs = falcon.init()
        fs.close()
        self.assertTrue(any("no node agent listens at" in line and "absent.sock" in line
                            for line in logs.output), logs.output)

    def test_a_missing_library_runs_untimed_unless_required(self):
        with self.assertLogs("falcon", "WARNING") as logs:
            fs = falcon.init(library="/nonexistent/libfalcon_shim.so")
        self.assertIn("training goes on without Falcon", logs.output[0])
        with fs.step(0):
            dist.all_reduce(torch.ones(2))
        self.assertEqual(fs.stats(), {})
        fs.close()
        with self.assertRaisesRegex(OSError, "/nonexistent/libfalcon_shim.so"):
            falcon.init(library="/nonexistent/libfalcon_shim.so", required=True)
        # A real library that is not the shim: the same, not an AttributeError from ctypes.
        libz = next((p for p in ("/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1")
                     if os.path.exists(p)), None)
        if libz:
            with self.assertRaisesRegex(OSError, "is not the trainer shim library"):
                falcon.init(library=libz, required=True)


class AgreementTest(unittest.TestCase):
    def test_every_rank_applies_what_every_rank_holds_once_due(self):
        from falcon import agreement as ag
        # Directive 7 (due at 10) reached rank 1 late; 9 is due at 12.
        rows = [ag.encode([(7, 10), (9, 12)]), ag.encode([(9, 12)]), ag.encode([(7, 10), (9, 12)])]
        self.assertEqual(ag.agree(rows, 10), [])  # Rank 1 lacks 7: nobody applies it yet.
        self.assertEqual(ag.agree(rows, 12), [9])
        rows[1] = ag.encode([(7, 10), (9, 12)])
        self.assertEqual(ag.agree(rows, 11), [7])  # One boundary late, on every rank.
        self.assertEqual(ag.agree(rows, 12), [7, 9])
        self.assertEqual(ag.agree([ag.encode([])], 5), [])
        # More than MAX_PENDING held: the lowest ids are told; the rest wait.
        many = [(i, 0) for i in range(1, ag.MAX_PENDING + 5)]
        self.assertEqual(ag.agree([ag.encode(many)] * 2, 0), list(range(1, ag.MAX_PENDING + 1)))
        # Directive ids are uint64: one past 2^63 goes through the int64 row and comes back.
        big = 2**64 - 5
        self.assertEqual(ag.agree([ag.encode([(big, 3)])] * 2, 3), [big])
        import torch as _torch
        _torch.tensor(ag.encode([(big, 3)]), dtype=_torch.int64)  # Fits an int64 tensor.
        with self.assertRaisesRegex(ValueError, "rank 0's row is malformed .not integers"):
            ag.agree([[None] * 33], 0)
        # A rank without the shim library: nothing can be agreed (None: each applies its own).
        self.assertIsNone(ag.agree([ag.encode([(7, 1)]), ag.encode(None)], 5))
        self.assertEqual(ag.agree([ag.encode(None)], 5), None)
        for bad in ([0] * 3, [ag.MAX_PENDING + 1] + [0] * (2 * ag.MAX_PENDING), [-2] * 33):
            with self.assertRaisesRegex(ValueError, "rank 1's row is malformed"):
                ag.agree([ag.encode([]), bad], 0)

    def test_the_exchange_goes_through_all_gather(self):
        from falcon import agreement as ag
        calls = []

        def all_gather(out, mine, group=None, async_op=False):
            calls.append((group, async_op))
            for i, t in enumerate(out):
                t.copy_(mine + i)

        rows = ag.exchange(ag.encode([(3, 4)]), "g", 2, all_gather)
        self.assertEqual(calls, [("g", True)])
        self.assertEqual(rows[0][:3], [1, 3, 4])
        self.assertEqual(rows[1][:3], [2, 4, 5])


class ShimLibraryTest(unittest.TestCase):
    def test_default_options_are_the_librarys_in_this_modules_struct(self):
        # falcon_shim_options_init writes the library's whole struct (a newer library's is
        # larger): it goes to a scratch buffer, and Options keeps its own part.
        o = _shim.Shim(_shim.load()).default_options()
        self.assertEqual(o.struct_size, ctypes.sizeof(_shim.Options))
        self.assertEqual((o.gpu, o.dp_index, o.ring_capacity, o.pipeline_blocks,
                          o.block_state_bytes), (-1, -1, 65536, 0, 0))

    def test_the_copy_already_in_the_process_is_the_one_used(self):
        # The NCCL interposer (LD_PRELOAD) brings its libfalcon_shim.so: the package must use
        # that copy, not load a second one (a second session) from FALCON_SHIM_LIB.
        built = _shim.library_path()
        if not built:
            self.skipTest("no libfalcon_shim.so built")
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "libfalcon_shim.so")
            with open(built, "rb") as src, open(copy, "wb") as dst:
                dst.write(src.read())
            code = ("from falcon import _shim; _shim.load(); "
                    "print(sorted({l.split()[-1] for l in open('/proc/self/maps') "
                    "if 'libfalcon_shim' in l}))")
            for preload, want in ((copy, [copy]), ("", [os.path.realpath(built)])):
                run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     env={**os.environ, "LD_PRELOAD": preload,
                                          "FALCON_SHIM_LIB": built}, timeout=60)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertEqual([os.path.realpath(p) for p in eval(run.stdout)],  # noqa: S307
                                 [os.path.realpath(p) for p in want], run.stderr)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_RUNS = {}  # (args, steps, nproc, dp) -> per-step log of a run that needs no checkpoint.


def _run_example(tmp, name, *args, steps=6, nproc=4, dp=2, env=None):
    """The example job's per-step log: `nproc` ranks, --pp 2, --dp `dp` (None: derived), `env`
    added to the environment. Runs without a --checkpoint-dir or `env` are made once per module
    (the same numbers every time)."""
    key = (args, steps, nproc, dp)
    if "--checkpoint-dir" not in args and not env and key in _RUNS:
        return _RUNS[key]
    _RUNS[key] = _run_once(tmp, name, *args, steps=steps, nproc=nproc, dp=dp, env=env or {})
    return _RUNS[key]


def _run_once(tmp, name, *args, steps, nproc, dp, env):
    log = os.path.join(tmp, name + ".jsonl")
    layout = ["--pp", "2"] + (["--dp", str(dp)] if dp else [])
    cmd = [sys.executable, "-m", "falcon.launch", "--nnodes", "1", "--nproc_per_node", str(nproc),
           "--master_port", str(_free_port()), "--log_dir", os.path.join(tmp, name + "-logs"),
           EXAMPLE, *layout, "--steps", str(steps), "--log", log, *args]
    e = dict(os.environ, FALCON_JOB="s2math-" + name)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        e.pop(k, None)
    e.update(env)
    r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    with open(log) as f:
        return [json.loads(line) for line in f]


def _example_module():
    """examples/pytorch/train.py as a module (its functions, in this process)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("falcon_example_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ExampleTest(unittest.TestCase):
    def test_stages_split_evenly_as_the_controller_does_without_touching_the_global_rng(self):
        train = _example_module()
        a = train.parse_args(["--pp", "3", "--layers", "7", "--hidden", "8", "--heads", "2"])
        torch.manual_seed(11)
        want = torch.rand(3)
        torch.manual_seed(11)
        stages = [train.Stage(a, s) for s in range(3)]
        self.assertTrue(torch.equal(torch.rand(3), want))  # Building stages drew nothing.
        self.assertEqual([(s.first_block, len(s.blocks)) for s in stages], [(0, 2), (2, 2), (4, 3)])
        # Each block from its own seed: the same parameters whatever the split.
        other = train.Stage(a, 2, [1, 2, 4])
        mine = dict(stages[2].global_parameters())
        for name, p in other.global_parameters():
            if name in mine:
                self.assertTrue(torch.equal(p, mine[name]), name)

    def test_checkpoints_keep_the_whole_optimizer_state_and_refuse_an_old_format(self):
        train = _example_module()
        a = train.parse_args(["--pp", "1", "--layers", "2", "--hidden", "8", "--heads", "2",
                              "--seq", "4", "--vocab", "16"])
        with tempfile.TemporaryDirectory() as tmp:
            a.checkpoint_dir = tmp
            model = train.Stage(a, 0)
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
            x, _ = train.micro_batch(a, 0, 0)
            model(x).sum().backward()
            opt.step()
            path = os.path.join(tmp, "stage0.pt")
            torch.save(train.checkpoint_state(model, opt, 3), path)
            fresh = train.Stage(a, 0)
            fresh_opt = torch.optim.SGD(fresh.parameters(), lr=1.0, momentum=0.5)
            self.assertEqual(train.resume(a, fresh, fresh_opt, 0), 3)
            self.assertEqual({k: fresh_opt.param_groups[0][k] for k in ("lr", "momentum",
                                                                         "weight_decay")},
                             {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01})
            for (name, p), (_, q) in zip(model.global_parameters(), fresh.global_parameters()):
                self.assertTrue(torch.equal(p, q), name)
                self.assertEqual(opt.state[p].keys(), fresh_opt.state[q].keys(), name)
                for key, v in opt.state[p].items():
                    self.assertTrue(torch.equal(v, fresh_opt.state[q][key]), (name, key))
            # Format 1 (no "format": the momentum only) is named, with its file.
            torch.save({"model": {}, "momentum": {}, "step": 3}, path)
            with self.assertRaises(SystemExit) as exited:
                train.resume(a, fresh, fresh_opt, 0)
            self.assertEqual(str(exited.exception),
                             f"train.py: {path} is a stage checkpoint of format 1; this script "
                             "reads format 2 (whole optimizer state per parameter): start "
                             "without it, or resume with the script that wrote it")


class S2MathTest(unittest.TestCase):
    def test_loss_trajectory_is_the_same_whatever_the_split(self):
        with tempfile.TemporaryDirectory() as tmp:
            even = _run_example(tmp, "even", "--no-falcon")
            uneven = _run_example(tmp, "uneven", "--plan-at", "2:7,1")
            with_falcon = _run_example(tmp, "falcon")
        self.assertEqual([s["plan"] for s in uneven][2:], [[7, 1]] * 4)
        self.assertEqual(len(even), 6)
        for a, b, c in zip(even, uneven, with_falcon):
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-5 * abs(a["loss"]))
            self.assertEqual(a["loss"], c["loss"])  # The package changes no number.
        self.assertLess(even[-1]["loss"], even[0]["loss"])  # It learns.

    def test_gradients_are_summed_per_group_of_ranks_holding_the_same_blocks(self):
        train = _example_module()
        a = train.parse_args(["--dp", "2", "--pp", "2", "--layers", "4", "--hidden", "8",
                              "--heads", "2"])
        split = [[1, 3], [3, 1]]
        first = train.Stage(a, 0, split[0])  # DP group 0, stage 0: the embedding and block 0.
        last = train.Stage(a, 1, split[0])  # Blocks 1-3 and the head.
        g0 = train.gradient_groups(a, split, [n for n, _ in first.global_parameters()])
        g1 = train.gradient_groups(a, split, [n for n, _ in last.global_parameters()])
        # Block 0 and the embedding sit at stage 0 of both pipelines, blocks 1-2 at stage 1 of
        # DP group 0's and stage 0 of DP group 1's, block 3 and the head at stage 1 of both.
        self.assertEqual(g0["all"], {(0, 0), (1, 0), (1, 1)})
        self.assertEqual([k for k, _ in g0["mine"]], [(0, 0)])
        self.assertEqual(len(g0["mine"][0][1]), len(list(first.parameters())))
        self.assertEqual([k for k, _ in g1["mine"]], [(1, 0), (1, 1)])
        names = [n for n, _ in last.global_parameters()]
        self.assertTrue(all(names[i].startswith(("blocks.1.", "blocks.2."))
                            for i in g1["mine"][0][1]))
        self.assertTrue(all(names[i].startswith(("blocks.3.", "norm.", "head."))
                            for i in g1["mine"][1][1]))
        self.assertEqual(sorted(i for _, idx in g1["mine"] for i in idx), list(range(len(names))))

    def test_loss_trajectory_is_the_same_whatever_the_layer_split(self):
        # Each block starts from its own seed, and while the pipelines' splits differ the
        # gradients are summed per group of the ranks holding the same blocks: the model and its
        # training do not change.
        with tempfile.TemporaryDirectory() as tmp:
            even = _run_example(tmp, "even", "--no-falcon")
            split = _run_example(tmp, "split", "--no-falcon", "--stage-blocks", "1+3,3+1")
        self.assertEqual([s["stage_blocks"] for s in split], [[[1, 3], [3, 1]]] * 6)
        self.assertEqual(even[0]["stage_blocks"], [[2, 2], [2, 2]])
        for a, b in zip(even, split):
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-5 * abs(a["loss"]))
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(AssertionError, "--stage-blocks 1\\+2: DP group 0's 1\\+2 "
                                                        "is not 2 counts >= 1 summing to "
                                                        "--layers 4"):
                _run_example(tmp, "bad", "--no-falcon", "--stage-blocks", "1+2")


class ResumeTest(unittest.TestCase):
    # What an S4 restart without a node relies on: a run stopped at its checkpoint goes on with
    # fewer DP groups (here 2 ranks, DP 1, after 4 ranks, DP 2) from the same model, optimizer state
    # and global batch: its losses are the uninterrupted run's.
    def test_a_run_resumed_with_fewer_dp_groups_goes_on_where_it_stopped(self):
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "ckpt")
            whole = _run_example(tmp, "whole", "--no-falcon")
            first = _run_example(tmp, "first", "--no-falcon", "--checkpoint-dir", ckpt,
                                 steps=3)
            self.assertEqual(sorted(os.listdir(ckpt)), ["stage0.pt", "stage1.pt"])
            rest = _run_example(tmp, "rest", "--no-falcon", "--checkpoint-dir", ckpt, nproc=2,
                                dp=None)
        self.assertEqual([s["step"] for s in first], [0, 1, 2])
        self.assertEqual([s["step"] for s in rest], [3, 4, 5])
        self.assertEqual([s["plan"] for s in rest], [[8]] * 3)  # The same global batch, on one.
        for a, b in zip(whole, first + rest):
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-5 * abs(a["loss"]))

    # What an S2L relaunch relies on: a run stopped at its checkpoint goes on with another layer
    # split per pipeline and its micro-batch plan (FALCON_LAYER_SPLIT) from the same state (the
    # checkpoints name parameters by their place in the whole model): its losses are the
    # uninterrupted run's.
    def test_a_run_resumed_with_a_new_layer_split_goes_on_where_it_stopped(self):
        from falcon import layout
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "ckpt")
            whole = _run_example(tmp, "whole", "--no-falcon")
            first = _run_example(tmp, "first", "--checkpoint-dir", ckpt, steps=3)
            path = os.path.join(tmp, "split.json")
            layout.write_split(path, layout.LayerSplit(((1, 3), (3, 1)), (5, 3), 4))
            rest = _run_example(tmp, "rest", "--checkpoint-dir", ckpt,
                                env={"FALCON_LAYER_SPLIT": path})
        self.assertEqual([s["step"] for s in rest], [3, 4, 5])
        self.assertEqual([(s["plan"], s["stage_blocks"]) for s in rest],
                         [([5, 3], [[1, 3], [3, 1]])] * 3)
        for a, b in zip(whole, first + rest):
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-5 * abs(a["loss"]))

    # What an S3 relaunch relies on: a run stopped at its checkpoint goes on with its ranks in new
    # places (FALCON_LAYOUT: each pipeline on consecutive ranks, not each stage) from the same
    # state: its losses are the uninterrupted run's, and a different rank logs them.
    def test_a_run_resumed_in_a_new_layout_goes_on_where_it_stopped(self):
        from falcon import layout
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = os.path.join(tmp, "ckpt")
            whole = _run_example(tmp, "whole", "--no-falcon")
            first = _run_example(tmp, "first", "--checkpoint-dir", ckpt, steps=3)
            path = os.path.join(tmp, "layout.json")
            layout.write(path, layout.from_json(REPLICA_LAYOUT))
            rest = _run_example(tmp, "rest", "--checkpoint-dir", ckpt,
                                env={"FALCON_LAYOUT": path, "FALCON_EPOCH": "1"})
            # A layout that does not fit the job is named.
            bad = os.path.join(tmp, "bad.json")
            layout.write(bad, layout.from_json(dict(REPLICA_LAYOUT, dp_size=1, pp_size=4,
                                                    positions=[[0, p, 0] for p in range(4)])))
            with self.assertRaisesRegex(AssertionError, r"the S3 layout \(FALCON_LAYOUT\) is DP "
                                                        "1 x PP 4"):
                _run_example(tmp, "bad", "--checkpoint-dir", ckpt, env={"FALCON_LAYOUT": bad})
        self.assertEqual([s["step"] for s in rest], [3, 4, 5])
        self.assertEqual({s["rank"] for s in first}, {2})  # Stage 1 at DP 0: rank 2, then 1.
        self.assertEqual({s["rank"] for s in rest}, {1})
        for a, b in zip(whole, first + rest):
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-5 * abs(a["loss"]))


if __name__ == "__main__":
    unittest.main()
