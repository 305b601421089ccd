"""Row maxima and diagonal ranks of a thin product ``left @ right``, never materialising it.

``left [n, r] @ right [r, m]`` with a small inner dimension (a head's ``d_head``) is a
vocabulary-sized matrix (GPT-2: 50 257² entries, 10 GB of float32). A plain
``(left[chunk] @ right).max(-1)`` writes every product to memory and reads it back, and
``max``/``topk`` with indices are slow reductions: measured, it ran at a quarter to a third of
the machine's matmul rate. Here, on the CPU:

- the product is cut into tiles of `TILE_ROWS` rows × about `TILE_ENTRIES` entries, each written
  by the matmul and reduced while it is in the cache;
- a tile is reduced with ``amax`` over segments of `SEGMENT` columns (a vectorised reduction,
  ~5 % of the matmul's time); only the few rows whose maximum changes look inside one segment;
- the tiles are shared among worker threads (``parallel=True``), one per intra-op thread, each running
  single-threaded ops (`torch.set_num_threads(1)` is per thread under OpenMP): small multi-threaded
  matmuls pay a barrier each, and on a loaded machine each barrier waits for a descheduled thread.

On other devices (CUDA) a block is one product spanning every column, reduced by plain
``max``/``sum`` kernels: few large kernels, no host synchronisation inside a block.

- `row_max`: the largest entry of every row and the first column holding it (the rule of
  ``torch.max(dim=1)``: NaN counts as the largest value, ties go to the smallest column).
- `diagonal_ranks`: per row, how many entries are not below its diagonal entry (ties and NaN
  count against it), as top-k accuracy needs; rows that reach `cap` stop early.

Products agree with one dense ``left @ right`` up to float rounding (a BLAS may round the same
dot product differently in matmuls of different shapes, as chunks of rows already did); every
comparison and tie rule is applied exactly to the products computed.

Example:
    >>> import torch
    >>> from circuitwidgets.row_maxima import diagonal_ranks, row_max
    >>> left, right = torch.randint(-3, 4, (300, 8)).float(), torch.randint(-3, 4, (8, 300)).float()
    >>> dense = left @ right                       # small integers: every product is exact
    >>> values, indices = row_max(left, right, rows=64)
    >>> best = dense.max(dim=1)
    >>> bool((values == best.values).all() and (indices == best.indices).all())
    True
    >>> own = dense.diagonal().clone()
    >>> others = dense.fill_diagonal_(float("-inf"))
    >>> bool((diagonal_ranks(left, right, rows=64, cap=300) == (others >= own[:, None]).sum(1)).all())
    True
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

#: Entries of one product tile on the CPU: 2**20 float32 = 4 MB, one per worker thread in a shared L3.
TILE_ENTRIES = 2**20
#: Rows of one tile at most (its columns: ``TILE_ENTRIES // rows``, a multiple of `SEGMENT`).
TILE_ROWS = 512
#: Columns per segment: a tile is reduced to its segments' maxima, and a row's first maximum is
#: then looked for in one segment.
SEGMENT = 128
#: Worker threads are used for products of at least this many entries (below, thread start-up
#: is not worth it).
PARALLEL_ENTRIES = 2**24

#: Entries of one block off the CPU (where a block is one product over every column): 2**27 float32 = 512 MB.
DEVICE_BLOCK_ENTRIES = 2**27

_NEG_INF = float("-inf")


def default_rows(cpu_entries: int, width: int, device: torch.device) -> int:
    """Rows per block when the caller gives none: `cpu_entries` entries on the CPU, `DEVICE_BLOCK_ENTRIES` elsewhere."""
    return max(1, (cpu_entries if _tiled(device) else DEVICE_BLOCK_ENTRIES) // width)


def _tiled(device: torch.device) -> bool:
    """Whether products on `device` are tiled (the CPU) or done a block at a time (other devices)."""
    return device.type == "cpu"


def _workers(entries: int) -> int:
    """Worker threads for a product of `entries` entries: the intra-op threads, under OpenMP only."""
    threads = torch.get_num_threads()
    if threads < 2 or entries < PARALLEL_ENTRIES or "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return 1
    return threads


def _shape(n: int, width: int, rows: int, device: torch.device, square: bool = False) -> tuple[int, int]:
    """``(unit rows, tile columns)`` for a pass in blocks of `rows` rows over ``[n, width]``.

    Off the CPU a unit is a block over every column. On the CPU a tile has at most `TILE_ENTRIES`
    entries, and never more than a block (``rows * width``, what `chunk_size` promises), with
    `TILE_ROWS` rows where that leaves whole segments; ``square=True`` (`diagonal_ranks`) keeps the
    columns >= the rows, so that a unit's first tile holds its diagonal.
    """
    if not _tiled(device):
        return rows, width
    budget = min(TILE_ENTRIES, rows * width)
    if square:
        unit = max(1, min(TILE_ROWS, n, math.isqrt(budget)))
        cols = budget // unit
        whole = cols // SEGMENT * SEGMENT
        return unit, min(width, whole if whole >= unit else cols)
    unit = max(1, min(TILE_ROWS, n, budget // min(width, SEGMENT)))
    return unit, min(width, max(SEGMENT, budget // unit // SEGMENT * SEGMENT))


def _run(
    n: int,
    unit: int,
    rows: int,
    work: Callable[[int, int], None],
    report: Callable[[int], None] | None,
    entries: int,
    parallel: bool = True,
) -> None:
    """``work(start, stop)`` for units of `unit` rows, in worker threads when large; ``report(end)`` for blocks of `rows`.

    Each block's end is reported in order, from the calling thread, once every unit up to it is
    done (units and blocks need not align); an exception from `report` (or from a unit) cancels
    the units not started and propagates.
    """
    units = [(start, min(start + unit, n)) for start in range(0, n, unit)]
    ends = iter([min(start + rows, n) for start in range(0, n, rows)])
    pending = [next(ends)]

    def reached(stop: int) -> None:
        while pending and pending[0] <= stop:
            if report is not None:
                report(pending[0])
            pending[:] = [end for end in [next(ends, None)] if end is not None]

    if not parallel or _workers(entries) == 1:
        for start, stop in units:
            work(start, stop)
            reached(stop)
        return
    threads = torch.get_num_threads()
    # each worker runs its ops on one thread (the setting is per thread); restored for new threads after
    pool = ThreadPoolExecutor(threads, initializer=torch.set_num_threads, initargs=(1,))
    try:
        futures = [pool.submit(work, start, stop) for start, stop in units]
        for future, (_, stop) in zip(futures, units, strict=True):
            future.result()
            reached(stop)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(threads)


def _product(left: torch.Tensor, right: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """``left @ right`` written into the front of `buffer` (as a contiguous ``[len(left), right.shape[1]]``)."""
    out = buffer[: left.shape[0] * right.shape[1]].view(left.shape[0], right.shape[1])
    return torch.matmul(left, right, out=out)


def _segment_maxima(tile: torch.Tensor) -> torch.Tensor:
    """``amax`` of each row's segments of `SEGMENT` columns (the last one narrower): ``[rows, ceil(cols / SEGMENT)]``."""
    width = tile.shape[1]
    full = width - width % SEGMENT
    parts = []
    if full:
        parts.append(tile[:, :full].unflatten(1, (-1, SEGMENT)).amax(-1))
    if full < width:
        parts.append(tile[:, full:].amax(1, keepdim=True))
    return parts[0] if len(parts) == 1 else torch.cat(parts, 1)


