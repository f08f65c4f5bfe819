"""Validation the controller runs while the job is paused (docs/algorithms.md#validation-passes), done
with torch: a GEMM timed with torch.matmul and link passes with send/recv on the session's
validation group. Both report the fastest repetition after a warm-up one (scheduling noise on a
shared CPU inflates some repetitions; a slow device slows all of them), as the reference trainer's
executor does."""

import time

import torch
import torch.distributed as dist


def untimed(name):
    """torch.distributed's own function (validation traffic is not the job's)."""
    fn = getattr(dist, name)
    return getattr(fn, "__wrapped__", fn)


def gemm(m, n, k, repeats, now_ns, device=None):
    """(duration ns of the fastest repetition, FLOP/s) of an m x k by k x n FP32 product on
    `device` (None or a CPU device: host clock `now_ns`; a CUDA device: CUDA events around each
    product on the current stream, so the figure is the GPU's). ValueError on a zero dimension."""
    if min(m, n, k) < 1 or repeats < 1:
        raise ValueError(f"gemm {m}x{n}x{k} with {repeats} repeats")
    device = torch.device("cpu") if device is None else torch.device(device)
    a = torch.full((m, k), 0.5, device=device)
    a.fill_diagonal_(1.0)
    b = torch.full((k, n), 0.25, device=device)
    cuda = device.type == "cuda"
    best = 0
    for rep in range(repeats + 1):
        if cuda:
            with torch.cuda.device(device):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                c = torch.matmul(a, b)
                end.record()
                end.synchronize()
                elapsed = int(start.elapsed_time(end) * 1e6)
        else:
            start = now_ns()
            c = torch.matmul(a, b)
            elapsed = now_ns() - start
        if rep > 0 and (best == 0 or elapsed < best):
            best = elapsed
    if not torch.isfinite(c[0, 0]):
        raise RuntimeError("GEMM produced a non-finite value")
    best = max(1, best)
    return best, 2.0 * m * n * k / (best * 1e-9)


class PeerAbsent(RuntimeError):
    """A link's other end did not come to the link pass in time; the message names it."""


class Rendezvous:
    """Both ends of a link meet before its pass moves a byte, through the job's c10d store (a
    counter per task and link), so that a rank never waits in a send or recv for a peer that is
    training: a Gloo wait cannot be given up without closing the pair. A peer that does not come
    within `timeout_s` raises PeerAbsent, and is given up at once for the rest of the pause."""

    def __init__(self, store, job, timeout_s=30.0, poll_s=0.002, sleep=time.sleep,
                 clock=time.monotonic):
        self._store, self._job = store, job
        self._timeout_s, self._poll_s = timeout_s, poll_s
        self._sleep, self._clock = sleep, clock
        self.absent = set()  # Peers given up in this pause.

    def meet(self, task_id, src, dst, me):
        peer = dst if me == src else src
        if peer in self.absent:
            raise PeerAbsent(f"rank {peer} did not come to an earlier link pass of this pause")
        key = f"falcon/{self._job}/validation/{task_id}/{src}-{dst}"
        self._store.add(key, 1)
        deadline = self._clock() + self._timeout_s
        while self._store.add(key, 0) < 2:
            if self._clock() >= deadline:
                self.absent.add(peer)
                raise PeerAbsent(f"rank {peer} did not come to link {src}->{dst} of task "
                                 f"{task_id} within {self._timeout_s:g} s (not paused: the pause "
                                 "reached it after its iteration began?)")
            self._sleep(self._poll_s)


def link_pass(links, nbytes, repeats, me, group, now_ns, task_id=0, rendezvous=None):
    """Round trips of `nbytes` over each link this rank is on (src sends and waits for a 1-byte
    ack): [((src, dst), fastest ns)] for the links this rank sends on, and [(link, error)] for
    the links whose peer did not come (`rendezvous`: a Rendezvous, None: no meeting)."""
    if group is None:
        raise RuntimeError("no validation group (falcon.init(validation_group=...) was off)")
    send, recv = untimed("send"), untimed("recv")
    payload = torch.full((max(1, nbytes),), 0x5A, dtype=torch.uint8)
    ack = torch.ones(1, dtype=torch.uint8)
    out, missed = [], []
    for src, dst in links:
        if me not in (src, dst):
            continue
        if rendezvous is not None:
            try:
                rendezvous.meet(task_id, src, dst, me)
            except PeerAbsent as e:
                missed.append(((src, dst), str(e)))
                continue
        best = 0
        for rep in range(repeats + 1):
            if me == src:
                start = now_ns()
                send(payload, dst, group=group)
                recv(ack, dst, group=group)
                elapsed = now_ns() - start
                if rep > 0 and (best == 0 or elapsed < best):
                    best = elapsed
            else:
                recv(payload, src, group=group)
                send(ack, src, group=group)
        if me == src:
            out.append(((src, dst), max(1, best)))
    return out, missed
