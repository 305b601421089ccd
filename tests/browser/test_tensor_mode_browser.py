"""`AttentionPattern.from_tensors` and `ColoredTokens` in JupyterLab: the values a hover shows are the tensors given.

One notebook page (module scope), tests in file order: a 64-token pattern from the demo model's
TransformerLens cache (every cell shipped; the hover read-out's exact value equals the cache's,
the model controls hidden and the note shown), an 8 192-token pattern (the overview first, then
zoomed to single cells: exact tiles and a hover value equal to the tensor's), ColoredTokens from
`circuitwidgets.compat.circuitsvis`, and the exported page offline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    canvas_stats,
    cell_centre,
    error_outputs,
    network_urls,
    open_notebook,
    open_offline,
    run_all,
    run_code,
    wait_drawn,
    watched_page,
    write_notebook,
)

N = 8192
NOTE = "from tensors: no model, so no layer or prompt controls"
CELLS = [
    """
import torch, circuitwidgets as cw
import circuitwidgets.compat.circuitsvis as cv
model = cw.demo_model()
ids = torch.randint(1, 64, (1, 64), generator=torch.Generator().manual_seed(1))
ids[0, 0] = 0  # BOS
logits, cache = model.run_with_cache(ids)
str_tokens = model.to_str_tokens(ids)
given = cache["pattern", 1][0]
w64 = cw.AttentionPattern.from_tensors(str_tokens, given, head_names=["A", "B", "C", "D"], layer_name="Layer 1", head=2)
w64
""",
    f"""
n = {N}
stripe = torch.zeros(n, n)
stripe[torch.arange(1, n), torch.arange(n - 1)] = 1.0
stripe[0, 0] = 1.0
rand = torch.rand(n, n, generator=torch.Generator().manual_seed(3)).tril_()
big = torch.stack([stripe, rand.div_(rand.sum(-1, keepdim=True))])
del rand
w8k = cw.AttentionPattern.from_tensors([f"t{{i}}" for i in range(n)], big, head_names=["previous", "random"], head=1)
w8k
""",
    """
