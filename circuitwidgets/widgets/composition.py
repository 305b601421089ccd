"""`CompositionDiagram`: Q-, K- and V-composition between heads, as a graph or a heatmap."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import traitlets

from .. import transport
from ..analysis import composition_baseline, virtual_head_pattern
from ..analysis.composition import KINDS
from ..model import as_view
from . import _cache
from .base import CircuitWidget

#: The graph is the default view up to this many heads; above it, the heatmap (a graph of
#: GPT-2 small's 144 heads has 9 504 possible edges).
GRAPH_MAX_HEADS = 48


class CompositionDiagram(CircuitWidget):
    """How much each later head reads what each earlier head writes (Q-, K- or V-composition).

    The graph view draws heads as nodes in layer columns and an edge from an earlier head h1
    to a later head h2 when their score passes `threshold`, its width and colour following the
    score. The heatmap view draws the same scores as a (layer, head) x (layer, head) matrix,
    writers as rows, readers as columns, undefined pairs (h1 not in an earlier layer) grey.
    Scores are `analysis.composition_scores` (raw, in [0, 1]); with ``baseline=True`` the
    expected score of random matrices of the same shapes (`analysis.composition_baseline`,
    about 1/sqrt(d_model)) is subtracted. The baseline is marked on the colour bar.

    Click a node to select a head, click an edge (or a matrix cell) to select a pair. With a
    prompt or tokens, the selected pair's two attention patterns and their virtual-head pattern
    (`analysis.virtual_head_pattern`, the later head's pattern times the earlier one's) are
    drawn beneath.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        kind: "Q", "K" or "V".
        threshold: hide edges scoring below it (in the units shown); None picks the point
            halfway between the baseline and the strongest pair of `kind`.
        baseline: show baseline-corrected scores (raw minus the random baseline).
        view: "graph", "matrix", or None for graph up to `GRAPH_MAX_HEADS` heads.
        prompt, tokens: the sequence the selected pair's patterns are drawn on (either).
        layer, head: the selected head. selected_pair: ``((l1, h1), (l2, h2))`` or None.
        defer: inside a running event loop (a notebook kernel), draw at once and compute the
            scores right after the cell returns (the widget shows a progress note meanwhile);
            the `Dashboard` uses it so its first picture does not wait for every widget.

    Traits (synced with the browser):
        kind (str, "K"): the composition shown; setting it computes it when needed (cached
            per model). threshold (float): edges scoring below it are hidden; when `baseline`
            flips, it shifts by the baseline so the same edges stay. baseline (bool, False):
            baseline-corrected scores. baseline_value (float): the random baseline, read-only.
        view ("graph" | "matrix"): which picture. layer (int), head (int): the selected head.
        selected_pair (list): ``[]`` or ``[[l1, h1], [l2, h2]]``, l1 < l2 (block indices).
        scores (bytes) + scores_meta (dict): raw float32 scores ``[3, L, H, L, H]`` (Q, K, V;
            NaN for undefined pairs and kinds not computed yet, see ``scores_meta["computed"]``).
        tokens (list[int]), str_tokens (list[str]): the sequence of the pair panel.
        pair_patterns (bytes) + pair_meta (dict): uint8 ``[3, seq, seq]``: the patterns of the
            pair's first and second head and their virtual head (lower triangle only).
        info (dict): layers, heads, d_model for the view.

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.CompositionDiagram(cw.demo_model(), kind="K")
        >>> w.scores_meta["shape"], w.view
        ([3, 2, 4, 2, 4], 'graph')
        >>> w.scores_of("K").shape
        torch.Size([2, 4, 2, 4])
    """

    _kind = traitlets.Unicode("composition").tag(sync=True)
    kind = traitlets.Enum(KINDS, "K", help="composition shown: Q, K or V").tag(sync=True)
    threshold = traitlets.Float(0.0, help="edges scoring below this are hidden (units shown)").tag(sync=True)
    baseline = traitlets.Bool(False, help="show raw minus the random baseline").tag(sync=True)
    baseline_value = traitlets.Float(0.0, help="expected score of random matrices, read-only").tag(sync=True)
    view = traitlets.Enum(("graph", "matrix"), "graph", help="node-link graph or pair heatmap").tag(sync=True)
    layer = traitlets.Int(0, help="block index of the selected head's layer").tag(sync=True)
    head = traitlets.Int(0, help="the selected head").tag(sync=True)
    selected_pair = traitlets.List(help="[] or [[l1, h1], [l2, h2]]: the selected pair").tag(sync=True)
    scores = traitlets.Bytes(b"", help="raw float32 scores [3, L, H, L, H] (Q, K, V)").tag(sync=True)
    scores_meta = traitlets.Dict(help="shape, computed kinds and layers of `scores`").tag(sync=True)
    tokens = traitlets.List(traitlets.Int(), help="token ids the pair panel runs on").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings of `tokens`").tag(sync=True)
    pair_patterns = traitlets.Bytes(b"", help="uint8 [3, seq, seq]: first, second, virtual head").tag(sync=True)
    pair_meta = traitlets.Dict(help="shape, layout, pair and revision of `pair_patterns`").tag(sync=True)
    info = traitlets.Dict(help="model facts for the view").tag(sync=True)

    def __init__(
        self,
        model: Any,
        kind: str = "K",
        *,
        threshold: float | None = None,
        baseline: bool = False,
        view: str | None = None,
        prompt: str | None = None,
        tokens: Any = None,
        layer: int | None = None,
        head: int = 0,
        selected_pair: Any = None,
        defer: bool = False,
        **kwargs: Any,
    ) -> None:
        mv = as_view(model)
        self._model = model
        self._view = mv  # layer and head ranges never change, so validation needs no fresh view
        self._ready = False
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        if not isinstance(baseline, bool):
            raise TypeError(f"baseline must be a bool; got {baseline!r}")
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        n_heads_total = len(mv.attn_layers) * mv.n_heads
        if view is None:
            view = "graph" if n_heads_total <= GRAPH_MAX_HEADS else "matrix"
        ids: list[int] = []
        if prompt is not None or tokens is not None:
            seq = mv.tokens_of(prompt if prompt is not None else tokens)
            if seq.shape[0] != 1:
                raise ValueError(f"tokens must be one sequence; got a batch of {seq.shape[0]}")
            ids = [int(t) for t in seq[0].tolist()]
        self._pair_key: tuple | None = None
        self._computed_sent: tuple = ()
        self._shown_pair: torch.Tensor | None = None
        self._revision = 0
        info = {
            "attn_layers": list(mv.attn_layers),
            "n_heads": mv.n_heads,
            "d_model": mv.d_model,
            "d_head": mv.d_head,
            "kinds": list(KINDS),
        }
        base = composition_baseline(mv, kind)
        layer = mv.attn_layers[0] if layer is None else layer
        super().__init__(
            info=info, kind=kind, baseline=baseline, baseline_value=base, view=view,
            layer=layer, head=head, tokens=ids, **kwargs,
        )
        if selected_pair is not None:
            self.selected_pair = selected_pair
        self._auto_threshold = threshold is None
        if threshold is not None:
            self.threshold = threshold
        self._ready = True
        self._start(defer)

    @property
    def model(self) -> Any:
        """The model these scores belong to."""
        return self._model

    # ----- validation ------------------------------------------------------------------------
    @traitlets.validate("layer")
    def _valid_layer(self, proposal: dict) -> int:
        try:
            self._view.layer_index(proposal["value"])
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        return proposal["value"]

    @traitlets.validate("head")
    def _valid_head(self, proposal: dict) -> int:
        try:
            self._view.check_head(proposal["value"])
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        return proposal["value"]

    @traitlets.validate("threshold")
    def _valid_threshold(self, proposal: dict) -> float:
        value = proposal["value"]
        if not math.isfinite(value) or not -1.0 <= value <= 1.0:
            exc = ValueError(f"threshold={value} must be a finite number in [-1, 1] (scores lie in [0, 1])")
            raise self._trait_error(exc, "controls") from None
        return value

    @traitlets.validate("selected_pair")
    def _valid_pair(self, proposal: dict) -> list:
        value = proposal["value"]
        if value is None or len(value) == 0:
            return []
        try:
            (l1, h1), (l2, h2) = value
            pair = [[int(l1), int(h1)], [int(l2), int(h2)]]
            if [[l1, h1], [l2, h2]] != pair or any(isinstance(x, bool) for x in (l1, h1, l2, h2)):
                raise TypeError
        except (TypeError, ValueError):
            exc = TypeError(f"selected_pair must be [] or [[layer1, head1], [layer2, head2]] of ints; got {value!r}")
            raise self._trait_error(exc, "controls") from None
        mv = self._view
        try:
            for lay, hd in pair:
                mv.layer_index(lay)
                mv.check_head(hd)
            if pair[0][0] >= pair[1][0]:
                raise ValueError(f"selected_pair {pair}: the first head must be in an earlier layer than the second")
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        return pair

    # ----- observers -------------------------------------------------------------------------
    @traitlets.observe("layer", "head", "threshold", "view")
    def _on_control(self, change: dict) -> None:
        self._clear_error("controls")

    @traitlets.observe("kind")
    def _on_kind(self, change: dict) -> None:
        self._clear_error("controls")
        if self._ready and change["new"] not in self._computed_sent:
            self._request_refresh()

    @traitlets.observe("baseline")
    def _on_baseline(self, change: dict) -> None:
        # The browser shifts the threshold itself (in the same message); from Python, shift here.
        if self._ready and not self._frontend_depth:
            shift = self.baseline_value if change["new"] else -self.baseline_value
            self.threshold = max(-1.0, min(1.0, round(self.threshold - shift, 9)))

    @traitlets.observe("selected_pair", "tokens")
    def _on_pair(self, change: dict) -> None:
        self._clear_error("controls")
        if self._ready:
            self._request_refresh()

    # ----- computation -------------------------------------------------------------------------
    def scores_of(self, kind: str, baseline: bool = False) -> torch.Tensor:
        """Scores ``[L, H, L, H]`` of `kind` (raw, or minus the baseline), computed if needed."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        raw = _cache.composition(self._model, kind)
        return raw - self.baseline_value if baseline else raw

    def _computed(self) -> list[str]:
        return [k for k in KINDS if _cache.is_cached(self._model, ("composition", k))]

    def compute(self, *kinds: str) -> "CompositionDiagram":
        """Compute `kinds` now (default: Q, K and V) and redraw; returns the widget."""
        self.finish_start()
        for kind in kinds or KINDS:
            self.scores_of(kind)
        self._run_refresh(raise_bugs=True)
        return self

    def _default_threshold(self) -> float:
        """Halfway between the baseline and the strongest pair of the kind shown (units shown)."""
        base = self.baseline_value
        raw = self.scores_of(self.kind)
        finite = raw[torch.isfinite(raw)]
        top = float(finite.max()) if finite.numel() else base
        return round(base + 0.5 * max(top - base, 0.0), 3) - (base if self.baseline else 0.0)

    def _refresh(self) -> None:
        self.scores_of(self.kind)
        if self._auto_threshold:
            self._auto_threshold = False
            self.threshold = self._default_threshold()
        computed = tuple(self._computed())
        if computed != self._computed_sent or not self.scores:
            mv = as_view(self._model)
            n_layers, n_heads = len(mv.attn_layers), mv.n_heads
            stack = torch.full((len(KINDS), n_layers, n_heads, n_layers, n_heads), float("nan"))
            for i, kind in enumerate(KINDS):
                if kind in computed:
                    stack[i] = _cache.composition(self._model, kind)
            data, meta = transport.encode_float32(stack)
            meta.update(kinds=list(KINDS), computed=list(computed), layers=list(mv.attn_layers))
            self.scores = data
            self.scores_meta = meta
            self._computed_sent = computed
        self._refresh_pair()

    def _refresh_pair(self) -> None:
        pair = self.selected_pair
        tokens = tuple(self.tokens)
        key = (tuple(map(tuple, pair)), tokens)
        if key == self._pair_key:
            return
        if not pair or not tokens:
            self._pair_key = key
            self._shown_pair = None
            self._revision += 1
            self.pair_patterns = b""
            self.pair_meta = {"revision": self._revision, "pair": pair, "reason": "no pair" if tokens else "no tokens"}
            return
        mv = as_view(self._model)
        (l1, h1), (l2, h2) = pair
        ids = mv.check_tokens(list(tokens))
        both = _cache.patterns(self._model, tokens, (l1, l2))
        virtual = virtual_head_pattern(self._model, ids, (l1, h1), (l2, h2)).to("cpu", torch.float32)
        stack = torch.stack([both[0, h1], both[1, h2], virtual])
        layout = "tril" if transport.is_causal(stack) else "full"
        data, meta = transport.encode_uint8(stack, lo=0.0, hi=1.0, layout=layout)
        self._revision += 1
        meta.update(pair=pair, revision=self._revision)
        self._shown_pair = stack
        self._pair_key = key
        self.str_tokens = mv.to_str_tokens(ids)
        self.pair_patterns = data
        self.pair_meta = meta

    def pair_patterns_exact(self) -> torch.Tensor:
        """Exact float32 ``[3, seq, seq]`` of the pair panel: first head, second head, virtual head."""
        if self._shown_pair is None:
            raise ValueError("no pair patterns drawn: select a pair and give a prompt or tokens")
        return self._shown_pair

    @property
    def selected_head(self) -> tuple[int, int]:
        """``(layer, head)`` of the selected head."""
        return (self.layer, self.head)

    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write a self-contained HTML file; Q, K and V are all computed first, so the page can switch.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.CompositionDiagram(cw.demo_model()).save_html("/tmp/composition.html").name
            'composition.html'
        """
        self.compute()
        return super().save_html(path, title=title)
