"""`SkipTrigrams`: a head's "[source] … [destination] → [out]" trigrams, one source token at a time."""

from __future__ import annotations

from typing import Any

import torch
import traitlets

from .. import analysis
from ..analysis.trigrams import source_id
from . import _cache
from .base import CircuitWidget, refusal, selector_facts

#: Most destinations / outs (`k`) and ranked sources (`n_sources`) a widget shows.
MAX_LIST = 200
#: Destinations, outs and triples listed, and sources ranked, by default (fewer on a smaller vocabulary).
DEFAULT_K, DEFAULT_SOURCES = 10, 20


class SkipTrigrams(CircuitWidget, view="trigrams"):
    """The skip-trigrams of a head: for a source token, the destinations that attend to it and the outs it raises.

    A one-layer attention-only model is a sum of skip-trigrams "[source] … [destination] →
    [out]": at the destination (query) token the head attends to an earlier source (key) token,
    and attending to it raises the logit of the out token. Three ranked lists, with values:

    - destinations: column `source` of the full QK circuit ``W_E W_Q W_Kᵀ W_Eᵀ / attn_scale``
      (attention logits; token embeddings only, the positional term is left out);
    - outs: row `source` of the full OV circuit ``W_E W_V W_O W_U`` (logits);
    - triples: the top destinations × top outs ranked by ``QK[d, s] · OV[s, o]``; copying
      triples (out = source, "[b] … [a] → [b]") are marked.

    Beside them, the source tokens ranked by strength ``max(0, top QK) · max(0, top OV)`` (see
    `circuitwidgets.analysis.trigrams`). The widget opens on the strongest source; clicking
    any token in the lists, or typing one, makes it the source. Exact skip-trigrams only for a
    one-layer attention-only model: on others the widget says these are the head's direct-path
    trigrams on token embeddings. Ranking the sources costs two passes over the vocabulary
    per head (GPT-2 small's shape: a few seconds, cached per head); a new source is two
    matrix-vector products.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        head, layer: the head shown (layer default: the first attention layer, 0 for most models).
        source: the source token, an id or a single-token string (``"#<id>"`` also names an
            id); None (default): the strongest source of the head shown, following the head
            when it changes.
        k: how many destinations, outs and triples to list (default 10, or d_vocab where smaller). n_sources: how many
            ranked sources (default 20, or d_vocab).

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.SkipTrigrams(cw.demo_model(), head=0, layer=1, k=5)
        >>> w.shown_source == w.ranked_sources()[0], w.trigrams["shape"]
        (True, [3, 5])
        >>> w.source = "a"
        >>> w.shown_source
        2
    """

    controls = ("source", "typed", "k", "n_sources")
    inputs = ("layer", "head", "source", "k", "n_sources")
    weights_only = True

    source = traitlets.Union(
        [traitlets.Int(), traitlets.Unicode()], default_value=None, allow_none=True,
        help="the source token: its id (a single-token string or '#<id>' is turned into the id); None: the "
        "strongest source of the head shown",
    ).tag(sync=True)
    typed = traitlets.Unicode(
        "", help="a source token typed in the browser, resolved by the kernel ('' once done; a bad one's message "
        "shows in the widget)"
    ).tag(sync=True)
    k = traitlets.Int(10, help="destinations, outs and triples listed").tag(sync=True)
    n_sources = traitlets.Int(20, help="source tokens in the strength ranking").tag(sync=True)
    info = traitlets.Dict(help="model facts for the controls and the note on exactness").tag(sync=True)
    progress = traitlets.Unicode("", help="how far the ranking of every source token is, '' when idle").tag(sync=True)
    trigrams = traitlets.Dict(
        help="payload float32 [3, k]: destination values (attention logits), out values (logits), triple scores; "
        "with the source, the ids and labels of destinations and outs, and the triples as [destination, out] ids"
    ).tag(sync=True)
    sources = traitlets.Dict(
        help="payload float32 [n_sources, 3]: strength, top QK and top OV of the ranked sources; with their ids, "
        "labels and top destination and out"
    ).tag(sync=True)

    def __init__(
        self, model: Any, head: int = 0, source: Any = None, layer: int | None = None, k: int | None = None,
        *, n_sources: int | None = None, **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        mv = self.mv
        self.layer = mv.attn_layers[0] if layer is None else layer
        # (by default 10 and 20, or the whole vocabulary where it is smaller)
        k = min(DEFAULT_K, mv.d_vocab) if k is None else k
        n_sources = min(DEFAULT_SOURCES, mv.d_vocab) if n_sources is None else n_sources
        self.head, self.k, self.n_sources, self.source = head, k, n_sources, source
        exact = mv.n_layers == 1 and mv.attn_only and not mv.has_layernorm
        self.info = {
            **selector_facts(mv),
            "d_vocab": mv.d_vocab,
            "exact": exact,
            "note": " ".join(filter(None, ["Token embeddings only: the positional term and biases are left out.", mv.norm_note]))
            + " "
            + (
                "One-layer attention-only model: these are its skip-trigrams."
                if exact
                else "Exact skip-trigrams only for a one-layer attention-only model without LayerNorm: here, the "
                "head's direct-path trigrams on token embeddings."
            ),
        }
        self._start(defer=True)

    # ----- checks (see CircuitWidget: run after the type check, raise to refuse) ---------------
    def _check_source(self, value: int | str) -> int:
        return source_id(self.mv, value)

    def _check_k(self, value: int) -> int:
        return self._count("k", value)

    def _check_n_sources(self, value: int) -> int:
        return self._count("n_sources", value)

    def _count(self, name: str, value: int) -> int:
        top = min(MAX_LIST, self.mv.d_vocab)
        if not 1 <= value <= top:
            raise ValueError(f"{name}={value} is out of range: 1..{top}")
        return value

    @traitlets.observe("typed")
    def _on_typed(self, change: dict) -> None:
        # A request, not a setting: resolved here, a bad one shown (from Python too), then cleared.
        text = change["new"]
        if not text:
            return
        self.typed = ""
        try:
            source = source_id(self.mv, text)
        except Exception as exc:
            self._show_error(refusal("typed", text, exc), "controls")
            return
        self.source = source

    # ----- computing ---------------------------------------------------------------------------
    def _ranked(self) -> Any:
        """The `n_sources` strongest sources, from one ranking of the `MAX_LIST` strongest cached per head."""
        mv, layer, head = self.mv, self.layer, self.head
        top = min(MAX_LIST, mv.d_vocab)
        label = f"ranking {mv.d_vocab:,} source tokens"
        shown = [-1]

        def report(done: int, total: int) -> None:  # sent at once, even while the kernel is busy with it
            percent = 100 * done // total
            if percent != shown[0]:
                shown[0] = percent
                self.progress = f"{label}: {percent}%"

        try:
            ranked = _cache.cached(
                mv, ("trigram_sources", layer, head, top),
                lambda: analysis.skip_trigram_sources(mv, layer, head, k=top, progress=report),
            )
        finally:
            self.progress = ""
        return type(ranked)(*(field[: self.n_sources] for field in ranked))

    def _refresh(self) -> None:
        mv, layer, head = self.mv, self.layer, self.head
        ranked = self._ranked()
        source = int(ranked.sources[0]) if self.source is None else self.source
        lists = analysis.skip_trigrams(mv, layer, head, source, k=self.k)
        triples = lists.triples()
        labels = mv.token_strings
        where = {"layer": layer, "head": head}
        values = torch.stack(
            [lists.destination_values, lists.out_values, torch.tensor([t[2] for t in triples], dtype=torch.float32)]
        )
        dest_ids, out_ids = lists.destinations.tolist(), lists.outs.tolist()
        trigrams = self.payload_float32(
            values, **where, source=lists.source, source_label=labels([lists.source])[0],
            following=self.source is None, strength=float(lists.strength),
            destinations=dest_ids, destination_labels=labels(dest_ids),
            outs=out_ids, out_labels=labels(out_ids), triples=[[d, o] for d, o, _ in triples],
        )
        ids, dests, outs = ranked.sources.tolist(), ranked.destinations.tolist(), ranked.outs.tolist()
        sources = self.payload_float32(
            torch.stack([ranked.strengths, ranked.top_qk, ranked.top_ov], dim=1), **where,
            ids=ids, labels=labels(ids), destinations=dests, destination_labels=labels(dests),
            outs=outs, out_labels=labels(outs),
        )
        self.sources = sources
        self.trigrams = trigrams

    # ----- reading back ------------------------------------------------------------------------
    @property
    def shown_source(self) -> int | None:
        """The id of the source token drawn (the strongest source when `source` is None); None before the first picture."""
        return self.trigrams.get("source")

    def ranked_sources(self) -> list[int]:
        """Ids of the ranked source tokens drawn, strongest first.

        Example:
            >>> import circuitwidgets as cw
            >>> len(cw.SkipTrigrams(cw.demo_model(), n_sources=5).ranked_sources())
            5
        """
        return list(self.sources.get("ids", []))
