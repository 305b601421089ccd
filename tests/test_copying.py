"""Copying scores, OV eigenvalues and full-OV top-k accuracy against dense brute force at vocab 64."""

import pytest
import torch
from factories import small_bridge
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitwidgets.analysis import copying_scores, full_ov_circuit, ov_eigenvalues, ov_top_k_accuracy
from circuitwidgets.model import as_view


@pytest.fixture(scope="module")
def model():
    return small_bridge(seed=1)


def dense_full_ov(model, layer, head) -> torch.Tensor:
    """``W_E W_V W_O W_U`` in float64 from the view's (GQA-expanded) weights: [d_vocab, d_vocab]."""
    view = as_view(model)
    i = view.layer_index(layer)
    return view.W_E.double() @ view.W_V[i, head].double() @ view.W_O[i, head].double() @ view.W_U.double()


def brute_copying(model) -> torch.Tensor:
    view = as_view(model)
    out = torch.empty(len(view.attn_layers), view.n_heads)
    for i, layer in enumerate(view.attn_layers):
        for head in range(view.n_heads):
            eigs = torch.linalg.eigvals(dense_full_ov(model, layer, head))  # all 64, 48 of them ~0
            out[i, head] = eigs.sum().real / eigs.abs().sum()
    return out


def test_copying_scores_equal_dense_eigenvalues_of_the_token_basis_circuit(model):
    ours = copying_scores(model)
    assert ours.shape == (2, 4) and ours.dtype == torch.float32
    torch.testing.assert_close(ours, brute_copying(model), atol=2e-4, rtol=1e-3)


def test_ov_eigenvalues_are_the_non_zero_dense_eigenvalues(model):
    ours = ov_eigenvalues(model, 1, 2)
    assert ours.shape == (16,) and ours.dtype == torch.complex128
    dense = torch.linalg.eigvals(dense_full_ov(model, 1, 2))
    top = dense[dense.abs().argsort(descending=True)][:16]
    assert dense[dense.abs().argsort(descending=True)][16:].abs().max() < 1e-6 * top.abs().max()  # rank 16
    assert (ours[:, None] - top[None]).abs().min(dim=1).values.max() < 1e-5
    assert torch.all(ours.abs()[:-1] >= ours.abs()[1:])  # largest magnitude first
    # the Factored circuit gives the same spectrum from its small side
    assert (full_ov_circuit(model, 1, 2).eigenvalues()[:, None] - ours[None]).abs().min(dim=1).values.max() < 1e-5


@pytest.mark.parametrize("k", [1, 3, 64])
@pytest.mark.parametrize("chunk_size", [1, 7, None])
def test_top_k_accuracy_equals_dense_top_k_membership(model, k, chunk_size):
    dense = full_ov_circuit(model, 0, 1).dense()  # float32, exactly what the chunks compute
    members = dense.topk(k, dim=1).indices == torch.arange(64)[:, None]
    expected = members.any(dim=1).float().mean().item()
    assert ov_top_k_accuracy(model, 0, 1, k=k, chunk_size=chunk_size) == pytest.approx(expected)


def test_top_k_accuracy_answers_several_k_in_one_pass(model):
    calls = []
    both = ov_top_k_accuracy(model, 1, 2, k=(5, 1, 3), chunk_size=10, progress=lambda done, total: calls.append((done, total)))
    assert both == tuple(ov_top_k_accuracy(model, 1, 2, k=k) for k in (5, 1, 3))
    assert calls == [(min(s + 10, 64), 64) for s in range(0, 64, 10)]  # one report per chunk


def test_top_k_accuracy_stops_when_progress_raises(model):
    seen = []

    def cancel(done, total):
        seen.append(done)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ov_top_k_accuracy(model, 0, 0, chunk_size=8, progress=cancel)
    assert seen == [8]


def test_top_k_accuracy_of_summed_heads_uses_the_summed_circuit(model):
    dense = full_ov_circuit(model, 1, 0).dense() + full_ov_circuit(model, 1, 3).dense()
    for k in (1, 5):
        expected = (dense.topk(k, dim=1).indices == torch.arange(64)[:, None]).any(dim=1).float().mean().item()
        assert ov_top_k_accuracy(model, heads=[(1, 0), (1, 3)], k=k, chunk_size=10) == pytest.approx(expected)


