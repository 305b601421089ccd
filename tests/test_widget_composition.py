"""CompositionDiagram without a browser: traits, payload vs analysis, baseline, pairs, errors, export."""

from __future__ import annotations

import base64
import json
import re

import pytest
import torch
import traitlets
from planted import words

from circuitwidgets import transport
from circuitwidgets.analysis import attention_patterns, composition_baseline, composition_scores, virtual_head_pattern
from circuitwidgets.widgets import _cache
from circuitwidgets.widgets.composition import CompositionDiagram

PROMPT = words([5, 9, 3, 7, 11, 5, 9, 3, 7, 11])


def decoded(w: CompositionDiagram) -> torch.Tensor:
    return transport.decode(w.scores)


def test_payload_decodes_to_the_analysis_scores(planted_words):
    model, heads = planted_words
    w = CompositionDiagram(model, kind="K")
    assert w.error == "" and w.view == "graph"  # 8 heads: the graph
    assert w.scores["shape"] == [3, 2, 4, 2, 4] and w.scores["computed"] == ["K"]
    got = decoded(w)
    assert torch.allclose(got[1], composition_scores(model, "K"), atol=1e-6, equal_nan=True)
    assert torch.isnan(got[0]).all() and torch.isnan(got[2]).all()  # Q and V not computed yet
    # the planted_words pair is the strongest K-composition, and undefined pairs stay NaN
    k = got[1]
    (l1, h1), (l2, h2) = heads["previous_token"], heads["induction"]
    assert float(k[l1, h1, l2, h2]) == float(k[torch.isfinite(k)].max())
    assert torch.isnan(k[1]).all() and torch.isnan(k[0, :, 0]).all()
    assert w.baseline_value == pytest.approx(composition_baseline(model, "K"))


def test_switching_kind_computes_once_and_keeps_the_others(planted_words):
    model = planted_words[0]
    _cache.clear(model)
    w = CompositionDiagram(model, kind="K")
    w.kind = "V"
    assert w.scores["computed"] == ["K", "V"]
    assert torch.allclose(decoded(w)[2], composition_scores(model, "V"), atol=1e-6, equal_nan=True)
    count = w.refresh_count
    w.kind = "K"  # already in the browser: no kernel work
    assert w.refresh_count == count
    assert _cache.is_cached(model, ("composition", "V"))


def test_default_threshold_is_between_baseline_and_the_strongest_pair(planted_words):
    model = planted_words[0]
    w = CompositionDiagram(model)
    k = composition_scores(model, "K")
    top = float(k[torch.isfinite(k)].max())
    assert w.baseline_value < w.threshold < top
    shown = (k >= w.threshold) & torch.isfinite(k)
    assert int(shown.sum()) == 1  # only the planted_words pair passes


def test_baseline_toggle_shifts_the_threshold_so_the_same_edges_stay(planted_words):
    w = CompositionDiagram(planted_words[0], threshold=0.15)
    w.baseline = True
    assert w.threshold == pytest.approx(0.15 - w.baseline_value)
    w.baseline = False
    assert w.threshold == pytest.approx(0.15)
    corrected = CompositionDiagram(planted_words[0], baseline=True)
    raw = CompositionDiagram(planted_words[0])
    assert corrected.threshold == pytest.approx(raw.threshold - raw.baseline_value, abs=1e-3)
    want = composition_scores(planted_words[0], "K", baseline=True)
    assert torch.allclose(corrected.scores_of("K", baseline=True), want, atol=1e-6, equal_nan=True)


def test_big_models_default_to_the_matrix_view(planted_words):
    assert CompositionDiagram(planted_words[0], view="matrix").view == "matrix"
    import circuitwidgets.widgets.composition as module

    old = module.GRAPH_MAX_HEADS
    module.GRAPH_MAX_HEADS = 4
    try:
        assert CompositionDiagram(planted_words[0]).view == "matrix"
    finally:
        module.GRAPH_MAX_HEADS = old


def test_selected_pair_draws_both_patterns_and_the_virtual_head(planted_words):
    model, heads = planted_words
    first, second = heads["previous_token"], heads["induction"]
    w = CompositionDiagram(model, prompt=PROMPT)
    assert "data" not in w.pair_patterns and w.pair_patterns["reason"] == "no pair"
    w.selected_pair = [list(first), list(second)]
    assert w.pair_patterns["pair"] == [list(first), list(second)] and w.pair_patterns["layout"] == "tril"
    seq = len(w.tokens)
    assert w.pair_patterns["shape"] == [3, seq, seq] and w.str_tokens[1] == "t5"
    pats = attention_patterns(model, PROMPT)
    want = torch.stack([pats[first[0], first[1]], pats[second[0], second[1]], virtual_head_pattern(model, PROMPT, first, second)])
    got = transport.decode(w.pair_patterns)
    assert (got - want).abs().max() <= transport.quantisation_step(w.pair_patterns) + 1e-6
    assert torch.allclose(w.pair_patterns_exact(), want, atol=1e-5)
    # previous-token -> induction as one virtual head: a repeated token attends to its own earlier copy
    assert int(want[2, 7].argmax()) == 2
    w.selected_pair = []
    assert "data" not in w.pair_patterns


