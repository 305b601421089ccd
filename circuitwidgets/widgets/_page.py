"""A notebook as one self-contained HTML page, its circuitwidgets outputs interactive with no kernel.

`python -m circuitwidgets page NOTEBOOK.ipynb -o PAGE.html [--execute]` writes one file holding
the notebook's markdown (rendered; raw HTML in it is shown as text), its code (highlighted), its
plain outputs (text, errors, images as data URIs, HTML outputs sanitised: an allowlist of tags and
attributes, no scripts, styles or event handlers) and every circuitwidgets output drawn by the
bundle from the widget state saved in the notebook (``metadata.widgets``), as `export_html` does for
one widget: no kernel, no network. Saved binary traits (``buffers``, base64 at a path in the state)
are put back in place; ipywidgets boxes (VBox, HBox, GridBox, so a `Dashboard`) lay out their
children, Tab and Accordion show every child under its title, ``jslink`` / ``jsdlink`` links keep
working, and any other widget shows its saved text (with a note) instead.

The widget state is what the notebook saved: in JupyterLab, Settings > Save Widget State
Automatically (or ``--execute`` here, which runs the notebook with nbclient first).
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._bundle import BUNDLE_CSS, BUNDLE_JS
from ._export import _COLUMNS, _MACHINERY, _TAGS, LAYOUT_CSS, PAGE_HEAD, _script_json, write_page
from ._page_text import IMAGE_DATA, code_css, highlight, plain_text, render_markdown, sanitise_html

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_REF = "IPY_MODEL_"

#: Run after the notebook's last cell by ``execute=True``: first complete every circuit widget for a
#: page with no kernel, as `export_html` does (a deferred first refresh, every composition kind),
#: and let background work (OV top-k) finish; then send every widget's whole state, so that updates
#: made after a cell had returned are in the saved state too. A widget that cannot be completed
#: (e.g. a remote model) keeps what it showed.
_FLUSH = (
    "def _cw_page_flush():\n"
    "    import sys\n"
    "    base = sys.modules.get('circuitwidgets.widgets.base')\n"
    "    module = sys.modules.get('ipywidgets.widgets.widget')\n"
    "    for widget in list(getattr(module, '_instances', {}).values()) if base is not None else []:\n"
    "        if isinstance(widget, base.CircuitWidget):\n"
    "            try:\n"
    "                widget._prepare_export()\n"
    "            except Exception:\n"
    "                pass\n"
    "    background = sys.modules.get('circuitwidgets.widgets._background')\n"
    "    if background is not None:\n"
    "        background.wait()\n"
    "_cw_page_flush()\n",
    "def _cw_page_flush():\n"
    "    import sys\n"
    "    module = sys.modules.get('ipywidgets.widgets.widget')\n"
    "    for widget in list(getattr(module, '_instances', {}).values()):\n"
    "        widget.send_state()\n"
    "_cw_page_flush()\n",
)


class NotebookError(RuntimeError):
    """A cell raised while the notebook ran (the message holds its traceback)."""


def execute_notebook(nb: dict[str, Any], cwd: str | Path, *, timeout: int = 600) -> dict[str, Any]:
    """Run every cell of `nb` (a notebook as JSON) in a fresh kernel in folder `cwd`; returns it run.

    The outputs and the widget state (``metadata.widgets``) are those of the run. A cell that
    raises stops the run with `NotebookError`.
    """
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:  # not a dependency of the package: the test extra and Jupyter have them
        raise ImportError("executing a notebook needs nbclient and ipykernel: pip install nbclient ipykernel") from exc
    node = nbformat.reads(json.dumps(nb), as_version=4)
    count = len(node.cells)
    node.cells.extend(nbformat.v4.new_code_cell(code) for code in _FLUSH)
    client = NotebookClient(node, timeout=timeout, store_widget_state=True, resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        raise NotebookError(str(exc)) from None
    finally:
        del node.cells[count:]
    return json.loads(nbformat.writes(node))


def _put(state: dict[str, Any], path: list[Any], value: Any) -> None:
    if not path:
        raise ValueError("a saved buffer has no path")
    target: Any = state
    for key in path[:-1]:
        if isinstance(target, dict):
            target = target.setdefault(key, {})
        elif isinstance(target, list) and isinstance(key, int) and 0 <= key < len(target):
            target = target[key]
        else:
            raise ValueError(f"buffer path {path!r} does not fit the saved state")
    if isinstance(target, dict) or (isinstance(target, list) and isinstance(path[-1], int) and 0 <= path[-1] < len(target)):
        target[path[-1]] = value
    else:
        raise ValueError(f"buffer path {path!r} does not fit the saved state")


def saved_widgets(nb: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The widget models saved in `nb`, by model id: ``{"module", "name", "state"}``, bytes in place.

    A saved buffer (``{"path", "encoding": "base64" | "hex", "data"}``) goes back into the state at
    its path as ``{"$bytes": base64}``, the form the bundle's page host decodes into a `DataView`.

    Example:
        >>> nb = {"metadata": {"widgets": {WIDGET_STATE: {"state": {"m1": {
        ...     "model_module": "anywidget", "model_name": "AnyModel", "state": {"patterns": {"shape": [1]}},
        ...     "buffers": [{"path": ["patterns", "data"], "encoding": "hex", "data": "ff"}]}}}}}}
        >>> saved_widgets(nb)["m1"]["state"]["patterns"]
        {'shape': [1], 'data': {'$bytes': '/w=='}}
    """
    saved = (nb.get("metadata") or {}).get("widgets") or {}
    models = (saved.get(WIDGET_STATE) or {}).get("state") or {}
    out = {}
    for model_id, entry in models.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("state"), dict):
            continue
        state = json.loads(json.dumps(entry["state"]))  # a copy: the buffers go into it
        for buffer in entry.get("buffers") or []:
            data = str(buffer.get("data", ""))
            raw = bytes.fromhex(data) if buffer.get("encoding") == "hex" else base64.b64decode(data)
            _put(state, list(buffer.get("path") or []), {"$bytes": base64.b64encode(raw).decode("ascii")})
        module = entry.get("model_module") or state.get("_model_module")
        name = entry.get("model_name") or state.get("_model_name")
        out[str(model_id)] = {"module": module, "name": name, "state": state}
    return out


