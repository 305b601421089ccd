"""circuitwidgets: live Jupyter widgets for mechanistic interpretability.

Example:
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> cw.analysis.copying_scores(model).shape
    torch.Size([2, 4])
"""

from __future__ import annotations

import importlib
from typing import Any

from . import analysis
from .model import ModelView, as_view

__version__ = "0.1.0"

# Imported on first use so that `import circuitwidgets` stays light for library use.
_LAZY = {
    "demo_model": ".demo",
    "AttentionPattern": ".widgets",
    "OVCircuit": ".widgets",
    "QKCircuit": ".widgets",
    "CompositionDiagram": ".widgets",
    "HeadScores": ".widgets",
    "Dashboard": ".widgets",
}

__all__ = ["ModelView", "analysis", "as_view", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'circuitwidgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value
