"""Ablation and Patching in a real browser: a JupyterLab notebook on the demo model, and their exported
pages opened from disk with the network blocked.

Checked: the ablation grid draws; hovering a cell shows its effect, 95 % interval and p-value (equal to
circuitwidgets.analysis); clicking heads toggles the ablated set in the kernel, and the combined-effect
panel and the per-position strip follow; switching Patching's site recomputes and redraws the grid;
its attribution mode draws the estimates and a clicked head's exact value beside its estimate; the
composition diagram's causal toggle redraws the edges by their path-patching effect;
the exported pages draw with no kernel (hover, prompt switch, normalised toggle). The JupyterLab tests
share one notebook page and run in file order.
"""

from __future__ import annotations

import re
import sys
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
    wait_attr,
    wait_drawn,
    write_notebook,
)
from factories import small_bridge  # noqa: E402

N_BOOT = 200
SECOND = range(21, 40)  # the logits predicting the second copy of the default prompts
CELLS = [
    "import circuitwidgets as cw\nmodel = cw.demo_model()\nab = cw.Ablation(model, n_boot=200)\nab",
    "pt = cw.Patching(model)\npt",
    "clean = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=4, seed=3)\n"
    "other = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=4, seed=4)\n"
    "cd = cw.CompositionDiagram(model, 'K', clean=clean, corrupted=other, positions=range(11, 20), direction='noising')\ncd",
]


@pytest.fixture(scope="module")
def model():
    import circuitwidgets as cw

    return cw.demo_model()


@pytest.fixture(scope="module")
def effects(model):
    from circuitwidgets import analysis

    tokens = analysis.repeated_random_tokens(model, seq_len=20, batch=8)
    return analysis.ablation_effects(model, tokens, positions=SECOND, n_boot=N_BOOT, progress=False)


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "interventions.ipynb", CELLS)
    page = browser.new_page()
    page.set_viewport_size({"width": 1300, "height": 1400})
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    open_notebook(page, lab, "interventions.ipynb")
    run_all(page)
    yield page
    page.close()


def py(page, code: str) -> str:
    return "".join(run_code(page, code).locator(".jp-OutputArea-output").all_text_contents()).strip()


def root_of(page, kind: str):
    return page.locator(f".cw-root[data-cw-kind={kind}]").first


def grid_of(root):
    return root.locator(".cw-heatmap").first


def hover_cell(page, root, row: int, col: int) -> None:
    page.mouse.move(*cell_centre(grid_of(root), row, col))


def click_cell(page, root, row: int, col: int) -> None:
    page.mouse.click(*cell_centre(grid_of(root), row, col))


def assert_interval_readout(root, effects, row: int, col: int) -> None:
    text = root.locator(".cw-ab-readout").text_content()
    assert text.startswith(f"L{row} H{col}") and "95 % interval [" in text and "p = " in text, text
    assert effects.p_method in text and f"bootstrap, {N_BOOT} resamples, seed 0" in text, text
    shown = [float(x) for x in re.search(r"effect ([-+0-9.e]+) · 95 % interval \[([-+0-9.e]+), ([-+0-9.e]+)\]", text).groups()]
    want = [float(effects.effect[row, col]), float(effects.low[row, col]), float(effects.high[row, col])]
    assert shown == pytest.approx(want, abs=1e-3), text
    assert float(re.search(r"p = ([0-9.e-]+)", text).group(1)) == pytest.approx(float(effects.p_value[row, col]), rel=1e-2)


# ----- JupyterLab -------------------------------------------------------------------------------------


def test_the_ablation_grid_draws_and_a_hovered_cell_shows_its_interval(nb, effects):
    assert error_outputs(nb) == []
    root = root_of(nb, "ablation")
    wait_drawn(root)
    assert root.locator(".cw-error").first.is_hidden()
    assert canvas_stats(root.locator(".cw-heatmap-canvas").first)["colours"] > 8
    assert canvas_stats(root.locator(".cw-chart-canvas").first)["colours"] > 2
    hover_cell(nb, root, 1, 2)
    assert_interval_readout(root, effects, 1, 2)
    assert "No head ablated" in root.locator(".cw-ab-joint").text_content()
    assert nb.cw_errors == []


