"""The model's `ModelView`, checked once per kernel message (`circuitwidgets.model.current_view`)."""

from __future__ import annotations

from ..model import current_view

__all__ = ["current_view"]
