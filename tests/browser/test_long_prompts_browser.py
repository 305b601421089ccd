"""AttentionPattern on an 8 192-token prompt in JupyterLab: overview, zoom to exact cells, hover values.

The model (tests/long_model.py) has a planted previous-token head, so its pattern is one stripe
just below the diagonal: one cell per row, 8 192 of 67 M. The tests run in file order on one
notebook page: the first picture (the overview, max-pooled over 16 x 16 tokens, in which the
stripe must survive), zoom with the keyboard down to single cells (exact tiles from the kernel),
hover read-outs equal to `analysis.attention_patterns`, pan, and the exported page.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    cell_centre,
    cell_pixel,
    error_outputs,
    open_notebook,
    open_offline,
    run_all,
    run_code,
    wait_drawn,
    watched_page,
)

N = 8192
SETUP = f"""
import torch, circuitwidgets as cw
from long_model import long_model
model, (L, H) = long_model()
toks = torch.randint(1, 64, ({N},), generator=torch.Generator().manual_seed(0))
toks[0] = 0
w = cw.AttentionPattern(model, tokens=toks, layer=L, head=H)
w
"""

@pytest.fixture(scope="module")
def nb(lab, browser):
    shutil.copy(Path(__file__).parents[1] / "long_model.py", lab.root / "long_model.py")
    from _harness import write_notebook

    write_notebook(lab.root / "long_prompt.ipynb", [SETUP])
    page = watched_page(browser)
    open_notebook(page, lab, "long_prompt.ipynb")
    run_all(page, timeout=300_000)
    yield page
    page.close()


@pytest.fixture
def root(nb):
    r = nb.locator(".cw-root[data-cw-kind=attention]").first
    wait_drawn(r, timeout=120_000)
    r.scroll_into_view_if_needed()
    return r


def py(nb, code: str) -> str:
    return "".join(run_code(nb, code, timeout=120_000).locator(".jp-OutputArea-output").all_text_contents()).strip()


def wait_window(root, window: str, exact: bool = True, timeout: float = 60_000) -> None:
    """Wait until the view shows `window` ("r0,c0,size") with every cell from exact tiles (when `exact`)."""
    handle = root.element_handle()
    root.page.wait_for_function(
        "([el, w, exact]) => el.dataset.cwWindow === w && (!exact || el.dataset.cwTileShare === '1')",
        arg=[handle, window, exact],
        timeout=timeout,
    )


def test_first_picture_is_the_overview_with_the_stripe(nb, root):
    assert error_outputs(nb) == []
    assert root.get_attribute("data-cw-window") == f"0,0,{N}"
    assert root.get_attribute("data-cw-tokens") == str(N)
    sent = py(nb, "print(len(w.patterns['data']), w.patterns['shape'], w.patterns['lod'], w.patterns.get('encoding'))")
    assert sent.startswith(tuple(str(n) for n in range(10))) and "[2, 512, 512]" in sent and "'factor': 16" in sent, sent
    assert int(sent.split()[0]) < 10_000_000
    # max-pool keeps the one-cell stripe: every diagonal block holds a weight 1 (cell i+1, i)
    diagonal = {cell_pixel(root, i, i)[:3] for i in range(0, 512, 37)}
    far = {cell_pixel(root, i, i - 40)[:3] for i in range(60, 512, 41)}
    assert len(diagonal) == 1 and len(far) == 1 and diagonal != far, (diagonal, far)
    assert "whole prompt" in root.locator(".cw-zoom-label").text_content()
    assert nb.cw_errors == []


def test_zoom_to_single_cells_shows_the_exact_stripe(nb, root):
    root.locator(".cw-readout").click()  # focus inside the widget
    for _ in range(9):  # 8 192 -> 16 tokens a side, around the centre
        nb.keyboard.press("+")
    wait_window(root, "4088,4088,16")
    assert "exact cells" in root.locator(".cw-zoom-label").text_content()
    labels = root.locator(".cw-heatmap-canvas").evaluate(
        "(c) => c.cwScene.ops.filter((o) => o.type === 'text' && o.baseline === 'middle' && !o.rotate"
        " && o.align === 'right').map((o) => o.text)"
    )
    assert len(labels) == 16  # one label per token row
    stripe = {cell_pixel(root, i, i - 1)[:3] for i in range(1, 16)}
    rest = {cell_pixel(root, i, j)[:3] for i in range(16) for j in range(i + 1) if j != i - 1}
    assert len(stripe) == 1 and stripe.isdisjoint(rest), (stripe, rest)
    # the kernel's last tile is exact (step 1) and holds the window (a bigger exact tile, asked for on the way
    # in and answered before the next step, serves the deeper windows without a new request)
    rows, cols, step, row0, col0 = map(int, py(
        nb, "print(*w.tile['shape'], w.tile['step'], w.tile['row0'], w.tile['col0'])").split())
    assert step == 1 and row0 <= 4088 and row0 + rows >= 4104 and col0 <= 4088 and col0 + cols >= 4104


def _hover_weight(nb, root, row: int, col: int) -> float:
    nb.mouse.move(*cell_centre(root.locator(".cw-heatmap"), row, col))
    readout = root.locator(".cw-readout")
    nb.wait_for_function(
        "([el, q]) => new RegExp(`destination \\\\(query\\\\) ${q} .*weight [0-9]`).test(el.textContent)",
        arg=[readout.element_handle(), 4088 + row],
        timeout=30_000,
    )
    return float(re.search(r"weight ([0-9.e+-]+)", readout.text_content()).group(1))


def test_hover_values_equal_the_analysis(nb, root):
    wait_window(root, "4088,4088,16")
    planted = _hover_weight(nb, root, 9, 8)  # destination 4097 on source 4096: the stripe
    expected = py(
        nb,
        "from circuitwidgets.analysis import attention_patterns\n"
        "P = attention_patterns(model, toks, layers=[L])[0]\n"
        "print(repr(float(P[H, 4097, 4096])), repr(float(P[0, 4097, 4090])))",
    ).split()
    assert planted == pytest.approx(float(expected[0]), rel=1e-3)
    # another head (a near-uniform random one): a small weight, read exactly from the kernel's row
    py(nb, "w.head = 0")
    wait_window(root, "4088,4088,16")
    other = _hover_weight(nb, root, 9, 2)
    assert other == pytest.approx(float(expected[1]), rel=1e-3) and other < 0.01


def test_pan_fetches_the_next_tile(nb, root):
    root.locator(".cw-readout").click()
    nb.keyboard.press("Shift+ArrowRight")
    wait_window(root, "4088,4092,16")
    assert py(nb, "print(w.tile['col0'], w.tile['head'])") == "4092 0"
    root.locator(".cw-readout").click()  # the notebook had the focus
    nb.keyboard.press("0")
    wait_window(root, f"0,0,{N}", exact=False)


def test_export_holds_the_overview_and_says_zoom_needs_the_kernel(nb, root, lab, page, tmp_path):
    out = py(nb, "p = w.save_html('long.html'); import os; print(os.path.getsize(p))")
    assert int(out) < 20_000_000
    requested = open_offline(page, lab.root / "long.html")
    view = page.locator(".cw-root").first
    wait_drawn(view)
    assert view.get_attribute("data-cw-window") == f"0,0,{N}"
    view.locator(".cw-readout").click()
    page.keyboard.press("+")
    label = view.locator(".cw-zoom-label")
    page.wait_for_function("(el) => /need the kernel/.test(el.textContent)", arg=label.element_handle())
    assert "holds blocks down to 2 × 2 tokens for head 0" in label.text_content()  # head 0 since the hover test
    assert [u for u in requested if u.startswith("http")] == []
    assert page.cw_errors == []
