"""Factored matrices and the QK / OV circuits of one head, against dense brute force and TransformerLens."""

import math

import pytest
import torch
from factories import small_bridge
from hypothesis import given, settings
from hypothesis import strategies as st
from transformer_lens import FactoredMatrix

from circuitwidgets.analysis import (
    Factored,
    attention_patterns,
    full_ov_circuit,
    full_qk_circuit,
    ov_circuit,
    positional_qk,
    qk_circuit,
)
from circuitwidgets.model import as_view


@pytest.fixture(scope="module")
def model():
    return small_bridge()


def factors(m, r, n, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(m, r, generator=gen, dtype=dtype), torch.randn(r, n, generator=gen, dtype=dtype)


# ----- Factored ------------------------------------------------------------------------------
def test_factored_pieces_equal_the_dense_product():
    A, B = factors(30, 4, 20)
    f, dense = Factored(A, B), A @ B
    assert f.shape == (30, 20) and f.rank_bound == 4
    torch.testing.assert_close(f.dense(), dense)
    torch.testing.assert_close(f.rows(3), dense[3])
    torch.testing.assert_close(f.rows([0, 7, 29]), dense[[0, 7, 29]])
    torch.testing.assert_close(f.rows(torch.tensor([5, 5])), dense[[5, 5]])
    torch.testing.assert_close(f.rows(slice(2, 9)), dense[2:9])
    mask = torch.arange(30) % 3 == 0
    torch.testing.assert_close(f.rows(mask), dense[mask])
    torch.testing.assert_close(f.columns(19), dense[:, 19])
    torch.testing.assert_close(f.columns([1, 2]), dense[:, [1, 2]])
    torch.testing.assert_close(f.block([4, 8], [0, 3, 6]), dense[[4, 8]][:, [0, 3, 6]])
    torch.testing.assert_close(f.block(4, 6), dense[4, 6])
    torch.testing.assert_close(f.norm(), torch.linalg.matrix_norm(dense))
    torch.testing.assert_close(f.T.dense(), dense.T)


def test_top_k_of_rows_and_columns_match_dense_topk():
    A, B = factors(25, 3, 40, seed=1)
    f, dense = Factored(A, B), A @ B
    values, indices = f.top_k(5, row=7)
    expected = dense[7].topk(5)
    torch.testing.assert_close(values, expected.values)
    assert torch.equal(indices, expected.indices)
    smallest = f.top_k(4, column=[2, 9], largest=False)
    torch.testing.assert_close(smallest.values, dense[:, [2, 9]].T.topk(4, largest=False).values)
    assert smallest.indices.shape == (2, 4)
    one_column = f.top_k(3, column=9)
    assert torch.equal(one_column.indices, dense[:, 9].topk(3).indices)


def test_trace_and_eigenvalues_come_from_the_small_side():
    A, B = factors(40, 5, 40, seed=2)
    f, dense = Factored(A, B), A @ B
    torch.testing.assert_close(f.trace(), dense.trace())
    ours = f.eigenvalues()
    assert ours.shape == (5,) and ours.is_complex()
    full = torch.linalg.eigvals(dense)
    top = full[full.abs().argsort(descending=True)][:5]
    # same multiset: every eigenvalue of ours has a partner in the dense spectrum
    assert (ours[:, None] - top[None]).abs().min(dim=1).values.max() < 1e-8
    torch.testing.assert_close(ours.abs(), top.abs())
    with pytest.raises(ValueError, match="square"):
        Factored(*factors(4, 2, 5)).trace()


def test_algebra_keeps_the_product_and_stays_thin():
    A, B = factors(12, 2, 10, seed=3)
    C, D = factors(10, 6, 8, seed=4)
    f, g = Factored(A, B), Factored(C, D)
    fg = f @ g
    assert fg.rank_bound == 2
    torch.testing.assert_close(fg.dense(), (A @ B) @ (C @ D))
    gf = g.T @ f.T
    assert gf.rank_bound == 2
    torch.testing.assert_close(gf.dense(), ((A @ B) @ (C @ D)).T)
    wide = Factored(*factors(12, 9, 10, seed=5))
    assert (wide @ Factored(C[:, :3], D[:3])).rank_bound == 3
    M = torch.randn(10, 3, dtype=torch.float64)
    torch.testing.assert_close((f @ M).dense(), A @ B @ M)
    v = torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(f @ v, A @ B @ v)
    w = torch.randn(12, dtype=torch.float64)
    torch.testing.assert_close(w @ f, w @ A @ B)
    L = torch.randn(3, 12, dtype=torch.float64)
    torch.testing.assert_close((L @ f).dense(), L @ A @ B)
    other = Factored(*factors(12, 3, 10, seed=6))
    total = f + other
    assert total.rank_bound == 5
    torch.testing.assert_close(total.dense(), A @ B + other.dense())
    torch.testing.assert_close((2.5 * f).dense(), 2.5 * A @ B)
    torch.testing.assert_close((f / 4).dense(), A @ B / 4)
    torch.testing.assert_close((-f).dense(), -(A @ B))


def test_factored_agrees_with_transformer_lens_factored_matrix():
    A, B = factors(50, 6, 50, seed=7, dtype=torch.float32)
    ours, theirs = Factored(A, B), FactoredMatrix(A, B)
    torch.testing.assert_close(ours.norm(), theirs.norm())
    torch.testing.assert_close(ours.dense(), theirs.AB)
    their_eigs = theirs.eigenvalues.to(torch.complex128)
    assert (ours.eigenvalues()[:, None] - their_eigs[None]).abs().min(dim=1).values.max() < 1e-3


def test_dense_refuses_vocabulary_sized_results():
    big = Factored(torch.zeros(10_000, 1), torch.zeros(1, 10_000))  # 1e8 entries, never allocated
    with pytest.raises(ValueError, match="refusing to materialise a dense 10000 x 10000"):
        big.dense()
    with pytest.raises(ValueError, match="refusing"):
        big.rows(slice(None))
    with pytest.raises(ValueError, match="refusing"):
        big.columns(torch.arange(6000))
    assert big.rows([1, 2]).shape == (2, 10_000)
    assert Factored(torch.zeros(300, 1), torch.zeros(1, 300)).dense(max_entries=90_000).shape == (300, 300)


def test_factored_rejects_bad_factors_and_indices():
    with pytest.raises(TypeError, match="left must be a torch.Tensor"):
        Factored([[1.0]], torch.ones(1, 1))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        Factored(torch.ones(3, 2), torch.ones(3, 3))
    with pytest.raises(ValueError, match="NaN/Inf"):
        Factored(torch.ones(3, 2), torch.tensor([[1.0, float("nan"), 0.0]] * 2))
    f = Factored(*factors(5, 2, 6))
    with pytest.raises(ValueError, match="row index 5 is out of range: 0..4"):
        f.rows(5)
    with pytest.raises(ValueError, match="column index -1 is out of range"):
        f.columns([-1])
    with pytest.raises(ValueError, match="exactly one"):
        f.top_k(2)
    with pytest.raises(ValueError, match="k=7 is out of range"):
        f.top_k(7, row=0)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 12), r=st.integers(1, 5), n=st.integers(1, 12), seed=st.integers(0, 10_000))
