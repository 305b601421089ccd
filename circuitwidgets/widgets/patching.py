"""`Patching`: activation patching of every head, from a clean run into a corrupted one, at a chosen site."""

from __future__ import annotations

import math
from typing import Any

import torch
import traitlets

from ..analysis import repeated_random_tokens
from ..analysis.activation_patching import SITES, PatchingResult
from ..analysis.activation_patching import patching as patched_runs
from ..analysis.gradient_patching import AttributionResult, attribution_patching
from ..analysis.interventions import metric_of
from ._interventions import BATCH, block_length, progress_reporter, second_copy, token_batch
from .base import CircuitWidget

SITE_LABELS = {
    "out": "output (z, before W_O)",
    "q": "queries",
    "k": "keys",
    "v": "values",
    "pattern": "attention pattern",
}


class Patching(CircuitWidget, view="patching"):
    """Activation patching: how much of the clean behaviour each head's activation brings back into a corrupted run.

    For each head, the corrupted prompts run with that head's activation at `site` (its output
    ``z``, queries, keys, values or attention pattern) taken from the clean run, and the metric of
    that run is kept (`circuitwidgets.analysis.patching`, equal to TransformerLens'
    ``get_act_patch_attn_head_*``). The grid shows those values, or normalised (`normalised`):
    ``(patched - corrupted) / (clean - corrupted)``, 1 where the head alone restores the clean
    metric. With `by_position`, one head at one position at a time: rows are heads, columns
    positions. Click a cell to select its head (`layer`, `head`, linkable to other widgets).

    With grouped K/V heads (fewer K/V heads than query heads), a query head's keys and values are
    its group's: patching ``"k"`` or ``"v"`` patches the whole group, and every head of a group
    shows the group's value (the widget says so). Patch ``"pattern"`` for one head's own use.

    With ``method="attribution"`` the grid shows attribution patching's estimates instead
    (`circuitwidgets.analysis.attribution_patching`: ``estimator`` ``"atp"`` or ``"atp*"``), from one run with
    gradients and one without, and the selected head (a click on its cell) is patched exactly: its exact value
    is shown beside its estimate (`verified`: every head checked so far, marked in the grid).

    The model is live: a weight edit or a hook shows at the next action (or `refresh()`).

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer`` (any model whose runs
            have hook points; a remote nnsight model shows why it cannot).
        clean, corrupted: prompts (a list of str, tokenised with BOS, one number of tokens) or token
            batches of one shape. Default: `BATCH` prompts ``[BOS, r, r]`` of a random block ``r``
            repeated (clean) and the same with the second copies passed round the batch
            (corrupted), the loss taken on the second copy (positions default to it).
        metric: ``"loss"`` (next-token loss of the clean tokens), ``"logit_diff"`` (needs `target`),
            or a callable on logits returning a number or one per prompt.
        site: ``"out"``, ``"q"``, ``"k"``, ``"v"`` or ``"pattern"``. by_position: one position at a time.
        method: ``"exact"`` (one patched run per head) or ``"attribution"`` (estimates, the selected head exact).
        estimator: ``"atp"`` or ``"atp*"`` (with ``method="attribution"``).
        normalised: draw normalised values.
        target, baseline_token, positions: passed to `circuitwidgets.analysis.patching`.
        layer, head: the selected head.
        defer: inside a running event loop (a notebook kernel), draw at once and compute right after
            the cell returns, showing a progress note meanwhile.

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.Patching(cw.demo_model())
        >>> w.patching["shape"], w.patching["site"]
        ([2, 2, 4], 'out')
        >>> w.site = "v"
        >>> w.result().site, w.result().values.shape
        ('v', torch.Size([2, 4]))
    """

    controls = ("site", "by_position", "normalised", "method", "estimator")
    # normalised is drawn from the payload already sent; the selected head is patched exactly in attribution mode
    inputs = ("site", "by_position", "method", "estimator", "layer", "head")

    site = traitlets.Enum(tuple(SITES), "out", help="the activation patched: out (z), q, k, v or pattern").tag(sync=True)
    by_position = traitlets.Bool(False, help="patch one head at one position at a time (rows: heads; columns: positions)").tag(
        sync=True
    )
    normalised = traitlets.Bool(
        False, help="draw (patched - corrupted) / (clean - corrupted) instead of the metric's values"
    ).tag(sync=True)
    method = traitlets.Enum(
        ("exact", "attribution"), "exact",
        help="exact: one patched run per head; attribution: attribution patching's estimates, the selected head exact",
    ).tag(sync=True)
    estimator = traitlets.Enum(
        ("atp", "atp*"), "atp", help="attribution patching's estimator: AtP, or AtP* (query/key correction, GradDrop)"
    ).tag(sync=True)
    verified = traitlets.Dict(
        help="attribution mode: the heads patched exactly so far, {site, by_position, estimator, heads: [[layer, head], "
        "...], values: [...] (by position: one list per head), normalised: [...]}; {} otherwise"
    ).tag(sync=True)
    progress = traitlets.Unicode("", help="what the kernel is computing and how far it is, '' when idle").tag(sync=True)
    info = traitlets.Dict(help="layers, heads, K/V groups, the metric and what it ran on").tag(sync=True)
    patching = traitlets.Dict(
        help="payload float32 [2, n_attn_layers, n_heads] ([2, n_attn_layers, n_heads, seq] by position): the metric "
        "of each patched run (0) and normalised (1, NaN when clean and corrupted score the same), or their estimates "
        "(method 'attribution'); with site, by_position, grouped, method, estimator, clean_value, corrupted_value, "
        "labels (the first clean prompt's tokens)"
    ).tag(sync=True)

    def __init__(
        self, model: Any, clean: Any = None, corrupted: Any = None, metric: Any = "loss", site: str = "out",
        by_position: bool = False, *, method: str = "exact", estimator: str = "atp", normalised: bool = False,
        target: Any = None, baseline_token: Any = None, positions: Any = None, layer: int | None = None, head: int = 0,
        defer: bool = False, **kwargs: Any,
    ) -> None:
        super().__init__(model, head=head, **kwargs)
        mv = self.mv
        self.layer = mv.attn_layers[0] if layer is None else layer
        if clean is None and corrupted is None:
            n = block_length(mv)
            self._clean = repeated_random_tokens(mv, seq_len=n, batch=BATCH)
            self._corrupted = torch.cat([self._clean[:, : n + 1], self._clean[:, n + 1 :].roll(1, 0)], 1)
            positions = second_copy(mv) if positions is None else positions
            ran_on = (
                f"clean: {BATCH} random blocks of {n} tokens, each repeated once after BOS; corrupted: the same with "
                "the second copies passed round the batch (each prompt's second copy is the next prompt's block)"
            )
        elif clean is None or corrupted is None:
            raise ValueError("give both clean= and corrupted= (or neither, for the default repeated random tokens)")
        else:
            self._clean, self._corrupted = token_batch(mv, clean, "clean"), token_batch(mv, corrupted, "corrupted")
            if self._clean.shape != self._corrupted.shape:
                raise ValueError(
                    f"clean and corrupted must have one shape [batch, seq]; got {list(self._clean.shape)} and "
                    f"{list(self._corrupted.shape)}"
                )
            ran_on = f"the given {self._clean.shape[0]} clean and corrupted prompts of {self._clean.shape[1]} tokens"
        if isinstance(metric, str):
            metric_of(metric, self._clean, mv.d_vocab, target, baseline_token, positions)  # raises for a bad one
            metric_label = {"loss": "next-token loss", "logit_diff": "logit difference"}[metric]
        elif callable(metric):
            metric_label = getattr(metric, "__name__", "custom metric")
        else:
            raise TypeError(f'metric must be "loss", "logit_diff" or a callable on logits; got {type(metric).__name__}')
        self._metric = metric
        self._options = {"target": target, "baseline_token": baseline_token, "positions": positions}
        self._results: dict[tuple, PatchingResult | AttributionResult] = {}
        self._exact: dict[tuple, dict[tuple[int, int], torch.Tensor]] = {}  # (site, by_position) -> head -> values
        self._results_state: tuple = ()
        self.site, self.by_position, self.normalised = site, by_position, normalised
        self.method, self.estimator = method, estimator
        self.info = {
            "attn_layers": list(mv.attn_layers),
            "n_heads": mv.n_heads,
            "n_kv_heads": mv.n_kv_heads,
            "batch": self._clean.shape[0],
            "seq": self._clean.shape[1],
            "metric": metric_label,
            "site_labels": SITE_LABELS,
            "ran_on": ran_on,
        }
        self._start(defer)

    def _check_method(self, value: str) -> str:
        if value == "attribution":
            support = self.mv.supports("gradients")
            if not support:
                raise ValueError(support.reason)
        return value

    def _fresh(self) -> None:
        state = self._model_state()
        if state != self._results_state:  # weights edited, hooks added or removed: start again
            self._results_state, self._results, self._exact = state, {}, {}

    def _run(self, what: str, call: Any) -> Any:
        try:
            return call(progress_reporter(self, what))
        finally:
            self._set(progress="")

    def result(self, site: str | None = None, by_position: bool | None = None) -> PatchingResult | AttributionResult:
        """What the grid shows for `site` (default: the one shown): the `circuitwidgets.analysis.PatchingResult`, or
        with ``method="attribution"`` the `circuitwidgets.analysis.AttributionResult`, computed now if needed."""
        site = self.site if site is None else site
        by_position = self.by_position if by_position is None else by_position
        if site not in SITES:
            raise ValueError(f"site must be one of {list(SITES)}; got {site!r}")
        self._fresh()
        exact = self.method == "exact"
        key = (site, bool(by_position), "exact" if exact else self.estimator)
        if key not in self._results:
            where = f"{site}{' by position' if by_position else ''}"
            if exact:
                self._results[key] = self._run(f"patching {where}", lambda report: patched_runs(
                    self.mv, self._clean, self._corrupted, self._metric, site, bool(by_position), progress=report,
                    **self._options,
                ))
            else:
                self._results[key] = self._run(f"attribution patching ({self.estimator}) {where}", lambda report: (
                    attribution_patching(self.mv, self._clean, self._corrupted, self._metric, site, bool(by_position),
                                         self.estimator, **self._options)
                ))
        return self._results[key]

    def exact_values(self, layer: int, head: int) -> torch.Tensor:
        """The exact patching value of one head at the site shown (a number; by position, one per position), computed
        now if needed (one run of each prompt and one patched run restarted at the head's layer per position)."""
        self._fresh()
        key = (self.site, bool(self.by_position))
        found = self._exact.setdefault(key, {})
        if (layer, head) not in found:
            result = self._run(f"patching L{layer}H{head} exactly", lambda report: patched_runs(
                self.mv, self._clean, self._corrupted, self._metric, self.site, bool(self.by_position), progress=report,
                heads=[(layer, head)], **self._options,
            ))
            found[(layer, head)] = result.values[list(self.mv.attn_layers).index(layer), head]
        return found[(layer, head)]

    def _refresh(self) -> None:
        mv = self.mv
        result = self.result()
        key = (self.site, self.by_position, self.method, self.estimator if self.method == "attribution" else "")
        if self._inputs_changed("patching", *key):
            try:
                normalised, why = result.normalised, ""
            except ValueError as exc:  # clean and corrupted score the same: nothing to normalise by
                normalised, why = torch.full_like(result.values, math.nan), str(exc)
            self.patching = self.payload_float32(
                torch.stack([result.values, normalised]),
                site=result.site, by_position=result.by_position, grouped=result.grouped, method=self.method,
                estimator=self.estimator, clean_value=result.clean_value, corrupted_value=result.corrupted_value,
                layers=list(mv.attn_layers), labels=mv.token_strings(self._clean[0].tolist()),
                corrupted_labels=mv.token_strings(self._corrupted[0].tolist()), not_normalised=why,
            )
        if self.method != "attribution":
            if self.verified:
                self._set(verified={})
            return
        self.exact_values(self.layer, self.head)  # the selected head, patched exactly
        found = self._exact.get((self.site, bool(self.by_position)), {})
        heads = sorted(found)
        gap = result.clean_value - result.corrupted_value
        values = [found[h].tolist() for h in heads]
        normal = [((found[h] - result.corrupted_value) / gap).tolist() if gap else None for h in heads]
        verified = {
            "site": self.site, "by_position": self.by_position, "estimator": self.estimator,
            "heads": [list(h) for h in heads], "values": values, "normalised": normal,
        }
        if verified != self.verified:
            self._set(verified=verified)
