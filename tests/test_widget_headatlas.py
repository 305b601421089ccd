"""HeadAtlas without a browser: the scan and examples payloads against the analysis, the example and
its tokens, links to an AttentionPattern and a Dashboard, stop and resume, the error contract, a scan
given instead of texts, export."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re

import ipywidgets
import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import head_scan
from circuitwidgets.widgets import _background
from circuitwidgets.widgets.headatlas import HeadAtlas

STEP = 1 / 254  # one uint8 code of an attention weight


@pytest.fixture(scope="module")
def texts(demo):
    """Repeated random blocks (the induction heads have something to do) and two plain texts."""
    return [*cw.analysis.repeated_random_tokens(demo, seq_len=10, batch=8), "abcabc hello", "the cat sat on the mat"]


@pytest.fixture(scope="module")
def full(demo, texts):
    return cw.analysis.scan_heads(demo, texts, progress=False)


@pytest.fixture(scope="module")
def atlas(demo, texts):
    return HeadAtlas(demo, texts, layer=1, head=0)


def means(scan, metrics) -> torch.Tensor:
    return torch.stack([scan.mean(m) for m in metrics])


def test_the_scan_payload_is_every_heads_mean(atlas, full):
    assert atlas.error == "" and atlas.scan_state == "done"
    p = atlas.scan
    assert p["dtype"] == "float32" and p["shape"] == [8, 2, 4]
    assert p["metrics"] == list(head_scan.SCAN_METRICS) and p["pattern_metrics"] == list(head_scan.PATTERN_METRICS)
    assert torch.equal(transport.decode(p), means(atlas.head_scan, p["metrics"]))
    assert torch.allclose(transport.decode(p), means(full, p["metrics"]), atol=1e-6, equal_nan=True)
    assert (p["layers"], p["n_heads"], p["done"], p["total"]) == ([0, 1], 4, 10, 10)
    assert p["labels"]["first_token"] == "first token (sink)" and "A[d, d-1]" in p["descriptions"]["previous_token"]
    assert p["metric_ranges"]["induction"] == [0.0, 1.0] and p["metric_ranges"]["ov_copying"] == [-1.0, 1.0]
    assert p["metric_ranges"]["distance"][1] == pytest.approx(float(full.mean("distance").max()))
    assert atlas.progress == {"done": 10, "total": 10, "text": "texts 10 of 10", "running": False}
    # the demo's previous-token heads (L0H1, L0H3) and induction heads (layer 1) stand out
    got = transport.decode(p)
    assert got[0, 0].argmax() in (1, 3) and got[3].flatten().argmax() >= 4


def test_examples_are_the_heads_patterns_on_one_text_per_decile(demo, atlas):
    p = atlas.examples
    assert (p["layer"], p["head"], p["metric"], p["scanned"]) == (1, 0, "induction", 10)
    picks = atlas.head_scan.deciles(1, 0, "induction")
    assert [(i["decile"], i["text"], i["dest"], i["value"]) for i in p["items"]] == picks
    assert [i["decile"] for i in p["items"]] == list(range(9, -1, -1))  # 10 texts: one per decile
    stack = transport.decode(p)
    n = max(i["length"] for i in p["items"])
    assert p["layout"] == "tril" and list(stack.shape) == [10, n, n]
    for k, item in enumerate(p["items"]):
        ids = atlas.head_scan.tokens_of(item["text"])
        assert item["length"] == len(ids) and p["tokens"][k] == cw.as_view(demo).token_strings(ids)
        want = cw.analysis.attention_patterns(demo, [ids], layers=[1])[0, 0]
        assert (stack[k, : len(ids), : len(ids)] - want).abs().max() <= STEP / 2 + 1e-6
        assert not stack[k, len(ids) :].any() and not stack[k, :, len(ids) :].any()  # zero-padded
    # another head, another metric: new examples
    atlas.head = 2
    atlas.example_metric = "previous_token"
    assert (atlas.examples["head"], atlas.examples["metric"]) == (2, "previous_token")
    assert [i["text"] for i in atlas.examples["items"]] == [t for _, t, _, _ in atlas.head_scan.deciles(1, 2, "previous_token")]
    atlas.head, atlas.example_metric = 0, "induction"


def test_setting_an_example_sets_its_tokens(atlas):
    item = atlas.examples["items"][0]
    atlas.set_state({"example": [item["text"], item["dest"]]})  # a click in the browser
    assert atlas.error == "" and atlas.example == [item["text"], item["dest"]]
    assert atlas.example_tokens == atlas.head_scan.tokens_of(item["text"])
    atlas.example = []
    assert atlas.example_tokens == []


def test_link_makes_an_attention_pattern_follow(demo, texts):
    atlas = HeadAtlas(demo, texts, layer=1, head=2)
    pattern = cw.AttentionPattern(demo, prompt="abcabc")
    links = atlas.link(pattern)
    assert len(links) == 5 and links == atlas.links
    assert (pattern.layer, pattern.head) == (1, 2)  # the atlas's head, given at once
    assert pattern.prompt == "abcabc" and pattern.source == "prompt"  # no example yet: nothing pushed
    pattern.head = 3
    assert atlas.head == 3 and atlas.examples["head"] == 3
    item = atlas.examples["items"][1]
    atlas.set_state({"example": [item["text"], item["dest"]]})
    ids = atlas.head_scan.tokens_of(item["text"])
    assert pattern.tokens == ids and pattern.source == "tokens" and pattern.error == ""
    assert pattern.selection == {"query": item["dest"], "key": None, "locked": True}
    assert torch.equal(pattern.current_patterns(), cw.analysis.attention_patterns(demo, [ids], layers=[1])[0])
    atlas.example = []  # an empty example pushes nothing
    assert pattern.tokens == ids
    for link in links:
        if isinstance(link, ipywidgets.Widget):  # a jslink
            link.close()
        else:
            link.unlink()
    atlas.head = 0
    assert pattern.head == 3


def test_link_makes_a_dashboard_follow(demo, texts):
    atlas = HeadAtlas(demo, texts)
    dash = cw.Dashboard(demo, prompt="abcabc", circuits=False)
    atlas.link(dash)
    atlas.set_state({"layer": 1, "head": 1})  # a click on a point
    assert (dash.attention.layer, dash.attention.head) == (1, 1)
    assert (dash.head_scores.layer, dash.head_scores.head, dash.composition.head) == (1, 1, 1)
    dash.head_scores.head = 3  # and back
    assert atlas.head == 3
    item = atlas.examples["items"][0]
    atlas.example = [item["text"], item["dest"]]
    ids = atlas.head_scan.tokens_of(item["text"])
    assert dash.attention.tokens == ids and dash.composition.tokens == ids and dash.attribution.tokens == ids
    assert dash.attention.error == ""


def test_link_refuses_what_it_cannot_link(demo, texts, atlas):
    with pytest.raises(TypeError, match="target must be"):
        atlas.link("pattern")
    with pytest.raises(ValueError, match="itself"):
        atlas.link(atlas)
    from factories import small_bridge

    other = cw.AttentionPattern(small_bridge(n_layers=1, d_head=32, n_heads=2), tokens=[1, 2, 3])
    with pytest.raises(ValueError, match="another model"):
        atlas.link(other)


def test_a_partial_scan_given_resumes_to_the_full_scan(demo, texts, full):
    calls = []
    partial = cw.analysis.scan_heads(demo, texts, progress=False, batch_size=3, stop=lambda: len(calls) > 1 or calls.append(1))
    assert 0 < partial.n_done < partial.n_texts
    atlas = HeadAtlas(demo, scan=partial, batch_size=3)
    assert atlas.scan_state == "stopped" and atlas.scan["done"] == partial.n_done
    assert atlas.progress["text"] == f"texts {partial.n_done} of 10"
    assert torch.equal(transport.decode(atlas.scan), means(partial, atlas.scan["metrics"]))
    atlas.scan_state = "running"  # (in a script it runs here and now)
    assert atlas.scan_state == "done" and atlas.head_scan.complete and atlas.scan["done"] == 10
    for metric in full.metrics:
        assert torch.allclose(atlas.head_scan.values[metric], full.values[metric], atol=1e-6, equal_nan=True), metric
    assert torch.allclose(transport.decode(atlas.scan), means(full, atlas.scan["metrics"]), atol=1e-6, equal_nan=True)


def test_in_a_notebook_the_scan_runs_in_the_background_and_stops_and_resumes(demo, texts, full, monkeypatch):
    """Stop from the browser (scan_state 'stopped') within one batch, then resume: the scan is the full one."""
    real = head_scan.scan_heads
    widget: list[HeadAtlas] = []

    def stopping_after_4(model, texts, metrics, **options):  # the browser's Stop once 4 texts are scanned
        progress = options.get("progress")
        if callable(progress):
            def report(done, total):
                progress(done, total)
                if options["resume"].n_done >= 4 and widget[0].scan_state == "running" and not stopped:
                    stopped.append(True)
                    widget[0].set_state({"scan_state": "stopped"})
            options["progress"] = report
        return real(model, texts, metrics, **options)

    stopped: list[bool] = []
    monkeypatch.setattr(head_scan, "scan_heads", stopping_after_4)

    async def cell() -> HeadAtlas:
        atlas = HeadAtlas(demo, texts, batch_size=2)
        widget.append(atlas)
        # shown at once, nothing scanned yet
        assert atlas.scan_state == "running" and atlas.progress["running"] and atlas.head_scan.n_done == 0
        atlas.wait()
        assert atlas.scan_state == "stopped" and atlas.head_scan.n_done == 4 and not atlas.progress["running"]
        assert atlas.scan["done"] == 4 and atlas.examples["scanned"] == 4
        assert torch.equal(transport.decode(atlas.scan), means(atlas.head_scan, atlas.scan["metrics"]))
        atlas.set_state({"scan_state": "running"})  # Resume
        assert atlas.error == "" and atlas.progress["running"]
        return atlas.wait()

    atlas = asyncio.run(cell())
    assert atlas.scan_state == "done" and atlas.head_scan.complete and atlas.scan["done"] == 10
    for metric in full.metrics:
        assert torch.allclose(atlas.head_scan.values[metric], full.values[metric], atol=1e-6, equal_nan=True), metric
    assert atlas.examples["scanned"] == 10


def test_a_scan_given_draws_without_scanning(demo, full, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("scan_heads ran")

    monkeypatch.setattr(head_scan, "scan_heads", refuse)
    atlas = HeadAtlas(demo, scan=full, metrics=["induction", "previous_token", "ov_copying"], mode="grid")
    assert atlas.error == "" and atlas.scan_state == "done" and atlas.mode == "grid"
    assert atlas.scan["metrics"] == ["induction", "previous_token", "ov_copying"]
    assert atlas.scan["pattern_metrics"] == ["induction", "previous_token"]
    assert torch.equal(transport.decode(atlas.scan), means(full, atlas.scan["metrics"]))
    # defaults the metrics lack fall back to metrics they have
    assert (atlas.x_metric, atlas.y_metric, atlas.color_metric, atlas.example_metric) == (
        "previous_token", "induction", "ov_copying", "induction")


def test_a_saved_scan_opens_in_the_atlas(demo, full, tmp_path):
    again = cw.analysis.HeadScan.load(full.save(tmp_path / "scan.pt"))
    atlas = HeadAtlas(demo, scan=again, layer=1)
    assert torch.equal(transport.decode(atlas.scan), means(full, atlas.scan["metrics"]))
    assert atlas.examples["items"]


def test_the_constructor_refuses_bad_arguments(demo, texts, full):
    with pytest.raises(ValueError, match="pass texts= .* or scan="):
        HeadAtlas(demo)
    with pytest.raises(ValueError, match="not both"):
        HeadAtlas(demo, texts, scan=full)
    with pytest.raises(ValueError, match="texts is empty"):
        HeadAtlas(demo, [])
    with pytest.raises(TypeError, match="scan must be a HeadScan"):
        HeadAtlas(demo, scan=[1, 2])
    with pytest.raises(TypeError, match="'scan', which the widget computes: .* pass a HeadScan"):
        HeadAtlas(demo, scan=HeadAtlas(demo, scan=full).scan)  # another atlas's payload
    with pytest.raises(TypeError, match="unexpected keyword argument 'txts'"):
        HeadAtlas(demo, txts=texts)
    with pytest.raises(ValueError, match="'junk'"):
        HeadAtlas(demo, texts, metrics=["induction", "junk"])
    with pytest.raises(ValueError, match="x_metric='entropy' is not a metric of this scan"):
        HeadAtlas(demo, scan=full, metrics=["induction"], x_metric="entropy")
    with pytest.raises(ValueError, match="which the scan lacks"):
        HeadAtlas(demo, scan=dataclasses.replace(full, head_values={}), metrics=["ov_copying"])
    with pytest.raises(ValueError, match=r"scan is of another model: attention layers \[0, 1\] x 3 heads"):
        HeadAtlas(demo, scan=dataclasses.replace(full, n_heads=3))
    with pytest.raises(ValueError, match="max_tokens"):
        HeadAtlas(demo, texts, max_tokens=0)
    with pytest.raises(TypeError, match="defer must be a bool"):
        HeadAtlas(demo, texts, defer="yes")
    with pytest.raises(traitlets.TraitError, match="mode"):
        HeadAtlas(demo, texts, mode="pie")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("x_metric", "junk", "x_metric='junk' is not a metric of this scan"),
        ("y_metric", 5, "y_metric must be a str"),
        ("color_metric", "", "color_metric='' is not a metric of this scan"),
        ("mode", "pie", "mode must be one of 'scatter', 'grid'"),
        ("example_metric", "ov_copying", "a weight metric"),
        ("example_metric", "junk", "must be one of the scan's pattern metrics"),
        ("example", [99, 0], "example text 99 is out of range: 0..9"),
        ("example", [0, 999], "example destination 999 is out of range: text 0 has positions 0..20"),
        ("example", [1], "example must be [text_index, destination] or []"),
        ("example", ["a", 1], "example must be a list of ints"),
        ("scan_state", "stopped", "the scan is complete"),
        ("scan_state", "paused", "scan_state must be one of"),
    ],
)
def test_every_control_refuses_a_bad_value_with_a_message(atlas, name, value, message):
    before, picture = getattr(atlas, name), (atlas.scan, atlas.examples)
    with pytest.raises(traitlets.TraitError, match=re.escape(message)):
        setattr(atlas, name, value)
    assert message in atlas.error and getattr(atlas, name) == before
    atlas.set_state({name: value})  # from the browser: shown, never raised
    assert message in atlas.error and getattr(atlas, name) == before
    assert (atlas.scan, atlas.examples) == picture
    atlas.x_metric = "entropy"  # a good value clears the message
    assert atlas.error == ""
    atlas.x_metric = "previous_token"


def test_the_computed_traits_cannot_be_set(atlas):
    for name in ("scan", "examples", "progress", "example_tokens"):
        with pytest.raises(traitlets.TraitError, match=f"{name} is computed by the widget"):
            setattr(atlas, name, {"x": 1} if name != "example_tokens" else [1])


def test_a_partial_scan_refuses_done(demo, texts):
    partial = cw.analysis.scan_heads(demo, texts, progress=False, stop=lambda: True)
    atlas = HeadAtlas(demo, scan=partial)
    assert atlas.scan_state == "stopped" and atlas.examples["items"] == [] and "no text scanned yet" in atlas.examples["note"]
    with pytest.raises(traitlets.TraitError, match=r"not complete \(0 of 10 texts\)"):
        atlas.scan_state = "done"


def test_save_html_keeps_the_scan_and_the_examples(atlas, tmp_path):
    page = atlas.save_html(tmp_path / "atlas.html").read_text()
    state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
    saved = state["widgets"][0]
    assert saved["_cw_view"] == "headatlas"
    scan = {**saved["scan"], "data": base64.b64decode(saved["scan"]["data"]["$bytes"])}
    assert torch.equal(transport.decode(scan), transport.decode(atlas.scan))
    assert saved["examples"]["items"] == atlas.examples["items"] and saved["examples"]["layer"] == atlas.layer


def test_controls_given_to_the_constructor_are_checked_against_the_scan(demo, texts):
    atlas = HeadAtlas(demo, texts, scan_state="stopped", example=[0, 1], example_metric="previous_token")
    assert atlas.scan_state == "stopped" and atlas.head_scan.n_done == 0  # asked not to scan yet
    assert atlas.example_tokens == atlas.head_scan.tokens_of(0) and atlas.example_metric == "previous_token"
    atlas.scan_state = "running"
    assert atlas.scan_state == "done" and atlas.examples["metric"] == "previous_token" and atlas.examples["items"]
    with pytest.raises(traitlets.TraitError, match="example text 50 is out of range"):
        HeadAtlas(demo, texts, example=[50, 0])


def test_a_closed_atlas_stops_its_background_scan(demo, texts):
    async def cell() -> HeadAtlas:
        atlas = HeadAtlas(demo, texts, batch_size=1)
        assert atlas.scan_state == "running"
        atlas.close()
        await asyncio.get_running_loop().run_in_executor(None, _background.wait, 30)
        await asyncio.sleep(0.05)  # the worker's report reaches the loop
        return atlas

    atlas = asyncio.run(cell())
    assert not atlas.head_scan.complete and atlas.links == []
