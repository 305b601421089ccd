"""Every widget in marimo (``marimo run`` of `marimo_app.py`, ``mo.ui.anywidget``) on the demo model.

marimo delivers the traits a kernel update changes one at a time, so a view that reads one trait
while another is still old draws a wrong picture under the right label. Each test drives one
widget with its own controls in the page (layer, head, prompt, a click on a composition edge)
and after every step checks that the picture is the new one: canvas pixels at every cell, hover
read-outs and titles against what `circuitwidgets.analysis` computes here, in the test process,
on the same deterministic demo model; and no error banner. The tests share one page (module
scope); each drives its own widget from the app's starting state.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import cell_centre, wait_attr  # noqa: E402
from _marimo import marimo_run  # noqa: E402

from circuitwidgets import analysis  # noqa: E402

APP = Path(__file__).with_name("marimo_app.py")
PROMPT = "abcdefgh abcdefgh"  # as in marimo_app.py
TOKENS = list(range(2, 22))  # as in marimo_app.py
NEW_PROMPT = "q7x2mfk9 q7x2mfk9 zz"

# The light-theme colour scales of js/lib/scales.js: [position, r, g, b].
SEQUENTIAL = [
    [0, 247, 250, 255], [0.15, 208, 225, 242], [0.35, 140, 190, 225], [0.6, 66, 140, 200], [0.85, 25, 85, 160], [1, 12, 44, 110]
]
DIVERGING = [[0, 33, 90, 170], [0.25, 120, 170, 215], [0.5, 246, 246, 246], [0.75, 232, 140, 110], [1, 170, 30, 40]]
#: Largest per-channel difference allowed between a drawn cell and its value's colour: one uint8
#: code step on the steepest stretch of a scale, plus rounding.
TOLERANCE = 4


# ----- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app_page(browser):
    """The app, served and opened; every widget has drawn once."""
    with marimo_run(APP) as app:
        page = browser.new_page()
        page.cw_errors = []
        page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
        page.on("dialog", lambda d: (page.cw_errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: r.url.startswith((app.url, "data:", "blob:")) or page.cw_errors.append(f"request: {r.url}"))
        try:
            page.goto(app.url)
            for kind in ("attention", "ov", "qk", "composition", "headscores"):
                page.locator(f".cw-root[data-cw-kind={kind}]").first.wait_for(timeout=60_000)
        except Exception as exc:
            raise AssertionError(f"the marimo app did not show every widget: {exc}\n{app.log_tail()}") from None
        yield page
        page.close()


def widget(page, kind: str):
    root = page.locator(f".cw-root[data-cw-kind={kind}]").first
    root.scroll_into_view_if_needed()
    return root


# ----- reading the page -------------------------------------------------------------------------


def colour(stops, t: np.ndarray) -> np.ndarray:
    """`colorAt` of js/lib/scales.js for an array of t in [0, 1]: ``[..., 3]`` RGB."""
    t = np.clip(np.nan_to_num(t, nan=0.0), 0, 1)
    pos = np.array([s[0] for s in stops])
    return np.stack([np.interp(t, pos, [s[c] for s in stops]) for c in (1, 2, 3)], axis=-1)


# One pixel per cell: the centre of small cells; a quarter in from the corner of big ones, clear
# of the outlines on a cell's edge and of the value some views write in its middle.
CELL_PIXELS = """(c) => {
  const {left, top, cell, width} = c.cwScene.layout;
  const s = c.width / width;
  const at = cell < 10 ? cell / 2 : cell / 4;
  const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  const rows = Math.round(c.cwScene.layout.plotH / cell), cols = Math.round(c.cwScene.layout.plotW / cell);
  const out = [];
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) {
    const x = Math.floor((left + j * cell + at) * s), y = Math.floor((top + i * cell + at) * s);
    const k = (y * c.width + x) * 4;
    out.push([data[k], data[k + 1], data[k + 2]]);
  }
  return {rows, cols, cell, pixels: out, title: c.cwScene.ops.find((o) => o.type === "text").text};
}"""


def assert_cells(heatmap, values: torch.Tensor, stops, lo: float, hi: float, *, tril: bool = False, title: str = "") -> None:
    """The heatmap (a ``.cw-heatmap`` locator) draws `values` ``[rows, cols]``: a pixel of every cell
    is the colour of its value on the scale `stops` over [lo, hi] (lower triangle only when
    `tril`), and its title starts with `title`."""
    got = heatmap.locator(".cw-heatmap-canvas").evaluate(CELL_PIXELS)
    assert got["title"].startswith(title), f"title {got['title']!r}, want {title!r}…"
    rows, cols = values.shape
    assert (got["rows"], got["cols"]) == (rows, cols), f"drawn {got['rows']}x{got['cols']} cells, want {rows}x{cols}"
    assert got["cell"] >= 2, "cells too small to read back"
    drawn = np.array(got["pixels"], dtype=float).reshape(rows, cols, 3)
    v = values.detach().double().numpy()
    want = colour(stops, (v - lo) / (hi - lo))
    diff = np.abs(drawn - want).max(-1)
    if tril:
        diff[np.triu_indices(rows, 1, cols)] = 0
    i, j = np.unravel_index(diff.argmax(), diff.shape)
    assert diff[i, j] <= TOLERANCE, (
        f"{got['title']!r}: cell ({i}, {j}) drawn {drawn[i, j].tolist()}, the colour of {v[i, j]:.4g} is "
        f"{want[i, j].round().tolist()}; {(diff > TOLERANCE).sum()} of {diff.size} cells differ"
    )


def assert_no_error(root) -> None:
    shown = [e.text_content() for e in root.locator(".cw-error").all() if e.is_visible()]
    assert shown == [], f"error banner: {shown}"


def eventually(check, timeout: float = 20.0):
    """`check()` once it stops raising AssertionError; its last error after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def hover(page, heatmap, row: int, col: int) -> None:
    page.mouse.move(*cell_centre(heatmap, row, col))


