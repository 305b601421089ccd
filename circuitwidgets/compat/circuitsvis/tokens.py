"""CircuitsVis's ``circuitsvis.tokens.colored_tokens``, returning a `circuitwidgets.ColoredTokens` widget.

Arguments and what becomes of them:

- ``tokens`` (token strings) and ``values`` (one number per token: a list, NumPy/JAX array or
  torch tensor) are drawn as given; hovering a token shows its exact value.
- ``min_value``, ``max_value``: the ends of the colour scale (default: the values' extremes, 0
  included); below 0 the scale is diverging around 0.
- ``negative_color``, ``positive_color``: no equivalent (the colours follow the notebook's
  theme): a value other than None warns (``UserWarning``) and is ignored.
"""

from __future__ import annotations

from typing import Any

from ...widgets.tokens import ColoredTokens
from ._rendered import Rendered
from ._unsupported import unsupported


class RenderedTokens(Rendered, ColoredTokens):
    """`circuitwidgets.ColoredTokens` that is also what CircuitsVis returns: ``str()``, ``show_code()`` and
    ``__html__()`` give its page."""


def colored_tokens(
    tokens: list[str],
    values: Any,
    min_value: float | None = None,
    max_value: float | None = None,
    negative_color: str | None = None,
    positive_color: str | None = None,
) -> RenderedTokens:
    """The tokens as running text, each coloured by its value.

    Example:
        >>> w = colored_tokens(["The", " cat"], [0.5, -1.0], max_value=2.0)
        >>> w.values["range"]
        [-1.0, 2.0]
    """
    for name, value in (("negative_color", negative_color), ("positive_color", positive_color)):
        if value is not None:
            unsupported("colored_tokens", name, value, "the colours follow the notebook's theme")
    return RenderedTokens(tokens, values, min_value=min_value, max_value=max_value)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"circuitwidgets.compat.circuitsvis.tokens has no {name!r}: it has colored_tokens")
