"""Direct logit attribution: terms sum to the model's logit, each term equals a dense brute-force
computation, the demo model's induction heads write the answer, and LogitAttribution sends exactly
what circuitwidgets.analysis computes."""

from __future__ import annotations

import pytest
import torch
import traitlets
from factories import small_bridge
from planted import words

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import logit_attribution, logit_attribution_by_position
from circuitwidgets.widgets.attribution import LogitAttribution

MLP = dict(attn_only=False, d_mlp=96, act_fn="gelu")
CONFIGS = {
    "attn-only": {},
    "attn-only LN": dict(normalization_type="LN"),
    "MLP": dict(MLP, act_fn="relu"),
    "MLP LN": dict(MLP, normalization_type="LN"),
    "MLP RMS rotary GQA": dict(MLP, normalization_type="RMS", positional_embedding_type="rotary", n_key_value_heads=2),
}


def jittered(**overrides):
    """A small bridge whose every parameter (LayerNorm weights, b_O, b_U, ... included) got noise, so no bias is 0."""
    model = small_bridge(**overrides)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model


def random_tokens(n: int, vocab: int = 64, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def model(request):
    return jittered(**CONFIGS[request.param])


def test_terms_sum_to_the_models_logit(model):
    tokens = random_tokens(20)
    with torch.no_grad():
        logits = model(tokens)[0]
    by_pos = logit_attribution_by_position(model, tokens)
    want = logits[torch.arange(19), tokens[0, 1:]]
    assert (by_pos.total()[:-1] - want).abs().max() < 1e-4
    assert (by_pos.logits[:-1] - want).abs().max() < 1e-4
    assert torch.isnan(by_pos.logits[-1]) and by_pos.targets[-1] is None
    # a fixed target and a baseline: the logit difference, at every position
    diff = logit_attribution_by_position(model, tokens, target=5, baseline_token=7)
    assert (diff.total() - (logits[:, 5] - logits[:, 7])).abs().max() < 1e-4
    # one position, as a mapping
    attr = logit_attribution(model, tokens, position=-1, target=9)
    assert abs(sum(attr.values()) - float(logits[-1, 9])) < 1e-4
    assert attr.position == 19 and attr.target == 9 and attr.baseline is None
    assert attr["bias"] != 0  # jittered b_O (boot_native has no b_U; with LayerNorm "b_U" holds b_ln W_U)
    assert (attr["b_U"] != 0) == (attr.norm == "LN")


def test_terms_name_every_component(model):
    attr = logit_attribution(model, random_tokens(8), position=3)
    view = cw.as_view(model)
    names = list(attr)
    heads = [f"L{layer}H{h}" for layer in view.attn_layers for h in range(view.n_heads)]
    assert [n for n in names if n.startswith("L")] == heads
    assert names[0] == "embed" and names[-2:] == ["bias", "b_U"]
    assert ("pos_embed" in names) == (view.positional_embedding_type == "standard")
    assert [n for n in names if n.startswith("mlp")] == ([] if view.attn_only else ["mlp0", "mlp1"])
    assert names.index("mlp0" if not view.attn_only else "L1H0") < names.index("L1H0") + 1
    for layer, row in zip(view.attn_layers, attr.heads, strict=True):
        for h, value in enumerate(row.tolist()):
            assert attr[f"L{layer}H{h}"] == pytest.approx(value, abs=1e-7)
    assert attr.norm == view.final_norm
    assert (attr.scale is None) == (view.final_norm is None)


def test_each_term_equals_a_dense_brute_force():
    """Every term from first principles: heads as pattern @ values @ W_O, the norm recomputed by hand."""
    model = jittered(**MLP, normalization_type="LN")
    tokens = random_tokens(12, seed=5)
    target, position = 11, 8
    names = ["hook_embed", "hook_pos_embed", "blocks.1.hook_resid_post", "blocks.0.hook_mlp_out", "blocks.1.hook_mlp_out"]
    names += [f"blocks.{layer}.attn.{what}" for layer in (0, 1) for what in ("hook_pattern", "hook_v")]
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    resid = cache["blocks.1.hook_resid_post"][0, position]
    centred = resid - resid.mean()
    scale = torch.sqrt((centred**2).mean() + model.cfg.eps)
    w, b = model.ln_final.weight.detach(), model.ln_final.bias.detach()
    W_U, b_U = model.W_U.detach(), model.b_U.detach()

    def direct(x: torch.Tensor) -> float:  # frozen scale, term centred
        return float(((x - x.mean()) / scale * w) @ W_U[:, target])

    want = {"embed": direct(cache["hook_embed"][0, position]), "pos_embed": direct(cache["hook_pos_embed"][0, position])}
    for layer in (0, 1):
        pattern, v = cache[f"blocks.{layer}.attn.hook_pattern"][0], cache[f"blocks.{layer}.attn.hook_v"][0]
        for h in range(4):
            out = pattern[h, position] @ v[:, h] @ model.W_O[layer, h].detach()
            want[f"L{layer}H{h}"] = direct(out)
        want[f"mlp{layer}"] = direct(cache[f"blocks.{layer}.hook_mlp_out"][0, position])
    want["bias"] = direct(model.b_O.detach().sum(0))
    want["b_U"] = float(b_U[target] + b @ W_U[:, target])
    got = logit_attribution(model, tokens, position, target)
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, abs=1e-4), name
    assert got.scale == pytest.approx(float(scale), rel=1e-5)


