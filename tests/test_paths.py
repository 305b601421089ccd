"""Virtual heads and path expansion: exact sums, brute-force terms, errors."""

import pytest
import torch
from factories import narrow_bridge

from circuitwidgets.analysis.paths import path_expansion, virtual_head_pattern


def randomised(**overrides):
    """A random model with non-zero biases everywhere and less uniform patterns."""
    model = narrow_bridge(**overrides)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
            else:
                param.mul_(3)
    return model


@pytest.fixture(scope="module")
def model():
    return randomised()


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 50, (1, 30), generator=torch.Generator().manual_seed(0))


def test_expansion_sums_to_the_logits_of_a_random_model(model, tokens):
    paths = path_expansion(model, tokens)
    logits = model(tokens)[0]
    assert paths.direct.shape == (30, 50) and paths.heads.shape == (2, 4, 30, 50)
    assert len(paths.virtual) == 16 and paths.bias.shape == (50,)
    assert (paths.bias.abs() > 0.01).any(), "the biases contribute: the test covers their terms"
    assert torch.allclose(paths.total(), logits, atol=1e-4)


def test_expansion_sums_to_the_logits_of_the_planted_model(planted):
    model, heads = planted
    block = torch.arange(3, 23)
    tokens = torch.cat([torch.zeros(1), block, block]).long()[None]
    paths = path_expansion(model, tokens)
    assert torch.allclose(paths.total(), model(tokens)[0], atol=1e-4)
    # the induction head alone predicts the second copy: its term's argmax is the next token
    term = paths.heads[heads["induction"]]
    assert torch.equal(term[21:-1].argmax(-1), block[1:])


def test_one_layer_model_has_no_virtual_heads_and_is_exact(tokens):
    model = randomised(n_layers=1)
    paths = path_expansion(model, tokens)
    assert paths.virtual == {} and paths.heads.shape == (1, 4, 30, 50)
    assert torch.allclose(paths.total(), model(tokens)[0], atol=1e-4)


def test_terms_match_brute_force_products(model, tokens):
    _, cache = model.run_with_cache(tokens)
    x0 = cache["blocks.0.hook_resid_pre"][0]
    A0 = cache["blocks.0.attn.hook_pattern"][0]
    A1 = cache["blocks.1.attn.hook_pattern"][0]
    OV = lambda layer, head: model.W_V[layer, head] @ model.W_O[layer, head]  # noqa: E731
    paths = path_expansion(model, tokens)
    assert torch.allclose(paths.direct, x0 @ model.W_U, atol=1e-5)
    assert torch.allclose(paths.heads[1, 3], A1[3] @ x0 @ OV(1, 3) @ model.W_U, atol=1e-4)
    want = (A1[2] @ A0[1]) @ x0 @ OV(0, 1) @ OV(1, 2) @ model.W_U
    assert torch.allclose(paths.virtual[((0, 1), (1, 2))], want, atol=1e-4)


def test_pairs_restricts_the_virtual_heads(model, tokens):
    paths = path_expansion(model, tokens, pairs=[((0, 1), (1, 2))])
    assert list(paths.virtual) == [((0, 1), (1, 2))]


def test_virtual_head_pattern_is_the_product_and_rows_sum_to_one(model, tokens):
    _, cache = model.run_with_cache(tokens)
    A0 = cache["blocks.0.attn.hook_pattern"][0, 2]
    A1 = cache["blocks.1.attn.hook_pattern"][0, 0]
    virtual = virtual_head_pattern(model, tokens, (0, 2), (1, 0))
    assert torch.allclose(virtual, A1 @ A0, atol=1e-6)
    assert torch.allclose(virtual.sum(-1), torch.ones(30), atol=1e-5)
    assert torch.all(virtual.triu(1) == 0), "still causal"


def test_planted_virtual_previous_then_induction_attends_two_back(planted):
    # the pair (previous-token, induction) as a virtual head: A^ind A^prev on [BOS, r, r]
    model, heads = planted
    block = torch.arange(3, 13)
    tokens = torch.cat([torch.zeros(1), block, block]).long()[None]
    virtual = virtual_head_pattern(model, tokens, heads["previous_token"], heads["induction"])
    second = torch.arange(11, 21)
    # induction attends i-10+1, then the previous-token head steps back one: key i-10
    assert virtual[second, second - 10].min() > 0.99


def test_first_head_not_earlier_raises(model, tokens):
    with pytest.raises(ValueError, match="earlier layer"):
        virtual_head_pattern(model, tokens, (1, 0), (1, 2))


def test_head_out_of_range_raises(model, tokens):
    with pytest.raises(ValueError, match="head=7"):
        virtual_head_pattern(model, tokens, (0, 7), (1, 2))


def test_head_not_a_tuple_raises(model, tokens):
    with pytest.raises(TypeError, match="first must be a"):
        virtual_head_pattern(model, tokens, 3, (1, 2))


def test_batch_of_sequences_raises(model):
    with pytest.raises(ValueError, match="one sequence"):
        path_expansion(model, torch.zeros(2, 5, dtype=torch.long))


def test_layernorm_model_raises():
    with pytest.raises(ValueError, match="without LayerNorm"):
        path_expansion(narrow_bridge(normalization_type="LN"), torch.tensor([[0, 1, 2]]))


def test_model_with_mlps_raises():
    with pytest.raises(ValueError, match="attention-only"):
        path_expansion(narrow_bridge(attn_only=False, d_mlp=64), torch.tensor([[0, 1, 2]]))


def test_three_layer_model_raises():
    with pytest.raises(ValueError, match="one or two layers"):
        path_expansion(narrow_bridge(n_layers=3), torch.tensor([[0, 1, 2]]))


def test_tokens_outside_the_vocabulary_raise(model):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        path_expansion(model, torch.tensor([[0, 1, 99]]))
