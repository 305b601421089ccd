"""Numerics every backend and the analysis share: the working dtype, exact power-of-two scaling, NaN/Inf checks.

Imports only torch and math: shipped into traces with `circuitwidgets.weight_views` (`circuitwidgets.backends.traces`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in `value`, a tensor or nested dicts, lists and tuples of them (a reduced result).

    Example:
        >>> [tuple(t.shape) for t in tensors_in({"a": torch.ones(2), "b": [torch.ones(1, 3), "x"]})]
        [(2,), (1, 3)]
    """
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (dict, list, tuple)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from tensors_in(item)


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision weights (analysis loses too much in fp16/bf16), else `dtype`."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def times_pow2(tensor: torch.Tensor, exponent: Any) -> torch.Tensor:
    """``tensor * 2**exponent``, exactly (`exponent`: ints broadcastable to `tensor`).

    Multiplying by a power of two only moves the binary exponent, so nothing is rounded unless
    the result under- or overflows; exponents beyond the dtype's range of powers of two (e.g.
    ``2**-200`` in float32) are applied in two steps.

    Example:
        >>> times_pow2(torch.tensor([3.0, 1.5]), torch.tensor([-200, 1])).tolist()
        [0.0, 3.0]
        >>> times_pow2(torch.tensor([3e-30], dtype=torch.float64), 100).item() == 3e-30 * 2**100
        True
    """
    exponent = torch.as_tensor(exponent).cpu()
    reach = 1000 if tensor.dtype in (torch.float64, torch.complex128) else 120  # 2**k is a normal number
    half = torch.div(exponent, 2, rounding_mode="floor")
    parts = [exponent] if bool((exponent.abs() <= reach).all()) else [half, exponent - half]
    out = tensor
    for part in parts:
        factors = [math.ldexp(1.0, int(k)) for k in part.flatten().tolist()]
        out = out * torch.tensor(factors, dtype=torch.float64).reshape(part.shape).to(tensor.device, tensor.dtype)
    return out


def unit_scaled(
    tensor: torch.Tensor, dim: int | tuple[int, ...] | None = None, *, slack: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """`tensor` divided by a power of two that brings its largest magnitude into [0.5, 1), and that power.

    Returns ``(scaled, exponent)`` with ``tensor == times_pow2(scaled, exponent)`` exactly; the
    largest magnitude is taken over `dim` (kept as size-1 dimensions of `exponent`), or over the
    whole tensor for None. All-zero slices keep exponent 0, as do slices whose exponent is within
    ``+-slack`` (then, when every slice is, `tensor` itself comes back, not copied). Scale-invariant
    scores (composition, copying, top-k) scale their factors this way before any product, so that
    weights of 1e-30 or 1e30 neither underflow nor overflow.

    Example:
        >>> scaled, exponent = unit_scaled(torch.tensor([[3 * 2.0**-100, -(2.0**-100)], [0.0, 0.0]]), dim=1)
        >>> scaled.tolist(), exponent.flatten().tolist()
        ([[0.75, -0.25], [0.0, 0.0]], [-98, 0])
    """
    if dim is None:  # one pass, no copy: a vocabulary-sized tensor is 154 MB on GPT-2 small
        values = tensor.detach()
        if not values.is_contiguous() and values.ndim >= 2 and values.mT.is_contiguous():
            values = values.mT  # e.g. W_U, a transposed weight: the same entries, read in memory order
        low, high = torch.aminmax(values)
        largest = torch.maximum(-low, high)
    else:  # no |tensor| copy either
        values = tensor.detach()
        largest = torch.maximum(-values.amin(dim=dim, keepdim=True), values.amax(dim=dim, keepdim=True))
    exponent = torch.frexp(largest.float() if largest.dtype in LOW_PRECISION else largest).exponent.long()
    if slack:
        exponent = exponent.masked_fill(exponent.abs() <= slack, 0)
    if not bool(exponent.any()):
        return tensor, exponent.cpu()
    return times_pow2(tensor, -exponent), exponent.cpu()




def non_finite_error(what: str, dtype: torch.dtype) -> ValueError:
    """The error of a run whose activations hold NaN/Inf, with the likely cause for `dtype`."""
    if dtype in LOW_PRECISION:
        why = (
            f"the model runs in {dtype}, whose range its activations overflowed (float16 ends at 65 504): "
            "run it in float32 (model.float()), or look for huge weights or a hook writing NaN/Inf"
        )
    else:
        why = f"the model runs in {dtype}; look for a hook writing NaN/Inf or for huge weights or inputs"
    return ValueError(f"{what}: {why}")


def all_finite(tensor: torch.Tensor) -> bool:
    """True when every entry of `tensor` is finite: its row sums first (a NaN or Inf entry makes its row's sum
    NaN or Inf; one pass, ~10x faster than ``isfinite`` on a vocabulary of logits), entry by entry only when a
    sum is not finite (finite entries whose sum overflowed).

    Example:
        >>> all_finite(torch.tensor([[1.0, 3e38, 3e38]])), all_finite(torch.tensor([[1.0, float("nan")]]))
        (True, False)
    """
    return bool(torch.isfinite(tensor.sum(-1, dtype=torch.float32)).all()) or bool(torch.isfinite(tensor).all())