def _is_circuit_widget(model: dict[str, Any]) -> bool:
    return model["module"] == "anywidget" and isinstance(model["state"].get("_cw_view"), str)


def _ref(value: Any) -> str | None:
    return value[len(_REF):] if isinstance(value, str) and value.startswith(_REF) else None


_HBOXES = {"HBoxModel", "GridBoxModel"}
_VBOXES = {"VBoxModel", "BoxModel"}
_TITLED = {"TabModel", "AccordionModel"}


class _Widgets:
    """The page's widgets: circuit widget states (one per model, however often shown), output trees, links."""

    def __init__(self, saved: dict[str, dict[str, Any]]) -> None:
        self.saved = saved
        self.index: dict[str, int] = {}  # model id -> position in `states`
        self.states: list[dict[str, Any]] = []
        self.outputs: list[dict[str, Any]] = []

    def output(self, model_id: str) -> int | None:
        """The index of the output tree of `model_id`, or None when it holds no circuit widget."""
        tree = self.node(model_id, ())
        if not _has_widget(tree):
            return None
        self.outputs.append(tree)
        return len(self.outputs) - 1

    def node(self, model_id: str, seen: tuple[str, ...]) -> dict[str, Any]:
        model = self.saved.get(model_id)
        if model is None:
            return {"text": "[a widget whose state the notebook did not save]"}
        if model_id in seen:
            return {"text": "[a widget inside itself]"}
        state, name = model["state"], model["name"]
        if _is_circuit_widget(model):
            if model_id not in self.index:
                self.index[model_id] = len(self.states)
                self.states.append({k: v for k, v in state.items() if k not in _MACHINERY})
            return {"widget": self.index[model_id]}
        if model["module"] != "@jupyter-widgets/controls":
            return {"text": _unknown_note(model)}
        children = [ref for c in state.get("children") or [] if (ref := _ref(c)) is not None]
        inner = (*seen, model_id)
        own = [c for c in state.get("_dom_classes") or [] if isinstance(c, str) and re.fullmatch(r"cw-[\w-]+", c)]
        classes = {"class": " ".join(own)} if own else {}
        columns = self._columns(state) if name == "GridBoxModel" else None
        if columns:  # a grid laid out as saved (a Dashboard's first glance)
            return {"box": "grid", "columns": columns, "children": [self.node(c, inner) for c in children], **classes}
        if name == "AccordionModel":  # one folded part per child, opened as saved
            titles = list(state.get("titles") or [])
            folds = [
                {"box": "details", "title": str(titles[i]) if i < len(titles) and titles[i] else f"part {i + 1}",
                 "open": state.get("selected_index") == i, "children": [self.node(child, inner)]}
                for i, child in enumerate(children)
            ]
            return {"box": "vbox", "children": folds, **classes}
        if name in _HBOXES or name in _VBOXES:
            return {"box": "hbox" if name in _HBOXES else "vbox", "children": [self.node(c, inner) for c in children]}
        if name in _TITLED:
            titles = list(state.get("titles") or [])
            nodes: list[dict[str, Any]] = []
            for i, child in enumerate(children):
                title = titles[i] if i < len(titles) and titles[i] else f"{name[:-5]} {i + 1}"
                nodes += [{"text": str(title)}, self.node(child, inner)]
            return {"box": "vbox", "children": nodes}
        if name == "StackModel":
            selected = state.get("selected_index")
            shown = [children[selected]] if isinstance(selected, int) and 0 <= selected < len(children) else []
            return {"box": "vbox", "children": [self.node(c, inner) for c in shown]}
        if name == "LabelModel":  # plain text
            return {"text": str(state.get("value", ""))}
        if name in ("HTMLModel", "HTMLMathModel"):  # shown as text: markup stripped, never interpreted
            return {"text": " ".join(html.unescape(_TAGS.sub(" ", str(state.get("value", "")))).split())}
        return {"text": _unknown_note(model)}

    def _columns(self, state: dict[str, Any]) -> str | None:
        """A GridBox's saved CSS columns (its layout model's ``grid_template_columns``), when plain."""
        layout = self.saved.get(_ref(state.get("layout")) or "", {}).get("state", {})
        columns = layout.get("grid_template_columns")
        return columns if isinstance(columns, str) and columns and _COLUMNS.fullmatch(columns) else None

    def links(self) -> tuple[list[Any], list[Any]]:
        """``(links, dlinks)`` between circuit widgets on the page, as ``[[i, name], [j, name]]`` pairs."""
        both: list[Any] = []
        one_way: list[Any] = []
        for model in self.saved.values():
            if model["module"] != "@jupyter-widgets/controls" or model["name"] not in ("LinkModel", "DirectionalLinkModel"):
                continue
            ends = []
            for end in (model["state"].get("source"), model["state"].get("target")):
                if isinstance(end, list) and len(end) == 2 and _ref(end[0]) in self.index and isinstance(end[1], str):
                    ends.append([self.index[str(_ref(end[0]))], end[1]])
            if len(ends) == 2:
                (both if model["name"] == "LinkModel" else one_way).append(ends)
        return both, one_way


