"""`python -m circuitwidgets page`: a notebook as one self-contained HTML page (circuitwidgets/widgets/_page.py).

Python side, no browser: the saved widget state is decoded (buffers back at their paths), the
page's structure (markdown, code, outputs, widget slots and the state the bundle mounts), the
layout of containers (a `Dashboard`) and its links, hostile markdown / outputs / token strings
kept as text, and the command line. The notebooks' widget state is made as a notebook saves it
(``ipywidgets.embed``'s manager state: the same schema, buffers base64 with their paths).
tests/browser/test_page_browser.py opens pages made from the example notebooks in Chromium.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from html.parser import HTMLParser
from pathlib import Path

import ipywidgets
import pytest
from ipywidgets.embed import dependency_state, embed_data

import circuitwidgets as cw
from circuitwidgets.__main__ import main
from circuitwidgets.widgets._export import widget_state
from circuitwidgets.widgets._page import (
    WIDGET_STATE,
    WIDGET_VIEW,
    notebook_page,
    page_html,
    plain_text,
    render_markdown,
    sanitise_html,
    saved_widgets,
)

REPO = Path(__file__).resolve().parents[1]
HOSTILE = '</script><script>alert(1)</script><img src=x onerror="alert(2)"><style>body{display:none}</style>'
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(24)).decode()


# ----- notebooks made here ---------------------------------------------------------------------

def md(source: str, **extra) -> dict:
    return {"cell_type": "markdown", "id": secrets.token_hex(4), "metadata": {}, "source": source, **extra}


def code(source: str, *outputs: dict, count: int | None = 1) -> dict:
    return {"cell_type": "code", "id": secrets.token_hex(4), "metadata": {}, "source": source, "execution_count": count,
            "outputs": list(outputs)}


def shown(widget, kind: str = "display_data") -> dict:
    """The output a cell shows for `widget`: its view reference and its text fallback."""
    out = {"output_type": kind, "metadata": {}, "data": {
        WIDGET_VIEW: {"model_id": widget.model_id, "version_major": 2, "version_minor": 0},
        "text/plain": repr(widget)[:60],
    }}
    if kind == "execute_result":
        out["execution_count"] = 1
    return out


def data(mime: str, value, text: str = "") -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {mime: value, "text/plain": text}}


def notebook(cells: list[dict], saved=()) -> dict:
    """A notebook of `cells` whose saved widget state holds `saved` and every widget they refer to."""
    meta: dict = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                  "language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    if saved:
        # every trait, as a notebook saves it (nbclient and JupyterLab keep the circuitwidgets traits)
        state = dependency_state(list(saved), drop_defaults=False)
        meta["widgets"] = {WIDGET_STATE: embed_data(views=list(saved)[:1], state=state)["manager_state"]}
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


class Parsed(HTMLParser):
    """Every element of a page: ``tags`` [(tag, attrs)], the text of each <script>, and all text."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.text: list[str] = []
        self._in_script: dict | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        else:
            self.text.append(data)

    def payload(self) -> dict:
        (state,) = [text for attrs, text in self.scripts if attrs.get("id") == "cw-state"]
        return json.loads(state)

    def all_text(self) -> str:
        return "".join(self.text)


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


@pytest.fixture(scope="module")
def attention(model):
    return cw.AttentionPattern(model, prompt="abcabc", layer=1, head=2)


# ----- saved state -----------------------------------------------------------------------------