def test_rms_terms_are_not_centred():
    model = jittered(**MLP, normalization_type="RMS")
    tokens = random_tokens(10, seed=2)
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in ("hook_embed", "blocks.1.hook_resid_post"))
    resid = cache["blocks.1.hook_resid_post"][0, 4]
    scale = torch.sqrt((resid**2).mean() + model.cfg.eps)
    embed = cache["hook_embed"][0, 4]
    want = float((embed / scale * model.ln_final.weight.detach()) @ model.W_U.detach()[:, 3])
    got = logit_attribution(model, tokens, 4, 3)
    assert got.norm == "RMS" and got["embed"] == pytest.approx(want, abs=1e-5)


def test_demo_induction_heads_write_the_answer(demo):
    heads = cw.demo.model_card()["heads"]
    induction = [tuple(x) for x in heads["induction"]]
    view = cw.as_view(demo)
    r = torch.randint(2, view.d_vocab, (20,), generator=torch.Generator().manual_seed(0)).tolist()
    tokens = [0, *r, *r]
    by_pos = logit_attribution_by_position(demo, [tokens])
    with torch.no_grad():
        logits = demo(torch.tensor([tokens]))[0]
    want = logits[torch.arange(40), torch.tensor(tokens[1:])]
    assert (by_pos.total()[:-1] - want).abs().max() < 1e-4
    second = slice(21, 40)  # destinations in the second copy: the next token is predictable
    rows = [view.attn_layers.index(layer) for layer, _ in induction]
    written = sum(by_pos.heads[second, row, h] for row, (_, h) in zip(rows, induction, strict=True))
    others = by_pos.heads[second].sum((1, 2)) - written
    assert written.mean() > 1.0 and written.mean() > 5 * others.abs().mean()
    first = by_pos.heads[1:20].sum((1, 2))  # first copy: nothing to copy yet
    assert written.mean() > 5 * first.abs().mean()


def test_bad_input(demo):
    with pytest.raises(ValueError, match="no next token.*target="):
        logit_attribution(demo, "abcabc")
    with pytest.raises(ValueError, match="out of range"):
        logit_attribution(demo, "abc", position=4)
    with pytest.raises(TypeError, match="position must be an int"):
        logit_attribution(demo, "abc", position=True)
    with pytest.raises(ValueError, match="target: .*2 tokens"):
        logit_attribution(demo, "abc", target="ab")
    with pytest.raises(ValueError, match="baseline_token: .*out of range"):
        logit_attribution(demo, "abc", target="a", baseline_token=999)
    with pytest.raises(TypeError, match="target must be"):
        logit_attribution(demo, "abc", target=2.0)
    with pytest.raises(ValueError, match="one sequence"):
        logit_attribution(demo, [[0, 2, 3], [0, 3, 2]], position=0)