def number(text: str, pattern: str) -> float:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in read-out {text!r}"
    return float(found.group(1))


def most_different(a: torch.Tensor, b: torch.Tensor, tril: bool = False) -> tuple[int, int]:
    """The cell where `a` and `b` differ most (where a stale picture shows)."""
    d = (a - b).abs()
    if tril:
        d = d.tril()
    assert d.max() > 0.05, "the stale picture would look the same: the check has no teeth"
    i = int(d.argmax())
    return i // d.shape[1], i % d.shape[1]


# ----- AttentionPattern -------------------------------------------------------------------------


def check_attention(page, root, model, prompt: str, layer: int, head: int) -> None:
    patterns = analysis.attention_patterns(model, prompt)
    want = patterns[layer, head]
    heatmap = root.locator(".cw-heatmap").first

    def drawn():
        assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == (str(layer), str(head))
        assert root.get_attribute("data-cw-tokens") == str(want.shape[0])
        assert_no_error(root)
        assert_cells(heatmap, want, SEQUENTIAL, 0, 1, tril=True, title=f"Layer {layer}, head {head}")

    eventually(drawn)
    q, k = most_different(want, patterns[1 - layer, head], tril=True)
    hover(page, heatmap, q, k)
    readout = root.locator(".cw-readout").first

    def read():
        text = readout.text_content()
        assert f"L{layer} H{head}" in text and f"destination (query) {q} " in text and f"source (key) {k} " in text, text
        weight = number(text, r"weight ≈?([0-9.e-]+)")
        assert weight == pytest.approx(float(want[q, k]), abs=1e-3 if "≈" in text else 1e-4), text

    eventually(read)
    page.mouse.move(0, 0)


def test_attention_pattern(app_page, demo):
    page, model = app_page, demo
    root = widget(page, "attention")
    check_attention(page, root, model, PROMPT, 1, 3)
    root.locator("select[aria-label=Layer]").select_option("0")
    check_attention(page, root, model, PROMPT, 0, 3)
    root.locator("select[aria-label=Head]").select_option("1")
    check_attention(page, root, model, PROMPT, 0, 1)
    box = root.locator("textarea.cw-prompt")
    box.fill(NEW_PROMPT)
    box.press("Enter")
    check_attention(page, root, model, NEW_PROMPT, 0, 1)
    root.locator("select[aria-label=Layer]").select_option("1")
    check_attention(page, root, model, NEW_PROMPT, 1, 1)
    assert page.cw_errors == []


