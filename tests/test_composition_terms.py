"""Composition terms (what an edge builds) against dense products, a planted circuit and the demo model."""

from __future__ import annotations

import pytest
import torch
from factories import small_bridge

import circuitwidgets.demo as demo_package
from circuitwidgets.analysis import Factored, composition_term, composition_term_positivity, copying_score_of
from circuitwidgets.model import as_view


@pytest.fixture(scope="module")
def model():
    return small_bridge(n_layers=3, seed=3)


def dense_term(model, kind: str, first, second) -> torch.Tensor:
    """The term as a float64 product of the whole matrices (d_vocab x d_vocab)."""
    view = as_view(model)
    W_E, W_U = view.W_E.double(), view.W_U.double()
    (l1, h1), (l2, h2) = first, second
    ov1 = view.W_V[l1, h1].double() @ view.W_O[l1, h1].double()
    qk2 = view.W_Q[l2, h2].double() @ view.W_K[l2, h2].double().T
    ov2 = view.W_V[l2, h2].double() @ view.W_O[l2, h2].double()
    if kind == "K":
        return W_E @ qk2 @ (W_E @ ov1).T
    if kind == "Q":
        return (W_E @ ov1) @ qk2 @ W_E.T
    return W_E @ ov1 @ ov2 @ W_U


PAIRS = [((0, 1), (1, 2)), ((0, 3), (2, 0)), ((1, 0), (2, 3))]


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}->{p[1]}")
def test_term_equals_the_dense_product(model, kind, pair):
    term = composition_term(model, kind, *pair)
    assert isinstance(term, Factored) and term.shape == (64, 64) and term.rank_bound == 16
    want = dense_term(model, kind, *pair)
    torch.testing.assert_close(term.dense().double(), want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
    rows, cols = [5, 0, 17, 63], [2, 40, 5]
    tol = 1e-4 * float(want.abs().max())
    torch.testing.assert_close(term.block(rows, cols).double(), want[rows][:, cols], rtol=1e-4, atol=tol)
    # eigenvalues from the d_head x d_head side: the dense matrix's largest ones, and the same positivity
    dense_eigs = torch.linalg.eigvals(want)
    dense_eigs = dense_eigs[dense_eigs.abs().argsort(descending=True)][:16]
    ours = term.eigenvalues()
    largest = float(dense_eigs.abs().max())
    assert torch.allclose(ours.abs().sort().values, dense_eigs.abs().sort().values, rtol=1e-4, atol=1e-6 * largest)
    positivity = composition_term_positivity(model, kind, *pair)
    assert positivity == pytest.approx(float(copying_score_of(torch.linalg.eigvals(want))), abs=1e-4)
    assert positivity == pytest.approx(float(dense_eigs.real.sum() / dense_eigs.abs().sum()), abs=1e-4)


def test_qk_terms_scaled_divide_by_the_attention_scale(model):
    pair = PAIRS[0]
    scale = as_view(model).attn_scale
    for kind in "QK":
        raw = composition_term(model, kind, *pair).block([1, 2], [3, 4])
        assert torch.allclose(composition_term(model, kind, *pair, scaled=True).block([1, 2], [3, 4]), raw / scale)
    with pytest.raises(ValueError, match="the V term is in logits"):
        composition_term(model, "V", *pair, scaled=True)


def test_grouped_kv_heads_are_expanded():
    gqa = small_bridge(n_layers=2, n_key_value_heads=2, seed=4)
    for kind in "QKV":
        want = dense_term(gqa, kind, (0, 3), (1, 1))
        got = composition_term(gqa, kind, (0, 3), (1, 1)).dense().double()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("K", (1, 0), (0, 1)), ValueError, "first head \\(h1, the writer\\) in an earlier layer"),
        (("K", (1, 0), (1, 1)), ValueError, "earlier layer"),
        (("X", (0, 0), (1, 1)), ValueError, "kind must be one of"),
        (("K", (0, 9), (1, 1)), ValueError, "out of range"),
        (("K", (0, 0), (5, 1)), ValueError, "out of range"),
        (("K", 0, (1, 1)), TypeError, "\\(layer, head\\) pair"),
    ],
)
def test_bad_arguments(model, args, error, message):
    with pytest.raises(error, match=message):
        composition_term(model, *args)
    with pytest.raises(TypeError, match="scaled must be a bool"):
        composition_term(model, "K", (0, 0), (1, 1), scaled=1)


def test_planted_k_term_is_positive_and_its_diagonal_tops_every_row(planted):
    model, heads = planted
    first, second = heads["previous_token"], heads["induction"]
    assert composition_term_positivity(model, "K", first, second) >= 0.99
    term = composition_term(model, "K", first, second).dense()  # 64 tokens: the whole vocabulary
    others = term.clone()
    others.fill_diagonal_(float("-inf"))
    assert bool((term.diagonal() > others.max(dim=1).values).all())
    # unrelated pairs build no such term
    for a in range(4):
        for b in range(4):
            if (0, a) != first or (1, b) != second:
                assert composition_term_positivity(model, "K", (0, a), (1, b)) < 0.5, (a, b)


def match_margin(model, first, second) -> float:
    """Mean diagonal minus mean entry of the scaled K term (attention logits), from the factors."""
    term = composition_term(model, "K", first, second, scaled=True)
    n = term.shape[-1]
    total = float(term.left.sum(0) @ term.right.sum(1))
    return float(term.trace()) / n - total / n**2


def test_demo_previous_token_to_induction_k_terms_stand_out(demo):
    """Which heads are which is read from the model card: the model may be retrained."""
    card = demo_package.model_card()["heads"]
    prev = [tuple(h) for h in card["previous_token"]]
    induction = [tuple(h) for h in card["induction"]]
    assert prev and induction
    writers = [(0, h) for h in range(as_view(demo).n_heads)]
    pairs = [(a, b) for a in writers for b in induction]
    built = [p for p in pairs if p[0] in prev]
    other = [p for p in pairs if p[0] not in prev]
    positivity = {p: composition_term_positivity(demo, "K", *p) for p in pairs}
    margin = {p: match_margin(demo, *p) for p in pairs}
    # an induction head keyed on a previous-token head matches tokens: positive spectrum
    assert min(positivity[p] for p in built) >= 0.9, positivity
    if other:
        assert min(positivity[p] for p in built) >= max(positivity[p] for p in other) - 0.05, positivity
        # ... and the match is several times stronger than through any other layer-0 head
        assert min(margin[p] for p in built) >= 2 * max(margin[p] for p in other), margin
