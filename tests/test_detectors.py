"""Head-type detectors: planted heads, hand-computed targets, TransformerLens, properties, errors."""

import pytest
import torch
from factories import narrow_bridge
from factories import score_from_patterns as _score_from_patterns
from hypothesis import given, settings
from hypothesis import strategies as st
from planted import word_tokenizer, words
from transformer_lens.head_detector import detect_head

from circuitwidgets.analysis import detectors
from circuitwidgets.analysis.detectors import (
    HEAD_SCORE_KINDS,
    _own_token_share,
    _source_raises,
    head_scores,
    repeated_random_tokens,
)
from circuitwidgets.head_metrics import target_mask as _target_mask
from circuitwidgets.model import as_view


def boot(**overrides):
    """A narrow random model with sharper, less uniform patterns."""
    model = narrow_bridge(**overrides)
    with torch.no_grad():  # sharper, less uniform random patterns
        for name, param in model.named_parameters():
            if ".q." in name or ".k." in name:
                param.mul_(4)
    return model


RANDOM = boot()  # module-level: hypothesis tests cannot take function-scoped fixtures


# ----- planted heads -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def planted_scores(planted):
    model, _ = planted
    return {kind: head_scores(model, kind) for kind in HEAD_SCORE_KINDS}


def others(scores, head):
    mask = torch.ones_like(scores, dtype=torch.bool)
    mask[head] = False
    return scores[mask]


def test_planted_previous_token_head_scores_one_and_others_low(planted, planted_scores):
    _, heads = planted
    prev = planted_scores["previous_token"]
    assert prev[heads["previous_token"]] > 0.99
    assert others(prev, heads["previous_token"]).max() < 0.15


@pytest.mark.parametrize("kind", ["induction", "prefix_matching", "direct_copying"])
def test_planted_induction_head_scores_one_and_others_low(planted, planted_scores, kind):
    _, heads = planted
    scores = planted_scores[kind]
    assert scores[heads["induction"]] > 0.95, kind
    assert others(scores, heads["induction"]).max() < 0.1, kind


def test_planted_heads_score_low_on_the_other_kinds(planted, planted_scores):
    _, heads = planted
    induction, prev = heads["induction"], heads["previous_token"]
    # the induction head attends to the token after the duplicate, not the duplicate itself
    assert planted_scores["duplicate_token"][induction] < 0.01
    assert planted_scores["previous_token"][induction] < 0.15
    assert planted_scores["induction"][prev] < 0.01
    # the previous-token head writes nothing the unembedding reads: no direct copying
    assert planted_scores["direct_copying"][prev] < 0.01


def test_planted_induction_head_on_a_prompt_with_repeats(planted):
    model, heads = planted
    tokens = torch.tensor([[0, 7, 9, 11, 13, 40, 7, 9, 11, 13, 40]])
    assert head_scores(model, "induction", tokens)[heads["induction"]] > 0.99


# ----- targets and averaging by hand -----------------------------------------------------------
def test_target_masks_match_hand_lists():
    tokens = torch.tensor([[0, 5, 6, 5, 6, 6]])
    def targets(kind):
        mask = _target_mask(tokens, kind)[0]
        return [torch.nonzero(row).flatten().tolist() for row in mask]
    assert targets("previous_token") == [[], [0], [1], [2], [3], [4]]
    assert targets("duplicate_token") == [[], [], [], [1], [2], [2, 4]]
    # query 5 (token 6): earlier 6s at 2 and 4; 4 = i-1 is excluded (j < i-1), so target 3
    assert targets("induction") == [[], [], [], [2], [3], [3]]
    assert torch.equal(_target_mask(tokens, "prefix_matching"), _target_mask(tokens, "induction"))


def test_score_averages_target_mass_over_queries_with_targets_then_batch():
    tokens = torch.tensor([[0, 5, 6, 5, 6], [0, 1, 2, 3, 4]])
    patterns = torch.zeros(2, 5, 5)
    patterns[:, 0, 0] = 1
    patterns[0, 1, :2] = torch.tensor([0.5, 0.5])
    patterns[0, 2, :3] = torch.tensor([0.2, 0.3, 0.5])
    patterns[0, 3, :4] = torch.tensor([0.1, 0.6, 0.1, 0.2])  # duplicate target key 1: 0.6
    patterns[0, 4, :5] = torch.tensor([0.1, 0.1, 0.3, 0.4, 0.1])  # duplicate target key 2: 0.3
    patterns[1, :, 0] = 1  # every query of row 1 attends to BOS
    mask = _target_mask(tokens, "duplicate_token")
    # row 1 has no repeated token: no query has a target, so it leaves the batch mean
    assert _score_from_patterns(patterns, mask).item() == pytest.approx((0.6 + 0.3) / 2)
    prev = _score_from_patterns(patterns, _target_mask(tokens, "previous_token")).item()
    row0 = (0.5 + 0.3 + 0.1 + 0.4) / 4
    assert prev == pytest.approx((row0 + 0.25) / 2)  # row 1: only query 1 attends to i-1


