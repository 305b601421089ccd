"""AttentionPattern of a 32 768-token prompt in JupyterLab, zoomed with the mouse wheel down to exact cells.

The model is a random Llama (`circuitwidgets.demo.tiny_hf_model`: rotary, one layer, 2 heads sharing
one K/V head) through `cw.HFView`, its query and key projections scaled up so that scores vary by a
few nats (neighbouring rows and columns then differ by tens of codes on the log scale, so a tile one
row or column off, or drawn from the wrong head, cannot pass). The wheel, over a destination deep in
the prompt next to the diagonal, zooms 32 768 -> 16 tokens a side (a tile request at every level).
The 16 x 16 cells drawn (the heatmap's cell image, one pixel a cell) are checked against weights
computed independently in float64 from the model's own modules (embedding, RMSNorm, q/k
projections, rotary), within one uint8 code; cells above the diagonal must be empty; hover
read-outs (``data-cw-value``) must equal those weights to float32 precision. An exported page of
this prompt holds levels down to 8 x 8 tokens at best (`EXPORT_LEVEL_BYTES`): exact cells need the kernel.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    cell_centre,
    error_outputs,
    open_notebook,
    run_all,
    run_code,
    wait_drawn,
    watched_page,
    write_notebook,
)

N = 32768
HEAD = 1
TARGET = (21000, 20993)  # (destination, source) the wheel zooms on: deep in the prompt, beside the diagonal
GRID = 512  # js/lib/lod.js GRID: most cells a side of the drawn grid
CODE_MAX = 254
#: js/lib/scales.js STOPS.sequential: [position, r, g, b] (checked against the colour bar drawn)
STOPS = {
    "light": [[0, 247, 250, 255], [0.15, 208, 225, 242], [0.35, 140, 190, 225], [0.6, 66, 140, 200],
              [0.85, 25, 85, 160], [1, 12, 44, 110]],
    "dark": [[0, 26, 30, 40], [0.2, 32, 62, 104], [0.45, 42, 112, 172], [0.7, 92, 176, 216],
             [0.9, 182, 226, 240], [1, 242, 250, 255]],
}

SETUP = f"""
import json, resource, torch, circuitwidgets as cw
from circuitwidgets.demo import tiny_hf_model
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
model, tok = tiny_hf_model("llama", layers=1, heads=2, kv_heads=1, d_head=16, n_ctx={N})
attn = model.model.layers[0].self_attn
with torch.no_grad():  # scores a few nats apart (the random init's are all ~0: every row near uniform)
    attn.q_proj.weight.mul_(10)
    attn.k_proj.weight.mul_(10)
ids = torch.randint(3, len(tok), ({N},), generator=torch.Generator().manual_seed(0))

