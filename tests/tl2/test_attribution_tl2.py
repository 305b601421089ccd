"""TransformerLens 2.x: direct logit attribution on `HookedTransformer`s sums to their logits."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitwidgets.analysis import logit_attribution_by_position

NORMS = {
    "none": dict(normalization_type=None, attn_only=True),
    "LN": dict(normalization_type="LN", d_mlp=96, act_fn="gelu"),
    "LNPre (folded)": dict(normalization_type="LNPre", d_mlp=96, act_fn="gelu"),
    "RMS rotary": dict(normalization_type="RMS", d_mlp=96, act_fn="silu", positional_embedding_type="rotary"),
}


@pytest.mark.parametrize("overrides", NORMS.values(), ids=list(NORMS))
def test_terms_sum_to_the_logits(overrides):
    cfg = HookedTransformerConfig(n_layers=2, d_model=32, d_head=8, n_heads=4, n_ctx=20, d_vocab=50, seed=0, **overrides)
    model = HookedTransformer(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))  # no bias left at 0
        tokens = torch.randint(0, 50, (1, 12), generator=gen)
        logits = model(tokens)[0]
    by_pos = logit_attribution_by_position(model, tokens)
    assert (by_pos.total()[:-1] - logits[torch.arange(11), tokens[0, 1:]]).abs().max() < 1e-4
    diff = logit_attribution_by_position(model, tokens, target=3, baseline_token=4)
    assert (diff.total() - (logits[:, 3] - logits[:, 4])).abs().max() < 1e-4
    assert ("mlp1" in by_pos.others) == (not cfg.attn_only)