def _has_widget(node: dict[str, Any]) -> bool:
    return "widget" in node or any(_has_widget(child) for child in node.get("children", []))


def _unknown_note(model: dict[str, Any]) -> str:
    kind = str(model["state"].get("_anywidget_id") or model["name"] or "widget").removesuffix("Model")
    value = model["state"].get("value")
    shown = f" (value {value!r:.60})" if isinstance(value, (str, int, float, bool)) else ""
    return f"[{kind}{shown}: not shown on this page, which draws only circuitwidgets widgets]"


# ----- the page ----------------------------------------------------------------------------------

_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _pre(text: str, kind: str) -> str:
    return f'<pre class="cw-page-text cw-page-{kind}">{html.escape(text, quote=False)}</pre>'


def _render_output(output: dict[str, Any], widgets: _Widgets) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        name = "stderr" if output.get("name") == "stderr" else "stdout"
        return _pre(plain_text(output.get("text", "")), name)
    if kind == "error":
        lines = output.get("traceback") or [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return _pre(plain_text("\n".join(lines)), "error")
    if kind not in ("execute_result", "display_data"):
        return ""
    data = output.get("data") or {}
    text = plain_text(data.get("text/plain", ""))
    view = data.get(WIDGET_VIEW)
    if isinstance(view, dict) and isinstance(view.get("model_id"), str):
        model = widgets.saved.get(view["model_id"])
        index = widgets.output(view["model_id"]) if model is not None else None
        if index is not None:
            return f'<div class="cw-page-widget" data-cw-output="{index}"></div>'
        note = (
            "a widget whose state the notebook did not save (save the widget state, or run with --execute)"
            if model is None
            else _unknown_note(model)[1:-1]
        )
        return _pre(text, "plain") + f'<p class="cw-page-note">{html.escape(note)}</p>'
    if "text/html" in data:
        return f'<div class="cw-page-html">{sanitise_html(plain_text(data["text/html"]))}</div>'
    if "text/markdown" in data:
        return f'<div class="cw-page-markdown">{render_markdown(plain_text(data["text/markdown"]))}</div>'
    for mime in (*_IMAGES, "image/svg+xml"):
        if mime in data:
            raw = "".join(data[mime]) if isinstance(data[mime], list) else str(data[mime])
            b64 = base64.b64encode(raw.encode()).decode() if mime == "image/svg+xml" else re.sub(r"\s", "", raw)
            if mime == "image/svg+xml" or IMAGE_DATA.match(f"data:{mime};base64,{b64}"):
                alt = html.escape(text or "image")
                return f'<img class="cw-page-image" alt="{alt}" src="data:{mime};base64,{b64}">'
    if "text/latex" in data:
        return _pre(plain_text(data["text/latex"]), "plain")
    return _pre(text, "plain") if text else ""


def _title(nb: dict[str, Any], fallback: str) -> str:
    title = (nb.get("metadata") or {}).get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    for cell in nb.get("cells") or []:
        if cell.get("cell_type") == "markdown":
            match = re.search(r"^#\s+(.+?)\s*#*\s*$", _source(cell), re.MULTILINE)
            if match:
                return match.group(1)
    return fallback


def page_html(nb: dict[str, Any], *, title: str = "notebook") -> str:
    """The page of notebook `nb` (its JSON as a dict), as one HTML string.

    Example:
        >>> nb = {"cells": [{"cell_type": "markdown", "source": "# Hi <i>"}], "metadata": {}}
        >>> "<h1>Hi &lt;i&gt;</h1>" in page_html(nb)
        True
    """
    widgets = _Widgets(saved_widgets(nb))
    meta = nb.get("metadata") or {}
    language = str((meta.get("language_info") or {}).get("pygments_lexer") or (meta.get("kernelspec") or {}).get("language")
                   or "python")
    parts = []
    for cell in nb.get("cells") or []:
        kind, source = cell.get("cell_type"), _source(cell)
        if kind == "markdown":
            parts.append(f'<section class="cw-page-md">{render_markdown(source, cell.get("attachments"))}</section>')
        elif kind == "code":
            count = cell.get("execution_count")
            prompt = f"[{count}]" if isinstance(count, int) else "[ ]"
            outputs = "".join(_render_output(o, widgets) for o in cell.get("outputs") or [])
            parts.append(
                '<section class="cw-page-cell">'
                f'<div class="cw-page-input"><span class="cw-page-prompt">{prompt}</span>'
                f'<pre class="cw-page-code">{highlight(source, language)}</pre></div>'
                + (f'<div class="cw-page-outputs">{outputs}</div>' if outputs else "")
                + "</section>"
            )
        elif kind == "raw" and source.strip():
            parts.append(f'<section class="cw-page-cell">{_pre(source, "raw")}</section>')
    links, dlinks = widgets.links()
    payload = {"widgets": widgets.states, "outputs": widgets.outputs, "links": links, "dlinks": dlinks}
    script = ""
    if widgets.states:
        script = (
            f'<script type="application/json" id="cw-state">{_script_json(payload)}</script>\n'
            f'<script type="module">\nconst source = {_script_json(BUNDLE_JS)};\n{_MOUNT}</script>'
        )
    return _PAGE.format(
        title=html.escape(title),
        css=BUNDLE_CSS.replace("</", "<\\/"),
        code_css=code_css(),
        cells="\n".join(parts),
        script=script,
        layout_css=LAYOUT_CSS,
    )


def _text_like(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(line, str) for line in value))


