"""Issue 18, the Dashboard's ablation: its children that run the model show the ablated model (and say
so), the weight views show the model's own weights (and say the ablation leaves them unchanged).

On the demo model: previous-token heads 0.1 and 0.3 (layer 0) feed the induction heads of layer 1
through K-composition, so ablating them changes the layer-1 patterns; ablating layer-1 heads changes
the logits but not the layer-1 patterns (a head's pattern is computed before its output is replaced).
"""

from __future__ import annotations

import base64
import json
import re

import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.widgets.dashboard import AblationToggle

PROMPT = "qwertyuiop" * 2  # a repeated block: the induction heads attend to the token after the first copy
PREV = [(0, 1), (0, 3)]  # the previous-token heads
NOTE_FREE = ("", "", "", "", "", "")


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


@pytest.fixture(scope="module")
def reference(model):
    # 63 positions: as long as the head scores' default tokens (51, and 61 for prefix matching)
    return cw.analysis.repeated_random_tokens(model, seq_len=31, batch=16, seed=3)


def notes(d) -> tuple[str, ...]:
    return tuple(w.model_note for w in d.widgets)


def patterns_of(model_or_held, layer: int) -> torch.Tensor:
    return cw.analysis.attention_patterns(model_or_held, PROMPT, layers=[layer])[0]


def test_children_that_run_the_model_show_the_ablated_model(model):
    d = cw.Dashboard(model, prompt=PROMPT, ablated=PREV, layer=1)
    held = cw.analysis.ablated(model, PREV)
    assert isinstance(d.ablated_model, type(held)) and d.ablated_model.heads == PREV
    assert d.attention.model is d.attribution.model is d.head_scores.model is d.ablated_model
    # the layer-1 patterns: the ablated model's, not the model's
    shown = d.attention.current_patterns()
    assert torch.equal(shown, patterns_of(held, 1))
    assert (shown - patterns_of(model, 1)).abs().max() > 0.3
    ids = model.to_tokens(PROMPT)[0].tolist()
    want = cw.analysis.logit_attribution_by_position(held, [ids])
    torch.testing.assert_close(d.attribution.current_attribution().heads, want.heads, equal_nan=True)
    assert not torch.allclose(want.heads, cw.analysis.logit_attribution_by_position(model, [ids]).heads, equal_nan=True)
    for kind in ("previous_token", "induction"):
        assert torch.equal(d.head_scores.scores_of(kind), cw.analysis.head_scores(held, kind)), kind
    assert d.head_scores.scores_of("induction")[1].max() < 0.1  # the induction heads lost their signal
    assert cw.analysis.head_scores(model, "induction")[1].min() > 0.3
    # the caption of each says what the picture is
    label = "L0H1, L0H3 zero-ablated"
    assert d.attention.model_note == d.attribution.model_note == label
    assert d.head_scores.model_note == f"{label} (OV copying reads the weights: unaffected)"
    assert all(w.error == "" for w in d.widgets)


def test_weight_views_show_the_model_and_say_the_ablation_leaves_them_unchanged(model):
    d = cw.Dashboard(model, prompt=PROMPT, ablated=[(1, 0), (1, 2)], layer=1)
    plain = cw.Dashboard(model, prompt=PROMPT, layer=1)
    for w in (d.composition, d.ov, d.qk):
        assert w.model is model, type(w).__name__
    assert torch.equal(d.ov.current_block(), plain.ov.current_block())
    assert torch.equal(d.qk.current_block(), plain.qk.current_block())
    torch.testing.assert_close(d.composition.scores_of("K"), plain.composition.scores_of("K"), rtol=0, atol=0, equal_nan=True)
    assert torch.equal(d.head_scores.scores_of("ov_copying"), cw.analysis.copying_scores(model))
    label = "L1H0, L1H2 zero-ablated"
    assert d.ov.model_note == d.qk.model_note == f"reads the weights: unaffected by the ablation ({label})"
    assert d.composition.model_note.startswith(f"composition scores read the weights: unaffected by the ablation ({label})")
    # layer-1 ablation: the layer-1 patterns are those of the model (computed before the outputs are replaced)
    assert torch.equal(d.attention.current_patterns(), plain.attention.current_patterns())
    assert notes(plain) == NOTE_FREE


