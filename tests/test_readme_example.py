"""The README's "Adding a widget" example runs as written: it draws what the analysis computes,
redraws on its inputs and keeps the error contract."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import analysis, transport
from circuitwidgets.widgets.base import WIDGETS, CircuitWidget

README = Path(__file__).resolve().parents[1] / "README.md"


def example_code() -> str:
    section = README.read_text(encoding="utf-8").split("### Adding a widget", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def top(scores: torch.Tensor, k: int) -> torch.Tensor:
    return scores.sort(descending=True).values[:k]


def test_the_adding_a_widget_example_runs_as_written():
    namespace = {"CircuitWidget": CircuitWidget, "traitlets": traitlets, "analysis": analysis}
    model = cw.demo_model()
    scores = analysis.copying_scores(model)
    try:
        exec(compile(example_code(), "README.md", "exec"), namespace)  # the README's own code
        widget = namespace["MyView"](model, layer=1)
        assert widget.error == "" and WIDGETS["MyView"] is namespace["MyView"] and cw.widgets.base.WIDGETS
        assert torch.allclose(torch.as_tensor(transport.decode(widget.scores)), top(scores[1], 4), atol=1e-6)
        widget.layer, widget.top = 0, 2  # inputs: each redraws
        assert torch.allclose(torch.as_tensor(transport.decode(widget.scores)), top(scores[0], 2), atol=1e-6)
        drawn = widget.scores
        with pytest.raises(traitlets.TraitError, match="top=9 is out of range"):
            widget.top = 9
        assert "top=9" in widget.error and widget.scores is drawn  # shown in the widget, the picture kept
        widget.set_state({"top": 0})  # from the browser: shown, never raised
        assert "top=0" in widget.error and widget.top == 2
        with pytest.raises(traitlets.TraitError):
            widget.scores = {}  # computed: read-only
    finally:
        WIDGETS.pop("MyView", None)  # other tests check that every registered view has its JS file