# ----- OVCircuit and QKCircuit ------------------------------------------------------------------


def check_hover_value(page, root, heatmap, row: int, col: int, want: float, ids: bool = False) -> None:
    """Hover cell (row, col): the read-out's exact value (``data-value``) is `want`."""
    hover(page, heatmap, row, col)
    readout = root.locator(".cw-readout").first

    def read():
        value = readout.get_attribute("data-value")
        text = readout.text_content()
        assert value is not None, f"no exact value in the read-out {text!r}"
        if ids:  # the read-out names both tokens by id
            assert re.findall(r"\(id (\d+)\)", text)[:2] == [str(TOKENS[row]), str(TOKENS[col])], text
        else:
            assert (readout.get_attribute("data-row"), readout.get_attribute("data-col")) == (str(row), str(col))
        assert float(value) == pytest.approx(want, rel=1e-4, abs=1e-5), text

    eventually(read)
    page.mouse.move(0, 0)


def check_ov(page, root, model, layer: int, head: int) -> None:
    block = analysis.full_ov_circuit(model, layer, head).block(TOKENS, TOKENS).float()
    m = float(block.abs().max())
    eigenvalues = analysis.ov_eigenvalues(model, layer, head)
    heatmap = root.locator(".cw-heatmap").first

    def drawn():
        assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == (str(layer), str(head))
        assert_no_error(root)
        assert_cells(heatmap, block, DIVERGING, -m, m, title=f"Full OV circuit, layer {layer} head {head}")
        note = root.locator(".cw-ov-side").text_content()
        assert number(note, r"max\|λ\| = ([0-9.e+-]+)") == pytest.approx(float(eigenvalues.abs().max()), rel=1e-3), note
        copying = root.locator(".cw-stat-value").first.get_attribute("data-value")
        assert float(copying) == pytest.approx(float(analysis.copying_score_of(eigenvalues)), abs=1e-4)

    eventually(drawn)
    other = analysis.full_ov_circuit(model, 1 - layer, head).block(TOKENS, TOKENS).float()
    row, col = most_different(block / m, other / float(other.abs().max()))
    check_hover_value(page, root, heatmap, row, col, float(block[row, col]))


def test_ov_circuit(app_page, demo):
    page, model = app_page, demo
    root = widget(page, "ov")
    check_ov(page, root, model, 1, 1)
    root.locator("select[aria-label=Layer]").select_option("0")
    check_ov(page, root, model, 0, 1)
    root.locator("select[aria-label=Head]").select_option("2")
    check_ov(page, root, model, 0, 2)
    assert page.cw_errors == []


def check_qk(page, root, model, layer: int, head: int) -> None:
    block = analysis.full_qk_circuit(model, layer, head, scaled=True).block(TOKENS, TOKENS).float()
    m = float(block.abs().max())
    tokens_map, positions_map = root.locator(".cw-heatmap").nth(0), root.locator(".cw-heatmap").nth(1)
    positional = analysis.positional_qk(model, layer, head)

    def drawn():
        assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == (str(layer), str(head))
        assert_no_error(root)
        assert_cells(tokens_map, block, DIVERGING, -m, m, title=f"Full QK circuit (attention logits), layer {layer} head {head}")
        assert_cells(positions_map, positional, SEQUENTIAL, 0, 1, tril=True, title=f"Attention from positions alone, head {head}")

    eventually(drawn)
    other = analysis.full_qk_circuit(model, 1 - layer, head, scaled=True).block(TOKENS, TOKENS).float()
    row, col = most_different(block / m, other / float(other.abs().max()))
    check_hover_value(page, root, tokens_map, row, col, float(block[row, col]), ids=True)


