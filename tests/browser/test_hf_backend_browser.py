"""The nnsight backend (`circuitwidgets.HFView`, `circuitwidgets/backends/hugging_face.py`) in JupyterLab in Chromium.

A tiny random Llama-style model (rotary, grouped-query attention: `tiny_hf_model("llama")`) is
wrapped in nnsight (``TransformersModel``); the widgets take the wrapper and rebuild the patterns
inside the nnsight trace (`circuitwidgets.in_trace`). What the page shows is checked against
Hugging Face's own eager attention weights (``output_attentions=True``), computed in the same
kernel: hover read-outs of AttentionPattern (local, and ``remote="local"``: nnsight's serialising
dry run of the remote path), after head and layer switches too, and HeadScores' exact scores.

The random init's patterns are near uniform, so the notebook sharpens them (queries x 30) before
wrapping the model: a hovered weight then stands well apart from its row's uniform 1/(q+1) and
from the other heads' weights in the same cell, so a read-out of the wrong head, layer or cell fails.

The tests share one notebook page (module scope) and run in file order.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    canvas_stats,
    cell_centre,
    cell_pixel,
    error_outputs,
    open_notebook,
    run_all,
    run_code,
    wait_attr,
    wait_drawn,
    watched_page,
    write_notebook,
)

NOTEBOOK = "hf_backend.ipynb"
KINDS = ["previous_token", "induction"]

SETUP = """
import json, torch, circuitwidgets as cw
from nnsight import TransformersModel
from circuitwidgets.demo import tiny_hf_model
from circuitwidgets.model import _model_lock
from circuitwidgets.analysis import repeated_random_tokens
from circuitwidgets.head_metrics import score_of_patterns

hf, tok = tiny_hf_model("llama")
assert hf.config.num_key_value_heads < hf.config.num_attention_heads  # grouped-query attention
for block in hf.model.layers:  # sharper patterns than the random init's near-uniform ones
    block.self_attn.q_proj.weight.data.mul_(30.0)
nn = TransformersModel(hf, tokenizer=tok)
PROMPT = "the cat sat on the mat. the cat sat on the mat."

def eager(ids):
    \"\"\"Hugging Face's eager patterns [batch, layers, heads, q, k] of token ids [batch, seq].\"\"\"
    with _model_lock(hf), torch.no_grad():
        hf.set_attn_implementation("eager")
        try:
            return torch.stack(hf(ids, output_attentions=True).attentions, 1).float()
        finally:
            hf.set_attn_implementation("sdpa")

def pick(widget, first_row=8):
    \"\"\"The shown head's largest eager weight in rows >= first_row, the other heads' in that cell.\"\"\"
    P = eager(torch.tensor([widget.tokens]))[0, widget.layer]
    sub = P[widget.head, first_row:]
    flat = int(sub.argmax())
    q, k = first_row + flat // sub.shape[1], flat % sub.shape[1]
    low = int(P[widget.head, q, : q + 1].argmin())
    print(json.dumps({"layer": widget.layer, "head": widget.head, "q": q, "k": k, "low": low, "n": P.shape[-1],
                      "weight": float(P[widget.head, q, k]), "heads": [float(x) for x in P[:, q, k]],
                      "implementation": hf.config._attn_implementation}))
"""
LOCAL = "w = cw.AttentionPattern(nn, prompt=PROMPT, layer=1, head=2)\nw"
REMOTE = 'r = cw.AttentionPattern(nn, prompt=PROMPT, layer=0, head=1, remote="local")\nr'
SCORES = f"hs = cw.HeadScores(nn, kinds={KINDS!r})\nhs"

@pytest.fixture(scope="module")
def nb(lab, browser):
    """The notebook (setup, the local widget `w`, the remote="local" widget `r`, HeadScores `hs`), run."""
    write_notebook(lab.root / NOTEBOOK, [SETUP, LOCAL, REMOTE, SCORES])
    page = watched_page(browser)
    open_notebook(page, lab, NOTEBOOK)
    run_all(page)
    yield page
    page.close()


def widget(nb, source: str, kind: str = "attention"):
    root = nb.locator(".jp-CodeCell", has_text=source.splitlines()[0]).locator(f".cw-root[data-cw-kind={kind}]")
    wait_drawn(root)
    root.scroll_into_view_if_needed()
    return root


def py(nb, code: str) -> str:
    """Run `code` in the notebook's kernel; its printed output."""
    return "".join(run_code(nb, code).locator(".jp-OutputArea-output").all_text_contents()).strip()


