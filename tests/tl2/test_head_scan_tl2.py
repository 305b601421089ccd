"""TransformerLens 2.x: `scan_heads` on a `HookedTransformer` equals the spec's metrics computed from its own cache."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitwidgets.analysis import scan_heads


@pytest.mark.parametrize("positional", ["standard", "rotary"])
def test_scan_equals_the_patterns_of_run_with_cache(positional):
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, d_head=8, n_heads=4, n_ctx=24, d_vocab=20, seed=0, normalization_type="LN", d_mlp=64,
        act_fn="gelu", positional_embedding_type=positional,
    )
    model = HookedTransformer(cfg).eval()
    gen = torch.Generator().manual_seed(0)
    texts = [torch.randint(1, 20, (int(n),), generator=gen).tolist() for n in (5, 12, 20, 9)]
    texts[2][12:] = texts[2][2:10]  # a repeat for induction
    scan = scan_heads(model, texts, progress=False, batch_size=3)
    for i, ids in enumerate(texts):
        _, cache = model.run_with_cache(torch.tensor([ids]))
        pattern = torch.stack([cache["pattern", layer][0] for layer in range(2)]).double()  # [L, H, n, n]
        n = len(ids)
        d = torch.arange(n)
        previous = pattern[..., d[1:], d[1:] - 1].mean(-1)
        distance = (pattern * (d[:, None] - d[None, :]).clamp_min(0)).sum(-1).mean(-1)
        entropy = -(pattern * torch.where(pattern > 0, pattern.log(), torch.zeros_like(pattern))).sum(-1).mean(-1)
        after = [(q, sorted({j + 1 for j in range(q - 1) if ids[j] == ids[q]})) for q in range(n)]
        after = [(q, keys) for q, keys in after if keys]
        for metric, expected in [("previous_token", previous), ("distance", distance), ("entropy", entropy)]:
            assert torch.allclose(scan.values[metric][i], expected.float(), atol=1e-5), (metric, i)
        if after:
            induction = torch.stack([pattern[..., q, keys].sum(-1) for q, keys in after]).mean(0)
            assert torch.allclose(scan.values["induction"][i], induction.float(), atol=1e-5)
        else:
            assert bool(scan.values["induction"][i].isnan().all())