def test_qk_circuit(app_page, demo):
    page, model = app_page, demo
    root = widget(page, "qk")
    check_qk(page, root, model, 1, 1)
    root.locator("select[aria-label=Layer]").select_option("0")
    check_qk(page, root, model, 0, 1)
    root.locator("select[aria-label=Head]").select_option("3")
    check_qk(page, root, model, 0, 3)
    assert page.cw_errors == []


# ----- CompositionDiagram -----------------------------------------------------------------------


def drawn_edges(root) -> dict[tuple[int, ...], float]:
    """(l1, h1, l2, h2) -> raw score of every edge drawn in the graph."""
    return {
        tuple(int(x) for x in e.get_attribute("data-edge").split(",")): float(e.get_attribute("data-raw"))
        for e in root.locator("path.cw-edge").all()
    }


def check_edges(root, scores: torch.Tensor, timeout: float = 20.0) -> None:
    """Every edge drawn shows its score, and every pair at or above the threshold is drawn."""

    def drawn():
        assert_no_error(root)
        edges = drawn_edges(root)
        threshold = float(root.get_attribute("data-cw-threshold"))
        want = {(0, b, 1, d) for b in range(4) for d in range(4) if scores[0, b, 1, d] >= threshold}
        assert edges and set(edges) == want, (sorted(edges), sorted(want), threshold)
        for key, raw in edges.items():
            assert raw == pytest.approx(float(scores[key]), abs=1e-6), key

    eventually(drawn, timeout)


def check_pair(page, root, model, kind: str, first: tuple[int, int], second: tuple[int, int]) -> None:
    """The pair (first -> second) is selected: read-out, linked head, and the three patterns drawn."""
    patterns = analysis.attention_patterns(model, PROMPT)
    want = [patterns[first], patterns[second], analysis.virtual_head_pattern(model, PROMPT, first, second)]
    score = float(analysis.composition_scores(model, kind)[(*first, *second)])
    maps = root.locator(".cw-comp-pair .cw-heatmap")
    page.mouse.move(0, 0)  # no hovered edge: the read-out shows the selection

    def drawn():
        assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == tuple(map(str, second))
        assert_no_error(root)
        text = root.locator(".cw-readout").first.text_content()
        assert text.startswith(f"selected: L{first[0]}H{first[1]} → L{second[0]}H{second[1]} · {kind}-composition "), text
        assert number(text, rf"{kind}-composition ([0-9.e-]+)") == pytest.approx(score, abs=1e-3)
        assert maps.count() == 3
        titles = [f"L{first[0]}H{first[1]}", f"L{second[0]}H{second[1]}", "virtual "]
        for i in range(3):
            assert_cells(maps.nth(i), want[i], SEQUENTIAL, 0, 1, tril=True, title=titles[i])

    eventually(drawn)


EDGE_POINT = """(path) => {
  // a point of the edge's stroke where it is the topmost element (edges cross at their middles)
  const len = path.getTotalLength(), m = path.getScreenCTM(), doc = path.getRootNode();
  for (const f of [0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6]) {
    const p = path.getPointAtLength(f * len);
    const x = m.a * p.x + m.c * p.y + m.e, y = m.b * p.x + m.d * p.y + m.f;
    if (doc.elementFromPoint(x, y) === path) return [x, y];
  }
  return null;
}"""


def click_edge(page, root, first: tuple[int, int], second: tuple[int, int]) -> None:
    """Click the graph's edge first -> second where no other edge covers it."""
    hit = root.locator(f"path.cw-edge-hit[data-edge='{first[0]},{first[1]},{second[0]},{second[1]}']")
    hit.scroll_into_view_if_needed()
    point = hit.evaluate(EDGE_POINT)
    assert point, f"edge {first} -> {second} is covered everywhere"
    page.mouse.click(*point)


def set_threshold(root, value: float) -> None:
    root.locator("input.cw-slider").evaluate(
        "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', {bubbles: true})); }", value
    )


