"""Jupyter widgets over `circuitwidgets.analysis`; all draw with one bundle in `static/`.

A widget registers itself by subclassing `CircuitWidget` with ``view="name"`` (the JS view in
``js/views/name.js`` that draws it). Every public module of this package is imported here, so a
new widget module needs no entry in any list: its class appears as ``circuitwidgets.ClassName``.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import WIDGETS, CircuitWidget

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

from .dashboard import Dashboard  # noqa: E402  (after the widgets it composes registered)

globals().update(WIDGETS)
__all__ = ["CircuitWidget", "Dashboard", "WIDGETS", *sorted(WIDGETS)]

# Widgets drawn from data given (no model) are not in WIDGETS, whose widgets all run on a model.
from .tokens import ColoredTokens  # noqa: E402

__all__ += ["ColoredTokens"]