def pick(nb, name: str) -> dict:
    """The kernel's eager pattern facts of widget `name`'s shown head (see SETUP's `pick`)."""
    cell = json.loads(py(nb, f"pick({name})"))
    assert cell["implementation"] == "sdpa"  # eager() restored the model's attention
    # a cell that tells heads and rows apart: well above uniform, unlike every other head's weight there
    assert cell["weight"] > 2 / (cell["q"] + 1), cell
    assert all(abs(cell["weight"] - w) > 0.02 for i, w in enumerate(cell["heads"]) if i != cell["head"]), cell
    return cell


def assert_drawn(root) -> None:
    stats = canvas_stats(root.locator(".cw-heatmap-canvas"))
    assert stats["painted"] > 0.15 * stats["total"] and stats["colours"] > 20, f"the heatmap looks blank: {stats}"
    assert root.locator(".cw-error").is_hidden()


def hover_weight(nb, root, cell: dict) -> float:
    """Hover heatmap cell (q, k) of `root`; the exact weight its read-out shows for the expected layer and head."""
    nb.mouse.move(1, 1)  # leave the heatmap, so that the move below is a fresh hover
    nb.mouse.move(*cell_centre(root.locator(".cw-heatmap").first, cell["q"], cell["k"]))
    readout = root.locator(".cw-readout")
    pattern = (
        f"^L{cell['layer']} H{cell['head']} · destination \\(query\\) {cell['q']} .* source \\(key\\) {cell['k']} .*"
        "weight [0-9]"  # no "≈": the exact row from the kernel has arrived
    )
    nb.wait_for_function(
        "([el, p]) => new RegExp(p).test(el.textContent)", arg=[readout.element_handle(), pattern], timeout=30_000
    )
    return float(re.search(r"weight ([0-9.e+-]+)", readout.text_content()).group(1))


def assert_weight(shown: float, cell: dict) -> None:
    # the read-out has 4 significant digits: ~1e-3 relative
    assert shown == pytest.approx(cell["weight"], rel=1e-3, abs=1e-4), (shown, cell)


def test_notebook_runs_on_the_nnsight_backend(nb):
    errors = error_outputs(nb)
    assert errors == [], f"the notebook raised: {errors[0][-1500:]}"
    roots = nb.locator(".cw-root[data-cw-kind=attention]")
    assert roots.count() == 2
    for root in roots.all():
        wait_drawn(root)
    facts = py(
        nb,
        "print(type(w.mv).__name__, type(r.mv).__name__, type(hs.mv).__name__, repr(r.mv.remote), "
        "r.mv.bytes_received > 0, type(w.mv.nnsight_model).__name__)",
    )
    assert facts == "HFView HFView HFView 'local' True TransformersModel"
    assert nb.cw_errors == []


def test_local_hover_equals_the_eager_pattern(nb):
    root = widget(nb, LOCAL)
    assert_drawn(root)
    assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == ("1", "2")
    cell = pick(nb, "w")
    assert root.get_attribute("data-cw-tokens") == str(cell["n"])
    assert cell_pixel(root, cell["q"], cell["k"]) != cell_pixel(root, cell["q"], cell["low"])  # the strong cell stands out
    assert_weight(hover_weight(nb, root, cell), cell)
    assert nb.cw_errors == []


def test_remote_local_hover_equals_the_eager_pattern(nb):
    root = widget(nb, REMOTE)
    assert_drawn(root)
    cell = pick(nb, "r")
    assert (cell["layer"], cell["head"]) == (0, 1)
    assert cell_pixel(root, cell["q"], cell["k"]) != cell_pixel(root, cell["q"], cell["low"])
    assert_weight(hover_weight(nb, root, cell), cell)
    assert nb.cw_errors == []


