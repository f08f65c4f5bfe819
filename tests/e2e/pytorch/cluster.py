"""A Falcon deployment for PyTorch e2e tests: the real controller, one falcon_agent per node and
one torchrun per node (python3 -m falcon.launch, static rendezvous, ranks node-major), each a
child process this module starts and stops.

Nodes are network namespaces of a netns cluster (falcon_netns create: every cross-node byte of
Gloo crosses the node's veth, GLOO_SOCKET_IFNAME=eth0) where this process may make them (root
with CAP_NET_ADMIN), loopback nodes otherwise. Binaries come from the runfiles (the test's data).
"""

import json
import os
import re
import signal
import subprocess
import time

# Binaries and the example: the runfiles (a test's cwd), or $FALCON_BIN_DIR (e.g. bazel-bin, for
# the benchmark run from the checkout).
RUNFILES = os.environ.get("FALCON_BIN_DIR", os.getcwd())
BIN = {
    "controller": "controller/falcon_controller",
    "agent": "agent/falcon_agent",
    "ctl": "cli/falconctl",
    "chaos": "chaos/falcon_chaos",
    "netns": "cluster/falcon_netns",
}
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples",
                       "pytorch", "train.py")


def binary(name):
    return os.path.join(RUNFILES, BIN[name])


def netns_supported():
    r = subprocess.run([binary("netns"), "check"], capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


class Cluster:
    def __init__(self, work, nodes=2, netns=True, link_bytes=4194304):
        self.link_bytes = link_bytes
        self.work = work
        self.nodes = nodes
        self.netns = netns
        self.procs = {}
        self.spec = None
        self.controller = None

    # --- processes --------------------------------------------------------------------------
    def _spawn(self, name, argv, env=None, node=None):
        if node is not None and self.netns:
            argv = ["ip", "netns", "exec", self.spec["nodes"][node]["netns"]] + argv
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        self.procs[name] = p
        return p

    def log(self, name):
        with open(os.path.join(self.work, name + ".log"), errors="replace") as f:
            return f.read()

    def _await_line(self, name, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log(name))
            if m:
                return m
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited {self.procs[name].returncode}:\n"
                                   f"{self.log(name)[-2000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"{name}: no line matching {pattern!r} in {timeout} s:\n"
                           f"{self.log(name)[-2000:]}")

    def start(self):
        if self.netns:
            spec_path = os.path.join(self.work, "cluster.json")
            self._spawn("netns", [binary("netns"), "create", "--nodes", str(self.nodes),
                                  "--spec_out", spec_path])
            deadline = time.monotonic() + 30
            while not os.path.exists(spec_path):
                if self.procs["netns"].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("falcon_netns create failed:\n" + self.log("netns"))
                time.sleep(0.1)
            with open(spec_path) as f:
                self.spec = json.load(f)
        else:
            self.spec = {"kind": "loopback", "prefix": "", "bridge": "", "subnet": "",
                         "controller_address": "127.0.0.1",
                         "nodes": [{"name": f"node{i}", "netns": "", "address": "127.0.0.1",
                                    "iface": "", "host_veth": ""} for i in range(self.nodes)]}
            with open(os.path.join(self.work, "cluster.json"), "w") as f:
                json.dump(self.spec, f)
        addr = self.spec["controller_address"]
        self._spawn("controller", [binary("controller"), "--listen", f"{addr}:0",
                                   "--metrics_listen", "127.0.0.1:0", "--data_dir",
                                   os.path.join(self.work, "controller-data"), "--plaintext",
                                   "--tick=100ms", "--validation_gemm_size=128",
                                   "--validation_repeats=5",
                                   # The package does not agree on directives at a boundary:
                                   # the pause must reach every rank before its iteration
                                   # (docs/pytorch.md#known-limits).
                                   "--validation_pause_lead_iterations=4",
                                   f"--validation_link_bytes={self.link_bytes}"])
        m = self._await_line("controller", r"listening on (\S+)")
        self.controller = m.group(1)
        self.ctl("settings", "set", "verification_min_ratio=0.10")
        for i in range(self.nodes):
            self._spawn(f"agent-node{i}", [binary("agent"), "--socket", self.socket(i),
                                           "--controller", self.controller, "--node",
                                           f"node{i}", "--plaintext=true", "--metrics_listen",
                                           "127.0.0.1:0", "--backoff_max=1s"], node=i)
        for i in range(self.nodes):
            self._await_line(f"agent-node{i}", r"controller connected")
        return self

    def socket(self, node):
        return os.path.join(self.work, f"agent-node{node}.sock")

    def start_job(self, job, procs_per_node, train_args, extra_env=None):
        """One torchrun per node; ranks node-major (node k: k*G .. k*G+G-1)."""
        master = self.spec["nodes"][0]["address"]
        port = 29000 + os.getpid() % 2000
        for i in range(self.nodes):
            env = dict(os.environ, FALCON_JOB=job, FALCON_NODE=f"node{i}",
                       FALCON_AGENT_SOCKET=self.socket(i), OMP_NUM_THREADS="1")
            env["GLOO_SOCKET_IFNAME"] = "eth0" if self.netns else "lo"
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                env.pop(k, None)
            env.update(extra_env or {})
            self._spawn(f"torchrun-node{i}", [
                "/usr/bin/python3", "-m", "falcon.launch", "--nnodes", str(self.nodes),
                "--nproc_per_node", str(procs_per_node), "--node_rank", str(i),
                "--master_addr", master, "--master_port", str(port),
                "--log_dir", os.path.join(self.work, f"torchrun-logs-node{i}"),
                EXAMPLE, *train_args], env=env, node=i)

    def wait_job(self, timeout):
        deadline = time.monotonic() + timeout
        for i in range(self.nodes):
            p = self.procs[f"torchrun-node{i}"]
            p.wait(max(1, deadline - time.monotonic()))
            if p.returncode != 0:
                raise RuntimeError(f"torchrun on node{i} exited {p.returncode}:\n"
                                   f"{self.log(f'torchrun-node{i}')[-3000:]}")

    def ctl(self, *args):
        r = subprocess.run([binary("ctl"), "--controller", self.controller, "--plaintext",
                            "--json", *args], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"falconctl {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return json.loads(r.stdout) if r.stdout.strip() else None

    def rank_table(self, job):
        """Writes the job's rank table (cluster/cluster_spec.h: rank, node, pid, from the
        controller's view of the job) for faults that name ranks; returns its path."""
        j = self.ctl("job", job)
        ranks = sorted(({"rank": r.get("rank", 0), "node": r["node"], "pid": r["pid"]}
                        for r in j["ranks"]), key=lambda r: r["rank"])
        path = os.path.join(self.work, f"ranks-{job}.json")
        with open(path, "w") as f:
            json.dump({"generation": 0, "ranks": ranks}, f)
        return path

    def chaos(self, faults, record, ranks=None):
        argv = [binary("chaos"), "--cluster", os.path.join(self.work, "cluster.json"),
                "--record", record]
        if ranks:
            argv += ["--ranks", ranks]
        for f in faults:
            argv += ["--fault", f]
        return self._spawn("chaos", argv)

    def stop(self):
        # The fault driver and the job first, then the agents, the controller, the namespaces.
        def stop_rank(name):
            for i, prefix in enumerate(("chaos", "torchrun", "agent", "controller", "netns")):
                if name.startswith(prefix):
                    return i
            return 0  # Anything else first.

        order = sorted(self.procs, key=stop_rank)
        for name in order:
            p = self.procs[name]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
