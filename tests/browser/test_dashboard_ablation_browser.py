"""The Dashboard's ablation toggle in a real browser (JupyterLab in Chromium), on the demo model.

Clicking "ablate L0H1" (a previous-token head, selected in the attention pattern's own selectors)
ablates it: every child that runs the model shows the note "L0H1 zero-ablated", the weight views say
the ablation leaves them unchanged, and the layer-1 attention picture (the induction heads read the
previous-token head through K-composition) changes to the ablated model's, as the kernel computes it.
"Clear all" brings back the model's picture and removes the notes. The tests share one notebook page
and run in file order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    canvas_stats,
    error_outputs,
    network_urls,
    open_notebook,
    open_offline,
    run_all,
    run_code,
    wait_attr,
    wait_drawn,
    write_notebook,
)

PROMPT = "qwertyuiop" * 2
SETUP = f"""
import circuitwidgets as cw
model = cw.demo_model()
dash = cw.Dashboard(model, prompt={PROMPT!r}, layer=1, head=0, ablated=[])
dash
"""
NOTE = "L0H1 zero-ablated"


@pytest.fixture(scope="module")
def nb(lab, browser):
    write_notebook(lab.root / "dashboard_ablation.ipynb", [SETUP])
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    open_notebook(page, lab, "dashboard_ablation.ipynb")
    run_all(page)
    yield page
    page.close()


def root(page, kind: str):
    return page.locator(f".cw-root[data-cw-kind={kind}]").first  # (one dashboard per page)


def py(page, code: str) -> str:
    return "".join(run_code(page, code).locator(".jp-OutputArea-output").all_text_contents()).strip()


def picture(page) -> int:
    """Hash of the attention heatmap's pixels (the selected head of the layer shown)."""
    return canvas_stats(root(page, "attention").locator(".cw-heatmap-canvas").first)["hash"]