def test_without_tokens_the_pair_panel_says_so(planted_words):
    w = CompositionDiagram(planted_words[0], selected_pair=((0, 2), (1, 1)))
    assert w.selected_pair == [[0, 2], [1, 1]]
    assert w.pair_patterns["reason"] == "no tokens"
    with pytest.raises(ValueError, match="no pair patterns"):
        w.pair_patterns_exact()
    w.tokens = [0, 5, 9, 5, 9]
    assert w.pair_patterns["shape"] == [3, 5, 5]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("layer", 2, "out of range"),
        ("head", 9, "out of range"),
        ("threshold", 1.5, "in \\[-1, 1\\]"),
        ("threshold", float("nan"), "finite"),
        ("selected_pair", [[1, 0], [0, 1]], "earlier layer"),
        ("selected_pair", [[0, 0], [1, 7]], "out of range"),
        ("selected_pair", [[0, 0]], "selected_pair must be"),
        ("selected_pair", [[0, 0.5], [1, 1]], "selected_pair must be"),
        ("kind", "X", "'X'"),
    ],
)
def test_bad_values_from_python_raise_and_show_in_widget(planted_words, name, value, message):
    w = CompositionDiagram(planted_words[0])
    with pytest.raises(traitlets.TraitError, match=message):
        setattr(w, name, value)
    if name != "kind":  # Enum errors come from traitlets itself
        assert re.search(message, w.error)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"kind": "q"}, ValueError, "kind must be one of"),
        ({"baseline": 1}, TypeError, "baseline must be a bool"),
        ({"prompt": "t1", "tokens": [0, 1]}, ValueError, "either prompt or tokens"),
        ({"prompt": ""}, ValueError, "empty"),
        ({"tokens": [[0, 1], [0, 2]]}, ValueError, "one sequence"),
        ({"view": "tree"}, traitlets.TraitError, "tree"),
    ],
)
def test_bad_arguments(planted_words, kwargs, error, message):
    with pytest.raises(error, match=message):
        CompositionDiagram(planted_words[0], **kwargs)


def test_traits_are_synced_and_documented():
    for name in (
        "kind", "threshold", "baseline", "baseline_value", "view", "layer", "head", "selected_pair",
        "scores", "tokens", "str_tokens", "pair_patterns", "info", "term_tokens", "term_str_tokens", "term_criterion",
        "term", "term_values", "term_eigenvalues",
    ):
        trait = CompositionDiagram.class_traits()[name]
        assert trait.metadata.get("sync") is True, name
        assert trait.help, name


def test_save_html_holds_every_kind_and_no_network(planted_words, tmp_path):
    model = planted_words[0]
    w = CompositionDiagram(model, prompt=PROMPT, selected_pair=[[0, 2], [1, 1]])
    page = w.save_html(tmp_path / "comp.html").read_text()
    assert not re.search(r"""(src|href)=["']https?://""", page)
    state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
    saved = state["widgets"][0]
    assert saved["scores"]["computed"] == ["Q", "K", "V"]
    values = transport.decode(base64.b64decode(saved["scores"]["data"]["$bytes"]), saved["scores"])
    for i, kind in enumerate("QKV"):
        assert torch.allclose(values[i], composition_scores(model, kind), atol=1e-6, equal_nan=True)
    assert saved["pair_patterns"]["pair"] == [[0, 2], [1, 1]] and saved["pair_patterns"]["data"]["$bytes"]


# ----- the term an edge builds ---------------------------------------------------------------------


def test_selected_pair_sends_its_term_of_the_current_kind(planted_words):
    from circuitwidgets.analysis import composition_term, composition_term_positivity

    model, heads = planted_words
    first, second = heads["previous_token"], heads["induction"]
    tokens = [3, 1, 4, 15, 9, 2, 6]
    w = CompositionDiagram(model, term_tokens=tokens)
    assert w.term == {"revision": w.term["revision"], "pair": [], "kind": "K", "reason": "no pair"}
    w.selected_pair = [list(first), list(second)]
    assert w.term_tokens == tokens and w.term_str_tokens == [f"t{i}" for i in tokens]
    want = composition_term(model, "K", first, second, scaled=True).block(tokens, tokens)
    assert torch.allclose(w.current_term(), want, atol=1e-5)
    got = transport.decode(w.term)
    assert (got - want).abs().max() <= transport.quantisation_step(w.term) / 2 + 1e-5
    assert w.term["kind"] == "K" and w.term["pair"] == [list(first), list(second)] and w.term["scaled"] is True
    assert w.term["positivity"] == pytest.approx(composition_term_positivity(model, "K", first, second))
    assert w.term["positivity"] >= 0.99
    eigs = transport.decode(w.term_eigenvalues)
    assert eigs.shape == (32, 2) and w.term_eigenvalues["revision"] == w.term["revision"] == w.term_values["revision"]
    # another kind: the same pair's term of that kind, even when its scores are already computed
    w.compute()
    w.kind = "Q"
    assert w.term["kind"] == "Q"
    q = composition_term(model, "Q", first, second, scaled=True).block(tokens, tokens)
    assert torch.allclose(w.current_term(), q, atol=1e-5)
    w.kind = "V"
    assert w.term["scaled"] is False and w.term["positivity"] is None  # this pair builds no V term: all zero
    # another pair
    w.selected_pair = [[0, 1], [1, 3]]
    v = composition_term(model, "V", (0, 1), (1, 3)).block(tokens, tokens)
    assert torch.allclose(w.current_term(), v, atol=1e-7)
    assert w.term["positivity"] == pytest.approx(composition_term_positivity(model, "V", (0, 1), (1, 3)))