# ----- widget ---------------------------------------------------------------------------------


def decoded(w: LogitAttribution) -> dict[str, torch.Tensor]:
    values = transport.decode(w.attribution)
    return {name: values[:, i] for i, name in enumerate(w.attribution["names"])}


def test_widget_payload_equals_the_analysis(demo):
    prompt = "abcdefgabcdefg"
    w = LogitAttribution(demo, prompt=prompt, layer=1, head=2)
    assert w.position == -2 and w.error == ""
    columns = decoded(w)
    ids = w.tokens
    for position in range(len(ids) - 1):
        want = logit_attribution(demo, prompt, position)
        for name, value in want.items():
            assert float(columns[name][position]) == pytest.approx(value, abs=1e-6), (position, name)
        assert w.attribution["logits"][position] == pytest.approx(want.logit, abs=1e-6)
    assert torch.isnan(columns["L0H0"][-1]) and w.attribution["logits"][-1] is None
    assert w.attribution["targets"] == [*ids[1:], -1]
    assert w.attribution["target_strings"][:3] == ["a", "b", "c"]
    assert w.attribution["labels"] == w.str_tokens and w.attribution["norm"] is None


def test_widget_target_baseline_and_position(demo):
    w = LogitAttribution(demo, prompt="abcabc", target="a", baseline_token="b")
    assert w.target == 2 and w.baseline_token == 3 and w.position == -1
    assert (w.target_text, w.baseline_text) == ("a", "b")
    columns = decoded(w)
    want = logit_attribution(demo, "abcabc", -1, "a", "b")
    assert float(columns["L1H0"][-1]) == pytest.approx(want["L1H0"], abs=1e-6)
    assert w.attribution["fixed_target"] and w.attribution["baseline_string"] == "b"
    # typed in the widget: resolved to ids, "" back to the next token
    w.set_state({"target_text": "c"})
    assert w.target == 4 and w.attribution["targets"] == [4] * 7
    w.set_state({"baseline_text": ""})
    assert w.baseline_token is None and w.attribution["baseline"] is None
    w.set_state({"target_text": ""})
    assert w.target is None and w.attribution["targets"][-1] == -1
    # position: a click on a token sets it (no model run: every position is in the payload)
    runs = w.refresh_count
    w.set_state({"position": 2})
    assert w.position == 2 and w.refresh_count == runs
    # a shorter prompt puts an out-of-range position back to the default
    w.prompt = "a"
    assert w.position == -2 and w.attribution["shape"][0] == 2


def test_widget_bad_input_keeps_the_last_picture(demo):
    w = LogitAttribution(demo, prompt="abcabc")
    before = dict(w.attribution)
    with pytest.raises(traitlets.TraitError, match="2 tokens"):
        w.target_text = "ab"
    assert "2 tokens" in w.error and w.attribution == before
    w.target_text = "a"
    assert w.error == "" and w.target == 2
    w.set_state({"target_text": "bc"})  # typed in the browser: shown, not raised (a TraitError would roll it back)
    assert "2 tokens" in w.error and w.target == 2
    w.set_state({"target_text": "b"})
    assert w.error == "" and w.target == 3
    with pytest.raises(traitlets.TraitError, match="out of range"):
        w.position = 9
    with pytest.raises(traitlets.TraitError, match="out of range"):
        w.target = 64
    with pytest.raises(ValueError, match="prompt= .* or tokens="):
        LogitAttribution(demo)
    with pytest.raises(TypeError, match="unexpected keyword argument 'targt'"):
        LogitAttribution(demo, prompt="ab", targt="a")