def test_saved_buffers_go_back_to_their_paths_as_base64():
    nb = {"metadata": {"widgets": {WIDGET_STATE: {"state": {
        "a": {"model_module": "anywidget", "model_name": "AnyModel", "state": {"p": {"shape": [2]}, "rows": [None, 1]},
              "buffers": [{"path": ["p", "data"], "encoding": "base64", "data": base64.b64encode(b"\x01\x02").decode()},
                          {"path": ["rows", 0], "encoding": "hex", "data": "0aff"}]},
        "b": {"model_module": "@jupyter-widgets/controls", "model_name": "LabelModel", "state": {"value": "hi"}},
    }}}}}
    saved = saved_widgets(nb)
    assert saved["a"]["state"] == {"p": {"shape": [2], "data": {"$bytes": "AQI="}}, "rows": [{"$bytes": "Cv8="}, 1]}
    assert (saved["a"]["module"], saved["a"]["name"]) == ("anywidget", "AnyModel")
    assert saved["b"]["state"] == {"value": "hi"}
    assert saved_widgets({"metadata": {}}) == {}
    bad = json.loads(json.dumps(nb))
    bad["metadata"]["widgets"][WIDGET_STATE]["state"]["a"]["buffers"][1]["path"] = ["rows", 5]
    with pytest.raises(ValueError, match="does not fit"):
        saved_widgets(bad)


def test_widget_state_in_the_page_is_the_widgets_own(attention):
    nb = notebook([code("w", shown(attention, "execute_result"))], saved=[attention])
    page = Parsed(page_html(nb))
    payload = page.payload()
    (state,) = payload["widgets"]
    expected = widget_state(attention)
    assert state.keys() == expected.keys()  # nothing of the widget machinery (_esm, layout, _view_*)
    assert "_esm" not in state and "layout" not in state and "_model_name" not in state
    assert state["patterns"]["data"] == expected["patterns"]["data"]  # the saved bytes, back in place
    assert state["str_tokens"] == expected["str_tokens"]
    assert payload["outputs"] == [{"widget": 0}] and payload["links"] == [] and payload["dlinks"] == []
    slots = [a for t, a in page.tags if "data-cw-output" in a]
    assert slots == [{"class": "cw-page-widget", "data-cw-output": "0"}]
    (module,) = [text for attrs, text in page.scripts if attrs.get("type") == "module"]
    assert "mountPage" in module and "import(" in module and "http" not in module.split("const source")[0]


# ----- cells and plain outputs -----------------------------------------------------------------

def test_page_shows_markdown_code_and_plain_outputs():
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'
    cells = [
        md("# Title here\n\nSome *emphasis*, `code`, a [link](https://example.org).\n\n| a | b |\n|---|---|\n| 1 | 2 |"),
        md("![plot](attachment:p.png)", attachments={"p.png": {"image/png": PNG}}),
        code("import math\nprint(math.pi)",
             {"output_type": "stream", "name": "stdout", "text": ["3.14\n", "done\n"]},
             {"output_type": "stream", "name": "stderr", "text": "10%\r50%\r100%\n"},
             count=7),
        code("1 / 0", {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                       "traceback": ["\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"]}),
        code("show()", data("image/png", PNG, "<Figure>"), data("image/svg+xml", svg), data("text/markdown", "**bold** out"),
             data("text/latex", "$x^2$", "x^2")),
        code("df", data("text/html", "<table><tr><th>k</th></tr><tr><td>1 &lt; 2</td></tr></table>", "k\n1")),
        code("x = 1", count=None),
        {"cell_type": "raw", "metadata": {}, "source": "raw <b>text</b>"},
    ]
    page_src = page_html(notebook(cells), title="T")
    page = Parsed(page_src)
    tags = [t for t, _ in page.tags]
    assert "<title>T</title>" in page_src
    assert "<h1>Title here</h1>" in page_src and "<em>emphasis</em>" in page_src and "<table>" in page_src
    assert '<a href="https://example.org">link</a>' in page_src
    assert f'src="data:image/png;base64,{PNG}"' in page_src  # the markdown attachment, inlined
    assert page_src.count(f"data:image/png;base64,{PNG}") == 2  # and the PNG output
    svg_b64 = base64.b64encode(svg.encode()).decode()
    assert f'src="data:image/svg+xml;base64,{svg_b64}"' in page_src and "<svg" not in page_src  # an image, not markup
    assert "<strong>bold</strong> out" in page_src
    text = page.all_text()
    assert "[7]" in text and "[ ]" in text  # prompts
    assert "3.14\ndone\n" in text and "100%\n" in text and "10%" not in text  # the stream as a terminal shows it
    assert "ZeroDivisionError: division by zero" in text and "\x1b" not in page_src  # ANSI colours dropped
    assert "$x^2$" in text and "raw <b>text</b>" in text  # LaTeX and raw cells as text
    assert '<td>1 &lt; 2</td>' in page_src  # an HTML output, sanitised, kept as a table
    assert tags.count("pre") >= 6 and "script" not in tags  # no widget: no script at all
    assert [a for t, a in page.tags if t == "span" and a.get("class") == "kn"]  # code highlighted ("import")


