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

A dictionary (`circuitwidgets.dictionary`) names where it reads in TransformerLens naming, as users write
it; `from_hook_name` parses that into a site, the one place where such a name is read above the backends.

Example:
    >>> site("z", 1)
    ('z', 1)
    >>> from_hook_name("blocks.1.hook_resid_pre"), from_hook_name("blocks.0.attn.hook_z")
    (('resid_pre', 1), ('z', 0))
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


#: TransformerLens hook names a dictionary may read (``{layer}`` its block index) -> the site word.
_HOOK_NAMES: dict[str, str] = {
    "hook_resid_pre": "resid_pre", "hook_resid_mid": "resid_mid", "hook_resid_post": "resid_post",
    "hook_attn_out": "attn_out", "hook_mlp_out": "mlp_out",
    "attn.hook_z": "z", "attn.hook_q": "q", "attn.hook_k": "k", "attn.hook_v": "v",
}


def from_hook_name(name: Any) -> Site:
    """The site of a TransformerLens hook name ``blocks.L.<hook>`` (``hook_resid_pre``, ``hook_resid_mid``,
    ``hook_resid_post``, ``hook_attn_out``, ``hook_mlp_out``, ``attn.hook_z``, ``attn.hook_q``, ``attn.hook_k``,
    ``attn.hook_v``); a site ``(word, layer)`` is returned checked. ValueError naming what is accepted otherwise.

    Example:
        >>> from_hook_name("blocks.3.hook_mlp_out"), from_hook_name(("resid_post", 2))
        (('mlp_out', 3), ('resid_post', 2))
        >>> from_hook_name("blocks.0.ln1.hook_normalized")
        Traceback (most recent call last):
        ...
        ValueError: hook_name 'blocks.0.ln1.hook_normalized' is not one this package reads: blocks.L.hook_resid_pre, \
blocks.L.hook_resid_mid, blocks.L.hook_resid_post, blocks.L.hook_attn_out, blocks.L.hook_mlp_out, blocks.L.attn.hook_z, \
blocks.L.attn.hook_q, blocks.L.attn.hook_k, blocks.L.attn.hook_v (TransformerLens naming), or a site (word, layer)
    """
    if isinstance(name, tuple):
        return site(*name) if len(name) == 2 else site(name, None)
    if not isinstance(name, str):
        raise TypeError(f"hook_name must be a TransformerLens hook name (str) or a site (word, layer); got {name!r:.60}")
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blocks" and parts[1].isdigit() and parts[2] in _HOOK_NAMES:
        return _HOOK_NAMES[parts[2]], int(parts[1])
    known = ", ".join(f"blocks.L.{hook}" for hook in _HOOK_NAMES)
    raise ValueError(
        f"hook_name {name!r} is not one this package reads: {known} (TransformerLens naming), or a site (word, layer)"
    )


def transformer_lens_name(where: Site) -> str:
    """The TransformerLens hook name of a site (what a dictionary's ``hook_name`` says): the inverse of `from_hook_name`.

    Example:
        >>> transformer_lens_name(("z", 2)), transformer_lens_name(("resid_pre", 0))
        ('blocks.2.attn.hook_z', 'blocks.0.hook_resid_pre')
    """
    word, layer = site(*where)
    name = next((hook for hook, w in _HOOK_NAMES.items() if w == word), None)
    if name is None:
        raise ValueError(f"site {word!r} has no TransformerLens hook name a dictionary reads")
    return f"blocks.{layer}.{name}"
