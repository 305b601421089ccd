"""Ablated heads: the hooks that replace heads' outputs (at protocol sites), and `Ablated`, a model under them.

A head's output is its ``z`` (the site ``("z", layer)``, ``[batch, pos, head, d_head]``) times
``W_O[head]``; ablating it replaces its ``z`` (``b_O`` untouched):

- ``"zero"``: ``z = 0``;
- ``"mean"``: ``z`` at each position replaced by its mean over a reference batch at that position;
- ``"resample"``: ``z`` taken from another prompt at the same positions: prompt ``i`` of a batch
  takes reference prompt ``i mod len(reference)`` (with the batch itself as reference: prompt
  ``i + 1``, the last takes the first).

Replacements come from the model as it is when the hooks are made (the backend that runs an `Ablated`,
`circuitwidgets.backends.ablated.AblatedBackend`, is rebuilt, and its means recomputed, when the model
changes). Shared by the analysis (`circuitwidgets.analysis.interventions`) and that backend: it names
sites, never a backend's hook points, and runs through any object with ``run_until`` (a backend's runs).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .sites import Site

METHODS = ("zero", "mean", "resample")
Hook = tuple[Site, Callable[..., Any]]


def z_site(layer: int) -> Site:
    """The site of block `layer`'s heads' outputs before ``W_O``."""
    return ("z", layer)


def check_heads(heads: Any, facts: Any) -> list[tuple[int, int]]:
    """`heads` as a sorted list of distinct ``(layer, head)`` pairs; ValueError/TypeError naming a bad one.

    Integers of any kind count (``numpy.int64``, a one-element integer tensor), not bools or floats.

    Example:
        >>> import circuitwidgets as cw
        >>> check_heads([(1, 2), (0, 3), (1, 2)], cw.as_view(cw.demo_model()).facts)
        [(0, 3), (1, 2)]
    """
    if isinstance(heads, tuple) and len(heads) == 2 and all(_index(x) is not None for x in heads):
        heads = [heads]  # one (layer, head) pair
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Iterable):
        raise TypeError(f"heads must be a list of (layer, head) pairs; got {heads!r}")
    checked = set()
    for pair in heads:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Iterable):
            raise TypeError(f"heads must be a list of (layer, head) pairs; got {heads!r}")
        ints = [_index(x) for x in pair]
        found = [i for i in ints if i is not None]
        if len(ints) != 2 or len(found) != 2:
            raise TypeError(f"each head must be a (layer, head) pair of ints; got {pair!r}")
        layer, head = found
        if layer not in facts.attn_layers:
            raise ValueError(f"head {pair}: layer {layer} is not an attention layer; the layers are {list(facts.attn_layers)}")
        if not 0 <= head < facts.n_heads:
            raise ValueError(f"head {pair}: head must be in [0, {facts.n_heads}); got {head}")
        checked.add((layer, head))
    return sorted(checked)


def _index(x: Any) -> int | None:
    """`x` as an int if it is an integer (not a bool), else None."""
    if isinstance(x, bool):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _by_layer(heads: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    layers: dict[int, list[int]] = {}
    for layer, head in heads:
        layers.setdefault(layer, []).append(head)
    return layers


def ablation_sources(
    runs: Any, layers: Iterable[int], method: str, reference: torch.Tensor | None = None, *, shifted: bool = False
) -> dict[int, torch.Tensor | None]:
    """What ablated heads of each of `layers` take, from one run of `reference` ``[batch, pos]`` tokens:
    ``None`` (``"zero"``) or every head's replacement ``z`` ``[prompts, pos, n_heads, d_head]`` (prompt
    ``i`` of a run takes ``[i mod prompts]``; one prompt for ``"mean"``). ``shifted=True``: the reference
    is the batch that will run, and prompt ``i`` takes prompt ``i + 1``'s output.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    layers = sorted(set(layers))
    if method == "zero":
        return dict.fromkeys(layers)
    check_reference(method, reference, shifted)
    assert reference is not None
    seen = runs.run_until(reference, {z_site(layer): None for layer in layers})
    return {layer: source_of(seen[z_site(layer)], method, shifted) for layer in layers}


def check_reference(method: str, reference: torch.Tensor | None, shifted: bool = False) -> None:
    """ValueError when `reference` tokens cannot feed `method` (``"mean"``/``"resample"``): none, or one prompt."""
    if reference is None:
        raise ValueError(f"{method} ablation needs reference tokens")
    if reference.shape[0] < 2 and shifted:
        raise ValueError("resample ablation of one prompt against itself changes nothing: give a batch, or reference=")
    if reference.shape[0] < 2 and method == "mean":
        raise ValueError(
            "mean ablation needs at least two reference prompts to average over (the mean of one is itself); got one "
            "(without reference=, the reference is the batch run)"
        )


def source_of(z: torch.Tensor, method: str, shifted: bool = False) -> torch.Tensor:
    """What ablated heads take from the reference's ``z`` ``[prompts, pos, n_heads, d_head]`` (``"mean"`` or
    ``"resample"``; see `ablation_sources`)."""
    return z.mean(0, keepdim=True) if method == "mean" else z.roll(-1, 0) if shifted else z


def replace_heads(heads: list[int], source: torch.Tensor | None) -> Callable[..., torch.Tensor]:
    """A ``hook_z`` hook setting ``z[:, :, heads]`` to 0 (`source` None) or to `source`'s (see `ablation_sources`)."""

    def hook(z: torch.Tensor, hook: Any = None) -> torch.Tensor:
        z = z.clone()
        if source is None:
            z[:, :, heads] = 0
            return z
        batch, seq = z.shape[:2]
        if source.shape[1] < seq:
            raise ValueError(f"the reference prompts have {source.shape[1]} positions, fewer than the {seq} run: give longer")
        rows = torch.arange(batch, device=source.device) % source.shape[0]
        z[:, :, heads] = source[rows, :seq][:, :, heads].to(z.dtype)
        return z

    return hook


def ablation_hooks(
    runs: Any, heads: list[tuple[int, int]], method: str, reference: torch.Tensor | None = None, *, shifted: bool = False
) -> list[Hook]:
    """``fwd_hooks`` that ablate `heads` (checked pairs) by `method` (one run of `reference`: `ablation_sources`)."""
    layers = _by_layer(heads)
    sources = ablation_sources(runs, layers, method, reference, shifted=shifted)
    return [(z_site(layer), replace_heads(index, sources[layer])) for layer, index in layers.items()]


class Ablated:
    """A model with heads ablated: any widget or analysis call given it runs the model under the ablation.

    Made by `circuitwidgets.analysis.ablated` (which checks the heads); weight views read the
    model's weights unchanged. ``label`` says what is ablated, for captions.
    """

    def __init__(
        self,
        model: Any,
        heads: list[tuple[int, int]],
        method: str = "zero",
        reference: torch.Tensor | None = None,
        options: tuple = (),
    ):
        self.model, self.heads, self.method, self.reference = model, list(heads), method, reference
        #: The options of the backend `model` runs on (a Hugging Face model's ``remote=``, tokenizer...).
        self.options = options

    @property
    def label(self) -> str:
        names = ", ".join(f"L{layer}H{head}" for layer, head in self.heads) or "no head"
        return f"{names} {self.method}-ablated"

    def __repr__(self) -> str:
        return f"Ablated({self.label})"