def _segment_values(tile: torch.Tensor, rows: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """The entries ``[len(rows), SEGMENT]`` of segment ``segments[i]`` of row ``rows[i]`` of the contiguous `tile`.

    Past the tile's last column (its last segment is narrower) the last column repeats.
    """
    width = tile.shape[1]
    if width % SEGMENT == 0:  # whole segments: rows of a [rows * segments, SEGMENT] view, one copy each
        return tile.view(-1, SEGMENT).index_select(0, segments.add(rows, alpha=width // SEGMENT))
    columns = (segments[:, None] * SEGMENT + torch.arange(SEGMENT, device=tile.device)).clamp_max_(width - 1)
    return tile[rows[:, None], columns]


def row_max(
    left: torch.Tensor,
    right: torch.Tensor,
    rows: int,
    report: Callable[[int], None] | None = None,
    *,
    parallel: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(max, argmax)`` of every row of ``left @ right``: float32 and long ``[n]`` on the CPU.

    The rule of ``torch.max(dim=1)`` on the whole product: the first column holding the row's
    largest value, NaN counting as the largest. Blocks of `rows` rows, ``report(rows_done)`` after
    each, in order (an exception it raises stops the pass and propagates).

    On the CPU each tile gives its segments' maxima; a row is taken by a later tile only when that
    tile's maximum is strictly larger (or is the row's first NaN), and then the first column of
    the maximum is found in the first segment holding it.

    Example:
        >>> import torch
        >>> values, indices = row_max(torch.ones(3, 2), torch.ones(2, 5), rows=2)
        >>> values.tolist(), indices.tolist()        # ties: the first column
        ([2.0, 2.0, 2.0], [0, 0, 0])
    """
    n, width = left.shape[0], right.shape[1]
    device = left.device
    values = torch.empty(n, dtype=torch.float32, device=device)  # on the device until the end: no sync per block
    indices = torch.empty(n, dtype=torch.long, device=device)
    rows = max(1, min(rows, n))
    tiled = _tiled(device)
    unit, cols = _shape(n, width, rows, device)
    local = threading.local()

    def work(start: int, stop: int) -> None:
        if not hasattr(local, "buffer"):
            local.buffer = torch.empty(unit * cols, dtype=left.dtype, device=device)
        block = left[start:stop]
        if not tiled:
            best = _product(block, right, local.buffer).max(dim=1)
            values[start:stop], indices[start:stop] = best.values, best.indices
            return
        best_value = torch.empty(stop - start, dtype=left.dtype)
        best_index = torch.empty(stop - start, dtype=torch.long)
        for c0 in range(0, width, cols):
            tile = _product(block, right[:, c0 : c0 + cols], local.buffer)
            segments = _segment_maxima(tile)
            if c0 == 0:
                taken = torch.arange(stop - start)
            else:  # a later tile takes a row only with a strictly larger maximum, or the row's first NaN
                top = segments.amax(dim=1)
                # not (top <= best), best not NaN: top strictly larger, or top NaN where best is not
                taken = (top <= best_value).logical_not_().logical_and_(best_value == best_value).nonzero().squeeze(1)
                if not len(taken):
                    continue
                segments = segments[taken]
            # the first segment holding the row's maximum (NaN first), then its first column there (a
            # repeat of the last column, past a narrower last segment, comes after the column itself)
            segment = segments.argmax(dim=1)
            inside = _segment_values(tile, taken, segment)
            first = inside.argmax(dim=1)
            best_value[taken] = inside.gather(1, first[:, None]).squeeze(1)
            best_index[taken] = first.add_(segment, alpha=SEGMENT).add_(c0)
        values[start:stop], indices[start:stop] = best_value.float(), best_index

    _run(n, unit, rows, work, report, n * width, parallel)
    return values.cpu(), indices.cpu()


def diagonal_ranks(
    left: torch.Tensor,
    right: torch.Tensor,
    rows: int,
    cap: int,
    report: Callable[[int], None] | None = None,
    *,
    parallel: bool = True,
) -> torch.Tensor:
    """For every row ``i`` of the square ``P = left @ right``, how many entries are not below ``own = P[i, i]``.

    The row is taken with its diagonal replaced by ``-inf``, and an entry ``x`` counts when
    ``not own > x``: ties count, NaN counts, and the ``-inf`` diagonal counts only when ``own`` is
    ``-inf`` or NaN. So ``count < k`` exactly when ``own`` is strictly above the k-th largest entry
    of that row (NaN largest): the top-k rule of `circuitwidgets.analysis.ov_top_k_accuracy`.
    long ``[n]`` on the CPU, exact below `cap`; a row that reaches `cap` may stop there (its count
    is then some value ``>= cap``). Blocks of `rows` rows, ``report(rows_done)`` after each.

    On the CPU a unit's columns start at its own diagonal and wrap around, so its first tile holds
    ``own``; later tiles skip the rows that reached `cap`. Per tile a row's segments whose maximum
    is not below ``own`` are counted (each holds an entry that counts); only rows that stay below
    `cap` by that bound are counted entry by entry, in those segments (fewer than `cap` of them).

    Example:
        >>> import torch
        >>> left = torch.tensor([[1.0], [2.0], [3.0]])
        >>> diagonal_ranks(left, left.T, rows=2, cap=3).tolist()   # row 0 is [1, 2, 3]: 2 and 3 are >= 1
        [2, 1, 0]
    """
    n = left.shape[0]
    if right.shape[1] != n:
        raise ValueError(f"diagonal_ranks needs a square product; got {n} x {right.shape[1]}")
    device = left.device
    counts = torch.empty(n, dtype=torch.long, device=device)
    rows = max(1, min(rows, n))
    tiled = _tiled(device)
    unit, cols = _shape(n, n, rows, device, square=True)  # columns >= rows: a unit's first tile holds its diagonal
    local = threading.local()

    def work(start: int, stop: int) -> None:
        if not hasattr(local, "buffer"):
            local.buffer = torch.empty(unit * cols, dtype=left.dtype, device=device)
        block = left[start:stop]
        # columns from `start` on, wrapping around: the first tile holds the diagonal
        spans = [(c0, min(c0 + cols, n)) for c0 in range(start, n, cols)]
        spans += [(c0, min(c0 + cols, start)) for c0 in range(0, start, cols)]
        count = torch.zeros(stop - start, dtype=torch.long, device=device)
        active = torch.arange(stop - start, device=device)
        own = mine = torch.empty(0)
        for c0, c1 in spans:
            if tiled and c0 != start:
                active = active[count[active] < cap]
                if not len(active):
                    break
            tile = _product(block if len(active) == stop - start else block[active], right[:, c0:c1], local.buffer)
            if c0 == start:
                diagonal = tile.diagonal()
                own = diagonal.clone()
                diagonal.fill_(_NEG_INF)
            mine = own if len(active) == stop - start else own[active]
            if not tiled:
                count += (c1 - c0) - (mine[:, None] > tile).sum(1)
                continue
            # a segment whose maximum is not below own holds at least one entry that counts, and only
            # such a segment can: their number is a lower bound, enough for rows it takes to `cap`
            reaching = ~(mine[:, None] > _segment_maxima(tile))
            bound = count[active] + reaching.sum(1)
            close = bound < cap
            count[active] = torch.where(close, count[active], bound)
            pairs = (reaching & close[:, None]).nonzero()  # the other rows: count inside those segments
            if not len(pairs):
                continue
            row, segment = pairs[:, 0], pairs[:, 1]
            inside = ~(mine[row, None] > _segment_values(tile, row, segment))
            if (c1 - c0) % SEGMENT:  # a narrower last segment: its repeats of the last column do not count
                inside &= torch.arange(SEGMENT, device=device) < (c1 - c0 - segment * SEGMENT)[:, None]
            count.index_add_(0, active[row], inside.sum(1))
        counts[start:stop] = count

    _run(n, unit, rows, work, report, n * n, parallel)
    return counts.cpu()