def test_the_trait_toggles_the_ablation_and_the_notes_follow(model):
    d = cw.Dashboard(model, prompt=PROMPT, layer=1)
    assert d.ablated == [] and d.ablation_method == "zero" and d.ablated_model is None
    assert d.ablation not in d.children  # no controls unless ablated= is passed
    before = d.attention.current_patterns().clone()
    d.ablated = [(0, 3), (0, 1), (0, 3)]  # sorted, each once
    assert d.ablated == [[0, 1], [0, 3]] and d.ablation.status["label"] == "L0H1, L0H3 zero-ablated"
    assert torch.equal(d.attention.current_patterns(), patterns_of(cw.analysis.ablated(model, PREV), 1))
    assert d.attention.model_note == "L0H1, L0H3 zero-ablated" and "unaffected" in d.ov.model_note
    drawn = transport.decode(d.attention.patterns)
    assert (drawn - d.attention.current_patterns()).abs().max() <= transport.quantisation_step(d.attention.patterns) + 1e-6
    d.ablated = []  # back to the model: its pictures, no notes
    assert d.ablated_model is None and d.attention.model is model
    assert torch.equal(d.attention.current_patterns(), before)
    assert notes(d) == NOTE_FREE


def test_the_controls_follow_the_selected_head_and_take_the_browsers_toggle(model):
    d = cw.Dashboard(model, prompt=PROMPT, ablated=[])
    assert isinstance(d.ablation, AblationToggle) and d.children[0] is d.ablation
    assert d.ablation._cw_view == "ablationtoggle" and not d.ablation.head_controls
    d.head_scores.set_state({"layer": 0, "head": 3})  # a click on a head anywhere
    assert (d.ablation.layer, d.ablation.head) == (0, 3)
    assert any(link.source == (d.attention, "head") and link.target == (d.ablation, "head") for link in d.js_links)
    d.ablation.set_state({"ablated": [[0, 3]]})  # the "ablate L0H3" button
    assert d.ablated == [[0, 3]] and d.attention.model_note == "L0H3 zero-ablated"
    assert d.attention.model is d.ablated_model and d.ablated_model.heads == [(0, 3)]
    d.ablation.set_state({"ablated": []})  # "clear all"
    assert d.ablated_model is None and notes(d) == NOTE_FREE and d.attention.model is model


def test_bad_heads_raise_and_show_in_the_dashboard(model):
    with pytest.raises(ValueError, match="layer 5 is not an attention layer"):
        cw.Dashboard(model, prompt=PROMPT, ablated=[(5, 0)])
    with pytest.raises(ValueError, match="head must be in"):
        cw.Dashboard(model, prompt=PROMPT, ablated=[(1, 4)])
    d = cw.Dashboard(model, prompt=PROMPT, ablated=[(1, 0)], layer=1)
    picture = d.attribution.attribution
    with pytest.raises(ValueError, match=r"ablated=.*head must be in \[0, 4\)"):
        d.ablated = [(1, 0), (1, 9)]
    assert "head must be in" in d.ablation.error
    assert d.ablated == [[1, 0]] and d.attribution.attribution is picture  # nothing changed
    with pytest.raises(ValueError, match="ablated must be a list"):
        d.ablated = "L1H0"
    d.ablation.set_state({"ablated": [[7, 0]]})  # from the browser: shown, undone, never raised
    assert "layer 7" in d.ablation.error and d.ablated == [[1, 0]]
    d.ablated = [(1, 1)]  # a good value clears the message
    assert d.ablation.error == "" and d.attribution.model_note == "L1H1 zero-ablated"
    # without the controls, the attention pattern shows the message
    plain = cw.Dashboard(model, prompt=PROMPT)
    with pytest.raises(ValueError, match="layer 2"):
        plain.ablated = [(2, 0)]
    assert "layer 2" in plain.attention.error
    plain.ablated = [(0, 0)]
    assert plain.attention.error == ""