def check_notebook(nb: Any, source: Any = "the notebook") -> None:
    """ValueError naming the first part of `nb` (a notebook's JSON) that a page cannot be made of: the cells, each
    cell's type, source and outputs, and the widget state saved in its metadata.

    Example:
        >>> check_notebook({"cells": [{"cell_type": "code", "source": ["x = 1", 3]}]}, "nb.ipynb")
        Traceback (most recent call last):
        ...
        ValueError: nb.ipynb: cell 0's source must be text (a string or a list of strings)
    """
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{source} is not a notebook (no cells)")
    for index, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise ValueError(f"{source}: cell {index} is not a code, markdown or raw cell")
        if not _text_like(cell.get("source", "")):
            raise ValueError(f"{source}: cell {index}'s source must be text (a string or a list of strings)")
        outputs = cell.get("outputs", [])
        typed = isinstance(outputs, list) and all(isinstance(o, dict) and isinstance(o.get("output_type"), str) for o in outputs)
        if not typed:
            raise ValueError(f"{source}: cell {index}'s outputs must be a list of outputs, each with an output_type")
        for output in outputs:
            data = output.get("data", {})
            if not isinstance(data, dict):
                raise ValueError(f"{source}: an output of cell {index} has data that is not a mapping")
            view = data.get("application/vnd.jupyter.widget-view+json")
            if view is not None and not (isinstance(view, dict) and isinstance(view.get("model_id"), str)):
                raise ValueError(f"{source}: a widget output of cell {index} names no model_id")
    metadata = nb.get("metadata", {})
    widgets = metadata.get("widgets", {}) if isinstance(metadata, dict) else None
    state = (widgets or {}).get("application/vnd.jupyter.widget-state+json", {}) if isinstance(widgets, dict) else None
    models = (state or {}).get("state", {}) if isinstance(state, dict) else None
    good = isinstance(models, dict) and all(isinstance(m, dict) and isinstance(m.get("state", {}), dict) for m in models.values())
    if not good:
        raise ValueError(f"{source}: the widget state saved in its metadata is not a mapping of widget models")