def test_composition_diagram(app_page, demo):
    page, model = app_page, demo
    root = widget(page, "composition")
    k_scores = analysis.composition_scores(model, "K")
    check_edges(root, k_scores, timeout=60)  # computed after the cell ran (defer=True)
    # a node click selects that head
    root.locator("g.cw-node[data-node='1,2']").click()
    wait_attr(root, "data-cw-layer", "1")
    wait_attr(root, "data-cw-head", "2")
    set_threshold(root, 0.0)
    page.wait_for_function("(el) => el.querySelectorAll('path.cw-edge').length === 16", arg=root.element_handle())
    check_edges(root, k_scores)
    # two edges in turn: each shows its own pair
    order = sorted(((float(k_scores[0, a, 1, b]), a, b) for a in range(4) for b in range(4)), reverse=True)
    (_, a1, b1), (_, a2, b2) = order[0], next(o for o in order if o[1] != order[0][1] and o[2] != order[0][2])
    for first, second in (((0, a1), (1, b1)), ((0, a2), (1, b2))):
        click_edge(page, root, first, second)
        check_pair(page, root, model, "K", first, second)
    # another kind: its scores, the pair kept
    root.locator("button[data-kind=V]").click()
    wait_attr(root, "data-cw-comp-kind", "V")
    check_edges(root, analysis.composition_scores(model, "V"))
    check_pair(page, root, model, "V", (0, a2), (1, b2))
    assert page.cw_errors == []


# ----- HeadScores -------------------------------------------------------------------------------


def check_head_scores(page, root, model, kind: str, label: str, layer: int, head: int, timeout: float = 20.0) -> None:
    scores = analysis.head_scores(model, kind)
    heatmap = root.locator(".cw-heatmap").first

    def drawn():
        assert root.get_attribute("data-cw-score") == kind
        assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == (str(layer), str(head))
        assert_no_error(root)
        # a detector kind on its own [0, 1] scale, even with ov_copying (on [-1, 1]) among the kinds
        assert_cells(heatmap, scores, SEQUENTIAL, 0, 1)
        text = root.locator(".cw-readout").first.text_content()
        assert text.startswith(f"selected L{layer} H{head} · "), text
        assert number(text, rf"\[{label} ([0-9.e-]+)\]") == pytest.approx(float(scores[layer, head]), abs=1e-3, rel=5e-3)

    eventually(drawn, timeout)


def test_head_scores(app_page, demo):
    page, model = app_page, demo
    root = widget(page, "headscores")
    check_head_scores(page, root, model, "induction", "induction", 0, 0, timeout=60)  # defer=True
    page.mouse.click(*cell_centre(root.locator(".cw-heatmap").first, 1, 2))
    page.mouse.move(0, 0)
    check_head_scores(page, root, model, "induction", "induction", 1, 2)
    root.locator("select[aria-label=score]").select_option("previous_token")
    check_head_scores(page, root, model, "previous_token", "previous token", 1, 2)
    root.locator(".cw-readout").first.click()  # focus inside the widget, off the select
    page.keyboard.press("ArrowUp")  # keys move the selected head
    check_head_scores(page, root, model, "previous_token", "previous token", 0, 2)
    assert page.cw_errors == []


# ----- Dashboard --------------------------------------------------------------------------------


def test_dashboard_selection_propagates_through_the_kernel(app_page, demo):
    """marimo has no jslink: a head picked in one child reaches the others through the kernel's links."""
    page, model = app_page, demo
    kinds = ("headscores", "composition", "attention", "ov", "qk")
    dash = {kind: page.locator(f".cw-root[data-cw-kind={kind}]").last for kind in kinds}
    for root in dash.values():
        root.wait_for(timeout=60_000)
    assert page.locator(".cw-root[data-cw-kind=attention]").count() == 2  # the app's and the dashboard's
    dash["headscores"].scroll_into_view_if_needed()
    page.mouse.click(*cell_centre(dash["headscores"].locator(".cw-heatmap").first, 1, 2))
    page.mouse.move(0, 0)

    def moved():
        for kind, root in dash.items():
            assert (root.get_attribute("data-cw-layer"), root.get_attribute("data-cw-head")) == ("1", "2"), kind
            assert_no_error(root)

    eventually(moved, 30)
    dash["attention"].scroll_into_view_if_needed()
    check_attention(page, dash["attention"], model, PROMPT, 1, 2)  # and the picture is that head's
    assert page.cw_errors == []
