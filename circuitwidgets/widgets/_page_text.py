"""The text parts of a notebook page (`circuitwidgets.widgets._page`): output text as a terminal shows it,
markdown, highlighted code, and HTML outputs sanitised to an allowlist of tags and attributes."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def plain_text(value: Any) -> str:
    """Output text as a terminal would show it: ANSI colours dropped, each line as its last ``\\r`` left it."""
    text = "".join(value) if isinstance(value, list) else str(value)
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z")


def _safe_url(url: str, *, image: bool) -> bool:
    """Links: http(s), mailto and in-page anchors; images: data URIs of raster images only."""
    if image:
        return bool(IMAGE_DATA.match(url))
    return re.match(r"(https?:|mailto:|#)", url.strip(), re.IGNORECASE) is not None


class _Sanitiser(HTMLParser):
    """Re-writes HTML keeping only an allowlist of tags and attributes; everything else is text or dropped."""

    TAGS = frozenset({
        "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div", "dl",
        "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "ol", "p", "pre", "q", "s",
        "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
        "u", "ul",
    })
    VOID = frozenset({"br", "col", "hr", "img"})
    # dropped with everything inside them
    DROP = frozenset({"script", "style", "template", "iframe", "object", "embed", "noscript", "svg", "math", "textarea",
                      "select", "title", "head", "frameset", "noembed", "xmp"})
    ATTRS = frozenset({"title", "alt", "colspan", "rowspan", "align", "href", "src", "width", "height"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.dropping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.dropping or tag in self.DROP:
            if tag in self.DROP and tag not in self.VOID:
                self.dropping.append(tag)
            return
        if tag not in self.TAGS:
            return
        kept = []
        for name, value in attrs:
            value = value or ""
            if name not in self.ATTRS or (name in ("href", "src") and not _safe_url(value, image=name == "src")):
                continue
            kept.append(f' {name}="{html.escape(value)}"')
        if tag == "img" and not any(k.startswith(" src=") for k in kept):
            return
        self.out.append(f"<{tag}{''.join(kept)}>")
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            if tag == self.dropping[-1]:
                self.dropping.pop()
            return
        if tag in self.open:
            while self.open:
                inner = self.open.pop()
                self.out.append(f"</{inner}>")
                if inner == tag:
                    break

    def handle_data(self, data: str) -> None:
        if not self.dropping:
            self.out.append(html.escape(data, quote=False))

    def result(self) -> str:
        self.close()
        return "".join(self.out) + "".join(f"</{tag}>" for tag in reversed(self.open))


def sanitise_html(source: str) -> str:
    """`source` with only safe markup left: no script, style, event handler, form or remote image.

    Example:
        >>> sanitise_html('<table onclick="x()"><tr><td>1 &lt; 2<script>alert(1)</script>')
        '<table><tr><td>1 &lt; 2</td></tr></table>'
    """
    parser = _Sanitiser()
    parser.feed(source)
    return parser.result()


def _markdown() -> Any:
    from markdown_it import MarkdownIt  # through rich, which transformer-lens requires

    # "html": False: HTML written in a cell is shown as text, never interpreted.
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def render_markdown(source: str, attachments: dict[str, Any] | None = None) -> str:
    """A markdown cell as HTML: CommonMark with tables; raw HTML escaped; ``attachment:`` images inlined.

    Example:
        >>> render_markdown("**a** <b>b</b>")
        '<p><strong>a</strong> &lt;b&gt;b&lt;/b&gt;</p>\\n'
    """
    md = _markdown()
    tokens = md.parse(source)
    for token in tokens:
        for child in token.children or []:
            if child.type == "image" and str(child.attrGet("src") or "").startswith("attachment:"):
                name = str(child.attrGet("src"))[len("attachment:"):]
                bundle = (attachments or {}).get(name) or {}
                mime = next((m for m in ("image/png", "image/jpeg", "image/gif", "image/webp") if m in bundle), None)
                data = "".join(bundle[mime]) if mime else ""
                child.attrSet("src", f"data:{mime};base64,{data.strip()}" if mime else "")
    return md.renderer.render(tokens, md.options, {})


def highlight(code: str, language: str) -> str:
    from pygments import highlight  # through IPython, which ipywidgets requires
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    return highlight(code, lexer, HtmlFormatter(nowrap=True))


def code_css() -> str:
    from pygments.formatters import HtmlFormatter

    light = HtmlFormatter(style="default").get_style_defs(".cw-page-code")
    dark = HtmlFormatter(style="github-dark").get_style_defs(".cw-page-code")
    # the page sets the code's background itself
    light, dark = (re.sub(r"^\.cw-page-code\s*\{[^}]*\}\n?", "", css, flags=re.MULTILINE) for css in (light, dark))
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}"
