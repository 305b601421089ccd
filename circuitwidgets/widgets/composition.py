"""`CompositionDiagram`: Q-, K- and V-composition between heads, as a graph or a heatmap."""

from __future__ import annotations

import math
from typing import Any

import torch
import traitlets

from .. import analysis, transport
from ..analysis.causal_paths import composition_paths
from ..analysis.composition import KINDS
from ..analysis.interventions import metric_of
from . import _cache
from ._color import color_scale_trait
from ._interventions import progress_reporter, token_batch
from .base import CircuitWidget, short
from .token_subset import CHOSEN, subset_of

#: The graph is the default view up to this many heads; above it, the heatmap (a graph of
#: GPT-2 small's 144 heads has 9 504 possible edges).
GRAPH_MAX_HEADS = 48


class CompositionDiagram(CircuitWidget, view="composition"):
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
    drawn beneath. Beside them, the circuit term the selected pair builds for the current kind
    (`analysis.composition_term`, token embeddings only) on a token subset, its eigenvalues and
    their positivity ``Σλ / Σ|λ|`` (for V: the virtual head's copying score):

    - K: destination (query) token × the token h1 moved into the source (key) position, in
      attention logits (divided by the attention scale);
    - Q: the token h1 moved into the destination (query) position × source (key) token, likewise;
    - V: the virtual head's full OV circuit, source token × out token, in logits.

    Only the selected pair's term is computed, when it is selected or the kind changes: a block
    on the subset and ``d_head × d_head`` eigenvalues, never a vocabulary-sized matrix.

    **Causal edges.** Given ``clean=`` and ``corrupted=`` prompts and a ``metric=``, ``edge_value="causal"``
    colours each edge by its path-patching effect instead of its weight-based score: the metric of the
    corrupted run in which the earlier head's clean output reaches only the later head's queries, keys or
    values (the kind shown; `circuitwidgets.analysis.path_patching`, every other path corrupted), as the share
    of the clean − corrupted difference the edge carries, ``(patched − corrupted) / (clean − corrupted)`` (1:
    that edge alone restores the clean metric). ``direction="noising"``: the clean run with the earlier head's
    corrupted output reaching only that input, ``(clean − patched) / (clean − corrupted)`` (1: corrupting that
    edge alone does all the damage). Every edge of one layer pair (`causal_layers`, or the selected pair's
    layers) is computed at once, with progress (`circuitwidgets.analysis.composition_paths`); the read-out gives
    both numbers of an edge.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        kind: "Q", "K" or "V".
        threshold: hide edges scoring below it (in the units shown); None picks the point
            halfway between the baseline and the strongest pair of `kind`.
        baseline: show baseline-corrected scores (raw minus the random baseline).
        view: "graph", "matrix", or None for graph up to `GRAPH_MAX_HEADS` heads.
        prompt, tokens: the sequence the selected pair's patterns are drawn on (either).
        term_tokens: token ids or token strings for the rows and columns of the pair's term.
            Default: the whole vocabulary when it has at most 64 tokens, else 40 tokens drawn
            at random with seed 0 (the same as `QKCircuit`'s; said in `term_criterion`).
        layer, head: the selected head. selected_pair: ``((l1, h1), (l2, h2))`` or None.
        clean, corrupted: prompts (a list of str, one number of tokens) or token batches of one shape, for the
            causal edges; metric: ``"loss"`` (next-token loss of the clean tokens), ``"logit_diff"`` (with
            `target` and `baseline_token`) or a callable ``f(logits) -> [batch]``; positions: the metric's
            positions; direction: ``"denoising"`` (default) or ``"noising"``. edge_value: ``"weights"`` (default) or
            ``"causal"``; causal_layers: the layer pair computed first (default the first two attention layers).
        defer: inside a running event loop (a notebook kernel), draw at once and compute the
            scores right after the cell returns (the widget shows a progress note meanwhile);
            the `Dashboard` uses it so its first picture does not wait for every widget.


    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.CompositionDiagram(cw.demo_model(), kind="K")
        >>> w.scores["shape"], w.view
        ([3, 2, 4, 2, 4], 'graph')
        >>> w.scores_of("K").shape
        torch.Size([2, 4, 2, 4])
        >>> w.selected_pair = [[0, 0], [1, 1]]              # an edge: its K term on the tokens
        >>> w.term["shape"], w.term["kind"], -1 <= w.term["positivity"] <= 1
        ([64, 64], 'K', True)
    """

    controls = (
        "kind", "threshold", "baseline", "view", "selected_pair", "tokens", "term_tokens", "color_scale", "edge_value",
        "causal_layers",
    )
    # and kind, when not computed yet (`_on_kind`); edge_value and causal_layers when causal edges are wanted (`_on_causal`)
    inputs = ("selected_pair", "tokens", "term_tokens", "color_scale")

    kind = traitlets.Enum(KINDS, "K", help="the composition shown; setting it computes it when needed").tag(sync=True)
    threshold = traitlets.Float(
        0.0, help="edges scoring below it are hidden (units shown); when baseline flips it shifts so the same edges stay"
    ).tag(sync=True)
    baseline = traitlets.Bool(False, help="show baseline-corrected scores (raw minus the random baseline)").tag(sync=True)
    baseline_value = traitlets.Float(0.0, help="expected score of random matrices of the same shapes, read-only").tag(sync=True)
    view = traitlets.Enum(("graph", "matrix"), "graph", help="node-link graph or pair heatmap").tag(sync=True)
    selected_pair: traitlets.List[Any] = traitlets.List(
        help="[] or [[l1, h1], [l2, h2]] with l1 < l2 (block indices): the selected pair"
    ).tag(sync=True)
    scores = traitlets.Dict(
        help="payload (circuitwidgets.transport) of raw float32 scores [3, L, H, L, H] (Q, K, V), NaN for undefined "
        "pairs and for kinds not computed yet (see scores['computed']); scores['captions'][kind] says what the "
        "scores of kind leave out (rotary positions, for Q and K) or fold in (LayerNorm/RMSNorm)"
    ).tag(sync=True)
    tokens = traitlets.List(traitlets.Int(), help="token ids of the sequence the pair panel runs on").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings of tokens").tag(sync=True)
    pair_patterns = traitlets.Dict(
        help="payload of uint8 [3, seq, seq]: the pair's first head, second head and virtual head (lower triangle "
        "only); without data (and with a 'reason') when there is no pair or no sequence"
    ).tag(sync=True)
    color_scale = color_scale_trait()
    info = traitlets.Dict(help="layers, heads, d_model for the view").tag(sync=True)
    term_tokens = traitlets.List(traitlets.Int(), help="token ids of the rows and columns of the pair's term").tag(sync=True)
    term_str_tokens = traitlets.List(traitlets.Unicode(), help="token strings of term_tokens").tag(sync=True)
    term_criterion = traitlets.Unicode("", help="how term_tokens were chosen, shown in the widget").tag(sync=True)
    term = traitlets.Dict(
        help="payload of uint8 [n, n]: the selected pair's composition term of `kind` on term_tokens (symmetric "
        "range lo..hi; K and Q in attention logits, V in logits), with kind, pair, positivity, labels, ids; "
        "without data (reason 'no pair') when no pair is selected"
    ).tag(sync=True)
    term_values = traitlets.Dict(help="payload of the same term as exact float32 [n, n], for read-outs").tag(sync=True)
    term_eigenvalues = traitlets.Dict(
        help="payload of float32 [d_head, 2] (real, imaginary): the term's non-zero eigenvalues, with its positivity"
    ).tag(sync=True)
    edge_value = traitlets.Enum(
        ("weights", "causal"), "weights",
        help="what colours the edges: the weight-based composition score, or the path-patching effect (needs clean= "
        "and corrupted=)",
    ).tag(sync=True)
    causal_layers = traitlets.List(
        traitlets.Int(), help="[l1, l2]: the layer pair whose edges' path-patching effects are computed (l1 < l2)"
    ).tag(sync=True)
    causal = traitlets.Dict(
        help="payload float32 [2, 3, L, H, L, H]: each edge's path-patching effect (0: the patched run's metric minus "
        "the unpatched run's; 1: the share of the clean − corrupted difference it carries) for Q, K and V, NaN where not "
        "computed; with computed ({kind: [[l1, l2], ...]}), clean_value, corrupted_value, metric, direction; without "
        "data when no clean/corrupted prompts were given"
    ).tag(sync=True)
    progress = traitlets.Unicode("", help="what the kernel is computing and how far it is, '' when idle").tag(sync=True)

    def __init__(
        self, model: Any, kind: str = "K", *, threshold: float | None = None, baseline: bool = False,
        view: str | None = None, prompt: str | None = None, tokens: Any = None, layer: int | None = None,
        head: int = 0, selected_pair: Any = None, term_tokens: Any = None, clean: Any = None, corrupted: Any = None,
        metric: Any = "loss", target: Any = None, baseline_token: Any = None, positions: Any = None,
        direction: str = "denoising", edge_value: str = "weights", causal_layers: Any = None, defer: bool = False,
        **kwargs: Any,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        if not isinstance(baseline, bool):
            raise TypeError(f"baseline must be a bool; got {baseline!r}")
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        self._shown_pair: torch.Tensor | None = None
        super().__init__(model, kind=kind, **kwargs)
        mv = self.mv
        self.layer, self.head = (mv.attn_layers[0] if layer is None else layer), head
        self.view = view or ("graph" if len(mv.attn_layers) * mv.n_heads <= GRAPH_MAX_HEADS else "matrix")
        if prompt is not None or tokens is not None:
            self.tokens = self._sequence(prompt if prompt is not None else tokens)
        self.info = {
            "attn_layers": list(mv.attn_layers), "n_heads": mv.n_heads, "d_model": mv.d_model,
            "d_head": mv.d_head, "kinds": list(KINDS),
        }
        self.baseline, self.baseline_value = baseline, analysis.composition_baseline(mv, kind)
        ids, criterion = mv.token_subset(term_tokens)
        self.term_tokens, self.term_criterion = ids, criterion
        if selected_pair is not None:
            self.selected_pair = selected_pair
        self._auto_threshold = threshold is None
        if threshold is not None:
            self.threshold = threshold
        self._causal_setup(clean, corrupted, metric, target, baseline_token, positions, direction)
        layers = mv.attn_layers
        if causal_layers is None and len(layers) > 1:
            causal_layers = layers[:2]
        if causal_layers is not None:
            self.causal_layers = list(causal_layers)
        self.edge_value = edge_value
        self._start(defer)

    # ----- checks (see CircuitWidget: run after the type check, raise to refuse) ---------------
    def _check_threshold(self, value: float) -> float:
        if not -1.0 <= value <= 1.0:
            raise ValueError(f"threshold={value} must be a finite number in [-1, 1] (scores lie in [0, 1])")
        return value

    def _check_selected_pair(self, value: list) -> list:
        if not value:
            return []
        try:
            if len(value) != 2:
                raise TypeError
            first, second = self.mv.check_pair(*value)
        except TypeError:  # out of range or in the wrong order: check_pair's ValueError says so
            shape = "[] or [[layer1, head1], [layer2, head2]] of ints"
            raise TypeError(f"selected_pair must be {shape}; got {short(value)}") from None
        return [list(first), list(second)]

    def _check_tokens(self, value: list[int]) -> list[int]:
        return self._sequence(value) if value else []  # [] for no sequence: no pair patterns

    def _check_term_tokens(self, value: list[int]) -> list[int]:
        return subset_of(self, "term_tokens", value)

    def _check_edge_value(self, value: str) -> str:
        if value == "causal":
            if self._paths is None:
                raise ValueError("causal edges need clean= and corrupted= prompts (and a metric=) given to the widget")
            support = self.mv.supports("resume")
            if not support:
                raise ValueError(support.reason)
            if len(self.mv.attn_layers) < 2:
                raise ValueError("causal edges need two attention layers: this model has one")
        return value

    def _check_causal_layers(self, value: list[int]) -> list[int]:
        layers = self.mv.attn_layers
        if len(value) != 2 or value[0] not in layers or value[1] not in layers or not value[0] < value[1]:
            raise ValueError(f"causal_layers must be two attention layers [l1, l2] with l1 < l2, of {list(layers)}; got {value}")
        return list(value)

    def _causal_setup(
        self, clean: Any, corrupted: Any, metric: Any, target: Any, baseline_token: Any, positions: Any, direction: str
    ) -> None:
        """Check and keep what the causal edges run on (nothing when no prompts are given)."""
        if direction not in ("denoising", "noising"):
            raise ValueError(f"direction must be 'denoising' or 'noising'; got {direction!r}")
        self._paths: dict[str, Any] | None = None
        self._causal_values: dict[tuple, torch.Tensor] = {}
        self._causal_state: tuple = ()
        if clean is None and corrupted is None:
            return
        if clean is None or corrupted is None:
            raise ValueError("give both clean= and corrupted= for the causal edges (or neither)")
        mv = self.mv
        clean, corrupted = token_batch(mv, clean, "clean"), token_batch(mv, corrupted, "corrupted")
        if clean.shape != corrupted.shape:
            raise ValueError(f"clean and corrupted must have one shape [batch, seq]; got {list(clean.shape)} and "
                             f"{list(corrupted.shape)}")
        if not (isinstance(metric, str) or callable(metric)):
            raise TypeError(f'metric must be "loss", "logit_diff" or a callable on logits; got {type(metric).__name__}')
        measure = metric_of(metric, clean, mv.d_vocab, target, baseline_token, positions)  # raises for a bad one
        label = {"loss": "next-token loss", "logit_diff": "logit difference"}.get(measure.name, measure.name)
        self._paths = {"clean": clean, "corrupted": corrupted, "metric": metric, "label": label, "direction": direction,
                       "options": {"target": target, "baseline_token": baseline_token, "positions": positions}}

    def _input_changed(self, name: str) -> None:
        if name == "term_tokens":
            self._set(term_criterion=CHOSEN)

    @traitlets.observe("kind")
    def _on_kind(self, change: dict) -> None:
        # a kind already computed redraws in the browser, unless the pair's term must change too
        if change["new"] not in self.scores.get("computed", ()) or self.selected_pair or self.edge_value == "causal":
            self._request_refresh()

    @traitlets.observe("edge_value", "causal_layers")
    def _on_causal(self, change: dict) -> None:
        # the causal edges of a layer pair not computed yet: compute them (the browser redraws from what it has)
        if self._live and self.edge_value == "causal":
            self._request_refresh()

    @traitlets.observe("baseline")
    def _on_baseline(self, change: dict) -> None:
        # The browser shifts the threshold itself (in the same message); from Python, shift here.
        if self._live and not self._frontend_depth:
            shift = self.baseline_value if change["new"] else -self.baseline_value
            self.threshold = max(-1.0, min(1.0, round(self.threshold - shift, 9)))

    # ----- computation -------------------------------------------------------------------------
    def scores_of(self, kind: str, baseline: bool = False) -> torch.Tensor:
        """Scores ``[L, H, L, H]`` of `kind` (raw, or minus the baseline), computed if needed."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        raw = _cache.composition(self.mv, kind)
        return raw - self.baseline_value if baseline else raw

    def compute(self, *kinds: str) -> CompositionDiagram:
        """Compute `kinds` now (default: Q, K and V) and redraw; returns the widget."""
        for kind in kinds or KINDS:
            self.scores_of(kind)
        return self.refresh()

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
        kinds = KINDS
        computed = tuple(k for k in kinds if _cache.is_cached(self.mv, ("composition", k)))
        if self._inputs_changed("scores", computed):
            mv = self.mv
            n_layers, n_heads = len(mv.attn_layers), mv.n_heads
            stack = torch.full((len(kinds), n_layers, n_heads, n_layers, n_heads), float("nan"))
            for i, kind in enumerate(kinds):
                if kind in computed:
                    stack[i] = _cache.composition(self.mv, kind)
            self.scores = self.payload_float32(
                stack, kinds=list(kinds), computed=list(computed), layers=list(mv.attn_layers),
                captions={kind: self._scores_caption(kind) for kind in kinds},
            )
        self._refresh_pair()
        self._refresh_term()
        self._refresh_causal()

    def causal_effects(self, kind: str, sender_layer: int, receiver_layer: int) -> torch.Tensor:
        """The path-patching effects ``[n_heads, n_heads]`` (patched − corrupted metric) of every `kind` edge from
        `sender_layer` to `receiver_layer` (`circuitwidgets.analysis.composition_paths`), computed now if needed."""
        if self._paths is None:
            raise ValueError("causal edges need clean= and corrupted= prompts (and a metric=) given to the widget")
        state = self._model_state()
        if state != self._causal_state:  # weights edited, hooks added or removed: start again
            self._causal_state, self._causal_values = state, {}
        key = (kind, sender_layer, receiver_layer)
        if key not in self._causal_values:
            paths = self._paths
            try:
                self._causal_values[key] = composition_paths(
                    self.mv, paths["clean"], paths["corrupted"], paths["metric"], kind, sender_layer, receiver_layer,
                    paths["direction"],
                    progress=progress_reporter(self, f"{kind} paths, layer {sender_layer} to layer {receiver_layer}"),
                    **paths["options"],
                )
            finally:
                self._set(progress="")
        return self._causal_values[key]

    def _refresh_causal(self) -> None:
        paths = self._paths
        if paths is None:
            if "reason" not in self.causal:
                self.causal = self.empty_payload(reason="no clean= and corrupted= prompts: causal edges need them")
            return
        if self.edge_value == "causal":
            wanted = [tuple(self.causal_layers)] if self.causal_layers else []
            if self.selected_pair:
                wanted.append((self.selected_pair[0][0], self.selected_pair[1][0]))
            for l1, l2 in dict.fromkeys(wanted):
                self.causal_effects(self.kind, l1, l2)
        done = tuple(sorted(self._causal_values))
        if not self._inputs_changed("causal", done) and "data" in self.causal:
            return
        mv = self.mv
        rows = {layer: i for i, layer in enumerate(mv.attn_layers)}
        n_layers, n_heads = len(rows), mv.n_heads
        stack = torch.full((2, len(KINDS), n_layers, n_heads, n_layers, n_heads), float("nan"))
        clean_value, corrupted_value = self._end_values()
        # the share of the clean − corrupted difference an edge carries: denoising, how much of the way to the clean
        # metric it restores; noising, how much of the way to the corrupted metric corrupting it alone goes
        gap = clean_value - corrupted_value if paths["direction"] == "denoising" else corrupted_value - clean_value
        computed: dict[str, list[list[int]]] = {kind: [] for kind in KINDS}
        for (kind, l1, l2), effects in self._causal_values.items():
            k = KINDS.index(kind)
            stack[0, k, rows[l1], :, rows[l2], :] = effects
            stack[1, k, rows[l1], :, rows[l2], :] = effects / gap if gap else float("nan")
            computed[kind].append([l1, l2])
        self.causal = self.payload_float32(
            stack, computed=computed, clean_value=clean_value, corrupted_value=corrupted_value, metric=paths["label"],
            direction=paths["direction"],
            layers=list(mv.attn_layers), not_normalised="" if gap else "the clean and corrupted prompts score the same",
        )

    def _end_values(self) -> tuple[float, float]:
        """The metric's mean over the prompts of the clean and the corrupted runs."""
        paths = self._paths
        assert paths is not None
        if "ends" not in paths or paths.get("ends_state") != self._model_state():
            measure = metric_of(paths["metric"], paths["clean"], self.mv.d_vocab, **paths["options"])
            ends = [float(measure(self.mv.run_with_hooks(paths[which], [])[0]).mean()) for which in ("clean", "corrupted")]
            paths["ends"], paths["ends_state"] = tuple(ends), self._model_state()
        return paths["ends"]

    def _scores_caption(self, kind: str) -> str:
        """What the all-pairs scores of `kind` leave out or fold in: rotary positions (Q, K), the norms."""
        rotary = (
            "Rotary: the rotation of queries and keys by position is left out: it depends on their relative "
            f"position, so {kind}-composition scores are of the unrotated W_Q and W_K (V-composition is unaffected)."
            if self.mv.has_rotary and kind != "V" else ""
        )
        return " ".join(part for part in (rotary, self.mv.norm_note) if part)

    def _refresh_pair(self) -> None:
        pair, tokens = self.selected_pair, tuple(self.tokens)
        if not self._inputs_changed("pair_patterns", tuple(map(tuple, pair)), tokens, self.color_scale):
            return
        if not pair or not tokens:
            self._shown_pair = None
            self.pair_patterns = self.empty_payload(pair=pair, reason="no pair" if tokens else "no tokens")
            return
        (l1, h1), (l2, h2) = pair
        both = _cache.patterns(self.mv, tokens, (l1, l2))
        ids = self.mv.check_tokens(list(tokens))
        virtual = analysis.virtual_head_pattern(self.mv, ids, (l1, h1), (l2, h2)).to("cpu", torch.float32)
        stack = torch.stack([both[0, h1], both[1, h2], virtual])
        labels = self.mv.to_str_tokens(torch.tensor([tokens]))
        self._shown_pair = stack
        self.str_tokens = labels
        drawn, scale = transport.scaled(stack, self.color_scale, len(tokens))
        self.pair_patterns = self.payload_uint8(drawn, pair=pair, labels=labels, scale=scale)

    def _refresh_term(self) -> None:
        pair, kind, ids = self.selected_pair, self.kind, list(self.term_tokens)
        if not self._inputs_changed("term", kind, tuple(map(tuple, pair)), tuple(ids)):
            return
        if not pair:
            self.term_values = self.term_eigenvalues = self.term = self.empty_payload(pair=[], kind=kind, reason="no pair")
            return
        first, second = (tuple(head) for head in pair)
        block, eigs, positivity = analysis.composition_term_view(self.mv, kind, first, second, ids, scaled=kind != "V")
        extra = {"kind": kind, "pair": pair, "positivity": positivity if math.isfinite(positivity) else None}
        labels = self.mv.token_strings(ids)
        self.term_str_tokens = labels
        lo, hi = transport.symmetric_range(block)
        self.term_values = self.payload_float32(block, **extra)
        self.term_eigenvalues = self.payload_float32(torch.stack([eigs.real, eigs.imag], dim=-1), **extra)
        rotary = "Rotary: the rotation of queries and keys by position is left out." if self.mv.has_rotary and kind != "V" else ""
        caption = " ".join(part for part in (rotary, self.mv.norm_note) if part)
        self.term = self.payload_uint8(
            block, lo=lo, hi=hi, layout="full", labels=labels, ids=ids, scaled=kind != "V", caption=caption, **extra
        )

    def current_term(self) -> torch.Tensor:
        """Exact float32 ``[n, n]`` of the term drawn (rows and columns: `term_tokens`).

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.CompositionDiagram(cw.demo_model(), selected_pair=[[0, 0], [1, 1]], term_tokens=["a", "b"])
            >>> w.current_term().shape
            torch.Size([2, 2])
        """
        if "data" not in self.term_values:
            raise ValueError("no term drawn: select a pair (selected_pair=[[l1, h1], [l2, h2]])")
        return transport.decode(self.term_values)

    def pair_patterns_exact(self) -> torch.Tensor:
        """Exact float32 ``[3, seq, seq]`` of the pair panel: first head, second head, virtual head."""
        if self._shown_pair is None:
            raise ValueError("no pair patterns drawn: select a pair and give a prompt or tokens")
        return self._shown_pair

    def _prepare_export(self) -> None:
        """Q, K and V are all computed first, so the exported page can switch between them."""
        self.compute()
