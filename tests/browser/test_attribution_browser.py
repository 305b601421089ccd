"""LogitAttribution in a real browser: in JupyterLab and as an exported page opened offline.

The grid draws; hovering a head shows the value circuitwidgets.analysis computes for it; the bars
show the other terms and their sum equals the model's logit; clicking a head sets the kernel's
`layer`/`head`; clicking a token moves the position and redraws with that position's values;
typing an out token re-runs the model for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import (  # noqa: E402
    canvas_stats,
    cell_centre,
    network_urls,
    open_notebook,
    open_offline,
    run_all,
    run_code,
    wait_attr,
    wait_drawn,
    write_notebook,
)

import circuitwidgets as cw  # noqa: E402
from circuitwidgets.analysis import logit_attribution  # noqa: E402

PROMPT = "qwertyuiopqwertyuiop"
SETUP = f"""
import circuitwidgets as cw
model = cw.demo_model()
w = cw.LogitAttribution(model, prompt={PROMPT!r}, layer=0, head=0)
w
"""


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


def root_of(page):
    return page.locator(".cw-root[data-cw-kind=attribution]").first


def hover_head(page, root, row: int, col: int) -> dict:
    """Hover grid cell (row, col); returns the read-out's text and data attributes."""
    grid = root.locator(".cw-heatmap").first
    page.mouse.move(*cell_centre(grid, row, col))
    readout = root.locator(".cw-la-readout")
    page.wait_for_function(
        "([el, l, h]) => el.dataset.layer === String(l) && el.dataset.head === String(h)"
        " && !el.textContent.startsWith('selected')",
        arg=[readout.element_handle(), row, col],
    )
    return {"text": readout.inner_text(), **readout.evaluate("(el) => ({...el.dataset})")}


def check_position(page, root, model, position: int) -> None:
    """Every head's hover value and every bar equal the analysis at `position`; the sum is the model's logit."""
    want = logit_attribution(model, PROMPT, position)
    for row in range(2):
        for col in range(4):
            got = hover_head(page, root, row, col)
            assert got["position"] == str(position) and got["layer"] == str(row)
            assert float(got["value"]) == pytest.approx(want[f"L{row}H{col}"], abs=1e-5), got
            assert f"L{row} H{col}" in got["text"] and "destination" in got["text"] and "out" in got["text"]
    for name in ("embed", "pos_embed", "bias", "b_U"):
        value = root.locator(f".cw-la-row[data-term={name}]").get_attribute("data-value")
        assert float(value) == pytest.approx(want[name], abs=1e-5), name
    total = root.locator(".cw-la-sum")
    assert float(total.get_attribute("data-total")) == pytest.approx(want.logit, abs=1e-4)
    assert float(total.get_attribute("data-logit")) == pytest.approx(want.logit, abs=1e-5)


def check_widget(page, model, *, kernel=None) -> None:
    root = root_of(page)
    count = wait_drawn(root)
    n = len(cw.as_view(model).to_str_tokens(cw.as_view(model).to_tokens(PROMPT)))
    assert root.get_attribute("data-cw-position") == str(n - 2)  # the default: second to last
    grid = root.locator(".cw-heatmap-canvas").first
    assert canvas_stats(grid)["colours"] > 10
    assert canvas_stats(root.locator(".cw-heatmap-canvas").nth(1))["colours"] > 10  # positions x heads
    caption = root.locator(".cw-la-caption").inner_text()
    assert "no final norm" in caption and f"destination {n - 2}" in caption
    check_position(page, root, model, n - 2)

    # click a head: the selection moves (in the kernel too, when there is one)
    page.mouse.click(*cell_centre(root.locator(".cw-heatmap").first, 1, 3))
    wait_attr(root, "data-cw-layer", "1")
    wait_attr(root, "data-cw-head", "3")
    if kernel:
        assert kernel("print(w.layer, w.head)") == "1 3"

    # click a token: the position moves and everything redraws with its values, no model run needed
    before = canvas_stats(grid)["hash"]
    count = int(root.get_attribute("data-cw-draws"))
    root.locator(".cw-token[data-index='5']").click()
    wait_attr(root, "data-cw-position", "5")
    wait_drawn(root, above=count)
    assert canvas_stats(grid)["hash"] != before, "a new position left the grid unchanged"
    assert "destination 5" in root.locator(".cw-la-caption").inner_text()
    check_position(page, root, model, 5)
    if kernel:
        assert kernel("print(w.position)") == "5"


def test_in_jupyterlab(lab, page, model):
    write_notebook(lab.root / "attribution_check.ipynb", [SETUP])
    open_notebook(page, lab, "attribution_check.ipynb")
    run_all(page)

    def kernel(code: str) -> str:
        page.evaluate("() => document.activeElement?.blur()")  # keys to the notebook, not the widget
        return run_code(page, code).locator(".jp-OutputArea-output").inner_text().strip()

    check_widget(page, model, kernel=kernel)
    # type an out token: the kernel re-runs for it, and the read-out follows
    root = root_of(page)
    count = int(root.get_attribute("data-cw-draws"))
    box = root.locator("input[aria-label='Out token']")
    box.fill("q")
    box.press("Enter")
    wait_drawn(root, above=count)
    wait_attr(root, "data-cw-target", str(cw.as_view(model).token_id("q")))
    assert "out “q”" in root.locator(".cw-la-caption").inner_text()
    want = logit_attribution(model, PROMPT, 5, "q")
    got = hover_head(page, root, 1, 0)
    assert float(got["value"]) == pytest.approx(want["L1H0"], abs=1e-5)
    # a string of two tokens: the widget says why, and keeps its picture
    box.fill("qw")
    box.press("Enter")
    page.wait_for_function("(el) => /2 tokens/.test(el.textContent)", arg=root.locator(".cw-error").first.element_handle())
    assert root.get_attribute("data-cw-target") == str(cw.as_view(model).token_id("q"))
    assert page.cw_errors == []


def test_exported_html_offline(page, model, tmp_path):
    path = cw.LogitAttribution(model, prompt=PROMPT, layer=0, head=0).save_html(tmp_path / "attribution.html")
    requested = open_offline(page, path)
    check_widget(page, model)
    assert network_urls(requested) == []
    assert page.cw_errors == []
