"""AttentionPattern in a real browser: JupyterLab running the example notebook, and exported pages
opened from disk with the network blocked. See conftest.py for the fixtures.

The JupyterLab tests share one notebook page (module scope) and run in file order: first the
notebook runs, then each test drives the induction-head widget (``ind_view``) in it.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path

import pytest
import traitlets

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
    wait_attr,
    wait_drawn,
    watched_page,
)

NOTEBOOK = "01_attention_patterns.ipynb"
EXPORTED = "induction_head.html"  # written by the notebook's last cell
XSS = "<img src=x onerror=alert(1)>"


def heatmap(root):
    return root.locator(".cw-heatmap-canvas")


def picture(root) -> dict:
    return canvas_stats(heatmap(root))


def scene_labels(root) -> list[str]:
    """Row labels drawn on the heatmap canvas (after thinning)."""
    return heatmap(root).evaluate(
        "(c) => c.cwScene.ops.filter((o) => o.type === 'text' && o.baseline === 'middle' && !o.rotate && o.align === 'right')"
        ".map((o) => o.text)"
    )


def hover_cell(page, root, query: int, key: int) -> None:
    page.mouse.move(*cell_centre(root.locator(".cw-heatmap").first, query, key))


def assert_drawn(root) -> dict:
    stats = picture(root)
    assert stats["painted"] > 0.15 * stats["total"], stats  # cells, labels, colour bar (the upper triangle stays clear)
    assert stats["colours"] > 20, f"the heatmap looks blank: {stats}"
    for thumb in root.locator(".cw-thumb-canvas").all():
        assert canvas_stats(thumb)["colours"] >= 2, "a thumbnail is blank"
    return stats


# ----- JupyterLab ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nb(lab, browser):
    """The example notebook, opened in JupyterLab and run top to bottom."""
    page = watched_page(browser)
    open_notebook(page, lab, NOTEBOOK)
    run_all(page)
    yield page
    page.close()


@pytest.fixture
def ind(nb):
    """The root element of the induction-head widget (``ind_view``)."""
    root = nb.locator(".jp-CodeCell", has_text="ind_view = cw.AttentionPattern").locator(".cw-root")
    wait_drawn(root)
    root.scroll_into_view_if_needed()
    return root


def py(nb, code: str) -> str:
    """Run `code` in the notebook's kernel; its printed output."""
    return "".join(run_code(nb, code).locator(".jp-OutputArea-output").all_text_contents())


def test_notebook_runs_and_every_widget_draws(nb, lab):
    errors = error_outputs(nb)
    assert errors == [], f"the notebook raised: {errors[0][-1500:]}"
    roots = nb.locator(".cw-root[data-cw-kind=attention]")
    assert roots.count() >= 3
    for i, root in enumerate(roots.all()):
        wait_drawn(root)
        root.scroll_into_view_if_needed()
        assert_drawn(root)
        if i == 1:  # ind_view: the notebook demonstrates an out-of-range head on it
            assert "head=99 is out of range" in root.locator(".cw-error").text_content()
        else:
            assert root.locator(".cw-error").is_hidden()
    assert (lab.root / EXPORTED).exists()
    assert nb.cw_errors == []


def test_click_thumbnail_selects_head_and_click_again_releases(nb, ind):
    head = int(ind.get_attribute("data-cw-head"))
    other = (head + 1) % ind.locator(".cw-thumb").count()
    before = picture(ind)["hash"]
    ind.locator(".cw-thumb").nth(other).click()
    wait_attr(ind, "data-cw-head", str(other))
    assert ind.locator(".cw-thumb").nth(other).get_attribute("class").count("cw-thumb-locked") == 1
    assert ind.locator("select.cw-select").nth(1).input_value() == str(other)
    assert picture(ind)["hash"] != before
    assert py(nb, "print(ind_view.head)").strip() == str(other)  # the kernel sees the click
    ind.locator(".cw-thumb").nth(other).click()  # second click on the selected head: released
    assert ind.locator(".cw-thumb-locked").count() == 0
    assert ind.get_attribute("data-cw-head") == str(other)


