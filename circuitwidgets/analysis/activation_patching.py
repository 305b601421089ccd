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

from ..ablation import check_heads
from ..model import as_view
from .interventions import Measure, Metric, metric_of, progress_of

#: What `patching` patches -> the protocol's site word (`circuitwidgets.sites`): ``"out"`` is the head's ``z``.
SITES = {"out": "z", "q": "q", "k": "k", "v": "v", "pattern": "pattern"}


@dataclass(frozen=True)
class PatchingResult:
    """`patching`'s answer: ``values`` ``[n_layers, n_heads]`` (``[n_layers, n_heads, seq]`` by
    position) the metric of each patched run (NaN for heads not patched); ``clean_value`` and
    ``corrupted_value`` the metric of the two runs unpatched; ``site``; ``grouped``: True when K/V groups
    were patched whole; ``direction``: ``"denoising"`` (clean activations into the corrupted run) or
    ``"noising"`` (corrupted activations into the clean run)."""

    values: torch.Tensor
    clean_value: float
    corrupted_value: float
    site: str
    by_position: bool
    grouped: bool
    direction: str = "denoising"

    @property
    def normalised(self) -> torch.Tensor:
        """``(patched - corrupted) / (clean - corrupted)``: denoising, 1 = the head alone restores the clean
        behaviour; noising, 0 = the head alone takes the clean run all the way to the corrupted one.

        ValueError when the clean and corrupted runs score the same (nothing to restore)."""
        gap = self.clean_value - self.corrupted_value
        if gap == 0:
            raise ValueError("the clean and corrupted prompts score the same on this metric: nothing to normalise by")
        return (self.values - self.corrupted_value) / gap


DIRECTIONS = ("denoising", "noising")


def scalar_measure(view: Any, metric: Any, tokens: torch.Tensor, target: Any, baseline_token: Any, positions: Any) -> Measure:
    """`metric` as a `Measure` giving one number per run: the mean over the prompts of a per-prompt metric, or a
    callable's own number (a callable returning anything but one number or one per prompt is refused)."""
    measure = metric_of(metric, tokens, view.d_vocab, target, baseline_token, positions, scalar=True)
    return Measure(measure.name, measure.reads, lambda read: measure.on_read(read).float().mean())


def _patcher(site: str, index: int, clean: torch.Tensor, position: int | None) -> Callable[..., torch.Tensor]:
    """A hook putting the clean activation of head (or K/V group) `index` into the run, at one position or all."""

    def hook(act: torch.Tensor, hook: Any = None) -> torch.Tensor:
        act = act.clone()
        act[_where(site, index, position)] = clean[_where(site, index, position)].to(act.dtype)
        return act

    return hook


def _where(site: str, index: int, position: int | None) -> tuple:
    place = slice(None) if position is None else position
    return (slice(None), index, place) if site == "pattern" else (slice(None), place, index)


