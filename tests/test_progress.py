"""Progress and cancel of long runs: the steps the loops report, a stop within one block, the widget in a kernel.

The widget tests run inside an asyncio loop, as a notebook kernel does: a long prompt's picture is
then computed on the worker thread while the widget shows its progress; Cancel (the ``cancel``
trait the button raises) and a newer input stop it at its next block.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets import in_trace, progress
from circuitwidgets.analysis import long_patterns
from circuitwidgets.widgets import _background, _cache, _long_runs, _loop, attention

N = 600


@pytest.fixture
def model():
    return small_bridge(normalization_type="LN", n_ctx=N).eval()


@pytest.fixture
def ids():
    return torch.randint(1, 64, (N,), generator=torch.Generator().manual_seed(0)).tolist()


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Many blocks a layer (so a stop within one block shows), long prompts from a few hundred tokens."""
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 1 << 14)
    monkeypatch.setattr(long_patterns, "CHUNK_CELLS", 1 << 14)
    monkeypatch.setattr(attention, "LOD_BYTES", 10_000)
    monkeypatch.setattr(_background, "SETTLE_S", 0.0)
    monkeypatch.setattr(_long_runs, "in_kernel", _loop.running_loop)  # (asyncio.run here plays the kernel's loop)
    monkeypatch.setattr(_loop, "PROGRESS_S", 0.0)  # every step shown
    _cache.clear()


def test_reduced_runs_report_layers_then_blocks(model, ids):
    steps = []
    with progress.reporting(lambda *step: steps.append(step)):
        cw.ModelView(model).reduced(torch.tensor([ids]), {1: {"factor": 4, "kinds": ["previous_token"]}})
    layers = [done for stage, done, _ in steps if stage == "layer"]
    blocks = [(done, total) for stage, done, total in steps if stage == "block"]
    assert layers == [0, 1] and [s for s in steps if s[0] == "layer"][0][2] == 2
    assert len(blocks) > 10 and [d for d, _ in blocks] == list(range(1, len(blocks) + 1)) and blocks[-1][0] == blocks[-1][1]
    assert steps.index(("layer", 1, 2)) < steps.index(("block", 1, blocks[0][1]))  # the blocks of the layer asked for


def test_a_hugging_face_trace_reports_its_blocks_and_layers_only_when_several(ids):
    hf, tokenizer = cw.demo.tiny_hf_model("llama", n_ctx=N)
    view, tokens = cw.HFView(hf, tokenizer=tokenizer), torch.tensor([ids])
    steps: list = []
    for layers, expected in (([1], []), ([0, 1], [(1, 2), (2, 2)])):
        steps.clear()
        with progress.reporting(lambda *step: steps.append(step)):
            view.reduced(tokens, {layer: {"factor": 4} for layer in layers})
        assert [(d, t) for stage, d, t in steps if stage == "layer"] == expected  # (never "layer 1 of 1")
        blocks = [d for stage, d, _ in steps if stage == "block"]
        assert len(blocks) > 4 and blocks[0] == 1


def test_a_report_that_raises_stops_the_run_within_one_block(model, ids):
    computed = []
    original = in_trace.block_weights

    def counted(*args, **kwargs):
        computed.append(1)
        return original(*args, **kwargs)

    def stop_at_third(stage, done, total):
        if stage == "block" and done == 3:
            raise progress.Cancelled

    in_trace.block_weights = counted
    try:
        with pytest.raises(progress.Cancelled), progress.reporting(stop_at_third):
            cw.ModelView(model).reduced(torch.tensor([ids]), {1: {"factor": 4}})
    finally:
        in_trace.block_weights = original
    assert len(computed) == 3  # blocks 1-3 were built; the report after the third stopped the run
    attn = model.blocks[1].attn.original_component
    assert "forward" not in vars(attn)  # the model's own attention is back
    assert cw.ModelView(model).reduced(torch.tensor([ids[:50]]), {1: {"factor": 1}})[1]["codes"].shape == (4, 50, 50)


def test_a_script_shows_a_tqdm_bar(model, ids, capsys, monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "REFRESH_S", 0.0)
    widget = cw.AttentionPattern(model, tokens=ids, layer=1)
    assert widget.patterns["lod"] and widget.progress == {} and not widget.busy
    err = capsys.readouterr().err
    assert "AttentionPattern: layer 1 of 600 tokens: layer 1 of 2" in err  # (what the model runs, then its blocks)
    widget.close()


