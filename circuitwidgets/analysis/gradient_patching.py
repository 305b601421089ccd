"""Attribution patching: every head's activation patching estimated at once from gradients (AtP and AtP*).

`circuitwidgets.analysis.patching` runs the model once per head. AtP (Nanda 2022; Kramár et al. 2024,
*AtP\\*: An efficient and scalable method for localizing LLM behaviour to components*) estimates all of its
values from one run with a backward pass and one run without, by a first-order Taylor expansion around the run
that is patched. With ``a`` a head's activation at `site` and ``g`` the gradient of the metric with respect to
it in the patched-into run:

- **denoising** (the direction of `patching`, the default): the corrupted run is patched with clean activations,
  so the corrupted prompts run forward *and backward* and the clean prompts forward:
  ``estimate = metric(corrupted) + Σ (a_clean − a_corrupted) · g_corrupted``;
- **noising** (the paper's direction): the clean run is patched with corrupted activations, so the clean prompts
  run forward and backward and the corrupted ones forward:
  ``estimate = metric(clean) + Σ (a_corrupted − a_clean) · g_clean``.

The sum runs over the head's activation: ``z`` (site ``"out"``), queries, keys or values (``d_head`` at every
position; one position with ``by_position``), or its attention pattern (every query row and key; one query row
by position). With grouped K/V heads a key or value belongs to its group: the estimate is the group's, shown on
each head of it (as `patching` does).

``method="atp*"`` adds AtP\\*'s two corrections:

- **query/key saturation** (sites ``"q"`` and ``"k"``): the softmax is not linearised. The attention pattern the
  patch gives, ``A_patched``, is computed by the model's own attention (its position rotation, scale, masks and
  any soft-capping included), in runs restarted at the layer that stop at its pattern, with the head's queries
  (or its group's keys; by position: one query row, or one key position) from the other run; only the step from
  the pattern onwards is linear: ``Σ (A_patched − A) · g_A``, ``g_A`` the gradient at the pattern. (One run per
  layer; keys by position, one per layer and key position.)
- **GradDrop** (cancellation between paths): for each block ``ℓ`` the estimate is computed again with the backward
  pass through that block's writes to the residual stream (its ``attn_out`` and ``mlp_out``) set to zero,
  ``Î_ℓ``; the magnitude is ``Σ_ℓ |Î_ℓ| / (L − 1)`` over the model's ``L`` blocks, per prompt, averaged over the
  prompts (a head's own block contributes 0: its output reaches the logits only through that block's write, so
  a head whose effect is not cancelled scores ``|estimate|``). It is unsigned and ranks heads (`magnitude`,
  `verify`); the signed ``values`` are the QK-corrected estimate. With one block, the magnitude is ``|estimate|``.
  In a two-block model a first-block head's GradDrop magnitude keeps only its direct path (dropping the second
  block removes every path through it), so there it can miss an effect that travels through later heads.

With ``method="atp"`` the magnitude is ``|estimate − unpatched|`` per prompt, averaged over the prompts. A
metric that returns one number (not one per prompt) is expanded as a whole: its magnitude is that of the total.

``result.verify(k)`` runs exact patching (`patching`, restarted runs) on the ``k`` heads (or head-positions) of
largest magnitude and reports each estimate beside its exact value and their Spearman rank correlation.

Example:
    >>> import torch
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> clean = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=4, seed=1)
    >>> corrupted = torch.cat([clean[:, :11], clean[:, 11:].roll(1, 0)], 1)
    >>> est = cw.analysis.attribution_patching(model, clean, corrupted, "loss")
    >>> est.values.shape, est.method
    (torch.Size([2, 4]), 'atp')
    >>> check = est.verify(k=3)
    >>> len(check.heads), check.exact.shape
    (3, torch.Size([3]))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..model import ModelView, as_view
from . import sweeps
from .activation_patching import DIRECTIONS, SITES, patching
from .interventions import Metric, metric_of

METHODS = ("atp", "atp*")


@dataclass(frozen=True)
class Verification:
    """`AttributionResult.verify`'s answer: the ``k`` cells of largest magnitude, ``heads`` (``(layer, head)``, or
    ``(layer, head, position)`` by position), their ``estimate`` and ``exact`` metric values (``[k]``), their
    ``magnitude``, and ``rank_correlation``: Spearman's, between the estimates and the exact values (NaN with
    fewer than two cells, or when either is constant)."""

    heads: list[tuple[int, ...]]
    estimate: torch.Tensor
    exact: torch.Tensor
    magnitude: torch.Tensor
    rank_correlation: float
    corrupted_value: float

    def table(self) -> str:
        """One line per cell: the head, its estimate, its exact value, their difference."""
        lines = [f"{'head':<12}{'estimate':>12}{'exact':>12}{'difference':>12}"]
        for head, est, exact in zip(self.heads, self.estimate.tolist(), self.exact.tolist(), strict=True):
            name = f"L{head[0]}H{head[1]}" + (f"@{head[2]}" if len(head) > 2 else "")
            lines.append(f"{name:<12}{est:>12.4f}{exact:>12.4f}{est - exact:>12.4f}")
        lines.append(f"Spearman rank correlation: {self.rank_correlation:.3f}")
        return "\n".join(lines)


@dataclass(frozen=True)
class AttributionResult:
    """`attribution_patching`'s answer, shaped like `patching`'s.

    ``values`` ``[n_layers, n_heads]`` (``[…, seq]`` by position): the estimated metric of each patched run;
    ``clean_value``, ``corrupted_value``: the metric of the two runs; ``magnitude``: the ranking score (see the
    module docstring); ``per_prompt``: estimated effects ``[…, batch]`` (None for a metric giving one number);
    ``site``, ``by_position``, ``grouped``, ``method``, ``direction``.
    """

    values: torch.Tensor
    clean_value: float
    corrupted_value: float
    magnitude: torch.Tensor
    per_prompt: torch.Tensor | None
    site: str
    by_position: bool
    grouped: bool
    method: str
    direction: str
    _exact: Callable[[list[tuple[int, int]]], torch.Tensor] | None = field(default=None, repr=False, compare=False)

    @property
    def unpatched_value(self) -> float:
        """The metric of the run patched into: corrupted (denoising) or clean (noising)."""
        return self.corrupted_value if self.direction == "denoising" else self.clean_value

    @property
    def effect(self) -> torch.Tensor:
        """``values - unpatched_value``: the estimated change."""
        return self.values - self.unpatched_value

    @property
    def normalised(self) -> torch.Tensor:
        """``(values - corrupted) / (clean - corrupted)``, as `PatchingResult.normalised`."""
        gap = self.clean_value - self.corrupted_value
        if gap == 0:
            raise ValueError("the clean and corrupted prompts score the same on this metric: nothing to normalise by")
        return (self.values - self.corrupted_value) / gap

    def verify(self, k: int | None = 10) -> Verification:
        """Exact patching of the `k` heads (by position: head-positions) of largest `magnitude` (None: all), each
        estimate beside its exact value and their Spearman rank correlation."""
        if self._exact is None:
            raise ValueError("this result holds no model to verify against")
        flat = self.magnitude.reshape(-1)
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"k must be a positive int or None; got {k!r}")
        count = flat.numel() if k is None else min(k, flat.numel())
        order = torch.argsort(flat.nan_to_num(-math.inf), descending=True, stable=True)[:count]
        shape = self.magnitude.shape
        cells = [tuple(int(i) for i in torch.unravel_index(index, shape)) for index in order]
        layers = self._layers()
        named = [(layers[c[0]], *c[1:]) for c in cells]
        exact_all = self._exact(sorted({(layers[c[0]], c[1]) for c in cells}))
        exact = torch.tensor([float(exact_all[cell]) for cell in cells])
        estimate = torch.tensor([float(self.values[cell]) for cell in cells])
        return Verification(
            heads=named, estimate=estimate, exact=exact, magnitude=flat[order].clone(),
            rank_correlation=spearman(estimate, exact), corrupted_value=self.corrupted_value,
        )

    def _layers(self) -> list[int]:
        return list(getattr(self._exact, "layers", range(self.values.shape[0])))


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation of two 1-D tensors (average ranks for ties); NaN below two values or when either
    is constant.

    Example:
        >>> spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 30.0, 20.0]))
        0.5
    """
    if a.numel() < 2:
        return math.nan
    ra, rb = _ranks(a.double()), _ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = float((ra.square().sum() * rb.square().sum()).sqrt())
    return math.nan if denominator == 0 else round(float((ra * rb).sum()) / denominator, 12)


