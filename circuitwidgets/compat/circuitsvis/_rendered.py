"""What CircuitsVis's calls return is HTML: ``str(obj)``, ``obj.show_code()`` and ``obj.__html__()`` give it.

The widgets this package returns for them are that too, through `Rendered`: the page they give is the
one ``save_html`` writes (bundle and data inlined, no network), so tutorial code that writes
``str(cv.attention.attention_patterns(...))`` to a file gets a page that works.
"""

from __future__ import annotations

from ...widgets._export import page_html


class Rendered:
    """Mixed into a widget: its self-contained HTML page as ``str()``, ``show_code()`` and ``__html__()``."""

    def show_code(self) -> str:
        """The widget's self-contained HTML page (what CircuitsVis's ``RenderedHTML.show_code`` returns)."""
        return page_html(self)

    def __html__(self) -> str:
        return self.show_code()

    def __str__(self) -> str:
        return self.show_code()
