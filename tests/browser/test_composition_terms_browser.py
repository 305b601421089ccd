"""The composition term of a selected edge in a real browser: JupyterLab on the planted model, and
the exported page opened offline in light and dark.

Checked: clicking an edge draws its term; the hovered cell's read-out and the positivity read-out
equal `analysis.composition_term` / `composition_term_positivity`; a kind switch redraws the term
of the new kind; selecting another edge redraws it for that pair; the exported page holds the
saved term and reads it out with no kernel; on a rotary RMSNorm model the scores' caption says
what they leave out (rotary, for Q and K only) and fold in (the norm), per kind.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import canvas_stats, cell_centre, network_urls, open_notebook, open_offline, run_all, write_notebook  # noqa: E402
from planted import planted_model, word_tokenizer, words  # noqa: E402

from circuitwidgets.analysis import composition_term, composition_term_positivity  # noqa: E402

PROMPT = words([5, 9, 3, 7, 11, 2, 5, 9, 3, 7, 11, 2])
TOKENS = list(range(1, 17))
PREV, IND, OTHER = (0, 2), (1, 1), ((0, 1), (1, 3))
#: what the read-out calls a row and a column, per kind
WORDS = {
    "K": ("destination (query)", "moved into the source (key)"),
    "Q": ("moved into the destination (query)", "source (key)"),
    "V": ("source", "out"),
}
SETUP = f"""
import circuitwidgets as cw
from planted import planted_model, word_tokenizer
model, heads = planted_model()
model.tokenizer = word_tokenizer()
w = cw.CompositionDiagram(model, kind="K", prompt={PROMPT!r}, term_tokens={TOKENS!r})
w
"""


@pytest.fixture(scope="module")
def model():
    m, _ = planted_model()
    m.tokenizer = word_tokenizer()
    return m


def term_panel(root, kind: str, pair):
    key = json.dumps([list(p) for p in pair], separators=(",", ":"))
    panel = root.locator(f".cw-comp-term[data-kind={kind}][data-pair='{key}']")
    panel.wait_for(timeout=30_000)
    return panel


def check_term(page, root, model, kind: str, pair, row: int, col: int) -> dict:
    """The term of `pair` and `kind` is drawn; cell (row, col) and the positivity read out the analysis."""
    panel = term_panel(root, kind, pair)
    stats = canvas_stats(panel.locator(".cw-heatmap-canvas"))
    assert stats["colours"] > 5, stats
    assert canvas_stats(panel.locator(".cw-term-plane"))["colours"] > 3
    want = composition_term(model, kind, *pair, scaled=kind != "V").block(TOKENS, TOKENS)
    page.mouse.move(*cell_centre(panel.locator(".cw-heatmap"), row, col))
    readout = panel.locator(".cw-term-readout")
    page.wait_for_function(
        "([el, r, c]) => el.dataset.value !== undefined && el.dataset.row === r && el.dataset.col === c",
        arg=[readout.element_handle(), str(row), str(col)],
        timeout=15_000,
    )
    assert float(readout.get_attribute("data-value")) == pytest.approx(float(want[row, col]), rel=1e-5, abs=1e-5)
    text = readout.text_content()
    assert all(w in text for w in WORDS[kind]), text
    want_positivity = composition_term_positivity(model, kind, *pair)
    shown = panel.locator(".cw-term-positivity")
    if math.isnan(want_positivity):  # an all-zero term has no spectrum to score
        assert shown.text_content() == "n/a"
    else:
        assert float(shown.get_attribute("data-value")) == pytest.approx(want_positivity, abs=1e-6)
    page.mouse.move(0, 0)
    return stats


def test_edge_click_kind_switch_and_other_edge_in_jupyterlab(lab, browser, model):
    write_notebook(lab.root / "composition_terms.ipynb", [SETUP])
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    open_notebook(page, lab, "composition_terms.ipynb")
    run_all(page)
    root = page.locator(".cw-root[data-cw-kind=composition]").first
    assert root.locator(".cw-comp-term").text_content() == ""
    assert "the circuit term the edge builds" in root.locator(".cw-comp-pair").text_content()
    root.locator(f"path.cw-edge-hit[data-edge='{PREV[0]},{PREV[1]},{IND[0]},{IND[1]}']").click(force=True)
    k = check_term(page, root, model, "K", (PREV, IND), 3, 3)  # the diagonal: a match
    check_term(page, root, model, "K", (PREV, IND), 3, 7)
    # axis titles say which token is which
    ops = root.locator(".cw-comp-term .cw-heatmap-canvas").evaluate("(c) => c.cwScene.ops")
    titles = [op["text"] for op in ops if op["type"] == "text"]
    assert "destination (query) ↓" in titles and "moved to source →" in titles, titles
    axes = root.locator(".cw-term-axes").text_content()
    assert axes == "rows: destination (query) token · columns: the token L0H2 moved into the source (key) position", axes
    # another kind: the term of that kind
    root.locator("button[data-kind=V]").click()
    v = check_term(page, root, model, "V", (PREV, IND), 2, 2)
    assert v["hash"] != k["hash"]
    root.locator("button[data-kind=Q]").click()
    check_term(page, root, model, "Q", (PREV, IND), 5, 1)
    # another edge (every edge drawn at threshold 0): its own term
    root.locator("input.cw-slider").evaluate("(el) => { el.value = '0'; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    first, second = OTHER
    edge = root.locator(f"path.cw-edge-hit[data-edge='{first[0]},{first[1]},{second[0]},{second[1]}']")
    edge.dispatch_event("click")  # edges cross at threshold 0: a click at its centre may land on another
    check_term(page, root, model, "Q", OTHER, 4, 6)
    assert errors == []
    page.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_exported_page_reads_out_the_saved_term(page, model, tmp_path, scheme):
    import circuitwidgets as cw

    w = cw.CompositionDiagram(model, kind="K", prompt=PROMPT, term_tokens=TOKENS, selected_pair=[list(PREV), list(IND)])
    path = w.save_html(tmp_path / "terms.html")
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size({"width": 1300, "height": 1100})
    requested = open_offline(page, path)
    root = page.locator(".cw-root[data-cw-kind=composition]").first
    check_term(page, root, model, "K", (PREV, IND), 4, 4)
    assert root.get_attribute("data-cw-theme") == scheme
    assert root.locator(".cw-term-criterion").text_content() == "tokens: tokens chosen by the caller"
    root.screenshot(path=str(tmp_path / f"composition_terms_{scheme}.png"))
    if (target := Path("/tmp/cwD")).is_dir():  # for a person to look at
        root.screenshot(path=str(target / f"composition_terms_{scheme}.png"))
    # the page holds only the saved kind's term: another kind says so rather than draw a wrong one
    root.locator("button[data-kind=V]").click()
    saved_only = "only the term of the pair and kind selected when it was saved"
    root.locator(".cw-comp-term", has_text=saved_only).wait_for(timeout=10_000)
    assert network_urls(requested) == []
    assert page.cw_errors == []


def test_exported_page_captions_the_scores_of_a_rotary_rmsnorm_model(page, tmp_path):
    """The scores' caption says what they leave out (rotary, Q and K only) and fold in (RMSNorm)."""
    from factories import small_bridge

    import circuitwidgets as cw

    w = cw.CompositionDiagram(small_bridge(normalization_type="RMS", positional_embedding_type="rotary"), kind="K")
    captions = w.scores["captions"]
    path = w.save_html(tmp_path / "rotary.html")
    page.set_viewport_size({"width": 1300, "height": 1000})
    requested = open_offline(page, path)
    root = page.locator(".cw-root[data-cw-kind=composition]").first
    caption = root.locator(".cw-comp-note .cw-comp-caption")
    caption.wait_for(state="visible", timeout=30_000)
    assert caption.text_content() == captions["K"]
    assert caption.text_content().startswith("Rotary: the rotation of queries and keys by position is left out")
    for kind in ("V", "Q"):
        root.locator(f"button[data-kind={kind}]").click()
        page.wait_for_function("([el, want]) => el.textContent === want", arg=[caption.element_handle(), captions[kind]])
        assert caption.is_visible()
    assert "Rotary" not in captions["V"] and captions["V"].startswith("RMSNorm weights folded")
    assert "Rotary" in captions["Q"]
    assert network_urls(requested) == []
    assert page.cw_errors == []
