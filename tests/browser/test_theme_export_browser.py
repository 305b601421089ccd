"""Theme detection for VS Code and Colab, PNG export at the device pixel ratio (at least 2x), and
SVG heatmap cells as vector rects, in Chromium on an exported page opened from disk offline.

The page is ``cw.AttentionPattern(cw.demo_model(), prompt="abcabc").save_html(path)``. The theme
test sets what each frontend sets (VS Code: ``--vscode-editor-*`` variables on <html> and a
``vscode-dark`` / ``vscode-light`` class on <body>; Colab: ``<html theme=dark|light>``) on a page
that prefers dark, and checks the widget's ``data-cw-theme`` / ``data-cw-theme-source`` and the
colour of the title it draws on the heatmap canvas.
"""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import chromium_context, network_urls, open_offline, wait_attr, wait_drawn  # noqa: E402

#: The title's colour on the heatmap canvas: the most opaque pixel in the title's box (CSS px),
#: where a glyph's stem covers whole pixels and so has the exact colour.
TITLE_COLOUR = """(canvas) => {
  const dpr = canvas.width / canvas.getBoundingClientRect().width;
  const w = Math.round(140 * dpr), h = Math.round(20 * dpr);
  const data = canvas.getContext("2d").getImageData(0, 0, w, h).data;
  let best = -1, rgb = null;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] > best) { best = data[i + 3]; rgb = [data[i], data[i + 1], data[i + 2]]; }
  }
  return {alpha: best, rgb};
}"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    import circuitwidgets as cw

    path = tmp_path_factory.mktemp("theme-export") / "attention.html"
    cw.AttentionPattern(cw.demo_model(), prompt="abcabc").save_html(path)
    return path


def hex_rgb(css: str) -> list[int]:
    return [int(css[i : i + 2], 16) for i in (1, 3, 5)]


def title_rgb(root) -> list[int]:
    found = root.locator(".cw-heatmap-canvas").first.evaluate(TITLE_COLOUR)
    assert found["alpha"] == 255, found
    return found["rgb"]


def wait_theme(root, theme: str, source: str) -> None:
    wait_attr(root, "data-cw-theme-source", source)
    wait_attr(root, "data-cw-theme", theme)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def save(page, root, kind: str) -> bytes:
    with page.expect_download() as download:
        root.get_by_role("button", name=f"save the heatmap as {kind}").click()
    return Path(download.value.path()).read_bytes()


def css_size(root) -> tuple[float, float]:
    """The heatmap canvas's CSS size: the scene it drew, which is also its box on the page."""
    canvas = root.locator(".cw-heatmap-canvas").first
    w, h = canvas.evaluate("(c) => [c.cwScene.width, c.cwScene.height]")
    box = canvas.bounding_box()
    assert abs(box["width"] - w) < 0.01 and abs(box["height"] - h) < 0.01
    return w, h


SET_VSCODE = """([bg, fg, cls]) => {
  const s = document.documentElement.style;
  s.setProperty("--vscode-editor-background", bg);
  s.setProperty("--vscode-editor-foreground", fg);
  document.body.classList.add("vscode-body", cls);
}"""
CLEAR_VSCODE = """() => {
  const s = document.documentElement.style;
  s.removeProperty("--vscode-editor-background");
  s.removeProperty("--vscode-editor-foreground");
  document.body.classList.remove("vscode-body", "vscode-dark", "vscode-light");
}"""


def test_theme_follows_vscode_then_colab(page, exported):
    page.emulate_media(color_scheme="dark")  # so the light themes below beat the preference
    requested = open_offline(page, exported)
    root = page.locator(".cw-root").first
    wait_drawn(root)
    wait_theme(root, "dark", "page")  # the exported page's own dark background
    # VS Code, dark: its variables and body class
    page.evaluate(SET_VSCODE, ["#1e1e1e", "#d4d4d4", "vscode-dark"])
    wait_theme(root, "dark", "vscode")
    assert title_rgb(root) == hex_rgb("#d4d4d4"), "the title is drawn in --vscode-editor-foreground"
    # VS Code, light
    page.evaluate(CLEAR_VSCODE)
    page.evaluate(SET_VSCODE, ["#ffffff", "#3b3b3b", "vscode-light"])
    wait_theme(root, "light", "vscode")
    assert title_rgb(root) == hex_rgb("#3b3b3b")
    # Colab, dark, then light (no variables: the widget's own colours for each)
    page.evaluate(CLEAR_VSCODE)
    page.evaluate("() => document.documentElement.setAttribute('theme', 'dark')")
    wait_theme(root, "dark", "colab")
    assert title_rgb(root) == hex_rgb("#e6e6e6")
    page.evaluate("() => document.documentElement.setAttribute('theme', 'light')")
    wait_theme(root, "light", "colab")
    assert title_rgb(root) == hex_rgb("#1f2328")
    # and the DOM follows too (CSS), e.g. the prompt box's text
    colour = root.locator("textarea.cw-prompt").evaluate("(el) => getComputedStyle(el).color")
    assert colour == "rgb(31, 35, 40)"
    # no frontend left: back to the page's preference
    page.evaluate("() => document.documentElement.removeAttribute('theme')")
    wait_theme(root, "dark", "page")
    assert title_rgb(root) == hex_rgb("#e6e6e6")
    assert network_urls(requested) == []
    assert page.cw_errors == []


def test_png_is_saved_at_twice_the_css_size_and_svg_cells_are_vector(page, exported):
    requested = open_offline(page, exported)
    root = page.locator(".cw-root").first
    wait_drawn(root)
    assert page.evaluate("devicePixelRatio") == 1
    w, h = css_size(root)
    assert png_size(save(page, root, "PNG")) == (round(w * 2), round(h * 2))
    # SVG: this 7 x 7 pattern is under the rule (128 x 128 cells), so its cells are rects
    button = root.get_by_role("button", name="save the heatmap as SVG")
    assert "128 × 128 = 16 384 cells" in button.get_attribute("title")
    svg = save(page, root, "SVG").decode()
    n = int(root.get_attribute("data-cw-tokens"))
    assert f'data-cells="{n}x{n}"' in svg and "<image" not in svg
    cells = re.search(r'<g class="cw-cells"[^>]*>(.*?)</g>', svg, re.S).group(1)
    assert n <= cells.count("<rect ") <= n * (n + 1) // 2  # causal: the upper triangle is empty
    assert network_urls(requested) == []
    assert page.cw_errors == []


def test_png_follows_a_device_pixel_ratio_of_3(playwright_instance, exported):
    with chromium_context(playwright_instance, device_scale_factor=3) as context:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        open_offline(page, exported)
        root = page.locator(".cw-root").first
        wait_drawn(root)
        assert page.evaluate("devicePixelRatio") == 3
        w, h = css_size(root)
        canvas = root.locator(".cw-heatmap-canvas").first
        assert canvas.evaluate("(c) => [c.width, c.height]") == [round(w * 3), round(h * 3)]  # on screen
        assert png_size(save(page, root, "PNG")) == (round(w * 3), round(h * 3))
        assert errors == []