def test_arrow_keys_move_the_head(nb, ind):
    head = int(ind.get_attribute("data-cw-head"))
    n = ind.locator(".cw-thumb").count()
    ind.locator(".cw-readout").click()  # focus inside the widget, outside the text box
    nb.keyboard.press("ArrowLeft" if head == n - 1 else "ArrowRight")
    target = head - 1 if head == n - 1 else head + 1
    wait_attr(ind, "data-cw-head", str(target))
    assert py(nb, "print(ind_view.head)").strip() == str(target)


def test_hover_shows_exact_weight_and_colours_tokens(nb, ind):
    n = int(ind.get_attribute("data-cw-tokens"))
    hover_cell(nb, ind, n - 1, n - 2)
    readout = ind.locator(".cw-readout")
    nb.wait_for_function("(el) => /weight [0-9]/.test(el.textContent)", arg=readout.element_handle(), timeout=15_000)
    text = readout.text_content()
    assert f"destination (query) {n - 1}" in text and f"source (key) {n - 2}" in text and "≈" not in text
    ids = json.loads(py(nb, "import json; print(json.dumps(ind_view.tokens))"))
    assert f"(id {ids[n - 1]})" in text and f"(id {ids[n - 2]})" in text  # the exact token, by id
    weight = float(re.search(r"weight ([0-9.e-]+)", text).group(1))
    exact = float(py(nb, f"print(ind_view.current_patterns()[ind_view.head, {n - 1}, {n - 2}].item())"))
    assert abs(weight - exact) < 1e-3
    ind.locator(".cw-token").nth(n - 1).hover()
    coloured = ind.locator(".cw-token[data-weight]")
    assert coloured.count() == n  # the last token pays attention to every token
    total = sum(float(t.get_attribute("data-weight")) for t in coloured.all())
    assert abs(total - 1) < 0.02  # its weights sum to one


def test_typing_a_prompt_changes_labels_and_picture(nb, ind):
    before, labels = picture(ind)["hash"], scene_labels(ind)
    draws = int(ind.get_attribute("data-cw-draws"))
    box = ind.locator("textarea.cw-prompt")
    box.fill("abcdefg abcdefg")
    box.press("Enter")
    wait_attr(ind, "data-cw-tokens", "16")
    wait_drawn(ind, draws)
    assert scene_labels(ind) != labels and scene_labels(ind)[:3] == ["<bos>", "a", "b"]
    assert picture(ind)["hash"] != before
    assert ind.locator(".cw-tokens").text_content().startswith("<bos>abcdefg abcdefg")
    assert py(nb, "print(repr(ind_view.prompt), len(ind_view.str_tokens))").strip() == "'abcdefg abcdefg' 16"


def test_layer_selector_reruns_in_the_kernel(nb, ind):
    before = picture(ind)["hash"]
    layer = ind.locator("select.cw-select").nth(0)
    layer.select_option("0")
    wait_attr(ind, "data-cw-layer", "0")
    assert picture(ind)["hash"] != before
    assert py(nb, "print(ind_view.layer, ind_view.patterns['layer'])").strip() == "0 0"
    layer.select_option("1")
    wait_attr(ind, "data-cw-layer", "1")


def test_out_of_range_head_from_python_shows_error_and_keeps_picture(nb, ind):
    before = picture(ind)["hash"]
    out = py(nb, "ind_view.head = 99")
    assert "TraitError" in out
    banner = ind.locator(".cw-error")
    banner.wait_for(state="visible")
    assert "head=99 is out of range" in banner.text_content()
    assert picture(ind)["hash"] == before
    py(nb, "ind_view.head = 0")
    banner.wait_for(state="hidden")


