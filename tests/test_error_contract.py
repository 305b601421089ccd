"""Issue 17, the error contract of every widget, for every synced trait a user or the browser can set.

A bad value, set from Python (``w.x = value``) or from the browser (``w.set_state({"x": value})``,
what the comm calls), shows a message naming the trait in the widget's ``error``, keeps the trait
and the picture (payload traits) as they were, and never escapes ``set_state``; from Python it
raises ``traitlets.TraitError`` (a request the widget answers, ``tile_request`` or ``typed``, may
just show it). A good value after it clears the message and redraws. Traits the widget computes
(payloads, ``info``, ``error``...) cannot be set at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import re
import weakref

import ipywidgets
import pytest
import torch
import traitlets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import circuitwidgets as cw
from circuitwidgets.widgets import _background
from circuitwidgets.widgets.base import WIDGETS, _traits_of

PROMPT = "abcabc"
CLASSES = sorted(WIDGETS.values(), key=lambda c: c.__name__)
WIDGETS_BUILT: dict = {}  # one widget per class for the property test, built on first use

#: Bad values of every kind: wrong types, None, out of range, huge, NaN, empty, nested junk.
JUNK = [
    None, 5, -1, 10**30, float("nan"), float("inf"), 1.5, True, "", "junk", "IPY_MODEL_none",
    [], [None], ["a", 1], [10**30], [[0, 0], [1, 9]], {}, {"a": [1, {"b": None}]}, {"query": -3},
]
#: The junk values that are good values of a trait (on the demo model, the widgets of `build`).
VALID = {
    "tooltip": ["", "junk", "IPY_MODEL_none"], "tabbable": [True, None], "prompt": ["junk", "IPY_MODEL_none"],
    "selection": [{}], "tile_request": [{}], "threshold": [-1], "position": [5, -1], "positions": [5],
    "k": [5], "n_sources": [5], "baseline": [True], "target": [5, None], "baseline_token": [5, None], "source": [5, None],
    "ablated": [[]], "prompt_index": [5], "by_position": [True], "normalised": [True], "example": [[]], "compact": [True],
    "cancel": [5], "cell": [{}],
}
#: A good value of each control (different from the one `build` gives), to clear a message and redraw.
GOOD = {
    "layer": 1, "head": 1, "head_controls": False, "prompt": "abab", "tokens": [2, 3, 4], "source": "tokens",
    "selection": {"query": 2, "key": 1, "locked": True}, "pool": "mean", "lod": False, "positions": 8,
    "kind": "Q", "threshold": 0.5, "baseline": True, "view": "matrix", "selected_pair": [[0, 1], [1, 2]],
    "term_tokens": [2, 3], "kinds": ["previous_token", "induction"], "position": 2, "target": 3,
    "baseline_token": 4, "target_text": "c", "baseline_text": "b", "show_prompt": False, "typed": "b", "k": 3,
    "n_sources": 4, "tooltip": "tip", "tabbable": False, "ablated": [[1, 0]], "prompt_index": 1, "metric": "logit_diff",
    "method": "zero", "site": "q", "by_position": True, "normalised": True, "x_metric": "entropy", "y_metric": "entropy",
    "color_metric": "entropy", "mode": "grid", "example_metric": "previous_token", "example": [0, 1],
    "color_scale": "log", "compact": True, "cancel": 1, "estimator": "atp*",
    "edge_value": "weights", "causal_layers": [0, 1],  # (built without prompts: the weight edges, the one layer pair)
    "cell": {"query": 4, "key": 2}, "panel": "ov",
    "scan_state": "done",  # (a complete scan's only state: an echo of the value held clears the message too)
    "step": 0, "x_scale": "log",
}
GOOD_OF = {  # same name, other trait
    ("SkipTrigrams", "source"): 3, ("HeadScores", "kind"): "previous_token", ("Patching", "method"): "attribution",
    ("Training", "metric"): "previous_token",
}


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


def build(cls, model):
    kwargs = {"prompt": PROMPT} if cls in (cw.AttentionPattern, cw.LogitAttribution) else {}
    if cls is cw.OVCircuit:
        kwargs["accuracy"] = False
    if cls is cw.Ablation:  # with a target, "logit_diff" is a good metric to switch to
        kwargs.update(target=5, n_boot=100)
    if cls is cw.HeadAtlas:
        kwargs["texts"] = cw.analysis.repeated_random_tokens(model, seq_len=8, batch=4)
    if cls is cw.Training:  # two checkpoints: a fresh model, then this one
        return cls(cw.Checkpoints([cw.demo.boot(seed=1), model], steps=[0, 10]), layer=0, head=0)
    if cls is cw.FeatureAttention:
        kwargs.update(prompt=PROMPT, dictionary=cw.demo_dictionary(), cell={"query": 5, "key": 3}, layer=0)
    return cls(model, **kwargs)


def payloads(w) -> dict:
    """The traits the widget computes (its picture), by identity: none may change on a refused value."""
    traits = _traits_of(type(w))
    return {n: getattr(w, n) for n in traits.ours if n not in traits.controls and n not in ("error", "busy")}


def user_traits(cls) -> list[str]:
    return sorted(n for n in cls.class_trait_names(sync=True) if not n.startswith("_"))


def attempt(w, name, value, how) -> None:
    """Set `name` the way a user (Python) or the browser does; only a TraitError may come out of Python."""
    if how == "browser":
        w.set_state({name: value})  # must never raise
    else:
        with contextlib.suppress(traitlets.TraitError):
            setattr(w, name, value)


def assert_refused(w, name, value, before, picture) -> None:
    assert w.error, f"{name}={value!r}: no message in the widget"
    assert name in w.error, f"{name}={value!r}: the message does not name the trait: {w.error!r}"
    if name not in ("tile_request", "error"):  # a request is kept and answered with a message
        assert getattr(w, name) == before or getattr(w, name) is before, f"{name}={value!r} was applied"
    assert all(getattr(w, n) is v for n, v in picture.items()), f"{name}={value!r} changed the picture"


def same(a, b) -> bool:
    return a is b or (type(a) is type(b) and a == b and not (isinstance(a, float) and math.isnan(a)))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_bad_value_of_every_trait_is_refused_and_shown(cls, model):
    w = build(cls, model)
    for name in user_traits(cls):
        for value in JUNK:
            w._set(error="")
            if same(value, getattr(w, name)) or any(same(value, v) for v in VALID.get(name, [])):
                continue  # a good value (or the one held: an echo, always harmless)
            for how in ("python", "browser"):
                w._set(error="", **({"tile_request": {}} if name == "tile_request" else {}))  # (a request is kept)
                before, picture = getattr(w, name), payloads(w)
                if how == "python" and name not in ("tile_request", "typed"):
                    with pytest.raises(traitlets.TraitError) as raised:
                        setattr(w, name, value)
                    assert str(raised.value) == w.error  # the same message both ways
                else:
                    attempt(w, name, value, how)
                assert_refused(w, name, value, before, picture)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_good_value_after_a_bad_one_clears_the_message_and_redraws(cls, model):
    w = build(cls, model)
    traits = _traits_of(cls)
    for name in sorted(traits.controls - {"tile_request"}) + ["tooltip"]:
        first = getattr(w, name)
        for how in ("python", "browser"):
            w._set(**{name: first})  # (quietly, as the widget itself: the good value below is a change)
            attempt(w, name, [[{"junk": float("nan")}]], how)
            assert name in w.error
            good, runs = GOOD_OF.get((cls.__name__, name), GOOD[name]), w.refresh_count
            attempt(w, name, good, how)
            assert w.error == "", (name, how, w.error)
            if name != "typed":  # (resolved into source, then cleared)
                assert getattr(w, name) == good, (name, how)
            if name in traits.inputs:
                assert w.refresh_count > runs, f"{name} is an input: a new value redraws"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_computed_traits_cannot_be_set_nor_passed(cls, model):
    w = build(cls, model)
    traits = _traits_of(cls)
    outputs = sorted(set(traits.ours) - traits.controls)
    assert {"error", "busy", "_cw_view"} <= set(outputs)
    for name in outputs:
        picture = payloads(w)
        value = getattr(w, name)
        other = {bool: lambda v: not v, str: lambda v: v + "x", float: lambda v: v + 1, list: lambda v: [*v, "x"]}.get(
            type(value), lambda v: {"x": 1})
        with pytest.raises(traitlets.TraitError, match=f"{name} is computed by the widget"):
            setattr(w, name, other(value))
        w.set_state({name: {"data": b"\x00"}})
        assert f"{name} is computed by the widget" in w.error
        assert all(getattr(w, n) is v for n, v in picture.items())
        if not name.startswith("_"):
            with pytest.raises(TypeError, match=f"{name!r}, which the widget computes"):
                cls(model, **{name: getattr(w, name)})


def test_controls_and_inputs_are_declared_once_per_class_and_every_input_is_a_control():
    for cls in CLASSES:
        traits = _traits_of(cls)
        assert set(traits.inputs) <= traits.controls <= set(traits.ours), cls.__name__
        assert {"layer", "head", "head_controls"} <= traits.controls


def test_a_widget_written_elsewhere_gets_the_contract_from_its_declarations(model):
    class Top(cw.CircuitWidget):
        """Copying scores of a layer's heads (a widget outside the package)."""

        view_name = "headscores"  # (not registered in WIDGETS: no view= here)
        controls = ("top",)
        inputs = ("layer", "top")
        top = traitlets.Int(2, help="heads listed").tag(sync=True)
        scores = traitlets.List(help="the top copying scores").tag(sync=True)

        def __init__(self, model, **kwargs):
            super().__init__(model, **kwargs)
            self._start()

        def _check_top(self, value):
            if not 1 <= value <= self.mv.n_heads:
                raise ValueError(f"top={value} is out of range: 1..{self.mv.n_heads}")
            return value

        def _refresh(self):
            self.scores = cw.analysis.copying_scores(self.mv)[self.layer].sort(descending=True).values[: self.top].tolist()

    w = Top(model)
    assert len(w.scores) == 2 and "Top" not in WIDGETS
    with pytest.raises(traitlets.TraitError, match="top=9 is out of range: 1..4"):
        w.top = 9
    w.set_state({"top": "3"})
    assert w.error == "top must be an int; got str '3'" and len(w.scores) == 2
    w.set_state({"scores": [1.0]})
    assert w.error == "scores is computed by the widget and cannot be set"
    w.top, w.layer = 3, 1  # inputs: each redraws
    assert w.error == "" and len(w.scores) == 3 and w.refresh_count == 3
    with pytest.raises(TypeError, match="lists 'nope' in controls"):
        type("Broken", (cw.CircuitWidget,), {"controls": ("nope",)})