def reference(r0, c0, size, head):
    # float64 weights of rows r0.. over columns c0.. from the model's own modules, not circuitwidgets'
    with torch.no_grad():
        x = model.model.embed_tokens(ids[None])
        hs = model.model.layers[0].input_layernorm(x)
        cos, sin = model.model.rotary_emb(x, torch.arange({N})[None])
        q = attn.q_proj(hs).view(1, {N}, -1, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(hs).view(1, {N}, -1, attn.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        rows = torch.arange(r0, r0 + size)
        scores = (q[0, head, rows].double() @ k[0, head // (q.shape[1] // k.shape[1])].double().T) * attn.scaling
        scores = scores.masked_fill(torch.arange({N})[None] > rows[:, None], float("-inf"))
        return scores.softmax(-1)[:, c0 : c0 + size]

w = cw.AttentionPattern(cw.HFView(model, tokenizer=tok), tokens=ids, layer=0, head={HEAD}, color_scale="log")
w
"""

#: Page coordinates of token cell (row, col) of the window shown, and that window.
TOKEN_XY = """([overlay, canvas, root, r, c, grid]) => {
  const [r0, c0, size] = root.dataset.cwWindow.split(",").map(Number);
  const step = Math.max(1, Math.ceil(size / grid));
  const {left, top, cell} = canvas.cwScene.layout;
  const box = overlay.getBoundingClientRect();
  return [box.x + left + ((c + 0.5 - c0) / step) * cell, box.y + top + ((r + 0.5 - r0) / step) * cell, r0, c0, size];
}"""

#: The heatmap's cell image (one pixel a grid cell) as RGBA, and the colour bar's stops.
CELLS = """(canvas) => {
  const image = canvas.cwScene.ops.find((op) => op.type === "image" && op.cells).source;
  const data = image.getContext("2d").getImageData(0, 0, image.width, image.height).data;
  const bar = canvas.cwScene.ops.find((op) => op.type === "bar").stops;
  return {width: image.width, height: image.height, rgba: Array.from(data), bar};
}"""


def colour_at(stops: list, t: float) -> tuple[int, int, int]:
    """js/lib/scales.js colorAt, step for step (JS rounds halves up)."""
    t = 0 if not t > 0 else min(t, 1)
    i = 1
    while i < len(stops) - 1 and stops[i][0] < t:
        i += 1
    (p0, *a), (p1, *b) = stops[i - 1], stops[i]
    f = (t - p0) / (p1 - p0) if p1 > p0 else 0
    return tuple(math.floor(x + (y - x) * f + 0.5) for x, y in zip(a, b, strict=True))


def code_colour(stops: list, code: int) -> tuple[int, int, int]:
    return colour_at(stops, 0.0 + code * (1.0 / CODE_MAX))  # a CodeStack of lo 0, hi 1: LUT[code]


def log_code(weight: float, floor: float) -> int:
    """The uint8 code of `weight` on the log colour scale (transport.color_scale: positions in [0, 1])."""
    lo = math.log10(floor)
    t = min(1.0, max(0.0, (math.log10(max(weight, floor)) - lo) / -lo))
    return round(t * CODE_MAX)


def py(nb, code: str) -> str:
    return "".join(run_code(nb, code, timeout=180_000).locator(".jp-OutputArea-output").all_text_contents()).strip()


def window(root) -> tuple[int, int, int]:
    r0, c0, size = map(int, root.get_attribute("data-cw-window").split(","))
    return r0, c0, size


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "long_zoom.ipynb", [SETUP])
    page = watched_page(browser)
    open_notebook(page, lab, "long_zoom.ipynb")
    run_all(page, timeout=300_000)
    yield page
    page.close()


@pytest.fixture(scope="module")
def zoomed(nb):
    """Wheel-zoom on TARGET until the window is 16 tokens a side and drawn from exact tiles; the root."""
    assert error_outputs(nb) == []
    root = nb.locator(".cw-root[data-cw-kind=attention]").first
    wait_drawn(root, timeout=180_000)
    # (a long prompt is computed after the cell returns, on the widget's worker thread)
    nb.wait_for_function("(el) => el.dataset.cwWindow !== ''", arg=root.element_handle(), timeout=180_000)
    assert window(root) == (0, 0, N) and root.get_attribute("data-cw-tokens") == str(N), root.get_attribute("data-cw-window")
    overlay, canvas = root.locator(".cw-heatmap-overlay"), root.locator(".cw-heatmap-canvas")
    overlay.scroll_into_view_if_needed()
    sizes = []
    for _ in range(14):
        x, y, r0, c0, size = nb.evaluate(
            TOKEN_XY, [overlay.element_handle(), canvas.element_handle(), root.element_handle(), *TARGET, GRID]
        )
        sizes.append(size)
        if size == 16:
            break
        assert 0 <= y < nb.viewport_size["height"], f"token {TARGET} is off screen at window {r0},{c0},{size}"
        nb.mouse.move(x, y)
        nb.mouse.wheel(0, -120)
        nb.wait_for_function(
            "([el, w]) => el.dataset.cwWindow !== w", arg=[root.element_handle(), f"{r0},{c0},{size}"], timeout=30_000
        )
    assert sizes == [N >> k for k in range(12)], sizes  # one halving per wheel step
    nb.wait_for_function("(el) => el.dataset.cwTileShare === '1'", arg=root.element_handle(), timeout=120_000)
    return root


def test_wheel_zooms_to_the_exact_cells_of_the_model(nb, zoomed):
    root = zoomed
    r0, c0, size = window(root)
    (tr, tc) = TARGET
    assert size == 16 and r0 <= tr < r0 + 16 and c0 <= tc < c0 + 16, (r0, c0, size)  # the wheel kept the target
    assert c0 < r0 + 15 and c0 + 15 > r0, (r0, c0)  # the window straddles the diagonal
    assert "exact cells" in root.locator(".cw-zoom-label").text_content()
    assert py(nb, "print(repr(w.error))") == "''"
    rows, cols, step, row0, col0, head, floor = py(nb, (
        "print(*w.tile['shape'], w.tile['step'], w.tile['row0'], w.tile['col0'], w.tile['head'], w.tile['scale']['floor'])"
    )).split()
    assert (int(step), int(head)) == (1, HEAD)
    assert int(row0) <= r0 and int(row0) + int(rows) >= r0 + 16 and int(col0) <= c0 and int(col0) + int(cols) >= c0 + 16
    # the reference one row and column wider on each side, to show that a window one off would fail
    ref = json.loads(py(nb, f"print(json.dumps(reference({r0 - 1}, {c0 - 1}, 18, {HEAD}).tolist()))"))
    drawn = root.locator(".cw-heatmap-canvas").evaluate(CELLS)
    assert (drawn["width"], drawn["height"]) == (16, 16)
    bar = [tuple(map(int, css.removeprefix("rgb(").removesuffix(")").split(","))) for _, css in drawn["bar"]]
    themes = [name for name, stops in STOPS.items() if bar == [colour_at(stops, 1 - k / 16) for k in range(17)]]
    assert themes, f"the colour bar is not js/lib/scales.js's sequential scale as ported here: {bar}"
    stops = STOPS[themes[0]]

    def mismatches(dr: int, dc: int) -> list:
        """Cells whose drawn colour is not the reference's code +-1, the reference shifted by (dr, dc)."""
        bad: list[tuple] = []
        for i in range(16):
            for j in range(16):
                rgba = tuple(drawn["rgba"][4 * (16 * i + j) : 4 * (16 * i + j) + 4])
                if c0 + j + dc > r0 + i + dr:  # above the diagonal: nothing drawn
                    if rgba[3] != 0:
                        bad.append((i, j, rgba, "empty"))
                    continue
                code = log_code(ref[1 + i + dr][1 + j + dc], float(floor))
                if rgba[3] != 255 or rgba[:3] not in {code_colour(stops, c) for c in (code - 1, code, code + 1)}:
                    bad.append((i, j, rgba, code))
        return bad

    assert mismatches(0, 0) == []
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):  # the check can fail: a window one token off does
        assert len(mismatches(dr, dc)) > 64, (dr, dc)
    assert nb.cw_errors == []


@pytest.mark.parametrize("cell", [(15, 0), (9, 3), (15, 15)])
def test_hover_reads_the_exact_weight(nb, zoomed, cell):
    root = zoomed
    r0, c0, _ = window(root)
    i, j = cell
    query, key = r0 + i, c0 + j
    assert key <= query
    nb.mouse.move(*cell_centre(root.locator(".cw-heatmap"), i, j))
    nb.wait_for_function(
        "([el, q, k]) => el.textContent.includes(`destination (query) ${q} `)"
        " && el.textContent.includes(`source (key) ${k} `) && el.dataset.cwValue !== ''",
        arg=[root.locator(".cw-readout").element_handle(), query, key],
        timeout=60_000,
    )
    shown = float(root.locator(".cw-readout").get_attribute("data-cw-value"))
    expected = json.loads(py(nb, f"print(json.dumps(reference({query}, {key}, 1, {HEAD}).item()))"))
    other_head = json.loads(py(nb, f"print(json.dumps(reference({query}, {key}, 1, {1 - HEAD}).item()))"))
    assert shown == pytest.approx(expected, rel=1e-5, abs=1e-12)
    assert shown != pytest.approx(other_head, rel=1e-2)  # the shown head's weight, not its neighbour's
    assert nb.cw_errors == []


def test_memory_stays_bounded(nb, zoomed):
    """No [n, n] matrix of any head was held: one head's would be 4.3 GB of float32."""
    peak_mb = float(py(nb, "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"))
    print(f"kernel peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 3000, peak_mb