def test_mean_and_resample_need_reference_tokens(model, reference):
    with pytest.raises(ValueError, match="mean ablation needs ablation_reference="):
        cw.Dashboard(model, prompt=PROMPT, ablated=PREV, ablation_method="mean")
    d = cw.Dashboard(model, prompt=PROMPT, ablated=PREV, layer=1)
    with pytest.raises(ValueError, match="resample ablation needs ablation_reference="):
        d.ablation_method = "resample"
    assert "ablation_reference" in d.ablation.error and d.ablation_method == "zero"
    d.ablation.set_state({"ablation_method": "mean"})  # the method menu, still without reference tokens
    assert "mean ablation needs" in d.ablation.error and d.ablation_method == "zero"
    with pytest.raises(ValueError, match="ablation_reference"):
        d.ablation_reference = reference[:1].tolist() + [[0]]  # ragged: not token ids [batch, seq]
    d.ablation_reference = reference
    d.ablation_method = "mean"
    assert d.ablation.error == "" and d.ablation.status["reference"] == [16, 63]
    held = cw.analysis.ablated(model, PREV, "mean", reference)
    assert d.attention.model_note == "L0H1, L0H3 mean-ablated"
    assert torch.equal(d.attention.current_patterns(), patterns_of(held, 1))
    assert not torch.equal(patterns_of(held, 1), patterns_of(cw.analysis.ablated(model, PREV), 1))  # not zero's
    assert torch.equal(d.head_scores.scores_of("induction"), cw.analysis.head_scores(held, "induction"))
    with pytest.raises(ValueError, match="mean ablation needs ablation_reference="):
        d.ablation_reference = None  # mean still chosen
    d.ablation.set_state({"ablation_method": "resample"})
    resampled = cw.analysis.ablated(model, PREV, "resample", reference)
    assert torch.equal(d.attention.current_patterns(), patterns_of(resampled, 1))
    assert all(w.error == "" for w in d.widgets)


def test_a_reference_shorter_than_the_prompt_is_refused_or_said_in_the_children(model, reference):
    short = cw.analysis.repeated_random_tokens(model, seq_len=5, batch=4, seed=0)  # 11 positions, the prompt has 21
    with pytest.raises(ValueError, match="reference prompts have 11 positions, fewer than the 21 run"):
        cw.Dashboard(model, prompt=PROMPT, layer=1, ablated=PREV, ablation_method="mean", ablation_reference=short)
    d = cw.Dashboard(model, prompt=PROMPT, layer=1, ablated=PREV, ablation_method="mean", ablation_reference=reference)
    d.ablation_reference = short  # later: each child that runs the model says why it cannot
    assert "fewer than the 21 run" in d.attention.error and "fewer than the 21 run" in d.attribution.error
    assert d.ablation.error == "" and d.ov.error == ""
    d.ablation_reference = reference
    assert d.attention.error == d.attribution.error == ""


def test_a_weight_edit_shows_in_the_ablated_children():
    edited = cw.demo_model()  # its layer-1 queries are scaled in place below
    d = cw.Dashboard(edited, prompt=PROMPT, ablated=[(0, 0)], layer=1)
    before = d.attention.current_patterns().clone()
    with torch.no_grad():
        for name, p in edited.named_parameters():
            if name.startswith("layers.1.") and ".q." in name:
                p.mul_(1.5)
    d.head_scores.set_state({"head": 2})  # any user action redraws what the edit changed
    want = patterns_of(cw.analysis.ablated(edited, [(0, 0)]), 1)
    assert torch.equal(d.attention.current_patterns(), want)
    assert (want - before).abs().max() > 0.05
    assert d.attention.model_note == "L0H0 zero-ablated"


