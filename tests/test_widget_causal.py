"""Causal widgets without a browser: Patching's attribution mode (estimates, the clicked head exact) and the
composition diagram's causal edges (each edge's path-patching effect), payloads equal to the analysis."""

from __future__ import annotations

import pytest
import torch
import traitlets

import circuitwidgets as cw
from circuitwidgets import analysis, transport
from circuitwidgets.analysis import activation_patching as ap


@pytest.fixture(scope="module")
def prompts(demo):
    clean = analysis.repeated_random_tokens(demo, seq_len=6, batch=4, seed=1)
    corrupted = torch.cat([clean[:, :7], clean[:, 7:].roll(1, 0)], 1)
    return clean, corrupted


def test_attribution_mode_shows_the_estimates_and_the_clicked_heads_exactly(demo, prompts):
    clean, corrupted = prompts
    w = cw.Patching(demo, clean, corrupted, method="attribution", site="k", estimator="atp*", layer=0, head=1)
    est = analysis.attribution_patching(demo, clean, corrupted, "loss", "k", method="atp*")
    grid = transport.decode(w.patching)
    assert w.patching["method"] == "attribution" and w.patching["estimator"] == "atp*"
    assert torch.allclose(grid[0], est.values) and torch.allclose(grid[1], est.normalised)
    exact = ap.patching(demo, clean, corrupted, "loss", "k", progress=False).values
    assert w.verified["heads"] == [[0, 1]] and w.verified["values"] == pytest.approx([float(exact[0, 1])], abs=1e-5)
    w.set_state({"layer": 1, "head": 3})  # a click in the browser: that head is patched exactly
    assert w.error == "" and w.verified["heads"] == [[0, 1], [1, 3]]
    assert w.verified["values"][1] == pytest.approx(float(exact[1, 3]), abs=1e-5)
    gap = w.patching["clean_value"] - w.patching["corrupted_value"]
    assert w.verified["normalised"][1] == pytest.approx((float(exact[1, 3]) - w.patching["corrupted_value"]) / gap, abs=1e-5)
    assert float(grid[0][1, 3]) != pytest.approx(float(exact[1, 3]), abs=1e-6)  # an estimate, and the exact value beside it
    w.by_position = True  # by position: the selected head's exact value at every position
    assert w.patching["shape"] == [2, 2, 4, 13] and len(w.verified["values"][0]) == 13
    by_position = ap.patching(demo, clean, corrupted, "loss", "k", True, heads=[(1, 3)], progress=False).values[1, 3]
    assert w.verified["values"][0] == pytest.approx(by_position.tolist(), abs=1e-5)
    w.method = "exact"
    assert w.verified == {} and w.patching["method"] == "exact"
    assert torch.allclose(transport.decode(w.patching)[0], ap.patching(demo, clean, corrupted, "loss", "k", True,
                                                                        progress=False).values)


def test_attribution_mode_is_refused_where_the_backend_cannot_take_gradients(demo, monkeypatch):
    w = cw.Patching(demo)
    view = w.mv

    def no_gradients(feature):
        return cw.model.Support("no gradients here (for the test)") if feature == "gradients" else cw.model.Support()

    monkeypatch.setattr(view, "supports", no_gradients)
    monkeypatch.setattr(type(w), "mv", property(lambda self: view))
    with pytest.raises(traitlets.TraitError, match=r"method='attribution': no gradients here \(for the test\)"):
        w.method = "attribution"
    assert w.method == "exact"


def test_causal_edges_are_path_patching_of_every_edge_of_the_layer_pair(demo, prompts):
    clean, corrupted = prompts
    second = range(7, 12)
    w = cw.CompositionDiagram(demo, "K", clean=clean, corrupted=corrupted, positions=second)
    assert w.causal["computed"] == {"Q": [], "K": [], "V": []} and w.causal_layers == [0, 1]
    w.edge_value = "causal"
    assert w.error == "" and w.causal["computed"]["K"] == [[0, 1]]
    effects = analysis.composition_paths(demo, clean, corrupted, "loss", "K", 0, 1, positions=second)
    got = transport.decode(w.causal)
    assert torch.allclose(got[0, 1, 0, :, 1, :], effects, atol=1e-6)
    gap = w.causal["clean_value"] - w.causal["corrupted_value"]
    assert torch.allclose(got[1, 1, 0, :, 1, :], effects / gap, atol=1e-6)
    assert got[:, [0, 2]].isnan().all() and got[:, 1, 1].isnan().all()  # only what was computed
    one = analysis.path_patching(demo, clean, corrupted, "loss", [(0, 3)], [(1, 2, "k")], positions=second)
    assert float(got[0, 1, 0, 3, 1, 2]) == pytest.approx(one.value - one.corrupted, abs=1e-5)
    assert w.causal["clean_value"] == pytest.approx(one.clean) and w.causal["corrupted_value"] == pytest.approx(one.corrupted)
    w.kind = "V"  # another kind: its edges computed in turn, the K edges kept
    assert w.causal["computed"] == {"Q": [], "K": [[0, 1]], "V": [[0, 1]]}
    w.edge_value = "weights"
    assert w.edge_value == "weights" and w.causal["computed"]["V"] == [[0, 1]]
    noising = cw.CompositionDiagram(demo, "K", clean=clean, corrupted=corrupted, positions=second, direction="noising",
                                    edge_value="causal")
    got = transport.decode(noising.causal)
    effects = analysis.composition_paths(demo, clean, corrupted, "loss", "K", 0, 1, "noising", positions=second)
    carried = effects / (noising.causal["corrupted_value"] - noising.causal["clean_value"])  # of the way to corrupted
    assert noising.causal["direction"] == "noising" and torch.allclose(got[1, 1, 0, :, 1, :], carried, atol=1e-6)


def test_causal_edges_need_prompts_and_a_layer_pair(demo):
    w = cw.CompositionDiagram(demo, "K")
    assert "reason" in w.causal and "data" not in w.causal
    with pytest.raises(traitlets.TraitError, match="causal edges need clean= and corrupted= prompts"):
        w.edge_value = "causal"
    with pytest.raises(traitlets.TraitError, match=r"causal_layers must be two attention layers \[l1, l2\] with l1 < l2"):
        w.causal_layers = [1, 0]
    with pytest.raises(ValueError, match="give both clean= and corrupted="):
        cw.CompositionDiagram(demo, clean=[[0, 1, 2]])
    with pytest.raises(ValueError, match="must have one shape"):
        cw.CompositionDiagram(demo, clean=[[0, 1, 2]], corrupted=[[0, 1]])


def test_the_dashboard_passes_its_prompts_to_the_causal_edges(demo, prompts):
    clean, corrupted = prompts
    d = cw.Dashboard(demo, prompt="abcabc", clean=clean, corrupted=corrupted, metric="loss", attribution=False,
                     circuits=False)
    d.composition.edge_value = "causal"
    assert d.composition.error == "" and d.composition.causal["computed"]["K"] == [[0, 1]]
    d.close()
