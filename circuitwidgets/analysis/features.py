"""Attention at feature level: which dictionary features make a head attend, and which features it moves.

A head's attention score at destination d and source s, pre-softmax and scaled exactly as the model scales it
(``1/sqrt(d_head)``, GPT-2's per-layer scale, rotary rotations at both positions, the input norm's scale frozen at
this run's value), is bilinear in the residual streams it reads. Split each stream over a dictionary (a sparse
autoencoder or transcoder reconstructing the head's input, `circuitwidgets.dictionary.Dictionary`) into its active
features, its error and its bias, and the score splits into terms that sum to it (definition:
``circuits-spec.md``, *Feature-level QK*; the maths: `circuitwidgets.feature_terms`):

- ``"features × features"``: the sum over every pair of an active query feature and an active key feature
  (`FeatureQK.pairs` ranks the pairs);
- ``"features × key error"``, ``"query error × features"``, ``"error × error"``: what the dictionaries leave out;
- the terms whose names contain ``"bias"``: each side's bias is the decoder bias ``b_dec`` through the norm plus
  the head's ``b_Q`` / ``b_K`` (with LayerNorm's bias folded in; its centring is folded into the weights).

`feature_ov` splits what the head writes the same way (its source features, each weighted by the pattern, through
the OV circuit) and reads it out in an output dictionary's features or in logits; `feature_heads` splits an
attention-output dictionary's features over the heads that write them.

Each is one run of the prompt (its split computed where the model runs: on NDIF only the terms, top pairs and
marginals come back) using only the active features, and is refused with the reason when its terms do not sum to
the model's own value.

Example:
    >>> import circuitwidgets as cw
    >>> model, sae = cw.demo_model(), cw.demo_dictionary()
    >>> split = cw.analysis.feature_qk(model, "abcdefabcdef", 1, 0, destination=9, source=5, dictionary=sae)
    >>> abs(sum(split.terms.values()) - split.score) < 1e-4 * (1 + abs(split.score))
    True
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..dictionary import Dictionary, as_dictionary
from ..feature_terms import OV_TERMS, TERMS
from ..model import ModelView, as_view
from ..sites import Site, transformer_lens_name

__all__ = ["FeatureHeads", "FeatureOV", "FeatureQK", "FeatureQKRow", "TERMS", "feature_heads", "feature_ov", "feature_qk"]


@dataclass(frozen=True, eq=False)
class FeatureQK:
    """One attention score split over features (`feature_qk`).

    Attributes:
        score: the model's own score (pre-softmax, scaled as the model scales it) at (destination, source).
        terms: ``{name: value}`` of `TERMS`, which sum to `score` (up to float error).
        pairs: the top ``k`` ``(query_feature, key_feature, value)`` by ``|value|``.
        query_features, key_features: ``{feature: marginal}`` of every active feature, largest ``|marginal|`` first:
            a query feature's product with the whole key (its row sum: key features, key error and key bias), and
            a key feature's with the whole query.
        query_activations, key_activations: ``{feature: activation}`` at the destination / source.
        layer, head, destination, source: where.
        cards: with ``cards=True``, ``{"query": {feature: card}, "key": {...}}``: each shown feature's top
            activating positions in the prompt and the tokens its decoder direction raises and lowers most.
    """

    score: float
    terms: dict[str, float]
    pairs: list[tuple[int, int, float]]
    query_features: dict[int, float]
    key_features: dict[int, float]
    query_activations: dict[int, float]
    key_activations: dict[int, float]
    layer: int
    head: int
    destination: int
    source: int
    cards: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)

    def total(self) -> float:
        """The sum of the terms: `score`, up to float error."""
        return float(sum(self.terms.values()))

    def error_share(self) -> float:
        """The share of the terms' absolute sum carried by those with an error in them (0: the features explain it all).

        Example:
            >>> FeatureQK(1.0, {"features × features": 3.0, "error × error": -1.0}, [], {}, {}, {}, {}, 1, 0, 2, 1).error_share()
            0.25
        """
        size = sum(abs(v) for v in self.terms.values())
        return 0.0 if size == 0 else sum(abs(v) for n, v in self.terms.items() if "error" in n) / size


@dataclass(frozen=True, eq=False)
class FeatureQKRow:
    """A whole destination row's scores split over features (`feature_qk` with ``source=None``).

    Attributes:
        scores: ``[d + 1]`` the model's scores of every source 0..d; terms: ``{name: [d + 1]}``.
        pairs: the top ``k`` ``(source, query_feature, key_feature, value)`` over the row.
        query_activations: ``{feature: activation}`` at the destination.
        layer, head, destination; cards as in `FeatureQK`.
    `at(source)` is that cell's `FeatureQK` (its top ``k`` pairs, every marginal).
    """

    scores: torch.Tensor
    terms: dict[str, torch.Tensor]
    pairs: list[tuple[int, int, int, float]]
    query_activations: dict[int, float]
    layer: int
    head: int
    destination: int
    cards: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    _answer: dict[str, Any] = field(repr=False, default_factory=dict)

    def at(self, source: int) -> FeatureQK:
        """The split of the cell (destination, `source`)."""
        n = self.scores.shape[0]
        source = _position(source, n, "source")
        return _cell(self._answer, source, source, self.layer, self.head, self.destination)

    def total(self) -> torch.Tensor:
        """``[d + 1]`` the sum of the terms at each source: `scores`, up to float error."""
        return torch.stack(list(self.terms.values())).sum(0)


@dataclass(frozen=True, eq=False)
class FeatureOV:
    """What a head moves to one destination, split over its source features (`feature_ov`).

    Attributes:
        outputs: the top ``k`` outputs (output features, or token ids with ``unembed=True``) by ``|total|``.
        totals: ``{output: value}`` the sum of the parts' read-outs there; scores: ``{output: value}`` the model's own
            read-out of the head's output (its contribution to the output feature's pre-activation, or to the logit),
            which the totals equal up to float error; terms: ``{name: {output: value}}`` of `OV_TERMS` ("features", "error",
            "bias"), which sum to the totals.
        pairs: the top ``k`` ``(source_feature, output, value)`` by ``|value|``.
        source_features: ``{feature: (weight, size)}``, largest size first: ``weight`` = Σ over sources of the pattern
            times the feature's activation there; ``size`` = the norm of its part of the read-out.
        pattern: ``[d + 1]`` the head's attention from the destination (rebuilt from the model's queries and keys,
            checked against its output).
        read: "unembed" (logits, final norm frozen at the destination), "resid" (an output dictionary on the residual
            stream) or "z" (a dictionary of every head's z).
        layer, head, destination; cards as in `FeatureQK` (``{"source": ...}``).
    """

    outputs: list[int]
    totals: dict[int, float]
    scores: dict[int, float]
    terms: dict[str, dict[int, float]]
    pairs: list[tuple[int, int, float]]
    source_features: dict[int, tuple[float, float]]
    pattern: torch.Tensor
    read: str
    layer: int
    head: int
    destination: int
    cards: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)

    def error_share(self) -> float:
        """The share of the terms' absolute sum (over the top outputs) carried by the error term."""
        size = sum(abs(v) for values in self.terms.values() for v in values.values())
        return 0.0 if size == 0 else sum(abs(v) for v in self.terms["error"].values()) / size


@dataclass(frozen=True, eq=False)
class FeatureHeads:
    """An attention-output dictionary's features split over the heads that write them (`feature_heads`).

    Attributes:
        by_head: ``[n_heads, n_features]``: with tokens, each head's part of each feature's pre-activation at the
            position (they sum, with the encoder bias, to the pre-activation); without, the norm of each feature's
            encoder slice on each head (which heads it can read at all).
        activations: ``[n_features]`` at the position (None without tokens); layer; position (None without tokens).
    """

    by_head: torch.Tensor
    activations: torch.Tensor | None
    layer: int
    position: int | None

    def top_heads(self, feature: int) -> list[tuple[int, float]]:
        """``(head, value)`` of one feature, largest ``|value|`` first."""
        column = self.by_head[:, feature]
        order = torch.argsort(column.abs(), descending=True, stable=True)
        return [(int(h), float(column[h])) for h in order]


def _position(value: Any, n: int, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int; got {value!r}")
    try:
        index = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r:.40}") from None
    if not -n <= index < n:
        raise ValueError(f"{name}={index} is out of range for {n} tokens: use 0..{n - 1} (or -{n}..-1)")
    return index % n


def _ranked(ids: torch.Tensor, values: torch.Tensor) -> dict[int, float]:
    order = torch.argsort(values.abs(), descending=True, stable=True)
    return {int(ids[i]): float(values[i]) for i in order}


def _cards(answer: dict[str, Any], side: str) -> dict[int, dict[str, Any]]:
    card = answer.get("cards", {}).get(side)
    if not card:
        return {}
    found: dict[int, dict[str, Any]] = {}
    for row, feature in enumerate(card["ids"].tolist()):
        values = card["values"][row].tolist()
        entry: dict[str, Any] = {"positions": [p for p, v in zip(card["positions"][row].tolist(), values, strict=True) if v > 0],
                                 "values": [v for v in values if v > 0]}
        if "up" in card:
            entry.update(up=card["up"][row].tolist(), up_values=card["up_values"][row].tolist(),
                         down=card["down"][row].tolist(), down_values=card["down_values"][row].tolist())
        found[int(feature)] = entry
    return found


def _cell(answer: dict[str, Any], row: int, source: int, layer: int, head: int, destination: int) -> FeatureQK:
    """Cell `row` (of the sources asked) of a QK answer."""
    mine = answer["pair_rows"] == row
    qi, ki, pv = answer["pair_query"][mine], answer["pair_key"][mine], answer["pair_values"][mine]
    order = torch.argsort(pv.abs(), descending=True, stable=True)
    key_mine = answer["key_rows"] == row
    key_index = torch.nonzero(key_mine).flatten()
    pairs = [(int(answer["query_ids"][qi[i]]), int(answer["key_ids"][ki[i]]), float(pv[i])) for i in order]
    return FeatureQK(
        score=float(answer["score"][row]),
        terms={name: float(answer["terms"][row, i]) for i, name in enumerate(TERMS)},
        pairs=pairs,
        query_features=_ranked(answer["query_ids"], answer["query_marginals"][row]),
        key_features=_ranked(answer["key_ids"][key_index], answer["key_marginals"][key_index]),
        query_activations={int(i): float(a) for i, a in zip(answer["query_ids"], answer["query_acts"], strict=True)},
        key_activations={int(answer["key_ids"][i]): float(answer["key_acts"][i]) for i in key_index},
        layer=layer, head=head, destination=destination, source=source,
        cards={"query": _cards(answer, "query"), "key": _cards(answer, "key")} if "cards" in answer else {},
    )


# ----- checking what is asked -----------------------------------------------------------------------
def _sequence(view: ModelView, tokens: Any) -> torch.Tensor:
    ids = view.tokens_of(tokens)
    if ids.shape[0] != 1:
        raise ValueError(f"tokens must be one sequence; got a batch of {ids.shape[0]}")
    return ids


def _width(view: ModelView, site: Site) -> int:
    word = site[0]
    if word in ("z", "q"):
        return view.n_heads * view.d_head
    if word in ("k", "v"):
        return view.n_kv_heads * view.d_head
    return view.d_model


def _check_site(view: ModelView, site: Site, what: str) -> None:
    if not 0 <= site[1] < view.n_layers:
        raise ValueError(f"{what} reads block {site[1]}, but this model has blocks 0..{view.n_layers - 1}")


def _head_input(view: ModelView, dictionary: Dictionary, layer: int, role: str) -> Dictionary:
    """`dictionary` checked as one that reconstructs the head's input residual (what layer `layer`'s attention reads)."""
    name = f"{role} ({dictionary.name})"
    for site in (dictionary.site, dictionary.site_out):
        _check_site(view, site, name)
    inputs: list[Site] = [("resid_pre", layer)] + ([("resid_post", layer - 1)] if layer > 0 else [])
    if dictionary.site_out not in inputs:
        raise ValueError(
            f"{name} reconstructs {dictionary.writes}, not what layer {layer}'s attention reads "
            f"({' = '.join(map(transformer_lens_name, inputs))}): the score splits over a dictionary of the head's input (an MLP "
            "transcoder's output is only part of it)"
        )
    word, at = dictionary.site
    if not (at < layer or (at == layer and word == "resid_pre")):
        raise ValueError(
            f"{name} reads {dictionary.reads}, which the model computes after layer {layer}'s attention reads its input"
        )
    if dictionary.d_out != view.d_model:
        raise ValueError(f"{name} writes {dictionary.d_out} numbers, but this model's residual stream has d_model={view.d_model}")
    width = _width(view, dictionary.site)
    if dictionary.d_in != width:
        raise ValueError(f"{name} reads {dictionary.d_in} numbers, but {dictionary.reads} holds {width}")
    return dictionary


def _output_read(view: ModelView, dictionary: Dictionary, layer: int) -> str:
    """How the head's output reaches `dictionary`'s encoder: "z" (a dictionary of layer `layer`'s z) or "resid"."""
    word, at = dictionary.site
    name = f"output ({dictionary.name})"
    _check_site(view, dictionary.site, name)
    if (word, at) == ("z", layer):
        if dictionary.d_in != view.n_heads * view.d_head:
            raise ValueError(f"{name} reads {dictionary.d_in} numbers, but layer {layer}'s z holds {view.n_heads * view.d_head}")
        return "z"
    after = word in ("resid_mid", "resid_post", "attn_out") and at == layer
    later = word in ("resid_pre", "resid_mid", "resid_post") and at > layer
    if not (after or later):
        reached = ", ".join(transformer_lens_name((w, layer)) for w in ("z", "attn_out", "resid_mid", "resid_post"))
        raise ValueError(
            f"{name} reads {dictionary.reads}, which head {layer}'s output does not reach directly: give a dictionary "
            f"of {reached}, or of a later block's residual stream"
        )
    if dictionary.d_in != view.d_model:
        raise ValueError(f"{name} reads {dictionary.d_in} numbers, but this model's residual stream has d_model={view.d_model}")
    return "resid"


def _k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int; got {k!r}")
    if k < 1:
        raise ValueError(f"k must be at least 1; got {k}")
    return k


def _request(view: ModelView, kind: str, layer: int, head: int, destination: int, k: int, cards: bool, **extra: Any) -> dict:
    if not isinstance(cards, bool):
        raise TypeError(f"cards must be a bool; got {cards!r}")
    return {"kind": kind, "layer": layer, "head": head, "destination": destination, "k": _k(k), "cards": cards,
            "scale": 1.0 / view.scale_of(layer), **extra}


# ----- the analyses ---------------------------------------------------------------------------------
def feature_qk(
    model: Any, tokens: Any, layer: int, head: int, destination: int, source: int | None, dictionary: Any,
    key_dictionary: Any = None, k: int = 20, *, cards: bool = False,
) -> FeatureQK | FeatureQKRow:
    """Head (`layer`, `head`)'s score at (`destination`, `source`) split over features (see the module docstring).

    Args:
        model: any model the package takes (or a `ModelView`).
        tokens: a prompt (tokenised with BOS) or token ids of one sequence.
        destination, source: positions (negative counts from the end); `source` at most `destination`;
            ``source=None``: the whole row (every source 0..destination) in one run.
        dictionary: a `Dictionary` (or a SAELens SAE) reconstructing the head's input, ``blocks.{layer}.hook_resid_pre``
            (or a transcoder whose output is that); its features split the query side, and the key side too unless
            `key_dictionary` is given.
        k: how many pairs to rank (per source for a row, and over the row).
        cards: also each shown feature's top activating positions in this prompt and its decoder's direct logit effect.

    Returns a `FeatureQK` (a `FeatureQKRow` for ``source=None``). ValueError when the dictionaries do not fit the head,
    or when the model's backend cannot (`ModelView.supports("feature_attention")`: the reason), or the terms do not
    sum to the model's own score (a term the split does not know, e.g. a norm on the queries).
    """
    view = as_view(model)
    view.layer_index(layer)
    view.check_head(head)
    ids = _sequence(view, tokens)
    n = ids.shape[1]
    destination = _position(destination, n, "destination")
    row = source is None
    if not row:
        source = _position(source, n, "source")
        if source > destination:
            raise ValueError(f"source={source} is after destination={destination}: a causal head cannot attend there")
    query = _head_input(view, as_dictionary(dictionary), layer, "dictionary")
    key = query
    if key_dictionary is not None:
        key = _head_input(view, as_dictionary(key_dictionary, "key_dictionary"), layer, "key_dictionary")
    request = _request(view, "qk", layer, head, destination, k, cards, sources=None if row else [source],
                       query=query.spec(view.device), key=key.spec(view.device), sites={"query": query.site, "key": key.site})
    answer = view.feature_terms(ids, request)
    if not row:
        assert source is not None
        return _cell(answer, 0, source, layer, head, destination)
    top = answer["top"]
    rows, qi, ki, pv = (answer[name][top] for name in ("pair_rows", "pair_query", "pair_key", "pair_values"))
    return FeatureQKRow(
        scores=answer["score"].float(),
        terms={name: answer["terms"][:, i].float() for i, name in enumerate(TERMS)},
        pairs=[
            (int(r), int(answer["query_ids"][q]), int(answer["key_ids"][kk]), float(v))
            for r, q, kk, v in zip(rows, qi, ki, pv, strict=True)
        ],
        query_activations={int(i): float(a) for i, a in zip(answer["query_ids"], answer["query_acts"], strict=True)},
        layer=layer, head=head, destination=destination, _answer=answer,
        cards={"query": _cards(answer, "query"), "key": _cards(answer, "key")} if "cards" in answer else {},
    )


def feature_ov(
    model: Any, tokens: Any, layer: int, head: int, destination: int, dictionary: Any, output: Any = None,
    unembed: bool = False, k: int = 20, *, cards: bool = False,
) -> FeatureOV:
    """What head (`layer`, `head`) moves to `destination`, split over `dictionary`'s features at the sources.

    Each source position s contributes ``A[d, s] · v_s`` (the pattern times its value); its value splits over the
    active features of `dictionary` there (reconstructing the head's input), the error and the bias, exactly as the
    score does in `feature_qk`. The parts are summed over the sources per feature and read out:

    - `output`: an output dictionary's features, each part's contribution to their pre-activations (without
      ``b_enc``): a dictionary of this layer's ``hook_z`` (the head's own encoder slice), or of the residual stream
      the head writes to (``hook_attn_out``, ``hook_resid_mid`` / ``hook_resid_post`` of this block, a later block's
      residual stream; through ``W_O`` as the model writes it);
    - ``unembed=True``: the logits (through ``W_O W_U``, the final norm frozen at the destination: the head's term of
      `circuitwidgets.analysis.logit_attribution`).

    Returns a `FeatureOV`: the top `k` outputs with their totals and terms (features, error, bias: they sum to the
    head's read-out), the top `k` (source feature, output) pairs, every source feature's weight and size.
    """
    view = as_view(model)
    view.layer_index(layer)
    view.check_head(head)
    if not isinstance(unembed, bool):
        raise TypeError(f"unembed must be a bool; got {unembed!r}")
    if (output is None) == (not unembed):
        raise ValueError("give one read-out: output= (a dictionary the head's output reaches: this layer's z, "
                         "attention output, residual stream after it, or a later residual stream) or unembed=True")
    ids = _sequence(view, tokens)
    destination = _position(destination, ids.shape[1], "destination")
    source = _head_input(view, as_dictionary(dictionary), layer, "dictionary")
    extra: dict[str, Any] = {"source": source.spec(view.device), "sites": {"source": source.site}}
    if unembed:
        extra.update(read="unembed", output=None)
    else:
        out = as_dictionary(output, "output")
        extra.update(read=_output_read(view, out, layer), output=out.spec(view.device))
    answer = view.feature_terms(ids, _request(view, "ov", layer, head, destination, k, cards, **extra))
    outputs = [int(o) for o in answer["outputs"]]
    order = torch.argsort(answer["pair_values"].abs(), descending=True, stable=True)
    sizes = torch.argsort(answer["norm"], descending=True, stable=True)
    return FeatureOV(
        outputs=outputs,
        totals={o: float(v) for o, v in zip(outputs, answer["total"], strict=True)},
        scores={o: float(v) for o, v in zip(outputs, answer["score"], strict=True)},
        terms={name: {o: float(answer["terms"][i, j]) for i, o in enumerate(outputs)} for j, name in enumerate(OV_TERMS)},
        pairs=[(int(answer["pair_feature"][i]), int(answer["pair_output"][i]), float(answer["pair_values"][i])) for i in order],
        source_features={int(answer["ids"][i]): (float(answer["weight"][i]), float(answer["norm"][i])) for i in sizes},
        pattern=answer["pattern"].float(), read=extra["read"], layer=layer, head=head, destination=destination,
        cards={"source": _cards(answer, "source")} if "cards" in answer else {},
    )


def feature_heads(model: Any, dictionary: Any, tokens: Any = None, position: int | None = None) -> FeatureHeads:
    """Which heads write each feature of an attention-output dictionary (one of a layer's ``hook_z``, every head's
    z flattened, as SAELens' ``reshape_activations="hook_z"``).

    Without `tokens`: the norm of each feature's encoder slice on each head (from the dictionary alone). With
    `tokens` and `position`: each head's part of each feature's pre-activation there, ``z_h · W_enc[h]``, from one run.
    """
    view = as_view(model)
    dictionary = as_dictionary(dictionary)
    word, layer = dictionary.site
    if word != "z":
        raise ValueError(
            f"feature_heads takes a dictionary of a layer's z (every head's, flattened); this one reads {dictionary.reads}"
        )
    view.layer_index(layer)
    if dictionary.d_in != view.n_heads * view.d_head:
        width = view.n_heads * view.d_head
        raise ValueError(f"the dictionary reads {dictionary.d_in} numbers, but layer {layer}'s z holds {width}")
    if tokens is None:
        if position is not None:
            raise ValueError("position needs tokens")
        from ..dictionary import encoder_norms_by_head

        return FeatureHeads(encoder_norms_by_head(dictionary, view.n_heads), None, layer, None)
    ids = _sequence(view, tokens)
    if position is None:
        raise ValueError("with tokens, give the position whose features to split")
    position = _position(position, ids.shape[1], "position")
    request = {"kind": "heads", "layer": layer, "destination": position, "k": 1, "cards": False,
               "heads": dictionary.spec(view.device), "sites": {"heads": dictionary.site}}
    answer = view.feature_terms(ids, request)
    return FeatureHeads(answer["split"].float(), answer["acts"].float(), layer, position)

