"""Composition scores against dense products, TransformerLens, a planted circuit and random baselines."""

import math

import pytest
import torch
from factories import small_bridge
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitwidgets.analysis import composition_baseline, composition_scores
from circuitwidgets.model import as_view
from circuitwidgets.weight_views import r_factor as _r_factor


def three_layers(**overrides):
    return small_bridge(**{"n_layers": 3, **overrides})


@pytest.fixture(scope="module")
def model():
    return three_layers()


def brute_force(model, kind) -> torch.Tensor:
    """Dense float64 ``||W_A W_B|| / (||W_A|| ||W_B||)`` for every pair, NaN unless layer1 < layer2."""
    view = as_view(model)
    W_Q, W_K, W_V, W_O = (getattr(view, n).double() for n in ("W_Q", "W_K", "W_V", "W_O"))
    ov = W_V @ W_O  # [L, H, d_model, d_model]
    qk = W_Q @ W_K.mT
    reader = {"Q": qk, "K": qk.mT, "V": ov}[kind]
    L, H = ov.shape[:2]
    out = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
    for l1 in range(L):
        for h1 in range(H):
            for l2 in range(l1 + 1, L):
                for h2 in range(H):
                    a, b = ov[l1, h1], reader[l2, h2]
                    out[l1, h1, l2, h2] = torch.linalg.matrix_norm(a @ b) / (
                        torch.linalg.matrix_norm(a) * torch.linalg.matrix_norm(b)
                    )
    return out.float()


def defined(n_layers, n_heads) -> torch.Tensor:
    layer = torch.arange(n_layers)
    return (layer[:, None, None, None] < layer[None, None, :, None]).expand(n_layers, n_heads, n_layers, n_heads)


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_scores_equal_dense_brute_force_and_are_nan_where_undefined(model, kind):
    ours = composition_scores(model, kind)
    assert ours.shape == (3, 4, 3, 4) and ours.dtype == torch.float32
    mask = defined(3, 4)
    assert torch.equal(~ours.isnan(), mask)
    torch.testing.assert_close(ours[mask], brute_force(model, kind)[mask], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("extra", [{}, {"n_key_value_heads": 2}], ids=["mha", "gqa"])
def test_scores_equal_transformer_lens_all_composition_scores(extra):
    m = three_layers(seed=5, **extra)
    mask = defined(3, 4)
    for kind in "QKV":
        ours = composition_scores(m, kind)
        theirs = m.all_composition_scores(kind).scores.detach()  # zeros where undefined
        torch.testing.assert_close(ours[mask], theirs[mask], rtol=1e-4, atol=1e-6)
        if extra:  # GQA: K/V heads are shared, so the dense reference must expand them too
            torch.testing.assert_close(ours[mask], brute_force(m, kind)[mask], rtol=1e-4, atol=1e-6)


def test_planted_previous_token_to_induction_k_composition_is_the_largest_pair(planted):
    planted, heads = planted
    scores = composition_scores(planted, "K")
    (l1, h1), (l2, h2) = heads["previous_token"], heads["induction"]
    top = scores[l1, h1, l2, h2]
    others = scores.clone()
    others[l1, h1, l2, h2] = float("nan")
    assert top > torch.nan_to_num(others, nan=-1.0).max() + 0.03
    # by construction the product is a scaled identity on 32 of 128 dimensions: 1/sqrt(32)
    assert top == pytest.approx(1 / math.sqrt(32), rel=1e-4)
    assert top - composition_baseline(planted) > 0.05
    # its queries read token identity, not the previous-token head's output
    assert composition_scores(planted, "Q")[l1, h1, l2, h2] < 0.01


def test_baseline_matches_random_matrices_and_is_subtracted(model):
    base = composition_baseline(model)
    # E[score^2] = 1/d_model exactly for rotation-invariant random heads; the mean sits just below
    assert 0.115 < base <= 1 / math.sqrt(64)
    assert composition_baseline(model, kind="V") == base  # same shapes, same seed, same value
    assert composition_baseline(small_bridge(d_model=256, d_head=32)) == pytest.approx(1 / 16, rel=0.05)
    raw, corrected = composition_scores(model, "Q"), composition_scores(model, "Q", baseline=True)
    mask = defined(3, 4)
    torch.testing.assert_close(corrected[mask], raw[mask] - base)
    assert corrected.isnan().equal(raw.isnan())
    # boot_native initialises heads at random: their scores centre on the baseline
    assert abs(raw[mask].mean().item() - base) < 0.015
    assert composition_baseline(model, seed=1) != base


def test_all_zero_head_scores_nan_not_zero(model):
    m = three_layers(seed=2)
    with torch.no_grad():
        weight = dict(m.named_parameters())["layers.0._original_component.attn._original_component.v._original_component.weight"]
        weight[16:32] = 0.0  # head 1 of layer 0 writes nothing
    scores = composition_scores(m, "V")
    assert scores[0, 1].isnan().all()
    assert not scores[0, 0, 1:].isnan().any()


def scale_head(model, layer, head, part, factor):
    """Multiply one head's rows of the q/k/v weight (or columns of o) by `factor`, in place."""
    attn = f"layers.{layer}._original_component.attn._original_component."
    weight = dict(model.named_parameters())[f"{attn}{part}._original_component.weight"]
    with torch.no_grad():
        if part == "o":
            weight[:, 16 * head : 16 * (head + 1)] *= factor
        else:
            weight[16 * head : 16 * (head + 1)] *= factor


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 1000),
    layer=st.integers(0, 2),
    head=st.integers(0, 3),
    part=st.sampled_from(["q", "k", "v", "o"]),
    factor=st.sampled_from([-3.0, 0.1, 2.0, 50.0]),
    kind=st.sampled_from(["Q", "K", "V"]),
)
def test_scores_are_in_range_and_invariant_to_scaling_a_head(seed, layer, head, part, factor, kind):
    m = three_layers(seed=seed)
    before = composition_scores(m, kind)
    mask = defined(3, 4)
    assert ((before[mask] >= 0) & (before[mask] <= 1 + 1e-6)).all()
    name = "W_" + part.upper()
    weight_before = getattr(as_view(m), name)[layer, head].clone()
    scale_head(m, layer, head, part, factor)
    # the view must see the new weights, or the invariance below would hold vacuously
    torch.testing.assert_close(getattr(as_view(m), name)[layer, head], factor * weight_before)
    after = composition_scores(m, kind)
    torch.testing.assert_close(after[mask], before[mask], rtol=2e-4, atol=1e-6)


