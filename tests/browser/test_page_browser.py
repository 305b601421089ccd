"""Notebook pages in Chromium, opened from disk with the network blocked.

- `python -m circuitwidgets page NB --execute` on example notebooks: every widget draws, nothing is
  requested from the network, the page throws nothing, and each widget's controls work on the
  saved data (a head thumbnail, a score kind, a composition kind, a head menu, a hover read-out;
  the skip-trigram lists, which a saved page holds for one source);
  on the dashboard a head picked in one child moves the others (its jslinks, kept in the page).
  The default run makes the page of ``02_induction_heads.ipynb`` (every widget kind but the
  skip-trigrams and a `Dashboard`; about 25 s to execute); ``CW_PAGE_NOTEBOOKS=all`` (``make
  test-pages``) makes and checks the page of every example notebook (about 3 minutes).
- A notebook with hostile markdown, outputs and token strings: its page runs no script of theirs.
- The ecosystem's route: JupyterLab saves the widget state into the notebook (Settings > Save
  Widget State Automatically), ``jupyter nbconvert --to html`` writes the page, and the page loads
  require.js, @jupyter-widgets/html-manager and anywidget's frontend from CDNs: here they are
  served from node_modules (package.json devDependencies) by routing those URLs, everything
  else off the machine is aborted. The same saved notebook also goes through our own command.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    OFFLINE_SCHEMES,
    canvas_stats,
    cell_centre,
    network_urls,
    open_notebook,
    open_offline,
    run_all,
    wait_attr,
    wait_drawn,
    watched_page,
    write_notebook,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "example_notebooks"
NODE_MODULES = REPO / "node_modules"
ALL = sorted(p.name for p in EXAMPLES.glob("*.ipynb"))
DEFAULT = ["02_induction_heads.ipynb"]
NOTEBOOKS = ALL if os.environ.get("CW_PAGE_NOTEBOOKS") == "all" else DEFAULT


def env_with_repo() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def make_page(notebook: Path, *args: str, out: Path | None = None) -> Path:
    """Run ``python -m circuitwidgets page`` on `notebook`; returns the page it wrote (default: beside it)."""
    out = out or notebook.with_suffix(".html")
    cmd = [sys.executable, "-m", "circuitwidgets", "page", str(notebook), "-o", str(out), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env_with_repo(), cwd=notebook.parent, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"{out}: ")
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The page of an example notebook, made (the notebook executed) once per module, on demand."""
    folder = tmp_path_factory.mktemp("pages")
    for nb in EXAMPLES.glob("*.ipynb"):
        shutil.copy(nb, folder / nb.name)
    made: dict[str, Path] = {}

    def page_of(name: str) -> Path:
        if name not in made:
            made[name] = make_page(folder / name, "--execute")
        return made[name]

    return page_of


def roots_drawn(page) -> list:
    """Every widget root of the page, each once drawn; one per widget slot item."""
    items = page.locator(".cw-page-widget .cw-export-item")
    for fold in page.locator("details.cw-export-details, details").all():  # a Dashboard's folded circuits: open
        fold.locator("summary").first.click()
    roots = page.locator(".cw-root").all()
    assert roots and len(roots) == items.count()
    for root in roots:
        wait_drawn(root)
    return roots


def picture(root) -> int:
    return canvas_stats(root.locator(".cw-heatmap-canvas").first)["hash"]


def other(value: str | None, choices: list[str]) -> str:
    return next(c for c in choices if c != value)


