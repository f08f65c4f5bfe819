"""Agreement on directives at an iteration boundary (the reference trainer's, trainer/directives/
directive_sync.h, over the package's Gloo validation group): every rank tells the others which
job-wide directives its shim holds, and every rank applies, at this boundary, those that every rank
holds and whose effective iteration has come. A directive that reached some ranks late (after its
iteration began there) is then applied one boundary later by all of them, not at different
iterations on different ranks (for S2: the stages of a DP group would disagree on its
micro-batches), and a validation pause holds every rank at the same boundary.

Wire: one all_gather of 1 + 2 x MAX_PENDING int64 per rank per step: how many it holds, then
(id, effective iteration) pairs, lowest ids first. The session starts it (async) after each
boundary's poll and finishes it at the next boundary, so it runs during the iteration and the
boundary does not wait for a round trip: a directive is applied at the first boundary after
every rank held it at the one before (at its effective iteration when it reached every rank one
iteration ahead, as the controller's lead allows).
"""

import torch

MAX_PENDING = 16  # Directives a rank reports per boundary (the lowest ids; the rest wait).


NO_SHIM = -1  # A row's count from a rank without the shim library: it can agree on nothing.
_U64 = 1 << 64  # Directive ids are uint64; a row carries them as int64 (two's complement).


def encode(pending):
    """The row a rank contributes: `pending` is [(id, effective_iteration)] ascending by id, or
    None for a rank without the shim library."""
    row = [0] * (1 + 2 * MAX_PENDING)
    if pending is None:
        row[0] = NO_SHIM
        return row
    pending = list(pending)[:MAX_PENDING]
    row[0] = len(pending)
    for i, (directive_id, effective) in enumerate(pending):
        directive_id = int(directive_id) % _U64
        row[1 + 2 * i] = directive_id - _U64 if directive_id >= 1 << 63 else directive_id
        row[2 + 2 * i] = int(effective)
    return row


def agree(rows, iteration):
    """The ids every row holds whose effective iteration is at most `iteration`, ascending; None
    when some rank runs without the shim library (nothing can be agreed: each rank then applies
    what it holds, as without agreement). ValueError on a malformed row (a count outside
    [NO_SHIM, MAX_PENDING], or a row of another size)."""
    held = None
    effective = {}
    no_shim = False
    for rank, row in enumerate(rows):
        try:
            row = [int(v) for v in row]
        except (TypeError, ValueError):
            raise ValueError(f"directive agreement: rank {rank}'s row is malformed (not integers)")
        if len(row) != 1 + 2 * MAX_PENDING or not NO_SHIM <= row[0] <= MAX_PENDING:
            raise ValueError(f"directive agreement: rank {rank}'s row is malformed "
                             f"(length {len(row)}, count {row[0] if row else None})")
        if row[0] == NO_SHIM:
            no_shim = True
            continue
        ids = set()
        for i in range(row[0]):
            directive_id, eff = row[1 + 2 * i] % _U64, row[2 + 2 * i]
            ids.add(directive_id)
            effective[directive_id] = min(eff, effective.get(directive_id, eff))
        held = ids if held is None else held & ids
    if no_shim:
        return None
    return sorted(i for i in (held or ()) if effective[i] <= iteration)


def start(row, group, world_size, all_gather, rows=None):
    """Starts gathering every rank's row through `all_gather` (torch.distributed's, untimed) on
    `group`, async; finish() waits for it. `rows`: world_size int64 tensors of the row's length to
    gather into (reused across boundaries; new ones when None)."""
    mine = torch.tensor(row, dtype=torch.int64)
    if rows is None:
        rows = [torch.zeros_like(mine) for _ in range(world_size)]
    work = all_gather(rows, mine, group=group, async_op=True)
    return work, rows


def finish(exchange):
    """Every rank's row, once the exchange start() began is done."""
    work, rows = exchange
    if work is not None:
        work.wait()
    return [r.tolist() for r in rows]


def exchange(row, group, world_size, all_gather):
    """Every rank's row, at once (start, then finish)."""
    return finish(start(row, group, world_size, all_gather))
