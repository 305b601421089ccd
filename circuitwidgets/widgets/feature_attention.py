"""`FeatureAttention`: a head's pattern, and for a clicked cell its score split over a dictionary's features.

The pattern is `AttentionPattern`'s own picture (every level of detail of a long prompt, tiles, hover rows,
export); a click on a cell (the ``cell`` trait) asks `circuitwidgets.analysis.feature_qk` for that one score's
split (``panel="qk"``: which query feature and which key feature make it large) or `feature_ov` for what the head
moves to that destination (``panel="ov"``), one run of the prompt, and sends it as one payload (``split``): the
ranked feature pairs and the error and bias terms as bars, their sum beside the model's own score, and for each
feature shown its label, its top activating positions in this prompt and its decoder's direct logit effect.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import traitlets

from .. import analysis
from ..analysis import features as feature_analysis
from ..dictionary import Dictionary, as_dictionary
from ..model import _message_id
from . import _cache
from ._contract import short
from .attention import AttentionPattern

#: What the split panel says before a dictionary is given.
NO_DICTIONARY = ("no dictionary to split over: set w.dictionary (a circuitwidgets.Dictionary or a SAELens SAE of the head's "
                 "input, e.g. cw.demo_dictionary() on cw.demo_model())")
#: Names of the roles a dictionary plays here, as the constructor takes them.
ROLES = ("dictionary", "key_dictionary", "output_dictionary")


class FeatureAttention(AttentionPattern, view="featureattention"):
    """A head's attention pattern; click a cell for its score split over a dictionary's features.

    ``panel="qk"`` (default): the cell's pre-softmax score (scaled as the model scales it) split into the pairs of
    an active query feature and an active key feature (ranked, as bars), the error and bias terms as bars of their
    own, their sum beside the model's score (`circuitwidgets.analysis.feature_qk`). A cell ``{"query": d, "key":
    None}`` splits the whole row: the top pairs over every source, each term averaged over the sources with the
    pattern's weights. ``panel="ov"``: what the head moves to the destination, its source features read out in
    logits (or in `output_dictionary`'s features), with the error and bias (`circuitwidgets.analysis.feature_ov`).
    Hovering a feature shows its label, its top activating positions in this prompt and the tokens its decoder
    direction raises and lowers.

    The pattern is `AttentionPattern`'s (long prompts keep their level of detail); only the clicked cell or row
    is split, from one run of the prompt, computed where the model runs (on NDIF: only the terms come back).

    Args:
        model: any model the package takes.
        prompt, tokens: what to run (as `AttentionPattern`).
        dictionary: a `circuitwidgets.Dictionary` (or a SAELens SAE) reconstructing the head's input
            (``blocks.{layer}.hook_resid_pre``); it splits both sides unless `key_dictionary` is given. Without one
            the pattern is drawn and the split panel asks for it (``w.dictionary = sae``).
        key_dictionary: another dictionary for the key side. output_dictionary: read ``panel="ov"`` out in its
            features instead of the logits. Each can be replaced later (``w.dictionary = other``): the split redraws.
        layer: default the layer whose input `dictionary` reconstructs. head: the head.
        cell: ``{"query": d, "key": s}`` to split at once; k: how many pairs to rank; panel: "qk" or "ov".

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.FeatureAttention(cw.demo_model(), "abcdefabcdef", dictionary=cw.demo_dictionary(), head=0)
        >>> w.cell = {"query": 9, "key": 5}
        >>> w.split["score"] == w.current_split().score
        True
    """

    controls: ClassVar[tuple[str, ...]] = ("cell", "k", "panel")
    requests: ClassVar[tuple[str, ...]] = ("cell",)
    needs: ClassVar[dict[str, str]] = {"cell": "feature_attention", "k": "feature_attention", "panel": "feature_attention"}

    cell = traitlets.Dict(
        {"query": None, "key": None},
        help="the cell split, {'query': destination, 'key': source}, set by a click (key None: the whole row; query "
        "None: nothing split)",
    ).tag(sync=True)
    k = traitlets.Int(10, help="how many feature pairs (and features) to rank").tag(sync=True)
    panel = traitlets.Enum(
        ("qk", "ov"), "qk", help="'qk': why the head attends there (its score split); 'ov': what it moves to the destination"
    ).tag(sync=True)
    split = traitlets.Dict(
        help="payload: float32 [bars] of the split shown, with bars (each one's kind, label and features), score (the "
        "model's), total (the sum of the bars), features (label, activation, top positions, logit effect of each)"
    ).tag(sync=True)
    dictionary_info = traitlets.Dict(help="the dictionaries shown: name, sites, features, activation").tag(sync=True)

    def __init__(
        self, model: Any, prompt: str | None = None, *, tokens: Any = None, dictionary: Any = None,
        key_dictionary: Any = None, output_dictionary: Any = None, layer: int | None = None, head: int = 0,
        defer: bool = False, **kwargs: Any,
    ) -> None:
        self._check_keywords(kwargs)
        found: dict[str, Dictionary | None] = {}
        for role, value in (("dictionary", dictionary), ("key_dictionary", key_dictionary),
                            ("output_dictionary", output_dictionary)):
            found[role] = None if value is None else as_dictionary(value, role)
        self._dictionaries: dict[str, Dictionary | None] = found
        self._result: Any = None
        self._why_not = ""  # why the cell asked for has no split ('' when it has one, or none was asked for)
        self._drawn_ids: list[int] = []
        self._memo: tuple | None = None  # (kernel message, dictionaries, their fingerprints): `_fingerprints`
        if layer is None:  # the layer whose input the dictionary reconstructs
            word, at = found["dictionary"].site_out if found["dictionary"] is not None else ("resid_pre", 0)
            layer = at + 1 if word == "resid_post" else at
        super().__init__(model, prompt, tokens=tokens, layer=layer, head=head, defer=defer, **kwargs)

    # ----- the dictionaries ------------------------------------------------------------------------
    def _dictionary(self, role: str) -> Dictionary | None:
        return self._dictionaries[role]

    def _replace(self, role: str, value: Any) -> None:
        try:
            self._dictionaries[role] = None if value is None else as_dictionary(value, role)
        except (TypeError, ValueError) as exc:
            self._show_error(f"{role}: {exc}", "controls")
            raise
        self._clear_error("controls")
        self._sent_for.pop("split", None)
        self._info()
        self._send_split()

    dictionary = property(lambda self: self._dictionary("dictionary"), lambda self, v: self._replace("dictionary", v),
                          doc="the dictionary splitting the query side (and the key side without key_dictionary)")
    key_dictionary = property(lambda self: self._dictionary("key_dictionary"),
                              lambda self, v: self._replace("key_dictionary", v), doc="the key side's dictionary, or None")
    output_dictionary = property(lambda self: self._dictionary("output_dictionary"),
                                 lambda self, v: self._replace("output_dictionary", v),
                                 doc="the dictionary panel 'ov' reads out in, or None for the logits")

    def _info(self) -> None:
        shown = {}
        for role, value in self._dictionaries.items():
            if value is not None:
                shown[role] = {"name": value.name, "hook_name": str(value.hook_name), "features": value.n_features,
                               "activation": value.activation, "labels": len(value.labels)}
        self._set(dictionary_info=shown)

    def _fingerprints(self) -> tuple:
        """The dictionaries' contents (`Dictionary.fingerprint`), read once per kernel message (a hover, a click: the
        dictionaries change only while user code runs), and at every call outside a kernel."""
        message, held = _message_id(), tuple(self._dictionaries.values())
        memo = self._memo
        if message is not None and memo is not None and memo[0] == message and all(
            a is b for a, b in zip(memo[1], held, strict=True)
        ):
            return memo[2]
        found = tuple(None if d is None else d.fingerprint() for d in held)
        self._memo = (message, held, found)
        return found

    def _model_state(self) -> tuple:
        # the split depends on the dictionaries too: an in-place edit of one redraws at the next action
        return (*super()._model_state(), self._fingerprints())

    # ----- checks ---------------------------------------------------------------------------------
    def _check_cell(self, value: dict) -> dict:
        unknown = sorted(map(repr, set(value) - {"query", "key"}))
        if unknown:
            raise ValueError(f"cell has unknown fields {', '.join(unknown)}: it holds query and key")
        seq = self._seq() or math.inf
        for field in ("query", "key"):
            at = value.get(field)
            if at is not None and (isinstance(at, bool) or not isinstance(at, int) or not 0 <= at < seq):
                raise ValueError(f"cell {field}={short(at)} is out of range: a position 0..{seq - 1}, or None")
        query, key = value.get("query"), value.get("key")
        if query is None and key is not None:
            raise ValueError("cell names a key without a query: give the destination too")
        if query is not None and key is not None and key > query:
            raise ValueError(f"cell key={key} is after query={query}: a causal head cannot attend there")
        return {"query": query, "key": key}

    def _check_k(self, value: int) -> int:
        if not 1 <= value <= 200:
            raise ValueError(f"k={value} is out of range: 1..200")
        return value

    # ----- the split -----------------------------------------------------------------------------
    @traitlets.observe("cell", "k", "panel", "head")
    def _on_split_input(self, change: dict) -> None:
        if self._ready and not self._quiet:
            browser = self._in_browser_update

            def split() -> None:
                self._for_browser = browser  # (a long prompt's split asked for by the browser runs as a job)
                self._split_now()

            self._soon("cell", split, defer=browser)

    def _split_now(self) -> None:
        try:
            self._send_split()
        except (ValueError, TypeError) as exc:  # the pattern stands; the split panel says why there is no split
            self._no_split(exc)

    def _no_split(self, exc: BaseException) -> None:
        """Say in the split panel why this cell cannot be split (a dictionary of another layer's input, a backend that
        cannot, a model whose terms do not sum to its score); `current_split` raises it."""
        self._result, self._why_not = None, f"no split: {exc}"
        self._set(split=self.empty_payload(note=self._why_not, failed=True))

    def _draw(self, labels: list[str], answer: Any, **fields: Any) -> None:
        self._drawn_ids = list(fields.get("ids") or [])  # (the picture's tokens: `tokens` is set after it is drawn)
        super()._draw(labels, answer, **fields)
        self._info()
        seq = self._seq()
        cell = self.cell or {}
        if any(isinstance(at, int) and at >= seq for at in (cell.get("query"), cell.get("key"))):  # a shorter prompt now
            self._set(cell={"query": None, "key": None})
        self._split_now()

    def _ids(self) -> list[int]:
        return list(self._drawn_ids)

    def _compute_split(self) -> Any:
        if self._dictionaries["dictionary"] is None:
            raise ValueError(NO_DICTIONARY)
        mv, ids, layer, head = self.mv, self._ids(), self.layer, self.head
        query, key = self.cell.get("query"), self.cell.get("key")
        main, other, out = (self._dictionaries[r] for r in ROLES)
        if self.panel == "qk":
            def compute() -> Any:
                return analysis.feature_qk(mv, [ids], layer, head, query, key, main, other, k=self.k, cards=True)
        else:
            def compute() -> Any:
                return analysis.feature_ov(mv, [ids], layer, head, query, main, output=out, unembed=out is None,
                                           k=self.k, cards=True)
        key_of = ("feature_attention", self.panel, tuple(ids), layer, head, query, key, self.k, self._fingerprints())
        return _cache.cached(mv, key_of, compute, runs_model=True)

    def _send_split(self) -> None:
        """Compute and send the split of the cell (nothing when no cell is chosen)."""
        if not self._drawn_ids or (self.cell or {}).get("query") is None:
            self._result, self._why_not = None, ""
            note = NO_DICTIONARY if self._dictionaries["dictionary"] is None else "click a cell of the pattern to split its score"
            if self.split.get("note") != note:
                self._set(split=self.empty_payload(note=note))
            return
        if not self._inputs_changed("split", tuple(self._drawn_ids), self.layer, self.head, self.panel, self.k,
                                    tuple(sorted(self.cell.items(), key=str))):
            return
        def compute() -> Any:
            try:
                return self._compute_split()
            except (ValueError, TypeError) as exc:  # (said in the split panel, from a job too)
                return exc

        def show(result: Any) -> None:
            if isinstance(result, Exception):
                self._sent_for.pop("split", None)
                self._no_split(result)
                return
            self._result, self._why_not = result, ""
            self._set(split=self._payload(result))

        n = len(self._drawn_ids)  # a long prompt: progress and Cancel in the widget when the browser asked
        self._compute(f"the split of a cell of {n} tokens", compute, show, long=self.mv.runs_layer_by_layer(n))

    # ----- payloads ------------------------------------------------------------------------------
    def _names(self, ids: list[int]) -> list[str]:
        return self.mv.token_strings(ids)

    def _feature(self, role: str, feature: int, **extra: Any) -> dict[str, Any]:
        dictionary = self._dictionaries[role] or self._dictionaries["dictionary"]
        assert dictionary is not None
        return {"id": int(feature), "label": dictionary.label(feature), "role": role, **extra}

    def _card(self, entry: dict[str, Any], card: dict[str, Any] | None) -> dict[str, Any]:
        if not card:
            return entry
        labels = self.str_tokens
        entry["positions"] = [[p, labels[p] if p < len(labels) else str(p), round(v, 4)]
                              for p, v in zip(card["positions"], card["values"], strict=True)]
        if "up" in card:
            entry["up"] = [[s, round(v, 4)] for s, v in zip(self._names(card["up"]), card["up_values"], strict=True)]
            entry["down"] = [[s, round(v, 4)] for s, v in zip(self._names(card["down"]), card["down_values"], strict=True)]
        return entry

    def _payload(self, result: Any) -> dict[str, Any]:
        if isinstance(result, feature_analysis.FeatureOV):
            return self._ov_payload(result)
        return self._qk_payload(result)

    def _qk_payload(self, result: Any) -> dict[str, Any]:
        row = isinstance(result, feature_analysis.FeatureQKRow)
        key_role = "key_dictionary" if self._dictionaries["key_dictionary"] is not None else "dictionary"
        bars: list[dict[str, Any]] = []
        values: list[float] = []
        features: dict[str, dict[str, Any]] = {}
        cards = result.cards

        def note(role: str, side: str, feature: int, **extra: Any) -> str:
            name = f"{side}:{feature}"
            if name not in features:
                entry = self._feature(role, feature, side=side, **extra)
                features[name] = self._card(entry, (cards or {}).get(side, {}).get(feature))
            return name

        if row:
            weights = torch.softmax(result.scores.double(), 0)
            terms = {name: float((values_ * weights).sum()) for name, values_ in result.terms.items()}
            score = float((result.scores.double() * weights).sum())
            shown = 0.0
            labels = self.str_tokens
            for source, qf, kf, value in result.pairs[: self.k]:
                q_name = note("dictionary", "query", qf, activation=result.query_activations.get(qf))
                k_name = note(key_role, "key", kf)
                source_text = labels[source] if source < len(labels) else str(source)
                bars.append({"kind": "pair", "features": [q_name, k_name], "source": source, "source_text": source_text})
                values.append(value)
                shown += value * float(weights[source])
            caption = "top pairs over the row (each at its source); terms averaged over the sources with the pattern"
        else:
            terms, score = dict(result.terms), result.score
            shown = 0.0
            for qf, kf, value in result.pairs[: self.k]:
                q_name = note("dictionary", "query", qf, activation=result.query_activations.get(qf),
                              marginal=result.query_features.get(qf))
                k_name = note(key_role, "key", kf, activation=result.key_activations.get(kf),
                              marginal=result.key_features.get(kf))
                bars.append({"kind": "pair", "features": [q_name, k_name]})
                values.append(value)
                shown += value
            caption = ""
        rest = terms["features × features"] - shown
        bars.append({"kind": "rest", "label": "other feature pairs" if not row else "other feature pairs (pattern-weighted)"})
        values.append(rest)
        for name in feature_analysis.TERMS[1:]:
            bars.append({"kind": "term", "label": name, "error": "error" in name, "bias": "bias" in name})
            values.append(terms[name])
        total = float(sum(terms.values()))
        size = sum(abs(v) for v in terms.values())
        error = sum(abs(v) for n, v in terms.items() if "error" in n)
        marginals = {}
        if not row:
            marginals = {
                "query": [note("dictionary", "query", f, activation=result.query_activations.get(f), marginal=m)
                          for f, m in list(result.query_features.items())[: self.k]],
                "key": [note(key_role, "key", f, activation=result.key_activations.get(f), marginal=m)
                        for f, m in list(result.key_features.items())[: self.k]],
            }
        return self.payload_float32(
            torch.tensor(values, dtype=torch.float32), panel="qk", row=row, bars=bars, features=features,
            marginals=marginals, score=score, total=total, error_share=0.0 if size == 0 else error / size,
            cell={"query": result.destination, "key": None if row else result.source}, layer=result.layer,
            head=result.head, caption=caption, revision=self.patterns.get("revision", self.revision),
        )

    def _ov_payload(self, result: Any) -> dict[str, Any]:
        features: dict[str, dict[str, Any]] = {}
        bars: list[dict[str, Any]] = []
        values: list[float] = []
        out = self._dictionaries["output_dictionary"]
        card = (result.cards or {}).get("source", {})

        def output_text(o: int) -> str:
            if result.read == "unembed":
                return f"logit {self._names([o])[0]!r}"
            assert out is not None
            label = out.label(o)
            return f"#{o}" + (f" {label}" if label else "")

        def note(feature: int) -> str:
            name = f"source:{feature}"
            if name not in features:
                weight, size = result.source_features.get(feature, (None, None))
                entry = self._feature("dictionary", feature, side="source", weight=weight, size=size)
                features[name] = self._card(entry, card.get(feature))
            return name

        for feature, o, value in result.pairs[: self.k]:
            bars.append({"kind": "pair", "features": [note(feature)], "output": output_text(o)})
            values.append(value)
        top = result.outputs[0] if result.outputs else None
        if top is not None:
            for name in ("features", "error", "bias"):
                bars.append({"kind": "term", "label": f"{name} → {output_text(top)}", "error": name == "error",
                             "bias": name == "bias"})
                values.append(result.terms[name][top])
        sources = [note(f) for f in list(result.source_features)[: self.k]]
        return self.payload_float32(
            torch.tensor(values, dtype=torch.float32), panel="ov", row=False, bars=bars, features=features,
            marginals={"source": sources}, score=None if top is None else result.scores[top],
            total=None if top is None else sum(result.terms[n][top] for n in ("features", "error", "bias")),
            error_share=result.error_share(), outputs=[[output_text(o), result.totals[o]] for o in result.outputs],
            cell={"query": result.destination, "key": None}, layer=result.layer, head=result.head, read=result.read,
            revision=self.patterns.get("revision", self.revision),
        )

    # ----- Python ----------------------------------------------------------------------------------
    def current_split(self) -> Any:
        """The analysis result on screen: a `FeatureQK`, `FeatureQKRow` or `FeatureOV` (ValueError before a cell is split)."""
        if self._result is None:
            raise ValueError(self._why_not or "no cell split yet: set cell (click a cell of the pattern)")
        return self._result


# ----- in a Dashboard -------------------------------------------------------------------------------
#: The title of a Dashboard's folded feature-attention row.
DASHBOARD_TITLE = "Feature attention: the clicked cell split over {name}"


def _locked_cell(held: Any) -> Any:
    """A Dashboard's attention pattern's selection, as the cell to split: the clicked (locked) one, else no change."""
    def transform(selection: dict) -> dict:
        query, key = (selection or {}).get("query"), (selection or {}).get("key")
        if held().unsupported.get("cell"):  # (greyed there with the reason: the pattern's clicks stay the pattern's)
            return dict(held().cell)
        if (selection or {}).get("locked") and query is not None and (key is None or key <= query):
            return {"query": query, "key": key}
        return dict(held().cell)

    return transform


def for_dashboard(hub: Any, runs: Any, prompt: str | None, tokens: Any, layer: int, head: int, dictionary: Any) -> tuple:
    """A Dashboard's `FeatureAttention` over its attention pattern `hub`, its links and its folded row.

    Its layer, head and tokens follow the hub's (the Dashboard links layer and head); a cell clicked (locked) in
    the hub's pattern is split here. Returns ``(widget, links, row)``.
    """
    import ipywidgets

    widget = FeatureAttention(runs, prompt, tokens=tokens, layer=layer, head=head, dictionary=dictionary, defer=True)
    links = [traitlets.dlink((hub, "tokens"), (widget, "tokens")),
             traitlets.dlink((hub, "selection"), (widget, "cell"), _locked_cell(lambda: widget))]
    title = DASHBOARD_TITLE.format(name=widget._dictionaries["dictionary"].name)  # type: ignore[union-attr]
    row = ipywidgets.Accordion([widget], titles=(title,), selected_index=None)
    row.add_class("cw-dashboard-features")
    return widget, links, row
