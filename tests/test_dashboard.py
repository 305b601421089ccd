"""Dashboard without a browser: children, trait links, pair selection, export with links."""

from __future__ import annotations

import json
import re

import ipywidgets
import pytest
import torch
import traitlets
from planted import words

from circuitwidgets import transport
from circuitwidgets.analysis import attention_patterns, virtual_head_pattern
from circuitwidgets.widgets.attention import AttentionPattern
from circuitwidgets.widgets.attribution import LogitAttribution
from circuitwidgets.widgets.composition import CompositionDiagram
from circuitwidgets.widgets.dashboard import CIRCUITS_TITLE, FIRST_GLANCE_COLUMNS, Dashboard
from circuitwidgets.widgets.headscores import HeadScores
from circuitwidgets.widgets.ov import OVCircuit
from circuitwidgets.widgets.qk import QKCircuit

PROMPT = words([5, 9, 3, 7, 11, 5, 9, 3, 7, 11])


@pytest.fixture(scope="module")
def dash(planted_words):
    return Dashboard(planted_words[0], prompt=PROMPT)


def shown_in(box) -> list:
    """The circuit widgets inside `box`, at any depth, in the order drawn."""
    return [w for child in box.children for w in (shown_in(child) if isinstance(child, ipywidgets.Box) else [child])]


def test_children_are_the_widgets_in_boxes(dash):
    assert isinstance(dash, ipywidgets.VBox)
    assert isinstance(dash.head_scores, HeadScores) and isinstance(dash.composition, CompositionDiagram)
    assert isinstance(dash.attention, AttentionPattern) and dash.attention.prompt == PROMPT
    assert sorted(map(id, shown_in(dash))) == sorted(map(id, dash.widgets))
    assert isinstance(dash.ov, OVCircuit) and isinstance(dash.qk, QKCircuit)
    assert isinstance(dash.attribution, LogitAttribution) and dash.attribution.tokens == dash.attention.tokens
    assert not dash.attribution.show_prompt and dash.attribution.attribution["shape"][0] == len(dash.attention.tokens)
    assert dash.ov.tokens == dash.qk.tokens == dash.ov.mv.token_subset(prompt=PROMPT)[0]
    assert all(w.error == "" for w in dash.widgets)


def test_selecting_a_head_in_head_scores_moves_every_widget(dash):
    dash.head_scores.set_state({"layer": 1, "head": 3})  # as a click in the browser does
    for w in dash.widgets:
        assert (w.layer, w.head) == (1, 3), type(w).__name__
    # and the attention widget now draws that layer
    assert dash.attention.patterns["layer"] == 1
    dash.attention.head = 0  # any widget drives the others
    assert dash.head_scores.head == 0 and dash.composition.head == 0


def test_clicking_a_head_in_the_attribution_moves_every_widget(dash):
    dash.attribution.set_state({"layer": 1, "head": 2})  # as a click on its layer x head grid does
    for w in dash.widgets:
        assert (w.layer, w.head) == (1, 2), type(w).__name__
    assert dash.attention.patterns["layer"] == 1


def test_selecting_a_composition_edge_selects_the_later_head_and_draws_the_virtual_head(planted_words, dash):
    model, heads = planted_words
    first, second = heads["previous_token"], heads["induction"]
    dash.composition.set_state({"selected_pair": [list(first), list(second)], "layer": second[0], "head": second[1]})
    assert (dash.attention.layer, dash.attention.head) == second
    assert (dash.head_scores.layer, dash.head_scores.head) == second
    assert dash.composition.tokens == dash.attention.tokens
    got = transport.decode(dash.composition.pair_patterns)
    want = virtual_head_pattern(model, PROMPT, first, second)
    assert (got[2] - want).abs().max() <= transport.quantisation_step(dash.composition.pair_patterns) + 1e-6
    # the pair panel follows a new prompt typed into the attention widget
    dash.attention.prompt = words([4, 8, 4, 8])
    assert dash.composition.pair_patterns["shape"] == [3, 5, 5]
    assert dash.composition.str_tokens == dash.attention.str_tokens
    # and so does the logit attribution
    assert dash.attribution.tokens == dash.attention.tokens and dash.attribution.attribution["shape"][0] == 5
    assert dash.attribution.str_tokens == dash.attention.str_tokens