def test_hostile_markdown_code_outputs_and_token_strings_stay_text(attention):
    nb = notebook(
        [
            md(f"# Hi {HOSTILE}\n\n[click](javascript:alert(3)) ![x](javascript:alert(4)) <a href='#' onclick='x()'>a</a>"),
            code(HOSTILE, {"output_type": "stream", "name": "stdout", "text": HOSTILE},
                 {"output_type": "error", "ename": HOSTILE, "evalue": HOSTILE, "traceback": [HOSTILE]},
                 data("text/html", f'<b onmouseover="alert(5)">bold</b><a href="javascript:alert(6)">js</a>'
                                   f'<iframe src="https://evil.example"></iframe><img src="https://evil.example/x.png">'
                                   f'<form><input value="x"></form>{HOSTILE}<table><tr><td>open')),
            code("w", shown(attention)),
        ],
        saved=[attention],
    )
    state = nb["metadata"]["widgets"][WIDGET_STATE]["state"][attention.model_id]["state"]
    state["str_tokens"] = state["patterns"]["labels"] = [HOSTILE] * len(state["str_tokens"])  # untrusted token strings
    state["title"] = HOSTILE
    page_src = page_html(nb, title=HOSTILE)
    page = Parsed(page_src)
    # exactly the page's own two scripts: the state (JSON) and the module that mounts it
    assert [attrs for attrs, _ in page.scripts] == [{"type": "application/json", "id": "cw-state"}, {"type": "module"}]
    assert page.payload()["widgets"][0]["patterns"]["labels"][0] == HOSTILE  # the JSON holds the strings, intact
    for tag, attrs in page.tags:
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
        for name in ("href", "src"):
            assert not str(attrs.get(name, "")).lower().startswith(("javascript:", "http://", "https://evil")), (tag, attrs)
        assert tag not in ("iframe", "form", "input", "object", "embed"), tag
    tags = [t for t, _ in page.tags]
    assert tags.count("style") == 2 and tags.count("img") == 0  # the page's own styles; no injected image
    text = page.all_text()
    assert text.count(HOSTILE) == 5  # the markdown heading, the title, the code, the stream, the traceback: as text
    assert "<b>bold</b>" in page_src and ">js</a>" in page_src  # sanitised HTML keeps harmless markup
    assert page_src.count("</table>") >= 1  # an unclosed tag in an output is closed where the output ends


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('<b onclick="x()">b</b>', "<b>b</b>"),
        ("<script>alert(1)</script>ok", "ok"),
        ("<style>p{}</style><p>t</p>", "<p>t</p>"),
        ('<a href="javascript:alert(1)">a</a><a href="https://ok.example/?a=1&amp;b=2">b</a>',
         '<a>a</a><a href="https://ok.example/?a=1&amp;b=2">b</a>'),
        ('<img src="https://x/y.png"><img src="data:image/png;base64,AA==" alt="a">',
         '<img src="data:image/png;base64,AA==" alt="a">'),
        ('<img src="data:image/svg+xml;base64,AA==">', ""),  # an SVG may hold scripts: not as an <img> from HTML
        ("<svg><script>1</script><text>t</text></svg>after", "after"),
        ("<div><span>1</div>2", "<div><span>1</span></div>2"),
        ("</p>stray<br/>", "stray<br>"),
        ("1 &lt; 2 &amp; <!-- c --> 3", "1 &lt; 2 &amp;  3"),
        ('<td title="&quot;><script>">x</td>', '<td title="&quot;&gt;&lt;script&gt;">x</td>'),
    ],
)
def test_sanitise_html(source, expected):
    assert sanitise_html(source) == expected