def _check(view: Any, clean: Any, corrupted: Any, site: str, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
    if site not in SITES:
        raise ValueError(f"site must be one of {list(SITES)}; got {site!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}; got {direction!r}")
    clean, corrupted = view.check_tokens(clean), view.check_tokens(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted tokens must have one shape; got {tuple(clean.shape)} and {tuple(corrupted.shape)}")
    return clean, corrupted


def _jobs(view: Any, heads: Any, site: str, by_position: bool, seq: int) -> tuple[list[tuple[int, int, int | None]], bool]:
    """What to patch, ``(layer, head or K/V group, position or None)`` in order, and whether K/V groups are patched."""
    grouped = site in ("k", "v") and view.n_kv_heads < view.n_heads
    per_group = view.n_heads // view.n_kv_heads if grouped else 1
    every = [(layer, head) for layer in view.attn_layers for head in range(view.n_heads)]
    chosen = check_heads(every if heads is None else heads, view.facts)
    if not chosen:
        raise ValueError("heads must name at least one (layer, head) pair")
    indices = sorted({(layer, head // per_group) for layer, head in chosen})
    places: list[int | None] = list(range(seq)) if by_position else [None]
    return [(layer, index, place) for layer, index in indices for place in places], grouped


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
    heads: Any = None,
    direction: str = "denoising",
    per_run: int | None = None,
) -> PatchingResult:
    """The metric of the corrupted run with each head's activation at `site` patched in from the clean run.

    `clean` and `corrupted`: token batches of one shape. `metric`: a callable on logits returning a
    scalar or one value per prompt (averaged over the batch; any other shape is refused), ``"loss"``
    (next-token loss of the *clean* tokens at `positions`) or ``"logit_diff"`` (`target` −
    `baseline_token` at one position). `heads`: the ``(layer, head)`` pairs to patch (default every head;
    the others are NaN). ``direction="noising"``: the mirror, the metric of the *clean* run with each head's
    activation taken from the corrupted run. See the module docstring.

    One clean run and one corrupted run, recorded; then one run per head (per head and position with
    ``by_position=True``; per K/V group for ``"k"``/``"v"`` with grouped heads) that restarts at the head's
    layer and unembeds only the positions the metric reads (`circuitwidgets.analysis.sweeps`; `per_run`:
    heads sharing one run, default 1 on a CPU, sized to free memory on a GPU): the values of running the
    whole model once per head, which is what a backend that cannot restart runs does.
    """
    view = as_view(model)
    clean, corrupted = _check(view, clean, corrupted, site, direction)
    measure = scalar_measure(view, metric, clean, target, baseline_token, positions)
    base, source = (corrupted, clean) if direction == "denoising" else (clean, corrupted)
    names = [(SITES[site], layer) for layer in view.attn_layers]
    jobs, grouped = _jobs(view, heads, site, by_position, clean.shape[1])
    from . import sweeps

    copies = sweeps.per_run(view, base, None if measure.reads is None else len(measure.reads), per_run)
    source_logits, cache = view.run_with_hooks(source, [], keep=names)
    recorded = sweeps.record(view, base, (), copies)
    step = progress_of(progress, len(jobs), f"patching {site}")
    base_logits = recorded.logits
    batch = base.shape[0]

    def hooks_of(layer: int, chunk: list[tuple[int, int | None]]) -> list:
        name = (SITES[site], layer)
        source_act = cache[name]

        def hook(act: torch.Tensor, hook: Any = None) -> torch.Tensor:
            out = act.clone()
            for c, (index, place) in enumerate(chunk):
                where = _where(site, index, place)
                out[sweeps.copy_rows(c, batch)][where] = source_act[where].to(act.dtype)
            return out

        return [(name, hook)]

    by_layer: dict[int, list[tuple[int, int | None]]] = {}
    for layer, index, place in jobs:
        by_layer.setdefault(layer, []).append((index, place))
    found = sweeps.sweep(recorded, by_layer, hooks_of, measure, copies, step)
    values = _values(view, jobs, found, grouped, by_position, clean.shape[1])
    clean_value = float(measure(source_logits if direction == "denoising" else base_logits))
    corrupted_value = float(measure(base_logits if direction == "denoising" else source_logits))
    return PatchingResult(
        values=values, clean_value=clean_value, corrupted_value=corrupted_value, site=site, by_position=by_position,
        grouped=grouped, direction=direction,
    )


def _values(
    view: Any, jobs: list[tuple[int, int, int | None]], found: list[torch.Tensor], grouped: bool, by_position: bool, seq: int
) -> torch.Tensor:
    """The values of `jobs` as ``[n_layers, n_heads]`` (``[..., seq]`` by position), NaN for heads not patched; with
    grouped K/V heads each query head gets its group's value."""
    per_group = view.n_heads // view.n_kv_heads if grouped else 1
    rows = {layer: i for i, layer in enumerate(view.attn_layers)}
    values = torch.full((len(view.attn_layers), view.n_heads, seq if by_position else 1), float("nan"))
    for (layer, index, place), value in zip(jobs, found, strict=True):
        heads = slice(index * per_group, (index + 1) * per_group)
        values[rows[layer], heads, 0 if place is None else place] = float(value)
    return values if by_position else values[..., 0]


def patching_by_loop(
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
    """`patching` (denoising, every head) computed the plain way: one clean run, one corrupted run, then the whole
    model once per head with its hook. The reference the fast sweep is held to (to 1e-5)."""
    view = as_view(model)
    clean, corrupted = _check(view, clean, corrupted, site, "denoising")
    measure = scalar_measure(view, metric, clean, target, baseline_token, positions)
    names = [(SITES[site], layer) for layer in view.attn_layers]
    clean_logits, cache = view.run_with_hooks(clean, [], keep=names)
    corrupted_value = float(measure(view.run_with_hooks(corrupted, [])[0]))
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
                values[i, index, p] = float(measure(patched))
                step((i * groups + index) * len(places) + p + 1)
    if grouped:  # each query head gets its group's value
        values = values.repeat_interleave(view.n_heads // view.n_kv_heads, dim=1)
    return PatchingResult(
        values=values if by_position else values[..., 0],
        clean_value=float(measure(clean_logits)),
        corrupted_value=corrupted_value,
        site=site,
        by_position=by_position,
        grouped=grouped,
    )