def test_score_needs_at_least_one_target():
    tokens = torch.tensor([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match="no query"):
        _score_from_patterns(torch.eye(4)[None], _target_mask(tokens, "duplicate_token"))


def test_own_token_share_by_hand():
    logits = torch.tensor([[3.0, 2.0, 0.0, -1.0], [1.0, 1.0, 1.0, 1.0]])
    # row 0: mean 1, raise [2, 1, 0, 0]; row 1: constant, no raise
    share = _own_token_share(logits, torch.tensor([[0], [1]]).squeeze(-1))
    assert share.tolist() == pytest.approx([2 / 3, 0.0])


# ----- definitions on [BOS, r, r] ---------------------------------------------------------------
def test_scores_equal_the_diagonal_definitions_on_repeated_tokens():
    L = 12
    tokens = repeated_random_tokens(RANDOM, seq_len=L, batch=3, seed=5)
    A = as_view(RANDOM).patterns(tokens)  # [batch, layers, heads, q, k]
    second = torch.arange(L + 1, 2 * L + 1)
    every = torch.arange(1, 2 * L + 1)
    expected = {
        "previous_token": A[..., every, every - 1].mean(-1).mean(0),
        "duplicate_token": A[..., second, second - L].mean(-1).mean(0),
        "induction": A[..., second, second - L + 1].mean(-1).mean(0),
    }
    for kind, want in expected.items():
        assert torch.allclose(head_scores(RANDOM, kind, tokens), want, atol=1e-6), kind


def test_prefix_matching_sums_over_every_earlier_copy():
    L, reps = 6, 4
    tokens = repeated_random_tokens(RANDOM, seq_len=L, batch=2, repeats=reps, seed=1)
    A = as_view(RANDOM).patterns(tokens)
    per_query = []
    for i in range(L + 1, 1 + reps * L):
        targets = torch.arange(i - L + 1, 1, -L)  # the token after each earlier copy (>= 2)
        per_query.append(A[..., i, targets].sum(-1))
    want = torch.stack(per_query, -1).mean(-1).mean(0)
    assert torch.allclose(head_scores(RANDOM, "prefix_matching", tokens), want, atol=1e-6)


def test_repeated_random_tokens_layout():
    tokens = repeated_random_tokens(RANDOM, seq_len=10, batch=4, repeats=3, seed=2)
    assert tokens.shape == (4, 31) and tokens.dtype == torch.long
    assert (tokens[:, 0] == 0).all() and (tokens[:, 1:] != 0).all()  # token 0 stands in for BOS
    block = tokens[:, 1:11]
    assert torch.equal(tokens[:, 11:21], block) and torch.equal(tokens[:, 21:], block)
    assert all(len(set(row.tolist())) == 10 for row in block), "no repeats inside a block"


def test_direct_copying_matches_a_brute_force_loop():
    model = boot(n_key_value_heads=2, seed=3)  # grouped K/V: values are shared by head pairs
    view = as_view(model)
    tokens = repeated_random_tokens(model, seq_len=5, batch=2, seed=0)
    _, cache = model.run_with_cache(tokens)
    want = torch.zeros(2, 4)
    for layer in range(2):
        x = cache[f"blocks.{layer}.hook_resid_pre"]  # no LayerNorm: the attention input
        A = cache[f"blocks.{layer}.attn.hook_pattern"]
        for head in range(4):
            per_seq = []
            for b in range(2):
                num = den = 0.0
                for j in range(1, tokens.shape[1]):
                    v = x[b, j] @ view.W_V[layer, head] + view.b_V[layer, head]
                    logits = v @ view.W_O[layer, head] @ view.W_U
                    raise_ = torch.relu(logits - logits.mean())
                    share = raise_[tokens[b, j]] / raise_.sum()
                    weight = A[b, head, :, j].sum()
                    num, den = num + weight * share, den + weight
                per_seq.append(num / den)
            want[layer, head] = torch.stack(per_seq).mean()
    assert torch.allclose(head_scores(model, "direct_copying", tokens), want, atol=1e-5)


def per_head_copying(model, tokens):
    """Direct copying head by head, from whole ``[positions, d_vocab]`` blocks of logits and `_own_token_share`."""
    view = as_view(model)
    patterns, values = view.patterns_and_values(tokens)
    out = torch.zeros(len(view.attn_layers), view.n_heads)
    for layer in range(out.shape[0]):
        for head in range(view.n_heads):
            share = _own_token_share(values[:, layer, :, head] @ view.W_O[layer, head] @ view.W_U, tokens)
            received = patterns[:, layer, head].sum(-2)[:, 1:]  # key 0 left out
            out[layer, head] = ((received * share[:, 1:]).sum(-1) / received.sum(-1)).mean()
    return out


# 4 sources (d_model 32, d_head 8): outputs go through W_U; 48 sources: W_O W_U is formed per block
@pytest.mark.parametrize("batch, seq_len", [(1, 2), (3, 8)], ids=["outputs", "factored"])
@pytest.mark.parametrize("block, chunk", [(2048, 1 << 24), (7, 1 << 24), (16, 40), (50, 1)])
def test_direct_copying_in_vocabulary_blocks_equals_whole_logits(monkeypatch, batch, seq_len, block, chunk):
    model = boot(n_key_value_heads=2, seed=6)
    tokens = repeated_random_tokens(model, seq_len=seq_len, batch=batch, seed=2)
    want = per_head_copying(model, tokens)
    monkeypatch.setattr(detectors, "_VOCAB_BLOCK", block)  # 50 tokens: one block, or 8 with a last one of 1
    monkeypatch.setattr(detectors, "_CHUNK", chunk)  # (16, 40) and (50, 1): logits one source row at a time
    torch.testing.assert_close(head_scores(model, "direct_copying", tokens), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows", [2, 20], ids=["outputs", "factored"])
@pytest.mark.parametrize("transposed", [False, True], ids=["W_U", "W_U stored as its transpose"])
def test_source_raises_sum_the_raise_and_take_the_own_token_from_it(monkeypatch, rows, transposed):
    monkeypatch.setattr(detectors, "_VOCAB_BLOCK", 5)  # 23 tokens: 5 blocks, the last of 3
    gen = torch.Generator().manual_seed(0)
    sources, W_O = torch.randn(2, 3, rows, 4, generator=gen), torch.randn(2, 3, 4, 6, generator=gen)
    W_U, own = torch.randn(6, 23, generator=gen), torch.randint(0, 23, (rows,), generator=gen)
    if transposed:
        W_U = W_U.mT.contiguous().mT
    total, mine = _source_raises(sources, W_O, W_U, own)
    logits = sources @ W_O @ W_U
    raised = torch.relu(logits - logits.mean(-1, keepdim=True))
    torch.testing.assert_close(total, raised.sum(-1))
    torch.testing.assert_close(mine, raised[..., torch.arange(rows), own])
    assert bool((mine <= total).all())  # the own token's raise is one of the summed terms: a share is at most 1


# ----- TransformerLens' detect_head -----------------------------------------------------------
def test_agrees_with_transformer_lens_detect_head_after_its_normalisation():
    # detect_head divides the target mass by every row (N queries); we divide by the queries
    # that have a target: N - 1 for previous-token, |Q| for duplicate / induction. It needs a
    # tokenizer, so the random model gets a word-level one ("t{i}" is token i).
    model = boot(seed=4)
    model.tokenizer = word_tokenizer(50)
    tokens = repeated_random_tokens(model, seq_len=9, batch=1, seed=3)[0]
    tokens = torch.cat([tokens, tokens[1:5]])  # a third, partial copy
    N = tokens.shape[0]
    text = words(tokens)
    assert torch.equal(model.to_tokens(text)[0], tokens)
    for ours_kind, tl_kind in [("previous_token", "previous_token_head"),
                               ("duplicate_token", "duplicate_token_head"),
                               ("induction", "induction_head")]:
        n_queries = int(_target_mask(tokens[None], ours_kind)[0].any(-1).sum())
        theirs = detect_head(model, text, tl_kind)
        ours = head_scores(model, ours_kind, text)
        assert torch.allclose(ours, theirs * N / n_queries, atol=1e-5), ours_kind
        assert n_queries == (N - 1 if ours_kind == "previous_token" else N - 10)


# ----- properties ------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(st.sampled_from(HEAD_SCORE_KINDS), st.integers(2, 12), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_scores_shape_range_and_seed_reproducibility(kind, seq_len, batch, seed):
    seq_len = min(seq_len, 9) if kind == "prefix_matching" else seq_len
    scores = head_scores(RANDOM, kind, seq_len=seq_len, batch=batch, seed=seed)
    assert scores.shape == (2, 4) and scores.dtype == torch.float32
    assert bool(((scores >= 0) & (scores <= 1 + 1e-6)).all())
    assert torch.equal(scores, head_scores(RANDOM, kind, seq_len=seq_len, batch=batch, seed=seed))


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(HEAD_SCORE_KINDS), st.permutations(range(5)),
       st.lists(st.integers(1, 8), min_size=5 * 14, max_size=5 * 14))
def test_scores_do_not_depend_on_batch_order(kind, order, ids):
    # small alphabet so that every row has repeats (targets) for every kind
    tokens = torch.tensor(ids).reshape(5, 14)
    tokens[:, 0] = 0
    tokens[:, 7:] = tokens[:, 1:8]
    scores = head_scores(RANDOM, kind, tokens)
    shuffled = head_scores(RANDOM, kind, tokens[list(order)])
    assert torch.allclose(scores, shuffled, atol=1e-6)


def test_works_without_a_tokenizer_on_rotary_models():
    model = boot(positional_embedding_type="rotary")
    assert model.tokenizer is None
    for kind in HEAD_SCORE_KINDS:
        scores = head_scores(model, kind, seq_len=8, batch=2)
        assert scores.shape == (2, 4) and bool((scores >= 0).all() and (scores <= 1 + 1e-6).all())


# ----- bad inputs ------------------------------------------------------------------------------
def test_unknown_kind_raises():
    with pytest.raises(ValueError, match="kind must be one of"):
        head_scores(RANDOM, "induction_head")


def test_tokens_outside_the_vocabulary_raise():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        head_scores(RANDOM, "previous_token", torch.tensor([[0, 3, 50]]))


def test_empty_tokens_raise():
    with pytest.raises(ValueError, match="empty"):
        head_scores(RANDOM, "previous_token", torch.zeros(1, 0, dtype=torch.long))


def test_single_position_raises():
    with pytest.raises(ValueError, match="at least 2 positions"):
        head_scores(RANDOM, "previous_token", torch.tensor([[0]]))


def test_seq_len_too_long_for_n_ctx_raises():
    with pytest.raises(ValueError, match="n_ctx=40"):
        head_scores(RANDOM, "induction", seq_len=20)


def test_tokens_and_seq_len_together_raise():
    with pytest.raises(ValueError, match="either tokens or seq_len"):
        head_scores(RANDOM, "induction", torch.tensor([[0, 1, 2]]), seq_len=4)


def test_bad_batch_raises():
    with pytest.raises(ValueError, match="batch=0"):
        head_scores(RANDOM, "induction", batch=0)


def test_prompt_without_a_tokenizer_raises():
    with pytest.raises(TypeError, match="no tokenizer"):
        head_scores(RANDOM, "induction", "a prompt")


def test_no_repeated_token_raises_for_duplicate_kind():
    with pytest.raises(ValueError, match="no query"):
        head_scores(RANDOM, "duplicate_token", torch.tensor([[0, 1, 2, 3]]))


def test_huge_batch_and_seed_are_refused_before_reaching_torch():
    for call in (lambda: head_scores(RANDOM, "induction", batch=10**12),
                 lambda: repeated_random_tokens(RANDOM, batch=10**12)):
        with pytest.raises(ValueError, match=r"batch=1000000000000 is more than 256 sequences"):
            call()
    assert repeated_random_tokens(RANDOM, batch=256).shape[0] == 256
    with pytest.raises(ValueError, match=r"seed=.* is out of range"):
        repeated_random_tokens(RANDOM, seed=2**70)
    with pytest.raises(ValueError, match="seq_len=1000000000000 with repeats=2"):
        head_scores(RANDOM, "induction", seq_len=10**12)


def test_meta_and_zero_d_tokens_are_refused_before_reaching_torch():
    with pytest.raises(ValueError, match="meta device"):
        head_scores(RANDOM, "previous_token", torch.zeros(1, 3, dtype=torch.long, device="meta"))
    with pytest.raises(ValueError, match="0-d"):
        head_scores(RANDOM, "previous_token", torch.tensor(5))
