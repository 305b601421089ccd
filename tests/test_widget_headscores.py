"""HeadScores without a browser: traits, payload vs analysis, lazy kinds, selection, errors, export."""

from __future__ import annotations

import base64
import json
import math
import re

import pytest
import torch
import traitlets
from planted import words

from circuitwidgets import transport
from circuitwidgets.analysis import copying_scores, head_scores
from circuitwidgets.widgets import _cache
from circuitwidgets.widgets.headscores import SCORE_KINDS, HeadScores


def decoded(w: HeadScores) -> torch.Tensor:
    return transport.decode(w.scores)


def test_payload_decodes_to_the_analysis_scores(planted_words):
    model, heads = planted_words
    w = HeadScores(model)
    assert w.error == ""
    assert w.kinds == list(SCORE_KINDS) and w.kind == "induction"
    assert w.scores["shape"] == [6, 2, 4] and w.scores["dtype"] == "float32"
    assert w.computed == list(SCORE_KINDS)  # a small model: every kind up front
    got = decoded(w)
    for i, kind in enumerate(SCORE_KINDS):
        want = copying_scores(model) if kind == "ov_copying" else head_scores(model, kind)
        assert torch.allclose(got[i], want, atol=1e-6, equal_nan=True), kind  # NaN: a zero full OV circuit
    # the planted_words heads stand out where they should
    layer, head = heads["previous_token"]
    assert got[SCORE_KINDS.index("previous_token")].flatten().argmax() == layer * 4 + head
    assert got[SCORE_KINDS.index("induction")].flatten().argmax() == heads["induction"][0] * 4 + heads["induction"][1]
    # each kind on its own scale: [-1, 1] for copying scores (which can be negative), [0, 1] for the shares
    scales = dict(zip(w.scores["kinds"], w.scores["scales"], strict=True))
    assert scales["ov_copying"] == ["diverging", [-1.0, 1.0]]
    assert all(scales[k] == ["sequential", [0.0, 1.0]] for k in w.scores["kinds"] if k != "ov_copying")


def test_detector_kinds_alone_use_a_zero_to_one_scale(planted_words):
    w = HeadScores(planted_words[0], kinds=["previous_token", "induction"])
    assert w.scores["scales"] == [["sequential", [0.0, 1.0]]] * 2
    assert w.scores["kinds"] == ["previous_token", "induction"]


def test_lazy_mode_computes_only_the_shown_kind_until_another_is_selected(planted_words):
    model = planted_words[0]
    w = HeadScores(model, kinds=["previous_token", "induction", "duplicate_token"], kind="previous_token", eager=False)
    assert w.computed == ["previous_token"]
    got = decoded(w)
    assert torch.isnan(got[1]).all() and torch.isnan(got[2]).all()
    assert not torch.isnan(got[0]).any()
    refreshes = w.refresh_count
    w.kind = "induction"  # as the browser's selector does
    assert w.computed == ["previous_token", "induction"] and w.refresh_count == refreshes + 1
    assert torch.allclose(decoded(w)[1], head_scores(model, "induction"), atol=1e-6)
    assert w.compute().computed == ["previous_token", "induction", "duplicate_token"]


def test_scores_are_cached_per_model(planted_words, monkeypatch):
    model = planted_words[0]
    HeadScores(model, kinds=["prefix_matching"])
    assert _cache.is_cached(model, ("head_scores", "prefix_matching", None))
    calls = []
    import circuitwidgets.analysis as analysis

    real = analysis.head_scores
    monkeypatch.setattr(analysis, "head_scores", lambda *a, **k: calls.append(a) or real(*a, **k))
    w = HeadScores(model, kinds=["prefix_matching"])
    assert calls == [] and w.computed == ["prefix_matching"]


def test_selection_traits_validate_and_show_errors(planted_words):
    w = HeadScores(planted_words[0])
    w.layer, w.head = 1, 3
    assert w.selected_head == (1, 3)
    for name, value in (("layer", 2), ("head", 4), ("head", -1)):
        with pytest.raises(traitlets.TraitError, match="out of range"):
            setattr(w, name, value)
        assert "out of range" in w.error
    w.head = 2  # a good value clears the message
    assert w.error == ""
    with pytest.raises(traitlets.TraitError, match="not among kinds"):
        w.kind = "previous"
    assert "not among kinds" in w.error


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"kinds": []}, ValueError, "at least one"),
        ({"kinds": ["induction", "bogus"]}, ValueError, "bogus"),
        ({"kinds": ["induction", "induction"]}, ValueError, "repeat"),
        ({"kinds": 3}, TypeError, "list of kind names"),
        ({"kind": "ov_copying", "kinds": ["induction"]}, ValueError, "not among kinds"),
        ({"eager": "yes"}, TypeError, "eager"),
    ],
)
def test_bad_arguments(planted_words, kwargs, error, message):
    with pytest.raises(error, match=message):
        HeadScores(planted_words[0], **kwargs)


def test_scores_on_given_tokens_and_a_kind_that_cannot_be_scored(planted_words):
    model = planted_words[0]
    prompt = words([5, 9, 3, 7, 5, 9, 3, 7])
    w = HeadScores(model, kinds=["previous_token", "induction"], tokens=prompt)
    ids = model.to_tokens(prompt)
    assert torch.allclose(w.scores_of("induction"), head_scores(model, "induction", ids), atol=1e-6)
    assert "given 9 tokens" in w.info["ran_on"]
    # no repeated token: induction has no target; the widget says so and still draws the rest
    w2 = HeadScores(model, kinds=["previous_token", "induction"], kind="previous_token", tokens=words([5, 9, 3, 7]))
    assert w2.error == "" and "induction" in w2.scores["failed"]
    w2.kind = "induction"
    assert "no query" in w2.error and w2.computed == ["previous_token"]
    w2.kind = "previous_token"
    assert w2.error == ""


def test_traits_are_synced_and_documented():
    for name in ("kinds", "kind", "layer", "head", "scores", "info", "error", "busy"):
        trait = HeadScores.class_traits()[name]
        assert trait.metadata.get("sync") is True, name
        assert trait.help, name
    assert "Example" in HeadScores.__doc__


def test_save_html_is_self_contained(planted_words, tmp_path):
    w = HeadScores(planted_words[0], kinds=["previous_token", "ov_copying"])
    page = w.save_html(tmp_path / "scores.html").read_text()
    assert not re.search(r"""(src|href)=["']https?://""", page)
    state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
    saved = state["widgets"][0]
    assert saved["_cw_view"] == "headscores"
    values = transport.decode(base64.b64decode(saved["scores"]["data"]["$bytes"]), saved["scores"])
    assert torch.allclose(values, decoded(w), equal_nan=True)
    assert not math.isnan(float(values[1, 0, 0]))


def test_the_widget_says_how_long_the_repeated_blocks_are_when_n_ctx_shortens_them(demo):
    w = HeadScores(demo, kinds=["induction", "prefix_matching"])
    text = w.info["ran_on"]
    from circuitwidgets.analysis import repeated_random_tokens

    twice = (repeated_random_tokens(demo).shape[1] - 1) // 2
    four_times = (repeated_random_tokens(demo, repeats=4).shape[1] - 1) // 4
    assert f"blocks r of {twice} tokens ({four_times} for prefix matching" in text
    assert four_times < 25 and "shorter than the default 25 to fit n_ctx=64" in text
