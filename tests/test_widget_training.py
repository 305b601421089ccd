"""`Training` without a browser: its payloads against the scan, its controls, the step models it hands to linked
widgets, the background scan with Stop/Resume, a saved scan, and the exported page (the curves, and the note that
the step models need the kernel)."""

from __future__ import annotations

import asyncio
import base64
import json
import re

import pytest
import torch
import traitlets
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import checkpoints as along
from circuitwidgets.analysis.checkpoints import Checkpoints, CheckpointScan
from circuitwidgets.widgets.training import KERNEL_NOTE, Training

METRICS = ["previous_token", "induction", "composition_k", "loss", "in_context_loss"]


@pytest.fixture(scope="module")
def ck():
    """Three steps of the demo run: the initialisation, one before the phase change and the shipped model."""
    run = cw.demo_checkpoints(keep=3)
    return Checkpoints(load=run.at, steps=[run.steps[0], run.steps[13], run.steps[-1]], keep=3)


@pytest.fixture(scope="module")
def scan(ck):
    return along.scan_checkpoints(ck, metrics=METRICS, progress=False)


@pytest.fixture
def widget(ck, scan):
    return Training(ck, scan=scan)


def test_the_payloads_are_the_scans(widget, scan):
    assert widget.error == "" and widget.scan_state == "done" and widget.metric == "induction"
    assert torch.equal(transport.decode(widget.curves), scan.values["induction"])
    assert widget.curves["steps"] == list(scan.steps) and widget.curves["layers"] == [0, 1] and widget.curves["n_heads"] == 4
    assert widget.curves["window"] == list(scan.phase_change("induction"))
    assert widget.curves["metrics"] == ["previous_token", "induction", "composition_k"]
    assert widget.losses["names"] == ["loss", "in_context_loss"]
    assert torch.equal(transport.decode(widget.losses), torch.stack([scan.values["loss"], scan.values["in_context_loss"]]))
    assert widget.losses["windows"]["in_context_loss"] == list(scan.phase_change("in_context_loss"))
    assert "tokens 47..50 minus" in widget.losses["descriptions"]["in_context_loss"]
    # the strongest head at the last step is selected, the last step too; steps spanning decades: a log axis
    final = scan.values["induction"][-1]
    assert (widget.layer, widget.head) == divmod(int(final.argmax()), 4) and widget.step == scan.steps[-1]
    assert widget.x_scale == "log" and widget.progress["text"] == "checkpoints 3 of 3"


def test_a_composition_metric_draws_every_earlier_head_into_the_selected_one(widget, scan):
    widget.metric = "composition_k"
    widget.layer, widget.head = 1, 2
    assert widget.curves["into"] == [1, 2]
    decoded = transport.decode(widget.curves)
    assert torch.equal(decoded[:, 0].nan_to_num(-1), scan.values["composition_k"][:, 0, :, 1, 2].nan_to_num(-1))
    assert torch.isnan(decoded[:, 1]).all()  # a layer-1 head does not write into a layer-1 head
    pairs = [((0, h), (1, 2)) for h in range(4)]
    assert widget.curves["window"] == list(scan.phase_change("composition_k", pairs))
    widget.layer = 0  # a first-layer head has no earlier head: no lines, no window
    assert widget.curves["window"] is None and torch.isnan(transport.decode(widget.curves)).all()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("metric", "loss", "metric='loss' is not a head metric of this scan"),
        ("metric", "entropy", "metric='entropy' is not a head metric of this scan"),
        ("step", 7, "step=7 is not a checkpoint step; the nearest are [0, 192]"),
        ("step", "0", "step must be an int"),
        ("x_scale", "symlog", "x_scale must be one of 'log', 'linear'"),
        ("scan_state", "running", "the scan is complete"),
        ("layer", 2, "layer=2 is out of range: the scan has attention layers [0, 1]"),
        ("head", 4, "head=4 is out of range: the scan has heads 0..3"),
    ],
)
def test_every_control_refuses_a_bad_value_with_a_message(widget, name, value, message):
    before, picture = getattr(widget, name), (widget.curves, widget.losses)
    with pytest.raises(traitlets.TraitError, match=re.escape(message)):
        setattr(widget, name, value)
    assert message in widget.error and getattr(widget, name) == before
    widget.set_state({name: value})  # from the browser: shown, never raised
    assert message in widget.error and getattr(widget, name) == before
    assert (widget.curves, widget.losses) == picture
    widget.x_scale = "linear"  # a good value clears the message
    assert widget.error == ""


