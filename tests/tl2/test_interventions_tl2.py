"""TransformerLens 2.x: ablation equals hand-written hooks and patching equals TransformerLens 2.x's
own ``transformer_lens.patching`` on `HookedTransformer`s (LayerNorm and MLPs; grouped K/V heads)."""

from __future__ import annotations

import pytest
import torch
import transformer_lens.patching as tl_patching
from transformer_lens import HookedTransformer, HookedTransformerConfig

import circuitwidgets as cw
from circuitwidgets.analysis import ablated, attention_patterns, run_with_ablation
from circuitwidgets.analysis.activation_patching import patching

ATOL = 1e-5
SITES = ["out", "q", "k", "v", "pattern"]
CONFIGS = {
    "LN MLP": dict(normalization_type="LN", d_mlp=64, act_fn="gelu"),
    "RMS rotary GQA": dict(
        normalization_type="RMS", d_mlp=64, act_fn="silu", positional_embedding_type="rotary", n_key_value_heads=2
    ),
}


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def model(request):
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, d_head=8, n_heads=4, n_ctx=16, d_vocab=40, seed=0, **CONFIGS[request.param]
    )
    model = HookedTransformer(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))  # norms and biases away from 1 and 0
    return model


def tokens(batch: int, seq: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 40, (batch, seq), generator=torch.Generator().manual_seed(seed))


def hand_hooks(model, toks, heads, method):
    """``fwd_hooks`` replacing the heads' ``hook_z`` by hand: 0, the batch mean, or the next prompt's."""
    with torch.no_grad():
        _, cache = model.run_with_cache(toks)
    hooks = []
    for layer in sorted({layer for layer, _ in heads}):
        z_ref, chosen = cache["z", layer], [h for at, h in heads if at == layer]

        def hook(z, hook, z_ref=z_ref, chosen=chosen):
            z = z.clone()
            for h in chosen:
                if method == "zero":
                    z[:, :, h] = 0.0
                elif method == "mean":
                    z[:, :, h] = z_ref[:, :, h].mean(0)
                else:
                    z[:, :, h] = torch.stack([z_ref[(i + 1) % len(z_ref), :, h] for i in range(len(z_ref))])
            return z

        hooks.append((f"blocks.{layer}.attn.hook_z", hook))
    return hooks


@pytest.mark.parametrize("method", ["zero", "mean", "resample"])
def test_ablation_equals_hand_written_hooks(model, method):
    toks = tokens(3, 10, seed=2)
    heads = [(0, 1), (1, 0), (1, 3)]
    ours = run_with_ablation(model, toks, heads, method)
    with torch.no_grad():
        expected = model.run_with_hooks(toks, fwd_hooks=hand_hooks(model, toks, heads, method))
        clean = model(toks)
    assert (ours - expected).abs().max() < ATOL
    assert (ours - clean).abs().max() > 1e-3
    assert cw.as_view(model).hook_state() == ()


@pytest.mark.parametrize("by_position", [False, True], ids=["all_pos", "by_pos"])
@pytest.mark.parametrize("site", SITES)
def test_patching_equals_transformer_lens_2_patching(model, site, by_position):
    clean, corrupted = tokens(2, 6, seed=3), tokens(2, 6, seed=4)

    def metric(logits):
        return (logits[:, -1, 5] - logits[:, -2, 9]).mean()

    ours = patching(model, clean, corrupted, metric, site, by_position, progress=False)
    function = getattr(tl_patching, f"get_act_patch_attn_head_{site}_{'by' if by_position else 'all'}_pos")
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)
        theirs = function(model, corrupted, cache, metric).float()
    if by_position and site != "pattern":  # TransformerLens: [layer, pos, head]; ours: [layer, head, pos]
        theirs = theirs.transpose(1, 2)
    groups = model.cfg.n_key_value_heads or model.cfg.n_heads
    grouped = site in ("k", "v") and groups < model.cfg.n_heads
    assert ours.grouped is grouped
    values = ours.values[:, :: model.cfg.n_heads // groups] if grouped else ours.values  # one per K/V group
    assert values.shape == theirs.shape
    assert (values - theirs).abs().max() < ATOL
    assert (values - ours.corrupted_value).abs().max() > 1e-5


def test_an_ablated_hooked_transformer_runs_ablated(model):
    toks = tokens(4, 8, seed=5)
    prompt = toks[:1]
    clean = attention_patterns(model, prompt)
    off = ablated(model, [(0, 2)], "mean", reference=toks)
    patterns = attention_patterns(off, prompt)
    assert torch.equal(patterns[0], clean[0]) and (patterns[1] - clean[1]).abs().max() > 1e-4
    with torch.no_grad():
        _, cache = model.run_with_cache(toks)
        mean = cache["z", 0][:, :, 2].mean(0)

        def hook(z, hook):
            z = z.clone()
            z[:, :, 2] = mean[: z.shape[1]]
            return z

        with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", hook)]):
            _, ablated_cache = model.run_with_cache(prompt)
    assert (patterns[1] - ablated_cache["pattern", 1][0]).abs().max() < ATOL
    assert cw.as_view(model).hook_state() == () and torch.equal(attention_patterns(model, prompt), clean)