# ----- the browser's updates: nothing escapes, a refused one is rolled back and resent ----------


def test_set_state_never_raises_and_a_refused_update_is_undone_and_sent_back(model, monkeypatch):
    w = cw.AttentionPattern(model, prompt=PROMPT)
    sent: list = []
    monkeypatch.setattr(w, "send_state", lambda key=None: sent.append(sorted(key)))
    for junk in (None, 5, "layer", [("layer", 1)], {("layer",): 1}, {"layer": 1, "head": 9}):
        before = (w.layer, w.head, w.patterns)
        w.set_state(junk)
        assert w.error and (w.layer, w.head, w.patterns) == before
    assert sent[-1] == ["head", "layer"]  # the browser's copy of both is put back
    w.set_state({"layer": 1, "head": 2, "unknown": 5})  # names the widget does not sync are ignored
    assert w.error == "" and (w.layer, w.head) == (1, 2) and w.patterns["layer"] == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_junk_from_the_browser_or_python_never_escapes(model, data):
    junk = st.recursive(
        st.none() | st.booleans() | st.integers() | st.integers(min_value=10**20) | st.floats() | st.text(max_size=4),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=6,
    )
    cls = data.draw(st.sampled_from(CLASSES))
    w = WIDGETS_BUILT.get(cls) or WIDGETS_BUILT.setdefault(cls, build(cls, model))
    name = data.draw(st.sampled_from(user_traits(cls)))
    value, how = data.draw(junk), data.draw(st.sampled_from(["python", "browser"]))
    before, picture = getattr(w, name), payloads(w)
    w._rejected = None
    attempt(w, name, value, how)  # a TraitError at most from Python, nothing from the browser
    if w._rejected is not None:  # refused (else a good value, or a request answered with a message)
        assert name in w.error and (name == "error" or getattr(w, name) == before)
        assert all(getattr(w, n) is v for n, v in picture.items())