def test_factored_properties(m, r, n, seed):
    A, B = factors(m, r, n, seed=seed)
    f = Factored(A, B)
    assert f.shape == (m, n)
    assert f.dense().shape == (m, n)
    torch.testing.assert_close(f.norm(), torch.linalg.matrix_norm(A @ B), atol=1e-9, rtol=1e-9)
    square = Factored(A, A.T.contiguous())  # A A^T: m x m
    eigs = square.eigenvalues()
    torch.testing.assert_close(eigs.sum().real, square.trace(), atol=1e-8, rtol=1e-8)
    assert eigs.imag.abs().max() < 1e-8  # A A^T is symmetric PSD: real, non-negative spectrum
    assert eigs.real.min() > -1e-8


# ----- circuits of one head ------------------------------------------------------------------
def test_qk_and_ov_circuits_equal_transformer_lens(model):
    for layer, head in [(0, 0), (1, 3)]:
        torch.testing.assert_close(qk_circuit(model, layer, head).dense(), model.QK[layer, head].AB.detach())
        torch.testing.assert_close(ov_circuit(model, layer, head).dense(), model.OV[layer, head].AB.detach())
    scaled = qk_circuit(model, 1, 2, scaled=True).dense()
    torch.testing.assert_close(scaled, model.QK[1, 2].AB.detach() / math.sqrt(16))


