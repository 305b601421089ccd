"""Issue 12, widget side: edits and hooks always show, caches never lie, closed widgets are freed.

Each test here failed before the widgets checked the model's state at every user action, kept
hooked results out of the shared cache, read their bundle as text and cancelled work on close.
"""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import analysis
from circuitwidgets.widgets import _background, _cache

PROMPT = "abcdefabcdef"


def zero_query_weights(model, layer: int) -> None:
    """The usual ablation idiom: an in-place edit through ``.data`` (no version-counter bump)."""
    view = cw.as_view(model)
    before = view.W_Q[layer].abs().sum()
    for name, p in model.blocks[layer].attn.named_parameters():
        parts = name.split(".")
        if ("q" in parts or "W_Q" in parts) and parts[-1] in ("weight", "W_Q"):
            p.data.mul_(0)
    assert cw.as_view(model).W_Q[layer].abs().sum() == 0 < before, "the edit reached W_Q"


def test_attention_redraws_after_a_data_edit_and_a_head_switch():
    model = cw.demo_model()
    w = cw.AttentionPattern(model, prompt=PROMPT, layer=1, head=0)
    before = w.current_patterns().clone()
    zero_query_weights(model, 1)
    w.head = 2  # a user action: drawn from the payload already sent, unless the model changed
    now = analysis.attention_patterns(model, PROMPT)[1]
    assert not torch.allclose(now, before)
    assert torch.allclose(w.current_patterns(), now) and w.patterns["revision"] == w.revision


def test_qk_and_ov_redraw_after_a_data_edit_and_a_head_switch():
    model = cw.demo_model()
    qk = cw.QKCircuit(model, 1, 0, tokens=[2, 3, 4])
    ov = cw.OVCircuit(model, 1, 0, tokens=[2, 3, 4])
    zero_query_weights(model, 1)
    for p in model.parameters():
        p.data.mul_(1.5)  # every weight, so the OV circuit changes too
    qk.head = ov.head = 1
    assert torch.allclose(qk.current_block(), analysis.full_qk_block(model, 1, [2, 3, 4])[1])
    assert torch.allclose(ov.current_block(), analysis.full_ov_block(model, 1, [2, 3, 4])[1], rtol=1e-5)
    copying = analysis.copying_score_of(analysis.ov_eigenvalues(model, 1))
    assert [row["copying"] for row in ov.stats] == pytest.approx(copying.tolist(), abs=1e-6)
    assert ov.stats[1]["top1"] == pytest.approx(analysis.ov_top_k_accuracy(model, 1, 1, k=1))


def test_composition_shows_new_scores_and_pair_after_an_edit_and_compute():
    model = cw.demo_model()
    w = cw.CompositionDiagram(model, prompt=PROMPT, selected_pair=[[0, 1], [1, 2]])
    old_pair = w.pair_patterns_exact().clone()
    zero_query_weights(model, 1)
    w.compute()
    assert torch.allclose(w.scores_of("K"), analysis.composition_scores(model, "K"), equal_nan=True)
    fresh = analysis.attention_patterns(model, PROMPT, layers=[1])[0, 2]
    assert torch.allclose(w.pair_patterns_exact()[1], fresh) and not torch.allclose(old_pair[1], fresh)


def test_scores_computed_under_hooks_never_reach_unhooked_widgets():
    model = cw.demo_model()
    clean = analysis.head_scores(model, "previous_token")

    def flatten(pattern, hook):  # every head attends to BOS only
        out = torch.zeros_like(pattern)
        out[..., 0] = 1.0
        return out

    with model.hooks(fwd_hooks=[(lambda name: name.endswith("hook_pattern"), flatten)]):
        hooked = cw.HeadScores(model, kinds=["previous_token"])
        assert hooked.scores_of("previous_token").max() < 0.05 < 0.3 < clean.max()  # it did see the hooks
        attention = cw.AttentionPattern(model, prompt=PROMPT, layer=0)
        assert torch.allclose(attention.current_patterns()[..., 1:], torch.zeros(1))
    later = cw.HeadScores(model, kinds=["previous_token"])
    assert torch.allclose(later.scores_of("previous_token"), clean)
    attention.head = 1  # the first user action after the hooks are gone redraws
    assert torch.allclose(attention.current_patterns(), analysis.attention_patterns(model, PROMPT)[0])


