"""Progress of long runs, told from the loops that do the work to whoever shows it, and a way to stop them.

The loops (the layers of a memory-efficient run, the row blocks of a rebuild) call `tick`; a
widget or a script wraps the run in `reporting(report)`, and ``report(stage, done, total)`` sees
each step. A report that raises (`Cancelled`, or a superseded widget run) stops the run at that
step: within one block. With no reporter, `tick` costs a lookup.

Example:
    >>> steps = []
    >>> with reporting(lambda stage, done, total: steps.append((stage, done, total))):
    ...     for block in range(3):
    ...         tick("block", block + 1, 3)
    >>> steps[-1]
    ('block', 3, 3)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

Report = Callable[[str, int, int], None]
#: Seconds of work before a console bar shows (`console`): quick runs print nothing.
DELAY_S = 1.0
#: Seconds between two redraws of a console bar.
REFRESH_S = 0.1

_local = threading.local()  # (per thread: a widget's run on the worker thread reports to its own widget)


class Cancelled(Exception):
    """Raised by a report to stop the run it watches (the user pressed cancel)."""


@contextlib.contextmanager
def reporting(report: Report | None) -> Iterator[None]:
    """Inside, `tick` hands every step of this thread's runs to `report` (None: to no one)."""
    previous = getattr(_local, "report", None)
    _local.report = report
    try:
        yield
    finally:
        _local.report = previous


def current() -> Report | None:
    """This thread's reporter (to hand to work that runs on another thread, e.g. inside a local nnsight trace)."""
    return getattr(_local, "report", None)


def tick(stage: str, done: int, total: int) -> None:
    """Step `done` of `total` of `stage` ("layer", "block", ...) is done; the reporter may raise to stop the run."""
    report = getattr(_local, "report", None)
    if report is not None:
        report(stage, done, total)


class Stages:
    """The latest step of each stage as one line: ``"layer 5 of 12, block 40 of 256"``.

    Example:
        >>> s = Stages()
        >>> s("layer", 5, 12); s("block", 40, 256)
        >>> s.text, s.fraction
        ('layer 5 of 12, block 40 of 256', 0.15625)
    """

    def __init__(self) -> None:
        self.steps: dict[str, tuple[int, int]] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage == "layer":  # a new layer: its blocks start over
            self.steps = {}
        self.steps[stage] = (done, total)

    @property
    def text(self) -> str:
        return ", ".join(f"{stage} {done} of {total}" for stage, (done, total) in self.steps.items())

    @property
    def fraction(self) -> float:
        """How far the latest stage is (0 to 1)."""
        if not self.steps:
            return 0.0
        done, total = list(self.steps.values())[-1]
        return done / max(1, total)


@contextlib.contextmanager
def console(label: str, *, enabled: bool = True) -> Iterator[None]:
    """A tqdm bar on stderr for the runs inside (a script, or a notebook with no widget), with the stage as its text."""
    if not enabled:
        yield
        return
    from tqdm.auto import tqdm

    stages = Stages()
    # (shown only for work that takes a while: `delay`; gone when done: `leave=False`)
    bar: Any = tqdm(total=1000, desc=label, leave=False, delay=DELAY_S, mininterval=REFRESH_S,
                    bar_format="{desc} {percentage:3.0f}%|{bar}|")

    def report(stage: str, done: int, total: int) -> None:
        stages(stage, done, total)
        bar.set_description_str(f"{label}: {stages.text}", refresh=False)
        bar.update(int(1000 * stages.fraction) - bar.n)

    try:
        with reporting(report):
            yield
    finally:
        bar.close()
