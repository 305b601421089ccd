"""Training (heads across training) in a real browser (Chromium), on the demo model's training run.

An exported page opened from disk with the network off: both charts draw, the phase-change window is shaded, the
slider and the arrow keys move the selected step, play walks the steps, hovering a line names its head and clicking
it selects it, the axis switches to linear, the page says the step models need the kernel, and the dark theme draws
on a dark background. In JupyterLab (a kernel): a click on the chart selects a step and a linked AttentionPattern
redraws with that step's model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    canvas_stats,
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

STEPS = "[0, 401, 1072, 1753, 2243, 2868, 6000]"
SETUP = f"""
import circuitwidgets as cw
run = cw.demo_checkpoints()
ck = cw.Checkpoints(load=run.at, steps={STEPS})
training = cw.Training(ck, metrics=["induction", "loss", "in_context_loss"])
training
"""
FOLLOWER = """
pattern = cw.AttentionPattern(ck.at(6000), prompt="abcdefghabcdefgh", layer=1, head=1)
training.link(pattern)
pattern
"""


def root_of(page):
    return page.locator(".cw-root[data-cw-kind=training]").first


def line_point(page, root, name: str, step_index: int) -> tuple[float, float]:
    """Page coordinates of series `name`'s point at step `step_index` on the head chart."""
    canvas = root.locator(".cw-tr-canvas").first
    canvas.scroll_into_view_if_needed()
    point = canvas.evaluate(
        "(c, [name, i]) => { const k = c.cwScene.names.indexOf(name); return c.cwScene.lines[k][i]; }", [name, step_index]
    )
    box = root.locator(".cw-tr-overlay").first.bounding_box()
    return box["x"] + point[0], box["y"] + point[1]


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    import circuitwidgets as cw

    run = cw.demo_checkpoints()
    ck = cw.Checkpoints(load=run.at, steps=[0, 401, 1072, 1753, 2243, 2868, 6000])
    training = cw.Training(ck, metrics=["induction", "composition_k", "loss", "in_context_loss"], defer=False)
    assert training.curves["window"] == [1753, 2868]
    return training.save_html(tmp_path_factory.mktemp("training") / "training.html"), training


def test_the_exported_page_draws_the_curves_and_scrubs_the_steps(page, page_file):
    path, training = page_file
    requested = open_offline(page, path)
    root = root_of(page)
    wait_drawn(root)
    assert root.get_attribute("data-cw-lines") == "8" and root.get_attribute("data-cw-scale") == "log"
    assert root.get_attribute("data-cw-window") == "1753-2868" and root.get_attribute("data-cw-loss-window") == "1753-2868"
    heads, losses = (canvas_stats(root.locator(".cw-tr-canvas").nth(i)) for i in range(2))
    assert heads["painted"] > 5000 and heads["colours"] > 20 and losses["colours"] > 10
    assert "needs the kernel" in root.locator(".cw-tr-kernel").text_content()
    assert root.locator(".cw-tr-stop").is_hidden() and "scanned 7 checkpoints" in root.locator(".cw-tr-progress").text_content()
    # the slider and the arrow keys move the step; the readout says it
    assert root.get_attribute("data-cw-step") == "6000"
    slider = root.locator(".cw-tr-slider")
    slider.fill("3")
    wait_attr(root, "data-cw-step", "1753")
    assert "step 1\u202f753 (4 of 7)" in root.locator(".cw-tr-step").text_content()
    before = canvas_stats(root.locator(".cw-tr-canvas").first)["hash"]
    root.press("ArrowRight")
    wait_attr(root, "data-cw-step", "2243")
    assert canvas_stats(root.locator(".cw-tr-canvas").first)["hash"] != before  # the cursor moved
    # play walks to the last step and stops there
    slider.fill("4")
    root.locator(".cw-tr-play").click()
    wait_attr(root, "data-cw-playing", "on")
    wait_attr(root, "data-cw-step", "6000", timeout=10_000)
    wait_attr(root, "data-cw-playing", "off", timeout=10_000)
    # hovering a line names its head; clicking it selects it
    x, y = line_point(page, root, "L1H3", 5)
    page.mouse.move(x, y)
    readout = root.locator(".cw-tr-readout")
    assert readout.get_attribute("data-cw-series") == "L1H3" and readout.text_content().startswith("L1H3")
    page.mouse.click(x, y)
    wait_attr(root, "data-cw-head", "3")
    wait_attr(root, "data-cw-step", "2868")
    # a linear axis
    root.locator("button[data-scale=linear]").click()
    wait_attr(root, "data-cw-scale", "linear")
    assert network_urls(requested) == [] and page.cw_errors == []


def test_the_exported_page_in_the_dark(page, page_file):
    path, _ = page_file
    page.emulate_media(color_scheme="dark")
    open_offline(page, path)
    root = root_of(page)
    wait_drawn(root)
    assert root.get_attribute("data-cw-theme") == "dark"
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(255, 255, 255)"
    assert canvas_stats(root.locator(".cw-tr-canvas").first)["colours"] > 20 and page.cw_errors == []


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "training.ipynb", [SETUP, FOLLOWER])
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    open_notebook(page, lab, "training.ipynb")
    run_all(page)
    yield page
    page.close()


def test_in_jupyterlab_the_scan_finishes_and_a_step_picked_redraws_the_linked_pattern(nb):
    assert error_outputs(nb) == []
    root = root_of(nb)
    wait_drawn(root)
    wait_attr(root, "data-cw-scan-state", "done", timeout=120_000)
    wait_attr(root, "data-cw-done", "7", timeout=30_000)
    attention = nb.locator(".cw-root[data-cw-kind=attention]").first
    wait_drawn(attention)
    drawn = int(attention.get_attribute("data-cw-draws"))
    root.locator(".cw-tr-slider").fill("0")  # step 0: the initialisation
    wait_attr(root, "data-cw-step", "0")
    wait_drawn(attention, above=drawn, timeout=60_000)
    out = "".join(run_code(nb, "print(pattern.model is ck.at(0), pattern.model_note, training.step)")
                  .locator(".jp-OutputArea-output").all_text_contents()).strip()
    assert out == "True step 0 of the training run 0"
    assert nb.cw_errors == []
