"""The planted model itself: its heads do what tests/planted.py says they do."""

import torch
from planted import D_HEAD, planted_model, token_codes
from transformer_lens.model_bridge import TransformerBridge


def repeated(block_len=20, batch=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    block = torch.stack([torch.randperm(63, generator=gen)[:block_len] + 1 for _ in range(batch)])
    return torch.cat([torch.zeros(batch, 1, dtype=torch.long), block, block], dim=1)


def test_shape_and_head_names(planted):
    model, heads = planted
    assert isinstance(model, TransformerBridge)
    assert heads == {"previous_token": (0, 2), "induction": (1, 1)}
    cfg = model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head, cfg.d_vocab, cfg.n_ctx) == (2, 4, 128, D_HEAD, 64, 64)
    assert cfg.attn_only and cfg.normalization_type is None


def test_previous_token_head_attends_to_the_previous_position_everywhere(planted):
    model, heads = planted
    tokens = torch.randint(0, 64, (3, 64), generator=torch.Generator().manual_seed(1))
    _, cache = model.run_with_cache(tokens)
    layer, head = heads["previous_token"]
    A = cache[f"blocks.{layer}.attn.hook_pattern"][:, head]
    i = torch.arange(1, 64)
    assert A[:, i, i - 1].min() > 0.999  # at every position of the context, for any tokens


def test_induction_head_attends_to_the_token_after_the_earlier_copy(planted):
    model, heads = planted
    tokens = repeated()
    _, cache = model.run_with_cache(tokens)
    layer, head = heads["induction"]
    A = cache[f"blocks.{layer}.attn.hook_pattern"][:, head]
    second = torch.arange(21, 41)
    assert A[:, second, second - 19].min() > 0.99


def test_model_predicts_the_second_copy_and_not_the_first(planted):
    model, _ = planted
    tokens = repeated()
    logprobs = model(tokens).log_softmax(-1)
    loss = -logprobs[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]  # loss of predicting token i+1
    assert loss[:, 21:].mean() < 0.05
    assert loss[:, :20].mean() > 3.0


def test_k_composition_of_the_planted_pair_is_the_largest(planted):
    model, heads = planted
    scores = model.all_composition_scores("K").detach()  # [l1, h1, l2, h2]
    (l1, h1), (l2, h2) = heads["previous_token"], heads["induction"]
    best = scores[l1, h1, l2, h2].clone()
    scores[l1, h1, l2, h2] = float("nan")
    assert best > 1.8 * torch.nan_to_num(scores, nan=0.0).max()


def test_induction_head_full_ov_circuit_copies_every_token(planted):
    model, heads = planted
    layer, head = heads["induction"]
    full_ov = model.W_E @ model.W_V[layer, head] @ model.W_O[layer, head] @ model.W_U
    assert torch.equal(full_ov.argmax(-1), torch.arange(64))


def test_token_codes_match_copy_or_oppose():
    codes = token_codes()
    gram = codes @ codes.T
    assert set(gram.unique().tolist()) == {-1.0, 0.0, 1.0}
    assert torch.equal(gram.diagonal(), torch.ones(64))


def test_building_is_deterministic_and_seed_moves_only_random_heads(planted):
    model, heads = planted
    again, _ = planted_model()
    other, _ = planted_model(seed=1)
    assert torch.equal(model.W_Q, again.W_Q)
    assert torch.equal(model.W_Q[heads["induction"]], other.W_Q[heads["induction"]])
    assert not torch.equal(model.W_Q[0, 0], other.W_Q[0, 0])