def test_a_long_logit_attribution_shows_a_tqdm_bar_layer_by_layer(model, ids, capsys, monkeypatch):
    from circuitwidgets.backends import hooked

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "REFRESH_S", 0.0)
    monkeypatch.setattr(hooked, "EAGER_BYTES", 1 << 16)  # (600 tokens count as long here)
    monkeypatch.setattr(_cache, "ALL_LAYERS_BUDGET", 0)  # (as for any prompt past EAGER_BYTES: no layer's patterns kept)
    widget = cw.LogitAttribution(model, tokens=ids)
    assert widget.error == "" and widget.attribution["shape"][0] == N
    assert "LogitAttribution: 600 tokens: layer 1 of 2" in capsys.readouterr().err  # (block indices, as the widgets name layers)
    widget.close()


async def _until(condition, seconds=60.0):
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def _browser_sets(widget, **state):
    """`state` set as the browser sets it; returns once the refresh it asks for has started (after the coalescing wait)."""
    revision = widget.revision
    widget.set_state(state)
    await _until(lambda: widget.revision > revision)


def test_a_cell_gets_the_picture_at_once(model, ids):
    """Constructed (or changed) in a cell, the picture is there for the next line; the bar is the cell's (tqdm)."""

    async def scenario():
        widget = cw.AttentionPattern(model, tokens=ids, layer=1)
        assert widget._job is None and widget.patterns["lod"]["n"] == N and not widget.busy
        widget.layer = 0
        assert widget._job is None and widget.patterns["layer"] == 0
        widget.close()

    asyncio.run(scenario())


def test_a_deferred_widget_appears_at_once_with_progress_and_cancel_then_fills_in(model, ids):
    """``defer=True`` in a kernel: the widget is shown before anything is computed; the long run then goes on the worker
    thread, its progress shown in the widget (the kernel stays free for Cancel), and fills in the picture."""

    async def scenario():
        seen = []
        widget = cw.AttentionPattern(model, tokens=ids, layer=1, defer=True)
        widget.observe(lambda change: seen.append(dict(change["new"])), names="progress")
        assert widget.busy and not widget.patterns.get("data") and widget.refresh_count == 0  # at once, nothing yet
        await _until(lambda: widget._job is not None)
        assert widget.busy and widget.progress["running"]  # the kernel is free meanwhile: this line runs
        await _until(lambda: not widget.busy)
        assert widget.patterns["lod"]["n"] == N and widget.error == "" and widget.progress == {}
        assert any(p.get("text", "").startswith("layer 1 of 2, block") for p in seen if p.get("running"))
        expected = _cache.attention_parts(cw.ModelView(model), tuple(ids), 1, widget.patterns["lod"]["factor"])
        assert widget._answer.parts["overview"]["max"].equal(expected["overview"]["max"])
        widget.close()
        # cancelled before its first picture: it says that nothing is drawn, and the next input draws
        widget = cw.AttentionPattern(model, tokens=ids[:-3], layer=1, defer=True)
        await _until(lambda: widget._job is not None)
        widget.set_state({"cancel": widget.cancel + 1})
        await _until(lambda: not widget.busy)
        assert widget.error.startswith("cancelled: layer 1 of 597 tokens was not computed; nothing is drawn yet")
        assert not widget.patterns.get("data")
        await _browser_sets(widget, layer=0)
        await _until(lambda: not widget.busy)
        assert widget.error == "" and widget.patterns["layer"] == 0 and widget.patterns["lod"]["n"] == N - 3
        widget.close()

    asyncio.run(scenario())


