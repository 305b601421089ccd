"""A long run the browser asks for, in JupyterLab: the widget's progress bar, its Cancel button, the picture after.

The 8 192-token prompt of tests/long_model.py is drawn at layer 0 in the cell (computed there); the
layer select then asks for layer 1, which runs on the kernel's worker thread: the progress row
shows what is being computed ("computing layer 1 of 2, block 3 of 10"), Cancel stops it (the error
banner says so, the layer-0 picture stays), and a second request draws layer 1 with the exact pattern.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import error_outputs, open_notebook, run_all, run_code, wait_attr, wait_drawn, watched_page  # noqa: E402

N = 8192
SETUP = f"""
import torch, circuitwidgets as cw
from circuitwidgets import in_trace
from circuitwidgets.analysis import long_patterns
from long_model import long_model
long_patterns.CHUNK_CELLS = in_trace.BLOCK_CELLS = 1 << 20   # many blocks: the run takes a while, in steps
model, (L, H) = long_model()
toks = torch.randint(1, 64, ({N},), generator=torch.Generator().manual_seed(0))
toks[0] = 0
w = cw.AttentionPattern(model, tokens=toks, layer=0, head=1)
w
"""


@pytest.fixture(scope="module")
def nb(lab, browser):
    shutil.copy(Path(__file__).parents[1] / "long_model.py", lab.root / "long_model.py")
    from _harness import write_notebook

    write_notebook(lab.root / "progress.ipynb", [SETUP])
    page = watched_page(browser)
    open_notebook(page, lab, "progress.ipynb")
    run_all(page, timeout=300_000)
    yield page
    page.close()


def py(nb, code: str) -> str:
    return "".join(run_code(nb, code, timeout=120_000).locator(".jp-OutputArea-output").all_text_contents()).strip()


def test_progress_cancel_and_the_picture_after(nb):
    root = nb.locator(".cw-root[data-cw-kind=attention]").first
    wait_drawn(root, timeout=120_000)
    assert error_outputs(nb) == [] and root.get_attribute("data-cw-layer") == "0"
    row = root.locator(".cw-progress")
    assert row.is_hidden()  # (drawn in the cell: nothing running)
    layer = root.locator("select.cw-select").nth(0)
    layer.select_option("1")
    row.wait_for(state="visible", timeout=60_000)
    nb.wait_for_function(
        "(el) => /computing layer [01] of 2, block \\d+ of \\d+/.test(el.textContent)",
        arg=root.locator(".cw-progress-text").element_handle(), timeout=60_000,
    )
    text = root.locator(".cw-progress-text").text_content()
    done, total = map(int, re.search(r"block (\d+) of (\d+)", text).groups())
    assert 1 <= done <= total
    root.locator(".cw-progress-cancel").click()
    banner = root.locator(".cw-error")
    banner.wait_for(state="visible", timeout=60_000)
    assert f"cancelled: layer 1 of {N} tokens was not computed" in banner.text_content()
    row.wait_for(state="hidden", timeout=60_000)
    assert root.get_attribute("data-cw-layer") == "0"  # the picture drawn is still layer 0's, said to be so
    assert py(nb, "print(w.patterns['layer'], w.layer, w.cancel, w._job)") == "0 1 1 None"
    layer.select_option("0")
    layer.select_option("1")  # asked again: this time it runs to the end
    wait_attr(root, "data-cw-layer", "1", timeout=180_000)
    assert banner.is_hidden() and row.is_hidden()
    exact = py(nb, "p = cw.analysis.attention_patterns(model, toks[None], layers=[1])[0]; "
                   "pooled = long_patterns.pool(p, w.patterns['lod']['factor']); "
                   "print(float((w._answer.parts['overview']['max'] - pooled).abs().max()) < 1e-5)")
    assert exact == "True"
    assert nb.cw_errors == []


def test_a_deferred_widget_appears_at_once_with_progress_then_draws(nb):
    """``defer=True``: the cell returns at once, the widget shows its progress row while the worker thread computes,
    then the picture, exact."""
    run_code(nb, "d = cw.AttentionPattern(model, tokens=toks.flip(0), layer=1, head=0, defer=True); d", timeout=60_000)
    root = nb.locator(".cw-root[data-cw-kind=attention]").last
    row = root.locator(".cw-progress")
    row.wait_for(state="visible", timeout=60_000)
    nb.wait_for_function(
        "(el) => /computing layer 1 of 2/.test(el.textContent)",
        arg=root.locator(".cw-progress-text").element_handle(), timeout=60_000,
    )
    wait_attr(root, "data-cw-layer", "1", timeout=180_000)
    row.wait_for(state="hidden", timeout=60_000)
    exact = py(nb, "p = cw.analysis.attention_patterns(model, toks.flip(0)[None], layers=[1])[0]; "
                   "pooled = long_patterns.pool(p, d.patterns['lod']['factor']); "
                   "print(d.error == '', float((d._answer.parts['overview']['max'] - pooled).abs().max()) < 1e-5)")
    assert exact == "True True"
    assert nb.cw_errors == []
