"""`HeadScores`: layer x head grids of head-type scores, one per kind, each on its kind's colour scale."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import traitlets

from .. import head_metrics
from ..analysis import HEAD_SCORE_KINDS
from ..analysis.detectors import DEFAULT_SEQ_LEN
from ..model import as_view, with_trace_options
from . import _cache
from ._long_runs import LongRuns

#: The kinds `HeadScores` shows by default: the head types of `analysis.head_scores` and the weight metrics (the OV
#: copying score of `analysis.copying_scores`). Any metric of the head-metric table (`head_metrics.METRICS`) may be
#: asked for; its labels, definitions and colour scales come from there.
SCORE_KINDS = (*HEAD_SCORE_KINDS, *(n for n, m in head_metrics.METRICS.items() if m.source == "weights"))


def _label(kind: str) -> str:
    return head_metrics.METRICS[kind].label


def _scale_of(kind: str, scores: torch.Tensor | None) -> list[Any]:
    """`kind`'s colour scale ``[kind, [low, high]]``: the table's bounds, or from 0 to the largest score."""
    name, bounds = head_metrics.METRICS[kind].scale
    if bounds is None:
        finite = scores[scores.isfinite()] if scores is not None else torch.zeros(0)
        bounds = (0.0, float(finite.max()) if finite.numel() and float(finite.max()) > 0 else 1.0)
    return [name, [float(bounds[0]), float(bounds[1])]]


#: With ``eager=None`` every kind is computed up front when ``d_vocab * d_model * n_layers *
#: n_heads`` is at most this (the demo and test models); on bigger models (GPT-2 small: 5.6e9)
#: only the kind shown is, and the others when they are selected (direct copying is the slow
#: one: see the README's benchmark table).
EAGER_SIZE = 10**8


def _check_kinds(kinds: Any) -> list[str]:
    if isinstance(kinds, str):
        kinds = [kinds]
    try:
        kinds = list(kinds)
    except TypeError:
        raise TypeError(f"kinds must be a list of kind names; got {type(kinds).__name__}") from None
    if not kinds:
        raise ValueError(f"kinds must name at least one of {SCORE_KINDS}")
    for kind in kinds:
        if kind not in head_metrics.METRICS:
            raise ValueError(f"kinds holds {kind!r}; each kind must be one of {tuple(head_metrics.METRICS)}")
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"kinds must not repeat a kind; got {kinds}")
    return kinds


def _scored(view: Any, kinds: list[str], tokens: tuple[int, ...] | None) -> dict[str, torch.Tensor | str]:
    """Each of `kinds` scored on `tokens` (cached per model): its scores, or why it cannot be (e.g. no repeated token)."""
    scored: dict[str, torch.Tensor | str] = {}
    for kind in kinds:
        try:
            scored[kind] = _cache.head_scores(view, kind, tokens)
        except (ValueError, TypeError) as exc:
            scored[kind] = f"{_label(kind)} scores: {exc}"
    return scored


class HeadScores(LongRuns, view="headscores"):
    """Layer x head grids of head-type scores: which heads are previous-token, induction, copying...

    One grid per kind, side by side as thumbnails, and the selected kind drawn large with axes,
    a colour bar and hover values. Each grid uses its kind's colour scale (the head-metric table's): ``[0, 1]``
    for the detector scores, ``[-1, 1]`` (diverging, 0 neutral) for ``"ov_copying"``, whose
    scores can be negative. Click a cell to select a head; arrow keys move it.

    Scores are computed per kind and cached per model (`circuitwidgets.widgets._cache`), so other
    widgets and later cells reuse them. Grids not computed yet are drawn hatched; selecting one
    computes it (the widget shows a progress note meanwhile). On a long prompt (`tokens`) the
    attention kinds are scored a layer and a block at a time: with a tqdm bar when asked for by a
    cell, and as a job on the worker thread when asked for by the browser in a notebook, its steps
    in ``progress`` and stopped by ``cancel`` or a newer input (see `LongRuns`).

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        kinds: the grids, a list from `SCORE_KINDS` (default: all six; the four pattern kinds for a model
            whose weights are not on this machine, e.g. an nnsight model run on NDIF).
        kind: the grid drawn large (default: "induction" when shown, else the first of `kinds`).
        tokens: a prompt or one sequence of token ids to score the attention kinds on
            (default: `analysis.head_scores`' repeated random tokens, which need no tokenizer).
        layer, head: the selected head (block index, head index).
        eager: compute every kind at once (True), only the shown one (False), or decide by the
            model's size (None, see `EAGER_SIZE`).
        defer: inside a running event loop (a notebook kernel), draw at once and compute right
            after the cell returns, showing a progress note meanwhile (used by `Dashboard`).


    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.HeadScores(cw.demo_model(), kinds=["previous_token", "induction"])
        >>> w.scores["shape"], w.computed
        ([2, 2, 4], ['previous_token', 'induction'])
        >>> w.scores_of("induction").shape
        torch.Size([2, 4])
    """

    controls = ("kinds", "kind")
    inputs = ("kinds", "kind")
    picture_trait = "scores"

    kinds = traitlets.List(traitlets.Unicode(), help="the kinds drawn, in order").tag(sync=True)
    kind = traitlets.Unicode("", help="the kind drawn large; setting it computes it when needed").tag(sync=True)
    scores = traitlets.Dict(
        help="payload (circuitwidgets.transport) of exact float32 scores [len(kinds), n_attn_layers, n_heads], NaN "
        "where not computed (scores['computed'] lists the kinds done) or undefined, with each kind's colour "
        "scale (scores['scales'])"
    ).tag(sync=True)
    info = traitlets.Dict(help="layers, heads, kind labels and descriptions, what the scores ran on").tag(sync=True)

    def __init__(
        self, model: Any, kinds: Any = SCORE_KINDS, *, kind: str | None = None, tokens: Any = None,
        layer: int | None = None, head: int = 0, eager: bool | None = None, defer: bool = False, **kwargs: Any,
    ) -> None:
        if kinds is SCORE_KINDS:  # the kinds this model's backend can compute (e.g. on NDIF: no hooks)
            view = as_view(with_trace_options(model, kwargs.get("remote"), kwargs.get("trace_options")))
            kinds = [k for k in SCORE_KINDS if view.supports(head_metrics.METRICS[k].needs)]
        kinds = _check_kinds(kinds)
        kind = ("induction" if "induction" in kinds else kinds[0]) if kind is None else kind
        if kind not in kinds:
            raise ValueError(f"kind={kind!r} is not among kinds {kinds}")
        if eager is not None and not isinstance(eager, bool):
            raise TypeError(f"eager must be True, False or None; got {eager!r}")
        self._results: dict[str, torch.Tensor] = {}
        self._failures: dict[str, str] = {}  # kind -> why it could not be scored (e.g. no repeats)
        super().__init__(model, kinds=kinds, kind=kind, head=head, **kwargs)
        mv = self.mv
        self._scored_state = self._model_state()
        self.layer = mv.attn_layers[0] if layer is None else layer
        self._eager = eager if eager is not None else mv.d_vocab * mv.d_model * len(mv.attn_layers) * mv.n_heads <= EAGER_SIZE
        self._tokens: tuple[int, ...] | None = None
        if tokens is not None:
            self._tokens = tuple(self._sequence(tokens))
        twice, four_times = (min(DEFAULT_SEQ_LEN, (mv.n_ctx - 1) // n) for n in (2, 4))
        cut = f"; shorter than the default {DEFAULT_SEQ_LEN} to fit n_ctx={mv.n_ctx}" if four_times < DEFAULT_SEQ_LEN else ""
        ran_on = (
            f"repeated random tokens [BOS, r, r] (analysis.repeated_random_tokens), blocks r of {twice} "
            f"tokens ({four_times} for prefix matching, repeated 4 times){cut}"
        )
        self.info = {
            "attn_layers": list(mv.attn_layers),
            "n_heads": mv.n_heads,
            "labels": {k: m.label for k, m in head_metrics.METRICS.items()},
            "descriptions": {k: m.definition for k, m in head_metrics.METRICS.items()},
            "ran_on": ran_on if self._tokens is None else f"the given {len(self._tokens)} tokens",
        }
        self._start(defer)

    @property
    def computed(self) -> list[str]:
        """The kinds computed so far, in the order of `kinds`."""
        return [k for k in self.kinds if k in self._results]

    # ----- checks (see CircuitWidget: run after the type check, raise to refuse) ---------------
    def _needs(self) -> dict[str, str]:
        """Each kind needs what its row of the head-metric table says (``kind:<name>``: greyed where it cannot run)."""
        return {f"kind:{kind}": head_metrics.METRICS[kind].needs for kind in self.kinds}

    @traitlets.observe("kinds")
    def _on_kinds(self, change: dict) -> None:
        self._note_unsupported()

    def _check_kinds(self, value: list[str]) -> list[str]:
        return _check_kinds(value)

    def _check_kind(self, value: str) -> str:
        if value not in self.kinds:
            raise ValueError(f"kind={value!r} is not among kinds {list(self.kinds)}")
        reason = self.unsupported.get(f"kind:{value}")
        if reason:
            raise ValueError(reason)
        return value

    def _input_changed(self, name: str) -> None:
        if name == "kinds" and self.kind not in self.kinds:
            self._set(kind=self.kinds[0])

    # ----- computation -------------------------------------------------------------------------
    def compute(self, *kinds: str) -> HeadScores:
        """Compute `kinds` now (default: every kind of the widget) and redraw; returns the widget.

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.HeadScores(cw.demo_model(), kinds=["induction", "ov_copying"], eager=False)
            >>> w.computed, w.compute().computed
            (['induction'], ['induction', 'ov_copying'])
        """
        for kind in _check_kinds(kinds) if kinds else list(self.kinds):
            self._score(kind)
        return self.refresh()

    def _forget_if_the_model_changed(self) -> None:
        state = self._model_state()
        if state != self._scored_state:  # weights edited, hooks added or removed: start again
            self._scored_state, self._results, self._failures = state, {}, {}

    def _score(self, kind: str) -> torch.Tensor:
        self._forget_if_the_model_changed()
        if kind not in self._results:
            self._results[kind] = _cache.head_scores(self.mv, kind, self._tokens)
        return self._results[kind]

    def scores_of(self, kind: str) -> torch.Tensor:
        """Exact scores ``[n_attn_layers, n_heads]`` of `kind` (computed now if needed)."""
        if kind not in head_metrics.METRICS:
            raise ValueError(f"kind must be one of {tuple(head_metrics.METRICS)}; got {kind!r}")
        return self._score(kind)

    def _refresh(self) -> None:
        self._forget_if_the_model_changed()
        mv, tokens = self.mv, self._tokens
        wanted = [k for k in (self.kinds if self._eager else [self.kind]) if k not in self._results and k not in self._failures]
        long = bool(wanted) and tokens is not None and mv.runs_layer_by_layer(len(tokens))
        what = " and ".join(_label(k) for k in wanted) + " scores" + (f" of {len(tokens)} tokens" if tokens else "")
        self._compute(what, partial(_scored, mv, wanted, tokens), self._show, long=long)

    def _show(self, scored: dict[str, torch.Tensor | str]) -> None:
        """Draw every kind computed so far, with `scored`'s (a kind that could not be scored says why)."""
        for kind, result in scored.items():
            if isinstance(result, str):
                self._failures[kind] = result
            else:
                self._results[kind] = result
        kinds, layers = list(self.kinds), self.info["attn_layers"]
        stack = torch.full((len(kinds), len(layers), self.info["n_heads"]), float("nan"))
        for i, kind in enumerate(kinds):
            if kind in self._results:
                stack[i] = self._results[kind].float()
        self.scores = self.payload_float32(
            stack,
            kinds=kinds,
            computed=self.computed,
            scales=[_scale_of(kind, self._results.get(kind)) for kind in kinds],
            layers=list(layers),
            failed=dict(self._failures),
        )
        if self.kind in self._failures:
            raise ValueError(self._failures[self.kind])