def test_r_factor_reproduces_every_gram_matrix_rank_deficient_and_zero_included():
    gen = torch.Generator().manual_seed(0)
    full = torch.randn(64, 16, generator=gen)
    deficient = full.clone()
    deficient[:, 8:] = deficient[:, :8]  # rank 8: Cholesky refuses, QR takes over
    tiny = full * 1e-6  # its Gram matrix ~1e-12: still positive definite in float32
    Y = torch.stack([full, deficient, torch.zeros(64, 16), tiny])
    R = _r_factor(Y)
    assert torch.equal(R, R.triu())
    gram = Y.mT @ Y
    for i in range(4):
        torch.testing.assert_close(R[i].mT @ R[i], gram[i], rtol=1e-5, atol=1e-5 * gram[i].abs().max().item())


def test_scores_follow_an_edit_of_the_writers_after_every_kind_was_scored():
    # the writer factors are formed once per weight state and shared by Q, K and V: an edit must reach them
    m = three_layers(seed=7)
    mask = defined(3, 4)
    for kind in "QKV":
        composition_scores(m, kind)
    with torch.no_grad():
        o = dict(m.named_parameters())["layers.0._original_component.attn._original_component.o._original_component.weight"]
        o.add_(torch.randn(o.shape, generator=torch.Generator().manual_seed(1)))
        v = dict(m.named_parameters())["layers.1._original_component.attn._original_component.v._original_component.weight"]
        v.mul_(torch.linspace(0.1, 3.0, v.shape[0])[:, None])  # not a per-head scale: the scores change
    for kind in "QKV":
        torch.testing.assert_close(composition_scores(m, kind)[mask], brute_force(m, kind)[mask], rtol=1e-4, atol=1e-6)


def test_half_precision_layer_by_layer_equals_float32_all_layers_at_once():
    half = three_layers(seed=8).to(torch.bfloat16)  # weights turned to float32 one layer at a time
    single = three_layers(seed=8).to(torch.bfloat16).float()  # the same weights, every layer at once
    for kind in "QKV":
        torch.testing.assert_close(composition_scores(half, kind), composition_scores(single, kind), equal_nan=True)


def test_composition_leaves_the_vocabulary_weights_unfolded_until_asked_and_the_model_alone():
    m = three_layers(seed=9, normalization_type="LN")
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "ln_final" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
    before = {name: p.detach().clone() for name, p in m.named_parameters()}
    composition_scores(m, "K")
    view = as_view(m)
    weights = view.backend.weights()
    assert weights._W_E is None and weights._W_U is None  # never needed: never formed (two vocabulary-sized copies)
    w, b = m.ln_final.weight.detach(), m.ln_final.bias.detach()
    scaled = m.W_U.detach() * w[:, None]
    torch.testing.assert_close(view.W_U, scaled - scaled.mean(0, keepdim=True))
    torch.testing.assert_close(view.b_U, m.b_U.detach() + b @ m.W_U.detach())
    torch.testing.assert_close(view.W_E, m.W_E.detach() - m.W_E.detach().mean(-1, keepdim=True))
    assert view.W_U is view.W_U and view.W_E is view.W_E  # formed once
    for name, p in m.named_parameters():
        assert torch.equal(p, before[name]), name


def test_unknown_kind_is_refused(model):
    with pytest.raises(ValueError, match=r"kind must be one of 'Q', 'K', 'V'; got 'q'"):
        composition_scores(model, "q")


def test_bad_baseline_arguments_are_refused(model):
    with pytest.raises(TypeError, match="baseline must be a bool"):
        composition_scores(model, "K", baseline="yes")
    with pytest.raises(ValueError, match="samples=1 must be >= 2"):
        composition_baseline(model, samples=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        composition_baseline(model, kind="QK")