# ----- the known failures of the issue ------------------------------------------------------------


def nan_weight(model) -> torch.Tensor:
    """Turn one query weight into NaN in place (as a bad optimiser step would); returns its old value."""
    weight = model.blocks[0].attn.W_Q.data
    index = (0,) * weight.dim()
    old = weight[index].clone()
    with torch.no_grad():
        weight[index] = float("nan")
    return old


@pytest.mark.parametrize("cls", [c for c in CLASSES if c.needs_model], ids=lambda c: c.__name__)  # (Training draws a scan)
def test_a_layer_change_after_a_weight_turned_nan_shows_why_and_keeps_the_picture(cls):
    model = cw.demo_model()
    w = build(cls, model)
    picture, old = payloads(w), nan_weight(model)
    with pytest.raises(traitlets.TraitError, match="NaN") as raised:
        w.layer = 1
    assert w.error == str(raised.value) and "layer=1" in w.error and w.layer == 0
    w._set(error="")
    w.set_state({"layer": 1})  # from the browser: nothing escapes
    assert "NaN" in w.error and w.layer == 0
    w.set_state({"head": 2})  # any browser event checks the model (the head switch draws nothing new)
    assert "NaN" in w.error
    w.refresh()  # an explicit refresh says so too
    assert "NaN" in w.error
    assert all(getattr(w, n) is v for n, v in picture.items())
    with torch.no_grad():
        model.blocks[0].attn.W_Q.data[(0,) * model.blocks[0].attn.W_Q.dim()] = old
    w.layer = 1  # repaired: a good value clears the message and redraws
    assert w.error == "" and w.layer == 1


