"""Attention patterns of long prompts from a layer's queries and keys: exact blocks on demand, pooled overviews.

At 8 192 tokens one layer of 12 heads is 12 x 8 192² float32 = 3.2 GB. Instead of holding that,
keep the layer's queries ``q`` and keys ``k`` (``[n_heads, seq, d_head]``, after any position
rotation) and each row's log-sum-exp ``lse`` (``[n_heads, seq]``): any block of the pattern is then
``exp(q_rows @ k_colsᵀ / scale - lse_rows)``, zero above the diagonal, in time proportional to
the block. `row_lse` takes ``lse`` from the model's own pattern (at each row's largest weight),
so the blocks reproduce the model's softmax; `max_error` checks that they do (a model whose
scores have other terms, e.g. ALiBi or soft-capping, fails the check).

Example:
    >>> import torch
    >>> from circuitwidgets.analysis import long_patterns as lp
    >>> q, k = torch.randn(2, 6, 4), torch.randn(2, 6, 4)
    >>> s = (q @ k.transpose(1, 2) / 2).masked_fill(torch.ones(6, 6).triu(1).bool(), float("-inf"))
    >>> pattern = s.softmax(-1)
    >>> lse = lp.row_lse(q, k, 2.0, pattern)
    >>> bool(torch.allclose(lp.pattern_block(q, k, lse, 2.0, 0, 6, 0, 6), pattern, atol=1e-6))
    True
    >>> lp.pool(pattern, 4, "max").shape
    torch.Size([2, 2, 2])
"""

from __future__ import annotations

import torch

from .. import in_trace
from ..progress import tick

POOLS = ("max", "mean")
#: Rows of a block computed at once (bounds the memory of a large block or overview).
CHUNK_CELLS = 1 << 24


def _check_pool(mode: str) -> str:
    if mode not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}; got {mode!r}")
    return mode


def row_lse(q: torch.Tensor, k: torch.Tensor, scale: float, pattern: torch.Tensor) -> torch.Tensor:
    """Log-sum-exp of each row's scores ``[n_heads, seq]``, read from the row's largest weight of `pattern`.

    With ``j`` the key of row ``i``'s largest weight ``p`` (at least ``1/seq``, so its log is
    well conditioned), ``lse[i] = q[i]·k[j] / scale - log p``.
    """
    top, where = pattern.max(dim=-1)  # [H, seq]
    keys = torch.gather(k, 1, where.unsqueeze(-1).expand(-1, -1, k.shape[-1]))  # [H, seq, d_head]
    score = (q * keys).sum(-1) / scale
    return score - torch.log(top)