def test_a_picture_drawn_under_hooks_says_so_until_it_is_redrawn_without_them():
    model = cw.demo_model()
    keep = lambda tensor, hook: tensor  # noqa: E731 (a hook that changes nothing still marks the picture)
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", keep), ("blocks.1.hook_resid_pre", keep)]):
        attention = cw.AttentionPattern(model, prompt=PROMPT, layer=0)
        scores = cw.HeadScores(model, kinds=["previous_token"])
        ov = cw.OVCircuit(model, 0, 1, tokens=[2, 3], accuracy=False)  # reads the weights: hooks do not change it
        names = [name for name, _, _ in cw.as_view(model).hook_state()]  # (the bridge's names of the hook points)
        assert len(names) == 2 and names[0] == "blocks.0.attn.hook_pattern" and names[1].startswith("blocks.1.")
        for w in (attention, scores):
            assert w.hooks_note == f"drawn under hooks: {names[0]}, {names[1]}", w
        assert ov.hooks_note == ""
    assert attention.hooks_note != ""  # nothing redrew yet: the picture on screen is still the hooked one
    attention.head = 1  # the first user action after the hooks are gone redraws, and the note goes
    assert attention.hooks_note == "" and attention.error == ""
    assert cw.AttentionPattern(model, prompt=PROMPT).hooks_note == ""


def collected(make) -> bool:
    """True when the widget `make()` builds, and its model, are freed once closed and dropped."""
    widget, model = make()
    refs = [weakref.ref(widget), weakref.ref(model)]
    widget.close()
    del widget, model
    gc.collect()
    return all(ref() is None for ref in refs)


@pytest.mark.parametrize("name", ["AttentionPattern", "OVCircuit", "Dashboard"])
def test_a_closed_widget_and_its_model_are_freed(name):
    def make():
        model = cw.demo_model()
        if name == "Dashboard":
            return cw.Dashboard(model, prompt=PROMPT), model
        kwargs = {"prompt": PROMPT} if name == "AttentionPattern" else {"accuracy": False}
        return getattr(cw, name)(model, **kwargs), model

    assert collected(make)


def test_closing_ovcircuit_cancels_its_background_pass():
    model = cw.demo_model()

    async def run() -> None:
        w = cw.OVCircuit(model, 1, 3)
        assert "computing" in w.progress
        w.close()
        # the loop stays alive while the worker runs, as in a kernel
        await asyncio.get_running_loop().run_in_executor(None, _background.wait, 30)

    asyncio.run(run())
    assert not _cache.is_cached(model, ("ov_top_k", 1, 3))
    assert cw.OVCircuit(model, 1, 3).stats[3]["top1"] is not None  # an open widget still computes it


def test_bad_prompt_and_tokens_raise_trait_errors_and_a_good_value_clears_them():
    w = cw.AttentionPattern(cw.demo_model(), prompt="abab")
    for bad in ("", "x" * 500):
        with pytest.raises(traitlets.TraitError):
            w.prompt = bad
        assert w.error and w.prompt == "abab"
    w.prompt = "abab"  # re-entering a good value clears the message
    assert w.error == ""
    with pytest.raises(traitlets.TraitError, match="out of range|vocab"):
        w.tokens = [1, 10**6]
    assert w.error
    w.tokens = [1, 2, 3]
    assert w.error == "" and w.source == "tokens" and w.current_patterns().shape[-1] == 3


def test_dashboard_with_an_empty_prompt_says_so():
    with pytest.raises(traitlets.TraitError, match="prompt is empty"):
        cw.Dashboard(cw.demo_model(), prompt="")


def test_export_checks_its_title_and_never_destroys_an_earlier_file(tmp_path, monkeypatch):
    w = cw.AttentionPattern(cw.demo_model(), prompt="abab")
    with pytest.raises(TypeError, match="title"):
        w.save_html(tmp_path / "a.html", title=5)
    good = w.save_html(tmp_path / "a.html").read_text(encoding="utf-8")
    real = type(tmp_path).write_text

    def half_then_fail(self, data, *args, **kwargs):  # a disk that fills up mid-write
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError("No space left on device")

    monkeypatch.setattr(type(tmp_path), "write_text", half_then_fail)
    with pytest.raises(OSError):
        w.save_html(tmp_path / "a.html")
    monkeypatch.undo()
    assert (tmp_path / "a.html").read_text(encoding="utf-8") == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html"]  # no partial file left behind


