"""`ColoredTokens`: a prompt as running text, each token coloured by a value given (no model).

What CircuitsVis's ``colored_tokens`` shows (`circuitwidgets.compat.circuitsvis`): per-token
losses, attributions, neuron activations. The values travel exact (float32); hovering a token
shows its value, clicking locks it.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import traitlets

from ._given import ModelFree, as_float32, token_strings
from .base import CircuitWidget, short


def _bound(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number or None; got {type(value).__name__} {short(value)}")
    return float(value)


def colour_range(values: torch.Tensor, min_value: Any = None, max_value: Any = None) -> tuple[float, float]:
    """``(lo, hi)`` of the colour scale: `min_value` / `max_value`, else the values' own extremes with 0 included.

    A scale with ``lo < 0`` is diverging around 0 (negatives as far as `lo`, positives as far as
    `hi`); otherwise sequential from `lo` to `hi`. Values outside are drawn at the ends.

    Example:
        >>> import torch
        >>> colour_range(torch.tensor([0.5, 2.0])), colour_range(torch.tensor([-1.0, 0.5])), colour_range(torch.zeros(2))
        ((0.0, 2.0), (-1.0, 0.5), (0.0, 1.0))
    """
    lo, hi = _bound(min_value, "min_value"), _bound(max_value, "max_value")
    lo = min(0.0, float(values.min())) if lo is None else lo
    hi = max(0.0, float(values.max())) if hi is None else hi
    if min_value is not None and max_value is not None and not lo < hi:
        raise ValueError(f"min_value={min_value} must be below max_value={max_value}")
    if max_value is not None and hi < lo:
        raise ValueError(
            f"max_value={max_value} is not above the scale's low end {lo:g} (the smallest value, 0 included): "
            "give a larger max_value, or a min_value below it"
        )
    if min_value is not None and hi < lo:
        raise ValueError(
            f"min_value={min_value} is not below the scale's high end {hi:g} (the largest value, 0 included): "
            "give a smaller min_value, or a max_value above it"
        )
    if not lo < hi:  # every value at the one bound given or at 0 (e.g. all 0): a unit span above it
        hi = lo + 1.0
    return lo, hi


class ColoredTokens(ModelFree, CircuitWidget):
    """Tokens as running text, each coloured by its value; hover a token for its exact value, click to lock it.

    Args:
        tokens: the token strings.
        values: one number per token (a list, NumPy or JAX array, or a torch tensor of any dtype or device).
        min_value, max_value: the ends of the colour scale (default: the values' extremes, 0
            included). Below 0 the scale is diverging around 0; otherwise sequential.

    Not a model widget: it has no layer or head (setting them is refused) and is not in
    `WIDGETS`, whose widgets all run on a model.

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.ColoredTokens(["The", " cat", " sat"], [0.1, -2.0, 0.75])
        >>> w.values["shape"], w.values["range"], w.values["kind"]
        ([3], [-2.0, 0.75], 'diverging')
    """

    view_name = "tokens"
    no_model = "ColoredTokens colours the tokens given: it has no model, layer or head"

    values = traitlets.Dict(
        help="payload of the values (float32 [n_tokens], exact) with labels (the token strings), range [lo, hi] "
        "of the colour scale and kind ('sequential' from lo, or 'diverging' around 0 when lo < 0)"
    ).tag(sync=True)

    def __init__(self, tokens: Any, values: Any, *, min_value: Any = None, max_value: Any = None, **kwargs: Any) -> None:
        labels = token_strings(tokens)
        numbers = as_float32(values, "values")
        if numbers.dim() != 1 or numbers.shape[0] != len(labels):
            raise ValueError(f"values must be one number per token: shape [{len(labels)}]; got shape {list(numbers.shape)}")
        bad = ~torch.isfinite(numbers)
        if bad.any():
            i = int(bad.nonzero()[0])
            raise ValueError(f"values must be finite; got {float(numbers[i])} at token {i} ({labels[i]!r})")
        self._labels, self._numbers = labels, numbers
        self._range = colour_range(numbers, min_value, max_value)
        super().__init__(None, **kwargs)
        self._start()

    def _check_layer(self, value: int) -> int:
        raise ValueError(self.no_model)

    _check_head = _check_layer

    def _refresh(self) -> None:
        lo, hi = self._range
        kind = "diverging" if lo < 0 else "sequential"
        self.values = self.payload_float32(self._numbers, labels=self._labels, range=[lo, hi], kind=kind)
