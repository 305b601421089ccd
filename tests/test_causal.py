"""Causal paths at speed (circuitwidgets.analysis.sweeps, .causal_paths, .gradient_patching; backends/resume.py).

- the fast sweeps (runs restarted at each head's layer, unembedding only what the metric reads) equal the
  one-run-per-head loops to 1e-5: every metric (loss, logit difference, callables), ablation methods, patching
  sites whole and by position, grouped-query models, several heads per run; and a model that cannot restart
  runs gets the same answers by whole runs;
- path patching equals hook code written here by hand (the senders' ``z`` deltas through ``W_O`` added to the
  receivers' inputs, the norms recomputed), and with every later head a receiver it equals activation
  patching of the senders where the two agree (an attention-only model, senders in the layer before the last);
- attribution patching equals gradients taken here by hand, is exact where the metric is linear in what is
  patched (the demo model's last-layer heads under a logit difference), its query/key correction equals the
  patterns the model computes under each patch, GradDrop equals the paths computed by hand, and ``verify``
  reports exact patching;
- statistics never mislead: a NaN metric gives NaN, never p = 0; a metric of the wrong shape is refused.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets.analysis import activation_patching as ap
from circuitwidgets.analysis import gradient_patching as gp
from circuitwidgets.analysis import interventions as iv
from circuitwidgets.analysis import sweeps
from circuitwidgets.backends.resume import ResumeError
from circuitwidgets.demo import tiny_hf_model

A = cw.analysis
ATOL = 1e-5


@pytest.fixture(scope="module")
def mlp_bridge():
    """Three layers with LayerNorm and MLPs: MLPs and heads sit between a layer-0 sender and a layer-2 receiver."""
    return small_bridge(attn_only=False, normalization_type="LN", d_mlp=128, act_fn="gelu", n_layers=3)


@pytest.fixture(scope="module")
def llama():
    model, tokenizer = tiny_hf_model("llama")  # 4 query heads, 2 K/V groups, rotary, RMSNorm, gated MLP
    return cw.HFView(model, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def models(demo, mlp_bridge, llama):
    return {"demo": demo, "mlp_bridge": mlp_bridge, "llama": llama}


def prompts(seed: int = 0, batch: int = 3, seq: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """Clean prompts and corrupted ones whose tokens 1 to 3 differ."""
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(2, 60, (batch, seq), generator=g)
    corrupted = clean.clone()
    corrupted[:, 1:4] = torch.randint(2, 60, (batch, 3), generator=g)
    return clean, corrupted


METRICS = {
    "loss": ("loss", {"positions": [2, 4, 4, 3]}),
    "logit_diff": ("logit_diff", {"target": 5, "baseline_token": 7, "positions": 4}),
    "callable": (lambda logits: logits[:, -1, 3] - logits[:, 2, 4], {}),
}


# ----- 1. the fast sweeps equal the one-run-per-head loops ------------------------------------------------------
CASES = [("demo", "loss"), ("mlp_bridge", "logit_diff"), ("llama", "callable")]


@pytest.mark.parametrize("name, metric", CASES)
def test_ablation_sweep_equals_one_run_per_head(models, name, metric):
    model, (kind, options) = models[name], METRICS[metric]
    tokens = prompts(1)[0]
    for method, per_run in (("zero", 1), ("mean", 2), ("resample", 3)):
        fast = A.ablation_effects(model, tokens, kind, method=method, n_boot=50, progress=False, per_run=per_run, **options)
        slow = iv.ablation_effects_by_loop(model, tokens, kind, method=method, n_boot=50, progress=False, **options)
        assert fast.per_prompt.shape == slow.per_prompt.shape
        assert (fast.per_prompt - slow.per_prompt).abs().max() < ATOL, (method, per_run)
        assert (fast.clean - slow.clean).abs().max() < ATOL
        assert fast.per_prompt.abs().max() > 1e-3  # the ablations did something
        assert torch.equal(fast.p_value.isnan(), slow.p_value.isnan())


def test_ablation_sweep_with_a_reference_batch(demo):
    tokens, reference = prompts(2)[0], prompts(3, batch=4, seq=12)[0]
    heads = [(0, 1), (1, 2), (1, 3)]
    for method in ("mean", "resample"):
        fast = A.ablation_effects(demo, tokens, heads=heads, method=method, reference=reference, n_boot=20, progress=False)
        slow = iv.ablation_effects_by_loop(demo, tokens, heads=heads, method=method, reference=reference, n_boot=20,
                                           progress=False)
        assert (fast.per_prompt - slow.per_prompt).nan_to_num().abs().max() < ATOL
        assert torch.equal(fast.per_prompt.isnan(), slow.per_prompt.isnan()) and int((~fast.effect.isnan()).sum()) == 3


@pytest.mark.parametrize("by_position", [False, True])
@pytest.mark.parametrize("name, metric", CASES)
def test_patching_sweep_equals_one_run_per_head(models, name, metric, by_position):
    """Every site whole, on every model; by position (whose values tests/test_interventions.py also holds to
    TransformerLens' for every site), keys and patterns of one model and the grouped model's values."""
    model, (kind, options) = models[name], METRICS[metric]
    clean, corrupted = prompts(4, batch=2, seq=6 if by_position else 9)
    sites = list(ap.SITES) if not by_position else {"demo": ["k", "pattern"], "llama": ["v"]}.get(name, [])
    for i, site in enumerate(sites):
        fast = ap.patching(model, clean, corrupted, kind, site, by_position, progress=False, per_run=1 + i % 3, **options)
        slow = ap.patching_by_loop(model, clean, corrupted, kind, site, by_position, progress=False, **options)
        assert fast.values.shape == slow.values.shape and fast.grouped == slow.grouped
        assert (fast.values - slow.values).abs().max() < ATOL, site
        assert fast.clean_value == pytest.approx(slow.clean_value, abs=ATOL)
        assert fast.corrupted_value == pytest.approx(slow.corrupted_value, abs=ATOL)
        assert (fast.values - fast.corrupted_value).abs().max() > 1e-5  # the patches reached the metric


def test_a_metric_returning_one_number_is_patched_as_it_is(demo):
    clean, corrupted = prompts(5)

    def scalar(logits):
        return logits[:, -1, 3].mean() - logits[:, 1, 2].max()

    fast = ap.patching(demo, clean, corrupted, scalar, "v", progress=False)
    slow = ap.patching_by_loop(demo, clean, corrupted, scalar, "v", progress=False)
    assert (fast.values - slow.values).abs().max() < ATOL


def test_patching_some_heads_and_the_noising_direction(demo):
    clean, corrupted = prompts(6)
    some = ap.patching(demo, clean, corrupted, "loss", "out", heads=[(1, 2), (0, 0)], progress=False)
    every = ap.patching(demo, clean, corrupted, "loss", "out", progress=False)
    asked = torch.zeros(2, 4, dtype=torch.bool)
    asked[1, 2] = asked[0, 0] = True
    assert torch.equal(~some.values.isnan(), asked) and torch.equal(some.values[asked], every.values[asked])
    noising = ap.patching(demo, clean, corrupted, "loss", "out", direction="noising", progress=False)
    # noising = the clean run with corrupted activations: patching with the roles of the prompts swapped, the loss
    # still of the clean tokens
    swapped = ap.patching_by_loop(demo, corrupted, clean, lambda logits: iv.metric_of("loss", clean, 64)(logits).mean(),
                                  "out", progress=False)
    assert (noising.values - swapped.values).abs().max() < ATOL and noising.direction == "noising"
    assert noising.clean_value == pytest.approx(every.clean_value)
    assert noising.corrupted_value == pytest.approx(every.corrupted_value)


def test_a_model_that_cannot_restart_runs_gets_the_same_answers_by_whole_runs(demo, monkeypatch):
    tokens = prompts(7)[0]
    want = A.ablation_effects(demo, tokens, n_boot=20, progress=False)
    clean, corrupted = prompts(8)
    want_patch = ap.patching(demo, clean, corrupted, "loss", "k", True, progress=False)
    want_path = A.path_patching(demo, clean, corrupted, "loss", [(0, 1)], [(1, 2, "k"), "logits"])

    def refuse(self, *args, **kwargs):
        raise ResumeError("this model cannot restart runs (for the test)")

    monkeypatch.setattr(cw.ModelView, "record", refuse)
    assert isinstance(sweeps.record(cw.as_view(demo), tokens), sweeps.WholeRuns)
    got = A.ablation_effects(demo, tokens, n_boot=20, progress=False)
    assert (got.per_prompt - want.per_prompt).abs().max() < ATOL
    assert (ap.patching(demo, clean, corrupted, "loss", "k", True, progress=False).values - want_patch.values).abs().max() < ATOL
    path = A.path_patching(demo, clean, corrupted, "loss", [(0, 1)], [(1, 2, "k"), "logits"])
    assert (path.per_prompt - want_path.per_prompt).abs().max() < ATOL


def test_a_restart_that_does_not_reproduce_the_logits_is_refused():
    """Something outside the blocks, final norm and unembedding changes the logits (here the model's forward doubles
    them, as a final soft-capping would change them): recording refuses to restart such a model, and the sweep's
    answers are still the loop's."""
    model = small_bridge()
    forward = model.forward
    model.forward = lambda *args, **kwargs: 2 * forward(*args, **kwargs)
    view, tokens = cw.as_view(model), prompts(9)[0]
    with pytest.raises(ResumeError, match="do not give its logits"):
        view.record(tokens)
    fast = A.ablation_effects(model, tokens, "logit_diff", target=3, n_boot=10, progress=False)
    slow = iv.ablation_effects_by_loop(model, tokens, "logit_diff", target=3, n_boot=10, progress=False)
    assert (fast.per_prompt - slow.per_prompt).abs().max() < ATOL and fast.per_prompt.abs().max() > 1e-3


def test_a_restarted_run_reads_only_what_it_is_asked(demo):
    view = cw.as_view(demo)
    tokens = prompts(10)[0]
    run = view.record(tokens, keep=[("z", 1)])
    logits, kept = run.run(1, positions=[2, 7], keep=[("attn_out", 1)])
    assert logits.shape == (3, 2, 64) and (logits - run.logits[:, [2, 7]]).abs().max() < ATOL
    none, kept = run.run(1, keep=[("q", 1), ("k", 1)], stop=True)
    assert none is None and set(kept) == {("q", 1), ("k", 1)}
    doubled, _ = run.run(0, copies=2)
    assert doubled.shape == (6, 9, 64) and (doubled - run.logits.repeat(2, 1, 1)).abs().max() < ATOL


# ----- 2. path patching ----------------------------------------------------------------------------------------------
def hand_path_patching(model, clean, corrupted, senders, receivers, measure, direction="denoising") -> torch.Tensor:
    """Path patching written out with TransformerLens hooks: each sender's delta is its ``z`` difference times its
    ``W_O``; a receiver's input is the base run's residual stream entering its layer plus the deltas of earlier
    senders, its channel computed by the model from that (a run hooked at ``hook_resid_pre``); the measured run is
    the base run with the receivers' channels replaced (and the deltas added before the final norm for "logits")."""
    base, source = (corrupted, clean) if direction == "denoising" else (clean, corrupted)
    last = model.cfg.n_layers - 1
    with torch.no_grad():
        _, base_cache = model.run_with_cache(base)
        _, source_cache = model.run_with_cache(source)
        deltas = {}
        for layer, head in senders:
            dz = source_cache[f"blocks.{layer}.attn.hook_z"][:, :, head] - base_cache[f"blocks.{layer}.attn.hook_z"][:, :, head]
            deltas.setdefault(layer, []).append(dz @ model.W_O[layer, head])
        hooks = []
        for layer, head, channel in [r for r in receivers if r != "logits"]:
            added = sum(d for at, ds in deltas.items() if at < layer for d in ds)
            seen = {}

            def grab(x, hook, seen=seen):
                seen["act"] = x.detach().clone()

            model.run_with_hooks(base, fwd_hooks=[
                (f"blocks.{layer}.hook_resid_pre", lambda x, hook, added=added: x + added),
                (f"blocks.{layer}.attn.hook_{channel}", grab),
            ])
            act = seen["act"]
            index = head * act.shape[2] // model.cfg.n_heads

            def replace(x, hook, act=act, index=index):
                x = x.clone()
                x[:, :, index] = act[:, :, index]
                return x

            hooks.append((f"blocks.{layer}.attn.hook_{channel}", replace))
        if "logits" in receivers:
            total = sum(d for ds in deltas.values() for d in ds)
            hooks.append((f"blocks.{last}.hook_resid_post", lambda x, hook: x + total))
        return measure(model.run_with_hooks(base, fwd_hooks=hooks))


def demo_by_weights(model, clean, corrupted, sender, receiver_head, channel, measure) -> torch.Tensor:
    """The demo model (no norm, two attention layers): the receiver's channel computed from the weights by hand."""
    with torch.no_grad():
        _, cc = model.run_with_cache(clean)
        _, kc = model.run_with_cache(corrupted)
        (l1, h1), (l2, h2) = sender, (1, receiver_head)
        delta = (cc[f"blocks.{l1}.attn.hook_z"][:, :, h1] - kc[f"blocks.{l1}.attn.hook_z"][:, :, h1]) @ model.W_O[l1, h1]
        x = kc[f"blocks.{l2}.hook_resid_pre"] + delta
        weight = {"q": model.W_Q, "k": model.W_K, "v": model.W_V}[channel][l2, h2]
        bias = {"q": model.b_Q, "k": model.b_K, "v": model.b_V}[channel][l2, h2]
        act = x @ weight + bias

        def replace(t, hook):
            t = t.clone()
            t[:, :, h2] = act
            return t

        return measure(model.run_with_hooks(corrupted, fwd_hooks=[(f"blocks.{l2}.attn.hook_{channel}", replace)]))


@pytest.mark.parametrize("channel", ["q", "k", "v"])
def test_path_patching_equals_the_weights_by_hand_on_the_demo_model(demo, channel):
    clean = A.repeated_random_tokens(demo, seq_len=10, batch=4, seed=1)
    corrupted = A.repeated_random_tokens(demo, seq_len=10, batch=4, seed=2)
    measure = iv.metric_of("loss", clean, 64, positions=range(11, 20))
    got = A.path_patching(demo, clean, corrupted, "loss", [(0, 1)], [(1, 2, channel)], positions=range(11, 20))
    want = demo_by_weights(demo, clean, corrupted, (0, 1), 2, channel, measure)
    assert (got.per_prompt - want).abs().max() < 1e-4
    assert abs(got.value - got.corrupted) > 1e-3  # the path carries something
    with torch.no_grad():
        assert got.corrupted == pytest.approx(float(measure(demo(corrupted)).mean()), abs=1e-5)
        assert got.clean == pytest.approx(float(measure(demo(clean)).mean()), abs=1e-5)


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_path_patching_equals_hooks_by_hand_through_norms_and_mlps(mlp_bridge, direction):
    clean, corrupted = prompts(11, batch=3, seq=10)
    measure = iv.metric_of("logit_diff", clean, 64, target=5, baseline_token=7)
    senders = [(0, 1), (0, 3), (1, 2)]
    receivers = [(2, 0, "k"), (2, 3, "q"), (1, 1, "v"), (2, 1, "v"), "logits"]
    got = A.path_patching(mlp_bridge, clean, corrupted, "logit_diff", senders, receivers, direction,
                          target=5, baseline_token=7)
    want = hand_path_patching(mlp_bridge, clean, corrupted, senders, receivers, measure, direction)
    assert (got.per_prompt - want).abs().max() < 1e-4
    base = corrupted if direction == "denoising" else clean
    assert (got.per_prompt - measure(mlp_bridge(base))).abs().max() > 1e-3
    for one in ([(2, 0, "k")], ["logits"], [(1, 1, "v")]):
        alone = A.path_patching(mlp_bridge, clean, corrupted, "logit_diff", senders, one, direction, target=5, baseline_token=7)
        by_hand = hand_path_patching(mlp_bridge, clean, corrupted, senders, one, measure, direction)
        assert (alone.per_prompt - by_hand).abs().max() < 1e-4, one


def test_every_later_head_as_receiver_is_activation_patching_of_the_senders(demo):
    """Attention-only, senders in layer 0 of two: nothing lies between the senders and the receivers but the
    residual stream, so sending along every path is patching the senders' outputs."""
    clean = A.repeated_random_tokens(demo, seq_len=10, batch=4, seed=1)
    corrupted = torch.cat([clean[:, :11], clean[:, 11:].roll(1, 0)], 1)
    senders = [(0, 1), (0, 3)]
    receivers = [(1, h, c) for h in range(4) for c in "qkv"] + ["logits"]
    for direction in ("denoising", "noising"):
        got = A.path_patching(demo, clean, corrupted, "loss", senders, receivers, direction)
        base, source = (corrupted, clean) if direction == "denoising" else (clean, corrupted)
        view = cw.as_view(demo)
        _, cache = view.run_with_hooks(source, [], keep=[("z", 0)])

        def patch(z, hook=None, source_z=cache[("z", 0)]):
            z = z.clone()
            z[:, :, [1, 3]] = source_z[:, :, [1, 3]]
            return z

        patched = iv.metric_of("loss", clean, 64)(view.run_with_hooks(base, [(("z", 0), patch)])[0])
        assert (got.per_prompt - patched).abs().max() < 1e-5, direction
    # one path alone is less than all of them
    k_only = A.path_patching(demo, clean, corrupted, "loss", senders, [(1, h, "k") for h in range(4)])
    assert abs(k_only.value - k_only.corrupted) < abs(got.value - got.corrupted) or direction == "noising"


def test_path_patching_of_grouped_keys_patches_the_group(llama):
    clean, corrupted = prompts(12, batch=2, seq=8)
    metric = lambda logits: logits[:, -1, 5] - logits[:, -1, 6]  # noqa: E731
    one = A.path_patching(llama, clean, corrupted, metric, [(0, 0), (0, 3)], [(1, 0, "k")])
    other = A.path_patching(llama, clean, corrupted, metric, [(0, 0), (0, 3)], [(1, 1, "k")])
    assert torch.equal(one.per_prompt, other.per_prompt)  # heads 0 and 1 share K/V group 0
    third = A.path_patching(llama, clean, corrupted, metric, [(0, 0), (0, 3)], [(1, 2, "k")])
    assert not torch.equal(one.per_prompt, third.per_prompt)


def test_composition_paths_are_single_edge_path_patching(demo):
    clean = A.repeated_random_tokens(demo, seq_len=10, batch=3, seed=1)
    corrupted = A.repeated_random_tokens(demo, seq_len=10, batch=3, seed=5)
    for direction in ("denoising", "noising"):
        grid = A.composition_paths(demo, clean, corrupted, "loss", "V", 0, 1, direction)
        for h1, h2 in ((0, 0), (1, 3), (3, 2)):
            one = A.path_patching(demo, clean, corrupted, "loss", [(0, h1)], [(1, h2, "v")], direction)
            assert float(grid[h1, h2]) == pytest.approx(one.effect, abs=1e-5)
        assert grid.abs().max() > 1e-3


# ----- 3. attribution patching -------------------------------------------------------------------------------------
def hand_atp(model, clean, corrupted, hook_name, measure) -> torch.Tensor:
    """Σ (clean − corrupted) · ∂metric/∂activation at the corrupted run, per prompt, written with TransformerLens hooks."""
    with torch.no_grad():
        _, cache = model.run_with_cache(clean, names_filter=hook_name)
    seen = {}

    def keep(x, hook):
        x = x.detach().requires_grad_(True)
        seen["x"] = x
        return x

    logits = model.run_with_hooks(corrupted, fwd_hooks=[(hook_name, keep)])
    (grad,) = torch.autograd.grad(measure(logits).sum(), [seen["x"]])
    return (cache[hook_name] - seen["x"].detach()) * grad


@pytest.mark.parametrize("site", ["out", "v", "pattern", "q"])
def test_atp_is_the_gradient_taken_by_hand(mlp_bridge, site):
    clean, corrupted = prompts(13, batch=3, seq=8)
    measure = iv.metric_of("loss", clean, 64)
    got = A.attribution_patching(mlp_bridge, clean, corrupted, "loss", site)
    word = {"out": "z"}.get(site, site)
    for layer in (0, 2):
        product = hand_atp(mlp_bridge, clean, corrupted, f"blocks.{layer}.attn.hook_{word}", measure)
        per_head = product.sum(-1).sum(-1) if site == "pattern" else product.sum(-1).sum(1)  # [batch, head]
        assert (got.per_prompt[layer] - per_head.T).abs().max() < 1e-5
        assert (got.effect[layer] - per_head.mean(0)).abs().max() < 1e-5
    assert got.method == "atp" and got.magnitude.shape == (3, 4)
    assert (got.magnitude - got.per_prompt.abs().mean(-1)).abs().max() < 1e-6


def test_atp_is_exact_where_the_metric_is_linear_in_what_is_patched(demo):
    """In the demo model (attention only, no norm) a logit difference is linear in the last layer's pattern, values
    and outputs: AtP is exact there, and AtP*'s query/key correction makes queries and keys exact too (the softmax is
    computed, the rest is linear)."""
    clean = A.repeated_random_tokens(demo, seq_len=4, batch=2, seed=1)
    corrupted = torch.cat([clean[:, :5], clean[:, 5:].roll(1, 0)], 1)
    options = dict(target=torch.tensor([3, 4]), baseline_token=6)
    for site, method in (("out", "atp"), ("v", "atp"), ("pattern", "atp"), ("q", "atp*"), ("k", "atp*")):
        for by_position in (False, True) if site in ("q", "k", "pattern") else (False,):
            est = A.attribution_patching(demo, clean, corrupted, "logit_diff", site, by_position, method, **options)
            exact = ap.patching(demo, clean, corrupted, "logit_diff", site, by_position, progress=False, **options)
            assert (est.values[1] - exact.values[1]).abs().max() < 1e-4, (site, by_position)
            assert (exact.values[1] - exact.corrupted_value).abs().max() > 1e-2
    linear = A.attribution_patching(demo, clean, corrupted, "logit_diff", "q", method="atp", **options)
    assert (linear.values[1] - exact_q(demo, clean, corrupted, options)).abs().max() > 1e-3  # the softmax is not linear


def exact_q(demo, clean, corrupted, options):
    return ap.patching(demo, clean, corrupted, "logit_diff", "q", progress=False, **options).values[1]


def test_graddrop_is_the_paths_taken_by_hand(demo):
    """Two blocks: a layer-1 head's GradDrop magnitude is |its estimate| (dropping layer 0 leaves its paths, dropping
    its own layer leaves none); a layer-0 head keeps only its direct path to the logits, Δz · W_O · (W_U[t] − W_U[b])."""
    clean = A.repeated_random_tokens(demo, seq_len=8, batch=3, seed=1)
    corrupted = torch.cat([clean[:, :9], clean[:, 9:].roll(1, 0)], 1)
    target, baseline = torch.tensor([3, 4, 5]), 6
    options = dict(target=target, baseline_token=baseline)
    star = A.attribution_patching(demo, clean, corrupted, "logit_diff", "out", method="atp*", **options)
    plain = A.attribution_patching(demo, clean, corrupted, "logit_diff", "out", **options)
    assert torch.allclose(star.values, plain.values)  # GradDrop changes the ranking score, not the estimate
    assert (star.magnitude[1] - plain.magnitude[1]).abs().max() < 1e-5
    with torch.no_grad():
        _, cc = demo.run_with_cache(clean)
        _, kc = demo.run_with_cache(corrupted)
    dz = cc["blocks.0.attn.hook_z"][:, -1] - kc["blocks.0.attn.hook_z"][:, -1]  # [batch, head, d_head] at the last position
    direction = demo.W_U[:, target].T - demo.W_U[:, baseline]  # [batch, d_model]
    direct = torch.einsum("bhd,hdm,bm->bh", dz, demo.W_O[0], direction)
    assert (star.magnitude[0] - direct.abs().mean(0)).abs().max() < 1e-4
    assert (star.magnitude[0] - plain.magnitude[0]).abs().max() > 1e-3  # here the indirect path mattered


def test_verify_runs_exact_patching_on_the_top_heads(demo):
    clean = A.repeated_random_tokens(demo, seq_len=5, batch=4, seed=1)
    corrupted = torch.cat([clean[:, :6], clean[:, 6:].roll(1, 0)], 1)
    est = A.attribution_patching(demo, clean, corrupted, "loss", "k", method="atp*")
    check = est.verify(k=5)
    exact = ap.patching(demo, clean, corrupted, "loss", "k", progress=False)
    order = torch.argsort(est.magnitude.flatten(), descending=True, stable=True)[:5]
    assert check.heads == [(int(i) // 4, int(i) % 4) for i in order]
    assert torch.allclose(check.exact, exact.values.flatten()[order], atol=1e-5)
    assert torch.allclose(check.estimate, est.values.flatten()[order])
    assert check.rank_correlation == pytest.approx(gp.spearman(check.estimate, check.exact))
    assert -1 <= check.rank_correlation <= 1 and "Spearman" in check.table()
    by_position = A.attribution_patching(demo, clean, corrupted, "loss", "v", by_position=True).verify(k=4)
    assert all(len(cell) == 3 for cell in by_position.heads)
    full = ap.patching(demo, clean, corrupted, "loss", "v", True, progress=False).values
    assert torch.allclose(by_position.exact, torch.stack([full[cell] for cell in by_position.heads]), atol=1e-5)


def test_spearman_against_hand_ranks():
    assert gp.spearman(torch.tensor([1.0, 2, 3, 4]), torch.tensor([4.0, 3, 2, 1])) == -1.0
    assert gp.spearman(torch.tensor([1.0, 2, 2, 3]), torch.tensor([1.0, 2, 3, 4])) == pytest.approx(0.9486832980505138)
    assert math.isnan(gp.spearman(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 2.0])))
    assert math.isnan(gp.spearman(torch.tensor([1.0]), torch.tensor([1.0])))


def test_atp_of_grouped_keys_and_rotary_queries(llama):
    clean, corrupted = prompts(14, batch=2, seq=8)
    metric = lambda logits: logits[:, -1, 5] - logits[:, -1, 6]  # noqa: E731
    est = A.attribution_patching(llama, clean, corrupted, metric, "k", method="atp*")
    assert est.grouped and torch.equal(est.values[:, 0], est.values[:, 1]) and torch.equal(est.values[:, 2], est.values[:, 3])
    exact = ap.patching(llama, clean, corrupted, metric, "k", progress=False).values
    assert (est.values - exact).abs().max() < 0.5 * (exact - est.corrupted_value).abs().max() + 1e-6
    q = A.attribution_patching(llama, clean, corrupted, metric, "q", True, method="atp*")  # rotated by the model's rope
    assert q.values.shape == (2, 4, 8) and not q.values.isnan().any()


# ----- 4. statistics never mislead; bad input --------------------------------------------------------------------
def test_a_nan_metric_gives_nan_statistics_never_p_zero(demo):
    tokens = prompts(15, batch=5)[0]

    def sometimes_nan(logits):  # NaN for prompt 2 whenever its last logit of token 3 falls below the clean one
        value = logits[:, -1, 3].clone()
        value[2] = math.nan if float(logits[2, -1, 3]) < clean_value - 1e-6 else value[2]
        return value

    with torch.no_grad():
        clean_value = float(demo(tokens)[2, -1, 3])
    fx = A.ablation_effects(demo, tokens, sometimes_nan, method="zero", n_boot=50, progress=False)
    nan_heads = fx.per_prompt[..., 2].isnan()
    assert bool(nan_heads.any()) and bool((~nan_heads).any())
    for stat in (fx.effect, fx.low, fx.high, fx.p_value):
        assert torch.equal(stat.isnan(), nan_heads)
    assert bool((fx.p_value[~nan_heads] > 0).all())
    with pytest.raises(ValueError, match=re.escape("the metric is NaN for prompt(s) [1] of the clean run")):
        A.ablation_effects(demo, tokens, lambda logits: logits[:, -1, 3] / torch.tensor([1.0, 0, 1, 1, 1]) * 0,
                           progress=False)


def errors(demo):
    clean, corrupted = prompts(16)
    P = A.path_patching
    return [
        (lambda: ap.patching(demo, clean, corrupted, lambda logits: logits[:, :, 0], progress=False), ValueError,
         "one value per prompt or one number, shape (3,) or (); got shape (3, 9)"),
        (lambda: A.ablation_effects(demo, clean, lambda logits: logits[:, -1, :2], progress=False), ValueError,
         "one value per prompt, shape (3,); got shape (3, 2)"),
        (lambda: P(demo, clean, corrupted, lambda logits: logits[:, -1, 0].mean(), [(0, 1)], "logits"), ValueError,
         "one value per prompt, shape (3,); got shape ()"),
        (lambda: P(demo, clean, corrupted, "loss", [(0, 1)], [(0, 2, "k")]), ValueError,
         "receiver (0, 2, 'k') is not in a layer after any sender (the first sender is in layer 0)"),
        (lambda: P(demo, clean, corrupted, "loss", [(0, 1)], [(1, 2, "z")]), ValueError, 'the channel must be "q", "k" or "v"'),
        (lambda: P(demo, clean, corrupted, "loss", [(0, 1)], [(1, 2)]), TypeError,
         'each receiver must be (layer, head, "q"|"k"|"v")'),
        (lambda: P(demo, clean, corrupted, "loss", [(0, 1)], []), ValueError, "receivers must name at least one"),
        (lambda: P(demo, clean, corrupted, "loss", [], "logits"), ValueError, "senders must name at least one"),
        (lambda: P(demo, clean, corrupted, "loss", [(0, 9)], "logits"), ValueError, "head must be in [0, 4); got 9"),
        (lambda: P(demo, clean, corrupted, "loss", [(0, 1)], "logits", "sideways"), ValueError, "direction must be one of"),
        (lambda: P(demo, clean, corrupted[:, :5], "loss", [(0, 1)], "logits"), ValueError, "must have one shape"),
        (lambda: A.attribution_patching(demo, clean, corrupted, "loss", method="atp**"), ValueError, "method must be one of"),
        (lambda: A.attribution_patching(demo, clean, corrupted, "loss", site="z"), ValueError, "site must be one of"),
        (lambda: A.attribution_patching(demo, clean, corrupted, "loss").verify(k=0), ValueError, "k must be a positive int"),
        (lambda: A.ablation_effects(demo, clean, per_run=0, progress=False), ValueError, "per_run must be a positive int"),
        (lambda: A.composition_paths(demo, clean, corrupted, "loss", "K", 1, 0), ValueError, "must come before"),
        (lambda: A.composition_paths(demo, clean, corrupted, "loss", "X", 0, 1), ValueError, "kind must be one of"),
    ]


def test_bad_input_is_refused_naming_the_problem(demo):
    for call, kind, message in errors(demo):
        with pytest.raises(kind, match=re.escape(message)):
            call()
    assert cw.as_view(demo).hook_state() == ()


def test_a_model_whose_runs_stay_remote_says_why():
    from test_remote_weights import remote_pair

    _, remote, _ = remote_pair("llama")
    clean, corrupted = prompts(17, batch=2, seq=6)
    for feature in ("resume", "gradients"):
        assert not remote.supports(feature) and "not on this machine" in remote.supports(feature).reason
    with pytest.raises(ValueError, match="not on this machine"):
        A.path_patching(remote, clean, corrupted, "loss", [(0, 1)], "logits")
    with pytest.raises(ValueError, match="not on this machine"):
        A.attribution_patching(remote, clean, corrupted, "loss")
