"""Colour scales and self-consistent exports, in Chromium.

- A diffuse head of a 2 000-token prompt on the GPT-2-small shape (random weights: every weight
  ~1/n) is near-blank on the linear scale, where its read-out says to try log, and drawn on the log
  and relative scales, whose legend names them: on an exported page, and in JupyterLab where the
  scale select redraws it.
- An exported Dashboard never shows two layers as selected: a head of another layer picked in its
  head scores moves every child to it, and the children that hold one layer (attention patterns,
  OV, QK) hide their picture and say that layer needs the kernel, until a head of their layer is
  picked again.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    cell_centre,
    open_notebook,
    open_offline,
    run_all,
    wait_attr,
    wait_drawn,
    watched_page,
    write_notebook,
)
from _marimo import marimo_run  # noqa: E402

SETUP = """
import torch, circuitwidgets as cw
from factories import small_bridge
gpt2_shape = dict(d_model=768, d_head=64, n_heads=12, n_layers=1, n_ctx=2048, d_vocab=1000, attn_only=False,
                  normalization_type="LN", d_mlp=3072, act_fn="gelu")
ids = torch.randint(0, 1000, (1, 2000), generator=torch.Generator().manual_seed(0))
w = cw.AttentionPattern(small_bridge(**gpt2_shape), tokens=ids, layer=0, head=3)
w
"""

#: Share of the heatmap plot's lower triangle, rows from the middle down, whose pixels differ from
#: the colour of weight 0 (the scale's lowest colour), read from the cell image drawn.
DRAWN_SHARE = """(canvas) => {
  const {left, top, plotW, plotH} = canvas.cwScene.layout;
  const k = canvas.width / canvas.getBoundingClientRect().width;
  const ctx = canvas.getContext("2d");
  const x0 = Math.ceil(left * k), y0 = Math.ceil((top + plotH / 2) * k);
  const w = Math.floor(plotW * k), h = Math.floor(plotH / 2 * k) - 2;
  const data = ctx.getImageData(x0, y0, w, h).data;
  const bg = canvas.cwScene.ops.find((op) => op.type === "bar").stops.at(-1)[1];  // the bar's bottom: weight 0
  const [r0, g0, b0] = bg.match(/\\d+/g).map(Number);
  let inside = 0, drawn = 0;
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    if (x / w > (y + h) / (2 * h) - 0.01) continue;  // keep left of the diagonal (rows from the middle)
    const i = 4 * (y * w + x);
    inside++;
    if (Math.abs(data[i] - r0) + Math.abs(data[i + 1] - g0) + Math.abs(data[i + 2] - b0) > 24) drawn++;
  }
  return drawn / inside;
}"""


def legend_caption(root) -> str:
    ops = root.locator(".cw-heatmap-canvas").first.evaluate("(c) => c.cwScene.ops.filter((op) => op.legend).map((op) => op.text)")
    return "".join(ops)


def drawn_share(root) -> float:
    return root.locator(".cw-heatmap-canvas").first.evaluate(DRAWN_SHARE)


@pytest.fixture(scope="module")
def diffuse_pages(tmp_path_factory):
    import torch
    from factories import small_bridge

    import circuitwidgets as cw

    model = small_bridge(d_model=768, d_head=64, n_heads=12, n_layers=1, n_ctx=2048, d_vocab=1000, attn_only=False,
                         normalization_type="LN", d_mlp=3072, act_fn="gelu")
    ids = torch.randint(0, 1000, (1, 2000), generator=torch.Generator().manual_seed(0))
    folder = tmp_path_factory.mktemp("scales")
    w = cw.AttentionPattern(model, tokens=ids, layer=0, head=3)
    pages = {}
    for kind in ("linear", "log", "relative"):
        w.color_scale = kind
        pages[kind] = w.save_html(folder / f"{kind}.html")
    return pages


def test_a_diffuse_2000_token_head_is_drawn_on_the_log_and_relative_scales_of_an_exported_page(page, diffuse_pages):
    shares, captions, hinted = {}, {}, {}
    for kind, path in diffuse_pages.items():
        open_offline(page, path)
        root = page.locator(".cw-root[data-cw-kind=attention]").first
        wait_drawn(root)
        assert root.get_attribute("data-cw-scale") == kind
        shares[kind], captions[kind] = drawn_share(root), legend_caption(root)
        hinted[kind] = "try colour: log" in root.locator(".cw-readout").text_content()
        select = root.locator(".cw-scale-select")
        assert select.input_value() == kind and select.is_disabled()  # the page holds one scale
    assert shares["linear"] < 0.5, shares  # the near-blank triangle of a fixed 0-1 scale
    assert shares["log"] > 0.95 and shares["relative"] > 0.95, shares
    assert captions == {"linear": "", "log": "log", "relative": "× uniform"}
    assert hinted == {"linear": True, "log": False, "relative": False}  # the near-blank picture says what to try
    # the token view follows the zoom: the window's sources, numbered as in the prompt
    root = page.locator(".cw-root[data-cw-kind=attention]").first
    assert root.locator(".cw-token").count() == 2000
    root.locator(".cw-zoom-button", has_text="+").click()
    root.locator(".cw-zoom-button", has_text="+").click()
    root.page.wait_for_function("(el) => el.dataset.cwWindow !== '0,0,2000'", arg=root.element_handle())
    r0, c0, size = map(int, root.get_attribute("data-cw-window").split(","))
    tokens = root.locator(".cw-token")
    assert size == 500 and tokens.count() == size
    assert tokens.first.get_attribute("data-index") == str(c0)
    assert root.locator(".cw-strip-note").text_content() == f"tokens {c0}–{c0 + size - 1} of 2000 (the zoomed window)"
    assert page.cw_errors == []


def test_the_scale_select_redraws_a_diffuse_head_in_jupyterlab(lab, browser):
    tests = Path(__file__).parents[1]
    shutil.copy(tests / "factories.py", lab.root / "factories.py")
    write_notebook(lab.root / "scales.ipynb", [SETUP])
    page = watched_page(browser)
    try:
        open_notebook(page, lab, "scales.ipynb")
        run_all(page, timeout=300_000)
        root = page.locator(".cw-root[data-cw-kind=attention]").first
        wait_drawn(root, timeout=120_000)
        assert root.get_attribute("data-cw-scale") == "linear"
        blank = drawn_share(root)
        root.locator(".cw-scale-select").select_option("log")
        wait_attr(root, "data-cw-scale", "log", timeout=60_000)
        assert legend_caption(root) == "log"
        assert blank < 0.5 < 0.95 < drawn_share(root)
        assert page.cw_errors == []
    finally:
        page.close()


def test_the_scale_select_redraws_a_diffuse_head_in_marimo(browser):
    with marimo_run(Path(__file__).with_name("marimo_scales_app.py")) as app:
        page = watched_page(browser)
        try:
            page.goto(app.url)
            root = page.locator(".cw-root[data-cw-kind=attention]").first
            wait_drawn(root, timeout=120_000)
            blank = drawn_share(root)
            root.locator(".cw-scale-select").select_option("relative")
            wait_attr(root, "data-cw-scale", "relative", timeout=60_000)
            assert legend_caption(root) == "× uniform"
            assert blank < 0.5 < 0.95 < drawn_share(root), app.log_tail()
            assert page.cw_errors == []
        finally:
            page.close()


@pytest.fixture(scope="module")
def dashboard_page(tmp_path_factory):
    import circuitwidgets as cw

    path = tmp_path_factory.mktemp("dash") / "dash.html"
    d = cw.Dashboard(cw.demo_model(), prompt="abcabcab", layer=0, head=1)
    d.attention.color_scale = "log"
    d.save_html(path)
    return path


def children(page) -> dict:
    kinds = ("headscores", "composition", "attention", "attribution", "ov", "qk")
    return {kind: page.locator(f".cw-root[data-cw-kind={kind}]").first for kind in kinds}


def test_an_exported_dashboard_never_shows_two_layers_as_selected(page, dashboard_page):
    open_offline(page, dashboard_page)
    page.locator("details summary").first.click()  # the circuits, folded under the first glance
    roots = children(page)
    for root in roots.values():
        wait_drawn(root)
    assert roots["attention"].get_attribute("data-cw-scale") == "log"  # the scale is kept in the page
    grid = roots["headscores"].locator(".cw-heatmap").first
    x, y = cell_centre(grid, 1, 1)  # L1H1
    page.mouse.click(x, y)
    for root in roots.values():
        wait_attr(root, "data-cw-head", "1", timeout=5_000)
        wait_attr(root, "data-cw-layer", "1", timeout=5_000)
    for kind in ("attention", "ov", "qk"):  # they hold layer 0 only: no picture, a note instead
        root = roots[kind]
        assert root.get_attribute("data-cw-held") == "0"
        note = root.locator(".cw-held-note")
        assert note.is_visible() and "Layer 1 needs the kernel" in note.text_content()
        assert not root.locator(".cw-heatmap").first.is_visible()
        assert root.locator("select").first.input_value() == "1"  # the layer select says what is selected
    for kind in ("headscores", "composition", "attribution"):
        assert roots[kind].get_attribute("data-cw-held") in (None, "")
    x, y = cell_centre(grid, 0, 2)  # back to layer 0: every picture again
    page.mouse.click(x, y)
    for kind in ("attention", "ov", "qk"):
        root = roots[kind]
        wait_attr(root, "data-cw-held", "", timeout=5_000)
        assert root.get_attribute("data-cw-head") == "2" and root.get_attribute("data-cw-layer") == "0"
        assert root.locator(".cw-heatmap").first.is_visible() and not root.locator(".cw-held-note").is_visible()
    assert page.cw_errors == []