loss = model(ids, return_type="loss", loss_per_token=True)[0].detach()
strip = cv.tokens.colored_tokens(str_tokens[1:], loss)
strip
""",
]


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "tensor_mode.ipynb", CELLS)
    page = watched_page(browser)
    open_notebook(page, lab, "tensor_mode.ipynb")
    run_all(page, timeout=300_000)
    yield page
    page.close()


def widget(nb, index: int, kind: str = "attention"):
    root = nb.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").nth(index).locator(f".cw-root[data-cw-kind={kind}]")
    wait_drawn(root, timeout=120_000)
    root.scroll_into_view_if_needed()
    return root


def py(nb, code: str) -> str:
    return "".join(run_code(nb, code, timeout=120_000).locator(".jp-OutputArea-output").all_text_contents()).strip()


def hover_value(nb, root, row: int, col: int, query: int) -> float:
    """Hover heatmap cell (row, col) and return the exact weight the read-out shows (its data-cw-value)."""
    nb.mouse.move(*cell_centre(root.locator(".cw-heatmap"), row, col))
    readout = root.locator(".cw-readout")
    nb.wait_for_function(
        "([el, q]) => el.textContent.includes(`destination (query) ${q} `) && el.dataset.cwValue !== ''",
        arg=[readout.element_handle(), query],
        timeout=30_000,
    )
    return float(readout.get_attribute("data-cw-value"))


def wait_window(root, window: str, exact: bool = True, timeout: float = 60_000) -> None:
    root.page.wait_for_function(
        "([el, w, exact]) => el.dataset.cwWindow === w && (!exact || el.dataset.cwTileShare === '1')",
        arg=[root.element_handle(), window, exact],
        timeout=timeout,
    )


def test_64_tokens_without_model_controls(nb):
    assert error_outputs(nb) == []
    root = widget(nb, 0)
    assert root.locator("select[aria-label=Layer]").is_hidden() and root.locator(".cw-prompt").is_hidden()
    assert root.locator(".cw-tensor-note").inner_text() == NOTE
    assert root.locator(".cw-thumb-label").all_inner_texts() == ["A", "B", "C", "D"]
    assert root.locator("select[aria-label=Head] option").all_inner_texts() == ["A", "B", "C", "D"]
    assert root.get_attribute("data-cw-head") == "2" and root.get_attribute("data-cw-tokens") == "64"
    title = root.locator(".cw-heatmap-canvas").evaluate("(c) => c.cwScene.ops.find((o) => o.type === 'text').text")
    assert title == "Layer 1, C"
    assert canvas_stats(root.locator(".cw-heatmap-canvas"))["colours"] > 20
    assert nb.cw_errors == []


def test_64_tokens_hover_shows_the_tensors_value(nb):
    root = widget(nb, 0)
    shown = [hover_value(nb, root, q, k, q) for q, k in ((40, 37), (63, 0), (10, 10))]
    expected = py(nb, "print(*(repr(float(given[2, q, k])) for q, k in ((40, 37), (63, 0), (10, 10))))").split()
    assert shown == [float(x) for x in expected]
    root.locator(".cw-thumb").nth(0).click()  # another head, picked in the browser
    nb.wait_for_function("(el) => el.dataset.cwHead === '0'", arg=root.element_handle())
    assert hover_value(nb, root, 40, 39, 40) == float(py(nb, "print(repr(float(given[0, 40, 39])), w64.head)").split()[0])


def test_8192_tokens_overview_first_then_exact_cells(nb):
    root = widget(nb, 1)
    assert root.get_attribute("data-cw-window") == f"0,0,{N}" and root.get_attribute("data-cw-tokens") == str(N)
    assert "whole prompt" in root.locator(".cw-zoom-label").text_content()
    assert root.locator(".cw-tensor-note").inner_text() == NOTE
    root.locator(".cw-readout").click()  # focus inside the widget
    for _ in range(9):  # 8 192 -> 16 tokens a side
        nb.keyboard.press("+")
    wait_window(root, "4088,4088,16")
    assert "exact cells" in root.locator(".cw-zoom-label").text_content()
    shown = [hover_value(nb, root, r, c, 4088 + r) for r, c in ((9, 8), (15, 3))]
    expected = py(nb, "print(repr(float(big[1, 4097, 4096])), repr(float(big[1, 4103, 4091])), w8k.tile['step'])").split()
    assert shown == [float(expected[0]), float(expected[1])] and expected[2] == "1"
    py(nb, "w8k.head = 0")  # the stripe head: a one in each row
    wait_window(root, "4088,4088,16")
    assert hover_value(nb, root, 9, 8, 4097) == 1.0
    assert nb.cw_errors == []


def test_colored_tokens_hover_shows_each_value(nb):
    root = widget(nb, 2, "tokens")
    tokens = root.locator(".cw-token")
    expected = [float(x) for x in py(nb, "print(*(repr(float(x)) for x in loss))").split()]
    assert tokens.count() == 63 == len(expected)
    readout = root.locator(".cw-readout")
    for i in (0, 17, 62):
        tokens.nth(i).hover()
        nb.wait_for_function("([el, i]) => el.textContent.startsWith(`token ${i} `)", arg=[readout.element_handle(), i])
        assert float(readout.get_attribute("data-cw-value")) == expected[i]
    assert tokens.nth(17).evaluate("(el) => getComputedStyle(el).backgroundColor") != "rgba(0, 0, 0, 0)"
    assert root.locator(".cw-tokens-bar").evaluate("(el) => getComputedStyle(el).backgroundImage").startswith("linear-gradient")


def test_exported_page_offline(nb, lab, page):
    py(nb, "w64.save_html('tensors.html'); strip.save_html('strip.html')")
    requested = open_offline(page, lab.root / "tensors.html")
    view = page.locator(".cw-root").first
    wait_drawn(view)
    assert view.locator(".cw-tensor-note").inner_text() == NOTE and view.locator(".cw-prompt").is_hidden()
    assert canvas_stats(view.locator(".cw-heatmap-canvas"))["colours"] > 20
    requested += open_offline(page, lab.root / "strip.html")
    wait_drawn(page.locator(".cw-root[data-cw-kind=tokens]"))
    assert page.locator(".cw-token").count() == 63
    assert network_urls(requested) == [] and page.cw_errors == []