def test_planted_induction_head_copies(planted):
    model, heads = planted
    scores = copying_scores(model)
    layer, head = heads["induction"]
    assert scores[layer, head] > 0.999
    assert ov_top_k_accuracy(model, layer, head) == 1.0
    # the previous-token head writes where the unembedding never reads: its full OV is zero
    assert torch.isnan(scores[heads["previous_token"]])
    # W_O W_U W_E W_V = UNEMBED_SCALE * codes^T codes = 10 * 2 I (each code appears as +e and -e)
    eigs = ov_eigenvalues(model, layer, head)
    torch.testing.assert_close(eigs, torch.full((32,), 20.0 + 0j, dtype=torch.complex128))


def test_gqa_model_copying_scores_use_expanded_value_heads():
    gqa = small_bridge(n_key_value_heads=2, seed=4)
    ours = copying_scores(gqa)
    torch.testing.assert_close(ours, brute_copying(gqa), atol=2e-4, rtol=1e-3)
    assert ov_eigenvalues(gqa, 0, 3).shape == (16,)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), d_head=st.sampled_from([4, 8, 16]), tied=st.booleans())
def test_copying_properties(seed, d_head, tied):
    model = small_bridge(seed=seed, d_head=d_head, n_heads=2)
    if tied:  # W_U = W_E^T makes the full OV circuit's spectrum that of W_E W_OV W_E^T
        with torch.no_grad():
            dict(model.named_parameters())["head._original_component.weight"].copy_(model.W_E.detach())
    scores = copying_scores(model)
    assert scores.shape == (2, 2)
    assert ((scores >= -1 - 1e-6) & (scores <= 1 + 1e-6)).all()
    eigs = ov_eigenvalues(model, 1, 1)
    assert eigs.shape == (d_head,)
    trace = full_ov_circuit(model, 1, 1).trace().double()
    torch.testing.assert_close(eigs.sum().real, trace, rtol=1e-4, atol=1e-5)
    assert abs(eigs.sum().imag) < 1e-6 * max(1.0, eigs.abs().sum().item())


def test_top_k_accuracy_refuses_bad_k_and_chunk_size(model):
    with pytest.raises(ValueError, match=r"k=0 is out of range: 1..64"):
        ov_top_k_accuracy(model, 0, 0, k=0)
    with pytest.raises(ValueError, match=r"k=65 is out of range"):
        ov_top_k_accuracy(model, 0, 0, k=65)
    with pytest.raises(ValueError, match=r"k=70 is out of range"):
        ov_top_k_accuracy(model, 0, 0, k=(1, 70))
    with pytest.raises(TypeError, match="sequence of ints"):
        ov_top_k_accuracy(model, 0, 0, k=())
    with pytest.raises(TypeError, match="progress must be callable"):
        ov_top_k_accuracy(model, 0, 0, progress=5)
    with pytest.raises(ValueError, match="chunk_size=0"):
        ov_top_k_accuracy(model, 0, 0, chunk_size=0)
    with pytest.raises(TypeError, match="not both"):
        ov_top_k_accuracy(model, 0, 0, heads=[(1, 0)])
    with pytest.raises(TypeError, match="give layer and head"):
        ov_top_k_accuracy(model)


def test_layer_out_of_range_is_refused(model):
    with pytest.raises(ValueError, match=r"layer=5 is out of range"):
        ov_eigenvalues(model, 5, 0)


def test_head_out_of_range_is_refused(model):
    with pytest.raises(ValueError, match=r"head=-1 is out of range"):
        ov_top_k_accuracy(model, heads=[(1, 0), (1, -1)])


# ----- the blocked pass (`row_maxima.diagonal_ranks`) against dense top-k, exactly ---------------------

# (`tiling`: every tiling the pass can take, tests/conftest.py)


