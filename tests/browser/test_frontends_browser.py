"""The widgets in Notebook 7 (``jupyter notebook``) and Voila (``voila <notebook>``), in Chromium.

One small notebook on the demo model (an AttentionPattern, an OVCircuit, a HeadScores and a
Dashboard) is served by each frontend in turn; for each one the tests check that every widget
draws (no error banner, no page error), that controls change the picture (a thumbnail click
changes the head, a layer change goes through the live kernel and back, a HeadScores kind
changes its grid), and that a head picked in one child of the Dashboard shows in every child.
The tests of one frontend share its page (module-scoped, parametrized fixture) and run in order.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _frontends import jupyter_notebook, voila  # noqa: E402
from _harness import canvas_stats, cell_centre, wait_attr, wait_drawn, write_notebook  # noqa: E402

PROMPT = "abcdefgh abcdefgh"
CELLS = [
    "import circuitwidgets as cw\nmodel = cw.demo_model()",
    f"att = cw.AttentionPattern(model, prompt={PROMPT!r}, layer=1, head=0)\natt",
    "ov = cw.OVCircuit(model, 1, 1, tokens=list(range(2, 22)))\nov",
    "hs = cw.HeadScores(model)\nhs",
    f"dash = cw.Dashboard(model, prompt={PROMPT!r})\ndash",
]
N_LAYERS, N_HEADS = 2, 4  # the demo model
#: The kinds of the widgets outside the Dashboard, and of the Dashboard's children.
STANDALONE = ["attention", "ov", "headscores"]
DASHBOARD = {"headscores", "composition", "attention", "attribution", "ov", "qk"}
#: Notebook 7.6's shortcuts settings plugin throws this on load (before any cell runs, with no
#: widget on the page); nothing of ours is in its stack.
NOTEBOOK_LOAD_ERROR = re.compile(r"Cannot read properties of undefined \(reading 'schema'\)")


ERROR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']"
ROOTS = "() => [...document.querySelectorAll('.cw-root')].map((r) => [r.dataset.cwKind, r.dataset.cwDraws, r.checkVisibility()])"


def new_page(browser):
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(f"{exc}\n{exc.stack or ''}"))
    page.on("dialog", lambda d: on_dialog(page, d))
    return page


def on_dialog(page, dialog) -> None:
    """Leave the page when a reload asks (the "unsaved changes" prompt of a run notebook: dismissing it would
    cancel the reload); any other dialog is dismissed and counted as an error."""
    if dialog.type == "beforeunload":
        dialog.accept()
        return
    page.cw_errors.append(f"dialog: {dialog.message}")
    dialog.dismiss()


def page_errors(page, frontend: str) -> list[str]:
    errors = page.cw_errors
    if frontend == "notebook":
        errors = [e for e in errors if not (NOTEBOOK_LOAD_ERROR.search(e) and "/static/notebook/" in e)]
    return errors


def run_all_notebook7(page, timeout: float = 120_000) -> None:
    """Run > Run All Cells in Notebook 7 and wait until every code cell shows ``[n]``.

    Notebook 7.6 sometimes loads its commands after a settings race (see NOTEBOOK_LOAD_ERROR) and
    a Run All clicked in that moment does nothing: the page is reloaded and the click repeated
    until a cell starts.
    """
    started = """() => [...document.querySelectorAll(".jp-CodeCell .jp-InputArea-prompt")]
                   .some((p) => /\\[(\\*|\\d+)\\]/.test(p.textContent))"""
    for attempt in range(6):
        if attempt:
            page.reload(wait_until="domcontentloaded", timeout=120_000)  # (a loaded machine: slower than 30 s)
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=60_000)
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).first.click()
        try:
            page.wait_for_function(started, timeout=30_000)
            break
        except Exception:
            if attempt == 5:
                raise
    page.wait_for_function(
        """(n) => {
          const prompts = [...document.querySelectorAll(".jp-CodeCell .jp-InputArea-prompt")].map((p) => p.textContent);
          if (document.querySelector(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")) return true;
          return prompts.length === n && prompts.every((p) => /\\[\\d+\\]/.test(p));
        }""",
        arg=len(CELLS),
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("frontends")
    write_notebook(root / "widgets.ipynb", CELLS)
    return root


#: The title of the Dashboard's folded part (OV and QK), which a click opens.
UNFOLD = "OV and QK circuits of the selected head"


@pytest.fixture(scope="module", params=["notebook", "voila"])
def fe(request, folder, browser):
    """(frontend name, page showing the run notebook); the server stops after its tests."""
    name = request.param
    server = jupyter_notebook(folder) if name == "notebook" else voila(folder / "widgets.ipynb")
    with server as srv:
        page = new_page(browser)
        try:
            if name == "notebook":
                page.goto(srv.url("widgets.ipynb"))
                run_all_notebook7(page)
                if page.locator(ERROR_OUTPUT).count():
                    raise RuntimeError("a cell raised")
            else:
                page.goto(srv.url(), timeout=120_000)  # Voila runs the notebook before the page is complete
            page.locator(".cw-root").nth(len(STANDALONE) + len(DASHBOARD) - 1).wait_for(state="attached", timeout=60_000)
            page.get_by_text(UNFOLD).first.click()  # the Dashboard's circuits, folded under its first glance
        except Exception as exc:
            try:
                shown = page.evaluate(ROOTS)
                prompts = page.locator(".jp-InputArea-prompt").all_text_contents()
                raised = [t[-1500:] for t in page.locator(ERROR_OUTPUT).all_inner_texts()]
            except Exception as why:  # the page itself is gone
                shown = prompts = raised = f"(unreadable: {why})"
            errors = page.cw_errors
            page.close()
            raise AssertionError(
                f"{name} did not show every widget: {exc}\nwidgets (kind, draws, visible): {shown}\nprompts: {prompts}\n"
                f"cells that raised: {raised}\n"
                f"page errors: {errors}\n--- server log ---\n{srv.log_tail()}"
            ) from None
        yield name, page
        page.close()


def standalone(page, kind: str):
    root = page.locator(f".cw-root[data-cw-kind={kind}]:not(.cw-dashboard .cw-root)").first
    root.scroll_into_view_if_needed()
    return root


def dashboard_roots(page) -> dict:
    return {kind: page.locator(f".cw-dashboard .cw-root[data-cw-kind={kind}]").first for kind in DASHBOARD}


def picture(root) -> dict:
    return canvas_stats(root.locator(".cw-heatmap-canvas").first)


def click_cell(page, root, row: int, col: int) -> None:
    page.mouse.click(*cell_centre(root.locator(".cw-heatmap").first, row, col))


def test_every_widget_draws(fe):
    name, page = fe
    errors = page.locator(ERROR_OUTPUT).all_inner_texts()
    assert errors == [], f"{name}: the notebook raised: {errors[0][-1500:]}"
    assert [standalone(page, k).count() for k in STANDALONE] == [1, 1, 1]
    assert page.locator(".cw-root").count() == len(STANDALONE) + len(DASHBOARD)
    assert sorted(r.get_attribute("data-cw-kind") for r in page.locator(".cw-dashboard .cw-root").all()) == sorted(DASHBOARD)
    for root in page.locator(".cw-root").all():
        root.scroll_into_view_if_needed()
        wait_drawn(root)
        kind = root.get_attribute("data-cw-kind")
        banner = root.locator(".cw-error").first
        assert banner.count() == 0 or banner.is_hidden(), f"{name} {kind}: {banner.text_content()}"
        if kind == "composition":
            assert root.locator("svg.cw-comp-graph circle").count() == N_LAYERS * N_HEADS
        else:
            stats = picture(root)
            assert stats["colours"] > 10, f"{name} {kind} looks blank: {stats}"
    assert page_errors(page, name) == []


def test_thumbnail_click_changes_the_head_and_the_picture(fe):
    name, page = fe
    att = standalone(page, "attention")
    wait_drawn(att)
    head = int(att.get_attribute("data-cw-head"))
    other = (head + 1) % N_HEADS
    before = picture(att)["hash"]
    att.locator(".cw-thumb").nth(other).click()
    wait_attr(att, "data-cw-head", str(other))
    assert att.locator("select[aria-label=Head]").input_value() == str(other)
    assert picture(att)["hash"] != before
    assert page_errors(page, name) == []


def test_layer_change_goes_through_the_kernel(fe):
    name, page = fe
    att = standalone(page, "attention")
    layer = int(att.get_attribute("data-cw-layer"))
    other = (layer + 1) % N_LAYERS
    before, n = picture(att)["hash"], int(att.get_attribute("data-cw-draws"))
    att.locator("select[aria-label=Layer]").select_option(str(other))
    # The attention patterns of a layer come from the kernel: the new layer shows once it answered.
    wait_attr(att, "data-cw-layer", str(other))
    wait_drawn(att, above=n)
    assert picture(att)["hash"] != before
    assert page_errors(page, name) == []


def test_head_scores_kind_changes_the_grid(fe):
    name, page = fe
    hs = standalone(page, "headscores")
    wait_drawn(hs)
    before = picture(hs)["hash"]
    kind = hs.get_attribute("data-cw-score")
    thumbs = hs.locator(".cw-thumb")
    target = next(i for i in range(thumbs.count()) if "cw-thumb-selected" not in (thumbs.nth(i).get_attribute("class") or ""))
    thumbs.nth(target).click()
    page.wait_for_function("([el, k]) => el.dataset.cwScore !== k", arg=[hs.element_handle(), kind], timeout=30_000)
    assert picture(hs)["hash"] != before, f"{name}: the {hs.get_attribute('data-cw-score')} grid looks like the {kind} grid"
    assert page_errors(page, name) == []


def test_head_picked_in_one_dashboard_child_shows_in_every_child(fe):
    name, page = fe
    roots = dashboard_roots(page)
    hs, att = roots["headscores"], roots["attention"]
    for root in roots.values():
        wait_drawn(root)
    # a cell of the head-score grid: row = layer, column = head
    layer, head = 1, (int(att.get_attribute("data-cw-head")) + 2) % N_HEADS
    hs.scroll_into_view_if_needed()
    click_cell(page, hs, layer, head)
    for kind, root in roots.items():
        wait_attr(root, "data-cw-head", str(head))
        wait_attr(root, "data-cw-layer", str(layer))
        assert root.locator(".cw-error").first.is_hidden(), f"{name} {kind}: {root.locator('.cw-error').first.text_content()}"
    # a thumbnail of the Dashboard's attention pattern
    head = (head + 1) % N_HEADS
    att.scroll_into_view_if_needed()
    att.locator(".cw-thumb").nth(head).click()
    for root in roots.values():
        wait_attr(root, "data-cw-head", str(head))
    assert page_errors(page, name) == []
