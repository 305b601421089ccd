"""Issue 33: the numbers a user reads can be trusted, and a newcomer's habits behave as they expect.

Each test names the item it checks; each failed before the fix. The kinds: a colour scale ignores
padding and empty rows; a saved file is validated on load; a given tensor is the widget's own copy;
bad arguments are refused with TypeError/ValueError naming them; CircuitsVis habits (extra head
names, ``str()``, ``show_code()``, its defaults) behave as there.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import traitlets
from factories import small_bridge

import circuitwidgets as cw
import circuitwidgets.compat.circuitsvis as cv
from circuitwidgets import in_trace, transport
from circuitwidgets.analysis import HeadScan, long_patterns, scan_heads


# ----- colour scales ignore padding and empty rows ----------------------------------------------------------------
def test_auto_scale_of_examples_of_different_lengths_reads_each_weight_back():
    """HeadAtlas examples of different lengths on 'auto': a short text padded to the longest decodes to its weights."""
    model = cw.demo_model()
    texts = [cw.analysis.repeated_random_tokens(model, seq_len=n, batch=1, seed=n)[0].tolist() for n in (4, 30)]
    atlas = cw.HeadAtlas(model, texts=texts, y_metric="previous_token", color_scale="auto", layer=0, head=1)
    cw.widgets._background.wait(60)
    atlas.refresh()
    payload = atlas.examples
    drawn = transport.decode(payload)
    step = transport.quantisation_step(payload)
    for i, item in enumerate(payload["items"]):
        n = item["length"]
        exact = cw.as_view(model).patterns([atlas.head_scan.tokens_of(item["text"])], [0])[0, 0, 1]
        top = float(in_trace.auto_top(exact[None])[0])  # the scale of this text alone
        assert top > 0.05, "the scale's top is a weight of this text, not the padding's 0"
        assert float((drawn[i, :n, :n] - exact.clamp(max=payload["scale"]["his"][i])).abs().max()) <= step * top * 2 + 1e-6


def test_auto_scale_of_a_pattern_with_mostly_empty_rows_is_that_of_its_rows_that_hold_weight():
    weights = torch.zeros(1, 10, 10)
    weights[0, 8, :8] = torch.tensor([0.1, 0.05, 0.05, 0.2, 0.2, 0.1, 0.1, 0.2])
    weights[0, 9, :4] = torch.tensor([0.1, 0.2, 0.3, 0.4])
    assert float(in_trace.auto_top(weights)[0]) == pytest.approx(0.3)  # the median of 0.2 and 0.4, not 0 (8 empty rows)
    assert float(in_trace.auto_top(torch.zeros(1, 3, 3))[0]) == 1.0


# ----- saved files are validated on load; a scan resumes only on the same weights ------------------------------------
@pytest.fixture
def scan_file(tmp_path):
    model = cw.demo_model()
    scan = scan_heads(model, cw.analysis.repeated_random_tokens(model, 8, 3), progress=False)
    return model, scan, scan.save(tmp_path / "scan.pt")


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda s: s.update(n_heads=7), r"has shape \(3, 2, 4\), not \(3, 2, 7\)"),
        (lambda s: s.update(done=s["done"][:2]), "done must be 3 booleans"),
        (lambda s: s.update(offsets=s["offsets"] + 100), "offsets must start at 0"),
        (lambda s: s.update(token_ids=s["token_ids"][:-5]), "the offsets end at 51 but there are 46 token ids"),
        (lambda s: s["values"].pop("induction"), "values holds"),
        (lambda s: s["best"]["induction"][1].fill_(9), "names texts outside 0..2"),
        (lambda s: s["best"]["induction"][2].fill_(500), "names destinations outside their text"),
        (lambda s: s.pop("offsets"), "not a consistent HeadScan file"),
    ],
)
def test_a_tampered_or_inconsistent_scan_file_is_refused_on_load(scan_file, tamper, message):
    _, _, path = scan_file
    state = torch.load(path, weights_only=True)
    tamper(state)
    torch.save(state, path)
    with pytest.raises(ValueError, match=message):
        HeadScan.load(path)


def test_resume_after_a_weight_edit_is_refused_not_mixed(scan_file):
    model, scan, path = scan_file
    texts = [scan.tokens_of(i) for i in range(scan.n_texts)]
    partial = HeadScan.load(path)
    partial.done[1:] = False
    assert scan_heads(model, texts, progress=False, resume=partial).complete  # the same weights: resumes
    partial.done[1:] = False
    with torch.no_grad():
        model.blocks[0].attn.q._original_component.weight.mul_(1.5)
    with pytest.raises(ValueError, match="weights changed since that scan began"):
        scan_heads(model, texts, progress=False, resume=partial)


# ----- a tensor given is the widget's own -------------------------------------------------------------------------
def test_from_tensors_keeps_a_copy_so_a_later_edit_changes_nothing_drawn():
    attention = torch.tril(torch.ones(2, 4, 4))
    attention = attention / attention.sum(-1, keepdim=True)
    w = cw.AttentionPattern.from_tensors(list("abcd"), attention)
    before = w.current_patterns().clone()
    attention.fill_(float("nan"))  # the caller reuses its buffer
    assert torch.equal(w.current_patterns(), before)
    w.selection = {"query": 3, "key": None, "locked": True}  # a hovered row is cut from the copy too
    assert w.error == "" and torch.equal(w.current_patterns(), before)


def test_a_tensor_too_big_to_copy_is_kept_by_reference_and_an_edit_of_it_is_refused_not_drawn(monkeypatch):
    from circuitwidgets.widgets import _given

    monkeypatch.setattr(_given, "COPY_BYTES", 16)  # (a "big" tensor at this size: kept by reference)
    attention = torch.tril(torch.ones(1, 4, 4))
    attention = attention / attention.sum(-1, keepdim=True)
    w = cw.AttentionPattern.from_tensors(list("abcd"), attention)
    assert w.error == "" and w._given.data_ptr() == attention.data_ptr()
    attention.mul_(2.0)  # an edit in place: weights above 1, past the checks
    w.selection = {"query": 3, "key": None, "locked": True}
    assert "changed in place after this widget checked it" in w.error
    w.refresh()
    assert "changed in place" in w.error


# ----- bad arguments: TypeError / ValueError naming them ------------------------------------------------------------
def test_constructors_raise_type_and_value_errors_as_the_contract_says():
    model = cw.demo_model()
    with pytest.raises(TypeError, match="layer must be an int"):
        cw.AttentionPattern(model, prompt="abc", layer="1")
    with pytest.raises(ValueError, match="layer=7 is out of range"):
        cw.AttentionPattern(model, prompt="abc", layer=7)
    with pytest.raises(traitlets.TraitError):  # (and still a TraitError, as before)
        cw.AttentionPattern(model, prompt="abc", layer=7)
    w = cw.AttentionPattern(model, prompt="abc", layer=1)
    with pytest.raises(TypeError, match="head must be an int"):
        w.head = 1.5


def test_trace_options_that_are_not_a_dict_are_refused_naming_them():
    with pytest.raises(TypeError, match="trace_options must be a dict"):
        cw.AttentionPattern(cw.demo_model(), prompt="abc", trace_options=["backend"])


def test_pool_takes_a_whole_factor():
    blocks = torch.rand(2, 8, 8)
    with pytest.raises(TypeError, match="factor must be an int"):
        long_patterns.pool(blocks, 2.0)
    with pytest.raises(TypeError, match="factor must be an int"):
        long_patterns.pool(blocks, True)
    assert long_patterns.pool(blocks, 2).shape == (2, 4, 4)


def test_skip_trigrams_defaults_fit_a_small_vocabulary_and_k_must_be_an_int():
    small = small_bridge(d_vocab=12)
    w = cw.SkipTrigrams(small)
    assert w.error == "" and (w.k, w.n_sources) == (10, 12)
    with pytest.raises(TypeError, match="k must be an int; got bool True"):
        cw.SkipTrigrams(small, k=True)


# ----- CircuitsVis habits ---------------------------------------------------------------------------------------------
def _causal(heads: int, n: int) -> torch.Tensor:
    weights = torch.tril(torch.rand(heads, n, n) + 0.1)
    return weights / weights.sum(-1, keepdim=True)


def test_circuitsvis_head_names_of_the_whole_model_draw_the_heads_there_are():
    with pytest.warns(UserWarning, match="12 names for 4 heads: the first 4 are used"):
        w = cv.attention.attention_heads(_causal(4, 5), list("abcde"), [f"L0H{h}" for h in range(12)])
    assert w.info["head_names"] == ["L0H0", "L0H1", "L0H2", "L0H3"]


def test_circuitsvis_str_and_show_code_give_the_page_not_an_object_address(tmp_path):
    w = cv.attention.attention_patterns(list("abcde"), _causal(2, 5))
    page = str(w)
    assert page.startswith("<!doctype html>") and "object at 0x" not in page and w.show_code() == page == w.__html__()
    path = tmp_path / "attention.html"
    path.write_text(str(cv.tokens.colored_tokens(["a", "b"], [0.5, 1.0])), encoding="utf-8")
    assert "circuitwidgets" in path.read_text(encoding="utf-8")


def test_circuitsvis_default_masks_the_upper_triangle_as_circuitsvis_does():
    full = torch.softmax(torch.randn(2, 5, 5), -1)  # bidirectional weights
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        masked = cv.attention.attention_heads(full, list("abcde"))
    assert torch.equal(masked.current_patterns(), full.tril())
    kept = cv.attention.attention_heads(full, list("abcde"), mask_upper_tri=False)
    assert torch.allclose(kept.current_patterns(), full)


def test_colored_tokens_refuses_a_max_value_below_every_value_instead_of_drawing_zero_to_one():
    with pytest.raises(ValueError, match="max_value=-1 is not above the scale's low end 0"):
        cv.tokens.colored_tokens(["a", "b"], [0.5, 2.0], max_value=-1)
    assert cv.tokens.colored_tokens(["a", "b"], [0.5, 2.0], max_value=1.0).values["range"] == [0.0, 1.0]


# ----- every linked view's traits equal what it shows ------------------------------------------------------------------
def test_a_dashboard_linked_to_an_atlas_says_the_examples_text_in_its_prompt():
    model = cw.demo_model()
    view = cw.as_view(model)
    texts = ["abcdefabcdef", "qrstqrst"]
    atlas = cw.HeadAtlas(model, texts=texts)
    cw.widgets._background.wait(60)
    atlas.refresh()
    dash = cw.Dashboard(model, prompt="zzzz", circuits=False)
    atlas.link(dash)
    item = atlas.examples["items"][0]
    atlas.example = [item["text"], item["dest"]]
    shown = atlas.head_scan.tokens_of(item["text"])
    assert dash.attention.tokens == shown and dash.attention.source == "tokens"
    assert dash.attention.prompt == texts[item["text"]]  # the prompt box holds the text shown, not "zzzz"
    assert view.to_tokens(dash.attention.prompt)[0].tolist() == shown
    dash.attention.tokens = [5, 6, 7]  # ids that no text gives back (no BOS): the box is emptied, not left stale
    assert dash.attention.prompt == ""


# ----- an attention term the rebuild does not know is refused at small magnitudes too ---------------------------------
def test_an_unknown_term_on_a_head_of_small_values_is_refused_in_reduced_precision():
    """A sink taking ~3 % of each row of one head whose values are small (the other head's are 100x larger): the
    weights drawn would be that far off. Measured against each row's own scale, the check refuses it in bfloat16,
    while the same call without the sink passes."""
    g = torch.Generator().manual_seed(0)
    n, d = 40, 8
    query, key = torch.randn(1, 2, n, d, generator=g), torch.randn(1, 2, n, d, generator=g)
    value = torch.randn(1, 2, n, d, generator=g) * torch.tensor([50.0, 0.5]).reshape(1, 2, 1, 1)
    weights = in_trace.attention_weights(query, key)
    exact = torch.matmul(weights, value).transpose(1, 2)  # [batch, q, heads, d]
    sunk = weights.clone()
    sunk[:, 1] *= 0.97  # 3 % of head 1's weight goes to a key the rebuild does not know (a sink with value 0)
    with_sink = torch.matmul(sunk, value).transpose(1, 2)
    options = {"scaling": None, "softcap": None, "sliding_window": None}
    for output, refused in ((exact, False), (with_sink, True)):
        reduced = in_trace.reduce_call(query, key, value, None, options, output.to(torch.bfloat16), {"factor": 1})
        error, tolerance = reduced["mismatch"]
        assert (float(error) > float(tolerance)) is refused, (float(error), float(tolerance))


# ----- a malformed notebook is an error naming the part, never a traceback ------------------------------------------
@pytest.mark.parametrize(
    "notebook, said",
    [
        ('{"cells": [3]}', "cell 0 is not a code, markdown or raw cell"),
        ('{"cells": [{"cell_type": "code", "source": ["a", 3]}]}', "cell 0's source must be text"),
        ('{"cells": [{"cell_type": "code", "source": "x", "outputs": 4}]}', "cell 0's outputs must be a list"),
        ('{"cells": [], "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": 3}}}}',
         "widget state saved in its metadata"),
        ("not json", "not a notebook (not JSON"),
    ],
)
def test_a_malformed_notebook_is_refused_naming_the_part_not_with_a_traceback(notebook, said, tmp_path, capsys):
    from circuitwidgets.__main__ import main

    path = tmp_path / "bad.ipynb"
    path.write_text(notebook, encoding="utf-8")
    assert main(["page", str(path), "-o", str(tmp_path / "bad.html")]) == 1
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
