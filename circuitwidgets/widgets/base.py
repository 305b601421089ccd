"""What every circuitwidgets widget shares: the bundle, an in-widget error, coalesced refreshes, export.

A widget subclass declares its traits, implements `_refresh()` (call `circuitwidgets.analysis`,
hand the tensors to `circuitwidgets.transport`, assign the payload traits at the end so that a
failure leaves the last good picture in place) and calls `_request_refresh()` from its observers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anywidget
import traitlets

STATIC = Path(__file__).parent / "static"

#: Delay before a refresh asked for by the browser runs. Messages that queued up meanwhile (a user
#: typing, a slider dragged) are applied first and the refresh runs once, on the latest state.
COALESCE_S = 0.03


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class CircuitWidget(anywidget.AnyWidget):
    """Base class: one shared bundle (`static/widgets.js`) that draws the view named by ``_kind``.

    Traits every widget has:
        error (str, ""): message shown inside the widget; "" when all is well.
        busy (bool, False): True while the kernel recomputes (the widget shows a progress note).
    """

    _esm = STATIC / "widgets.js"
    _css = STATIC / "widgets.css"

    _kind = traitlets.Unicode("", help="which view of the bundle draws this widget").tag(sync=True)
    error = traitlets.Unicode("", help="message shown inside the widget; '' when all is well").tag(sync=True)
    busy = traitlets.Bool(False, help="True while the kernel recomputes").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        self._frontend_depth = 0
        self._pending: asyncio.TimerHandle | None = None
        self._error_source: str | None = None
        self._start_pending = False
        self.refresh_count = 0  # completed refreshes; lets tests see that updates coalesced
        super().__init__(**kwargs)

    # ----- errors ----------------------------------------------------------------------------
    def _show_error(self, message: str, source: str) -> None:
        """Show `message` in the widget; `source` lets a later success clear only its own error."""
        self._error_source = source
        self.error = message

    def _clear_error(self, source: str) -> None:
        if self._error_source == source:
            self._error_source = None
            self.error = ""

    def _trait_error(self, exc: Exception, source: str) -> traitlets.TraitError:
        """Show a bad value's message in the widget and return the `TraitError` to raise."""
        self._show_error(str(exc), source)
        return traitlets.TraitError(str(exc))

    # ----- coalesced refreshes -----------------------------------------------------------------
    def set_state(self, sync_data: dict[str, Any]) -> None:
        # Remember that these changes come from the browser, so observers defer their refresh.
        self._frontend_depth += 1
        try:
            super().set_state(sync_data)
        finally:
            self._frontend_depth -= 1

    def _request_refresh(self) -> None:
        """Refresh now for changes made in Python; for browser changes, once the queue is drained.

        A refresh already waiting is replaced, so a burst of edits costs one model run on the
        latest state (the latest request wins, no backlog).
        """
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        loop = _running_loop() if self._frontend_depth else None
        if loop is None:
            self._run_refresh(raise_bugs=not self._frontend_depth)
        else:
            self._pending = loop.call_later(COALESCE_S, self._run_refresh)

    def _run_refresh(self, raise_bugs: bool = False) -> None:
        self._pending = None
        self.busy = True
        try:
            with self.hold_sync():
                self._refresh()
                self.refresh_count += 1
                self._clear_error("refresh")
        except (ValueError, TypeError) as exc:  # bad input: say so, keep the last good picture
            self._show_error(str(exc), "refresh")
        except Exception as exc:  # a bug: show it rather than leave a silent blank widget
            self._show_error(f"{type(exc).__name__}: {exc}", "refresh")
            if raise_bugs:
                raise
        finally:
            self.busy = False

    def _refresh(self) -> None:
        """Recompute the payload traits from the current inputs (subclasses implement it)."""
        raise NotImplementedError

    def _start(self, defer: bool) -> None:
        """First refresh: now, or (``defer`` inside a running event loop) just after.

        Deferred, the widget is displayed first and shows its progress note; the computation runs
        once the notebook cell has returned, so the kernel sends the picture when it is ready.
        """
        if not isinstance(defer, bool):
            raise TypeError(f"defer must be a bool; got {defer!r}")
        loop = _running_loop() if defer else None
        self._start_pending = loop is not None
        if loop is None:
            self._run_refresh(raise_bugs=True)
        else:
            self.busy = True
            loop.call_soon(self.finish_start)

    def finish_start(self) -> None:
        """Run a deferred first refresh now if it has not run yet (export does this itself)."""
        if self._start_pending:
            self._start_pending = False
            self._run_refresh()

    # ----- export ------------------------------------------------------------------------------
    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write one self-contained HTML file (bundle and data inlined, no CDN, no kernel needed).

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc")
            >>> w.save_html("/tmp/attention.html").name
            'attention.html'
        """
        from ._export import export_html

        return export_html([self], path, title=title)
