"""The one warning of an argument that has no equivalent here (accepted, named, never dropped silently)."""

from __future__ import annotations

import warnings
from typing import Any


def unsupported(function: str, argument: str, value: Any, instead: str, stacklevel: int = 3) -> None:
    """Warn (``UserWarning``) that `argument` of `function` has no effect here, and why.

    `stacklevel` points the warning at the line that called `function` (3: `function` calls this).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     unsupported("attention_heads", "negative_color", "red", "the colours follow the notebook's theme")
        >>> str(caught[0].message)
        "attention_heads(negative_color='red'): no equivalent in circuitwidgets, ignored: the colours follow the notebook's theme"
    """
    shown = repr(value) if len(repr(value)) <= 40 else f"{type(value).__name__}"
    message = f"{function}({argument}={shown}): no equivalent in circuitwidgets, ignored: {instead}"
    warnings.warn(message, UserWarning, stacklevel=stacklevel)