def test_hostile_tile_requests_are_checked_and_never_escape(model):
    w = cw.AttentionPattern(model, prompt=PROMPT * 4)
    good = {"id": 1, "layer": 0, "head": 1, "row0": 0, "col0": 0, "rows": 8, "cols": 8, "step": 2,
            "revision": w.patterns["revision"]}
    w.tile_request = good
    answered = w.tile
    assert answered["id"] == 1 and w.error == ""
    hostile = [
        {"step": 10**30}, {"row0": 10**30}, {"rows": -5}, {"cols": 0}, {"head": -1}, {"head": 10**30}, {"step": 0},
        {"step": -2}, {"id": "x"}, {"id": None}, {"row0": 1.5}, {"row0": float("nan")}, {"head": True},
        {"revision": [1]}, {"extra": 1}, {"layer": 10**30, "revision": 10**30},
    ]
    for i, change in enumerate(hostile):
        request = {**good, "id": 10 + i, **change}
        for how in ("python", "browser"):
            attempt(w, "tile_request", request, how)
            assert w.error.startswith("tile_request"), (change, w.error)
            assert w.tile is answered, change
    missing = dict(good)
    del missing["step"]
    w.set_state({"tile_request": missing})
    assert "tile_request" in w.error and w.tile is answered
    w.tile_request = {**good, "id": 99}  # a good request clears the message and is answered
    assert w.error == "" and w.tile["id"] == 99


def test_a_closed_ovcircuit_stops_its_background_pass_and_is_freed():
    model = cw.demo_model()  # a fresh model: no top-k accuracy cached yet

    async def run() -> weakref.ref:
        w = cw.OVCircuit(model, 1, 3)
        assert "computing" in w.progress
        ref = weakref.ref(w)
        w.close()
        del w
        loop = asyncio.get_running_loop()
        for _ in range(3):  # passes that were resubmitted would run again here
            await loop.run_in_executor(None, _background.wait, 30)
            await asyncio.sleep(0.05)  # their results and progress reach the loop
        return ref

    ref = asyncio.run(run())
    gc.collect()
    assert ref() is None, "a closed OVCircuit must be freed once its background pass is dropped"


@pytest.mark.parametrize("cls", [cw.AttentionPattern, cw.LogitAttribution, cw.OVCircuit, cw.QKCircuit],
                         ids=lambda c: c.__name__)
def test_an_empty_token_list_is_called_empty(cls, model):
    w = build(cls, model)
    picture = payloads(w)
    with pytest.raises(traitlets.TraitError, match="tokens is empty"):
        w.tokens = []
    w.set_state({"tokens": []})
    assert w.error.startswith("tokens is empty") and all(getattr(w, n) is v for n, v in picture.items())


def test_messages_name_the_trait_and_the_value(model):
    w = cw.AttentionPattern(model, prompt=PROMPT)
    for name, value, message in (
        ("prompt", 5, "prompt must be a str; got int 5"),
        ("layer", 7, "layer=7 is out of range"),
        ("layer", "1", "layer must be an int; got str '1'"),
        ("head", True, "head must be an int; got bool True"),
        ("pool", "MAX", "pool must be one of 'max', 'mean'; got str 'MAX'"),
        ("tokens", [1, "a"], "tokens must be a list of ints; got list [1, 'a']"),
        ("selection", {"query": 99}, "selection query=99 is out of range"),
        ("layout", {"width": "1px"}, "layout must be a Layout; got dict"),
    ):
        with pytest.raises(traitlets.TraitError, match="^" + re.escape(message)):
            setattr(w, name, value)
        assert w.error.startswith(message)
    w.layout = ipywidgets.Layout(width="100px")  # ipywidgets' own traits keep working
    junk = list(range(1000))
    with pytest.raises(traitlets.TraitError) as raised:
        w.selection = {"query": junk}
    assert len(str(raised.value)) < 200  # a junk value is quoted short


def test_a_dashboard_child_refuses_a_bad_value_and_the_others_keep_theirs(model):
    dash = cw.Dashboard(model, prompt=PROMPT, circuits=False)
    before = [(c.layer, c.head) for c in dash.widgets]
    dash.head_scores.set_state({"layer": 5, "head": 1})  # a click in a browser that ran ahead
    assert "layer=5" in dash.head_scores.error and [(c.layer, c.head) for c in dash.widgets] == before
    with pytest.raises(traitlets.TraitError, match="head=9"):
        dash.attention.head = 9
    assert [(c.layer, c.head) for c in dash.widgets] == before
    dash.attention.head = 2  # linked: every child follows a good value
    assert all(c.head == 2 for c in dash.widgets) and dash.attention.error == ""
    dash.close()
