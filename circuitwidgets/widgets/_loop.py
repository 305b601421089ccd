"""Where and when a widget's work runs: on the kernel's loop, coalesced.

A notebook kernel handles widget messages on its event loop; a widget made there (`KernelLoop`)
handles every message on that loop, in order, even one that arrives on another thread. Work asked
for by the browser waits `COALESCE_S` so that a burst of messages (a slider dragged) costs one
run on the latest state (`KernelLoop._soon`).

Example:
    >>> import asyncio
    >>> running_loop() is None
    True
    >>> async def cell():
    ...     return running_loop() is not None
    >>> asyncio.run(cell())
    True
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import anywidget

from ._contract import described

#: Delay before a refresh asked for by the browser runs. Messages that queued up meanwhile (a user
#: typing, a slider dragged) are applied first and the refresh runs once, on the latest state.
COALESCE_S = 0.03


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running in this thread (a notebook kernel's), or None in a script."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class KernelLoop(anywidget.AnyWidget):
    """Mixed into `CircuitWidget`: messages handled on the kernel's loop, coalesced work."""

    _closed = False  # set by `close`: pending work is dropped

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._frontend_depth = 0  # > 0 while a browser update is being applied
        loop = running_loop()  # the kernel's loop (a notebook), where every message is handled: see `_handle_msg`
        self._home: tuple[asyncio.AbstractEventLoop, int] | None = (loop, threading.get_ident()) if loop else None
        self._timers: dict[str, asyncio.TimerHandle] = {}  # deferred work by kind; the latest of each wins
        super().__init__(*args, **kwargs)

    @property
    def _in_browser_update(self) -> bool:
        """True while a browser update is being applied (the work it asks for may wait: see `_soon`)."""
        return self._frontend_depth > 0

    def _elsewhere(self) -> asyncio.AbstractEventLoop | None:
        """The kernel loop the widget was made on, when called from another thread while that loop runs."""
        home = self._home
        if home is None or home[1] == threading.get_ident() or home[0].is_closed() or not home[0].is_running():
            return None
        return home[0]

    def _handle_msg(self, msg: dict) -> None:
        # JupyterLab 4.6 sends widget messages to a kernel subshell by default ("commsOverSubshells"),
        # which ipykernel 7 runs on a thread of its own: a message could then land in the middle of a
        # refresh on the kernel's thread, its change taken for one of the widget's own (see
        # `_quietly`) and never drawn. Every message is handled on the kernel's loop, in order.
        loop = self._elsewhere()
        if loop is not None:
            loop.call_soon_threadsafe(super()._handle_msg, msg)
        else:
            super()._handle_msg(msg)

    def set_state(self, sync_data: dict[str, Any]) -> None:
        self._frontend_depth += 1
        try:
            super().set_state(sync_data)
        finally:
            self._frontend_depth -= 1

    # ----- coalesced work on the kernel's loop ---------------------------------------------------
    def _soon(self, kind: str, work: Callable[[], None], *, defer: bool = True) -> None:
        """Run `work` now, or, for a browser update in a kernel (and `defer`), once the queue is drained.

        The latest `work` of each `kind` wins. Run later, a failure shows in the widget (under
        `kind`) rather than escaping into the event loop; run now, `work` shows its own.
        """
        home = self._elsewhere()
        if home is not None:  # (a change from another thread, e.g. a widget linked to this one: work on the kernel's)
            home.call_soon_threadsafe(self._soon, kind, work)
            return
        pending = self._timers.pop(kind, None)
        if pending is not None:
            pending.cancel()
        loop = running_loop() if self._in_browser_update and defer else None
        if loop is None:
            work()
        else:
            self._timers[kind] = loop.call_later(COALESCE_S, self._guarded, kind, work)

    def _guarded(self, kind: str, work: Callable[[], None]) -> None:
        self._timers.pop(kind, None)
        if self._closed:
            return
        try:
            work()
        except Exception as exc:
            self._show_error(described(exc), kind)

    def _computing(self) -> bool:
        """True while a run started by the last refresh goes on elsewhere (a long prompt on the worker thread)."""
        return False

    def close(self) -> None:
        """Close the widget: stop its pending work, so that it and its model can be freed."""
        self._closed = True
        timers, self._timers = getattr(self, "_timers", {}), {}  # none too when __init__ failed early
        for timer in timers.values():
            timer.cancel()
        super().close()