def test_linked_widgets_get_the_selected_steps_model_and_head(ck, widget):
    pattern = cw.AttentionPattern(cw.demo_model(), prompt="abcdabcd")
    ov = cw.OVCircuit(cw.demo_model(), accuracy=False)
    links = widget.link(pattern)
    widget.link(ov)
    assert len(links) == 5 and links[-1] in widget.links
    step = ck.steps[-1]
    assert pattern.model is ck.at(step) and pattern.model_note == f"step {step} of the training run"
    assert (pattern.layer, pattern.head) == (widget.layer, widget.head) == (ov.layer, ov.head)
    widget.step = 0
    first = ck.at(0)
    assert pattern.model is first and ov.model is first and pattern.model_note == "step 0 of the training run"
    drawn = cw.analysis.attention_patterns(first, pattern.tokens)[pattern.layer, pattern.head]
    assert torch.allclose(transport.decode(pattern.patterns)[pattern.head], drawn, atol=1 / 255)  # that step's pattern
    pattern.head = 3  # the head both ways
    assert widget.head == 3 and ov.head == 3
    widget.head = 1
    assert pattern.head == 1
    widget.close()
    assert widget.links == []
    pattern.head = 2
    assert widget.head == 1  # unlinked


def test_a_linked_dashboard_follows_every_child(ck, widget):
    dash = cw.Dashboard(cw.demo_model(), prompt="abcabc", circuits=False, attribution=False)
    widget.link(dash)
    widget.step = ck.steps[1]
    model = ck.at(ck.steps[1])
    assert all(child.model is model for child in dash.widgets) and dash.model is model
    assert dash.head_scores.model_note == f"step {ck.steps[1]} of the training run"
    kinds = dash.head_scores.scores["kinds"]
    drawn = transport.decode(dash.head_scores.scores)[kinds.index("induction")]
    assert torch.equal(drawn, cw.analysis.head_scores(model, "induction"))  # that step's scores, not the demo model's
    assert not torch.equal(drawn, cw.analysis.head_scores(cw.demo_model(), "induction"))


def test_link_refuses_what_it_cannot_follow(ck, scan):
    alone = Training(scan)  # a scan without its checkpoints: curves only
    assert alone.checkpoints is None and alone.model is None and alone.scan_state == "done"
    with pytest.raises(ValueError, match="no checkpoints"):
        alone.link(cw.AttentionPattern(cw.demo_model(), prompt="ab"))
    widget = Training(ck, scan=scan)
    with pytest.raises(TypeError, match="a circuitwidgets widget on a model"):
        widget.link("pattern")
    with pytest.raises(ValueError, match="itself"):
        widget.link(widget)
    with pytest.raises(ValueError, match="another shape"):
        widget.link(cw.AttentionPattern(small_bridge(n_heads=2, d_head=32), tokens=[1, 2, 3]))
    with pytest.raises(TypeError, match="select a step"):
        widget.use_model(cw.demo_model())


def test_in_a_script_the_widget_scans_its_checkpoints(ck, scan):
    widget = Training(ck, metrics=METRICS)
    assert widget.scan_state == "done" and widget.checkpoint_scan.complete
    for metric in METRICS:
        got, want = widget.checkpoint_scan.values[metric], scan.values[metric]
        assert torch.equal(got.nan_to_num(-9), want.nan_to_num(-9)), metric


def test_in_a_notebook_the_scan_runs_in_the_background_and_stops_and_resumes(ck, scan, monkeypatch):
    """Stop from the browser after the first checkpoint, then resume: the scan is the full one."""
    real = along.scan_checkpoints
    widget: list[Training] = []
    stopped: list[bool] = []

    def stopping_after_1(checkpoints, tokens, metrics, **options):
        progress = options.get("progress")
        if callable(progress):
            def report(done, total):
                progress(done, total)
                if done >= 1 and widget[0].scan_state == "running" and not stopped:
                    stopped.append(True)
                    widget[0].set_state({"scan_state": "stopped"})
            options["progress"] = report
        return real(checkpoints, tokens, metrics, **options)

    monkeypatch.setattr(along, "scan_checkpoints", stopping_after_1)

    async def cell() -> Training:
        w = Training(ck, metrics=["induction", "loss"])
        widget.append(w)
        assert w.scan_state == "running" and w.progress["running"] and w.checkpoint_scan.n_done == 0
        w.wait()
        assert w.scan_state == "stopped" and w.checkpoint_scan.n_done == 1 and not w.progress["running"]
        assert w.curves["done"] == [True, False, False]
        w.set_state({"scan_state": "running"})  # Resume
        assert w.error == "" and w.progress["running"]
        return w.wait()

    w = asyncio.run(cell())
    assert w.scan_state == "done" and w.curves["done"] == [True, True, True]
    assert torch.equal(w.checkpoint_scan.values["induction"], scan.values["induction"])
    assert (w.layer, w.head) == divmod(int(scan.values["induction"][-1].argmax()), 4)  # picked once scanned


