"""One worker-thread mechanism for every widget that runs long: `_loop.Job`, and `_long_runs.LongRuns` over it.

A widget written here, as a user would write one, hands a slow count to `LongRuns._compute`. Inside
an asyncio loop standing for the kernel's, a change from the browser runs it as the widget's job:
its steps reach ``progress``, Cancel stops it at its next step and says so, a newer input
supersedes it (its result is never drawn), and export waits for it. HeadAtlas's scan and the
long prompts of HeadScores run as the same jobs.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import in_trace, progress
from circuitwidgets.widgets import _background, _cache, _long_runs, _loop
from circuitwidgets.widgets._long_runs import LongRuns
from circuitwidgets.widgets._loop import Job


class Counting(LongRuns):
    """Counts to `n`, a step every `pause` seconds, as a long run does; counts past 3 are long."""

    view_name = "headscores"  # (any view draws it here: not registered, no view=)
    controls = ("n",)
    inputs = ("n",)
    picture_trait = "counted"
    n = traitlets.Int(3, help="how far to count").tag(sync=True)
    counted = traitlets.Dict(help="what the last count drew: {data, n}").tag(sync=True)

    def __init__(self, model, pause: float = 0.0, **kwargs):
        self.pause, self.steps, self.shown = pause, [], []
        super().__init__(model, **kwargs)
        self._start()

    def _refresh(self):
        n = self.n

        def count() -> int:
            for step in range(1, n + 1):
                time.sleep(self.pause)
                self.steps.append((n, step))
                progress.tick("step", step, n)
            return n

        def show(done: int) -> None:
            self.shown.append(done)
            self.counted = {"data": b"drawn", "n": done}

        self._compute(f"a count to {n}", count, show, long=n > 3)


@pytest.fixture
def model():
    return cw.demo_model()


@pytest.fixture(autouse=True)
def in_a_kernel(monkeypatch):
    monkeypatch.setattr(_long_runs, "in_kernel", _loop.running_loop)  # (asyncio.run here plays the kernel's loop)
    monkeypatch.setattr(_background, "SETTLE_S", 0.0)
    monkeypatch.setattr(_loop, "PROGRESS_S", 0.0)  # every step shown


async def until(condition, seconds: float = 60.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def browser_sets(widget, **state) -> None:
    """`state` set as the browser sets it; returns once the refresh it asks for has begun (after the coalescing wait)."""
    revision = widget.revision
    widget.set_state(state)
    await until(lambda: widget.revision > revision)


def test_a_cell_computes_at_once_even_long_work(model):
    w = Counting(model, n=6)
    assert w.counted["n"] == 6 and w._job is None and w.progress == {} and not w.busy
    w.n = 7  # from Python: at once too, so that the next line reads the picture
    assert w.counted["n"] == 7 and w._job is None


def test_from_the_browser_long_work_is_a_job_whose_progress_the_widget_shows(model):
    async def scenario():
        w = Counting(model, pause=0.02, n=2)
        seen: list[dict] = []
        w.observe(lambda change: seen.append(dict(change["new"])), names="progress")
        await browser_sets(w, n=8)
        assert isinstance(w._job, Job) and w._job.busy and w.busy and w.progress["running"]
        assert w.counted["n"] == 2  # meanwhile the kernel answers, the picture before on screen
        await until(lambda: not w.busy)
        assert w.counted["n"] == 8 and w.progress == {} and w.error == "" and w._job is None
        shown = [p for p in seen if p.get("text")]
        assert [p["text"] for p in shown] == sorted({p["text"] for p in shown}, key=lambda t: int(t.split()[1]))
        assert "step 4 of 8" in {p["text"] for p in shown} and all(0 < p["fraction"] <= 1 for p in shown)
        w.close()

    asyncio.run(scenario())


def test_cancel_stops_the_job_at_its_next_step_and_says_so(model):
    async def scenario():
        w = Counting(model, pause=0.02, n=2)
        await browser_sets(w, n=400)
        await until(lambda: len(w.steps) > 2)
        w.set_state({"cancel": w.cancel + 1})  # the Cancel button
        await until(lambda: not w.busy)
        assert w.error.startswith("cancelled: a count to 400 was not computed; the picture below is of the input before")
        assert w.counted["n"] == 2 and w.progress == {} and w._job is None
        assert max(step for n, step in w.steps if n == 400) < 100  # stopped long before its end
        await browser_sets(w, n=5)  # the next input computes again, and clears the message
        await until(lambda: not w.busy)
        assert w.counted["n"] == 5 and w.error == ""
        w.close()

    asyncio.run(scenario())


def test_a_newer_input_supersedes_the_job_whose_result_is_never_drawn(model):
    async def scenario():
        w = Counting(model, pause=0.02, n=2)
        await browser_sets(w, n=400)
        first = w._job
        await until(lambda: len(w.steps) > 2)
        await browser_sets(w, n=6)
        assert first is not None and w._job is not first and not first.wanted()
        await until(lambda: not w.busy)
        await asyncio.sleep(0.2)  # (the superseded job, had it finished, would land now)
        assert w.shown == [2, 6] and w.counted["n"] == 6 and w.error == ""
        assert max(step for n, step in w.steps if n == 400) < 100
        w.close()

    asyncio.run(scenario())


def test_closing_the_widget_stops_its_job(model):
    async def scenario():
        w = Counting(model, pause=0.02, n=2)
        await browser_sets(w, n=400)
        job = w._job
        w.close()
        await asyncio.get_running_loop().run_in_executor(None, _background.wait, 30)
        assert job is not None and not job.wanted() and isinstance(job.error, _background.Superseded)
        assert w.shown == [2] and max([step for n, step in w.steps if n == 400] or [0]) < 100

    asyncio.run(scenario())


def test_export_waits_for_the_job_and_holds_its_picture(model, tmp_path):
    async def scenario():
        w = Counting(model, pause=0.01, n=2)
        await browser_sets(w, n=12)
        assert w._job is not None
        w.save_html(tmp_path / "count.html")
        assert w._job is None and w.counted["n"] == 12 and not w.busy and w.progress == {}
        w.close()

    asyncio.run(scenario())


def test_head_atlas_scans_as_such_a_job(model):
    async def scenario():
        atlas = cw.HeadAtlas(model, cw.analysis.repeated_random_tokens(model, 8, 6))
        job = atlas._job
        assert isinstance(job, Job) and not job.busy  # (the atlas shows its own progress, not the busy mark)
        assert atlas.wait().scan_state == "done" and atlas._job is None
        atlas.close()

    asyncio.run(scenario())


def test_head_scores_of_a_long_prompt_from_the_browser_run_as_a_job_with_progress(monkeypatch):
    """A model reduced where it runs (here a Hugging Face model, traced locally) scores a block of rows at a time."""
    from circuitwidgets.backends import hooked

    monkeypatch.setattr(hooked, "EAGER_BYTES", 1 << 12)  # (600 tokens count as long here)
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 1 << 12)  # (many blocks a layer)
    hf, tokenizer = cw.demo.tiny_hf_model("llama", n_ctx=600)
    view = cw.HFView(hf, tokenizer=tokenizer)
    ids = torch.randint(3, 60, (300,), generator=torch.Generator().manual_seed(0))
    ids = torch.cat([ids, ids]).tolist()  # repeated: induction targets
    _cache.clear()

    async def scenario():
        w = cw.HeadScores(view, kinds=["previous_token", "induction"], tokens=ids, eager=False)  # a cell: at once
        assert w.computed == ["induction"] and w._job is None
        seen: list[dict] = []
        w.observe(lambda change: seen.append(dict(change["new"])), names="progress")
        await browser_sets(w, kind="previous_token")
        assert isinstance(w._job, Job) and w.busy
        await until(lambda: not w.busy)
        assert w.error == "" and w.computed == ["previous_token", "induction"] and w.progress == {}
        assert any(p.get("running") and "block" in p.get("text", "") for p in seen), seen
        expected = cw.analysis.head_scores(view, "previous_token", torch.tensor([ids]))
        assert torch.allclose(w.scores_of("previous_token"), expected, atol=1e-5)
        w.close()

    asyncio.run(scenario())
