"""A widget whose picture is a scan filled in the background: HeadAtlas (texts), Training (checkpoints).

One state machine for both: the ``scan_state`` trait ("running", "stopped", "done"); Stop lets the
worker end before its next piece, Resume goes on from there; the picture follows the scan at most
every `PUBLISH_S` while it runs; `wait()` finishes the scan here; an error stops the scan and says
after how many pieces. Without the kernel's running loop (a script, ``defer=False``) it scans at once.

The widget says what to scan and how to show it:
  ``_scan``                          the scan being filled (``.complete``, ``.n_done``)
  ``_scan_rest(progress, stop)``     scan what is left (on the worker thread, or here)
  ``_scan_total()``, ``SCAN_UNIT``   how many pieces in all, and what a piece is ("texts")
  ``_scan_snapshot()``               on the worker, between two pieces: what the picture needs (a tuple)
  ``_show_scan(*snapshot)``          on the kernel's loop: show it
  ``_scan_ended()``                  on the kernel's loop, once the scan stops or ends
"""

from __future__ import annotations

from typing import Any

import traitlets

from . import _background
from ._loop import Job, running_loop
from .base import CircuitWidget, described

#: While scanning, the picture is resent at most this often (seconds): it fills in, the comm is not flooded.
PUBLISH_S = 0.5


class ScanningWidget(CircuitWidget):
    """A widget drawing a scan filled in the background; a subclass has the ``scan_state`` and ``progress``
    traits and says what to scan and how to show it (see the module)."""

    SCAN_UNIT = "pieces"
    _scan: Any
    scan_state: str

    def _scan_rest(self, progress: Any, stop: Any) -> Any:
        raise NotImplementedError

    def _scan_total(self) -> int:
        raise NotImplementedError

    def _scan_snapshot(self) -> tuple:
        return ()

    def _show_scan(self, *snapshot: Any) -> None:
        raise NotImplementedError

    def _progress(self, running: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def _scan_ended(self) -> None:
        self._show_scan(*self._scan_snapshot())

    # ----- the state machine -----------------------------------------------------------------------
    def _stopping(self) -> bool:
        return self._closed or self.scan_state != "running"

    def _scan_now(self) -> None:
        """Scan what is left, here and now (a script, or ``defer=False``)."""
        self._set(scan_state="running", progress=self._progress(running=True))
        try:
            self._scan_rest(False, None)
        finally:
            self._set(scan_state="done" if self._scan.complete else "stopped", progress=self._progress())

    def _submit(self) -> None:
        """Scan what is left as the widget's job on the worker thread; the picture follows every `PUBLISH_S`."""
        self._set(progress=self._progress(running=True))

        def work(job: Job) -> Any:
            def progress(done: int, total: int) -> None:
                if job.due():  # (raises Superseded once unwanted) between two pieces: the scan is consistent here
                    job.show(self._show_scan, *self._scan_snapshot())

            return self._scan_rest(progress, self._stopping)

        self._run_job("the scan", work, self._finished, busy=False, every_s=PUBLISH_S)

    def _finished(self, job: Job) -> None:
        scan, error = self._scan, job.error
        if error is not None and not isinstance(error, _background.Superseded):
            self._set(scan_state="stopped")
            stopped = f"the scan stopped after {scan.n_done} of {self._scan_total()} {self.SCAN_UNIT}: {described(error)}"
            self._show_error(stopped, "scan")
        elif not scan.complete and self.scan_state == "running":  # resumed while the job was stopping
            if running_loop() is not None:
                self._submit()
                return
        else:
            self._set(scan_state="done" if scan.complete else "stopped")
        self._scan_ended()

    @traitlets.observe("scan_state")
    def _on_scan_state(self, change: dict) -> None:
        """"running" set by the user (Resume) starts the scan."""
        if not self._live or change["new"] != "running" or self._job is not None:
            return  # ("stopped": the worker sees it before its next piece)
        self._clear_error("scan")
        if running_loop() is None:
            self._scan_now()
            self._scan_ended()
        else:
            self._submit()

    def _start_scan(self, loop: Any) -> None:
        """After construction: scan on the worker when the kernel's loop runs (the constructor scanned otherwise)."""
        if loop is not None:
            self._set(scan_state="running")
            self._submit()

    def _wait_scan(self, timeout: float | None) -> None:
        """Block until the background scan has finished (or stopped) and show it (a subclass's `wait`)."""
        self.finish_start()
        self._wait_job(timeout)  # (may resubmit: resumed while it was stopping)
