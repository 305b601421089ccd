"""`LongRuns`: a widget whose picture can take long to compute (a long prompt), with progress and Cancel in it.

Its refresh hands the long part to `LongRuns._compute`. Asked for by a cell or a script
(constructing the widget, ``w.layer = 5``), it runs at once, with a tqdm bar for long work (the
cell's progress bar in a notebook, stderr in a script), so that the next line reads the picture.
Asked for by the browser in a notebook kernel (a prompt edited in the widget, another layer), long
work runs as the widget's job on the worker thread (`_loop.Job`): the widget keeps answering, shows
the run's steps in ``progress`` ("layer 5 of 12, block 40 of 256", from `circuitwidgets.progress`)
and fills in when done. Cancel (``cancel``, raised by one) stops the run at its next step and says
so, keeping the picture before; a newer input or closing the widget stops it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import traitlets

from .. import progress as progress_of
from ._contract import described
from ._loop import Job, in_kernel
from .base import CircuitWidget


class LongRuns(CircuitWidget):
    """Base of a widget whose picture can take long: `_compute` runs it now or as a job, with progress and Cancel."""

    controls: ClassVar[tuple[str, ...]] = ("cancel",)
    #: The payload trait of the picture (a cancelled run says whether a picture of the input before is on screen).
    picture_trait: ClassVar[str] = ""

    progress = traitlets.Dict(
        help="a long prompt's run in a kernel: {running, text ('layer 5 of 12, block 40 of 256'), fraction}; {} when idle"
    ).tag(sync=True)
    cancel = traitlets.Int(
        0, help="raised by one (the Cancel button) to stop the long run going on: it stops within one block"
    ).tag(sync=True)

    def _compute(self, what: str, compute: Callable[[], Any], show: Callable[[Any], None], *, long: bool) -> None:
        """``show(compute())``: now (a tqdm bar when `long`), or for long work the browser asked for in a kernel, as a job.

        `what` names the run in the bar and in a cancelled run's message ("layer 5 of 8192 tokens").
        """
        if self._drop_job() is not None:  # superseded: it stops at its next step
            self._set(progress={})
        if not (long and self._for_browser and in_kernel() is not None):
            with progress_of.console(f"{type(self).__name__}: {what}", enabled=long):
                result = compute()
            show(result)
            return
        self._set(progress={"running": True, "text": "", "fraction": 0.0})
        self._run_job(what, lambda job: self._reporting(job, compute), lambda job: self._computed(job, show))

    def _reporting(self, job: Job, compute: Callable[[], Any]) -> Any:
        """``compute()`` on the worker thread, its steps shown in ``progress``; a step stops it once the job is unwanted."""
        stages = progress_of.Stages()

        def on_step(stage: str, done: int, total: int) -> None:
            stages(stage, done, total)
            if job.due():  # (raises Superseded once the job is not wanted: cancelled, a newer input, closed)
                job.show(self._show_progress, stages.text, stages.fraction)

        with progress_of.reporting(on_step):
            return compute()

    def _show_progress(self, text: str, fraction: float) -> None:
        self._set(progress={"running": True, "text": text, "fraction": round(fraction, 3)})

    def _computed(self, job: Job, show: Callable[[Any], None]) -> None:
        """The end of a long run, on the kernel's loop: its picture, its error, or that it was cancelled."""
        try:
            with self.hold_sync(), self._quietly():
                if job.cancelled:
                    drawn = getattr(self, self.picture_trait).get("data")
                    before = "the picture below is of the input before" if drawn else "nothing is drawn yet"
                    self._show_error(f"cancelled: {job.what} was not computed; {before} "
                                     "(refresh() or change an input to compute it)", "refresh")
                elif job.error is not None:
                    self._show_error(described(job.error), "refresh")
                else:
                    show(job.result)
                    self._clear_error("refresh")
        except Exception as exc:  # (show failed: say so, as a refresh does)
            self._show_error(described(exc), "refresh")
        finally:
            self._set(progress={}, busy=False)

    def _check_cancel(self, value: int) -> int:
        if not 0 <= value < 2**31:
            raise ValueError(f"cancel counts the presses of Cancel: an int from 0; got {value}")
        return value

    @traitlets.observe("cancel")
    def _on_cancel(self, change: dict) -> None:
        self._drop_job(cancelled=True)  # (its next step raises Superseded; it then says that it was cancelled)

    def _on_input(self, change: dict) -> None:
        # A long run of the inputs before is not wanted any more (its refresh comes after a coalescing
        # wait: the old run's picture must not land in between, under the new input).
        if self._drop_job() is not None:
            self._set(progress={})
        super()._on_input(change)

    def _prepare_export(self) -> None:
        super()._prepare_export()
        self._wait_job()  # a long run still going: the page gets its picture
