"""The request vocabulary of `circuitwidgets.in_trace`, answered from whole patterns (backends that have them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import in_trace


def reduce_patterns(weights: torch.Tensor, request: dict[str, Any], tokens: torch.Tensor) -> dict[str, Any]:
    """`in_trace.layer_reduction`'s answer to `request` from one layer's patterns ``[batch, heads, q, k]``.

    Example:
        >>> w = torch.softmax(torch.randn(1, 2, 3, 3).tril().masked_fill(torch.ones(3, 3).triu(1).bool(), -1e9), -1)
        >>> sorted(reduce_patterns(w, {"factor": 1, "block": (0, 0, 3, 0, 3, 1)}, torch.tensor([[1, 2, 1]])))
        ['block', 'codes']
    """
    weights = weights.float()
    result: dict[str, Any] = {}
    if request.get("factor"):
        result["codes"] = in_trace.quantize(in_trace.pool(weights[0], request["factor"], request.get("pool", "max")))
    block = request.get("block")
    if block is not None:
        head, row0, row1, col0, col1, step = block
        chosen = weights if head is None else weights[:, head : head + 1]
        result["block"] = in_trace.pool(chosen[..., row0:row1, col0:col1], step, request.get("pool", "max"))
    kinds = request.get("kinds", ())
    if kinds:
        result["mass"] = {kind: in_trace.target_mass(weights, in_trace.target_mask(tokens, kind)) for kind in kinds}
    return result


def reduce_layers(
    patterns: Callable[[torch.Tensor, list[int]], torch.Tensor], tokens: torch.Tensor, requests: dict[int, dict[str, Any]]
) -> dict[int, dict[str, Any]]:
    """``{layer: answer}`` to each request from one run of ``patterns(tokens, layers)`` (``[batch, layers, heads, q, k]``)."""
    layers = sorted(requests)
    weights = patterns(tokens, layers)
    return {layer: reduce_patterns(weights[:, i], requests[layer], tokens) for i, layer in enumerate(layers)}
