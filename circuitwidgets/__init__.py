"""circuitwidgets: live Jupyter widgets for mechanistic interpretability.

Example:
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> cw.analysis.copying_scores(model).shape
    torch.Size([2, 4])
"""

from __future__ import annotations

from typing import Any

from . import analysis, widgets
from .dictionary import Dictionary
from .model import HFView, ModelView, as_view
from .widgets import *  # noqa: F403  (every widget class, e.g. AttentionPattern)

__version__ = "0.1.0"  # the one place the version lives: pyproject.toml reads it (hatch)

__all__ = [  # noqa: F405
    "Checkpoints", "Dictionary", "HFView", "ModelView", "analysis", "as_view", "demo_checkpoints", "demo_dictionary",
    "demo_model", "widgets", *widgets.__all__,
]


def __getattr__(name: str) -> Any:
    # The demo model (weights, tokenizer) loads on first use only.
    if name == "demo_model":
        from .demo import demo_model

        return demo_model
    if name == "Checkpoints":  # models along training (circuitwidgets.analysis.checkpoints)
        return analysis.Checkpoints
    if name == "demo_checkpoints":
        from .demo.checkpoints import demo_checkpoints

        return demo_checkpoints
    if name == "demo_dictionary":
        from .demo.dictionary import demo_dictionary

        return demo_dictionary
    if name == "demo":  # cw.demo.model_card(), cw.demo.tiny_hf_model(...)
        import importlib

        return importlib.import_module(".demo", __name__)
    raise AttributeError(f"module 'circuitwidgets' has no attribute {name!r}")
