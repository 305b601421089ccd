"""Attention weights given as tensors (`AttentionPattern.from_tensors`): read, checked, and what the widget notes.

Example:
    >>> import torch
    >>> stack, facts = checked_attention(torch.tensor([[1.0, 0.0], [0.25, 0.25]]), 2)
    >>> tensor_note(facts)
    'from tensors: no model, so no layer or prompt controls; 1 row does not sum to 1 (head 0, destination 1: 0.5), drawn as given'
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from ._contract import short
from ._given import as_float32, itemsize

#: From tensors: weights further than this outside [0, 1] are refused (rounding may stray this far).
RANGE_TOLERANCE = 1e-5
#: From tensors: rows whose sum is further than this from 1 are noted (drawn as given); 2-byte dtypes
#: (bfloat16, float16) round each weight to 3 digits, so theirs is looser.
ROW_SUM_TOLERANCE = 1e-3
ROW_SUM_TOLERANCE_16 = 1e-2
#: From tensors: cells checked at once (bounds the memory of the checks of a long prompt).
CHECK_CELLS = 1 << 24
#: What a widget drawn from tensors says in place of its model controls.
TENSOR_NOTE = "from tensors: no model, so no layer or prompt controls"


class TensorFacts(NamedTuple):
    """What `checked_attention` found: causal (zero above every diagonal), rows not summing to ~1."""

    causal: bool
    off_rows: int  # rows (over every head) whose sum is not ~1
    example: tuple[int, int, float] | None  # (head, destination, sum) of the first of them


def checked_attention(attention: Any, n_tokens: int) -> tuple[torch.Tensor, TensorFacts]:
    """`attention` (``[n_heads, destination, source]`` or one head's ``[destination, source]``) as float32 ``[H, n, n]``.

    Refused (ValueError or TypeError naming the problem): anything that is not an array of real
    numbers, other shapes, sizes other than `n_tokens`, NaN or infinite values, values outside
    [0, 1]. Rows that do not sum to ~1 are allowed and counted in the facts returned.

    Example:
        >>> import torch
        >>> stack, facts = checked_attention(torch.tril(torch.ones(3, 3)) / torch.arange(1, 4)[:, None], 3)
        >>> stack.shape, facts.causal, facts.off_rows
        (torch.Size([1, 3, 3]), True, 0)
    """
    stack = as_float32(attention, "attention")
    shape = tuple(stack.shape)
    if stack.dim() == 2:
        stack = stack.unsqueeze(0)
    if stack.dim() != 3:
        hint = "; for a batch, pick one sequence, e.g. cache['pattern', 0][0]" if stack.dim() == 4 else ""
        raise ValueError(
            f"attention must be [n_heads, destination, source] or one head's [destination, source]; got shape {shape}{hint}"
        )
    n_heads, rows, cols = stack.shape
    if rows != cols:
        raise ValueError(f"attention must be square over its last two dims (destination, source); got shape {shape}")
    if rows != n_tokens:
        raise ValueError(f"attention has {rows} positions (shape {shape}) but tokens has {n_tokens} strings: they must match")
    if n_heads == 0 or rows == 0:
        raise ValueError(f"attention is empty (shape {shape})")
    tolerance = ROW_SUM_TOLERANCE_16 if itemsize(attention) <= 2 else ROW_SUM_TOLERANCE
    causal, off_rows, example = True, 0, None
    chunk = max(1, CHECK_CELLS // (n_heads * rows))
    for r0 in range(0, rows, chunk):
        block = stack[:, r0 : r0 + chunk]
        low, high = (float(x) for x in torch.aminmax(block))
        if not -RANGE_TOLERANCE <= low <= high <= 1 + RANGE_TOLERANCE:  # (NaN fails too)
            bad = ~torch.isfinite(block)
            if bad.any():
                raise ValueError(f"attention must be finite; got {float(block[bad][0])} at {_cell(bad, r0)}")
            value = low if low < -RANGE_TOLERANCE else high
            raise ValueError(f"attention weights must be in [0, 1]; got {value:.6g} at {_cell(block == value, r0)}")
        sums = block.sum(-1)
        far = (sums - 1).abs() > tolerance
        if far.any():
            off_rows += int(far.sum())
            if example is None:
                h, i = far.nonzero()[0].tolist()
                example = (h, r0 + i, float(sums[h, i]))
        if causal:  # sources right of the block's last destination, then the triangle beside the diagonal
            end = r0 + block.shape[1]
            causal = not (bool(block[:, :, end:].any()) or bool(torch.triu(block[:, :, r0 + 1 : end]).any()))
    return stack, TensorFacts(causal, off_rows, example)


def _cell(mask: torch.Tensor, r0: int) -> str:
    """Where the first true cell of `mask` (rows of a block from destination `r0`) is, in words."""
    h, i, j = mask.nonzero()[0].tolist()
    return f"head {h}, destination {r0 + i}, source {j}"


def tensor_note(facts: TensorFacts) -> str:
    """The note of a widget drawn from tensors: no model controls, and rows that do not sum to ~1."""
    if not facts.off_rows or facts.example is None:
        return TENSOR_NOTE
    head, query, total = facts.example
    rows = f"{facts.off_rows} row{'s' * (facts.off_rows > 1)} {'do' if facts.off_rows > 1 else 'does'} not sum to 1"
    return f"{TENSOR_NOTE}; {rows} (head {head}, destination {query}: {total:.4g}), drawn as given"


def head_names_of(names: Any, n_heads: int) -> list[str] | None:
    """`names` checked: None, or one str per head."""
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"head_names must be a list of str, one per head; got {type(names).__name__} {short(names)}")
    if len(names) != n_heads:
        raise ValueError(f"head_names has {len(names)} names but attention has {n_heads} heads: give one per head")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"head_names[{i}] must be a str; got {type(name).__name__} {short(name)}")
    return list(names)


def layer_caption(layer_name: Any) -> str | None:
    """`layer_name` as the caption shown: a str as given, an int as "Layer <n>"."""
    if layer_name is None or isinstance(layer_name, str):
        return layer_name
    if isinstance(layer_name, int) and not isinstance(layer_name, bool):
        return f"Layer {layer_name}"
    raise TypeError(f"layer_name must be a str, an int or None; got {type(layer_name).__name__} {short(layer_name)}")