def test_widget_without_a_tokenizer(planted):
    model, heads = planted
    layer, head = heads["induction"]
    ids = [5, 9, 3, 7, 11, 5, 9, 3, 7, 11]
    w = LogitAttribution(model, tokens=ids, layer=layer, head=head)
    assert w.str_tokens == [str(i) for i in ids]
    want = logit_attribution(model, [ids], len(ids) - 2)
    assert float(decoded(w)[f"L{layer}H{head}"][len(ids) - 2]) == pytest.approx(want[f"L{layer}H{head}"], abs=1e-6)
    w.set_state({"target_text": "7"})
    assert w.target == 7
    with pytest.raises(traitlets.TraitError, match="no tokenizer"):
        w.target_text = "t7"


def test_widget_with_layernorm_says_the_scale_is_frozen():
    model = jittered(**MLP, normalization_type="LN")
    w = LogitAttribution(model, tokens=random_tokens(9)[0].tolist())
    assert w.attribution["norm"] == "LN" and w.info["norm"] == "LN"
    by_pos = logit_attribution_by_position(model, random_tokens(9))
    assert w.attribution["scale"] == pytest.approx(by_pos.scale.tolist(), rel=1e-6)
    assert "mlp1" in w.attribution["names"]


def test_planted_words_prompt(planted_words):
    model, heads = planted_words
    prompt = words([5, 9, 3, 7, 11, 5, 9, 3, 7, 11])
    w = LogitAttribution(model, prompt=prompt)
    assert w.error == "" and w.attribution["target_strings"][1] == w.str_tokens[2]


def test_widget_recomputes_after_a_weight_edit_at_the_next_click():
    model = cw.demo_model()
    w = LogitAttribution(model, prompt="abcabcabc", layer=1, head=0)
    before = decoded(w)["L1H0"].clone()
    with torch.no_grad():
        for p in model.parameters():
            p.data.mul_(1.5)  # behind autograd's back, as an ablation does
    w.set_state({"position": 3})  # a click on a token: the widget sees the edit and recomputes
    after = decoded(w)["L1H0"]
    assert not torch.allclose(after, before, equal_nan=True)
    want = logit_attribution(model, "abcabcabc", 3)
    assert float(after[3]) == pytest.approx(want["L1H0"], abs=1e-5)


def test_deferred_widget_draws_once_the_cell_has_returned():
    import asyncio

    model = cw.demo_model()

    async def cell():
        w = LogitAttribution(model, prompt="abcabc", defer=True)
        shown = (w.attribution, w.busy)  # as displayed when the cell returns
        await asyncio.sleep(0.05)
        return w, shown

    w, (before, busy) = asyncio.run(cell())
    assert before == {} and busy
    assert not w.busy and w.error == "" and w.attribution["shape"] == [7, 12]  # embed, pos_embed, 8 heads, bias, b_U
    now = LogitAttribution(model, prompt="abcabc", defer=True)  # no event loop running: drawn at once
    torch.testing.assert_close(transport.decode(now.attribution), transport.decode(w.attribution), equal_nan=True)
    with pytest.raises(TypeError, match="defer must be a bool"):
        LogitAttribution(model, prompt="abcabc", defer="yes")


def test_non_finite_activations_are_caught_and_huge_finite_ones_are_not():
    from circuitwidgets.numerics import all_finite

    assert all_finite(torch.full((3, 5), 3e38))  # each row's sum overflows; every entry is finite
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = torch.zeros(3, 5)
        x[1, 2] = bad
        assert not all_finite(x) and not all_finite(x.half())
    model = cw.demo_model()

    def nan_z(z, hook):
        z[:, 2] = float("nan")
        return z

    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_z", nan_z)]):
        with pytest.raises(ValueError, match="logits contain NaN/Inf"):
            logit_attribution_by_position(model, "abcabc")
        w = LogitAttribution(model, prompt="abcabc")
    assert "NaN/Inf" in w.error
