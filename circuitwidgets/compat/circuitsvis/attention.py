"""CircuitsVis's ``circuitsvis.attention`` calls, returning `AttentionPattern.from_tensors` widgets.

Arguments and what becomes of them:

- ``tokens`` (token strings) and ``attention`` (``[n_heads, destination, source]``; one head's
  ``[destination, source]`` for `attention_pattern`; a torch tensor, NumPy/JAX array or nested
  lists) are drawn as given, checked as `AttentionPattern.from_tensors` checks them.
- ``attention_head_names`` names the heads (thumbnails, head selector, title). As in CircuitsVis,
  a list longer than the heads is cut to them (e.g. a model's 12 names for a 4-head layer), with
  a ``UserWarning``; a shorter one is refused (it would leave heads unnamed).
- ``mask_upper_tri``: True, or None (CircuitsVis's default: masked), drops the weights above the
  diagonal (drawn empty); False draws them as given (a causal pattern has none).
- ``show_axis_labels``: True or None as here (the axes are always labelled); False warns.
- ``max_value``, ``min_value``, ``negative_color``, ``positive_color``: no equivalent (attention
  is coloured on a fixed 0 to 1 scale in the notebook theme's colours): a value other than None
  warns (``UserWarning``) and is ignored.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ...widgets._given import as_float32
from ...widgets.attention import AttentionFromTensors
from ._rendered import Rendered
from ._unsupported import unsupported

#: What happens instead, for each argument that has no equivalent.
INSTEAD = {
    "max_value": "attention weights are coloured on a fixed 0 to 1 scale",
    "min_value": "attention weights are coloured on a fixed 0 to 1 scale",
    "negative_color": "the colours follow the notebook's theme (attention weights are never negative)",
    "positive_color": "the colours follow the notebook's theme",
    "show_axis_labels": "the axes are always labelled",
}


class RenderedAttention(Rendered, AttentionFromTensors):
    """`AttentionPattern.from_tensors`'s widget that is also what CircuitsVis returns: ``str()``, ``show_code()``
    and ``__html__()`` give its page (written to a file, it works offline)."""


def _names(head_names: Any, n_heads: int | None) -> Any:
    """CircuitsVis's rule for extra names: the first `n_heads` are used (with a warning); anything else as given."""
    if head_names is None or n_heads is None or isinstance(head_names, str) or not hasattr(head_names, "__len__"):
        return head_names  # (checked, and refused with its message, by from_tensors)
    names = list(head_names)
    if len(names) > n_heads:
        warnings.warn(
            f"attention_head_names has {len(names)} names for {n_heads} heads: the first {n_heads} are used",
            UserWarning,
            stacklevel=4,
        )
        return names[:n_heads]
    return names


def _widget(function: str, tokens: Any, attention: Any, head_names: Any, mask_upper_tri: Any, **others: Any) -> RenderedAttention:
    for name, value in others.items():
        if value is not None and not (name == "show_axis_labels" and value is True):
            unsupported(function, name, value, INSTEAD[name], stacklevel=4)  # (the caller of `function`)
    if mask_upper_tri is not None and not isinstance(mask_upper_tri, bool):
        raise TypeError(f"mask_upper_tri must be True, False or None; got {type(mask_upper_tri).__name__}")
    stack = as_float32(attention, "attention")
    square = stack.dim() >= 2 and stack.shape[-1] == stack.shape[-2]  # (other shapes: refused, named, below)
    if mask_upper_tri is not False and square:
        masked = stack.tril()
        if not torch.equal(masked, stack):  # (else the tensor as given: its dtype sets the row-sum tolerance)
            attention = masked
    n_heads = (stack.shape[0] if stack.dim() == 3 else 1) if square else None
    return RenderedAttention(tokens, attention, head_names=_names(head_names, n_heads))


def attention_heads(
    attention: Any,
    tokens: list[str],
    attention_head_names: list[str] | None = None,
    max_value: float | None = None,
    min_value: float | None = None,
    negative_color: str | None = None,
    positive_color: str | None = None,
    mask_upper_tri: bool | None = None,
) -> RenderedAttention:
    """Every head's pattern: thumbnails of each, the selected one large. `attention` is ``[n_heads, destination, source]``.

    Example:
        >>> import numpy as np
        >>> w = attention_heads(np.tril(np.ones((2, 3, 3))) / np.arange(1, 4)[:, None], ["a", "b", "c"], ["L0H0", "L0H1"])
        >>> w.info["head_names"]
        ['L0H0', 'L0H1']
    """
    return _widget(
        "attention_heads",
        tokens,
        attention,
        attention_head_names,
        mask_upper_tri,
        max_value=max_value,
        min_value=min_value,
        negative_color=negative_color,
        positive_color=positive_color,
    )


def attention_patterns(tokens: list[str], attention: Any) -> RenderedAttention:
    """Every head's pattern (CircuitsVis's older name for `attention_heads`). `attention` is ``[n_heads, destination, source]``.

    Example:
        >>> import torch
        >>> attention_patterns(["a", "b"], torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])).patterns["shape"]
        [1, 2, 2]
    """
    return _widget("attention_patterns", tokens, attention, None, None)


def attention_pattern(
    tokens: list[str],
    attention: Any,
    max_value: float | None = None,
    min_value: float | None = None,
    negative_color: str | None = None,
    show_axis_labels: bool | None = None,
    positive_color: str | None = None,
    mask_upper_tri: bool | None = None,
) -> RenderedAttention:
    """One head's pattern, ``[destination, source]``; hover a cell for its exact weight.

    Example:
        >>> attention_pattern(["a", "b"], [[1.0, 0.0], [0.25, 0.75]]).current_patterns()[0, 1].tolist()
        [0.25, 0.75]
    """
    return _widget(
        "attention_pattern",
        tokens,
        attention,
        None,
        mask_upper_tri,
        max_value=max_value,
        min_value=min_value,
        negative_color=negative_color,
        show_axis_labels=show_axis_labels,
        positive_color=positive_color,
    )


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"circuitwidgets.compat.circuitsvis.attention has no {name!r}: it has attention_patterns, attention_pattern "
        "and attention_heads"
    )
