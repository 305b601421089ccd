"""HeadAtlas in a real browser (Chromium), on the demo model.

An exported page: the scatter draws, clicking a point selects that head and says its examples need
the kernel, hovering reads the head's values, clicking an example marks it. In JupyterLab (a kernel):
the scan runs in the background and finishes, a click on a head selects it in the atlas, in an
`AttentionPattern` linked with ``atlas.link`` and in a linked `Dashboard`, and the new head's examples
arrive; a click on an example opens its text in both. The JupyterLab tests share one notebook page
and run in file order.
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

TEXTS = "[*cw.analysis.repeated_random_tokens(model, seq_len=10, batch=24), 'the cat sat on the mat', 'abc abc abc']"
SETUP = f"""
import circuitwidgets as cw
model = cw.demo_model()
atlas = cw.HeadAtlas(model, {TEXTS}, batch_size=4)
atlas
"""
FOLLOWERS = """
pattern = cw.AttentionPattern(model, prompt="hello")
dash = cw.Dashboard(model, prompt="hello", circuits=False, attribution=False)
atlas.link(pattern)
atlas.link(dash)
import ipywidgets
ipywidgets.VBox([pattern, dash])
"""


def atlas_root(page):
    return page.locator(".cw-root[data-cw-kind=headatlas]").first


def click_head(page, root, layer: int, head: int) -> None:
    """Click the centre of head (layer, head)'s point on the atlas's scatter."""
    canvas = root.locator(".cw-ha-canvas")
    canvas.scroll_into_view_if_needed()
    index = layer * 4 + head  # (the demo model: 4 heads a layer, layers 0 and 1)
    dot = canvas.evaluate("(c, i) => c.cwScene.dots.find((d) => d.i === i)", index)
    box = root.locator(".cw-ha-overlay").bounding_box()
    page.mouse.click(box["x"] + dot["x"], box["y"] + dot["y"])


def test_the_exported_page_draws_every_head_and_selects_by_click(page, tmp_path):
    import circuitwidgets as cw

    model = cw.demo_model()
    texts = [*cw.analysis.repeated_random_tokens(model, seq_len=10, batch=12), "the cat sat on the mat"]
    atlas = cw.HeadAtlas(model, texts, layer=0, head=1, defer=False)  # (Playwright's loop runs here: no background scan)
    requested = open_offline(page, atlas.save_html(tmp_path / "atlas.html"))
    root = atlas_root(page)
    wait_drawn(root)
    stats = canvas_stats(root.locator(".cw-ha-canvas"))
    assert stats["painted"] > 1000 and stats["colours"] > 20  # axes, labels, coloured points
    assert root.get_attribute("data-cw-points") == "8"
    assert root.get_attribute("data-cw-examples") == str(len(atlas.examples["items"]))
    assert "scanned 13 texts" in root.locator(".cw-ha-progress").text_content()
    assert root.locator(".cw-ha-stop").is_hidden()
    # hovering a point reads its values, clicking selects it
    click_head(page, root, 1, 1)
    wait_attr(root, "data-cw-head", "1")
    wait_attr(root, "data-cw-layer", "1")
    assert root.locator(".cw-ha-readout").text_content().startswith("L1H1 · previous token")
    note = root.locator(".cw-ha-examples-note")
    assert note.text_content() == "examples of L1H1 need the kernel: this page holds L0H1's by induction" and note.is_visible()
    assert root.get_attribute("data-cw-examples") == "0"
    # back on the head saved: its examples; clicking one marks it
    click_head(page, root, 0, 1)
    wait_attr(root, "data-cw-head", "1")
    wait_attr(root, "data-cw-layer", "0")
    rows = root.locator(".cw-ha-example")
    assert rows.count() == len(atlas.examples["items"]) and note.is_hidden()
    assert rows.first.locator(".cw-ha-decile").text_content() == "90–100 %"
    first = atlas.examples["items"][0]
    dest = rows.first.locator(".cw-ha-dest")
    assert dest.count() == 1 and dest.get_attribute("data-index") == str(first["dest"])
    # hovering a token colours the strip by its own attention row: the first token (BOS) attends to itself alone
    weights = lambda: rows.first.locator(".cw-token").evaluate_all("(spans) => spans.map((s) => Number(s.dataset.weight))")  # noqa: E731
    shown = weights()  # the destination's row: nothing after it, about 1 in all
    assert max(shown[first["dest"] + 1 :] or [0]) == 0 and abs(sum(shown) - 1) < 0.05
    rows.first.locator(".cw-token").first.hover()
    assert weights()[0] == 1 and max(weights()[1:]) == 0
    rows.nth(1).click()
    item = atlas.examples["items"][1]
    wait_attr(root, "data-cw-example", f"{item['text']},{item['dest']}")
    assert "cw-ha-example-selected" in rows.nth(1).get_attribute("class")
    # the grid draws too
    root.locator("button[data-mode=grid]").click()
    wait_attr(root, "data-cw-mode", "grid")
    assert canvas_stats(root.locator(".cw-heatmap-canvas"))["colours"] > 8
    assert network_urls(requested) == [] and page.cw_errors == []


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "head_atlas.ipynb", [SETUP, FOLLOWERS])
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    open_notebook(page, lab, "head_atlas.ipynb")
    run_all(page)
    yield page
    page.close()


def py(page, code: str) -> str:
    return "".join(run_code(page, code).locator(".jp-OutputArea-output").all_text_contents()).strip()


def test_in_jupyterlab_the_scan_finishes_and_a_click_selects_the_head_everywhere(nb):
    assert error_outputs(nb) == []
    root = atlas_root(nb)
    wait_drawn(root)
    wait_attr(root, "data-cw-scan-state", "done", timeout=60_000)
    wait_attr(root, "data-cw-done", "26")
    assert "scanned 26 texts" in root.locator(".cw-ha-progress").text_content()
    assert root.get_attribute("data-cw-points") == "8"
    click_head(nb, root, 1, 2)
    wait_attr(root, "data-cw-head", "2")
    wait_attr(root, "data-cw-layer", "1")
    wait_attr(root, "data-cw-examples-head", "L1H2", timeout=180_000)  # the kernel's examples of the new head
    assert int(root.get_attribute("data-cw-examples")) >= 9
    attention = nb.locator(".cw-root[data-cw-kind=attention]")
    for i in range(2):  # the AttentionPattern and the Dashboard's, in the browser too
        wait_attr(attention.nth(i), "data-cw-layer", "1", timeout=60_000)
        wait_attr(attention.nth(i), "data-cw-head", "2", timeout=60_000)
    out = py(nb, "print((pattern.layer, pattern.head), (dash.attention.layer, dash.attention.head), dash.head_scores.head)")
    assert out == "(1, 2) (1, 2) 2"
    assert nb.cw_errors == []


def test_in_jupyterlab_a_click_on_an_example_opens_its_text_in_the_linked_views(nb):
    root = atlas_root(nb)
    attention = nb.locator(".cw-root[data-cw-kind=attention]")
    before = [int(attention.nth(i).get_attribute("data-cw-draws")) for i in range(2)]
    row = root.locator(".cw-ha-example").first
    text, dest = row.get_attribute("data-text"), row.get_attribute("data-dest")
    row.click()
    wait_attr(root, "data-cw-example", f"{text},{dest}")
    for i in range(2):
        wait_drawn(attention.nth(i), above=before[i], timeout=60_000)
    check = (
        f"ids = atlas.head_scan.tokens_of({text})\n"
        "print(atlas.example_tokens == ids, pattern.tokens == ids, dash.attention.tokens == ids, "
        "dash.composition.tokens == ids, pattern.selection['query'])"
    )
    assert py(nb, check) == f"True True True True {dest}"
    assert nb.cw_errors == []
