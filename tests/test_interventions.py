"""Ablation and activation patching (circuitwidgets.analysis.interventions, .patching).

Checked against hooks written out here by hand (TransformerLens ``run_with_hooks``, and forward
pre-hooks on a Hugging Face model's output projection: references with no circuitwidgets code in
them), against TransformerLens' own ``transformer_lens.patching`` functions, against the demo
model's known induction circuit, and against brute-force statistics.
"""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pytest
import torch
import transformer_lens.patching as tl_patching
from factories import small_bridge
from hypothesis import given, settings
from hypothesis import strategies as st

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import interventions as iv
from circuitwidgets.analysis.activation_patching import patching
from circuitwidgets.demo import tiny_hf_model

ATOL = 1e-5
SECOND = range(21, 40)  # logit positions predicting tokens 2..20 of the second copy ([BOS, r, r], |r| = 20)
FIRST = range(0, 20)  # logit positions predicting the first copy
SITES = ["out", "q", "k", "v", "pattern"]
A = cw.analysis


def z_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


@pytest.fixture(scope="module")
def mlp_bridge():
    """A small random bridge with LayerNorm and MLPs (tests/factories.py)."""
    return small_bridge(attn_only=False, normalization_type="LN", d_mlp=128, act_fn="gelu")


@pytest.fixture(scope="module")
def models(demo, mlp_bridge):
    return {"demo": demo, "mlp_bridge": mlp_bridge}


@pytest.fixture(scope="module")
def induction(demo):
    """The spec's reference batch: 16 prompts of 20 random tokens repeated once after BOS, seed 3."""
    return A.repeated_random_tokens(demo, seq_len=20, batch=16, seed=3)


@pytest.fixture(scope="module")
def induction_effects(demo, induction):
    return A.ablation_effects(demo, induction, positions=SECOND, n_boot=200, progress=False)


