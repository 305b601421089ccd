"""Labels that fit, in a real browser (exported pages opened offline): every token label at 48 tokens,
every head in the Dashboard's grids (and in the attribution's heads x positions strip where its square
cells allow), and at 300 tokens labels that never overlap and include the selected head and position
after a click.

The labels are read from what the canvas drew (``canvas.cwScene``: its text ops and the indices it
labelled, ``rowShown``/``colShown``).
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import cell_centre, network_urls, open_offline, wait_drawn  # noqa: E402
from factories import small_bridge  # noqa: E402

import circuitwidgets as cw  # noqa: E402

#: Text ops of the axis labels (monospace, centred on their cell): rows upright, columns rotated.
LABELS = """(c) => {
  const ops = c.cwScene.ops.filter((o) => o.type === "text" && o.baseline === "middle" && o.font.includes("mono"));
  return {rows: ops.filter((o) => !o.rotate), cols: ops.filter((o) => o.rotate), layout: c.cwScene.layout,
          rowShown: c.cwScene.rowShown, colShown: c.cwScene.colShown};
}"""


@pytest.fixture(scope="module")
def eight_heads():
    return small_bridge(n_heads=8, d_head=8, n_ctx=320)


def labels(root, k: int = 0) -> dict:
    return root.locator(".cw-heatmap-canvas").nth(k).evaluate(LABELS)


def root_of(page, kind: str):
    root = page.locator(f".cw-root[data-cw-kind={kind}]").first
    wait_drawn(root)
    return root


def assert_apart(ops: list[dict], key: str, gap: float) -> None:
    """Label centres along `key` ("x" or "y") at least `gap` px apart: no two overlap."""
    at = sorted(op[key] for op in ops)
    assert all(b - a >= gap - 1e-6 for a, b in pairwise(at)), at


def test_every_token_labelled_at_48_tokens(page, tmp_path):
    model = cw.demo_model()
    tokens = model.to_tokens("ab" * 40)[0, :48].tolist()
    requested = open_offline(page, cw.AttentionPattern(model, tokens=tokens).save_html(tmp_path / "att48.html"))
    got = labels(root_of(page, "attention"))
    assert len(got["rows"]) == 48 and len(got["cols"]) == 48, (len(got["rows"]), len(got["cols"]))
    assert got["rowShown"] == list(range(48)) and got["colShown"] == list(range(48))
    assert [op["text"] for op in got["rows"]][:3] == ["<bos>", "a", "b"]
    assert_apart(got["rows"], "y", 9)  # a font one px smaller than the cell, at least 8 px
    assert network_urls(requested) == [] and page.cw_errors == []


def test_dashboard_labels_every_head(page, tmp_path, eight_heads):
    dash = cw.Dashboard(eight_heads, tokens=[i % 60 for i in range(60)], composition="K")
    requested = open_offline(page, dash.save_html(tmp_path / "dash.html"))
    heads = [str(h) for h in range(8)]
    for kind in ("headscores", "attribution"):
        grid = labels(root_of(page, kind))
        assert [op["text"] for op in grid["cols"]] == heads, kind
        assert [op["text"] for op in grid["rows"]] == ["0", "1"], kind
    # the strip of every head over the positions: in the Dashboard's column (about 280 px for 60 positions,
    # square cells of 4.6 px) the selected head and the strongest, never overlapping
    strip = labels(root_of(page, "attribution"), 1)
    assert 0 in strip["rowShown"] and len(strip["rows"]) >= int(strip["layout"]["plotH"] // 13)
    assert_apart(strip["rows"], "y", 13)
    # on its own (640 px): every head and every position
    page.goto("about:blank")
    open_offline(page, cw.LogitAttribution(eight_heads, tokens=[i % 60 for i in range(60)]).save_html(tmp_path / "la.html"))
    strip = labels(root_of(page, "attribution"), 1)
    assert [op["text"] for op in strip["rows"]] == [f"L{layer}H{h}" for layer in range(2) for h in range(8)]
    assert strip["colShown"] == list(range(60))
    assert network_urls(requested) == [] and page.cw_errors == []


def test_long_prompt_labels_never_overlap_and_follow_the_selection(page, tmp_path, eight_heads):
    tokens = [(7 * i) % 64 for i in range(300)]
    page.set_viewport_size({"width": 1280, "height": 1400})
    requested = open_offline(page, cw.AttentionPattern(eight_heads, tokens=tokens).save_html(tmp_path / "att300.html"))
    got = labels(root_of(page, "attention"))
    assert 20 <= len(got["rows"]) < 300
    assert got["rowShown"][0] == 0 and got["rowShown"][-1] == 299  # the first and the last, evenly spaced between
    assert_apart(got["rows"], "y", 13)
    assert_apart(got["cols"], "x", 13)

    page.goto("about:blank")
    la = cw.LogitAttribution(eight_heads, tokens=tokens, layer=0, head=0)
    open_offline(page, la.save_html(tmp_path / "la300.html"))
    root = root_of(page, "attribution")
    strip = root.locator(".cw-heatmap").nth(1)
    before = labels(root, 1)
    assert_apart(before["cols"], "x", 13)
    explained = int(root.locator(".cw-heatmap").first.get_attribute("data-position"))
    assert explained in before["colShown"] and 0 in before["rowShown"]  # the selected position and head (L0H0)
    row, col = 13, 137  # L1H5 at position 137
    assert col not in before["colShown"] and row not in before["rowShown"]
    page.mouse.click(*cell_centre(strip, row, col))
    page.wait_for_function("(c) => c.cwScene.colShown.includes(137)", arg=strip.locator("canvas").first.element_handle())
    after = labels(root, 1)
    assert row in after["rowShown"], after["rowShown"]
    x = after["layout"]["left"] + (col + 0.5) * after["layout"]["cell"]
    assert [op["text"] for op in after["cols"] if abs(op["x"] - x) < 1e-6] == [str(tokens[col])]
    y = after["layout"]["top"] + (row + 0.5) * after["layout"]["cell"]
    assert [op["text"] for op in after["rows"] if abs(op["y"] - y) < 1e-6] == ["L1H5"]
    assert_apart(after["cols"], "x", 13)
    assert_apart(after["rows"], "y", 13)
    assert network_urls(requested) == [] and page.cw_errors == []