def wait_picture(page, want, timeout_ms: int = 30_000) -> int:
    """Wait until `want(hash)` holds for the attention heatmap's picture; returns the hash."""
    for _ in range(timeout_ms // 100):
        now = picture(page)
        if want(now):
            return now
        page.wait_for_timeout(100)
    raise AssertionError(f"the attention picture never got there (last hash {now})")


def wait_note(page, kind: str, text: str) -> None:
    handle = root(page, kind).element_handle()
    page.wait_for_function("([el, t]) => (el.dataset.cwModelNote || '') === t", arg=[handle, text], timeout=30_000)


def select_head(page, layer: int, head: int) -> None:
    """Select a head with the attention pattern's own selectors (the dashboard's one pair); wait until it is drawn."""
    att = root(page, "attention")
    att.locator("select[aria-label=Layer]").select_option(str(layer))
    wait_attr(att, "data-cw-layer", str(layer))
    att.locator("select[aria-label=Head]").select_option(str(head))
    wait_attr(att, "data-cw-head", str(head))


SEEN: dict[str, int] = {}  # the model's own layer-1 picture, for the last tests


def test_the_toggle_draws_above_the_dashboard_with_no_note(nb):
    assert error_outputs(nb) == []
    toggle, att = root(nb, "ablationtoggle"), root(nb, "attention")
    wait_drawn(toggle)
    wait_drawn(att)
    assert toggle.bounding_box()["y"] < att.bounding_box()["y"]
    assert toggle.locator("button.cw-abl-toggle").text_content() == "ablate L1H0"
    assert toggle.locator("button.cw-abl-clear").is_disabled()
    assert "no head ablated" in toggle.locator(".cw-abl-status").text_content()
    for kind in ("attention", "attribution", "headscores", "ov"):
        assert root(nb, kind).locator(".cw-model-note").count() == 0, kind  # nothing to say yet
    SEEN["model"] = picture(nb)
    assert nb.cw_errors == []


def test_clicking_ablate_changes_the_layer_1_picture_and_shows_the_notes(nb):
    toggle, att = root(nb, "ablationtoggle"), root(nb, "attention")
    select_head(nb, 0, 1)  # the previous-token head L0H1
    button = toggle.locator("button.cw-abl-toggle")
    nb.wait_for_function("(el) => el.textContent === 'ablate L0H1'", arg=button.element_handle())
    button.click()
    wait_attr(toggle, "data-cw-ablated", "L0H1")
    for kind in ("attention", "attribution"):
        wait_note(nb, kind, NOTE)
    wait_note(nb, "headscores", f"{NOTE} (OV copying reads the weights: unaffected)")
    wait_note(nb, "ov", f"reads the weights: unaffected by the ablation ({NOTE})")
    note = att.locator(".cw-model-note")
    assert note.text_content() == NOTE and note.is_visible()
    assert button.text_content() == "restore L0H1" and button.get_attribute("aria-pressed") == "true"
    assert py(nb, "print(dash.ablated, dash.attention.model is dash.ablated_model)") == "[[0, 1]] True"
    # back on layer 1 (drawn after the switch: the ablated model's): another picture, the kernel's
    select_head(nb, 1, 0)
    SEEN["ablated"] = wait_picture(nb, lambda h: h != SEEN["model"])
    check = (
        "import torch\n"
        f"want = cw.analysis.attention_patterns(cw.analysis.ablated(model, [(0, 1)]), {PROMPT!r}, layers=[1])[0]\n"
        "print(torch.equal(dash.attention.current_patterns(), want), dash.attention.patterns['layer'])"
    )
    assert py(nb, check) == "True 1"
    assert nb.cw_errors == []


def test_clear_all_restores_the_picture_and_removes_the_notes(nb):
    toggle, att = root(nb, "ablationtoggle"), root(nb, "attention")
    toggle.locator("button.cw-abl-clear").click()
    wait_attr(toggle, "data-cw-ablated", "")
    wait_note(nb, "attention", "")
    assert att.locator(".cw-model-note").is_hidden()
    wait_picture(nb, lambda h: h == SEEN["model"])  # the model's own layer-1 picture again
    assert py(nb, "print(dash.ablated, dash.attention.model is model)") == "[] True"
    assert toggle.locator("button.cw-abl-clear").is_disabled()
    assert toggle.locator("button.cw-abl-toggle").text_content() == "ablate L1H0"
    assert nb.cw_errors == []


def test_a_bad_head_from_python_shows_in_the_toggles_banner(nb):
    toggle = root(nb, "ablationtoggle")
    out = py(nb, "try:\n    dash.ablated = [(0, 7)]\nexcept ValueError as e:\n    print('refused')")
    assert out == "refused"
    banner = toggle.locator(".cw-error").first
    banner.wait_for(state="visible", timeout=30_000)
    assert "head must be in [0, 4)" in banner.text_content()
    py(nb, "dash.ablated = []")
    banner.wait_for(state="hidden", timeout=30_000)


def test_the_exported_page_shows_the_ablated_pictures_and_the_notes(page, tmp_path):
    import circuitwidgets as cw

    d = cw.Dashboard(cw.demo_model(), prompt=PROMPT, layer=1, ablated=[(0, 1)])
    requested = open_offline(page, d.save_html(tmp_path / "ablated.html"))
    toggle, att = root(page, "ablationtoggle"), root(page, "attention")
    wait_drawn(toggle)
    wait_drawn(att)
    assert att.locator(".cw-model-note").text_content() == NOTE
    assert root(page, "qk").locator(".cw-model-note").text_content() == f"reads the weights: unaffected by the ablation ({NOTE})"
    assert toggle.get_attribute("data-cw-ablated") == "L0H1" and toggle.locator("button.cw-abl-toggle").is_disabled()
    assert NOTE in toggle.locator(".cw-abl-status").text_content()
    # the picture saved is the ablated model's: another one than the model's own
    plain = cw.Dashboard(cw.demo_model(), prompt=PROMPT, layer=1, ablated=[])
    other = page.context.new_page()
    try:
        open_offline(other, plain.save_html(tmp_path / "plain.html"))
        wait_drawn(root(other, "attention"))
        assert picture(other) != picture(page)
    finally:
        other.close()
    assert network_urls(requested) == [] and page.cw_errors == []


REMOTE = """
from circuitwidgets.demo import tiny_hf_model
hf, tok = tiny_hf_model("llama")
remote = cw.HFView(hf, tokenizer=tok, remote="local")
remote.backend.weights_local = False  # (its weights stay where it runs, as on NDIF: no hooks here)
rdash = cw.Dashboard(remote, prompt="abcabcab", ablated=[])
rdash
"""


def test_a_backend_without_hooks_greys_the_toggle_with_its_reason(nb):
    out = run_code(nb, REMOTE, timeout=120_000)
    toggle_root = out.locator(".cw-root[data-cw-kind=ablationtoggle]").first
    toggle_root.wait_for(timeout=60_000)
    reason = py(nb, "print(remote.supports('hooks').reason)")
    assert "not on this machine" in reason
    toggle = toggle_root.locator("[data-control=ablated]").first
    handle = toggle.element_handle()
    nb.wait_for_function("el => el.disabled && el.classList.contains('cw-unsupported')", arg=handle, timeout=30_000)
    assert toggle.get_attribute("title") == reason and toggle.get_attribute("aria-disabled") == "true"
    assert toggle_root.locator("[data-control=ablation_method]").first.is_disabled()
    note = toggle_root.locator(".cw-unsupported-note").first
    assert note.is_visible() and f"ablated: {reason}" in note.inner_text()
    assert root(nb, "ablationtoggle").locator("[data-control=ablated]").first.is_enabled()  # the local one: not greyed
