"""Issue 31, the FeatureAttention widget in the kernel: a clicked cell's split, its payload, live binding, export.

The payload's bars are the analysis' split (their sum the model's score), bad cells are refused with the last
picture kept, a new dictionary (or one edited in place), new weights and hooks redraw, the page saved holds the
split; a backend that cannot split (a remote architecture the trace does not know) greys the controls with its
reason. The browser side is tests/browser/test_feature_attention_browser.py.
"""

from __future__ import annotations

import pytest
import torch
import traitlets
from test_feature_attention import PROMPT, random_dictionary

import circuitwidgets as cw
from circuitwidgets import transport

TEXT = "abcdefabcdef"


@pytest.fixture()
def model():
    return cw.demo_model()


@pytest.fixture(scope="module")
def sae():
    return random_dictionary(64, 128, "blocks.1.hook_resid_pre", k=8)


def values(w) -> torch.Tensor:
    return transport.decode(w.split)


def test_a_clicked_cell_shows_its_pairs_error_and_bias_bars_summing_to_the_models_score(model, sae):
    w = cw.FeatureAttention(model, TEXT, dictionary=sae, head=0, k=4)
    assert w.layer == 1 and w.split.get("data") is None and "click a cell" in w.split["note"]
    w.cell = {"query": 9, "key": 5}
    split = w.current_split()
    bars, shown = w.split["bars"], values(w)
    assert [b["kind"] for b in bars] == ["pair"] * 4 + ["rest"] + ["term"] * 8
    assert abs(float(shown.double().sum()) - split.score) < 1e-4 * max(1, abs(split.score))
    assert w.split["score"] == split.score and abs(w.split["total"] - split.total()) < 1e-9
    first = w.split["features"][bars[0]["features"][0]]
    assert first["id"] == split.pairs[0][0] and first["positions"] and first["up"] and first["down"]
    assert w.split["revision"] == w.patterns["revision"]
    w.cell = {"query": 9, "key": None}  # the whole row
    assert w.split["row"] and len(w.current_split().scores) == 10
    w.panel = "ov"  # what it moves
    ov = w.current_split()
    assert w.split["panel"] == "ov" and abs(w.split["score"] - ov.scores[ov.outputs[0]]) < 1e-9
    assert w.split["outputs"][0][0].startswith("logit ")


def test_bad_cells_are_refused_and_the_split_kept(model, sae):
    w = cw.FeatureAttention(model, TEXT, dictionary=sae, head=0, cell={"query": 9, "key": 5})
    before = w.split
    for bad in ({"query": 3, "key": 5}, {"query": 99, "key": 1}, {"key": 2}, {"query": 4, "nope": 1}):
        with pytest.raises(traitlets.TraitError, match="cell"):
            w.cell = bad
        assert w.split is before and "cell" in w.error
    w.set_state({"cell": {"query": -1, "key": 0}})  # from the browser: shown, never raised
    assert w.split is before and "cell" in w.error
    w.cell = {"query": 9, "key": 4}
    assert w.error == "" and w.split is not before
    bare = cw.FeatureAttention(model, TEXT, cell={"query": 9, "key": 5})  # no dictionary yet: the pattern, and a request
    assert bare.layer == 0 and bare.patterns.get("data") is not None and "no dictionary" in bare.split["note"]
    bare.layer, bare.dictionary = 1, sae
    assert bare.current_split().source == 5 and bare.split["score"] == bare.current_split().score
    w.layer = 0  # a dictionary of layer 1's input cannot split layer 0's head: the split panel says why, the pattern drawn
    assert "not what layer 0's attention reads" in w.split["note"] and w.patterns["layer"] == 0 and w.error == ""
    with pytest.raises(ValueError, match="not what layer 0's attention reads"):
        w.current_split()


