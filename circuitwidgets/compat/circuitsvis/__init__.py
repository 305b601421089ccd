"""CircuitsVis's calls, drawing circuitwidgets widgets: ``import circuitwidgets.compat.circuitsvis as cv``.

The one change a tutorial needs is its import line; each call keeps CircuitsVis's signature
(names, positional order, defaults, shapes) and returns a widget, which displays in a notebook
and exports with ``.save_html(path)``:

- ``cv.attention.attention_patterns(tokens, attention)``, ``cv.attention.attention_pattern(tokens,
  attention, ...)`` and ``cv.attention.attention_heads(attention, tokens, attention_head_names, ...)``
  make `circuitwidgets.AttentionPattern.from_tensors` (its class, which is also HTML: `str()` and `show_code()` give the page);
- ``cv.tokens.colored_tokens(tokens, values, min_value, max_value, ...)`` makes `circuitwidgets.ColoredTokens`.

An argument with no equivalent here is accepted and named in a ``UserWarning`` saying what happens
instead (each submodule's docstring lists them); none is dropped silently. CircuitsVis's other
modules (activations, top-k, logits) have no equivalent: reaching for one raises AttributeError.

Example:
    >>> import circuitwidgets as cw
    >>> import circuitwidgets.compat.circuitsvis as cv
    >>> model = cw.demo_model()
    >>> logits, cache = model.run_with_cache(model.to_tokens("abcabc"))
    >>> w = cv.attention.attention_patterns(tokens=model.to_str_tokens("abcabc"), attention=cache["pattern", 1][0])
    >>> type(w).__name__, w.patterns["shape"]
    ('RenderedAttention', [4, 7, 7])
"""

from __future__ import annotations

from typing import Any

from . import attention, tokens

__all__ = ["attention", "tokens"]


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"circuitwidgets.compat.circuitsvis has no {name!r}: only attention (attention_patterns, attention_pattern, "
        "attention_heads) and tokens (colored_tokens) have equivalents here"
    )