def test_head_and_layer_switches_redraw_with_the_new_eager_pattern(nb):
    root = widget(nb, LOCAL)
    before = canvas_stats(root.locator(".cw-heatmap-canvas"))["hash"]
    # head 2 -> 0 with the widget's own head selector
    root.locator("select.cw-select").nth(1).select_option("0")
    wait_attr(root, "data-cw-head", "0")
    after_head = canvas_stats(root.locator(".cw-heatmap-canvas"))["hash"]
    assert after_head != before
    cell = pick(nb, "w")  # the kernel sees the page's head
    assert (cell["layer"], cell["head"]) == (1, 0)
    assert_weight(hover_weight(nb, root, cell), cell)
    # layer 1 -> 0 from a cell: the kernel reruns the trace for the new layer and the page redraws
    draws = int(root.get_attribute("data-cw-draws"))
    py(nb, "w.layer = 0")
    wait_attr(root, "data-cw-layer", "0")
    wait_drawn(root, draws)
    assert root.locator("select.cw-select").nth(0).input_value() == "0"
    assert canvas_stats(root.locator(".cw-heatmap-canvas"))["hash"] not in (before, after_head)
    cell = pick(nb, "w")
    assert (cell["layer"], cell["head"]) == (0, 0)
    assert_weight(hover_weight(nb, root, cell), cell)
    assert nb.cw_errors == []


def test_head_scores_equal_scores_of_the_eager_patterns(nb):
    root = widget(nb, SCORES, kind="headscores")
    stats = canvas_stats(root.locator(".cw-heatmap-canvas").first)
    assert stats["colours"] > 4, f"the score grid looks blank: {stats}"
    assert root.locator(".cw-error").is_hidden()
    out = json.loads(
        py(
            nb,
            (
                "toks = repeated_random_tokens(nn)\n"
                "E = eager(toks)\n"
                f"print(json.dumps({{k: [hs.scores_of(k).tolist(), score_of_patterns(E, toks.cpu(), k).tolist()]"
                f" for k in {KINDS!r}}} | {{'seqs': list(toks.shape), 'computed': hs.computed}}))"
            ),
        )
    )
    assert out["computed"] == KINDS and out["seqs"][0] > 1  # a batch of repeated random sequences
    for kind in KINDS:
        shown, expected = out[kind]
        assert len(shown) == 2 and len(shown[0]) == 4
        for row, ref in zip(shown, expected, strict=True):
            assert row == pytest.approx(ref, abs=1e-5), kind
    # the page's read-out of a hovered head shows those scores (3 significant digits)
    layer, head = 1, 3
    nb.mouse.move(1, 1)
    nb.mouse.move(*cell_centre(root.locator(".cw-heatmap").first, layer, head))
    readout = root.locator(".cw-readout").first
    nb.wait_for_function(
        "([el, p]) => el.textContent.startsWith(p)", arg=[readout.element_handle(), f"L{layer} H{head} ·"], timeout=15_000
    )
    text = readout.text_content()
    for kind, label in (("previous_token", "previous token"), ("induction", "induction")):
        shown = float(re.search(rf"{label} ([0-9.e+-]+)", text).group(1))
        exact = out[kind][0][layer][head]
        assert abs(shown - exact) <= 0.51 * 10 ** (math.floor(math.log10(abs(exact))) - 2), (text, exact)
    assert nb.cw_errors == []


def test_a_weight_edit_shows_in_the_remote_widget_at_the_next_page_action(nb):
    # `r` holds the view that remote="local" made (shared through view_for): it must see an in-place edit
    root = widget(nb, REMOTE)
    draws = int(root.get_attribute("data-cw-draws"))
    before = pick(nb, "r")
    py(nb, "saved = hf.model.layers[0].self_attn.q_proj.weight.detach().clone()\n"
           "hf.model.layers[0].self_attn.q_proj.weight.data.mul_(-1.5)")  # behind autograd's back: no version bump
    try:
        root.locator("select.cw-select").nth(1).select_option("2")  # a head switch in the page: a user action
        wait_attr(root, "data-cw-head", "2")
        wait_drawn(root, draws)
        cell = pick(nb, "r")  # eager patterns of the edited model
        assert (cell["layer"], cell["head"]) == (0, 2) and cell["weight"] != before["weight"]
        assert_weight(hover_weight(nb, root, cell), cell)
        assert py(nb, "print(r.mv.is_stale(), r.mv is cw.as_view(r.model))") == "False True"
    finally:
        py(nb, "hf.model.layers[0].self_attn.q_proj.weight.data.copy_(saved)")
    assert nb.cw_errors == []
