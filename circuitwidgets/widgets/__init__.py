"""Jupyter widgets over `circuitwidgets.analysis`; all draw with one bundle in `static/`.

Each widget class lives in its own module and is imported on first use (importing `anywidget`
and the bundle is not free). Register a new widget by adding its class name and module here.
"""

from __future__ import annotations

import importlib
from typing import Any

_WIDGETS = {
    "CircuitWidget": "base",
    "AttentionPattern": "attention",
    "OVCircuit": "ov",
    "QKCircuit": "qk",
    "CompositionDiagram": "composition",
    "HeadScores": "headscores",
    "Dashboard": "dashboard",
}

__all__ = sorted(_WIDGETS)


def __getattr__(name: str) -> Any:
    if name not in _WIDGETS:
        raise AttributeError(f"module 'circuitwidgets.widgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WIDGETS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
