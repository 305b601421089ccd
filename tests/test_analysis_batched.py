"""Batched `Factored`, whole-layer circuits, token-subset blocks and whole-layer OV eigenvalues.

Every batched result is checked against the one-matrix (one-head) result or a dense float64
product, head by head.
"""

import threading

import pytest
import torch
from factories import small_bridge
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitwidgets.analysis import (
    Factored,
    copying_score_of,
    copying_scores,
    full_ov_block,
    full_ov_circuit,
    full_qk_block,
    full_qk_circuit,
    ov_circuit,
    ov_eigenvalues,
    positional_qk,
    qk_circuit,
)
from circuitwidgets.model import as_view

# the models the whole-layer functions are checked on: plain, grouped K/V heads, LayerNorm with MLPs
MODELS = {
    "mha": {},
    "gqa": {"n_key_value_heads": 2},
    "ln": {"normalization_type": "LN", "attn_only": False, "d_mlp": 32},
}


@pytest.fixture(scope="module", params=list(MODELS), ids=list(MODELS))
def model(request):
    return small_bridge(seed=2, **MODELS[request.param])


def batch_factors(batch, m, r, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    left = torch.randn(*batch, m, r, generator=gen, dtype=torch.float64)
    return left, torch.randn(*batch, r, n, generator=gen, dtype=torch.float64)


def same_spectrum(a, b, tol):
    """Every eigenvalue in `a` has a partner in `b` within `tol`, row by row (order-free)."""
    return bool(((a[..., :, None] - b[..., None, :]).abs().min(-1).values <= tol).all())


# ----- batched Factored ----------------------------------------------------------------------
def test_batched_pieces_equal_the_dense_product_of_each_matrix():
    A, B = batch_factors((3,), 30, 4, 20)
    f, dense = Factored(A, B), A @ B
    assert f.shape == (3, 30, 20) and f.batch_shape == (3,) and f.rank_bound == 4
    torch.testing.assert_close(f.dense(), dense)
    torch.testing.assert_close(f.rows(3), dense[:, 3])
    torch.testing.assert_close(f.rows([0, 7, 29]), dense[:, [0, 7, 29]])
    torch.testing.assert_close(f.rows(slice(2, 9)), dense[:, 2:9])
    mask = torch.arange(30) % 3 == 0
    torch.testing.assert_close(f.rows(mask), dense[:, mask])
    torch.testing.assert_close(f.columns(19), dense[..., 19])
    torch.testing.assert_close(f.columns([1, 2]), dense[..., [1, 2]])
    torch.testing.assert_close(f.block([4, 8], [0, 3, 6]), dense[:, [4, 8]][..., [0, 3, 6]])
    torch.testing.assert_close(f.block(4, 6), dense[:, 4, 6])
    torch.testing.assert_close(f.block(4, [1, 6]), dense[:, 4, [1, 6]])
    torch.testing.assert_close(f.block([4, 5], 6), dense[:, [4, 5], 6])
    torch.testing.assert_close(f.norm(), torch.linalg.matrix_norm(dense))
    torch.testing.assert_close(f.T.dense(), dense.mT)
    for i in range(3):
        torch.testing.assert_close(f[i].dense(), dense[i])


def test_batched_top_k_equals_dense_topk_per_matrix():
    A, B = batch_factors((2,), 25, 3, 40, seed=1)
    f, dense = Factored(A, B), A @ B
    values, indices = f.top_k(5, row=7)
    assert values.shape == (2, 5)
    torch.testing.assert_close(values, dense[:, 7].topk(5).values)
    assert torch.equal(indices, dense[:, 7].topk(5).indices)
    smallest = f.top_k(4, column=[2, 9], largest=False)
    assert smallest.indices.shape == (2, 2, 4)
    torch.testing.assert_close(smallest.values, dense[..., [2, 9]].mT.topk(4, largest=False).values)
    assert torch.equal(f.top_k(3, column=9).indices, dense[..., 9].topk(3).indices)


def test_batched_trace_small_side_and_eigenvalues_equal_each_matrix():
    A, B = batch_factors((2, 3), 40, 5, 40, seed=2)
    f, dense = Factored(A, B), A @ B
    torch.testing.assert_close(f.trace(), dense.diagonal(dim1=-2, dim2=-1).sum(-1))
    torch.testing.assert_close(f.small_side(), B @ A)
    eigs = f.eigenvalues()
    assert eigs.shape == (2, 3, 5) and eigs.dtype == torch.complex128
    assert torch.all(eigs.abs()[..., :-1] >= eigs.abs()[..., 1:])  # largest magnitude first, per matrix
    full = torch.linalg.eigvals(dense)
    top = full.gather(-1, full.abs().argsort(-1, descending=True))[..., :5]
    assert same_spectrum(eigs, top, 1e-8)
    for i in range(2):
        for j in range(3):
            one = Factored(A[i, j], B[i, j])
            assert same_spectrum(eigs[i, j], one.eigenvalues(), 1e-10)
            torch.testing.assert_close(f[i, j].norm(), one.norm())
            torch.testing.assert_close(f[i][j].trace(), one.trace())


def test_batch_dimensions_broadcast_like_matmul():
    A, _ = batch_factors((), 12, 3, 1)
    _, B = batch_factors((4,), 1, 3, 10, seed=1)
    f = Factored(A, B)  # one left factor shared by four right factors
    assert f.shape == (4, 12, 10) and f.left.shape == (4, 12, 3)
    torch.testing.assert_close(f.dense(), A @ B)
    with pytest.raises(ValueError, match="batch dimensions do not broadcast"):
        Factored(torch.ones(2, 5, 3), torch.ones(3, 3, 4))


def test_batched_algebra_keeps_the_product():
    A, B = batch_factors((3,), 12, 2, 10, seed=3)
    C, D = batch_factors((3,), 10, 6, 8, seed=4)
    f, g = Factored(A, B), Factored(C, D)
    fg = f @ g
    assert fg.shape == (3, 12, 8) and fg.rank_bound == 2
    torch.testing.assert_close(fg.dense(), (A @ B) @ (C @ D))
    torch.testing.assert_close((g.T @ f.T).dense(), ((A @ B) @ (C @ D)).mT)
    torch.testing.assert_close((f @ Factored(C[0], D[0])).dense(), (A @ B) @ (C[0] @ D[0]))  # 2-D broadcast
    v = torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(f @ v, (A @ B) @ v)
    w = torch.randn(12, dtype=torch.float64)
    torch.testing.assert_close(w @ f, w @ (A @ B))
    M = torch.randn(10, 3, dtype=torch.float64)
    torch.testing.assert_close((f @ M).dense(), A @ B @ M)
    L = torch.randn(3, 5, 12, dtype=torch.float64)  # one left matrix per batch entry
    torch.testing.assert_close((L @ f).dense(), L @ A @ B)
    shared = Factored(*batch_factors((), 12, 3, 10, seed=6))
    total = f + shared
    assert total.shape == (3, 12, 10) and total.rank_bound == 5
    torch.testing.assert_close(total.dense(), A @ B + shared.dense())
    torch.testing.assert_close((2.5 * f).dense(), 2.5 * A @ B)
    torch.testing.assert_close((f / 4).dense(), A @ B / 4)
    torch.testing.assert_close((-f).dense(), -(A @ B))


def test_batched_refusals_and_indexing_errors():
    big = Factored(torch.zeros(12, 3000, 1), torch.zeros(12, 1, 3000))  # 108 M entries over the batch
    with pytest.raises(ValueError, match="refusing to materialise a dense 12 x 3000 x 3000 batch of matrices"):
        big.dense()
    assert big.rows([0, 1]).shape == (12, 2, 3000)
    f = Factored(*batch_factors((2,), 5, 2, 6))
    with pytest.raises(ValueError, match="row index 5 is out of range: 0..4"):
        f.rows(5)
    with pytest.raises(ValueError, match="cannot add"):
        f + Factored(*batch_factors((3,), 5, 2, 6))
    with pytest.raises(ValueError, match="cannot multiply"):
        f @ Factored(*batch_factors((3,), 6, 2, 4))
    with pytest.raises(IndexError, match="2 indices for 1 batch dimensions"):
        f[0, 1]
    with pytest.raises(IndexError, match="without '...'"):
        f[..., 0]
    with pytest.raises(TypeError, match="single matrix"):
        f[0][0]
    with pytest.raises(ValueError, match="square"):
        f.trace()
    assert "batch [2] of 5x2 @ 2x6" in repr(f)


@settings(max_examples=25, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=2), m=st.integers(1, 8), r=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_batched_properties(batch, m, r, seed):
    A, B = batch_factors(tuple(batch), m, r, m, seed=seed)
    f = Factored(A, B)
    assert f.shape == (*batch, m, m)
    torch.testing.assert_close(f.norm(), torch.linalg.matrix_norm(A @ B), atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(f.eigenvalues().sum(-1).real, f.trace(), atol=1e-8, rtol=1e-8)
    gram = Factored(A, A.mT)  # A A^T: symmetric PSD, real non-negative spectrum
    assert gram.eigenvalues().imag.abs().max() < 1e-8 and gram.eigenvalues().real.min() > -1e-8


# ----- whole-layer circuits ------------------------------------------------------------------
def test_whole_layer_circuits_stack_the_per_head_circuits(model):
    circuits = [(qk_circuit, {}), (qk_circuit, {"scaled": True}), (ov_circuit, {}),
                (full_qk_circuit, {"scaled": True}), (full_ov_circuit, {})]
    for layer in (0, 1):
        for circuit, kwargs in circuits:
            whole = circuit(model, layer, **kwargs)
            assert whole.batch_shape == (4,)
            for head in range(4):
                torch.testing.assert_close(whole[head].dense(), circuit(model, layer, head, **kwargs).dense())


def test_whole_layer_circuits_equal_transformer_lens():
    model = small_bridge(seed=3)
    torch.testing.assert_close(qk_circuit(model, 1).dense(), model.QK[1].AB.detach())
    torch.testing.assert_close(ov_circuit(model, 0).dense(), model.OV[0].AB.detach())


def test_whole_layer_positional_qk_stacks_the_heads():
    model = small_bridge(seed=3)
    for softmax in (True, False):
        whole = positional_qk(model, 0, softmax=softmax)
        assert whole.shape == (4, 24, 24)
        for head in range(4):
            torch.testing.assert_close(whole[head], positional_qk(model, 0, head, softmax=softmax), equal_nan=True)
    with pytest.raises(ValueError, match="needs learned positions"):
        positional_qk(small_bridge(positional_embedding_type="rotary"), 0, softmax=False)


# ----- blocks on token subsets -----------------------------------------------------------------
def test_full_ov_block_equals_the_dense_full_circuit_on_the_tokens(model):
    view = as_view(model)
    ids = [5, 3, 63, 3, 0]  # any order, repeats kept
    W_E, W_U = view.W_E.double(), view.W_U.double()
    for layer in (0, 1):
        ov = view.W_V[layer].double() @ view.W_O[layer].double()  # [heads, d_model, d_model], K/V heads expanded
        want = (W_E @ ov @ W_U)[:, ids][:, :, ids]
        block = full_ov_block(model, layer, ids)
        assert block.shape == (4, 5, 5) and block.dtype == torch.float32 and block.device.type == "cpu"
        torch.testing.assert_close(block.double(), want, rtol=1e-4, atol=1e-5)
        for head in range(4):
            torch.testing.assert_close(block[head], full_ov_circuit(model, layer, head).block(ids, ids).float())


def test_full_qk_block_equals_the_dense_full_circuit_on_the_tokens(model):
    view = as_view(model)
    ids = [7, 2, 40]
    W_E = view.W_E.double()
    for layer in (0, 1):
        qk = view.W_Q[layer].double() @ view.W_K[layer].double().mT
        want = (W_E @ qk @ W_E.T)[:, ids][:, :, ids]
        torch.testing.assert_close(full_qk_block(model, layer, ids, scaled=False).double(), want, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(full_qk_block(model, layer, ids).double(), want / 4, rtol=1e-4, atol=1e-5)  # sqrt(16)


def test_blocks_take_token_strings_and_refuse_bad_tokens(demo):
    view = as_view(demo)
    torch.testing.assert_close(full_qk_block(demo, 1, ["a", "b"]), full_qk_block(demo, 1, [view.token_id("a"), 3]))
    torch.testing.assert_close(full_ov_block(demo, 0, torch.tensor([2, 3])), full_ov_block(demo, 0, [2, 3]))
    with pytest.raises(ValueError, match=r"token id 64 is out of range: 0..63"):
        full_ov_block(demo, 0, [1, 64])
    with pytest.raises(ValueError, match="tokens is empty"):
        full_qk_block(demo, 0, [])
    with pytest.raises(ValueError, match=r"layer=2 is out of range"):
        full_ov_block(demo, 2, [1])
    with pytest.raises(TypeError, match="scaled must be a bool"):
        full_qk_block(demo, 0, [1], scaled="yes")


# ----- whole-layer OV eigenvalues --------------------------------------------------------------
def test_layer_eigenvalues_equal_each_head_and_the_dense_spectrum(model):
    view = as_view(model)
    for layer in (0, 1):
        whole = ov_eigenvalues(model, layer)
        assert whole.shape == (4, 16) and whole.dtype == torch.complex128 and whole.device.type == "cpu"
        assert torch.all(whole.abs()[:, :-1] >= whole.abs()[:, 1:])
        scale = whole.abs().max()
        for head in range(4):
            assert same_spectrum(whole[head], ov_eigenvalues(model, layer, head), 1e-5 * scale)
            dense = view.W_E.double() @ view.W_V[layer, head].double() @ view.W_O[layer, head].double() @ view.W_U.double()
            full = torch.linalg.eigvals(dense)
            top = full[full.abs().argsort(descending=True)][:16]
            assert same_spectrum(whole[head], top, 1e-5 * scale)
        torch.testing.assert_close(copying_scores(model)[layer], copying_score_of(whole).float())


def test_unembed_embed_is_formed_once_per_view_and_follows_weight_changes():
    model = small_bridge(seed=5)
    view = as_view(model)
    first = view.unembed_embed()
    assert view.unembed_embed() is first
    torch.testing.assert_close(first, view.W_U @ view.W_E)
    before = ov_eigenvalues(model, 1)
    with torch.no_grad():
        dict(model.named_parameters())["head._original_component.weight"].mul_(2)  # W_U doubles
    assert as_view(model) is not view
    torch.testing.assert_close(ov_eigenvalues(model, 1), 2 * before)


def test_unembed_embed_from_several_threads_is_whole():
    model = small_bridge(seed=6)  # held here: a view holds its model weakly, and a collection would end it mid-test
    view = as_view(model)
    results, barrier = [], threading.Barrier(4)

    def work():
        barrier.wait()
        results.append(view.unembed_embed())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4  # every thread finished (none raised)
    for result in results:
        assert torch.equal(result, view.W_U @ view.W_E)


def test_layer_eigenvalues_of_the_planted_induction_head(planted):
    model, heads = planted
    layer, head = heads["induction"]
    torch.testing.assert_close(ov_eigenvalues(model, layer)[head], torch.full((32,), 20.0 + 0j, dtype=torch.complex128))
    assert ov_eigenvalues(model, layer).shape == (4, 32)