def test_term_tokens_default_like_qk_circuit_and_bad_ones_show_in_the_widget(planted_words):
    from circuitwidgets.widgets.qk import QKCircuit

    model = planted_words[0]
    w = CompositionDiagram(model, selected_pair=[[0, 2], [1, 1]])
    qk = QKCircuit(model)
    assert w.term_tokens == qk.tokens and w.term_criterion == qk.token_criterion
    assert w.term["shape"] == [len(qk.tokens)] * 2
    with pytest.raises(traitlets.TraitError, match="out of range"):
        w.term_tokens = [1, 99]
    assert "out of range" in w.error and w.term["shape"] == [64, 64]  # the last good picture stays
    w.term_tokens = [2, 1, 2]  # repeats dropped, like QKCircuit's tokens
    assert w.error == "" and w.term_tokens == [2, 1] and w.term["shape"] == [2, 2]
    assert w.term_criterion == "tokens chosen by the caller"
    assert CompositionDiagram(model, term_tokens=["t1", "t2"]).term_tokens == [1, 2]  # token strings too
    with pytest.raises(ValueError, match="out of range"):
        CompositionDiagram(model, term_tokens=[70])
    with pytest.raises(ValueError, match="no term drawn"):
        CompositionDiagram(model).current_term()


def test_term_follows_an_edit_of_the_weights():
    from planted import planted_model

    from circuitwidgets.analysis import composition_term

    model, heads = planted_model()  # its own copy: the weights change below
    first, second = heads["previous_token"], heads["induction"]
    w = CompositionDiagram(model, selected_pair=[list(first), list(second)], term_tokens=[1, 2, 3])
    before = w.current_term().clone()
    assert before.diagonal().min() > 10
    for p in model.parameters():  # halve every weight in place (through .data, no version bump)
        p.data.mul_(0.5)
    w.refresh()
    after = w.current_term()
    assert torch.allclose(after, composition_term(model, "K", first, second, scaled=True).block([1, 2, 3], [1, 2, 3]), atol=1e-5)
    assert torch.allclose(after, before / 2**6, rtol=1e-4)  # six weight matrices in the product: W_E twice, W_Q, W_K, W_V, W_O


def test_scores_caption_says_what_rotary_and_norm_models_leave_out_or_fold_in(planted_words):
    from factories import small_bridge

    rotary = "Rotary: the rotation of queries and keys by position is left out"
    llama_like = CompositionDiagram(small_bridge(normalization_type="RMS", positional_embedding_type="rotary"))
    mv = llama_like.mv
    assert mv.has_rotary and mv.norm_note.startswith("RMSNorm weights folded into W_Q, W_K, W_V and W_U")
    captions = llama_like.scores["captions"]
    assert set(captions) == {"Q", "K", "V"}
    for kind in ("Q", "K"):  # the scores are of the unrotated W_Q and W_K
        assert captions[kind].startswith(rotary) and captions[kind].endswith(mv.norm_note)
        assert f"so {kind}-composition scores are of the unrotated W_Q and W_K (V-composition is unaffected)" in captions[kind]
    assert captions["V"] == mv.norm_note  # the rotation never touches values
    # the term of a selected edge says the same
    llama_like.selected_pair = [[0, 0], [1, 1]]
    assert llama_like.term["caption"].startswith(rotary) and llama_like.term["caption"].endswith(mv.norm_note)
    # rotary alone: no norm note; LayerNorm alone: the norm note for every kind, no rotary note
    bare_rotary = CompositionDiagram(small_bridge(positional_embedding_type="rotary")).scores["captions"]
    assert bare_rotary["V"] == ""
    assert all(bare_rotary[k].startswith(rotary) and bare_rotary[k].endswith("(V-composition is unaffected).") for k in "QK")
    layernorm = CompositionDiagram(small_bridge(normalization_type="LN"))
    assert not layernorm.mv.has_rotary
    note = layernorm.mv.norm_note
    assert note.startswith("LayerNorm weights folded into W_Q, W_K, W_V and W_U (as fold_ln)") and "per-position scale" in note
    assert layernorm.scores["captions"] == {"Q": note, "K": note, "V": note}
    # neither (the planted model): nothing to say
    assert CompositionDiagram(planted_words[0]).scores["captions"] == {"Q": "", "K": "", "V": ""}
