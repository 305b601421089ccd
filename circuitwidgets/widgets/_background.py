"""Long passes (OV top-k over the vocabulary, a widget's `_loop.Job`) on one worker thread, dropped when no longer wanted.

The pass starts `SETTLE_S` after it is asked for and checks `wanted()` at every progress report,
so stepping through heads (arrow keys, a linked dashboard) draws at once and only the head the
user stays on is computed. Results and progress come back on the kernel's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

#: Seconds a pass waits before starting, so a head shown only briefly is never computed.
SETTLE_S = 0.3

# One worker for every widget: the passes are CPU-bound, running two at once gains nothing.
_WORKER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="circuitwidgets")


class Superseded(Exception):
    """Raised inside a pass whose result is no longer wanted."""


def submit(
    loop: asyncio.AbstractEventLoop,
    work: Callable[[Callable[[int, int], None]], Any],
    *,
    wanted: Callable[[], bool],
    on_progress: Callable[[int], None],
    on_done: Callable[[Any, BaseException | None], None],
) -> None:
    """Run ``work(report)`` on the worker; ``report(done, total)`` raises `Superseded` once unwanted.

    `on_progress(percent)` runs on `loop` every 5 %; `on_done(result, error)` runs on `loop` at the
    end, with ``error`` a `Superseded` when the pass was dropped.
    """
    reported = 0

    def check() -> None:
        if not wanted():
            raise Superseded

    def report(done: int, total: int) -> None:
        nonlocal reported
        check()
        percent = 100 * done // max(total, 1)
        if percent >= reported + 5:  # a trait message every 5 %, not every chunk
            reported = percent
            loop.call_soon_threadsafe(on_progress, percent)

    def job() -> Any:
        time.sleep(SETTLE_S)
        check()
        return work(report)

    def done(future: concurrent.futures.Future) -> None:
        error = future.exception()
        loop.call_soon_threadsafe(on_done, None if error else future.result(), error)

    _WORKER.submit(job).add_done_callback(done)


def wait(timeout: float | None = None) -> None:
    """Block until every pass submitted so far has finished."""
    _WORKER.submit(lambda: None).result(timeout)