def test_a_widget_keeps_no_view_of_weights_edited_since():
    model = cw.demo_model()
    w = cw.OVCircuit(model, 1, 0, tokens=[2, 3], accuracy=False)
    old = weakref.ref(cw.as_view(model))  # holds a stacked copy of the weights
    for p in model.parameters():
        p.data.mul_(1.5)
    w.refresh()
    gc.collect()
    assert old() is None and w.error == ""


# ----- one run of a prompt serves every widget on it ----------------------------------------------
def counted_runs(monkeypatch) -> list[int]:
    """A list that grows by one at every model run (every run holds `HookedRuns.running`)."""
    from circuitwidgets.backends.hooked import HookedRuns

    runs: list[int] = []
    original = HookedRuns.running

    def running(self):
        runs.append(1)
        return original(self)

    monkeypatch.setattr(HookedRuns, "running", running)
    return runs


KINDS = ["previous_token", "duplicate_token", "induction", "prefix_matching"]


def test_one_run_serves_the_attribution_the_patterns_and_the_head_scores_of_a_prompt(monkeypatch):
    model = cw.demo_model()
    runs = counted_runs(monkeypatch)
    attribution = cw.LogitAttribution(model, prompt=PROMPT)
    assert len(runs) == 1
    attention = cw.AttentionPattern(model, prompt=PROMPT, layer=1)
    attention.layer = 0
    scores = cw.HeadScores(model, kinds=KINDS, tokens=attention.tokens)
    assert len(runs) == 1 and scores.computed == KINDS  # every layer's patterns, every kind: the same run
    ids = torch.tensor([attention.tokens])
    assert torch.equal(attention.current_patterns(), analysis.attention_patterns(model, PROMPT)[0])
    for kind in KINDS:  # the very numbers analysis computes from a run of its own
        assert torch.equal(scores.scores_of(kind), analysis.head_scores(model, kind, ids)), kind
    by_position = analysis.logit_attribution_by_position(model, PROMPT)
    torch.testing.assert_close(attribution.current_attribution().heads, by_position.heads, rtol=0, atol=0, equal_nan=True)

    zero_query_weights(model, 1)  # an edit: nothing that one run kept may be shown again
    runs.clear()
    attention.layer = 1
    assert len(runs) == 1 and torch.equal(attention.current_patterns(), analysis.attention_patterns(model, PROMPT)[1])
    attribution.set_state({"position": 2})  # a click: the widget sees the edit and recomputes
    fresh = analysis.logit_attribution_by_position(model, PROMPT)
    torch.testing.assert_close(attribution.current_attribution().heads, fresh.heads, rtol=0, atol=0, equal_nan=True)
    assert not torch.allclose(fresh.heads[:-1], by_position.heads[:-1])  # (the last position has no target: NaN)
    later = cw.HeadScores(model, kinds=["induction"], tokens=attention.tokens)
    assert torch.equal(later.scores_of("induction"), analysis.head_scores(model, "induction", ids))


def test_patterns_run_under_hooks_never_reach_unhooked_widgets(monkeypatch):
    model = cw.demo_model()

    def flatten(pattern, hook):  # every head attends to BOS only
        out = torch.zeros_like(pattern)
        out[..., 0] = 1.0
        return out

    with model.hooks(fwd_hooks=[(lambda name: name.endswith("hook_pattern"), flatten)]):
        hooked = cw.LogitAttribution(model, prompt=PROMPT)
        assert hooked.error == ""
    runs = counted_runs(monkeypatch)
    attention = cw.AttentionPattern(model, prompt=PROMPT, layer=1)
    scores = cw.HeadScores(model, kinds=["previous_token"], tokens=attention.tokens)
    assert len(runs) >= 1  # the hooked run's patterns were not kept: this is a run of its own
    assert torch.equal(attention.current_patterns(), analysis.attention_patterns(model, PROMPT)[1])
    clean = analysis.head_scores(model, "previous_token", torch.tensor([attention.tokens]))
    assert torch.equal(scores.scores_of("previous_token"), clean) and clean.max() > 0.3
