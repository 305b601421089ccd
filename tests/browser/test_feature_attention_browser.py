"""FeatureAttention in a real browser: in JupyterLab (a click on a cell splits its score) and as an exported page.

The pattern draws; clicking a cell sets the kernel's `cell` and the split arrives: one bar per pair and term, the
bars' values those of `circuitwidgets.analysis.feature_qk`, their sum beside the model's score; hovering a pair
shows the query feature's card (its label, top positions, logit effect) written as text; the OV panel switches;
an exported page, opened from disk with the network off, shows the split saved with it; dark mode follows the page.
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
from circuitwidgets.analysis import feature_qk  # noqa: E402

TEXT = "the cat sat on the mat. the cat sat"
SETUP = f"""
import circuitwidgets as cw
model, sae = cw.demo_model(), cw.demo_dictionary()
w = cw.FeatureAttention(model, {TEXT!r}, dictionary=sae, head=1, k=5)
w
"""


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


def root_of(page):
    return page.locator(".cw-root[data-cw-kind=featureattention]").first


def positions(model) -> tuple[int, int]:
    labels = cw.as_view(model).to_str_tokens(cw.as_view(model).to_tokens(TEXT))
    first, second = [i for i, t in enumerate(labels) if t == "c"]
    return second, first + 1


def check_split(page, root, model, query: int, key: int) -> None:
    """The bars shown are the analysis' split of (query, key); their sum and the model's score are written beside."""
    want = feature_qk(model, TEXT, 1, 1, query, key, cw.demo_dictionary(), k=5)
    wait_attr(root, "data-cw-cell", f'{{"query":{query},"key":{key}}}')
    page.wait_for_function("(el) => Number(el.dataset.cwBars) === 14", arg=root.element_handle())
    rows = root.locator(".cw-fa-bars .cw-fa-row")
    assert rows.count() == 14  # 5 pairs, the other pairs, 8 error and bias terms
    values = [float(v) for v in rows.evaluate_all("(els) => els.map((e) => e.dataset.cwValue)")]
    for got, (_, _, value) in zip(values[:5], want.pairs, strict=True):
        assert got == pytest.approx(value, abs=1e-5)
    assert values[6:] == pytest.approx([want.terms[n] for n in list(want.terms)[1:]], abs=1e-5)
    assert sum(values) == pytest.approx(want.score, abs=1e-4)
    total = root.locator(".cw-fa-sum")
    assert float(total.get_attribute("data-cw-score")) == pytest.approx(want.score, abs=1e-5)
    assert "current token = 'c'" in rows.first.inner_text() and "previous token = 'c'" in rows.first.inner_text()
    # hover the first pair (its query half): the query feature's card, as text
    rows.first.hover(position={"x": 5, "y": 4})
    card = root.locator(".cw-fa-card")
    page.wait_for_function("(el) => !el.hidden && /top positions/.test(el.textContent)", arg=card.element_handle())
    assert "current token = 'c'" in card.inner_text() and "raises" in card.inner_text()


def test_in_jupyterlab_a_click_splits_the_cell(lab, page, model):
    write_notebook(lab.root / "feature_attention_check.ipynb", [SETUP])
    open_notebook(page, lab, "feature_attention_check.ipynb")
    run_all(page)
    root = root_of(page)
    wait_drawn(root)
    assert canvas_stats(root.locator(".cw-heatmap-canvas").first)["colours"] > 10
    assert "click a cell" in root.locator(".cw-fa-header").inner_text()
    query, key = positions(model)
    page.mouse.click(*cell_centre(root.locator(".cw-heatmap").first, query, key))
    check_split(page, root, model, query, key)

    def kernel(code: str) -> str:
        page.evaluate("() => document.activeElement?.blur()")
        return run_code(page, code).locator(".jp-OutputArea-output").inner_text().strip()

    assert kernel("print(w.cell)") == f"{{'query': {query}, 'key': {key}}}"
    root.locator(".cw-fa-panel[data-panel=ov]").click()  # what the head moves there
    wait_attr(root, "data-cw-panel", "ov")
    page.wait_for_function("(el) => /what it moves/.test(el.textContent)", arg=root.locator(".cw-fa-header").element_handle())
    assert "logit" in root.locator(".cw-fa-bars").inner_text()
    assert page.cw_errors == []


def test_exported_page_offline_shows_the_split_in_light_and_dark(page, model, tmp_path):
    query, key = positions(model)
    w = cw.FeatureAttention(model, TEXT, dictionary=cw.demo_dictionary(), head=1, k=5, cell={"query": query, "key": key})
    path = w.save_html(tmp_path / "feature_attention.html")
    requested = open_offline(page, path)
    root = root_of(page)
    wait_drawn(root)
    check_split(page, root, model, query, key)
    bar = root.locator(".cw-fa-bar").first.evaluate("(el) => getComputedStyle(el).backgroundColor")
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("(el) => el.dataset.cwTheme === 'dark'", arg=root.element_handle())
    assert root.locator(".cw-fa-bar").first.evaluate("(el) => getComputedStyle(el).backgroundColor") != bar
    assert network_urls(requested) == []
    assert page.cw_errors == []