def test_clicking_heads_toggles_the_ablated_set_and_the_combined_effect_and_strip_follow(nb, effects):
    root = root_of(nb, "ablation")
    chart = root.locator(".cw-chart-canvas").first
    before = canvas_stats(chart)["hash"]
    click_cell(nb, root, 1, 0)
    wait_attr(root, "data-cw-joint-heads", "L1H0")
    panel = root.locator(".cw-ab-joint")
    assert "combined effect" in panel.text_content()
    wait_attr(root.locator(".cw-chart").first, "data-heads", "L1H0")
    assert canvas_stats(chart)["hash"] != before  # the strip now has the ablated line
    click_cell(nb, root, 1, 2)
    wait_attr(root, "data-cw-joint-heads", "L1H0,L1H2")
    text = panel.text_content()
    single = float(effects.effect[1, 0] + effects.effect[1, 2])
    assert float(re.search(r"sum of single effects ([-+0-9.e]+)", text).group(1)) == pytest.approx(single, abs=1e-3)
    kernel = py(nb, "print(ab.ablated, round(ab.joint['mean'], 6))")
    assert kernel.startswith("[[1, 0], [1, 2]]")
    combined = float(re.search(r"combined effect ([-+0-9.e]+)", text).group(1))
    assert combined == pytest.approx(float(kernel.split()[-1]), abs=1e-3)
    assert combined > 1  # the second copy's loss rises without two induction heads
    click_cell(nb, root, 1, 0)  # again: out of the set
    wait_attr(root, "data-cw-joint-heads", "L1H2")
    assert py(nb, "print(ab.ablated)") == "[[1, 2]]"
    strip_before = canvas_stats(chart)["hash"]
    root.locator("select[aria-label=Prompt]").select_option("3")
    wait_attr(root.locator(".cw-chart").first, "data-prompt", "3")
    assert canvas_stats(chart)["hash"] != strip_before
    assert nb.cw_errors == []


def test_switching_the_patching_site_changes_the_grid(nb):
    root = root_of(nb, "patching")
    wait_drawn(root)
    wait_attr(root, "data-cw-site", "out")
    assert root.locator(".cw-error").first.is_hidden()
    canvas = root.locator(".cw-heatmap-canvas").first
    before = canvas_stats(canvas)
    assert before["colours"] > 8
    # raw values: the colours reach the whole effect (|clean − corrupted|) around the corrupted value, so a head that
    # restores a sliver of it is drawn faint, whatever the largest head's share
    low, high = (float(x) for x in root.locator(".cw-heatmap[data-domain]").first.get_attribute("data-domain").split())
    clean, corrupted = (float(x) for x in py(nb, "print(pt.patching['clean_value'], pt.patching['corrupted_value'])").split())
    assert (low + high) / 2 == pytest.approx(corrupted, abs=1e-5)
    assert (high - low) / 2 >= abs(clean - corrupted) - 1e-5
    root.locator("select[aria-label=site]").select_option("v")
    wait_attr(root, "data-cw-site", "v")
    assert canvas_stats(canvas)["hash"] != before["hash"]
    assert py(nb, "print(pt.site, pt.patching['site'])") == "v v"
    click_cell(nb, root, 1, 3)  # selects the head, in the kernel too
    wait_attr(root, "data-cw-head", "3")
    assert py(nb, "print(pt.layer, pt.head)") == "1 3"
    nb.mouse.move(0, 0)  # off the grid: the read-out names the selected head
    nb.wait_for_function("(el) => el.textContent.startsWith('selected L1 H3 · v · patched ')",
                         arg=root.locator(".cw-pt-readout").element_handle())
    assert nb.cw_errors == []


def test_attribution_mode_draws_estimates_and_a_clicked_heads_exact_value(nb):
    root = root_of(nb, "patching")
    canvas = root.locator(".cw-heatmap-canvas").first
    before = canvas_stats(canvas)["hash"]
    root.locator("select[aria-label=Method]").select_option("attribution")
    wait_attr(root, "data-cw-method", "attribution")
    assert canvas_stats(canvas)["hash"] != before
    assert root.locator("select[aria-label=Estimator]").is_visible()
    click_cell(nb, root, 1, 1)
    wait_attr(root, "data-cw-verified", "2")  # the head selected before (L1H3) and this one
    readout = root.locator(".cw-pt-readout")
    nb.mouse.move(0, 0)
    nb.wait_for_function("(el) => el.textContent.includes(' · exact ')", arg=readout.element_handle())
    text = readout.text_content()
    assert text.startswith("selected L1 H1 · v · AtP estimate ") and " · exact " in text, text
    kernel = float(py(nb, "print(pt.verified['values'][pt.verified['heads'].index([1, 1])])"))
    assert float(readout.get_attribute("data-exact")) == pytest.approx(kernel, abs=1e-5)
    assert "Estimated by AtP" in root.locator(".cw-pt-caption").text_content()
    assert nb.cw_errors == []


