"""HeadScores, CompositionDiagram and the Dashboard in a real browser: a JupyterLab notebook on the
planted model, and the Dashboard's exported page opened from disk with the network blocked.

Checked: every widget draws; the composition threshold hides edges; kind, baseline and view
controls change the picture; a click in HeadScores or on a composition edge moves every widget
of the dashboard (and the kernel sees it); the values drawn (edge data, hover read-outs) equal
what circuitwidgets.analysis computes. The JupyterLab tests share one notebook page and run in
file order.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import (  # noqa: E402
    canvas_stats,
    cell_centre,
    error_outputs,
    network_urls,
    open_notebook,
    open_offline,
    run_all,
    run_code,
    start_code,
    wait_attr,
    wait_drawn,
    wait_kernel_idle,
    write_notebook,
)
from planted import planted_model, word_tokenizer, words  # noqa: E402

from circuitwidgets.analysis import composition_scores, head_scores  # noqa: E402

PROMPT = words([5, 9, 3, 7, 11, 2, 5, 9, 3, 7, 11, 2])
PREV, IND = (0, 2), (1, 1)
SETUP = f"""
import circuitwidgets as cw
from planted import planted_model, word_tokenizer
model, heads = planted_model()
model.tokenizer = word_tokenizer()
dash = cw.Dashboard(model, prompt={PROMPT!r}, compact=False)  # every view in full, in rows
dash
"""


@pytest.fixture(scope="module")
def model():
    m, _ = planted_model()
    m.tokenizer = word_tokenizer()
    return m


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "circuits_dashboard.ipynb", [SETUP])
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    open_notebook(page, lab, "circuits_dashboard.ipynb")
    run_all(page)
    yield page
    page.close()


def roots(page):
    return {kind: page.locator(f".cw-root[data-cw-kind={kind}]").first for kind in ("headscores", "composition", "attention")}


def py(page, code: str) -> str:
    return "".join(run_code(page, code).locator(".jp-OutputArea-output").all_text_contents()).strip()


def edges(root) -> dict[tuple[int, ...], float]:
    """The composition edges drawn: (l1, h1, l2, h2) -> raw score, read from the SVG."""
    out = {}
    for e in root.locator("path.cw-edge").all():
        key = tuple(int(x) for x in e.get_attribute("data-edge").split(","))
        out[key] = float(e.get_attribute("data-raw"))
    return out


def set_threshold(page, root, value: float) -> None:
    slider = root.locator("input.cw-slider")
    slider.evaluate("(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', {bubbles: true})); }", value)


def click_cell(page, root, row: int, col: int) -> None:
    page.mouse.click(*cell_centre(root.locator(".cw-heatmap").first, row, col))


def hover_cell(page, root, row: int, col: int) -> None:
    page.mouse.move(*cell_centre(root.locator(".cw-heatmap").first, row, col))


def assert_all_drawn(page) -> None:
    r = roots(page)
    for kind, root in r.items():
        wait_drawn(root)
        assert root.locator(".cw-error").first.is_hidden(), f"{kind}: {root.locator('.cw-error').first.text_content()}"
    hs = canvas_stats(r["headscores"].locator(".cw-heatmap-canvas").first)
    assert hs["colours"] > 10, hs
    assert r["composition"].locator("svg.cw-comp-graph circle").count() == 8
    assert canvas_stats(r["attention"].locator(".cw-heatmap-canvas").first)["colours"] > 10


# ----- JupyterLab ---------------------------------------------------------------------------------


def test_dashboard_draws_every_widget_in_jupyterlab(nb):
    assert error_outputs(nb) == []
    assert_all_drawn(nb)
    assert nb.locator(".cw-root[data-cw-kind=ov]").count() == (1 if py(nb, "print(dash.ov is not None)") == "True" else 0)
    assert nb.cw_errors == []


def test_dashboard_has_one_layer_head_pair_and_puts_views_side_by_side(nb):
    boxes = {kind: nb.locator(f".cw-root[data-cw-kind={kind}]").first.bounding_box() for kind in
             ("headscores", "composition", "attention", "ov", "qk")}
    notebook_width = nb.locator(".jp-NotebookPanel").first.bounding_box()["width"]
    assert notebook_width >= 1000
    for left, right in (("headscores", "composition"), ("ov", "qk")):  # side by side at >= 1 000 px
        assert abs(boxes[left]["y"] - boxes[right]["y"]) < 2 and boxes[right]["x"] > boxes[left]["x"] + 300, (left, right)
    attribution = nb.locator(".cw-root[data-cw-kind=attribution]").first.bounding_box()
    assert attribution["y"] > boxes["attention"]["y"] + boxes["attention"]["height"] - 2  # its own row, under the pattern
    total = max(b["y"] + b["height"] for b in boxes.values()) - min(b["y"] for b in boxes.values())
    assert total < 2700 + attribution["height"], f"the dashboard is {total:.0f} px tall"
    for kind in ("headscores", "composition", "attention", "ov", "qk"):
        root = nb.locator(f".cw-root[data-cw-kind={kind}]").first
        shown = root.locator("select[aria-label=Head]").is_visible()
        assert shown == (kind == "attention"), kind  # the one pair: the attention pattern's


def test_composition_edges_agree_with_analysis_and_threshold_hides_them(nb, model):
    comp = roots(nb)["composition"]
    k = composition_scores(model, "K")
    drawn = edges(comp)
    threshold = float(comp.get_attribute("data-cw-threshold"))
    pairs = [(a, b, c, d) for a in range(2) for b in range(4) for c in range(2) for d in range(4) if a < c]
    want = {p for p in pairs if k[p] >= threshold}
    assert set(drawn) == want and PREV + IND in drawn
    for key, raw in drawn.items():
        assert abs(raw - float(k[key])) < 1e-6
    set_threshold(nb, comp, 0.0)
    nb.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 16", arg=comp.element_handle())
    set_threshold(nb, comp, 0.9)
    nb.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 0", arg=comp.element_handle())
    top = float(comp.locator("input.cw-slider").input_value())  # the slider stops at its top
    assert top >= float(k[PREV + IND])
    nb.wait_for_timeout(400)  # the slider reaches the kernel (throttled)
    assert abs(float(py(nb, "print(dash.composition.threshold)")) - top) < 1e-9
    set_threshold(nb, comp, threshold)
    nb.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 1", arg=comp.element_handle())


def test_baseline_kind_and_view_controls_change_the_picture(nb, model):
    comp = roots(nb)["composition"]
    comp.locator("input[aria-label='baseline-corrected scores']").check()
    note = comp.locator(".cw-comp-note")
    nb.wait_for_function("(el) => el.textContent.includes('baseline-corrected')", arg=note.element_handle())
    assert len(edges(comp)) == 1  # the threshold moved with the units: the same edge stays
    assert py(nb, "print(dash.composition.baseline)") == "True"
    comp.locator("input[aria-label='baseline-corrected scores']").uncheck()
    comp.locator("button[data-kind=V]").click()
    wait_attr(comp, "data-cw-comp-kind", "V")
    not_busy = "(el) => !el.querySelector('.cw-busy') || el.querySelector('.cw-busy').hidden"
    nb.wait_for_function(not_busy, arg=comp.element_handle())
    set_threshold(nb, comp, 0.0)
    nb.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 16", arg=comp.element_handle())
    v = composition_scores(model, "V")
    for key, raw in edges(comp).items():
        assert abs(raw - float(v[key])) < 1e-6
    comp.locator("select[aria-label=view]").select_option("matrix")
    wait_attr(comp, "data-cw-view", "matrix")
    assert canvas_stats(comp.locator(".cw-heatmap-canvas").first)["colours"] > 5
    hover_cell(nb, comp, PREV[1], IND[1])  # writer row L0H2, reader column L1H1
    text = comp.locator(".cw-readout").first.text_content()
    assert "L0H2 → L1H1" in text
    assert abs(float(re.search(r"V-composition ([0-9.e-]+)", text).group(1)) - float(v[PREV + IND])) < 1e-3
    comp.locator("select[aria-label=view]").select_option("graph")
    comp.locator("button[data-kind=K]").click()
    wait_attr(comp, "data-cw-comp-kind", "K")
    set_threshold(nb, comp, 0.13)
    nb.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 1", arg=comp.element_handle())


def test_click_in_head_scores_moves_the_dashboard(nb, model):
    r = roots(nb)
    hs, att = r["headscores"], r["attention"]
    hs.locator(".cw-thumb").nth(0).click()  # previous-token grid
    wait_attr(hs, "data-cw-score", "previous_token")
    click_cell(nb, hs, *PREV)
    wait_attr(att, "data-cw-head", str(PREV[1]))
    wait_attr(att, "data-cw-layer", str(PREV[0]))
    wait_attr(hs, "data-cw-head", str(PREV[1]))
    assert py(nb, "print(dash.attention.layer, dash.attention.head, dash.composition.head)") == f"{PREV[0]} {PREV[1]} {PREV[1]}"
    hover_cell(nb, hs, *IND)
    text = hs.locator(".cw-readout").first.text_content()
    assert text.startswith(f"L{IND[0]} H{IND[1]}")
    want = float(head_scores(model, "induction")[IND])
    assert abs(float(re.search(r"induction ([0-9.e-]+)", text).group(1)) - want) < 1e-3


def test_click_on_a_composition_edge_shows_the_pair_and_moves_the_dashboard(nb, model):
    r = roots(nb)
    comp, att = r["composition"], r["attention"]
    comp.locator(f"path.cw-edge-hit[data-edge='{PREV[0]},{PREV[1]},{IND[0]},{IND[1]}']").click(force=True)
    wait_attr(att, "data-cw-layer", str(IND[0]))
    wait_attr(att, "data-cw-head", str(IND[1]))
    pair = comp.locator(".cw-comp-pair .cw-heatmap-canvas")
    pair.nth(2).wait_for(timeout=30_000)
    assert pair.count() == 3
    for i in range(3):
        assert canvas_stats(pair.nth(i))["colours"] > 5
    assert py(nb, "print(dash.composition.selected_pair)") == str([list(PREV), list(IND)])
    nb.mouse.move(0, 0)  # off the graph: the read-out names the selected pair, not a hovered edge
    kind = comp.get_attribute("data-cw-comp-kind")
    text = comp.locator(".cw-readout").first.text_content()
    assert text.startswith(f"selected: L{PREV[0]}H{PREV[1]} → L{IND[0]}H{IND[1]} · {kind}-composition "), text
    assert text.endswith("click it again to release"), text
    assert not comp.locator("input[aria-label='baseline-corrected scores']").is_checked()  # raw scores shown
    shown = float(re.search(rf"{kind}-composition ([0-9.e-]+) \(baseline ", text).group(1))
    assert abs(shown - float(composition_scores(model, kind)[PREV + IND])) < 1e-3, text


def test_head_picked_while_the_kernel_is_busy_redraws_every_child_at_once(nb):
    att = nb.locator(".cw-root[data-cw-kind=attention]").first
    new = (int(att.get_attribute("data-cw-head")) + 1) % 4
    cell = start_code(nb, "import time; time.sleep(8)")
    prompt = cell.locator(".jp-InputArea-prompt")
    prompt.filter(has_text="*").wait_for(timeout=10_000)
    t0 = time.time()
    att.locator("select[aria-label=Head]").select_option(str(new))
    for kind in ("headscores", "composition", "ov", "qk"):  # browser-side links: no kernel needed
        wait_attr(nb.locator(f".cw-root[data-cw-kind={kind}]").first, "data-cw-head", str(new), timeout=5_000)
    assert time.time() - t0 < 6 and "*" in prompt.text_content()  # the kernel is still asleep
    wait_kernel_idle(nb, 30_000)
    assert py(nb, "print(dash.head_scores.head, dash.composition.head, dash.ov.head, dash.qk.head)") == " ".join([str(new)] * 4)


# ----- exported page, offline ------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory, model):
    import circuitwidgets as cw

    dash = cw.Dashboard(model, prompt=PROMPT)
    dash.composition.selected_pair = [list(PREV), list(IND)]
    return dash.save_html(tmp_path_factory.mktemp("export") / "dashboard.html")


def test_exported_dashboard_works_offline(page, exported, model):
    requested = open_offline(page, exported)
    assert_all_drawn(page)
    r = roots(page)
    hs, comp, att = r["headscores"], r["composition"], r["attention"]
    # head links live in the page: a click in the score grid moves the attention widget
    click_cell(page, hs, 1, 3)
    wait_attr(att, "data-cw-head", "3")
    assert hs.get_attribute("data-cw-head") == "3"
    # composition: every kind was saved, the threshold works, the saved pair is drawn
    assert comp.locator(".cw-comp-pair .cw-heatmap-canvas").count() == 3
    comp.locator("button[data-kind=Q]").click()
    wait_attr(comp, "data-cw-comp-kind", "Q")
    assert comp.locator(".cw-error").first.is_hidden()
    set_threshold(page, comp, 0.0)
    page.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 16", arg=comp.element_handle())
    q = composition_scores(model, "Q")
    for key, raw in edges(comp).items():
        assert abs(raw - float(q[key])) < 1e-6
    set_threshold(page, comp, 1.0)
    page.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 0", arg=comp.element_handle())
    assert network_urls(requested) == []
    assert page.cw_errors == []