def test_text_helpers():
    assert plain_text(["a\x1b[1;31mb\x1b[0m", "\r\n", "x\ry"]) == "ab\ny"
    assert render_markdown("<i>x</i> [j](javascript:alert(1))") == "<p>&lt;i&gt;x&lt;/i&gt; [j](javascript:alert(1))</p>\n"
    assert 'src=""' in render_markdown("![a](attachment:missing.png)")


# ----- containers, shared models, links, other widgets ---------------------------------------------

def test_dashboard_lays_out_its_children_and_keeps_its_links(model):
    dash = cw.Dashboard(model, prompt="abcabc", layer=1, head=2)
    nb = notebook([code("dash", shown(dash, "execute_result"))], saved=[dash, *dash.js_links])
    payload = Parsed(page_html(nb)).payload()
    views = [w["_cw_view"] for w in payload["widgets"]]
    assert views == ["headscores", "attention", "composition", "attribution", "ov", "qk"]
    # the first glance as a grid of three columns (composition above attribution), OV and QK folded below
    first, more = payload["outputs"][0]["children"]
    assert first["box"] == "grid" and first["columns"] == dash.children[0].layout.grid_template_columns
    assert first["class"] == "cw-dashboard-first"
    assert first["children"] == [{"widget": 0}, {"widget": 1}, {"box": "vbox", "children": [{"widget": 2}, {"widget": 3}]}]
    (fold,) = more["children"]
    assert fold["box"] == "details" and fold["open"] is False and fold["title"] == "OV and QK circuits of the selected head"
    assert [child["widget"] for child in fold["children"][0]["children"]] == [4, 5]
    # the dashboard's jslinks: layer and head of every other child, both ways, with the attention widget
    expected = {((1, name), (child, name)) for child in (0, 2, 3, 4, 5) for name in ("layer", "head")}
    assert {tuple(map(tuple, link)) for link in payload["links"]} >= expected
    attention = payload["widgets"][1]
    assert attention["patterns"]["data"] == widget_state(dash.attention)["patterns"]["data"]
    assert payload["widgets"][0]["scores"]["data"] == widget_state(dash.head_scores)["scores"]["data"]


def test_shared_models_other_widgets_and_unsaved_state(attention, model):
    slider = ipywidgets.IntSlider(value=2, description="head")
    label = ipywidgets.Label("a <b>label</b>")
    other = cw.AttentionPattern(model, prompt="abab", layer=0)
    box = ipywidgets.VBox([label, attention, slider])
    tab = ipywidgets.Tab([other, ipywidgets.HTML("<i>two</i>\n <b>x</b>")], titles=["first", ""])
    dlink = ipywidgets.jsdlink((attention, "head"), (other, "head"))
    lost = cw.AttentionPattern(model, prompt="ab")
    nb = notebook(
        [code("a", shown(attention)), code("a again", shown(attention)), code("box", shown(box)), code("tab", shown(tab)),
         code("slider", shown(slider)), code("lost", shown(lost))],
        saved=[attention, box, tab, slider, dlink],
    )
    page_src = page_html(nb)
    payload = Parsed(page_src).payload()
    assert [w["_cw_view"] for w in payload["widgets"]] == ["attention", "attention"]  # one model, shown three times
    note = "[IntSlider (value 2): not shown on this page, which draws only circuitwidgets widgets]"
    assert payload["outputs"] == [
        {"widget": 0},
        {"widget": 0},
        {"box": "vbox", "children": [{"text": "a <b>label</b>"}, {"widget": 0}, {"text": note}]},
        {"box": "vbox", "children": [{"text": "first"}, {"widget": 1}, {"text": "Tab 2"}, {"text": "two x"}]},
    ]
    assert payload["dlinks"] == [[[0, "head"], [1, "head"]]] and payload["links"] == []
    text = Parsed(page_src).all_text()
    # a widget that is not a circuitwidgets one, and one whose state was not saved: its text, and why
    assert "IntSlider(value=2" in text and note[1:-1] in text
    assert "AttentionPattern" in text and "did not save" in text