def test_xss_prompt_shows_as_text(nb, ind):
    box = ind.locator("textarea.cw-prompt")
    box.fill(f"ab {XSS} ab")
    box.press("Enter")
    # the demo tokenizer turns "<" and ">" into <unk>: token strings that are markup-like themselves
    strip = ind.locator(".cw-tokens")
    nb.wait_for_function("(el) => el.textContent.includes('onerror')", arg=strip.element_handle(), timeout=15_000)
    assert "<unk>img src=x onerror=alert(1)<unk>" in strip.text_content()
    assert box.input_value() == f"ab {XSS} ab"
    assert nb.locator(".cw-root img, .cw-root unk").count() == 0
    assert "<unk>" in scene_labels(ind)
    assert nb.cw_errors == []  # no alert() dialog, no script error


def test_theme_follows_jupyterlab(nb, ind):
    assert ind.get_attribute("data-cw-theme") == "light"
    py(nb, "pass")
    nb.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    nb.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).hover()
    nb.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Dark$")).click()
    wait_attr(ind, "data-cw-theme", "dark")
    assert_drawn(ind)
    nb.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    nb.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).hover()
    nb.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Light$")).click()
    wait_attr(ind, "data-cw-theme", "light")


def test_a_weight_edit_in_a_cell_shows_at_the_next_head_switch(nb, ind):
    """Live binding end to end: zero the layer's queries through ``.data`` (no version bump), then
    switch head in the page: the kernel sees the edit and redraws, so every row becomes uniform."""
    edit = (
        "saved = {n: p.detach().clone() for n, p in model.named_parameters()}\n"
        "for name, p in model.blocks[ind_view.layer].attn.named_parameters():\n"
        "    if 'q' in name.split('.') or name in ('W_Q', 'b_Q'):\n"
        "        p.data.zero_()\n"
        "print(ind_view.refresh_count)"
    )
    runs = int(py(nb, edit))
    head = int(ind.get_attribute("data-cw-head"))
    draws = int(ind.get_attribute("data-cw-draws"))
    ind.locator(".cw-readout").click()
    nb.keyboard.press("ArrowLeft" if head else "ArrowRight")
    nb.wait_for_function(  # the head switch draws from the old payload, then the kernel's new one
        f"(el) => Number(el.dataset.cwDraws) >= {draws + 2}", arg=ind.element_handle(), timeout=30_000
    )
    n = int(ind.get_attribute("data-cw-tokens"))
    hover_cell(nb, ind, n - 1, n - 2)
    readout = ind.locator(".cw-readout")
    nb.wait_for_function("(el) => /weight [0-9]/.test(el.textContent)", arg=readout.element_handle(), timeout=15_000)
    weight = float(re.search(r"weight ([0-9.e-]+)", readout.text_content()).group(1))
    assert abs(weight - 1 / n) < 1e-4, "the picture is the edited model's: uniform attention"
    assert int(py(nb, "print(ind_view.refresh_count)")) == runs + 1
    py(nb, "for n, p in model.named_parameters():\n    p.data.copy_(saved[n])")  # restore the model


# ----- exported pages, offline -----------------------------------------------------------------

def test_exported_notebook_page_works_offline(nb, lab, page):
    requested = open_offline(page, lab.root / EXPORTED)
    root = page.locator(".cw-root").first
    wait_drawn(root)
    assert_drawn(root)
    head = int(root.get_attribute("data-cw-head"))
    other = (head + 1) % root.locator(".cw-thumb").count()
    before = picture(root)["hash"]
    root.locator(".cw-thumb").nth(other).click()
    wait_attr(root, "data-cw-head", str(other))
    assert picture(root)["hash"] != before
    n = int(root.get_attribute("data-cw-tokens"))
    hover_cell(page, root, n - 1, 1)
    assert re.search(r"weight ≈?[0-9]", root.locator(".cw-readout").text_content())
    root.locator(".cw-token").nth(n - 1).hover()
    assert root.locator(".cw-token[data-weight]").count() == n
    assert root.locator("textarea.cw-prompt").get_attribute("readonly") is not None  # no kernel here
    assert network_urls(requested) == []
    assert page.cw_errors == []