def test_export_holds_the_ablated_pictures_and_the_notes(model, tmp_path):
    d = cw.Dashboard(model, prompt=PROMPT, ablated=PREV, layer=1)
    page = d.save_html(tmp_path / "ablated.html").read_text()
    state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
    by_kind = {w["_cw_view"]: w for w in state["widgets"]}
    assert list(by_kind)[0] == "ablationtoggle" and by_kind["ablationtoggle"]["ablated"] == [[0, 1], [0, 3]]
    assert by_kind["attention"]["model_note"] == "L0H1, L0H3 zero-ablated"
    assert by_kind["ov"]["model_note"].startswith("reads the weights: unaffected by the ablation")
    saved = dict(by_kind["attention"]["patterns"])
    saved["data"] = base64.b64decode(saved["data"]["$bytes"])
    drawn = transport.decode(saved)
    step = transport.quantisation_step(saved) + 1e-6
    assert (drawn - patterns_of(cw.analysis.ablated(model, PREV), 1)).abs().max() <= step
    assert (drawn - patterns_of(model, 1)).abs().max() > 0.3
    hub = [w["_cw_view"] for w in state["widgets"]].index("attention")
    assert [[hub, "head"], [0, "head"]] in state["links"]


def test_a_widget_built_on_an_ablated_model_says_so_and_use_model_switches(model):
    held = cw.analysis.ablated(model, PREV)
    w = cw.AttentionPattern(held, prompt=PROMPT, layer=1)
    assert w.model_note == "L0H1, L0H3 zero-ablated" and cw.AttentionPattern(model, prompt="ab").model_note == ""
    assert torch.equal(w.current_patterns(), patterns_of(held, 1))
    count = w.refresh_count
    assert w.use_model(model) is w and w.model_note == "" and w.refresh_count == count + 1
    assert torch.equal(w.current_patterns(), patterns_of(model, 1))
    w.use_model(model, note="the model itself")  # the same model: only the note changes
    assert w.refresh_count == count + 1 and w.model_note == "the model itself"
    with pytest.raises(TypeError):
        w.use_model(object())
    assert w.model is model
    with pytest.raises(traitlets.TraitError, match="computed by the widget"):
        w.model_note = "mine"
    with pytest.raises(TypeError, match="'model_note', which the widget computes"):
        cw.AttentionPattern(model, prompt="ab", model_note="x")


def test_marimo_shows_the_controls_above_the_children(model):
    d = cw.Dashboard(model, prompt=PROMPT, ablated=[(1, 0)])
    html = d._display_().text  # what marimo displays for a cell ending in `d`
    assert html.count("<marimo-anywidget") == len(d.widgets) + 1 == 7
    places = [html.index(f"data-model-id='&quot;{w.model_id}&quot;'") for w in (d.ablation, *d.widgets)]
    assert places == sorted(places)


def test_a_weight_view_built_on_an_ablated_model_says_it_is_unaffected():
    model = cw.demo_model()
    held = cw.analysis.ablated(model, [(1, 0)])
    unaffected = "reads the weights: unaffected by the ablation (L1H0 zero-ablated)"
    assert cw.OVCircuit(held, 1, 0, tokens=[2, 3, 4], accuracy=False).model_note == unaffected
    assert cw.QKCircuit(held, 1, 0, tokens=[2, 3, 4]).model_note == unaffected
    assert cw.SkipTrigrams(held, head=0, layer=1).model_note == unaffected
    assert cw.AttentionPattern(held, prompt="abcabc", layer=1).model_note == "L1H0 zero-ablated"
    assert cw.OVCircuit(model, 1, 0, tokens=[2, 3, 4], accuracy=False).model_note == ""
