"""TransformerLens 2.x: the fast sweeps (runs restarted at each head's layer) equal the one-run-per-head loops, path
patching equals TransformerLens 2.x's own per-head query/key/value inputs (``use_split_qkv_input``) fed by hand, and
attribution patching equals gradients taken by hand, on `HookedTransformer`s (LayerNorm and MLPs; RMSNorm, rotary
and grouped K/V heads)."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

import circuitwidgets as cw
from circuitwidgets.analysis import activation_patching as ap
from circuitwidgets.analysis import interventions as iv

ATOL = 1e-5
CONFIGS = {
    "LN MLP": dict(normalization_type="LN", d_mlp=64, act_fn="gelu"),
    "RMS rotary GQA": dict(
        normalization_type="RMS", d_mlp=64, act_fn="silu", positional_embedding_type="rotary", n_key_value_heads=2
    ),
    "attention only, no norm": dict(normalization_type=None, attn_only=True),
}


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def model(request):
    cfg = HookedTransformerConfig(
        n_layers=3, d_model=32, d_head=8, n_heads=4, n_ctx=16, d_vocab=40, seed=0, **CONFIGS[request.param]
    )
    model = HookedTransformer(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))  # norms and biases away from 1 and 0
    return model


def prompts(seed: int = 0, batch: int = 3, seq: int = 8):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, 40, (batch, seq), generator=g)
    corrupted = clean.clone()
    corrupted[:, 1:4] = torch.randint(0, 40, (batch, 3), generator=g)
    return clean, corrupted


def test_a_restarted_run_gives_the_models_logits(model):
    clean, _ = prompts()
    run = cw.as_view(model).record(clean)
    with torch.no_grad():
        want = model(clean)
    for start in range(3):
        logits, _ = run.run(start, positions=[2, 7], copies=2)
        assert (logits - want[:, [2, 7]].repeat(2, 1, 1)).abs().max() < ATOL


def test_the_sweeps_equal_one_run_per_head(model):
    clean, corrupted = prompts(1)
    for metric, options in (("loss", {"positions": [2, 5]}), ("logit_diff", {"target": 3, "baseline_token": 4}),
                            (lambda logits: logits[:, -1, 3] - logits[:, 1, 2], {})):
        fast = cw.analysis.ablation_effects(model, clean, metric, method="mean", n_boot=20, progress=False, per_run=2,
                                            **options)
        slow = iv.ablation_effects_by_loop(model, clean, metric, method="mean", n_boot=20, progress=False, **options)
        assert (fast.per_prompt - slow.per_prompt).abs().max() < ATOL
    for site in ap.SITES:
        fast = ap.patching(model, clean, corrupted, "loss", site, progress=False)
        slow = ap.patching_by_loop(model, clean, corrupted, "loss", site, progress=False)
        assert (fast.values - slow.values).abs().max() < ATOL, site
    fast = ap.patching(model, clean, corrupted, "logit_diff", "k", True, target=3, progress=False, per_run=3)
    slow = ap.patching_by_loop(model, clean, corrupted, "logit_diff", "k", True, target=3, progress=False)
    assert (fast.values - slow.values).abs().max() < ATOL


def test_path_patching_equals_split_qkv_inputs_fed_by_hand(model):
    """TransformerLens 2.x's ``use_split_qkv_input`` gives each head its own query/key/value input
    (``hook_q_input`` ...): the senders' ``z`` deltas times ``W_O`` added there, to the receiver's head only."""
    clean, corrupted = prompts(2)
    senders, receiver = [(0, 1), (0, 2)], (2, 3, "k")
    got = cw.analysis.path_patching(model, clean, corrupted, "logit_diff", senders, [receiver], target=3, baseline_token=4)
    with torch.no_grad():
        _, cc = model.run_with_cache(clean)
        _, kc = model.run_with_cache(corrupted)
        delta = sum((cc["z", layer][:, :, h] - kc["z", layer][:, :, h]) @ model.W_O[layer, h] for layer, h in senders)
        model.set_use_split_qkv_input(True)
        try:
            layer, head, channel = receiver
            groups = model.cfg.n_key_value_heads or model.cfg.n_heads
            index = head * groups // model.cfg.n_heads  # (with grouped K/V heads, a key input is its group's)

            def add(x, hook):
                x = x.clone()
                x[:, :, index] += delta
                return x

            logits = model.run_with_hooks(corrupted, fwd_hooks=[(f"blocks.{layer}.hook_{channel}_input", add)])
        finally:
            model.set_use_split_qkv_input(False)
    want = logits[:, -1, 3] - logits[:, -1, 4]
    assert (got.per_prompt - want).abs().max() < 1e-4
    assert (got.per_prompt - got.corrupted_per_prompt).abs().max() > 1e-4


def test_attribution_patching_is_the_gradient_taken_by_hand(model):
    clean, corrupted = prompts(3)
    got = cw.analysis.attribution_patching(model, clean, corrupted, "logit_diff", "v", target=3, baseline_token=4)
    names = [f"blocks.{layer}.attn.hook_v" for layer in range(3)]
    with torch.no_grad():
        _, cache = model.run_with_cache(clean, names_filter=names)
    for layer, name in enumerate(names):  # one layer at a time (a leaf at every layer would cut the paths between them)
        seen = {}

        def keep(x, hook, seen=seen):
            seen["x"] = x.detach().requires_grad_(True)
            return seen["x"]

        logits = model.run_with_hooks(corrupted, fwd_hooks=[(name, keep)])
        (grad,) = torch.autograd.grad((logits[:, -1, 3] - logits[:, -1, 4]).sum(), [seen["x"]])
        per_group = ((cache[name] - seen["x"].detach()) * grad).sum((1, 3)).mean(0)  # [K/V heads]
        heads = per_group.repeat_interleave(model.cfg.n_heads // per_group.shape[0])
        assert (got.effect[layer] - heads).abs().max() < 1e-5
    star = cw.analysis.attribution_patching(model, clean, corrupted, "logit_diff", "q", True, "atp*", target=3)
    assert star.values.shape == (3, 4, 8) and not star.values.isnan().any() and star.magnitude.min() >= 0