def _ranks(x: torch.Tensor) -> torch.Tensor:
    order = torch.argsort(x, stable=True)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(x.numel(), dtype=x.dtype)
    for value in x.unique():  # ties: their average rank
        same = x == value
        if int(same.sum()) > 1:
            ranks[same] = ranks[same].mean()
    return ranks


def attribution_patching(
    model: Any,
    clean: Any,
    corrupted: Any,
    metric: str | Metric,
    site: str = "out",
    by_position: bool = False,
    method: str = "atp",
    direction: str = "denoising",
    *,
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
) -> AttributionResult:
    """Every head's `patching` value estimated from gradients (see the module docstring for what is computed).

    Args:
        model: any model whose runs take hooks and gradients (`supports("gradients")`).
        clean, corrupted: token batches of one shape.
        metric: ``"loss"`` (next-token loss of the clean tokens at `positions`), ``"logit_diff"`` (`target` −
            `baseline_token` at one position), or a callable on logits returning one value per prompt or one number.
        site: ``"out"`` (the head's ``z``), ``"q"``, ``"k"``, ``"v"`` or ``"pattern"``.
        by_position: one estimate per head and position (``[n_layers, n_heads, seq]``).
        method: ``"atp"`` or ``"atp*"`` (query/key saturation correction and GradDrop).
        direction: ``"denoising"`` (as `patching`; gradients of the corrupted run) or ``"noising"``.
    """
    view = as_view(model)
    if site not in SITES:
        raise ValueError(f"site must be one of {list(SITES)}; got {site!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}; got {method!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}; got {direction!r}")
    clean, corrupted = view.check_tokens(clean), view.check_tokens(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted tokens must have one shape; got {tuple(clean.shape)} and {tuple(corrupted.shape)}")
    support = view.supports("gradients")
    if not support:
        raise ValueError(support.reason)
    measure = metric_of(metric, clean, view.d_vocab, target, baseline_token, positions, scalar=True)
    base, source = (corrupted, clean) if direction == "denoising" else (clean, corrupted)
    layers = list(view.attn_layers)
    word = SITES[site]
    fixed = method == "atp*" and site in ("q", "k")
    act_sites = [(word, layer) for layer in layers]
    grad_sites = [("pattern", layer) for layer in layers] if fixed else act_sites
    drop = list(range(view.n_layers)) if method == "atp*" else []
    ran = view.gradients(base, list(dict.fromkeys(act_sites + grad_sites)), measure, drop)
    source_logits, source_acts = view.run_with_hooks(source, [], keep=act_sites)
    recorded = sweeps.record(view, base) if fixed else None
    base_value = ran["value"]
    per_prompt_metric = base_value.ndim == 1
    source_value = measure(source_logits)

    def estimate(grads: dict[Any, torch.Tensor]) -> torch.Tensor:
        """Estimated effects ``[n_layers, n_heads, (seq,) batch]`` from these gradients."""
        rows = []
        for layer in layers:
            if fixed:
                pattern = ran["acts"][("pattern", layer)]
                rows.append(_qk_fixed(view, recorded, layer, site, by_position, pattern, source_acts[(word, layer)],
                                      grads[("pattern", layer)]))
            else:
                rows.append(_linear(view, site, by_position, ran["acts"][(word, layer)], source_acts[(word, layer)],
                                    grads[(word, layer)]))
        return torch.stack(rows)

    effects = estimate(ran["grads"])  # [L, H, (seq,) batch]
    total = effects.mean(-1) if per_prompt_metric else effects.sum(-1)
    unpatched = float(base_value.float().mean())
    if method == "atp*" and view.n_layers > 1:
        dropped = torch.stack([estimate(ran["dropped"][block]) for block in drop])  # [blocks, L, H, (seq,) batch]
        if per_prompt_metric:
            magnitude = dropped.abs().sum(0).div(view.n_layers - 1).mean(-1)
        else:
            magnitude = dropped.sum(-1).abs().sum(0).div(view.n_layers - 1)
    else:
        magnitude = effects.abs().mean(-1) if per_prompt_metric else total.abs()
    grouped = site in ("k", "v") and view.n_kv_heads < view.n_heads
    clean_value = float(source_value.float().mean()) if direction == "denoising" else unpatched
    corrupted_value = unpatched if direction == "denoising" else float(source_value.float().mean())

    def exact(heads: list[tuple[int, int]]) -> torch.Tensor:
        return patching(
            view, clean, corrupted, metric, site, by_position, target=target, baseline_token=baseline_token,
            positions=positions, progress=False, heads=heads, direction=direction,
        ).values

    exact.layers = layers  # type: ignore[attr-defined]
    return AttributionResult(
        values=(total + unpatched).float(), clean_value=clean_value, corrupted_value=corrupted_value,
        magnitude=magnitude.float(), per_prompt=effects.float() if per_prompt_metric else None, site=site,
        by_position=by_position, grouped=grouped, method=method, direction=direction, _exact=exact,
    )


def _to_heads(view: ModelView, x: torch.Tensor) -> torch.Tensor:
    """``[batch, (seq,) groups]`` per K/V group -> per query head (each head its group's value)."""
    groups = x.shape[-1]
    return x if groups == view.n_heads else x.repeat_interleave(view.n_heads // groups, dim=-1)


def _linear(
    view: ModelView, site: str, by_position: bool, base: torch.Tensor, source: torch.Tensor, grad: torch.Tensor
) -> torch.Tensor:
    """``Σ (source − base) · grad`` per head (and position): ``[n_heads, (seq,) batch]``."""
    product = (source.float() - base.float()) * grad
    if site == "pattern":  # [batch, head, query, key]
        per = product.sum(-1).transpose(1, 2)  # [batch, query, head]
    else:  # [batch, pos, head, d_head]
        per = product.sum(-1)
    per = _to_heads(view, per)  # [batch, pos, heads]
    out = per if by_position else per.sum(1)
    return out.movedim(0, -1).transpose(0, 1) if by_position else out.movedim(0, -1)


def _qk_fixed(
    view: ModelView, recorded: Any, layer: int, site: str, by_position: bool, pattern: torch.Tensor,
    source: torch.Tensor, grad: torch.Tensor,
) -> torch.Tensor:
    """AtP*'s query/key estimate: ``Σ (A_patched − A) · g_A``, ``[n_heads, (seq,) batch]`` (see the module docstring).

    ``A_patched`` is the pattern the model's own attention computes with the queries (or keys) from the other run,
    from a run of the patched-into prompts restarted at the layer that stops at its pattern: one run patching
    every head at once (a head's pattern reads only its own queries and its group's keys; a query row only its
    own query), or, for keys by position, one run per key position."""
    word = (site, layer)

    def patched_pattern(position: int | None) -> torch.Tensor:
        def hook(act: torch.Tensor, hook: Any = None) -> torch.Tensor:
            act = act.clone()
            if position is None:
                act[:] = source.to(act.dtype)
            else:
                act[:, position] = source[:, position].to(act.dtype)
            return act

        _, kept = recorded.run(layer, [(word, hook)], keep=[("pattern", layer)], stop=True)
        return kept[("pattern", layer)].float()

    groups = view.n_kv_heads if site == "k" else view.n_heads
    if site == "q" or not by_position:
        per_row = ((patched_pattern(None) - pattern) * grad).sum(-1)  # [batch, head, query]
        if site == "q":
            per = per_row.transpose(1, 2)  # [batch, query, head]: the query row is the position patched
            out = per if by_position else per.sum(1)
        else:
            out = _group_sum(view, per_row.sum(-1), groups)  # [batch, group]
        out = _to_heads(view, out)
        return out.movedim(0, -1).transpose(0, 1) if by_position else out.movedim(0, -1)
    columns = []
    for position in range(pattern.shape[-1]):  # keys, one position at a time: a whole column of scores changes
        change = ((patched_pattern(position) - pattern) * grad).sum((-1, -2))  # [batch, head]
        columns.append(_to_heads(view, _group_sum(view, change, groups)))
    return torch.stack(columns, 1).movedim(0, -1).transpose(0, 1)  # [head, key position, batch]


def _group_sum(view: ModelView, x: torch.Tensor, groups: int) -> torch.Tensor:
    """Per query head ``[..., n_heads]`` summed within K/V groups -> ``[..., groups]`` (unchanged without groups)."""
    if groups == view.n_heads:
        return x
    return x.reshape(*x.shape[:-1], groups, view.n_heads // groups).sum(-1)