def integer_copier(d_vocab: int = 1200, seed: int = 0, copying: int = 3):
    """A two-layer `small_bridge` with weights in {-2..2} (every full-OV entry an exact float32 integer), the
    unembedding `copying` times the embedding plus noise (heads of layer 1 partly copy: own logits near the
    top, so rows stay in the pass and tie), and tokens from d_vocab / 2 on repeating tokens 0..96 (exact ties)."""
    model = small_bridge(d_vocab=d_vocab)
    g = torch.Generator().manual_seed(seed)
    same = torch.arange(d_vocab)
    same[d_vocab // 2 :] %= 97
    params = dict(model.named_parameters())
    with torch.no_grad():
        for p in params.values():
            p.copy_(torch.randint(-2, 3, p.shape, generator=g))
        (embed,) = [p for n, p in params.items() if n.endswith("tok_embed._original_component.weight")]
        (unembed,) = [p for n, p in params.items() if n.endswith("head._original_component.weight")]
        embed.copy_(embed[same])
        unembed.copy_(copying * embed + torch.randint(-1, 2, embed.shape, generator=g))
        attn = "layers.1._original_component.attn._original_component."
        for n, p in params.items():  # layer 1: head h's W_V W_O = 2 x the projection on dimensions 16h..16h+15
            if n.endswith((f"{attn}v._original_component.weight", f"{attn}o._original_component.weight")):
                p.copy_(torch.eye(64) * (2 if ".v." in n else 1))
    return model


def naive_hits(dense: torch.Tensor, ks) -> list[float]:
    """The top-k rule on the dense circuit: own logit strictly above the k-th largest of the row, diagonal at -inf."""
    rows = dense.clone()
    own = rows.diagonal().clone()
    rows.fill_diagonal_(float("-inf"))
    top = rows.topk(max(ks), dim=1).values
    return [int((own > top[:, k - 1]).sum()) / len(own) for k in ks]


@pytest.mark.parametrize("chunk_size", [None, 30])
def test_top_k_accuracy_equals_dense_top_k_exactly_with_ties(tiling, chunk_size):
    model = integer_copier()
    ks = (1, 2, 5, 40, 1200)
    scores = []
    for layer, head in [(0, 2), (1, 0)]:
        dense = full_ov_circuit(model, layer, head).dense()
        assert torch.equal(dense, dense.round())  # exact integers: no rounding anywhere
        expected = naive_hits(dense, ks)
        assert ov_top_k_accuracy(model, layer, head, k=ks, chunk_size=chunk_size) == tuple(expected)
        scores.append(expected)
    assert 0.1 < scores[1][1] < scores[1][2] < 0.9  # layer 1 copies in part: rows stay in the pass, own logits tie
    summed = full_ov_circuit(model, 1, 0).dense() + full_ov_circuit(model, 0, 2).dense()
    assert ov_top_k_accuracy(model, heads=[(1, 0), (0, 2)], k=ks, chunk_size=chunk_size) == tuple(naive_hits(summed, ks))


def test_diagonal_ranks_count_ties_inf_and_nan_against_the_own_entry(tiling):
    from circuitwidgets.row_maxima import diagonal_ranks

    g = torch.Generator().manual_seed(2)
    for trial in range(12):
        n, r = int(torch.randint(40, 300, (), generator=g)), int(torch.randint(1, 9, (), generator=g))
        left = torch.randint(-2, 3, (n, r), generator=g).float()
        right = left.T + torch.randint(-1, 2, (r, n), generator=g)  # own entries near the top of their rows
        if trial % 3 == 0:  # inf products, and NaN where inf meets 0 or -inf
            left[torch.randint(0, n, (3,), generator=g)] = float("inf")
            right[:, torch.randint(0, n, (3,), generator=g)] = float("-inf")
        dense = left @ right
        own = dense.diagonal().clone()
        exact = (~(own[:, None] > dense.fill_diagonal_(float("-inf")))).sum(1)
        rows, cap = int(torch.randint(1, 60, (), generator=g)), int(torch.randint(1, 8, (), generator=g))
        seen = []
        ranks = diagonal_ranks(left, right, rows, cap, seen.append)
        assert torch.equal(ranks.clamp_max(cap), exact.clamp_max(cap))
        assert torch.equal(diagonal_ranks(left, right, rows, n + 1), exact)
        assert seen == [min(s + rows, n) for s in range(0, n, rows)]


def test_top_k_accuracy_stops_when_progress_raises_in_worker_threads(monkeypatch):
    from circuitwidgets import row_maxima

    monkeypatch.setattr(row_maxima, "PARALLEL_ENTRIES", 0)
    monkeypatch.setattr(row_maxima, "TILE_ROWS", 3)
    seen = []

    def cancel(done, total):
        seen.append(done)
        raise KeyboardInterrupt

    threads = torch.get_num_threads()
    with pytest.raises(KeyboardInterrupt):
        ov_top_k_accuracy(small_bridge(seed=1, d_vocab=500), 0, 0, chunk_size=8, progress=cancel)
    assert seen == [8] and torch.get_num_threads() == threads
