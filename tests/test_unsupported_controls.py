"""A control that needs what the model's backend lacks is greyed with the backend's reason, and refused with it.

The widgets declare the feature each control needs (`CircuitWidget.needs`; HeadScores per kind, from the
head-metric table); `unsupported` holds {control: reason} from `ModelView.supports`, which the view greys
(js/lib/unsupported.js) and the error contract enforces. A model whose weights stay where it runs (as on
NDIF: runs with hooks are not possible) is the case that matters.
"""

from __future__ import annotations

import pytest
import traitlets
from test_remote_weights import remote_pair

import circuitwidgets as cw


@pytest.fixture(scope="module")
def views():
    local, remote, model = remote_pair("llama")
    return local, remote, model


def test_a_remote_dashboards_ablation_toggle_is_greyed_with_the_reason_and_refuses_a_write(views):
    local, remote, _ = views
    reason = remote.supports("hooks").reason
    assert reason and "not on this machine" in reason
    dash = cw.Dashboard(remote, prompt="abcabcab", ablated=[])
    assert dash.ablation.unsupported == {"ablated": reason, "ablation_method": reason}
    with pytest.raises(traitlets.TraitError, match="not on this machine"):
        dash.ablation.ablated = [[1, 0]]
    assert dash.ablation.ablated == [] and "not on this machine" in dash.ablation.error
    dash.ablation.set_state({"ablation_method": "mean"})  # from the browser: shown, never raised
    assert dash.ablation.ablation_method == "zero"
    here = cw.Dashboard(local, prompt="abcabcab", ablated=[])
    assert here.ablation.unsupported == {}
    here.ablation.ablated = [[1, 0]]
    assert here.ablation.error == "" and here.ablation.ablated == [[1, 0]]


def test_head_scores_grey_the_kinds_the_backend_cannot_compute_and_keep_the_others(views):
    _, remote, _ = views
    w = cw.HeadScores(remote, kinds=["induction", "ov_copying", "direct_copying"], kind="induction")
    assert list(w.unsupported) == ["kind:direct_copying"] and "not on this machine" in w.unsupported["kind:direct_copying"]
    assert w.error == "" and bool(w.scores_of("ov_copying").isfinite().all())  # weight views: computed in the trace
    with pytest.raises(traitlets.TraitError, match="not on this machine"):
        w.kind = "direct_copying"
    w.kinds = ["induction"]
    assert w.unsupported == {}
    default = cw.HeadScores(remote)
    assert "direct_copying" not in default.kinds and "ov_copying" in default.kinds and default.unsupported == {}


def test_a_widget_on_a_new_model_says_anew_what_it_cannot_do(views):
    local, remote, _ = views
    w = cw.HeadScores(local, kinds=["induction", "direct_copying"])
    assert w.unsupported == {}
    w.use_model(remote)
    assert list(w.unsupported) == ["kind:direct_copying"]
    w.use_model(local)
    assert w.unsupported == {}