def test_the_causal_toggle_colours_the_edges_by_path_patching(nb):
    root = root_of(nb, "composition")
    wait_drawn(root)
    wait_attr(root, "data-cw-edges", "weights")
    root.locator("button[data-edges=causal]").click()
    wait_attr(root, "data-cw-edges", "causal")
    assert py(nb, "print(cd.edge_value, cd.causal['computed']['K'])") == "causal [[0, 1]]"
    note = root.locator(".cw-comp-note-line").text_content()
    assert note.startswith("path patching: the clean run with each K edge's corrupted sender output") and "0→1" in note
    edge = root.locator("path.cw-edge").last  # the strongest edge drawn
    ident = edge.get_attribute("data-edge")
    l1, h1, l2, h2 = map(int, ident.split(","))
    want = float(py(nb, f"print(cw.transport.decode(cd.causal)[1, 1, {l1}, {h1}, {l2}, {h2}].item())"))
    assert float(edge.get_attribute("data-value")) == pytest.approx(want, abs=1e-5)
    assert (l1, h1) in [(0, 1), (0, 3)]  # a previous-token head's K edge carries the most
    root.locator(f"path.cw-edge-hit[data-edge='{ident}']").dispatch_event("click")  # select the edge
    nb.mouse.move(0, 0)  # off the graph: the read-out names the selected edge
    readout = root.locator(".cw-readout").first
    nb.wait_for_function("(el) => el.textContent.startsWith('selected: ')", arg=readout.element_handle())
    text = readout.text_content()
    assert text.startswith(f"selected: L{l1}H{h1} → L{l2}H{h2} · K path: carries ") and "(weights)" in text, text
    assert nb.cw_errors == []


# ----- exported pages, offline -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory, model):
    import ipywidgets

    import circuitwidgets as cw
    from circuitwidgets.widgets._export import export_html

    ab = cw.Ablation(model, n_boot=N_BOOT, ablated=[[1, 0], [1, 2]])
    pt = cw.Patching(model)
    grouped = cw.Patching(small_bridge(n_key_value_heads=2), site="k")  # 2 K/V heads for 4 query heads
    return export_html(ipywidgets.VBox([ab, pt, grouped]), tmp_path_factory.mktemp("export") / "interventions.html")


def test_the_exported_pages_draw_with_no_kernel(page, exported, effects):
    requested = open_offline(page, exported)
    ab, pt = root_of(page, "ablation"), root_of(page, "patching")
    for root in (ab, pt):
        wait_drawn(root)
        assert root.locator(".cw-error").first.is_hidden()
        assert canvas_stats(root.locator(".cw-heatmap-canvas").first)["colours"] > 8
    assert ab.get_attribute("data-cw-joint-heads") == "L1H0,L1H2"
    assert "combined effect" in ab.locator(".cw-ab-joint").text_content()
    hover_cell(page, ab, 0, 1)
    assert_interval_readout(ab, effects, 0, 1)
    chart = ab.locator(".cw-chart-canvas").first
    before = canvas_stats(chart)["hash"]
    ab.locator("select[aria-label=Prompt]").select_option("5")  # every prompt's strip was saved
    wait_attr(ab.locator(".cw-chart").first, "data-prompt", "5")
    assert canvas_stats(chart)["hash"] != before
    assert ab.locator("select[aria-label=metric]").is_disabled()  # what needs the kernel is off
    grid = pt.locator(".cw-heatmap-canvas").first
    before = canvas_stats(grid)["hash"]
    pt.locator("input[aria-label=normalised]").check()
    wait_attr(pt, "data-cw-normalised", "true")
    assert canvas_stats(grid)["hash"] != before
    assert pt.locator("select[aria-label=site]").is_disabled()
    assert pt.locator(".cw-pt-note").is_hidden()  # the demo model's K/V heads are not grouped
    grouped = page.locator(".cw-root[data-cw-kind=patching]").nth(1)
    wait_drawn(grouped)
    note = grouped.locator(".cw-pt-note")
    assert note.is_visible() and "K/V heads are grouped (2 K/V heads for 4 query heads)" in note.text_content()
    assert network_urls(requested) == []
    assert page.cw_errors == []
