"""The model's `ModelView`, checked for changes once per kernel message rather than once per call.

`as_view` reads every weight to notice edits (27 ms on GPT-2 small). One user action in a notebook
(a layer picked in a `Dashboard`: five widgets refresh) would pay it once per widget and per
validator. In a kernel, a model changes only while user code runs, and user code runs inside an
execute request, a new message: so a view checked while handling one message stays good for the
rest of that message's work, including the refreshes it schedules. Outside a kernel (scripts,
marimo, tests) every call checks.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from typing import Any

from ..model import ModelView, as_view

_CHECKED: weakref.WeakKeyDictionary[Any, tuple[str, ModelView]] = weakref.WeakKeyDictionary()


def _message_id() -> str | None:
    """The id of the kernel message being handled (or last handled), None outside a kernel."""
    kernelbase = sys.modules.get("ipykernel.kernelbase")
    if kernelbase is None or not kernelbase.Kernel.initialized():
        return None
    header = kernelbase.Kernel.instance().get_parent("shell").get("header") or {}
    return header.get("msg_id")


def current_view(model: Any) -> ModelView:
    """`as_view(model)`, reusing the view already checked while handling the current kernel message.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> current_view(model) is cw.as_view(model)  # no kernel here: checked on every call
        True
    """
    message = _message_id()
    try:
        seen = _CHECKED.get(model) if message else None
    except TypeError:  # not weakly referenceable
        seen = None
    if seen is not None and seen[0] == message:
        return seen[1]
    view = as_view(model)
    if message:
        with contextlib.suppress(TypeError):
            _CHECKED[model] = (message, view)
    return view