@pytest.fixture(scope="module")
def planted_page(tmp_path_factory):
    """An exported page made here: two linked widgets in an HBox, XSS labels, one with an error."""
    import ipywidgets

    from circuitwidgets.widgets._export import export_html
    from circuitwidgets.widgets.attention import AttentionPattern

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from planted import planted_model, word_tokenizer

    model, heads = planted_model()
    tokenizer = word_tokenizer()
    decode = tokenizer.decode
    # untrusted token strings, as a hostile tokenizer could produce: token t3 reads as markup
    tokenizer.decode = lambda ids, **kw: XSS if list(ids) == [3] else decode(ids, **kw)
    model.tokenizer = tokenizer
    prompt = " ".join(f"t{i % 7 + 1}" for i in range(30))
    a = AttentionPattern(model, prompt=prompt, layer=0, head=heads["previous_token"][1])
    b = AttentionPattern(model, prompt=prompt, layer=1, head=heads["induction"][1])
    with contextlib.suppress(traitlets.TraitError):
        b.head = 99
    path = tmp_path_factory.mktemp("export") / "planted.html"
    export_html(ipywidgets.HBox([a, b]), path, links=[((a, "head"), (b, "head"))])
    return path


def test_exported_page_offline_xss_error_links_and_saving(page, planted_page, tmp_path):
    requested = open_offline(page, planted_page)
    roots = page.locator(".cw-root")
    assert roots.count() == 2
    a, b = roots.nth(0), roots.nth(1)
    for root in (a, b):
        wait_drawn(root)
        assert_drawn(root)
    # hostile labels are text
    assert XSS in a.locator(".cw-tokens").text_content()
    assert "<img\u2423src=x\u2423on\u2026" in scene_labels(a)  # drawn as text, spaces made visible
    assert page.locator("img").count() == 0
    # the error saved with the widget is shown, and its picture kept
    assert "head=99 is out of range" in b.locator(".cw-error").text_content()
    # linked heads follow each other
    a.locator(".cw-thumb").nth(3).click()
    wait_attr(b, "data-cw-head", "3")
    # PNG and SVG of the current view
    with page.expect_download() as png:
        a.get_by_role("button", name="save the heatmap as PNG").click()
    data = Path(png.value.path()).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    with page.expect_download() as svg:
        a.get_by_role("button", name="save the heatmap as SVG").click()
    text = Path(svg.value.path()).read_text()
    assert text.startswith("<svg") and "&lt;img\u2423src=x" in text and "<img" not in text
    assert png.value.suggested_filename.endswith(".png") and svg.value.suggested_filename.endswith(".svg")
    assert network_urls(requested) == []
    assert page.cw_errors == []
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    print("screenshot", tmp_path / "page.png")


def test_a_selection_set_in_python_before_the_first_picture_shows_in_it(page, tmp_path):
    import circuitwidgets as cw

    w = cw.AttentionPattern(cw.demo_model(), prompt="abcdabcd", layer=1, head=1)
    w.selection = {"query": 6, "key": 3, "locked": True}
    path = w.save_html(tmp_path / "selected.html")
    open_offline(page, path)
    root = page.locator(".cw-root").first
    wait_drawn(root)
    text = root.locator(".cw-readout").text_content()
    assert "destination (query) 6" in text and "source (key) 3" in text and "locked" in text, text
    assert page.cw_errors == []


def test_exported_page_follows_dark_preference(page, planted_page):
    page.emulate_media(color_scheme="dark")
    open_offline(page, planted_page)
    root = page.locator(".cw-root").first
    wait_drawn(root)
    assert root.get_attribute("data-cw-theme") == "dark"
    assert_drawn(root)
