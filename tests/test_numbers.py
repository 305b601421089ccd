"""Numbers are never silently wrong: NaN/Inf anywhere, float16 overflow, ties, tiny and huge weights."""

import pytest
import torch
from factories import narrow_bridge, small_bridge

from circuitwidgets.analysis import (
    attention_patterns,
    composition_baseline,
    composition_scores,
    copying_scores,
    head_scores,
    ov_eigenvalues,
    ov_top_k_accuracy,
)
from circuitwidgets.model import ModelView, as_view


def full_model():
    return narrow_bridge(normalization_type="LN", attn_only=False, d_mlp=64, act_fn="gelu", seed=1)


def ln1_weight(model):
    return model.blocks[0].ln1._original_component.weight


def mlp_out_weight(model):
    return model.blocks[1].mlp.out._original_component.weight


# ----- NaN / Inf in any parameter ----------------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_in_a_layernorm_weight_before_the_first_call_names_it(value):
    model = full_model()
    ln1_weight(model).data[3] = value
    with pytest.raises(ValueError, match=r"parameter blocks\.0\.ln1\.weight contains 1 NaN/Inf"):
        copying_scores(model)
    with pytest.raises(ValueError, match=r"blocks\.0\.ln1\.weight"):
        ModelView(model)


def test_nan_written_through_data_after_the_first_call_is_caught_at_the_next():
    model = full_model()
    copying_scores(model)
    attention_patterns(model, [[1, 2, 3]])
    mlp_out_weight(model).data[0, :2] = float("nan")
    for call in (lambda: copying_scores(model), lambda: attention_patterns(model, [[1, 2, 3]]),
                 lambda: head_scores(model, "induction"), lambda: composition_scores(model, "K")):
        with pytest.raises(ValueError, match=r"parameter blocks\.1\.mlp\.out\.weight contains 2 NaN/Inf"):
            call()
    mlp_out_weight(model).data[0, :2] = 0.0  # repaired: works again
    assert copying_scores(model).isfinite().all()


def test_nan_in_a_weight_seen_through_a_held_view_is_an_error_naming_the_layer():
    model = full_model()
    view = ModelView(model)
    view.patterns([[1, 2, 3]])
    ln1_weight(model).data.fill_(float("nan"))  # the held view is not rebuilt: its patterns check catches it
    with pytest.raises(ValueError, match=r"attention patterns of layer 0 contain NaN/Inf"):
        view.patterns([[1, 2, 3]])


def test_float16_overflow_is_an_error_naming_the_layer_not_a_nan_picture():
    model = full_model().to(torch.float16)
    assert attention_patterns(model, [[1, 2, 3, 4]]).isfinite().all()
    with torch.no_grad():
        for name in ("q", "k"):
            getattr(model.blocks[1].attn, name)._original_component.weight.mul_(300)  # finite weights
    with pytest.raises(ValueError, match=r"attention patterns of layer 1 contain NaN/Inf.*float16"):
        attention_patterns(model, [[1, 2, 3, 4]])
    with pytest.raises(ValueError, match="layer 1"):
        head_scores(model, "previous_token")


# ----- top-k ties --------------------------------------------------------------------------------
def test_top_k_ties_count_as_misses_so_a_zero_ov_circuit_scores_zero():
    model = small_bridge(seed=1)
    with torch.no_grad():
        model.blocks[1].attn.o._original_component.weight.zero_()
    assert ov_top_k_accuracy(model, 1, 0, k=(1, 5)) == (0.0, 0.0)
    assert ov_top_k_accuracy(model, 1, 0, k=64) == 1.0  # every entry is within the top 64 of 64


def test_top_k_ties_by_hand():
    model = small_bridge(seed=1, d_vocab=8, d_head=4, d_model=16)
    M = torch.zeros(8, 8)  # the full OV circuit W_E W_V W_O W_U of head (1, 0), planted below
    M[0, 0] = 2.0                # a clear hit
    M[1, 1], M[1, 2] = 1.0, 1.0  # own logit ties for first place: a miss at k=1, a hit at k=2
    M[2, 2], M[2, 3] = 1.0, 2.0  # second place: a miss at k=1, a hit at k=2
    with torch.no_grad():        # rows 3..7 are all zeros: ties everywhere, misses at k=1 and 2
        model.embed._original_component.weight.copy_(torch.eye(8, 16))  # W_E
        model.unembed._original_component.weight.copy_(torch.eye(8, 16))  # W_U^T
        v, o = model.blocks[1].attn.v._original_component.weight, model.blocks[1].attn.o._original_component.weight
        v[:4] = torch.cat([M[:, :4], torch.zeros(8, 4)]).T  # W_V of head 0 is v[:4]^T: [16, 4]
        o[:, :4] = torch.eye(16, 4)  # W_O of head 0 is o[:, :4]^T: [4, 16]
    dense = as_view(model).W_E @ as_view(model).W_V[1, 0] @ as_view(model).W_O[1, 0] @ as_view(model).W_U
    torch.testing.assert_close(dense, M)
    top1, top2 = ov_top_k_accuracy(model, 1, 0, k=(1, 2))
    assert top1 == pytest.approx(1 / 8)  # row 0 only
    assert top2 == pytest.approx(3 / 8)  # rows 0, 1 and 2


# ----- scale-invariant scores at tiny and huge scales ---------------------------------------------
@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_scale_invariant_scores_survive_tiny_and_huge_weights(scale):
    model = small_bridge(seed=4)
    reference = {kind: composition_scores(model, kind) for kind in "QKV"}
    copying = copying_scores(model)
    eigs = ov_eigenvalues(model, 1)
    top = ov_top_k_accuracy(model, 1, 2, k=(1, 5))
    baseline = composition_baseline(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(scale)
    for kind in "QKV":
        scaled = composition_scores(model, kind)
        torch.testing.assert_close(scaled, reference[kind], equal_nan=True, rtol=1e-4, atol=1e-6)
        assert scaled[0, :, 1, :].isfinite().all()
    torch.testing.assert_close(copying_scores(model), copying, rtol=1e-4, atol=1e-5)
    assert composition_baseline(model) == baseline
    assert ov_top_k_accuracy(model, 1, 2, k=(1, 5)) == top
    # eigenvalues carry the true scale (W_E, W_V, W_O, W_U each scaled): float64 holds scale**4
    torch.testing.assert_close(ov_eigenvalues(model, 1) / scale**4, eigs, rtol=1e-4, atol=1e-6 * eigs.abs().max().item())
    torch.testing.assert_close(ov_eigenvalues(model, 1, 2) / scale**4, eigs[2], rtol=1e-4, atol=1e-6 * eigs.abs().max().item())


def test_huge_finite_weights_are_not_mistaken_for_inf():
    model = narrow_bridge(seed=2)
    with torch.no_grad():
        v_weight = model.blocks[0].attn.v._original_component.weight
        v_weight.fill_(3e37)  # its float32 row sums overflow; the fingerprint falls back to float64
    view = as_view(model)
    assert not view.is_stale() and as_view(model) is view
    v_weight.data[0, 0] = 2e37
    assert view.is_stale()
