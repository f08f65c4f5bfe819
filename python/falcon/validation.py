"""Validation the controller runs while the job is paused (docs/algorithms.md#validation-passes), done
with torch: a GEMM timed with torch.matmul and link passes with send/recv on the session's
validation group. Both report the fastest repetition after a warm-up one (scheduling noise on a
shared CPU inflates some repetitions; a slow device slows all of them), as the reference trainer's
executor does."""

import torch
import torch.distributed as dist


def _untimed(name):
    """torch.distributed's own function (validation traffic is not the job's)."""
    fn = getattr(dist, name)
    return getattr(fn, "__wrapped__", fn)


def gemm(m, n, k, repeats, now_ns):
    """(duration ns of the fastest repetition, FLOP/s). ValueError on a zero dimension."""
    if min(m, n, k) < 1 or repeats < 1:
        raise ValueError(f"gemm {m}x{n}x{k} with {repeats} repeats")
    a = torch.full((m, k), 0.5)
    a.fill_diagonal_(1.0)
    b = torch.full((k, n), 0.25)
    best = 0
    for rep in range(repeats + 1):
        start = now_ns()
        c = torch.matmul(a, b)
        elapsed = now_ns() - start
        if rep > 0 and (best == 0 or elapsed < best):
            best = elapsed
    if not torch.isfinite(c[0, 0]):
        raise RuntimeError("GEMM produced a non-finite value")
    best = max(1, best)
    return best, 2.0 * m * n * k / (best * 1e-9)


def link_pass(links, nbytes, repeats, me, group, now_ns):
    """Round trips of `nbytes` over each link this rank is on (src sends and waits for a 1-byte
    ack): [((src, dst), fastest ns)] for the links this rank sends on."""
    if group is None:
        raise RuntimeError("no validation group (falcon.init(validation_group=...) was off)")
    send, recv = _untimed("send"), _untimed("recv")
    payload = torch.full((max(1, nbytes),), 0x5A, dtype=torch.uint8)
    ack = torch.ones(1, dtype=torch.uint8)
    out = []
    for src, dst in links:
        if me not in (src, dst):
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
    return out
