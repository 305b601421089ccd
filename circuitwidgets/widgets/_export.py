"""Self-contained HTML export: the bundle, the CSS and every widget's state in one file (`save_html`).

The stock ipywidgets/anywidget embedders fetch their runtime from a CDN. This page instead carries
a tiny host (`mountPage` in the bundle, over js/lib/host.js's saved models) that gives the widget's `render` the same `model`
interface it has in a notebook (`get`, `set`, `on`, `off`, `save_changes`, `send`) over the saved
state, so the page works from disk with no kernel and no network. Bytes traits travel as base64.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets

from ._bundle import BUNDLE_CSS, BUNDLE_JS

# Traits of the ipywidgets/anywidget machinery, meaningless without a kernel.
_MACHINERY = set(ipywidgets.DOMWidget.class_trait_names()) | {"_esm", "_css", "_anywidget_id"}


class Exportable(anywidget.AnyWidget):
    """Mixed into `CircuitWidget`: `save_html`, and what a widget completes before a page with no kernel."""

    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write one self-contained HTML file (bundle and data inlined, no CDN, no kernel needed).

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc")
            >>> w.save_html("/tmp/attention.html").name
            'attention.html'
        """
        return export_html([self], path, title=title)

    def _prepare_export(self) -> None:
        """Make the state complete for a page with no kernel (each class computes what it lacks here)."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def widget_state(widget: Exportable) -> dict[str, Any]:
    """The synced state of `widget` that its view reads, JSON-able (bytes as ``{"$bytes": base64}``).

    Example:
        >>> import circuitwidgets as cw
        >>> state = widget_state(cw.AttentionPattern(cw.demo_model(), prompt="ab"))
        >>> state["_cw_view"], state["patterns"]["data"].keys()
        ('attention', dict_keys(['$bytes']))
    """
    if not isinstance(widget, Exportable):
        raise TypeError(f"widget must be a circuitwidgets widget; got {type(widget).__name__}")
    names = [name for name in widget.keys if name not in _MACHINERY]
    return _jsonable(widget.get_state(names))


def _script_json(value: Any) -> str:
    # "<" escaped keeps "</script>" inside a token string from closing the script element.
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c")


_TAGS = re.compile(r"<[^>]*>")


_COLUMNS = re.compile(r"[\w\s().,%-]*")  # a CSS grid template of columns (no url(), no quotes)


def _classes(item: ipywidgets.Box) -> dict[str, str]:
    """``{"class": "cw-..."}``: the box's own circuitwidgets classes (e.g. a Dashboard's ``cw-dashboard-first``), if any."""
    own = [c for c in item._dom_classes if re.fullmatch(r"cw-[\w-]+", c)]
    return {"class": " ".join(own)} if own else {}


def _layout(item: Any, found: list[Exportable]) -> dict[str, Any]:
    """The page layout of `item`: ``{"widget": i}``, ``{"text"}``, or a box: ``{"box": "vbox" | "hbox", "children"}``,
    ``{"box": "grid", "columns", "children"}`` (a GridBox's CSS columns) or ``{"box": "details", "title", "children"}``
    (one per child of an Accordion, folded)."""
    if isinstance(item, Exportable):
        if any(w is item for w in found):
            raise ValueError(f"{type(item).__name__} appears twice in the exported widgets; a view can be shown once")
        found.append(item)
        return {"widget": len(found) - 1}
    if isinstance(item, ipywidgets.Accordion):
        folds = [
            {"box": "details", "title": item.get_title(i) or f"part {i + 1}", "open": item.selected_index == i,
             "children": [_layout(child, found)]}
            for i, child in enumerate(item.children)
        ]
        return {"box": "vbox", "children": folds, **_classes(item)}
    if isinstance(item, ipywidgets.GridBox) and item.layout.grid_template_columns:
        columns = str(item.layout.grid_template_columns)
        if _COLUMNS.fullmatch(columns):
            children = [_layout(child, found) for child in item.children]
            return {"box": "grid", "columns": columns, "children": children, **_classes(item)}
    if isinstance(item, ipywidgets.Box):
        kind = "hbox" if isinstance(item, (ipywidgets.HBox, ipywidgets.GridBox)) else "vbox"
        return {"box": kind, "children": [_layout(child, found) for child in item.children], **_classes(item)}
    if isinstance(item, (ipywidgets.Label, ipywidgets.HTML, ipywidgets.HTMLMath)):
        # Shown as plain text: markup is stripped, never interpreted.
        return {"text": html.unescape(_TAGS.sub(" ", str(item.value))).strip()}
    raise TypeError(
        "export takes circuitwidgets widgets, ipywidgets VBox/HBox of them, and Label/HTML text; "
        f"got {type(item).__name__}"
    )


def export_html(
    widgets: Any,
    path: str | Path,
    *,
    title: str | None = None,
    links: Sequence[tuple[tuple[Exportable, str], tuple[Exportable, str]]] = (),
) -> Path:
    """Write `widgets` to one offline HTML file at `path` (bundle, CSS and data inlined); returns the path.

    `widgets` is one widget or a sequence of them (stacked vertically); an item may be a
    circuitwidgets widget, an ``ipywidgets.VBox`` / ``HBox`` (any depth) holding such widgets,
    or an ``ipywidgets.Label`` / ``HTML`` (shown as plain text). `links` are pairs
    ``((widget_a, "head"), (widget_b, "head"))`` kept in step in the page, as ``traitlets.link``
    does in the kernel. The page works from disk with no kernel and no network: what needs the
    kernel (a new prompt, another layer) is disabled there.

    Example:
        >>> import circuitwidgets as cw, ipywidgets
        >>> from circuitwidgets.widgets._export import export_html
        >>> model = cw.demo_model()
        >>> a = cw.AttentionPattern(model, prompt="abab", layer=0)
        >>> b = cw.AttentionPattern(model, prompt="abab", layer=1)
        >>> export_html(ipywidgets.HBox([a, b]), "/tmp/two.html", links=[((a, "head"), (b, "head"))]).name
        'two.html'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path; got {type(path).__name__}")
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"path must end in .html; got {str(path)!r}")
    return write_page(path, page_html(widgets, title=title, links=links))