def test_a_browser_change_shows_progress_then_fills_in(model, ids):
    async def scenario():
        seen = []
        widget = cw.AttentionPattern(model, tokens=ids[:100], layer=1)  # short: drawn at once
        widget.observe(lambda change: seen.append(dict(change["new"])), names="progress")
        drawn = widget.patterns
        await _browser_sets(widget, tokens=ids)
        assert widget.busy and widget.progress["running"] and widget.patterns is drawn  # at once, the old picture
        await _until(lambda: not widget.busy)
        assert widget.patterns["lod"]["n"] == N and widget.progress == {} and widget.error == ""
        assert widget.tokens == ids
        texts = [p.get("text", "") for p in seen if p.get("running")]
        assert any(t.startswith("layer 1 of 2, block") for t in texts), texts
        expected = _cache.attention_parts(cw.ModelView(model), tuple(ids), 1, widget.patterns["lod"]["factor"])
        assert widget._answer.parts["overview"]["max"].equal(expected["overview"]["max"])
        widget.close()

    asyncio.run(scenario())


def test_cancel_stops_the_run_and_says_so(model, ids, monkeypatch):
    built = []
    original = long_patterns.lse_and_pool

    async def scenario():
        widget = cw.AttentionPattern(model, tokens=ids[:100], layer=1)  # short: drawn at once
        drawn = widget.patterns
        loop = asyncio.get_running_loop()

        def slow_blocks(stage, done, total):  # the third block's report: the user presses Cancel
            built.append(done)
            if stage == "block" and done == 3:
                loop.call_soon_threadsafe(lambda: widget.set_state({"cancel": widget.cancel + 1}))
                time.sleep(0.5)  # (the kernel takes the click meanwhile)

        monkeypatch.setattr(long_patterns, "lse_and_pool", _reporting(original, slow_blocks))
        await _browser_sets(widget, tokens=ids)
        assert widget.busy and widget.progress["running"]
        await _until(lambda: not widget.busy)
        assert widget.error.startswith("cancelled: layer 1 of 600 tokens was not computed")
        assert widget.patterns is drawn  # the previous picture, said to be so
        assert widget.progress == {} and widget.cancel == 1
        widget.close()

    asyncio.run(scenario())
    assert max(built) <= 4  # stopped at the report after the click, not at the layer's end
    total = -(-N // max(4, (long_patterns.CHUNK_CELLS // (4 * N)) // 4 * 4))
    assert total > 10


def _reporting(original, extra):
    """`original` with `extra(stage, done, total)` called at each of its progress steps, besides the widget's."""

    def wrapped(*args, **kwargs):
        outer = progress.current()

        def both(stage, done, total):
            extra(stage, done, total)
            outer(stage, done, total)

        with progress.reporting(both):
            return original(*args, **kwargs)

    return wrapped


def test_a_newer_input_supersedes_the_run(model, ids):
    async def scenario():
        widget = cw.AttentionPattern(model, tokens=ids[:100], layer=1)
        await _browser_sets(widget, tokens=ids)
        first = widget._job
        await _browser_sets(widget, tokens=ids[:-7])  # a newer input while the first run goes on
        assert first is not None and widget._job is not first
        await _until(lambda: not widget.busy)
        assert widget.patterns["lod"]["n"] == N - 7 and widget.tokens == ids[:-7] and widget.error == ""
        widget.close()

    asyncio.run(scenario())


def test_an_export_during_a_long_run_holds_its_picture(model, ids, tmp_path):
    async def scenario():
        widget = cw.AttentionPattern(model, tokens=ids[:100], layer=1)
        await _browser_sets(widget, tokens=ids)
        assert widget._job is not None and widget.patterns["lod"]["n"] == 100
        path = widget.save_html(tmp_path / "long.html")
        assert widget._job is None and widget.patterns["lod"]["n"] == N and not widget.busy
        assert '"busy": false' in path.read_text() or '"busy":false' in path.read_text()
        await asyncio.sleep(0.3)  # (the superseded run, if it finished, changes nothing)
        assert widget.patterns["lod"]["n"] == N and widget.error == ""
        widget.close()

    asyncio.run(scenario())


def test_outside_a_kernel_another_librarys_loop_computes_at_once(model, ids, monkeypatch):
    """Playwright's sync API (and others) run a loop in the main thread: only a notebook kernel's goes to the worker."""
    monkeypatch.undo()  # the real `in_kernel`
    monkeypatch.setattr(attention, "LOD_BYTES", 10_000)

    async def scenario():
        widget = cw.AttentionPattern(model, tokens=ids[:100], layer=1)
        await _browser_sets(widget, tokens=ids)
        assert widget._job is None and widget.patterns["lod"]["n"] == N and not widget.busy
        widget.close()

    asyncio.run(scenario())
