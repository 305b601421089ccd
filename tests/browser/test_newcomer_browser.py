"""A newcomer's path: `make demo`'s JupyterLab (file browser open) at 1 400 x 900, the tutorial notebook
(09) run top to bottom, every widget drawn inside its own box, no two widgets' boxes overlapping, and
the Dashboard's first glance inside the part of the screen the notebook shows.

"Inside its box" is measured on what is seen: every canvas, picture, control and read-out of a widget,
clipped by the scrolling panes it sits in, lies inside the widget's root (a colour bar's ticks printed
over the next column, a legend cut at the column's edge, a read-out wider than its column all fail).
JupyterLab renders cells out of view lazily, so each widget is scrolled into view before it is measured.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import error_outputs, open_notebook, run_all, wait_drawn  # noqa: E402

SCREEN = {"width": 1400, "height": 900}
TUTORIAL = "09_tutorial_induction_heads.ipynb"
FIRST_GLANCE = ("headscores", "attention", "composition", "attribution")

#: What of a widget's contents is seen outside its root: [part, how far out (px)] for each part that is
#: (its rectangle clipped by every pane between it and the root that does not let content spill).
SPILLS = """(root) => {
  const box = root.getBoundingClientRect();
  const parts = root.querySelectorAll(
    "canvas, svg, img, button, select, input, textarea, .cw-readout, .cw-hint, .cw-field-label, .cw-la-row");
  const out = [];
  for (const el of parts) {
    if (el.closest("svg") && el.closest("svg") !== el) continue;  // (an svg's own shapes: its box counts)
    let r = el.getBoundingClientRect();
    if (!(r.width > 0 && r.height > 0) || getComputedStyle(el).visibility === "hidden") continue;
    let [left, top, right, bottom] = [r.left, r.top, r.right, r.bottom];
    for (let p = el.parentElement; p && p !== root; p = p.parentElement) {
      const style = getComputedStyle(p);
      const c = p.getBoundingClientRect();
      if (style.overflowX !== "visible") [left, right] = [Math.max(left, c.left), Math.min(right, c.right)];
      if (style.overflowY !== "visible") [top, bottom] = [Math.max(top, c.top), Math.min(bottom, c.bottom)];
    }
    if (right <= left || bottom <= top) continue;  // scrolled out of its pane
    const far = Math.max(box.left - left, right - box.right, box.top - top, bottom - box.bottom);
    const name = `${el.tagName.toLowerCase()}.${[...el.classList].join(".")}`;
    if (far > 1) out.push([`${name} "${(el.textContent || "").slice(0, 40)}"`, Math.round(far)]);
  }
  return out;
}"""

#: Numbers shown in a widget that wrap onto a second line ("5.633e-" over "4").
WRAPPED_NUMBERS = """(root) => [...root.querySelectorAll(".cw-la-value, .cw-slider-value")]
  .filter((el) => el.getClientRects().length
    && el.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(el).fontSize) * 1.25)
  .map((el) => el.textContent)"""

#: Every pair of shown widget roots whose boxes overlap (neither inside the other in the page).
OVERLAPS = """() => {
  const roots = [...document.querySelectorAll(".cw-root")]
    .filter((el) => el.getClientRects().length && el.getBoundingClientRect().width > 0);
  const out = [];
  for (let i = 0; i < roots.length; i++) {
    for (let j = i + 1; j < roots.length; j++) {
      const [a, b] = [roots[i], roots[j]];
      if (a.contains(b) || b.contains(a)) continue;
      const [p, q] = [a.getBoundingClientRect(), b.getBoundingClientRect()];
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1) out.push([a.dataset.cwKind, b.dataset.cwKind, Math.round(w), Math.round(h)]);
    }
  }
  return out;
}"""

#: The box (viewport coordinates) of the notebook's scrolling panel: what the screen shows of the notebook.
NOTEBOOK_AREA = """() => {
  const panel = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer")
    || document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook");
  const r = panel.getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height};
}"""

#: The box around `roots` (viewport coordinates).
UNION = """(roots) => {
  const rs = roots.map((el) => el.getBoundingClientRect());
  return {left: Math.min(...rs.map((r) => r.left)), top: Math.min(...rs.map((r) => r.top)),
          right: Math.max(...rs.map((r) => r.right)), bottom: Math.max(...rs.map((r) => r.bottom))};
}"""


def test_the_tutorial_in_jupyterlab_with_the_file_browser_open_draws_every_widget_in_its_box(lab, browser):
    page = browser.new_page()
    page.set_viewport_size(SCREEN)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        open_notebook(page, lab, TUTORIAL)
        # the layout `make demo` opens: the file browser shown beside the notebook
        assert page.locator(".jp-FileBrowser").first.is_visible()
        area = page.evaluate(NOTEBOOK_AREA)
        assert area["left"] > 200 and area["width"] < 1100, area  # the notebook has the rest of the width
        run_all(page, timeout=600_000)
        assert error_outputs(page) == []

        roots = page.locator(".cw-root")
        kinds = []
        for i in range(roots.count()):
            root = roots.nth(i)
            if not root.evaluate("(el) => !el.closest('.cw-folded, [hidden]') && el.getClientRects().length > 0"):
                continue  # folded away (the Dashboard's circuits): measured by the dashboard layout tests
            root.scroll_into_view_if_needed()
            wait_drawn(root, timeout=120_000)
            idle = "(el) => !el.querySelector('.cw-busy:not([hidden])')"
            page.wait_for_function(idle, arg=root.element_handle(), timeout=120_000)
            page.wait_for_timeout(300)  # a redraw for the width it was given
            kind = root.get_attribute("data-cw-kind")
            kinds.append(kind)
            assert root.evaluate(SPILLS) == [], f"widget {i} ({kind}) draws outside its box"
            assert root.evaluate(WRAPPED_NUMBERS) == [], f"widget {i} ({kind})"
            box = root.bounding_box()
            if kind == "attention" and root.get_attribute("data-cw-compact") != "on":  # (41 tokens: once 900 px tall)
                assert box["height"] <= area["height"], f"widget {i}: an attention pattern taller than the screen shows"
            assert box["x"] >= area["left"] - 1 and box["x"] + box["width"] <= area["right"] + 1, (kind, box, area)
        assert {"headscores", "attention", "ov", "qk", "composition", "attribution", "ablation"} <= set(kinds), kinds
        assert page.evaluate(OVERLAPS) == []

        # the Dashboard's first glance, scrolled to its top, is inside what the screen shows of the notebook
        compact = [page.locator(f".cw-root[data-cw-kind={kind}][data-cw-compact=on]").first for kind in FIRST_GLANCE]
        page.evaluate("(el) => el.scrollIntoView({block: 'start'})", compact[0].element_handle())
        page.wait_for_timeout(500)
        box, area = page.evaluate(UNION, [root.element_handle() for root in compact]), page.evaluate(NOTEBOOK_AREA)
        size = f"{box['right'] - box['left']:.0f} x {box['bottom'] - box['top']:.0f}"
        print(f"first glance {size} px in {area['width']:.0f} x {area['height']:.0f}")
        assert box["left"] >= area["left"] - 1 and box["right"] <= area["right"] + 1, (box, area)
        assert box["top"] >= area["top"] - 1 and box["bottom"] <= area["bottom"] + 1, (box, area)
        assert errors == []
    finally:
        page.close()
