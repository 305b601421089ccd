"""Sites: the protocol's words for the places of a run that can be read or changed.

Analysis and widgets name an activation as ``(word, layer)``, e.g. ``("z", 1)`` for every head's
output of block 1 before ``W_O``; each backend maps the words to its own hook points (TransformerLens
``blocks.1.attn.hook_z``, ...). No module above the backends spells a hook name.

| word | activation | shape |
|---|---|---|
| ``z`` | each head's output before ``W_O`` | ``[batch, pos, head, d_head]`` |
| ``q``, ``k``, ``v`` | queries, keys, values (``k``, ``v``: one per K/V group) | ``[batch, pos, head, d_head]`` |
| ``pattern`` | attention pattern | ``[batch, head, query, key]`` |
| ``resid_pre``, ``resid_mid``, ``resid_post`` | residual stream entering, after attention, leaving | ``[batch, pos, d_model]`` |
| ``attn_out``, ``mlp_out`` | what attention and the MLP write | ``[batch, pos, d_model]`` |

Example:
    >>> site("z", 1)
    ('z', 1)
    >>> site("hook_z", 1)
    Traceback (most recent call last):
    ...
    ValueError: site must be one of z, q, k, v, pattern, resid_pre, resid_mid, resid_post, attn_out, mlp_out; got 'hook_z'
"""

from __future__ import annotations

import operator
from typing import Any

#: word -> what it names (the table above)
WORDS: dict[str, str] = {
    "z": "each head's output before W_O [batch, pos, head, d_head]",
    "q": "queries [batch, pos, head, d_head]",
    "k": "keys [batch, pos, kv head, d_head]",
    "v": "values [batch, pos, kv head, d_head]",
    "pattern": "attention pattern [batch, head, query, key]",
    "resid_pre": "residual stream entering the block [batch, pos, d_model]",
    "resid_mid": "residual stream after attention [batch, pos, d_model]",
    "resid_post": "residual stream leaving the block [batch, pos, d_model]",
    "attn_out": "what attention writes [batch, pos, d_model]",
    "mlp_out": "what the MLP writes [batch, pos, d_model]",
}
#: Words whose activation has a head dimension (index 2; ``pattern``: index 1).
HEADED = ("z", "q", "k", "v", "pattern")

Site = tuple[str, int]


def site(word: Any, layer: Any) -> Site:
    """``(word, layer)`` checked: `word` one of `WORDS`, `layer` a block index (an int, not a bool)."""
    if not isinstance(word, str) or word not in WORDS:
        raise ValueError(f"site must be one of {', '.join(WORDS)}; got {word!r}")
    if isinstance(layer, bool):
        raise TypeError(f"a site's layer must be an int; got {layer!r}")
    try:
        return word, operator.index(layer)
    except TypeError:
        raise TypeError(f"a site's layer must be an int; got {layer!r}") from None


def is_site(where: Any) -> bool:
    """True for a ``(word, layer)`` pair (a backend maps it); False for anything else (a backend's own hook name)."""
    return isinstance(where, tuple) and len(where) == 2 and where[0] in WORDS
