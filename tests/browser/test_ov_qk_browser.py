"""OVCircuit and QKCircuit in a real browser: in JupyterLab and as exported HTML opened offline.

Each widget draws (non-blank canvas), choosing another head in its controls changes the picture,
and the hover read-out shows the value that circuitwidgets.analysis computes for that cell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _harness import canvas_stats, network_urls, open_notebook, open_offline, run_all, wait_drawn, write_notebook  # noqa: E402
from planted import planted_model, word_tokenizer  # noqa: E402

from circuitwidgets.analysis import full_ov_circuit, full_qk_circuit  # noqa: E402

TOKENS = list(range(1, 21))
SETUP = f"""
import circuitwidgets as cw
from planted import planted_model, word_tokenizer
model, heads = planted_model()
model.tokenizer = word_tokenizer()
TOKENS = {TOKENS!r}
"""


@pytest.fixture(scope="module")
def model():
    m, _ = planted_model()
    m.tokenizer = word_tokenizer()
    return m


def reference(kind: str, model, layer: int, head: int) -> torch.Tensor:
    if kind == "ov":
        return full_ov_circuit(model, layer, head).block(TOKENS, TOKENS)
    return full_qk_circuit(model, layer, head, scaled=True).block(TOKENS, TOKENS)


def check_widget(page, kind: str, model, layer: int, first: int, second: int) -> None:
    """Drawn, head switch changes the picture, hover read-out agrees with analysis."""
    root = page.locator(f".cw-root[data-cw-kind={kind}]").first
    count = wait_drawn(root)
    main = root.locator(".cw-heatmap-canvas").first
    before = canvas_stats(main)
    assert before["colours"] > 5, before
    assert root.get_attribute("data-cw-head") == str(first)
    if kind == "ov":
        plane = canvas_stats(root.locator(".cw-plane"))
        assert plane["colours"] > 3 and plane["painted"] > 500, plane
        assert root.locator(".cw-stat-value").first.inner_text().strip() not in ("", "n/a")
    else:
        assert canvas_stats(root.locator(".cw-heatmap-canvas").nth(1))["colours"] > 5
    root.locator("select[aria-label=Head]").select_option(str(second))
    wait_drawn(root, above=count)
    assert root.get_attribute("data-cw-head") == str(second)
    after = canvas_stats(main)
    assert after["hash"] != before["hash"], "head switch left the picture unchanged"
    # hover inside the plot: the read-out names a cell and its exact value
    overlay = root.locator(".cw-heatmap-overlay").first
    box = overlay.bounding_box()
    overlay.hover(position={"x": box["width"] * 0.45, "y": box["height"] * 0.45})
    readout = root.locator(".cw-readout")
    page.wait_for_function("(el) => el.dataset.value !== undefined", arg=readout.element_handle())
    text = readout.inner_text()
    assert f"L{layer} H{second}" in text
    value = float(readout.get_attribute("data-value"))
    if kind == "ov":
        row, col = int(readout.get_attribute("data-row")), int(readout.get_attribute("data-col"))
    else:  # the QK read-out names query and key tokens t<i>; recover the cell from the text
        import re

        row, col = (TOKENS.index(int(t)) for t in re.findall(r"“t(\d+)”", text)[:2])
    expected = float(reference(kind, model, layer, second)[row, col])
    assert value == pytest.approx(expected, rel=1e-4, abs=1e-5), (text, row, col)


def test_in_jupyterlab(lab, page, model):
    write_notebook(
        lab.root / "ov_qk_check.ipynb",
        [
            SETUP,
            "ov = cw.OVCircuit(model, 1, 1, tokens=TOKENS)\nov",
            "qk = cw.QKCircuit(model, 1, 1, tokens=TOKENS)\nqk",
        ],
    )
    open_notebook(page, lab, "ov_qk_check.ipynb")
    run_all(page)
    check_widget(page, "ov", model, 1, 1, 3)
    check_widget(page, "qk", model, 1, 1, 2)
    assert page.cw_errors == []


def test_exported_html_offline(page, model, tmp_path):
    import circuitwidgets as cw

    for kind, cls in (("ov", cw.OVCircuit), ("qk", cw.QKCircuit)):
        path = cls(model, 1, 1, tokens=TOKENS).save_html(tmp_path / f"{kind}.html")
        requested = open_offline(page, path)
        check_widget(page, kind, model, 1, 1, 0)
        assert network_urls(requested) == []
        assert page.locator(f".cw-root[data-cw-kind={kind}] select[aria-label=Layer]").is_disabled()
    assert page.cw_errors == []


def test_rotary_model_positional_view_and_captions_offline(page, tmp_path):
    """A rotary model's QK view draws its repeated-token positional pattern and says what each side leaves out."""
    from factories import small_bridge

    import circuitwidgets as cw
    from circuitwidgets import transport

    model = small_bridge(positional_embedding_type="rotary", n_ctx=32)
    widget = cw.QKCircuit(model, 1, 2, tokens=TOKENS)
    open_offline(page, widget.save_html(tmp_path / "rotary.html"))
    root = page.locator(".cw-root[data-cw-kind=qk]").first
    wait_drawn(root)
    captions = root.locator(".cw-qk-caption").all_inner_texts()
    assert captions == [widget.qk["caption"], widget.positional["caption"]]
    assert "rotation of queries and keys by position is left out" in captions[0]
    assert captions[1].startswith("Rotary positions:") and not root.locator(".cw-qk-note").is_visible()
    positional = root.locator(".cw-heatmap-canvas").nth(1)
    assert canvas_stats(positional)["colours"] > 5
    # hover a cell of the positional view: the read-out gives its weight, as the kernel computed it
    overlay = root.locator(".cw-heatmap-overlay").nth(1)
    box = overlay.bounding_box()
    overlay.hover(position={"x": box["width"] * 0.3, "y": box["height"] * 0.8})
    text = root.locator(".cw-readout").inner_text()
    import re

    row, col = (int(x) for x in re.search(r"destination position (\d+) → source position (\d+)", text).groups())
    shown = float(re.search(r"weight ≈([-\d.e]+)", text).group(1))
    assert shown == pytest.approx(float(transport.decode(widget.positional)[2, row, col]), abs=2e-3)
    assert page.cw_errors == []
