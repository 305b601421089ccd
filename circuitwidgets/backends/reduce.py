"""The request vocabulary of `circuitwidgets.in_trace`, answered from whole patterns (backends that have them)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from .. import head_metrics, in_trace
from ..numerics import all_finite
from ..progress import tick
from .hooked import HookedRuns, checked_reduction


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
        if request.get("batch_mean"):  # one mean picture of several sequences (a rotary model's positional view)
            result["block"] = result["block"].mean(0, keepdim=True)
    metrics = request.get("scores", ())
    if metrics:
        result["scores"] = {metric: head_metrics.destination_scores(weights, metric, tokens) for metric in metrics}
    return result


def reduce_in_run(runs: HookedRuns, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """``{layer: answer}`` to each request, each layer reduced inside one run as it is computed.

    Where the model's attention can run memory-efficiently (`HookedRuns.run_efficient`), no layer's
    patterns ever exist whole: `in_trace.reduce_call` rebuilds them from the layer's queries and keys
    a block of rows at a time, as inside a remote trace. Else only one layer's patterns exist at a
    time (the model's own, handed to the hook), never a stack of every layer asked for. Either way
    the run stops after the last layer asked for. NaN/Inf raise ValueError.
    """
    efficient = _reduce_efficiently(runs, tokens, requests)
    if efficient is not None:
        return efficient

    def reducer(layer: int) -> Callable[[torch.Tensor], dict[str, Any]]:
        def reduce(pattern: torch.Tensor) -> dict[str, Any]:
            pattern = pattern.float()
            if not bool(torch.isfinite(pattern.sum(-1)).all()):  # a NaN/Inf row's sum is not finite
                raise runs._error(f"attention patterns of layer {layer} contain NaN/Inf values")
            return reduce_patterns(pattern, requests[layer], tokens)

        return reduce

    names = {layer: ("pattern", layer) for layer in sorted(requests)}
    answers = runs.run_until(tokens, {name: reducer(layer) for layer, name in names.items()})
    return {layer: answers[name] for layer, name in names.items()}


def _reduce_efficiently(
    runs: HookedRuns, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]
) -> dict[int, dict[str, Any]] | None:
    """`reduce_in_run`'s answers from one memory-efficient run, or None when the model cannot run so."""
    answers: dict[int, dict[str, Any]] = {}

    def reducer(layer: int) -> Callable[..., None]:
        def reduce(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, scaling: float) -> None:
            if not (all_finite(q[0]) and all_finite(k[0])):  # (a NaN query would make its weights NaN, its codes 0)
                raise runs._error(f"attention patterns of layer {layer} contain NaN/Inf values")
            options = {"scaling": scaling}
            step = functools.partial(tick, "block")
            answer = in_trace.reduce_call(q, k, v, None, options, out.transpose(1, 2), requests[layer], tokens=tokens, tick=step)
            answers[layer] = checked_reduction(layer, answer, runs.facts.dtype)

        return reduce

    if not runs.run_efficient(tokens, {layer: reducer(layer) for layer in requests}):
        return None
    return answers