def test_a_new_dictionary_an_edited_one_new_weights_and_hooks_redraw(model, sae):
    w = cw.FeatureAttention(model, TEXT, dictionary=sae, head=0, cell={"query": 9, "key": 5})
    first = w.current_split()
    other = random_dictionary(64, 128, "blocks.1.hook_resid_pre", seed=9, k=8)
    w.dictionary = other
    assert w.current_split().pairs != first.pairs and w.dictionary_info["dictionary"]["features"] == 128
    edited = w.current_split()
    with torch.no_grad():
        other.W_dec.mul_(2)  # in place: seen at the next user action
    w.set_state({"selection": {"query": 2, "key": 1, "locked": False}})
    assert w.current_split().terms != edited.terms
    before = w.current_split()
    for name, p in model.blocks[0].attn.named_parameters():  # layer 0's heads silenced, behind autograd's back
        if "o." in name:
            p.data.mul_(0)
    w.set_state({"selection": {"query": 3, "key": 1, "locked": False}})  # (the next user action sees it)
    assert w.current_split().score != before.score
    with model.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", lambda x, hook: x * 2)]):
        w.refresh()
        assert "drawn under hooks" in w.hooks_note and abs(w.current_split().total() - w.current_split().score) < 1e-3 * (
            1 + abs(w.current_split().score))
    w.refresh()
    assert w.hooks_note == ""


def test_the_page_saved_holds_the_split(model, sae, tmp_path):
    w = cw.FeatureAttention(model, TEXT, dictionary=sae, head=0, cell={"query": 9, "key": 5})
    page = w.save_html(tmp_path / "fa.html").read_text()
    assert '"featureattention"' in page and "features × features" not in page  # (the bars' labels are per bar)
    assert "query error × features" in page and str(round(w.split["score"], 6))[:6] in page


def test_a_backend_that_cannot_split_greys_the_controls_with_its_reason():
    from test_conformance import hf_model

    helium, tokenizer = hf_model("helium")
    view = cw.HFView(helium, tokenizer=tokenizer, remote="local")
    view.backend.weights_local = False  # (as an nnsight model for NDIF: the weights are not here)
    reason = view.supports("feature_attention").reason
    assert "helium" in reason
    sae = random_dictionary(64, 32, "blocks.1.hook_resid_pre")
    w = cw.FeatureAttention(view, tokens=PROMPT[0], dictionary=sae)
    assert w.unsupported == {"cell": reason, "k": reason, "panel": reason} and w.patterns.get("data") is not None
    with pytest.raises(traitlets.TraitError, match="helium"):
        w.cell = {"query": 5, "key": 2}


def test_a_long_prompt_keeps_its_level_of_detail_and_its_cells_split_exactly():
    from long_model import long_model

    model, (layer, head) = long_model()
    ids = torch.randint(2, 64, (3000,), generator=torch.Generator().manual_seed(0)).tolist()
    sae = random_dictionary(32, 64, "blocks.0.hook_resid_pre", k=6)
    w = cw.FeatureAttention(model, tokens=ids, dictionary=sae, layer=layer, head=head, cell={"query": 2999, "key": None})
    assert w.patterns["lod"]["factor"] > 1  # the overview, as AttentionPattern sends it
    row = w.current_split()
    w.selection = {"query": 2999, "key": 2998, "locked": True}
    exact = transport.decode(w.row)[head].double()  # the pattern's exact row, rebuilt from the kept queries and keys
    assert float((torch.softmax(row.scores.double(), 0) - exact).abs().max()) < 1e-5
    assert float(((row.total() - row.scores).abs() / row.scores.abs().clamp_min(1)).max()) < 1e-4
    assert int(row.scores.argmax()) == 2998  # (the planted previous-token head: the split is of the cell that matters)


def test_a_dashboard_with_a_dictionary_splits_the_cell_clicked_in_its_attention_pattern(model, sae):
    dash = cw.Dashboard(model, prompt=TEXT, layer=1, dictionary=sae, circuits=False, attribution=False, kinds=["induction"])
    features = dash.features
    assert features is not None and features in dash.widgets and not features.head_controls
    assert any("Feature attention" in getattr(row, "titles", ("",))[0] for row in dash.children if hasattr(row, "titles"))
    dash.attention.selection = {"query": 9, "key": 5, "locked": False}  # a hover: nothing split
    assert features.cell == {"query": None, "key": None}
    dash.attention.selection = {"query": 9, "key": 5, "locked": True}  # a click: split there
    assert features.cell == {"query": 9, "key": 5} and features.current_split().source == 5
    dash.attention.head = 2  # the dashboard's one head: the split follows
    assert features.head == 2 and features.current_split().head == 2
    dash.ablated = [(1, 0)]  # it runs the model: it shows the ablated one, and says so
    assert features.model_note == "L1H0 zero-ablated"
    dash.close()