def notebook_page(
    notebook: str | Path,
    path: str | Path | None = None,
    *,
    execute: bool = False,
    title: str | None = None,
    timeout: int = 600,
    log: Callable[[str], Any] | None = None,
) -> Path:
    """Write the page of `notebook` (.ipynb) to `path` (default: beside it, .html); returns the path.

    With ``execute=True`` the notebook runs first (nbclient, a fresh kernel, in the notebook's
    folder; the file itself is not changed), so its outputs and widget state are current, and
    each circuit widget is completed for a page as `export_html` completes it (every composition
    kind, deferred refreshes). Without it the page shows the state the notebook saved.

    Example:
        >>> import json, pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> two = {"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {}, "execution_count": 1}
        >>> nb = {"cells": [{"cell_type": "code", "source": "1 + 1", "execution_count": 1, "metadata": {}, "outputs": [two]}],
        ...     "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        >>> _ = (folder / "two.ipynb").write_text(json.dumps(nb))
        >>> notebook_page(folder / "two.ipynb").name
        'two.html'
    """
    source = Path(notebook)
    if source.suffix.lower() != ".ipynb":
        raise ValueError(f"notebook must be an .ipynb file; got {str(notebook)!r}")
    target = source.with_suffix(".html") if path is None else Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"path must end in .html; got {str(target)!r}")
    if target.resolve() == source.resolve():
        raise ValueError("the page would overwrite the notebook")
    try:
        nb = json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not a notebook (not JSON: {exc})") from None
    check_notebook(nb, source)
    if execute:
        if log:
            log(f"running {source.name} ...")
        nb = execute_notebook(nb, source.resolve().parent, timeout=timeout)
    return write_page(target, page_html(nb, title=title or _title(nb, source.stem)))