def test_links_are_plain_traitlets_links(dash):
    assert dash.links and all(isinstance(link, (traitlets.link, traitlets.dlink)) for link in dash.links)
    hub = dash.attention
    for w in dash.widgets:
        if w is not hub:
            assert any(getattr(link, "source", None) == (hub, "layer") and link.target == (w, "layer") for link in dash.links)
    # the same layer/head links as browser-side jslinks (ipywidgets.Link widgets), and the colour scale of
    # the views of attention weights
    js = {(link.source[0], link.source[1], link.target[0], link.target[1]) for link in dash.js_links}
    heads = {(hub, n, w, n) for w in dash.widgets if w is not hub for n in ("layer", "head")}
    scales = {(hub, "color_scale", w, "color_scale") for w in (dash.composition, dash.qk)}
    assert js == heads | scales


def test_bad_input(planted_words):
    with pytest.raises(ValueError, match="prompt="):
        Dashboard(planted_words[0])
    with pytest.raises(TypeError, match="circuits must be a bool"):
        Dashboard(planted_words[0], prompt=PROMPT, circuits="no")
    with pytest.raises(TypeError, match="attribution must be a bool"):
        Dashboard(planted_words[0], prompt=PROMPT, attribution=1)
    with pytest.raises(traitlets.TraitError, match="out of range"):
        Dashboard(planted_words[0], prompt=PROMPT, head=7)
    d = Dashboard(planted_words[0], prompt=PROMPT, circuits=False, attribution=False)
    assert d.ov is None and d.qk is None and d.attribution is None
    with pytest.raises(traitlets.TraitError):
        d.head_scores.head = 9
    assert d.attention.head == 0 and "out of range" in d.head_scores.error


def test_save_html_holds_every_widget_and_the_head_links(dash, tmp_path):
    page = dash.save_html(tmp_path / "dash.html").read_text()
    assert not re.search(r"""(src|href)=["']https?://""", page)
    state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
    kinds = [w["_cw_view"] for w in state["widgets"]]
    assert kinds == ["headscores", "attention", "composition", "attribution", "ov", "qk"]
    # the first glance as a grid of the same columns, the circuits folded under their title
    first, more = state["layout"]["children"]
    assert first["box"] == "grid" and first["columns"] == FIRST_GLANCE_COLUMNS and first["class"] == "cw-dashboard-first"
    (fold,) = more["children"]
    assert more["class"] == "cw-dashboard-more"
    assert (fold["box"], fold["title"], fold["open"]) == ("details", CIRCUITS_TITLE, False)
    assert fold["children"][0]["box"] == "grid" and fold["children"][0]["children"] == [{"widget": 4}, {"widget": 5}]
    assert [w["compact"] for w in state["widgets"]] == [True, True, True, True, False, False]
    hub = kinds.index("attention")
    linked = {(j, a) for (i, a), (j, b) in state["links"] if i == hub and a == b}
    for j, kind in enumerate(kinds):
        if j != hub:
            assert (j, "layer") in linked and (j, "head") in linked, kind


def test_in_a_running_loop_scores_follow_the_first_picture(planted_words):
    import asyncio

    async def build():
        d = Dashboard(planted_words[0], prompt=PROMPT, circuits=False)
        first = (d.head_scores.scores, d.composition.scores, d.head_scores.busy, d.composition.busy)
        assert d.attention.patterns  # the attention pattern is there at once
        await asyncio.sleep(0.05)
        for _ in range(100):
            if d.head_scores.scores and d.composition.scores:
                break
            await asyncio.sleep(0.05)
        return d, first

    d, (hs0, comp0, hs_busy, comp_busy) = asyncio.run(build())
    assert hs0 == {} and comp0 == {} and hs_busy and comp_busy
    assert d.head_scores.computed and "K" in d.composition.scores["computed"]
    assert not d.head_scores.busy and not d.composition.busy
    assert d.composition.baseline_value < d.composition.threshold  # the default threshold, set once computed


