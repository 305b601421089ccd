"""Where and when a widget's work runs: on the kernel's loop, coalesced, or as a long job on the worker thread.

A notebook kernel handles widget messages on its event loop; a widget made there (`KernelLoop`)
handles every message on that loop, in order, even one that arrives on another thread. Work asked
for by the browser waits `COALESCE_S` so that a burst of messages (a slider dragged) costs one
run on the latest state (`KernelLoop._soon`). Work that takes long runs as the widget's `Job` on
the one worker thread (`_background`): the widget keeps answering, shows the job's progress, and
the latest job wins (a newer one, Cancel or closing the widget stops the old one at its next step).

Example:
    >>> import asyncio
    >>> running_loop() is None
    True
    >>> async def cell():
    ...     return running_loop() is not None, in_kernel()  # an asyncio loop, but no notebook kernel's
    >>> asyncio.run(cell())
    (True, None)
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import anywidget

from . import _background
from ._contract import described

#: Delay before a refresh asked for by the browser runs. Messages that queued up meanwhile (a user
#: typing, a slider dragged) are applied first and the refresh runs once, on the latest state.
COALESCE_S = 0.03
#: Seconds between two progress messages of a long job.
PROGRESS_S = 0.2


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running in this thread (a notebook kernel's), or None in a script."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def in_kernel() -> Any:
    """The running loop of a notebook kernel (an IPython kernel's), where a long run can go on while the kernel
    answers the browser; None elsewhere (a script, or another library's loop: Playwright's sync API runs one)."""
    loop = running_loop()
    if loop is None:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return loop if shell is not None and getattr(shell, "kernel", None) is not None else None


class Job:
    """One long run of a widget on the worker thread; the widget's current job is the only one wanted.

    On the worker, the run calls `due` between two pieces of work: it raises `_background.Superseded`
    once the job is not wanted (a newer job, Cancel, the widget closed), and says when a progress
    message is due (at most every `every_s`), which `show` hands to the kernel's loop. The run's
    `result` or `error` is kept on the job, so that a caller blocking the loop can finish it.
    """

    def __init__(self, what: str, wanted: Callable[[Job], bool], loop: asyncio.AbstractEventLoop, *, busy: bool,
                 every_s: float) -> None:
        self.what = what  # what it computes, in words ("layer 5 of 8192 tokens")
        self.busy = busy  # the widget shows itself busy while the job runs (a picture is computing)
        self.cancelled = False  # stopped by the user: it says so when it ends
        self.result: Any = None
        self.error: BaseException | None = None
        self.finish: Callable[[Job], None] | None = None  # what the widget does with it, on the kernel's loop (once)
        self._wanted, self._loop, self._every_s, self._shown_at = wanted, loop, every_s, 0.0

    def wanted(self) -> bool:
        return self._wanted(self)

    def due(self) -> bool:
        """On the worker: raise `_background.Superseded` once unwanted; else True when a progress message is due."""
        if not self.wanted():
            raise _background.Superseded
        now = time.monotonic()
        if now - self._shown_at < self._every_s:
            return False
        self._shown_at = now
        return True

    def show(self, step: Callable[..., None], *args: Any) -> None:
        """On the worker: ``step(*args)`` on the kernel's loop, if the job is still wanted then."""
        self._loop.call_soon_threadsafe(self._show_if_wanted, step, args)

    def _show_if_wanted(self, step: Callable[..., None], args: tuple) -> None:
        if self.wanted():
            step(*args)


def interactive() -> bool:
    """False while a kernel runs a cell for a client that no one watches: nbconvert ``--execute``, nbclient, papermill,
    voila (they ask with ``allow_stdin`` false; JupyterLab, Notebook, VS Code and Colab with true). True elsewhere."""
    kernelbase = sys.modules.get("ipykernel.kernelbase")
    if kernelbase is None or not kernelbase.Kernel.initialized():
        return True
    parent = kernelbase.Kernel.instance().get_parent("shell") or {}
    if (parent.get("header") or {}).get("msg_type") != "execute_request":
        return True
    return bool((parent.get("content") or {}).get("allow_stdin", True))


#: The widgets made in this process (weakly): what `_finish_after_cell` completes.
_MADE: weakref.WeakSet[KernelLoop] = weakref.WeakSet()
_HOOKED: list[bool] = []


def _finish_after_cell(*result: Any) -> None:
    """At the end of a cell run for no one watching (`interactive` false), every widget completes its pending work
    (`finish`): what the client saves with the notebook is the finished picture, never "computing"."""
    if interactive():
        return
    for _pass in range(3):  # (finishing one may start another's work: a linked view)
        pending = [w for w in list(_MADE) if not w._closed and w._pending()]
        if not pending:
            return
        for widget in pending:
            try:
                widget.finish()
            except Exception as exc:  # shown in the widget, as any failure of its work
                widget._show_error(described(exc), "finish")


def _hook_cell_end() -> None:
    """Register `_finish_after_cell` with IPython once (in a kernel)."""
    if _HOOKED:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        shell.events.register("post_run_cell", _finish_after_cell)
        _HOOKED.append(True)


class KernelLoop(anywidget.AnyWidget):
    """Mixed into `CircuitWidget`: messages handled on the kernel's loop, coalesced work, long jobs."""

    _closed = False  # set by `close`: pending work and jobs are dropped
    _job: Job | None = None  # the long job going on on the worker thread

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._frontend_depth = 0  # > 0 while a browser update is being applied
        loop = running_loop()  # the kernel's loop (a notebook), where every message is handled: see `_handle_msg`
        self._home: tuple[asyncio.AbstractEventLoop, int] | None = (loop, threading.get_ident()) if loop else None
        self._timers: dict[str, asyncio.TimerHandle] = {}  # deferred work by kind; the latest of each wins
        self._waiting: dict[str, Callable[[], None]] = {}  # that work, by kind (`finish` runs it at once)
        super().__init__(*args, **kwargs)
        _MADE.add(self)
        if loop is not None:
            _hook_cell_end()

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
            self._waiting[kind] = work

    def _guarded(self, kind: str, work: Callable[[], None]) -> None:
        self._timers.pop(kind, None)
        self._waiting.pop(kind, None)
        if self._closed:
            return
        try:
            work()
        except Exception as exc:
            self._show_error(described(exc), kind)

    # ----- long jobs on the worker thread --------------------------------------------------------
    def _run_job(
        self, what: str, work: Callable[[Job], Any], finish: Callable[[Job], None], *, busy: bool = True,
        every_s: float | None = None,
    ) -> Job:
        """Run ``work(job)`` on the worker thread as this widget's job (a job still running is superseded).

        `finish(job)` runs on the kernel's loop once the job has ended (its `result` or `error` set),
        unless a newer job or closing the widget dropped it; a cancelled job is finished too (it
        says so), unless a newer job has started since. Progress is shown at most every `every_s`
        (default `PROGRESS_S`). Needs a running loop.
        """
        loop = running_loop()
        if loop is None:
            raise RuntimeError("a long job needs the kernel's running loop")
        every_s = PROGRESS_S if every_s is None else every_s
        job = self._job = Job(what, lambda job: job is self._job and not self._closed, loop, busy=busy, every_s=every_s)
        job.finish = finish

        def run(report: Callable[[int, int], None]) -> Any:
            try:
                job.result = work(job)
            except BaseException as exc:  # kept for `_wait_job`, which may finish the job before `_ended` runs
                job.error = exc
                raise
            return job.result

        _background.submit(loop, run, wanted=job.wanted, on_progress=lambda percent: None,
                           on_done=lambda result, error: self._ended(job, error))
        return job

    def _ended(self, job: Job, error: BaseException | None = None) -> None:
        """The end of `job`, on the kernel's loop: finished, or dropped (superseded, closed, already finished)."""
        job.error = job.error or error  # (superseded before it began: it never ran)
        current = job is self._job
        finish = job.finish
        if self._closed or not (current or (job.cancelled and self._job is None)) or finish is None:
            return
        self._job, job.finish = None, None  # (finished once)
        finish(job)

    def _drop_job(self, *, cancelled: bool = False) -> Job | None:
        """Stop the job going on (at its next step): superseded, or `cancelled` by the user; returns it."""
        job, self._job = self._job, None
        if job is not None:
            job.cancelled = cancelled
        return job

    def _wait_job(self, timeout: float | None = None) -> None:
        """Block until the job going on has ended, and finish it here (the kernel's loop, which this blocks, cannot)."""
        while self._job is not None and not self._closed:
            job = self._job
            _background.wait(timeout)
            self._ended(job)  # (`finish` may start another job: waited for too)

    def _pending(self) -> bool:
        """True while work the picture waits for is pending: a job, or (see subclasses) a deferred first refresh."""
        return self._job is not None or bool(self._timers)

    def finish(self) -> KernelLoop:
        """Complete the pending work now (a long job: waited for here); returns the widget. Run by itself at the end of
        a cell executed for no one (nbconvert ``--execute``), so that the notebook saved holds the finished picture.

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abab")
            >>> w.finish() is w, w.busy
            (True, False)
        """
        for kind, timer in list(self._timers.items()):  # coalesced work waiting on the loop: now
            timer.cancel()
            self._guarded(kind, self._waiting[kind])
        self._wait_job()
        return self

    def _computing(self) -> bool:
        """True while a job that computes the picture goes on (the widget shows itself busy)."""
        return self._job is not None and self._job.busy

    def close(self) -> None:
        """Close the widget: stop its pending work and its job, so that it and its model can be freed."""
        self._closed = True
        timers, self._timers = getattr(self, "_timers", {}), {}  # none too when __init__ failed early
        for timer in timers.values():
            timer.cancel()
        super().close()