_MOUNT = """const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
const bundle = await import(url);
bundle.mountPage(document.body, JSON.parse(document.getElementById("cw-state").textContent));
"""

_PAGE = PAGE_HEAD + """<style>
:root {{ color-scheme: light dark; --cw-page-fg: #1f2328; --cw-page-bg: #fff; --cw-page-muted: #59636e;
  --cw-page-code-bg: #f6f8fa; --cw-page-border: #d1d9e0; --cw-page-error-bg: #fdecea; --cw-page-link: #0969da; }}
@media (prefers-color-scheme: dark) {{
  :root {{ --cw-page-fg: #e6e6e6; --cw-page-bg: #111318; --cw-page-muted: #9198a1; --cw-page-code-bg: #1b1f26;
    --cw-page-border: #3d444d; --cw-page-error-bg: #3a1d1d; --cw-page-link: #4493f8; }}
}}
body {{ margin: 0 auto; padding: 16px 24px 48px; max-width: 1180px; font: 15px/1.55 system-ui, sans-serif;
  background: var(--cw-page-bg); color: var(--cw-page-fg); }}
a {{ color: var(--cw-page-link); }}
.cw-page-md {{ margin: 12px 0; }}
.cw-page-md img, .cw-page-html img, .cw-page-image {{ max-width: 100%; }}
.cw-page-md table, .cw-page-html table {{ border-collapse: collapse; }}
.cw-page-md :is(th, td), .cw-page-html :is(th, td) {{ border: 1px solid var(--cw-page-border); padding: 2px 8px; }}
.cw-page-md code {{ background: var(--cw-page-code-bg); padding: 1px 4px; border-radius: 4px; }}
.cw-page-md pre code {{ background: none; padding: 0; }}
.cw-page-cell {{ margin: 12px 0 20px; }}
.cw-page-input {{ display: flex; gap: 8px; align-items: baseline; }}
.cw-page-prompt {{ flex: 0 0 44px; color: var(--cw-page-muted); font: 12px ui-monospace, monospace; text-align: right; }}
pre {{ font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }}
.cw-page-code, .cw-page-md pre {{ flex: 1 1 auto; min-width: 0; margin: 0; padding: 8px 12px; overflow-x: auto;
  background: var(--cw-page-code-bg); border: 1px solid var(--cw-page-border); border-radius: 6px; }}
.cw-page-outputs {{ margin: 6px 0 0 52px; }}
.cw-page-text {{ margin: 4px 0; white-space: pre-wrap; overflow-wrap: anywhere; }}
.cw-page-stderr {{ color: var(--cw-page-muted); }}
.cw-page-error {{ background: var(--cw-page-error-bg); padding: 6px 10px; border-radius: 6px; }}
.cw-page-note {{ margin: 2px 0 8px; color: var(--cw-page-muted); font-size: 13px; font-style: italic; }}
.cw-page-widget {{ margin: 6px 0; }}
.cw-export-item {{ margin-bottom: 8px; min-width: 0; }}
{layout_css}
{code_css}
</style>
<style>{css}</style>
</head>
<body>
<main>
{cells}
</main>
{script}
</body>
</html>
"""
