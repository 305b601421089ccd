"""What every widget gets from `CircuitWidget`: registration, keywords, payloads, refresh."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.widgets import WIDGETS, CircuitWidget

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "circuitwidgets" / "widgets" / "static" / "widgets.js"


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


def build(cls, model):
    kwargs = {"prompt": "abcabc"} if cls in (cw.AttentionPattern, cw.LogitAttribution, cw.FeatureAttention) else {}
    if cls is cw.HeadAtlas:
        kwargs["texts"] = cw.analysis.repeated_random_tokens(model, seq_len=8, batch=4)
    if cls is cw.Training:
        return cls(cw.Checkpoints([cw.demo.boot(seed=1), model], steps=[0, 10]), layer=0, head=0)
    return cls(model, **kwargs)


def test_every_widget_registers_by_subclassing_and_is_exported():
    assert set(WIDGETS) == {
        "AttentionPattern", "OVCircuit", "QKCircuit", "CompositionDiagram", "HeadScores", "LogitAttribution", "SkipTrigrams",
        "Ablation", "Patching", "HeadAtlas", "Training", "FeatureAttention",
    }
    for name, cls in WIDGETS.items():
        assert getattr(cw, name) is cls and issubclass(cls, CircuitWidget)
        assert cls.view_name.isidentifier()
    assert len({cls.view_name for cls in WIDGETS.values()}) == len(WIDGETS)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node to import the bundle")
def test_every_view_name_has_a_view_in_the_bundle():
    script = f"import({json.dumps(BUNDLE.as_uri())}).then(m => console.log(JSON.stringify(Object.keys(m.VIEWS))))"
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60, check=True)
    views = set(json.loads(out.stdout))
    assert {cls.view_name for cls in WIDGETS.values()} <= views


def test_a_subclass_without_a_view_cannot_be_built(model):
    class Nameless(CircuitWidget):
        pass

    with pytest.raises(TypeError, match="names no view"):
        Nameless(model)
    assert "Nameless" not in WIDGETS


@pytest.mark.parametrize("cls", sorted(WIDGETS.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_a_mistyped_keyword_is_refused_with_a_suggestion(cls, model):
    with pytest.raises(TypeError, match="unexpected keyword argument 'haed'.*'head'"):
        cls(model, haed=1)
    with pytest.raises(TypeError, match="'_cw_view'"):
        cls(model, _cw_view="other")


def test_the_qk_typo_of_the_issue_is_refused(model):
    with pytest.raises(TypeError, match="'tokns'.*did you mean 'tokens'"):
        cw.QKCircuit(model, 0, 0, tokns=["a"])


@pytest.mark.parametrize("cls", sorted(WIDGETS.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_layer_and_head_are_validated_once_for_every_widget(cls, model):
    w = build(cls, model)
    with pytest.raises(traitlets.TraitError, match="head"):
        w.head = 4
    assert "head" in w.error
    w.head = 1  # a good value clears the message
    assert w.error == "" and w.head == 1
    with pytest.raises(traitlets.TraitError):
        w.layer = 2
    assert w.error and w.layer == 0
    assert w._cw_view == cls.view_name


@pytest.mark.parametrize("cls", sorted(WIDGETS.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_a_bad_value_from_the_browser_shows_in_the_widget(cls, model):
    """set_state (a browser update) rolls back a refused value; its message must still reach the widget."""
    w = build(cls, model)
    before = dict(w.get_state(["layer", "head"]))
    w.set_state({"head": 9})  # no exception into ipywidgets' message handler
    assert "head=9 is out of range" in w.error and w.head == before["head"]
    w.set_state({"layer": 1, "head": 9})  # one update, one refused value: all of it rolled back
    assert "head=9" in w.error and (w.layer, w.head) == (before["layer"], before["head"])
    w.set_state({"head": 1})
    assert w.error == "" and w.head == 1


@pytest.mark.parametrize("cls", sorted(WIDGETS.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_each_payload_is_one_trait_and_a_refresh_stamps_them_all(cls, model):
    w = build(cls, model)
    payloads = {name: value for name in w.keys if isinstance(value := getattr(w, name), dict) and "data" in value}
    assert payloads, "every widget sends at least one binary payload"
    for name, value in payloads.items():
        assert isinstance(value["data"], bytes) and value["dtype"] in ("uint8", "float32"), name
        assert value["revision"] <= w.revision
        transport.decode(value)  # bytes and shape agree
    before = w.revision
    w.refresh()
    assert w.revision == before + 1
    fresh = [n for n in payloads if getattr(w, n)["revision"] == w.revision]
    assert fresh, "a refresh resends its payloads with the new revision"


def test_refresh_recomputes_after_an_in_place_weight_edit():
    model = cw.demo_model()
    w = cw.OVCircuit(model, 1, 0, tokens=[2, 3, 4], accuracy=False)
    before = w.current_block().clone()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)  # every weight: the OV circuit changes whatever the model's layout
    w.refresh()
    now = cw.analysis.full_ov_block(model, 1, [2, 3, 4])[0]
    assert not torch.allclose(now, before)
    assert torch.allclose(w.current_block(), now)


@pytest.mark.parametrize("cls", sorted(WIDGETS.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_trait_docs_are_written_once_in_help_and_shown_in_the_docstring(cls):
    ours = [c for c in cls.__mro__ if c.__module__.startswith("circuitwidgets")]
    flat = " ".join(" ".join(c.__doc__ for c in ours).split())
    declared = {name for c in ours for name in vars(c) if not name.startswith("_")}
    for name, trait in cls.class_traits(sync=True).items():
        if name not in declared:  # ipywidgets' own (layout, tooltip, ...)
            continue
        assert trait.help, f"{cls.__name__}.{name} has no help"
        assert f"{name} (" in flat and " ".join(trait.help.split()) in flat, f"{cls.__name__}.{name}"
    assert flat.index("Traits (synced") < flat.rindex("Example:")