def test_a_saved_scan_opens_and_a_partial_one_resumes(ck, scan, tmp_path):
    again = CheckpointScan.load(scan.save(tmp_path / "run.pt"))
    widget = Training(again, metric="previous_token", step=ck.steps[1], x_scale="linear")
    assert widget.metric == "previous_token" and widget.step == ck.steps[1] and widget.x_scale == "linear"
    assert torch.equal(transport.decode(widget.curves), scan.values["previous_token"])
    partial = along.scan_checkpoints(ck, metrics=["induction"], progress=False, stop=lambda: True)
    waiting = Training(ck, scan=partial)  # a partial scan given waits for Resume
    assert waiting.scan_state == "stopped" and torch.isnan(transport.decode(waiting.curves)).all()
    assert waiting.curves["window"] is None and waiting.losses["names"] == []
    with pytest.raises(traitlets.TraitError, match=r"not complete \(0 of 3 checkpoints\)"):
        waiting.scan_state = "done"
    waiting.scan_state = "running"  # (in a script it runs here and now)
    assert waiting.scan_state == "done" and torch.equal(waiting.checkpoint_scan.values["induction"], scan.values["induction"])
    with pytest.raises(traitlets.TraitError, match="given without its checkpoints"):
        Training(along.scan_checkpoints(ck, metrics=["induction"], progress=False, stop=lambda: True)).scan_state = "running"


def test_the_constructor_refuses_bad_arguments(ck, scan):
    with pytest.raises(ValueError, match="pass checkpoints"):
        Training()
    with pytest.raises(TypeError, match="checkpoints must be a Checkpoints"):
        Training(cw.demo_model())
    with pytest.raises(TypeError, match="'scan' as a dict .*pass a CheckpointScan"):
        Training(ck, scan={"data": b""})
    with pytest.raises(TypeError, match="scan must be a CheckpointScan"):
        Training(ck, scan=[1, 2])
    with pytest.raises(ValueError, match="once"):
        Training(scan, scan=scan)
    with pytest.raises(ValueError, match="a scan given has its own tokens"):
        Training(ck, "abc", scan=scan)
    with pytest.raises(ValueError, match="no metric of heads to draw"):
        Training(ck, metrics=["loss"])
    with pytest.raises(ValueError, match="metric='entropy' is not a head metric"):
        Training(ck, scan=scan, metric="entropy")
    with pytest.raises(ValueError, match="the scan is of steps"):
        Training(ck[:2], scan=scan)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stpe'"):
        Training(ck, stpe=3)
    with pytest.raises(TypeError, match="'curves', which the widget computes"):
        Training(ck, curves={})
    with pytest.raises(traitlets.TraitError, match="step=5 is not a checkpoint"):
        Training(ck, scan=scan, step=5)


def test_save_html_keeps_the_curves_and_says_the_step_models_need_the_kernel(widget, tmp_path):
    page = widget.save_html(tmp_path / "training.html").read_text()
    state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
    saved = state["widgets"][0]
    assert saved["_cw_view"] == "training" and saved["kernel_note"] == KERNEL_NOTE and "needs the kernel" in KERNEL_NOTE
    curves = {**saved["curves"], "data": base64.b64decode(saved["curves"]["data"]["$bytes"])}
    assert torch.equal(transport.decode(curves), transport.decode(widget.curves))
    assert saved["losses"]["names"] == ["loss", "in_context_loss"] and saved["step"] == widget.step


def test_a_step_whose_model_fails_to_load_is_said_and_the_linked_view_keeps_its_model(scan):
    good = cw.demo_model()

    def load(step):
        if step == 192:
            raise OSError("checkpoint 192 is not on this machine")
        return good

    widget = Training(Checkpoints(load=load, steps=list(scan.steps), keep=1), scan=scan)
    pattern = cw.AttentionPattern(cw.demo_model(), prompt="abab")
    widget.link(pattern)
    assert pattern.model is good
    widget.step = 192
    assert "step 192: its model could not be shown: OSError: checkpoint 192 is not on this machine" in widget.error
    assert pattern.model is good and widget.step == 192
    widget.step = 0  # a step that loads clears the message
    assert widget.error == "" and pattern.model_note == "step 0 of the training run"