def exercise(page, root) -> str:
    """Use one control of the widget at `root` on its saved data and check its effect; returns what was done."""
    kind = root.get_attribute("data-cw-kind")
    thumbs = root.locator(".cw-thumb")
    if kind == "attention" and thumbs.count() > 1:
        head = other(root.get_attribute("data-cw-head"), [str(i) for i in range(thumbs.count())])
        before = picture(root)
        thumbs.nth(int(head)).click()
        wait_attr(root, "data-cw-head", head)
        assert picture(root) != before, "a head thumbnail click left the picture unchanged"
        return "head thumbnail"
    if kind == "headscores" and thumbs.count() > 1:
        computed = root.get_attribute("data-cw-computed").split(",")
        kinds = [o.get_attribute("value") for o in root.locator("select[aria-label=score] option").all()]
        score = other(root.get_attribute("data-cw-score"), [k for k in kinds if k in computed])
        before = picture(root)
        thumbs.nth(kinds.index(score)).click()
        wait_attr(root, "data-cw-score", score)
        assert picture(root) != before
        return "score thumbnail"
    if kind == "composition":
        computed = root.get_attribute("data-cw-computed").split(",")
        comp = other(root.get_attribute("data-cw-comp-kind"), computed)
        root.locator(f"button[data-kind={comp}]").click()
        wait_attr(root, "data-cw-comp-kind", comp)
        return "composition kind"
    select = root.locator("select[aria-label=Head]")
    if kind in ("ov", "qk") and select.count() and select.first.is_visible() and select.first.is_enabled():
        heads = [o.get_attribute("value") for o in select.first.locator("option").all()]
        head = other(root.get_attribute("data-cw-head"), heads)
        before = picture(root)
        select.first.select_option(head)
        wait_attr(root, "data-cw-head", head)
        assert picture(root) != before
        return "head menu"
    if kind == "attribution":
        page.mouse.move(*cell_centre(root.locator(".cw-heatmap").first, 0, 0))
        readout = root.locator(".cw-la-readout")
        page.wait_for_function("(el) => el.dataset.layer !== undefined", arg=readout.element_handle())
        return "hover read-out"
    if kind == "training" and root.locator(".cw-tr-slider").is_enabled():  # the slider moves the step on the saved curves
        slider = root.locator(".cw-tr-slider")
        chart = lambda: canvas_stats(root.locator(".cw-tr-canvas").first)["hash"]  # noqa: E731
        before, step = chart(), root.get_attribute("data-cw-step")
        slider.fill("0" if slider.input_value() != "0" else slider.get_attribute("max"))
        page.wait_for_function("([el, v]) => el.dataset.cwStep !== v", arg=[root.element_handle(), step])
        assert chart() != before and "needs the kernel" in root.locator(".cw-tr-kernel").text_content()
        return "step slider"
    if kind == "trigrams":  # a saved page holds one source: its lists, and no control that needs the kernel
        for name in ("destinations", "outs", "triples"):
            assert root.locator(f"section[data-list={name}] li").count() > 0, name
        assert root.locator("select[aria-label=Head]").is_disabled()
        return "static lists"
    return ""


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_page_works_offline(page, pages, name):
    requested = open_offline(page, pages(name))
    roots = roots_drawn(page)
    done = [exercise(page, root) for root in roots]
    kinds = {root.get_attribute("data-cw-kind") for root in roots}
    assert any(done), f"no control was tried on {kinds}"
    assert network_urls(requested) == []
    assert page.cw_errors == []


@pytest.mark.parametrize("name", [n for n in NOTEBOOKS if n.startswith("02_")])
def test_dashboard_on_the_page_keeps_its_head_links(page, pages, name):
    open_offline(page, pages(name))
    roots_drawn(page)
    dash = page.locator(".cw-page-widget", has=page.locator(".cw-root[data-cw-kind=qk]")).last
    attention = dash.locator(".cw-root[data-cw-kind=attention]")
    # the first glance (head scores | attention | composition and attribution) and OV beside QK, folded
    assert dash.locator(".cw-export-grid").count() == 2 and dash.locator("details.cw-export-details").count() == 1
    head = other(attention.get_attribute("data-cw-head"), ["0", "1", "2", "3"])
    attention.locator(".cw-thumb").nth(int(head)).click()
    for kind in ("headscores", "composition", "attribution", "ov", "qk"):
        wait_attr(dash.locator(f".cw-root[data-cw-kind={kind}]"), "data-cw-head", head, timeout=5_000)
    assert page.cw_errors == []


def test_hostile_notebook_page_runs_none_of_its_scripts(page, tmp_path):
    import ipywidgets
    from ipywidgets.embed import dependency_state

    import circuitwidgets as cw
    from circuitwidgets.widgets._page import WIDGET_STATE, WIDGET_VIEW

    evil = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    widget = cw.AttentionPattern(cw.demo_model(), prompt="abcabc")
    state = dependency_state([widget], drop_defaults=False)
    saved = state[widget.model_id]["state"]
    saved["str_tokens"] = saved["patterns"]["labels"] = [evil] * len(widget.str_tokens)  # the labels drawn
    shown = {WIDGET_VIEW: {"model_id": widget.model_id, "version_major": 2, "version_minor": 0}, "text/plain": evil}
    label = ipywidgets.Label(evil)
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": f"# {evil}\n\n[x](javascript:window.pwned=3)"},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": evil, "outputs": [
            {"output_type": "stream", "name": "stdout", "text": evil},
            {"output_type": "display_data", "metadata": {}, "data": {"text/html": evil + "<b onclick='window.pwned=4'>b</b>"}},
            {"output_type": "display_data", "metadata": {}, "data": shown},
            {"output_type": "display_data", "metadata": {}, "data": {
                WIDGET_VIEW: {"model_id": label.model_id, "version_major": 2, "version_minor": 0}, "text/plain": evil}},
        ]},
    ]
    state.update(dependency_state([label], drop_defaults=False))
    nb = {"cells": cells, "metadata": {"widgets": {WIDGET_STATE: {"version_major": 2, "version_minor": 0, "state": state}}},
          "nbformat": 4, "nbformat_minor": 4}
    source = tmp_path / "evil.ipynb"
    source.write_text(json.dumps(nb))
    requested = open_offline(page, make_page(source))
    (root,) = roots_drawn(page)
    assert root.locator(".cw-token").first.text_content() == evil  # a token string, shown as text
    page.locator("b", has_text="b").last.click()
    assert page.evaluate("window.pwned") is None
    assert page.locator("h1").first.text_content() == evil
    assert network_urls(requested) == [] and page.cw_errors == []