def test_marimo_shows_every_child_in_the_same_grid(dash):
    shown = dash._display_()  # what marimo displays for a cell ending in `dash`
    html = shown.text
    assert html.count("<marimo-anywidget") == len(dash.widgets) == 6
    # each child once, in the order drawn: head scores, attention, composition, attribution, then OV, QK folded
    places = [html.index(f'data-model-id=\'&quot;{w.model_id}&quot;\'') for w in shown_in(dash)]
    assert places == sorted(places)
    assert "flex: 0.8" in html and "flex: 1.2" in html and "flex: 1.05" in html  # the first glance's columns
    assert html.count("<marimo-accordion") == 1 and html.index("<marimo-accordion") < places[4]
    full = Dashboard(dash.model, prompt=PROMPT, compact=False)._display_().text
    assert full.count('flex-direction: row') == 2 and "<marimo-accordion" not in full  # head scores | composition, OV | QK


def test_the_first_glance_is_compact_and_the_circuits_folded(dash):
    first, more = dash.children
    assert first.layout.grid_template_columns == FIRST_GLANCE_COLUMNS and "cw-dashboard-first" in first._dom_classes
    assert shown_in(first) == [dash.head_scores, dash.attention, dash.composition, dash.attribution]
    assert all(w.compact for w in shown_in(first))
    assert isinstance(more, ipywidgets.Accordion) and more.selected_index is None and more.get_title(0) == CIRCUITS_TITLE
    assert shown_in(more) == [dash.ov, dash.qk] and not dash.ov.compact and not dash.qk.compact


def test_compact_false_keeps_every_view_at_full_size_in_rows(planted_words):
    d = Dashboard(planted_words[0], prompt=PROMPT, compact=False, circuits=False)
    assert not d.compact and not any(w.compact for w in d.widgets)
    assert [shown_in(c) if isinstance(c, ipywidgets.Box) else c for c in d.children] == [
        [d.head_scores, d.composition], d.attention, d.attribution]
    with pytest.raises(TypeError, match="compact must be a bool"):
        Dashboard(planted_words[0], prompt=PROMPT, compact="yes")
    d.close()


def test_in_a_running_loop_only_the_attention_pattern_is_drawn_before_the_cell_returns(planted_words, monkeypatch):
    import asyncio

    from circuitwidgets.backends.hooked import HookedRuns
    from circuitwidgets.widgets import _background, _cache

    model = planted_words[0]
    _cache.clear(model)
    runs: list[int] = []
    original = HookedRuns.running
    monkeypatch.setattr(HookedRuns, "running", lambda self: runs.append(1) or original(self))
    pending_at_submit: list[list[str]] = []  # the children still to draw when OV's top-k pass is handed to the worker
    submit = _background.submit
    monkeypatch.setattr(_background, "submit", lambda *a, **k: pending_at_submit.append(
        [type(w).__name__ for w in d.widgets if w._start_pending or (w.busy and w is not d.ov)]) or submit(*a, **k))
    d = None

    async def build():
        nonlocal d
        d = Dashboard(model, prompt=PROMPT, layer=0)
        first = {type(w).__name__: (w.busy, w._start_pending) for w in d.widgets}
        assert d.attention.patterns["layer"] == 0 and not d.attention.busy  # the first picture
        assert d.attribution.attribution == {} and d.ov.ov == {} and d.qk.qk == {}
        for _ in range(200):  # each child is drawn in turn once the cell has returned
            if not any(w._start_pending or w.busy for w in d.widgets):
                break
            await asyncio.sleep(0.02)
        await asyncio.get_running_loop().run_in_executor(None, _background.wait)
        return d, first

    d, first = asyncio.run(build())
    assert all(first[name] == (True, True) for name in first if name != "AttentionPattern"), first
    assert pending_at_submit == [[]]  # the long pass starts once every other picture is drawn
    assert all(w.error == "" and not w.busy for w in d.widgets)
    assert d.attribution.attribution["shape"][0] == len(d.attention.tokens) and d.ov.ov and d.qk.qk
    before = len(runs)
    d.attention.layer = 1  # every layer's patterns came with the attribution's run: no run of its own
    assert len(runs) == before and d.attention.patterns["layer"] == 1
    assert torch.equal(d.attention.current_patterns(), attention_patterns(model, PROMPT)[1])
    d.close()