def test_full_circuits_equal_brute_force(model):
    W_E, W_U = model.W_E.detach().double(), model.W_U.detach().double()
    W_Q, W_K, W_V, W_O = (getattr(model, n)[1, 2].detach().double() for n in ("W_Q", "W_K", "W_V", "W_O"))
    qk = full_qk_circuit(model, 1, 2)
    assert qk.shape == (64, 64) and qk.rank_bound == 16
    torch.testing.assert_close(qk.dense().double(), W_E @ W_Q @ W_K.T @ W_E.T, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(full_qk_circuit(model, 1, 2, scaled=True).dense(), qk.dense() / 4)
    ov = full_ov_circuit(model, 1, 2)
    torch.testing.assert_close(ov.dense().double(), W_E @ W_V @ W_O @ W_U, rtol=1e-4, atol=1e-5)
    # a 1-D row for one token, and the token subsets a widget asks for
    torch.testing.assert_close(ov.rows(9).double(), (W_E @ W_V @ W_O @ W_U)[9], rtol=1e-4, atol=1e-5)


def test_gqa_heads_use_their_shared_key_and_value_weights():
    gqa = small_bridge(n_key_value_heads=2)
    params = dict(gqa.named_parameters())
    attn = "layers.1._original_component.attn._original_component."
    k_weight = params[attn + "k._original_component.weight"].detach()  # [n_kv * d_head, d_model]
    v_weight = params[attn + "v._original_component.weight"].detach()
    q_weight = params[attn + "q._original_component.weight"].detach()
    W_O = gqa.W_O[1].detach()
    for head in range(4):
        kv = head // 2  # heads 0, 1 share K/V head 0; heads 2, 3 share K/V head 1
        W_Q = q_weight[16 * head : 16 * (head + 1)].T
        W_K = k_weight[16 * kv : 16 * (kv + 1)].T
        W_V = v_weight[16 * kv : 16 * (kv + 1)].T
        torch.testing.assert_close(qk_circuit(gqa, 1, head).dense(), W_Q @ W_K.T)
        torch.testing.assert_close(ov_circuit(gqa, 1, head).dense(), W_V @ W_O[head])


def test_positional_qk_is_the_models_own_pattern_on_position_only_input():
    model = small_bridge(seed=3)
    with torch.no_grad():  # zero token embeddings and biases: the residual is W_pos alone
        for name, param in model.named_parameters():
            if name.startswith("tok_embed") or name.endswith("bias"):
                param.zero_()
    _, cache = model.run_with_cache(torch.zeros(1, 24, dtype=torch.long))
    pattern = cache["blocks.0.attn.hook_pattern"][0]
    for head in range(4):
        ours = positional_qk(model, 0, head)
        assert ours.shape == (24, 24)
        torch.testing.assert_close(ours, pattern[head], rtol=1e-5, atol=1e-6)
    scores = positional_qk(model, 0, 1, softmax=False)
    assert scores.triu(1)[torch.ones(24, 24).triu(1).bool()].isnan().all()
    assert not scores.tril().isnan().any()


def test_positional_qk_of_the_planted_previous_token_head_is_a_sub_diagonal_stripe(planted):
    planted, heads = planted
    pattern = positional_qk(planted, *heads["previous_token"])
    i = torch.arange(1, pattern.shape[0])
    assert pattern[i, i - 1].min() > 0.99
    torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[0]))
    other = positional_qk(planted, 0, 0)  # a small random head: close to uniform over the past
    assert other[i, i - 1].max() < 0.6


def test_positional_qk_of_a_rotary_model_is_its_pattern_on_repeated_tokens():
    rotary = small_bridge(positional_embedding_type="rotary", n_ctx=40)
    view = as_view(rotary)
    assert view.has_rotary and not view.has_learned_positions
    pattern = positional_qk(rotary, 1, None, positions=30)
    assert pattern.shape == (4, 30, 30)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(4, 30))
    assert float(pattern.triu(1).abs().max()) == 0.0  # causal
    ids, _ = view.token_subset()
    runs = [attention_patterns(rotary, torch.tensor([t] * 30))[1] for t in ids[:8]]
    torch.testing.assert_close(pattern, torch.stack(runs).mean(0))
    torch.testing.assert_close(positional_qk(rotary, 1, 2, positions=30), pattern[2])
    # One repeated token: scores depend on the offset alone, so log A[i, j] - log A[i, i] = f(i - j) for every i.
    single = runs[0].double().log()
    offsets = single - single.diagonal(dim1=-2, dim2=-1)[..., :, None]
    for delta in (1, 5, 17):
        line = torch.stack([offsets[:, i, i - delta] for i in range(delta, 30)], dim=-1)
        torch.testing.assert_close(line, line[..., :1].expand_as(line), atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="needs learned positions"):
        positional_qk(rotary, 0, 0, softmax=False)
    assert full_qk_circuit(rotary, 0, 0).shape == (64, 64)  # token circuits still work


def test_layer_out_of_range_is_refused(model):
    with pytest.raises(ValueError, match=r"layer=2 is out of range: this model has layers 0..1"):
        qk_circuit(model, 2, 0)


def test_head_out_of_range_is_refused(model):
    with pytest.raises(ValueError, match=r"head=4 is out of range: this model has heads 0..3"):
        full_ov_circuit(model, 0, 4)


def test_bad_argument_types_are_refused(model):
    with pytest.raises(TypeError, match="layer must be an int"):
        ov_circuit(model, "0", 0)
    with pytest.raises(TypeError, match="scaled must be a bool"):
        full_qk_circuit(model, 0, 0, scaled=1)
    with pytest.raises(TypeError, match="TransformerBridge or HookedTransformer"):
        positional_qk(object(), 0, 0)
