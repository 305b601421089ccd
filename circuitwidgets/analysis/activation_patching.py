"""Activation patching: which heads carry the difference between a clean and a corrupted prompt.

Each head's activation at `site` is taken from the clean run into a run of the corrupted prompt,
one head (or one head at one position) at a time, and the metric of that patched run is kept:
what TransformerLens' ``transformer_lens.patching.get_act_patch_attn_head_*`` functions return.

Sites (`circuitwidgets.sites`, which each backend maps to its own hook points): ``"out"`` the head's
``z`` (its output before ``W_O``), ``"q"``, ``"k"``, ``"v"`` and ``"pattern"`` (``[batch, head, query, key]``;
by position: one query row). With grouped K/V heads (``n_kv_heads < n_heads``) the ``k`` and ``v``
of a query head are its group's, shared with the other heads of the group: patching one patches the
group, so every head of a group gets the same value (patch ``"pattern"`` for one head's own use).

Example:
    >>> import torch
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> clean = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=4, seed=1)
    >>> corrupted = torch.cat([clean[:, :11], clean[:, 11:].roll(1, 0)], 1)   # second copies swapped
    >>> result = cw.analysis.patching(model, clean, corrupted, "loss", progress=False)
    >>> result.values.shape, result.normalised.shape
    (torch.Size([2, 4]), torch.Size([2, 4]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..model import as_view
from .interventions import Metric, metric_of, progress_of

#: What `patching` patches -> the protocol's site word (`circuitwidgets.sites`): ``"out"`` is the head's ``z``.
SITES = {"out": "z", "q": "q", "k": "k", "v": "v", "pattern": "pattern"}


@dataclass(frozen=True)
class PatchingResult:
    """`patching`'s answer: ``values`` ``[n_layers, n_heads]`` (``[n_layers, n_heads, seq]`` by
    position) the metric of each patched run; ``clean_value`` and ``corrupted_value`` the metric of
    the two runs unpatched; ``site``; ``grouped``: True when K/V groups were patched whole."""

    values: torch.Tensor
    clean_value: float
    corrupted_value: float
    site: str
    by_position: bool
    grouped: bool

    @property
    def normalised(self) -> torch.Tensor:
        """``(patched - corrupted) / (clean - corrupted)``: 1 = the head alone restores the clean behaviour.

        ValueError when the clean and corrupted runs score the same (nothing to restore)."""
        gap = self.clean_value - self.corrupted_value
        if gap == 0:
            raise ValueError("the clean and corrupted prompts score the same on this metric: nothing to normalise by")
        return (self.values - self.corrupted_value) / gap


def _scalar(measure: Metric) -> Callable[[torch.Tensor], float]:
    return lambda logits: float(measure(logits).mean())


def _patcher(site: str, index: int, clean: torch.Tensor, position: int | None) -> Callable[..., torch.Tensor]:
    """A hook putting the clean activation of head (or K/V group) `index` into the run, at one position or all."""

    def hook(act: torch.Tensor, hook: Any = None) -> torch.Tensor:
        act = act.clone()
        where = (
            (slice(None), index, slice(None) if position is None else position)
            if site == "pattern"
            else (slice(None), slice(None) if position is None else position, index)
        )
        act[where] = clean[where].to(act.dtype)
        return act

    return hook


def patching(
    model: Any,
    clean: Any,
    corrupted: Any,
    metric: str | Metric,
    site: str = "out",
    by_position: bool = False,
    *,
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
    progress: Any = True,
) -> PatchingResult:
    """The metric of the corrupted run with each head's activation at `site` patched in from the clean run.

    `clean` and `corrupted`: token batches of one shape. `metric`: a callable on logits returning a
    scalar or one value per prompt (averaged over the batch), ``"loss"`` (next-token loss of the
    *clean* tokens at `positions`) or ``"logit_diff"`` (`target` − `baseline_token` at one position).
    One clean run, one corrupted run, and one run per head (per head and position with
    ``by_position=True``; per K/V group for ``"k"``/``"v"`` with grouped heads). See the module docstring.
    """
    view = as_view(model)
    if site not in SITES:
        raise ValueError(f"site must be one of {list(SITES)}; got {site!r}")
    clean, corrupted = view.check_tokens(clean), view.check_tokens(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted tokens must have one shape; got {tuple(clean.shape)} and {tuple(corrupted.shape)}")
    if callable(metric):
        measure = _scalar(metric)
    else:
        measure = _scalar(metric_of(metric, clean, view.d_vocab, target, baseline_token, positions))
    names = [(SITES[site], layer) for layer in view.attn_layers]
    clean_logits, cache = view.run_with_hooks(clean, [], keep=names)
    corrupted_value = measure(view.run_with_hooks(corrupted, [])[0])
    grouped = site in ("k", "v") and view.n_kv_heads < view.n_heads
    groups = view.n_kv_heads if grouped else view.n_heads
    seq = clean.shape[1]
    places: list[int | None] = list(range(seq)) if by_position else [None]
    values = torch.empty(len(names), groups, len(places))
    step = progress_of(progress, values.numel(), f"patching {site}")
    for i, name in enumerate(names):
        for index in range(groups):
            for p, position in enumerate(places):
                patched = view.run_with_hooks(corrupted, [(name, _patcher(site, index, cache[name], position))])[0]
                values[i, index, p] = measure(patched)
                step((i * groups + index) * len(places) + p + 1)
    if grouped:  # each query head gets its group's value
        values = values.repeat_interleave(view.n_heads // view.n_kv_heads, dim=1)
    return PatchingResult(
        values=values if by_position else values[..., 0],
        clean_value=measure(clean_logits),
        corrupted_value=corrupted_value,
        site=site,
        by_position=by_position,
        grouped=grouped,
    )
