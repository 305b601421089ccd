"""The Dashboard's first glance fits a 1 400 x 900 screen, with the rest one click away, in JupyterLab,
in marimo and on an exported page (`Dashboard.save_html`), in Chromium.

The first glance is what a researcher reads without scrolling: the head scores, the selected head's
attention pattern, the composition graph and the logit attribution's head effects, drawn compact
(``compact=True``). Each test measures the box around those four views once they have all drawn
(the union of their ``.cw-root`` boxes) and checks it is at most 1 400 x 900; then it opens the
folded row under it (one click on its title) and checks that the OV circuit is drawn there, with
colours. One test per frontend: JupyterLab and marimo are slow to start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import canvas_stats, open_notebook, open_offline, run_all, wait_drawn, write_notebook  # noqa: E402
from _marimo import marimo_run  # noqa: E402

import circuitwidgets as cw  # noqa: E402
from circuitwidgets.widgets.dashboard import CIRCUITS_TITLE  # noqa: E402

SCREEN = {"width": 1400, "height": 900}
#: The views of the first glance, and the prompt (64 tokens with BOS: the demo model's n_ctx).
FIRST = ("headscores", "attention", "composition", "attribution")
PROMPT = "a cat sat on a mat; 4 dogs ran. a cat sat on a mat; 4 dogs ran."
DASHBOARD = f"cw.Dashboard(cw.demo_model(), prompt={PROMPT!r}, layer=1, head=0)"

#: The box around the first glance's views (page coordinates), once it holds still for half a second:
#: a view drawn late (the deferred children) changes it.
BOX = """async (roots) => {
  const box = () => {
    const rs = roots.map((el) => el.getBoundingClientRect());
    const [x, y] = [Math.min(...rs.map((r) => r.left)), Math.min(...rs.map((r) => r.top))];
    return {x, y, width: Math.max(...rs.map((r) => r.right)) - x, height: Math.max(...rs.map((r) => r.bottom)) - y};
  };
  let last = JSON.stringify(box());
  for (let still = 0; still < 5; ) {
    await new Promise((done) => setTimeout(done, 100));
    const now = JSON.stringify(box());
    still = now === last ? still + 1 : 0;
    last = now;
  }
  return JSON.parse(last);
}"""


def first_glance(page) -> dict:
    """The first glance's box once every view of it has drawn, with no error shown."""
    for kind in FIRST:
        root = page.locator(f".cw-root[data-cw-kind={kind}]").first
        wait_drawn(root, timeout=60_000)
        assert root.get_attribute("data-cw-compact") == "on", kind
        page.wait_for_function("(el) => !el.querySelector('.cw-busy:not([hidden])')", arg=root.element_handle(), timeout=60_000)
        shown = [e.text_content() for e in root.locator(".cw-error").all() if e.is_visible()]
        assert shown == [], f"{kind}: {shown}"
    page.locator(".cw-root[data-cw-kind=composition] svg.cw-comp-graph").wait_for(timeout=60_000)
    roots = [page.locator(f".cw-root[data-cw-kind={kind}]").first.element_handle() for kind in FIRST]  # (marimo: in shadow roots)
    return page.evaluate(BOX, roots)


def check_fits_and_unfolds(page, frontend: str) -> dict:
    """The first glance fits the screen; one click on the folded row's title draws the OV circuit."""
    box = first_glance(page)
    print(f"{frontend}: first glance {box['width']:.0f} x {box['height']:.0f} px")  # (the report: pytest -s)
    assert box["width"] <= SCREEN["width"] and box["height"] <= SCREEN["height"], (frontend, box)
    assert box["x"] >= 0 and box["x"] + box["width"] <= SCREEN["width"], (frontend, box)  # no sideways scrolling
    ov = page.locator(".cw-root[data-cw-kind=ov]")
    assert ov.count() == 0 or not ov.first.is_visible(), f"{frontend}: the OV circuit is not folded away"
    page.get_by_text(CIRCUITS_TITLE, exact=True).first.click()
    wait_drawn(ov.first, timeout=60_000)
    ov.first.scroll_into_view_if_needed()
    wide = "(el) => el.querySelector('.cw-heatmap-canvas').getBoundingClientRect().width > 100"
    page.wait_for_function(wide, arg=ov.first.element_handle())  # drawn at its width, once shown
    assert canvas_stats(ov.first.locator(".cw-heatmap-canvas").first)["colours"] > 10, frontend
    assert page.locator(".cw-root[data-cw-kind=qk]").first.is_visible(), frontend
    return box


@pytest.fixture
def screen_page(browser):
    page = browser.new_page()
    page.set_viewport_size(SCREEN)
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    yield page
    page.close()


def test_exported_dashboard_first_glance_fits_and_the_circuits_unfold(screen_page, tmp_path):
    dash = cw.Dashboard(cw.demo_model(), prompt=PROMPT, layer=1, head=0)  # (DASHBOARD)
    path = dash.save_html(tmp_path / "dash.html")
    open_offline(screen_page, path)
    check_fits_and_unfolds(screen_page, "export")
    # a compact view's "more" shows what it hid (the attention pattern's token view), "less" hides it again
    att = screen_page.locator(".cw-root[data-cw-kind=attention]")
    assert not att.locator(".cw-tokens").is_visible()
    att.locator(".cw-more").click()
    assert att.get_attribute("data-cw-compact") == "expanded" and att.locator(".cw-tokens").is_visible()
    att.locator(".cw-more").click()
    assert att.get_attribute("data-cw-compact") == "on" and not att.locator(".cw-tokens").is_visible()
    assert screen_page.cw_errors == []


def test_jupyterlab_dashboard_first_glance_fits_and_the_circuits_unfold(lab, screen_page):
    write_notebook(lab.root / "dashboard_layout.ipynb", ["import circuitwidgets as cw", DASHBOARD])
    open_notebook(screen_page, lab, "dashboard_layout.ipynb")
    run_all(screen_page)
    check_fits_and_unfolds(screen_page, "JupyterLab")
    assert screen_page.cw_errors == []


def test_marimo_dashboard_first_glance_fits_and_the_circuits_unfold(screen_page, tmp_path):
    app = tmp_path / "dashboard_app.py"
    app.write_text(
        "import marimo\n\napp = marimo.App(width='full')\n\n\n@app.cell\ndef _():\n"
        f"    import circuitwidgets as cw\n\n    dash = {DASHBOARD}\n    dash  # noqa: B018\n    return\n"
    )
    with marimo_run(app) as served:
        screen_page.goto(served.url)
        try:
            check_fits_and_unfolds(screen_page, "marimo")
        except Exception as exc:
            raise AssertionError(f"{exc}\n--- marimo log ---\n{served.log_tail()}") from None
    assert screen_page.cw_errors == []