def random_tokens(batch: int, seq: int, seed: int, vocab: int = 64) -> torch.Tensor:
    return torch.randint(2, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal entries and NaN at the same places (NaN marks what was not asked for)."""
    return a.shape == b.shape and torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def copy_loss(logits: torch.Tensor, tokens: torch.Tensor, positions=SECOND) -> float:
    """The mean next-token loss at `positions` (default: predicting the second copy)."""
    return float(A.next_token_loss(logits, tokens)[:, list(positions)].mean())


# ----- 1. ablation = hooks written by hand ---------------------------------------------------------
def hand_ablation_hooks(model, tokens, heads, method, reference=None) -> list:
    """TransformerLens ``fwd_hooks`` replacing the ``z`` of `heads`, with replacements from a clean
    ``run_with_cache`` of `reference` (default: `tokens`)."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens if reference is None else reference)
    hooks = []
    for layer in sorted({layer for layer, _ in heads}):
        chosen = [head for at, head in heads if at == layer]
        source = cache[z_name(layer)]

        def hook(z, hook, source=source, chosen=chosen):
            z = z.clone()
            batch, seq = z.shape[:2]
            for head in chosen:
                if method == "zero":
                    z[:, :, head] = 0.0
                elif method == "mean":
                    z[:, :, head] = source[:, :seq, head].mean(0)
                elif reference is None:  # prompt i takes prompt i + 1's z, the last the first's
                    z[:, :, head] = torch.stack([source[(i + 1) % batch, :seq, head] for i in range(batch)])
                else:  # prompt i takes reference prompt i mod len(reference)
                    z[:, :, head] = torch.stack([source[i % len(source), :seq, head] for i in range(batch)])
            return z

        hooks.append((z_name(layer), hook))
    return hooks


@pytest.mark.parametrize("method", ["zero", "mean", "resample"])
@pytest.mark.parametrize("name", ["demo", "mlp_bridge"])
def test_run_with_ablation_equals_hand_written_hooks(models, name, method):
    model = models[name]
    tokens = random_tokens(4, 10, seed=1)
    heads = [(0, 1), (1, 2), (1, 3)]
    ours = A.run_with_ablation(model, tokens, heads, method)
    with torch.no_grad():
        expected = model.run_with_hooks(tokens, fwd_hooks=hand_ablation_hooks(model, tokens, heads, method))
        clean = model(tokens)
    assert ours.dtype == torch.float32 and ours.shape == clean.shape
    assert (ours - expected).abs().max() < ATOL
    assert (ours - clean).abs().max() > 1e-2  # the ablation did something
    # the joint effect on the loss is the difference of the two runs' losses
    joint = A.joint_ablation_effect(model, tokens, heads, "loss", method)
    want = A.next_token_loss(expected, tokens).mean(-1) - A.next_token_loss(clean, tokens).mean(-1)
    assert joint.shape == (4,) and (joint - want).abs().max() < ATOL


@pytest.mark.parametrize("method", ["mean", "resample"])
def test_a_reference_batch_feeds_the_replacements(demo, method):
    """Resample: prompt i takes reference prompt i mod len(reference); mean: the reference's mean.
    The reference may be longer than the prompts (its first positions are used)."""
    tokens = random_tokens(5, 9, seed=2)
    reference = random_tokens(3, 12, seed=3)
    heads = [(0, 3), (1, 0)]
    ours = A.run_with_ablation(demo, tokens, heads, method, reference=reference)
    with torch.no_grad():
        expected = demo.run_with_hooks(tokens, fwd_hooks=hand_ablation_hooks(demo, tokens, heads, method, reference))
        batch_self = demo.run_with_hooks(tokens, fwd_hooks=hand_ablation_hooks(demo, tokens, heads, method))
    assert (ours - expected).abs().max() < ATOL
    assert (ours - batch_self).abs().max() > 1e-2  # the reference, not the batch, fed the replacements


def test_resample_against_the_batch_itself_takes_the_next_prompt(demo):
    """Prompt i's ablated run equals running prompt i alone with prompt i + 1's z (i + 1 mod batch)."""
    tokens = random_tokens(3, 8, seed=4)
    ours = A.run_with_ablation(demo, tokens, [(0, 1)], "resample")
    for i in range(3):
        alone = A.run_with_ablation(demo, tokens[i : i + 1], [(0, 1)], "resample", reference=tokens[(i + 1) % 3 :][:1])
        assert (ours[i] - alone[0]).abs().max() < ATOL


# ----- 2. patching = TransformerLens' patching functions ---------------------------------------------
def patching_prompts(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of ``1 + 2n`` tokens: BOS and a block repeated; the same with the repeat replaced."""
    block = random_tokens(2, n, seed)
    clean = torch.cat([torch.zeros(2, 1, dtype=torch.long), block, block], 1)
    corrupted = torch.cat([clean[:, : n + 1], random_tokens(2, n, seed + 100)], 1)
    return clean, corrupted


TARGET, BASELINE = torch.tensor([7, 11]), torch.tensor([3, 5])


def tl_metric(kind: str, clean: torch.Tensor):
    """The metric of ``patching(..., kind)`` written for TransformerLens (a scalar of the logits)."""
    rows = torch.arange(clean.shape[0])
    if kind == "callable":
        return lambda logits: (logits[:, -1, 5] - logits[:, -2, 9]).mean()
    if kind == "logit_diff":
        return lambda logits: (logits[rows, -1, TARGET] - logits[rows, -1, BASELINE]).mean()
    return lambda logits: torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), clean[:, 1:].flatten())


def our_patching(model, clean, corrupted, kind, site, by_position):
    metric = tl_metric("callable", clean) if kind == "callable" else kind
    options = dict(target=TARGET, baseline_token=BASELINE) if kind == "logit_diff" else {}
    return patching(model, clean, corrupted, metric, site, by_position, progress=False, **options)


@pytest.mark.parametrize("kind, by_position", [("callable", False), ("logit_diff", False), ("loss", False), ("callable", True)])
@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("name", ["demo", "mlp_bridge"])
def test_patching_equals_transformer_lens_patching(models, name, site, kind, by_position):
    model = models[name]
    clean, corrupted = patching_prompts(2 if by_position else 4)  # by position: a run per head and position
    ours = our_patching(model, clean, corrupted, kind, site, by_position)
    function = getattr(tl_patching, f"get_act_patch_attn_head_{site}_{'by' if by_position else 'all'}_pos")
    metric = tl_metric(kind, clean)
    with torch.no_grad():
        clean_logits, cache = model.run_with_cache(clean)
        theirs = function(model, corrupted, cache, metric)
        corrupted_value = float(metric(model(corrupted)))
    if by_position and site != "pattern":  # TransformerLens: [layer, pos, head]; ours: [layer, head, pos]
        theirs = theirs.permute(0, 2, 1)
    seq = clean.shape[1]
    assert ours.values.shape == ((2, 4, seq) if by_position else (2, 4)) == theirs.shape
    assert (ours.values - theirs.float()).abs().max() < ATOL
    assert ours.clean_value == pytest.approx(float(metric(clean_logits)), abs=ATOL)
    assert ours.corrupted_value == pytest.approx(corrupted_value, abs=ATOL)
    assert (ours.site, ours.by_position, ours.grouped) == (site, by_position, False)
    assert (ours.values - ours.corrupted_value).abs().max() > 1e-4  # some patch changed the metric
    gap = ours.clean_value - ours.corrupted_value
    assert torch.allclose(ours.normalised, (ours.values - ours.corrupted_value) / gap)


def test_the_public_name_is_the_function():
    """``cw.analysis.patching`` is the function, also after its module was imported by name (as a widget does)."""
    import circuitwidgets.analysis.activation_patching  # noqa: F401

    assert cw.analysis.patching is patching and "patching" in cw.analysis.__all__


# ----- 3. grouped K/V heads --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama():
    model, tokenizer = tiny_hf_model("llama")
    return cw.HFView(model, tokenizer=tokenizer)


def hand_patch(view, corrupted, name, clean_act, index, site, metric) -> float:
    """The metric of the corrupted run with head (or K/V group) `index` of `clean_act` patched in, by hand."""

    def hook(act, hook=None):
        act = act.clone()
        if site == "pattern":
            act[:, index] = clean_act[:, index]
        else:
            act[:, :, index] = clean_act[:, :, index]
        return act

    return float(metric(view.run_with_hooks(corrupted, [(name, hook)])[0]).mean())


@pytest.mark.parametrize("site", SITES)
def test_grouped_keys_and_values_are_patched_by_group(llama, site):
    view = llama
    assert view.n_kv_heads < view.n_heads  # the case under test: 4 query heads, 2 K/V groups
    per_group = view.n_heads // view.n_kv_heads
    clean, corrupted = random_tokens(2, 8, seed=5), random_tokens(2, 8, seed=6)

    def metric(logits):
        return logits[:, -1, 5] - logits[:, -1, 6]

    result = patching(view, clean, corrupted, metric, site=site, progress=False)
    grouped = site in ("k", "v")
    assert result.grouped is grouped and result.values.shape == (2, view.n_heads)
    names = [f"blocks.{layer}.attn.hook_{'z' if site == 'out' else site}" for layer in view.attn_layers]
    _, kept = view.run_with_hooks(clean, [], keep=names)
    for row, name in enumerate(names):
        assert kept[name].shape[1 if site == "pattern" else 2] == (view.n_kv_heads if grouped else view.n_heads)
        for head in range(view.n_heads):
            index = head // per_group if grouped else head
            want = hand_patch(view, corrupted, name, kept[name], index, site, metric)
            assert result.values[row, head] == pytest.approx(want, abs=ATOL), (name, head)
    values = result.values
    if grouped:  # the heads of one group share its keys and values: one value per group
        assert torch.equal(values, values[:, ::per_group].repeat_interleave(per_group, dim=1))
    else:  # each head its own
        assert (values[:, 0] - values[:, 1]).abs().max() > 1e-6
    assert (values - result.corrupted_value).abs().max() > 1e-5  # the patches reach the output


def test_grouped_values_by_position(llama):
    clean, corrupted = random_tokens(1, 6, seed=7), random_tokens(1, 6, seed=8)
    result = patching(llama, clean, corrupted, "loss", site="v", by_position=True, progress=False)
    assert result.grouped and result.values.shape == (2, 4, 6)
    assert torch.equal(result.values[:, 0], result.values[:, 1]) and torch.equal(result.values[:, 2], result.values[:, 3])
    assert not torch.equal(result.values[:, 0], result.values[:, 2])


# ----- 4. every backend that runs hook points; none where the weights are not here --------------------
def output_projection(hf, layer: int):
    """The module taking the heads' concatenated outputs ``[..., n_heads * d_head]`` to the residual stream."""
    return hf.transformer.h[layer].attn.c_proj if hasattr(hf, "transformer") else hf.model.layers[layer].self_attn.o_proj


def hf_logits(hf, tokens, replace=None) -> tuple[torch.Tensor, dict]:
    """Logits of `hf` with ``replace[layer](x)`` applied to the inputs of layer's output projection
    (the heads' outputs, ``b_O`` after), and those inputs as the run saw them."""
    seen, handles = {}, []
    for layer in range(2):

        def pre(module, args, layer=layer):
            x = args[0]
            if replace and layer in replace:
                x = replace[layer](x.clone())
            seen[layer] = x.detach().clone()
            return (x, *args[1:])

        handles.append(output_projection(hf, layer).register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            logits = hf(tokens).logits.float()
    finally:
        for handle in handles:
            handle.remove()
    return logits, seen


# tests/test_conformance.py's backends, and an HFView of a Hugging Face model on nnsight's remote path run locally
BACKENDS = ["tl-bridge-gpt2", "hf-llama", "nnsight-llama", "nnsight-remote-llama", "hfview-gpt2", "hfview-remote-llama"]


@pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")
@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_ablates_and_patches_as_its_hugging_face_modules_do(name):
    """Zero and mean ablation and patching of each head's output, against pre-hooks on the Hugging
    Face output projection (``twin``: an un-bridged copy, for a TransformerLens bridge)."""
    from test_conformance import hf_model, make  # the conformance suite's backends, built as a user holds them

    if name == "hfview-remote-llama":
        hf, tokenizer = hf_model("llama")
        target = cw.HFView(hf, tokenizer=tokenizer, remote="local")
    else:
        b = make(name)
        target, hf = b.target(), b.twin if b.twin is not None else b.hf
    d_head = cw.as_view(target).d_head
    tokens, corrupted = random_tokens(3, 8, seed=9, vocab=60), random_tokens(3, 8, seed=10, vocab=60)

    def cut(head, source=None):  # replace head's slice of the projection's input
        def replace(x):
            x[..., head * d_head : (head + 1) * d_head] = (
                0.0 if source is None else source[..., head * d_head : (head + 1) * d_head]
            )
            return x

        return replace

    clean_logits, clean_inputs = hf_logits(hf, tokens)
    heads = [(0, 2), (1, 1)]
    for method in ("zero", "mean"):
        ours = A.run_with_ablation(target, tokens, heads, method)
        means = {layer: clean_inputs[layer].mean(0) if method == "mean" else None for layer in (0, 1)}
        expected, _ = hf_logits(hf, tokens, {layer: cut(head, means[layer]) for layer, head in heads})
        assert (ours - expected).abs().max() < ATOL, method
        assert (ours - clean_logits).abs().max() > 1e-3, method

    def metric(logits):
        return logits[:, -1, 5] - logits[:, -2, 6]

    result = patching(target, tokens, corrupted, metric, "out", progress=False)
    for layer, head in itertools.product(range(2), range(4)):
        patched, _ = hf_logits(hf, corrupted, {layer: cut(head, clean_inputs[layer])})
        assert result.values[layer, head] == pytest.approx(float(metric(patched).mean()), abs=ATOL), (layer, head)
    assert cw.as_view(target).hook_state() == ()


def test_a_model_whose_weights_are_not_here_says_why_it_cannot_be_ablated(tmp_path):
    """nnsight's ``LanguageModel(folder)`` (how a model for NDIF is made: weights on meta) and a
    TransformerLens model moved to meta: every intervention refuses with the reason."""
    from test_conformance import nnsight_from_folder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        remote, _ = nnsight_from_folder(tmp_path)
    tokens = random_tokens(2, 6, seed=11, vocab=60)
    for model in (cw.HFView(remote, remote="local"), cw.HFView(remote), cw.demo_model().to("meta")):
        calls = [
            lambda m: A.run_with_ablation(m, tokens, [(1, 0)]),
            lambda m: A.ablation_effects(m, tokens, heads=[(1, 0)], n_boot=10, progress=False),
            lambda m: A.joint_ablation_effect(m, tokens, [(1, 0)], method="zero"),
            lambda m: patching(m, tokens, tokens.flip(0), "loss", progress=False),
            lambda m: A.attention_patterns(A.ablated(m, [(1, 0)]), tokens[:1]),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="not on this machine"):
                call(model)


# ----- 5. the model, its hooks and its caches are left as they were ----------------------------------
def snapshot(model, prompt) -> dict:
    attribution = A.logit_attribution(model, prompt, target=5)
    return {
        "patterns": A.attention_patterns(model, prompt),
        "induction": A.head_scores(model, "induction"),
        "attribution heads": attribution.heads,
        "attribution terms": torch.tensor(list(attribution.terms.values())),
        **{f"param {name}": p.detach().clone() for name, p in model.named_parameters()},
    }


def torch_hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_interventions_leave_the_model_its_hooks_and_caches_as_they_were():
    model = cw.demo_model()
    view = cw.as_view(model)
    tokens = A.repeated_random_tokens(model, seq_len=6, batch=4, seed=1)
    prompt = tokens[:1]
    before, hooks_before = snapshot(model, prompt), torch_hooks(model)
    calls = 0

    def raises_at_the_third_call(logits):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("metric failed")
        return logits[:, -1, 0]

    def boom(z, hook=None):
        raise RuntimeError("hook failed")

    work = [
        lambda: A.ablation_effects(model, tokens, heads=[(0, 1), (1, 2)], n_boot=10, progress=False),
        lambda: patching(model, tokens, tokens.flip(0), "loss", site="pattern", progress=False),
        lambda: A.run_with_ablation(model, tokens, [(1, 0)], "resample"),
        lambda: A.attention_patterns(A.ablated(model, [(0, 1)], "mean", reference=tokens), prompt),
        lambda: A.logit_attribution(A.ablated(model, [(1, 0)]), prompt, target=5),
    ]
    failing = [  # a metric raising midway, a hook raising inside a run
        (lambda: A.ablation_effects(model, tokens, raises_at_the_third_call, n_boot=10, progress=False), "metric failed"),
        (lambda: patching(model, tokens, tokens.flip(0), raises_at_the_third_call, progress=False), "metric failed"),
        (lambda: A.run_with_ablation(model, tokens, [(0, 1)], "mean", reference=tokens[:, :4]), "reference prompts have 4"),
        (lambda: view.run_with_hooks(tokens, [(z_name(0), boom)]), "hook failed"),
    ]
    for call in work:
        call()
        assert view.hook_state() == () and torch_hooks(model) == hooks_before
    for call, message in failing:
        calls = 0
        with pytest.raises((RuntimeError, ValueError), match=message):
            call()
        assert view.hook_state() == () and torch_hooks(model) == hooks_before
    after = snapshot(model, prompt)
    assert before.keys() == after.keys()
    for key in before:
        assert identical(before[key], after[key]), key
    assert cw.as_view(model) is view  # nothing changed: the cached view is still current


# ----- 6. an ablated model in place of a model -------------------------------------------------------
def test_an_ablated_model_runs_ablated_and_keeps_the_models_weights(demo, induction):
    prompt = induction[:1]
    clean = A.attention_patterns(demo, prompt)
    off = A.ablated(demo, [(0, 1), (0, 3)], "mean", reference=induction)
    assert off.label == "L0H1, L0H3 mean-ablated" and "L0H1" in repr(off)
    patterns = A.attention_patterns(off, prompt)
    assert torch.equal(patterns[0], clean[0])  # layer 0 runs before the ablated outputs
    assert (patterns[1] - clean[1]).abs().max() > 0.1  # layer 1 reads them (K-composition)
    # the same as the hooks by hand
    with torch.no_grad(), demo.hooks(fwd_hooks=hand_ablation_hooks(demo, prompt, [(0, 1), (0, 3)], "mean", induction)):
        _, cache = demo.run_with_cache(prompt)
    assert (patterns[1] - cache["blocks.1.attn.hook_pattern"][0]).abs().max() < ATOL
    # logits, and attribution: a zero-ablated head writes nothing
    assert (cw.as_view(off).logits(prompt) - A.run_with_ablation(demo, prompt, off.heads, "mean", induction)).abs().max() < ATOL
    zero = A.logit_attribution(A.ablated(demo, [(1, 2)]), prompt, target=5)
    assert zero.heads[1, 2] == 0 and A.logit_attribution(demo, prompt, target=5).heads[1, 2] != 0
    # weight views are the model's own
    assert identical(A.copying_scores(off), A.copying_scores(demo))
    assert identical(A.composition_scores(off, "K"), A.composition_scores(demo, "K"))
    # ablating layer 1 leaves every pattern as it was, and changes the logits
    late = A.ablated(demo, [(1, 0)])
    assert torch.equal(A.attention_patterns(late, prompt), clean)
    assert (cw.as_view(late).logits(prompt) - cw.as_view(demo).logits(prompt)).abs().max() > 1e-2


def test_a_widget_draws_an_ablated_model(demo, induction):
    off = A.ablated(demo, [(0, 1), (0, 3)], "mean", reference=induction)
    widget = cw.AttentionPattern(off, prompt="abcdefabcdef", layer=1)
    clean = cw.AttentionPattern(demo, prompt="abcdefabcdef", layer=1)
    assert widget.error == "" and clean.error == ""
    drawn, clean_drawn = transport.decode(widget.patterns), transport.decode(clean.patterns)
    expected = A.attention_patterns(off, "abcdefabcdef")[1]  # [head, query, key]
    assert drawn.shape == expected.shape and (drawn - expected).abs().max() <= 1 / 255 + 1e-6
    assert (drawn - clean_drawn).abs().max() > 0.1


def test_an_ablated_model_follows_edits_of_the_model_and_recomputes_its_means():
    model = cw.demo_model()
    reference = A.repeated_random_tokens(model, seq_len=8, batch=4, seed=2)
    prompt = reference[:1]
    heads = [(0, 1)]
    off = A.ablated(model, heads, "mean", reference=reference)
    first = A.attention_patterns(off, prompt)
    stale_hooks = hand_ablation_hooks(model, prompt, heads, "mean", reference)  # means of the model before the edit
    linear = model.blocks[0].attn.v._original_component
    linear.weight.data[16:32].mul_(-2.0)  # head 1's columns of W_V in layer 0, through .data (no version bump)

    def layer_1_pattern(hooks):
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            _, cache = model.run_with_cache(prompt)
        return cache["blocks.1.attn.hook_pattern"][0]

    fresh = layer_1_pattern(hand_ablation_hooks(model, prompt, heads, "mean", reference))
    stale = layer_1_pattern(stale_hooks)
    assert (fresh - stale).abs().max() > 1e-2  # the means depend on the edit
    second = A.attention_patterns(off, prompt)
    assert (second[1] - fresh).abs().max() < ATOL
    assert (second - first).abs().max() > 1e-2


# ----- 7. the demo model's induction circuit (the spec's reference result) ---------------------------
def test_mean_ablating_layer_1_breaks_induction_only(demo, induction):
    clean = cw.as_view(demo).logits(induction).float()
    ablated = A.run_with_ablation(demo, induction, [(1, h) for h in range(4)], "mean")
    clean_second, ablated_second = copy_loss(clean, induction), copy_loss(ablated, induction)
    clean_first, ablated_first = copy_loss(clean, induction, FIRST), copy_loss(ablated, induction, FIRST)
    assert ablated_second >= 2 * clean_second
    assert abs(ablated_first - clean_first) < 0.2
    # the spec's figures: 0.33 -> 3.87 on the second copy; 4.20 -> 4.17 on the first
    assert (clean_second, ablated_second) == (pytest.approx(0.33, abs=0.01), pytest.approx(3.87, abs=0.01))
    assert (clean_first, ablated_first) == (pytest.approx(4.20, abs=0.01), pytest.approx(4.17, abs=0.01))


def test_ablation_effects_find_the_previous_token_and_induction_heads(demo, induction, induction_effects):
    card = cw.demo.model_card()["heads"]
    fx = induction_effects
    assert fx.effect.shape == fx.low.shape == fx.high.shape == fx.p_value.shape == (2, 4)
    assert fx.per_prompt.shape == (2, 4, 16) and fx.clean.shape == (16,)
    assert (fx.metric, fx.method, fx.n_boot, fx.seed) == ("loss", "mean", 200, 0) and "exact" in fx.p_method
    assert fx.clean.mean() == pytest.approx(0.33, abs=0.01)
    for layer, head in card["induction"] + card["previous_token"]:
        assert fx.low[layer, head] > 0 and fx.p_value[layer, head] < 0.001, (layer, head)
    previous = {tuple(pair) for pair in card["previous_token"]}
    ranked = sorted(range(4), key=lambda h: -float(fx.effect[0, h]))
    assert {(0, h) for h in ranked[: len(previous)]} == previous  # they matter most in layer 0
    # per prompt: the loss of each prompt's ablated run minus its clean loss
    ablated = A.run_with_ablation(demo, induction, [(1, 2)], "mean")
    want = A.next_token_loss(ablated, induction)[:, list(SECOND)].mean(-1) - fx.clean
    assert (fx.per_prompt[1, 2] - want).abs().max() < ATOL


def test_ablating_the_previous_token_heads_breaks_induction(demo, induction):
    """K-composition: the induction heads find their source through layer 0's previous-token heads."""
    card = cw.demo.model_card()["heads"]
    previous = [tuple(pair) for pair in card["previous_token"]]
    others = [(0, h) for h in range(4) if (0, h) not in previous]
    clean = copy_loss(cw.as_view(demo).logits(induction).float(), induction)
    without_previous = copy_loss(A.run_with_ablation(demo, induction, previous, "mean"), induction)
    without_others = copy_loss(A.run_with_ablation(demo, induction, others, "mean"), induction)
    assert without_previous > 2 * clean and without_previous > without_others
    joint = A.joint_ablation_effect(demo, induction, previous, positions=SECOND)
    assert joint.mean() == pytest.approx(without_previous - clean, abs=1e-4)


# ----- 8. statistics -----------------------------------------------------------------------------------
def brute_force_p(values: list[float]) -> float:
    """Two-sided sign-flip p-value by enumerating every sign pattern, in exact arithmetic for these values."""
    n, observed = len(values), abs(sum(values))
    hits = sum(
        abs(sum(s * v for s, v in zip(signs, values, strict=True))) >= observed for signs in itertools.product((1, -1), repeat=n)
    )
    return hits / 2**n


def test_intervals_contain_the_effect_and_p_values_are_probabilities(induction_effects):
    fx = induction_effects
    assert bool((fx.low <= fx.effect).all() and (fx.effect <= fx.high).all())
    assert bool((fx.p_value > 0).all() and (fx.p_value <= 1).all())
    assert torch.equal(fx.effect, fx.per_prompt.mean(-1))


def test_the_exact_permutation_test_is_the_enumeration():
    # ties included: halves and integers give sign patterns whose means equal the observed one exactly
    rows = [
        [0.5, -1.0, 2.0, 1.5, -0.25, 3.0, 0.0, 1.0],
        [1.0, 1.0, 1.0, -1.0, 2.0, -2.0, 0.5, 0.5],
        [0.0] * 8,
        [3.0, 2.5, 4.0, 1.0, 0.5, 2.0, 1.5, 3.5],
    ]
    p, method = iv.sign_flip_p_value(torch.tensor(rows), n_perm=10, seed=0)
    assert "exact" in method and "256 patterns" in method
    assert p.tolist() == pytest.approx([brute_force_p(r) for r in rows], abs=1e-12)
    assert p[2] == 1 and p[3] == pytest.approx(2 / 256)  # no effect at all; every value positive: the smallest p
    sixteen = torch.tensor([[3.0, -1, 4, 1, -5, 9, 2, -6, 5, 3, -5, 8, 9, -7, 9, 3]])  # exact in float32
    assert float(iv.sign_flip_p_value(sixteen, 10, 0)[0]) == pytest.approx(brute_force_p(sixteen[0].tolist()), abs=1e-12)


def test_the_sampled_permutation_test_is_close_to_the_exact_one():
    values = torch.tensor(
        [0.9, -0.4, 1.3, 0.2, -1.1, 0.7, 0.05, 0.6, -0.3, 0.8, 0.1, -0.9, 1.0, 0.4, -0.2, 0.3, 0.5, -0.6], dtype=torch.float64
    )
    assert len(values) > iv.EXACT_PERMUTATION_PROMPTS
    signs = 1 - 2 * (torch.arange(2 ** len(values))[:, None] >> torch.arange(len(values)) & 1).double()
    exact = float(((signs @ values).abs() >= values.sum().abs() - 1e-9).double().mean())
    assert 0.05 < exact < 0.5  # a p-value worth estimating
    p, method = iv.sign_flip_p_value(values[None].float(), n_perm=20000, seed=0)
    assert "20000 random patterns" in method
    assert float(p) == pytest.approx(exact, abs=0.015)


def test_one_seed_one_answer(demo):
    tokens = A.repeated_random_tokens(demo, seq_len=6, batch=20, seed=4)
    run = [A.ablation_effects(demo, tokens, heads=[(1, 0), (0, 1)], n_boot=300, seed=seed, progress=False) for seed in (5, 5, 6)]
    assert identical(run[0].low, run[1].low) and identical(run[0].high, run[1].high)
    assert identical(run[0].p_value, run[1].p_value) and "random patterns" in run[0].p_method  # 20 prompts: sampled
    asked = ~run[0].effect.isnan()
    assert int(asked.sum()) == 2 and bool(run[2].low.isnan().eq(~asked).all())
    assert not torch.equal(run[0].low[asked], run[2].low[asked])  # another seed, other resamples
    assert identical(run[0].per_prompt, run[2].per_prompt)  # the effects themselves do not depend on it


values = st.lists(st.floats(-100, 100, allow_nan=False, width=32), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(values, min_size=1, max_size=3), seed=st.integers(0, 1000))
def test_statistics_properties(rows, seed):
    n = min(len(r) for r in rows)
    per_prompt = torch.tensor([r[:n] for r in rows])
    p, _ = iv.sign_flip_p_value(per_prompt, n_perm=50, seed=seed)
    assert p.shape == (len(rows),) and bool(((p > 0) & (p <= 1)).all())
    assert torch.equal(iv.sign_flip_p_value(-per_prompt, n_perm=50, seed=seed)[0], p)  # sign-flip symmetry
    low, high = iv.bootstrap_interval(per_prompt, n_boot=50, seed=seed)
    slack = 1e-5 * (1 + per_prompt.abs().amax(-1))
    assert bool((low <= high + slack).all())
    assert bool((per_prompt.amin(-1) - slack <= low).all() and (high <= per_prompt.amax(-1) + slack).all())
    negated = iv.bootstrap_interval(-per_prompt, n_boot=50, seed=seed)
    assert torch.allclose(negated[0], -high, atol=1e-4) and torch.allclose(negated[1], -low, atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(17, 40), n_perm=st.integers(1, 200), seed=st.integers(0, 1000))
def test_sampled_p_values_are_counts_over_samples(n, n_perm, seed):
    per_prompt = torch.randn(2, n, generator=torch.Generator().manual_seed(seed))
    p, method = iv.sign_flip_p_value(per_prompt, n_perm=n_perm, seed=seed)
    hits = p * (1 + n_perm) - 1
    assert torch.allclose(hits, hits.round(), atol=1e-3) and bool(((hits >= 0) & (hits <= n_perm + 1e-3)).all())
    assert f"{n_perm} random patterns" in method


# ----- 9. bad input: refused, naming the problem ---------------------------------------------------------
def errors(demo):
    tokens = A.repeated_random_tokens(demo, seq_len=5, batch=4, seed=0)  # [4, 11]
    return [
        (lambda: A.run_with_ablation(demo, tokens, [(2, 0)]), ValueError, "layer 2 is not an attention layer"),
        (lambda: A.run_with_ablation(demo, tokens, [(0, 4)]), ValueError, r"head must be in [0, 4); got 4"),
        (lambda: A.run_with_ablation(demo, tokens, [(0, -1)]), ValueError, r"head must be in [0, 4); got -1"),
        (lambda: A.run_with_ablation(demo, tokens, [(0, 1.0)]), TypeError, "(layer, head) pair of ints; got (0, 1.0)"),
        (lambda: A.run_with_ablation(demo, tokens, [(True, 1)]), TypeError, "(layer, head) pair of ints"),
        (lambda: A.run_with_ablation(demo, tokens, [(0, 1, 2)]), TypeError, "(layer, head) pair of ints; got (0, 1, 2)"),
        (lambda: A.run_with_ablation(demo, tokens, "L0H1"), TypeError, "list of (layer, head) pairs; got 'L0H1'"),
        (lambda: A.run_with_ablation(demo, tokens, 5), TypeError, "list of (layer, head) pairs; got 5"),
        (lambda: A.ablated(demo, [(0, 9)]), ValueError, r"head must be in [0, 4); got 9"),
        (lambda: A.ablation_effects(demo, tokens, heads=[], progress=False), ValueError, "at least one (layer, head)"),
        (
            lambda: A.run_with_ablation(demo, tokens, [(0, 1)], "median"),
            ValueError,
            "method must be one of ('zero', 'mean', 'resample'); got 'median'",
        ),
        (lambda: A.ablation_effects(demo, tokens, method="median", progress=False), ValueError, "method must be one of"),
        (lambda: A.ablated(demo, [(0, 1)], "median"), ValueError, "method must be one of"),
        (lambda: A.run_with_ablation(demo, tokens[:1], [(0, 1)], "mean"), ValueError, "at least two reference prompts"),
        (
            lambda: A.run_with_ablation(demo, tokens, [(0, 1)], "mean", reference=tokens[:1]),
            ValueError,
            "at least two reference prompts",
        ),
        (lambda: A.run_with_ablation(demo, tokens[:1], [(0, 1)], "resample"), ValueError, "one prompt against itself"),
        (lambda: A.ablated(demo, [(0, 1)], "mean"), ValueError, "needs reference= tokens"),
        (lambda: A.ablated(demo, [(0, 1)], "mean", reference=tokens[:1]), ValueError, "at least two prompts"),
        (
            lambda: A.run_with_ablation(demo, tokens, [(0, 1)], "mean", reference=tokens[:, :5]),
            ValueError,
            "reference prompts have 5 positions, fewer than the 11",
        ),
        (
            lambda: A.ablation_effects(demo, tokens, method="resample", reference=tokens[:, :5], progress=False),
            ValueError,
            "reference prompts have 5 positions",
        ),
        (
            lambda: patching(demo, tokens, tokens[:, :5], "loss", progress=False),
            ValueError,
            "must have one shape; got (4, 11) and (4, 5)",
        ),
        (lambda: patching(demo, tokens, tokens[:2], "loss", progress=False), ValueError, "must have one shape"),
        (
            lambda: patching(demo, tokens, tokens, "loss", site="z", progress=False),
            ValueError,
            "site must be one of ['out', 'q', 'k', 'v', 'pattern']; got 'z'",
        ),
        (lambda: patching(demo, tokens, tokens, "logit_diff", progress=False), ValueError, 'metric="logit_diff" needs target='),
        (lambda: A.ablation_effects(demo, tokens, "logit_diff", progress=False), ValueError, 'metric="logit_diff" needs target='),
        (
            lambda: A.ablation_effects(demo, tokens, positions=[10], progress=False),
            ValueError,
            "position 10 is outside the 10 positions that have a next token",
        ),
        (lambda: A.ablation_effects(demo, tokens, positions=[-11], progress=False), ValueError, "position -11 is outside"),
        (lambda: A.ablation_effects(demo, tokens, positions=[], progress=False), ValueError, "at least one position"),
        (
            lambda: A.ablation_effects(demo, tokens, positions=[1.5], progress=False),
            TypeError,
            "positions must be an int or a list of ints",
        ),
        (
            lambda: patching(demo, tokens, tokens, "logit_diff", target=3, positions=11, progress=False),
            ValueError,
            "position 11 is outside the 11 positions",
        ),
        (
            lambda: A.ablation_effects(demo, tokens, "logit_diff", target=64, progress=False),
            ValueError,
            r"target must be token ids in [0, 64)",
        ),
        (
            lambda: A.ablation_effects(demo, tokens, "logit_diff", target=[1, 2], progress=False),
            ValueError,
            "one id per prompt (4)",
        ),
        (
            lambda: A.ablation_effects(demo, tokens, "accuracy", progress=False),
            ValueError,
            'metric must be "loss", "logit_diff" or a callable',
        ),
        (
            lambda: A.ablation_effects(demo, tokens, lambda logits: logits.sum(), progress=False),
            ValueError,
            "one value per prompt, shape (4,); got shape ()",
        ),
        (lambda: A.ablation_effects(demo, tokens, n_boot=0, progress=False), ValueError, "n_boot must be a positive int; got 0"),
        (lambda: A.ablation_effects(demo, tokens, seed=1.5, progress=False), TypeError, "seed must be an int"),
        (lambda: A.ablation_effects(demo, tokens, progress="yes"), TypeError, "progress must be True, False, None or a callable"),
        (
            lambda: patching(demo, tokens, tokens, "loss", progress=False).normalised,
            ValueError,
            "score the same on this metric: nothing to normalise by",
        ),
        (lambda: A.run_with_ablation(demo, [[0, 99]], [(0, 1)]), ValueError, "id 99, outside the vocabulary"),
    ]


def test_bad_input_is_refused_naming_the_problem(demo):
    for call, kind, message in errors(demo):
        with pytest.raises(kind, match=re.escape(message)):
            call()
    assert cw.as_view(demo).hook_state() == ()


def test_integers_of_any_kind_name_heads_and_positions(demo):
    tokens = A.repeated_random_tokens(demo, seq_len=5, batch=2, seed=0)
    want = A.run_with_ablation(demo, tokens, [(1, 2)])
    for heads in ([(np.int64(1), np.int64(2))], torch.tensor([[1, 2]]), (1, 2), [[1, 2], (1, 2)]):
        assert torch.equal(A.run_with_ablation(demo, tokens, heads), want), heads
    assert A.ablated(demo, torch.tensor([[1, 2]])).heads == [(1, 2)]
    fx = A.ablation_effects(demo, tokens, heads=[(1, 2)], positions=torch.arange(6, 10), n_boot=10, progress=False)
    again = A.ablation_effects(demo, tokens, heads=[(1, 2)], positions=range(6, 10), n_boot=10, progress=False)
    assert torch.equal(fx.per_prompt[1, 2], again.per_prompt[1, 2])