def lse_and_pool(
    q: torch.Tensor, k: torch.Tensor, scale: float, factor: int, mode: str = "max"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-sum-exp of each row's causal scores ``q·k / scale`` ``[n_heads, seq]`` and the `pool` of the whole causal
    pattern ``[n_heads, ceil(n/f), ceil(n/f)]``, from one pass over the scores, from the queries and keys alone.

    A chunk of whole rows at a time (at most about `CHUNK_CELLS` scores): each row's scores are all
    there, so their log-sum-exp normalises them at once, and the chunk's weights are pooled before
    the next chunk: no ``[n_heads, seq, seq]`` ever exists.
    """
    _check_pool(mode)
    heads, n = q.shape[0], q.shape[1]
    step = max(factor, (CHUNK_CELLS // max(1, heads * n)) // factor * factor)
    cols = -(-n // factor)
    lses, pooled = [], q.new_zeros(heads, cols, cols)
    for start in range(0, n, step):
        tick("block", start // step + 1, -(-n // step))
        stop = min(n, start + step)
        width = min(n, -(-stop // factor) * factor)  # whole pooled windows (the keys past `stop` weigh 0)
        scores = torch.bmm(q[:, start:stop], k[:, :width].transpose(1, 2)).div_(scale)
        hidden = torch.ones(stop - start, width, dtype=torch.bool, device=q.device).triu_(start + 1)
        scores.masked_fill_(hidden, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        lses.append(lse)
        block = pool(scores.sub_(lse[..., None]).exp_(), factor, mode)
        pooled[:, start // factor : start // factor + block.shape[-2], : block.shape[-1]] = block
    return torch.cat(lses, dim=-1), pooled


def output_error(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, scale: float, rows: list[int]
) -> tuple[float, float]:
    """How far the weights rebuilt from q, k and lse, applied to the values `v`, are from the layer's own output
    `out` (``[n_heads, seq, d_head]``) on `rows`: ``(largest difference over the output's largest entry, the
    largest score magnitude on those rows)`` (what `in_trace.check_tolerance` allows for)."""
    worst, top, largest = 0.0, 1e-30, 0.0
    for i in sorted(set(rows)):
        weights = pattern_block(q, k, lse, scale, i, i + 1, 0, i + 1)  # [H, 1, i + 1]
        worst = max(worst, float((weights @ v[:, : i + 1] - out[:, i : i + 1]).abs().max()))
        top = max(top, float(out[:, i].abs().max()))
        largest = max(largest, float((q[:, i : i + 1] @ k[:, : i + 1].transpose(1, 2)).abs().max()) / scale)
    return worst / top, largest


def pattern_block(
    q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float, row0: int, row1: int, col0: int, col1: int
) -> torch.Tensor:
    """Exact weights of destinations ``row0:row1`` on sources ``col0:col1``, ``[n_heads, rows, cols]`` float32.

    Heads are those of `q`, `k`, `lse` (pass ``q[h:h+1]`` etc. for one head); zero above the diagonal.
    """
    n = q.shape[1]
    if not (0 <= row0 < row1 <= n and 0 <= col0 < col1 <= n):
        raise ValueError(f"block rows {row0}:{row1}, cols {col0}:{col1} is outside the {n} x {n} pattern")
    # one product for q.k / scale - lse, then in place: few passes over the block
    scores = torch.baddbmm(-lse[:, row0:row1, None], q[:, row0:row1], k[:, col0:col1].transpose(1, 2), alpha=1.0 / scale)
    return torch.exp_(scores).tril_(row0 - col0)  # source col0 + j <= destination row0 + i


def pool(blocks: torch.Tensor, factor: int, mode: str = "max") -> torch.Tensor:
    """``[..., R, C]`` reduced over ``factor x factor`` cells to ``[..., ceil(R/f), ceil(C/f)]``.

    ``"max"``: the largest weight of each block, so a one-cell stripe keeps its value; ``"mean"``:
    the average of the block's cells inside the matrix (cells above the diagonal count as 0).
    """
    _check_pool(mode)
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise TypeError(f"factor must be an int (cells pooled along each side); got {type(factor).__name__} {factor!r}")
    if factor < 1:
        raise ValueError(f"factor must be >= 1; got {factor}")
    if not isinstance(blocks, torch.Tensor) or blocks.dim() < 2:
        raise TypeError("blocks must be a tensor [..., rows, cols]")
    return in_trace.pool(blocks.float(), factor, mode)  # one definition, also run inside remote traces


def pooled_block(
    q: torch.Tensor,
    k: torch.Tensor,
    lse: torch.Tensor,
    scale: float,
    row0: int,
    row1: int,
    col0: int,
    col1: int,
    factor: int,
    mode: str = "max",
) -> torch.Tensor:
    """`pool` of `pattern_block` (blocks of `factor` from ``row0``, ``col0``), computed in row chunks."""
    _check_pool(mode)
    step = max(factor, (CHUNK_CELLS // max(1, (col1 - col0) * q.shape[0])) // factor * factor)
    parts = []
    for start in range(row0, row1, step):
        tick("block", (start - row0) // step + 1, -(-(row1 - row0) // step))
        stop = min(row1, start + step)
        parts.append(pool(pattern_block(q, k, lse, scale, start, stop, col0, col1), factor, mode))
    return torch.cat(parts, dim=-2)


def max_error(pattern: torch.Tensor, q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float, rows: list[int]) -> float:
    """Largest difference between `pattern`'s `rows` (``[n_heads, seq, seq]``) and those rebuilt from q, k, lse."""
    worst = 0.0
    for i in sorted(set(rows)):
        block = pattern_block(q, k, lse, scale, i, i + 1, 0, pattern.shape[-1])
        worst = max(worst, float((block - pattern[:, i : i + 1]).abs().max()))
    return worst


def block_from_inputs(
    q: torch.Tensor, k: torch.Tensor, options: dict, row0: int, row1: int, col0: int, col1: int, factor: int = 1,
    mode: str = "max",
) -> torch.Tensor:
    """`pool` of one head's exact weights, destinations ``row0:row1`` on sources ``col0:col1``, ``[1, rows/f, cols/f]``.

    Rebuilt here from the head's own attention-call inputs, ``q`` and ``k`` ``[seq, d_head]`` (after
    the model's rotation; a remote model's, downloaded once) with the call's `options` (``scaling``,
    ``softcap``, ``sliding_window``), as `in_trace.attention_weights` rebuilds them inside a trace:
    each destination's softmax over every source it sees, a few rows at a time (at most
    `CHUNK_CELLS` scores at once, whatever the length).

    Example:
        >>> import torch
        >>> q, k = torch.randn(6, 4), torch.randn(6, 4)
        >>> whole = in_trace.attention_weights(q[None, None], k[None, None])[0]
        >>> bool(torch.allclose(block_from_inputs(q, k, {}, 2, 5, 0, 6), whole[:, 2:5], atol=1e-6))
        True
    """
    _check_pool(mode)
    step = max(factor, (CHUNK_CELLS // max(1, row1)) // factor * factor)
    parts = []
    for start in range(row0, row1, step):
        stop = min(row1, start + step)
        seen = in_trace.attention_weights(q[None, None, start:stop], k[None, None, :stop], None, **options)[0]
        block = seen.new_zeros(1, stop - start, col1 - col0)
        right = min(col1, stop)  # sources past the block's last destination: zero (causal)
        if right > col0:
            block[..., : right - col0] = seen[..., col0:right]
        parts.append(pool(block, factor, mode))
    return torch.cat(parts, dim=-2)
