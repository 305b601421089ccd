"""The weight views of a model whose weights stay where it runs (NDIF): the widgets draw what the local ones draw.

The remote side is nnsight's ``remote="local"`` (requests serialised as for NDIF); the view is told
that its weights are not on this machine (``weights_local = False``, what a meta-device nnsight
model reports), so every weight-based analysis the widgets call goes through a trace
(`circuitwidgets.backends.remote_weights`) and no `Weights` is ever built here. Compared with the
same widgets on the same model held locally.
"""

from __future__ import annotations

import pytest
import torch
from test_remote_weights import remote_pair

import circuitwidgets as cw
from circuitwidgets import transport

IDS = [3, 5, 7, 11, 40]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def pair(request):
    return remote_pair(request.param)[:2]


def test_the_remote_view_builds_no_weights_here(pair):
    local, remote = pair
    assert not remote.supports("weights_here") and remote.supports("weight_views") and local.supports("weights_here")
    with pytest.raises(ValueError, match="not on this machine"):
        remote.W_Q  # noqa: B018 - the weights themselves are not here


def _decoded(payload):
    return transport.decode(payload)


def test_ov_circuit_widget_equals_the_local_one(pair):
    local, remote = pair
    before = remote.backend.traces
    theirs, ours = cw.OVCircuit(remote, layer=1, tokens=IDS), cw.OVCircuit(local, layer=1, tokens=IDS)
    assert theirs.error == "" and ours.error == ""
    assert remote.backend.traces > before  # computed in traces
    assert torch.allclose(_decoded(theirs.values), _decoded(ours.values), atol=1e-5, rtol=1e-5)
    copying = [row["copying"] for row in theirs.stats]
    assert copying == pytest.approx([row["copying"] for row in ours.stats], abs=1e-5)
    magnitudes = [_decoded(w.eigenvalues).norm(dim=-1).sort(-1).values for w in (theirs, ours)]
    assert torch.allclose(*magnitudes, atol=1e-4, rtol=1e-4)
    assert "where the weights are" in theirs.ov["caption"] or "where the weights are" in str(theirs.ov)


def test_qk_circuit_widget_token_and_positional_views_equal_the_local_ones(pair):
    """The positional view too: a learned-position model's (GPT-2) from W_pos there, a rotary model's (Llama) from its
    runs on repeated tokens there, averaged there; each one request, its lower triangle (or mean) coming back."""
    local, remote = pair
    before = remote.backend.traces
    theirs, ours = cw.QKCircuit(remote, layer=1, tokens=IDS, positions=48), cw.QKCircuit(local, layer=1, tokens=IDS, positions=48)
    assert theirs.error == "" and theirs.positional_note == "" == ours.positional_note
    assert remote.backend.traces == before + 2  # the token view and the positional view
    assert torch.allclose(_decoded(theirs.values), _decoded(ours.values), atol=1e-5, rtol=1e-5)
    assert theirs.positional["shape"] == ours.positional["shape"] == [4, 48, 48]
    assert theirs.positional["caption"] == ours.positional["caption"]
    drawn = [_decoded(w.positional) for w in (theirs, ours)]
    assert float((drawn[0] - drawn[1]).abs().max()) <= transport.quantisation_step(ours.positional) + 1e-6
    exact = cw.analysis.positional_qk(local, 1, 2, positions=48)
    assert torch.allclose(cw.analysis.positional_qk(remote, 1, 2, positions=48), exact, atol=1e-5)


def test_skip_trigrams_widget_equals_the_local_one(pair):
    local, remote = pair
    theirs, ours = cw.SkipTrigrams(remote, layer=1, head=0), cw.SkipTrigrams(local, layer=1, head=0)
    assert theirs.error == "" and ours.error == ""
    assert theirs.sources["ids"] == ours.sources["ids"] and theirs.trigrams["source"] == ours.trigrams["source"]
    assert theirs.trigrams["outs"] == ours.trigrams["outs"] and theirs.trigrams["destinations"] == ours.trigrams["destinations"]


def test_analysis_calls_go_through_traces(pair):
    local, remote = pair
    for call in (
        lambda v: cw.analysis.full_ov_block(v, 1, IDS),
        lambda v: cw.analysis.full_qk_block(v, 0, IDS),
        lambda v: cw.analysis.ov_eigenvalues(v, 1).abs().sort(-1).values,
        lambda v: cw.analysis.copying_scores(v),
    ):
        traces = remote.backend.traces
        theirs, ours = call(remote), call(local)
        assert remote.backend.traces == traces + 1
        scale = max(1.0, float(ours.abs().max()))
        assert float((theirs - ours).abs().max()) <= 1e-5 * scale
    assert cw.analysis.ov_top_k_accuracy(remote, 1, 0, k=(1, 5)) == cw.analysis.ov_top_k_accuracy(local, 1, 0, k=(1, 5))
    theirs, ours = (cw.analysis.skip_trigrams(v, 1, 1, 5, k=4) for v in (remote, local))
    assert theirs.outs.tolist() == ours.outs.tolist() and theirs.destinations.tolist() == ours.destinations.tolist()


def test_composition_scores_and_the_term_panel_equal_the_local_ones(pair):
    local, remote = pair
    for kind in ("Q", "K", "V"):
        theirs, ours = cw.analysis.composition_scores(remote, kind), cw.analysis.composition_scores(local, kind)
        assert torch.equal(theirs.isnan(), ours.isnan())
        assert float((theirs - ours).nan_to_num().abs().max()) <= 1e-5
    assert torch.allclose(cw.analysis.composition_scores(remote, "K", baseline=True).nan_to_num(),
                          cw.analysis.composition_scores(local, "K", baseline=True).nan_to_num(), atol=1e-5)
    theirs = cw.CompositionDiagram(remote, selected_pair=[[0, 1], [1, 2]], term_tokens=IDS)
    ours = cw.CompositionDiagram(local, selected_pair=[[0, 1], [1, 2]], term_tokens=IDS)
    assert theirs.error == "" and ours.error == ""
    block, expected = _decoded(theirs.term_values), _decoded(ours.term_values)
    assert torch.allclose(block, expected, atol=1e-5 * max(1.0, float(expected.abs().max())))
    assert theirs.term["positivity"] == pytest.approx(ours.term["positivity"], abs=1e-5)
    assert torch.allclose(_decoded(theirs.scores), _decoded(ours.scores), atol=1e-5, equal_nan=True)


def test_a_dashboard_of_the_remote_model_draws_every_view_as_the_local_one(pair):
    """Every child of a Dashboard on a model whose weights stay where it runs draws, and draws what the local one does:
    the weight views, the attention, the head scores and the logit attribution (each reduced there)."""
    local, remote = pair
    prompt = "abcdefabcdef"
    theirs, ours = cw.Dashboard(remote, prompt=prompt, layer=1, head=2), cw.Dashboard(local, prompt=prompt, layer=1, head=2)
    try:
        assert [w.error for w in theirs.widgets] == [""] * len(theirs.widgets)
        for name in ("attribution", "ov", "qk"):
            a, b = getattr(theirs, name), getattr(ours, name)
            trait = {"attribution": "attribution", "ov": "values", "qk": "values"}[name]
            drawn, want = _decoded(getattr(a, trait)), _decoded(getattr(b, trait))
            assert torch.allclose(drawn, want, atol=1e-5 * max(1.0, float(want.nan_to_num().abs().max())), equal_nan=True)
        assert theirs.attention.patterns["data"] == ours.attention.patterns["data"]
    finally:
        theirs.close()
        ours.close()