# ----- files and the command line ------------------------------------------------------------------

def test_command_writes_the_page_and_refuses_bad_paths(tmp_path, capsys, attention):
    source = tmp_path / "nb.ipynb"
    source.write_text(json.dumps(notebook([md("# From the file"), code("w", shown(attention))], saved=[attention])))
    assert main(["page", str(source), "-o", str(tmp_path / "out.html")]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'out.html'}: ")
    page = (tmp_path / "out.html").read_text()
    assert "<title>From the file</title>" in page and 'data-cw-output="0"' in page
    assert main(["page", str(source)]) == 0 and (tmp_path / "nb.html").exists()  # default: beside the notebook
    assert main(["page", str(source), "-o", str(tmp_path / "t.html"), "--title", "Mine"]) == 0
    assert "<title>Mine</title>" in (tmp_path / "t.html").read_text()
    capsys.readouterr()
    for args, message in [
        ([str(tmp_path / "nb.txt")], "must be an .ipynb file"),
        ([str(source), "-o", str(tmp_path / "x.png")], "must end in .html"),
        ([str(tmp_path / "missing.ipynb")], "No such file"),
    ]:
        assert main(["page", *args]) == 1
        assert message in capsys.readouterr().err
    (tmp_path / "bad.ipynb").write_text("{}")
    assert main(["page", str(tmp_path / "bad.ipynb")]) == 1
    assert "is not a notebook" in capsys.readouterr().err
    assert not list(tmp_path.glob(".*.partial"))


def test_execute_runs_the_notebook_in_its_folder_and_saves_late_state(tmp_path, monkeypatch):
    """``--execute``: outputs and widget state from a fresh kernel, including a deferred first refresh."""
    source = tmp_path / "run.ipynb"
    cells = [
        code("import os\nprint(os.getcwd())", count=None),
        code("import circuitwidgets as cw\n"
             "w = cw.HeadScores(cw.demo_model(), kinds=['induction'], defer=True)  # computed after the cell returns\n"
             "w", count=None),
    ]
    source.write_text(json.dumps(notebook(cells)))
    before = source.read_text()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    notebook_page(source, tmp_path / "run.html", execute=True, timeout=300)
    assert source.read_text() == before  # the notebook itself is not changed
    page = Parsed((tmp_path / "run.html").read_text())
    assert str(tmp_path) in page.all_text()  # the kernel ran in the notebook's folder
    (state,) = page.payload()["widgets"]
    assert state["_cw_view"] == "headscores" and state["busy"] is False
    assert len(base64.b64decode(state["scores"]["data"]["$bytes"])) == 4 * 2 * 4  # float32 [1 kind, 2 layers, 4 heads]
    assert "[1]" in page.all_text() and "[2]" in page.all_text()


def test_execute_stops_at_a_cell_that_raises(tmp_path, capsys):
    source = tmp_path / "bad.ipynb"
    source.write_text(json.dumps(notebook([code("1 / 0", count=None)])))
    assert main(["page", str(source), "--execute"]) == 1
    err = capsys.readouterr().err
    assert "the notebook raised while running" in err and "ZeroDivisionError" in err
    assert not (tmp_path / "bad.html").exists()