# ----- the ecosystem's route: JupyterLab's saved widget state + nbconvert ---------------------------

#: CDN URL -> file in node_modules: the scripts nbconvert's page loads (require.js, the html manager)
#: and the widget modules the html manager loads with require.js (anywidget's frontend).
CDN = [
    (re.compile(r"https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/[^/]+/require(?:\.min)?\.js$"), "requirejs/require.js"),
    (re.compile(r"https://(?:unpkg\.com|cdn\.jsdelivr\.net/npm)/(@jupyter-widgets/html-manager)@[^/]*/(dist/[\w.-]+)$"), None),
    (re.compile(r"https://(?:unpkg\.com|cdn\.jsdelivr\.net/npm)/(anywidget)@[^/]*/(dist/[\w.-]+)$"), None),
]


def local_file(url: str) -> Path | None:
    for pattern, path in CDN:
        match = pattern.match(url)
        if match:
            return NODE_MODULES / (path or f"{match.group(1)}/{match.group(2)}")
    return None


def open_with_local_cdn(page, path: Path) -> tuple[list[str], list[str]]:
    """Open `path` from disk, CDN scripts served from node_modules, any other network request aborted.

    Returns (served, aborted) URL lists, filled as the page runs.
    """
    served: list[str] = []
    aborted: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith(OFFLINE_SCHEMES):
            return r.continue_()
        local = local_file(url)
        if local is not None and local.is_file():
            served.append(url)
            return r.fulfill(path=str(local), content_type="application/javascript")
        aborted.append(url)
        return r.abort()

    page.route("**/*", route)
    page.goto(path.resolve().as_uri())
    return served, aborted


def toggle_save_widget_state(page) -> None:
    """Flip Settings > Save Widget State Automatically and wait until the server has stored it."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    with page.expect_response(lambda r: "jupyterlab-manager" in r.url and r.request.method == "PUT"):
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Save Widget State Automatically$")).click()


def test_jupyterlab_saved_state_renders_with_nbconvert_and_with_our_page(lab, page, tmp_path):
    assert (NODE_MODULES / "@jupyter-widgets/html-manager/dist/embed-amd.js").is_file(), "run `npm ci` (make test-py does)"
    name = "page_nbconvert.ipynb"
    write_notebook(lab.root / name, [
        "import circuitwidgets as cw\nmodel = cw.demo_model()",
        "cw.AttentionPattern(model, prompt='the cat sat. the cat sat.', layer=1, head=2)",
    ])
    # set before the notebook opens: Run All clicked while settings change may start no cell
    page.goto(f"{lab.base}/lab?token={lab.token}&reset")
    page.locator(".lm-MenuBar").first.wait_for()
    toggle_save_widget_state(page)
    try:
        open_notebook(page, lab, name)
        run_all(page)
        wait_drawn(page.locator(".cw-root").first)
        page.keyboard.press("Control+s")
        saved = lab.root / name
        deadline = time.monotonic() + 30
        while "application/vnd.jupyter.widget-state+json" not in saved.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        nb = json.loads(saved.read_text())
    finally:
        toggle_save_widget_state(page)  # the lab is shared with other tests: back to the default
    models = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert any(m["state"].get("_cw_view") == "attention" and m.get("buffers") for m in models.values())

    folder = tmp_path / "saved"
    folder.mkdir()
    shutil.copy(saved, folder / name)
    done = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", str(folder / name)],
                          capture_output=True, text=True, env=env_with_repo(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    converted = folder / "page_nbconvert.html"
    assert "@jupyter-widgets/html-manager" in converted.read_text()

    tab = watched_page(page.context)
    try:
        served, aborted = open_with_local_cdn(tab, converted)
        root = tab.locator(".cw-root[data-cw-kind=attention]")
        wait_drawn(root, timeout=60_000)
        before = picture(root)
        tab.locator(".cw-root .cw-thumb").nth(0).click()
        wait_attr(root, "data-cw-head", "0")
        assert picture(root) != before
        assert any("html-manager" in u for u in served) and any("/anywidget@" in u for u in served), served
        assert not [u for u in aborted if "jupyter-widgets" in u or "anywidget" in u or "require" in u], aborted
        assert tab.cw_errors == []
    finally:
        tab.close()

    # our own command on the same saved notebook: no CDN at all
    ours = watched_page(page.context)
    try:
        requested = open_offline(ours, make_page(folder / name, out=folder / "ours.html"))
        (root,) = roots_drawn(ours)
        assert exercise(ours, root) == "head thumbnail"
        assert network_urls(requested) == [] and ours.cw_errors == []
    finally:
        ours.close()