def page_html(
    widgets: Any,
    *,
    title: str | None = None,
    links: Sequence[tuple[tuple[Exportable, str], tuple[Exportable, str]]] = (),
) -> str:
    """The offline HTML page `export_html` writes, as a string (see there).

    Example:
        >>> import circuitwidgets as cw
        >>> page_html(cw.ColoredTokens(["a", "b"], [0.5, 1.0])).startswith("<!doctype html>")
        True
    """
    items = list(widgets) if isinstance(widgets, (list, tuple)) else [widgets]
    if not items:
        raise ValueError("widgets must hold at least one widget")
    found: list[Exportable] = []
    layout = {"box": "vbox", "children": [_layout(item, found) for item in items]}
    if not found:
        raise ValueError("widgets holds no circuitwidgets widget to export")
    link_list = []
    for pair in links:
        try:
            (wa, na), (wb, nb) = pair
        except (TypeError, ValueError):
            raise ValueError(f"each link must be ((widget, name), (widget, name)); got {pair!r}") from None
        ends = []
        for w, n in ((wa, na), (wb, nb)):
            index = next((i for i, f in enumerate(found) if f is w), None)
            if index is None:
                raise ValueError(f"link {pair!r} names a widget that is not exported")
            if n not in w.keys:
                raise ValueError(f"link names trait {n!r}, which {type(w).__name__} does not sync")
            ends.append([index, n])
        link_list.append(ends)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None; got {type(title).__name__}")
    for widget in found:  # e.g. a deferred first refresh (Dashboard children) must not export empty
        widget._prepare_export()
    payload = {"widgets": [widget_state(w) for w in found], "layout": layout, "links": link_list}
    bundle, css = BUNDLE_JS, BUNDLE_CSS
    name = title or f"circuitwidgets: {', '.join(w.view_name for w in found)}"
    return _PAGE.format(
        title=html.escape(name),
        css=css.replace("</", "<\\/"),
        state=_script_json(payload),
        bundle=_script_json(bundle),
        layout_css=LAYOUT_CSS,
    )


def write_page(path: Path, page: str) -> Path:
    """Write `page` to `path` through a file beside it, renamed over it: a failed write never destroys an earlier file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


#: The start of every page written here, up to its title (a ``str.format`` template: ``{title}``).
PAGE_HEAD = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="circuitwidgets">
<title>{title}</title>
"""
#: How a page lays out the boxes of `_layout` (a notebook page's too; each page sizes ``.cw-export-item``).
LAYOUT_CSS = """.cw-export-vbox { display: flex; flex-direction: column; gap: 16px; }
.cw-export-hbox { display: flex; flex-direction: row; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.cw-export-hbox > .cw-export-item { flex: 1 1 0; min-width: 380px; margin-bottom: 0; }
.cw-export-text { white-space: pre-wrap; }"""

_PAGE = PAGE_HEAD + """<style>
:root {{ color-scheme: light dark; }}
body {{ margin: 16px; font-family: system-ui, sans-serif; background: #fff; color: #1f2328; }}
@media (prefers-color-scheme: dark) {{ body {{ background: #111318; color: #e6e6e6; }} }}
.cw-export-item {{ margin-bottom: 24px; }}
{layout_css}
</style>
<style>{css}</style>
</head>
<body>
<div id="cw-export" data-cw-output="0" aria-live="polite"></div>
<script type="application/json" id="cw-state">{state}</script>
<script type="module">
const source = {bundle};
const url = URL.createObjectURL(new Blob([source], {{ type: "text/javascript" }}));
const bundle = await import(url);
const state = JSON.parse(document.getElementById("cw-state").textContent);
bundle.mountPage(document.body, {{ ...state, outputs: [state.layout] }});
</script>
</body>
</html>
"""
