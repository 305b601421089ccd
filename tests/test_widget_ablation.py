"""Ablation and Patching without a browser: payloads equal the analysis exactly, traits, errors, live model, export."""

from __future__ import annotations

import base64
import json
import re

import pytest
import torch
import traitlets
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets import analysis, transport
from circuitwidgets.analysis.interventions import bootstrap_interval, next_token_loss, sign_flip_p_value
from circuitwidgets.widgets.base import _traits_of

N_BOOT = 200
SECOND = range(21, 40)  # the logits predicting the second copy of the default prompts' block


@pytest.fixture(scope="module")
def tokens(demo):
    return analysis.repeated_random_tokens(demo, seq_len=20, batch=8)


@pytest.fixture(scope="module")
def corrupted(tokens):
    return torch.cat([tokens[:, :21], tokens[:, 21:].roll(1, 0)], 1)


@pytest.fixture(scope="module")
def short(demo):
    """Short prompts for patching by position (one run per head and position): clean and corrupted."""
    clean = analysis.repeated_random_tokens(demo, seq_len=5, batch=4, seed=1)
    return clean, torch.cat([clean[:, :6], clean[:, 6:].roll(1, 0)], 1)


def effects_of(model, tokens, **kwargs):
    return analysis.ablation_effects(model, tokens, n_boot=N_BOOT, progress=False, **kwargs)


def saved_state(w, tmp_path) -> dict:
    page = w.save_html(tmp_path / f"{w.view_name}.html").read_text()
    assert not re.search(r"""(src|href)=["']https?://""", page)
    state = re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1)
    return json.loads(state)["widgets"][0]


def decoded_saved(saved: dict, name: str) -> torch.Tensor:
    return transport.decode(base64.b64decode(saved[name]["data"]["$bytes"]), saved[name])


# ----- Ablation: payloads -----------------------------------------------------------------------


def test_the_default_ablation_grid_is_the_analysis_on_repeated_random_tokens(demo, tokens):
    w = cw.Ablation(demo, n_boot=N_BOOT)
    assert w.error == "" and torch.equal(w._tokens, tokens)
    fx = effects_of(demo, tokens, positions=SECOND)
    assert torch.equal(transport.decode(w.effects), torch.stack([fx.effect, fx.low, fx.high, fx.p_value]))
    assert w.effects["p_method"] == fx.p_method == "exact sign-flip permutation test (256 patterns)"
    assert (w.effects["n_boot"], w.effects["seed"], w.effects["metric"], w.effects["method"]) == (N_BOOT, 0, "loss", "mean")
    assert w.effects["clean"] == pytest.approx(0.33, abs=0.02)  # the reference second-copy loss
    assert w.info["batch"] == 8 and w.info["seq"] == 41 and w.info["attn_layers"] == [0, 1]
    assert w.effects_of().effect[1].min() > 0.5  # every induction head of layer 1 matters


def test_a_set_of_heads_shows_its_joint_effect_beside_the_sum_of_single_effects(demo, tokens):
    w = cw.Ablation(demo, n_boot=N_BOOT)
    assert transport.decode(w.joint).eq(0).all() and w.joint["heads"] == []
    clean_strip = transport.decode(w.strip)
    assert torch.equal(clean_strip[1], clean_strip[0])  # nothing ablated: the strip's two rows agree
    clean_logits = cw.as_view(demo).run_with_hooks(tokens, [])[0]
    assert torch.equal(clean_strip[0], next_token_loss(clean_logits, tokens))
    w.ablated = [(1, 2), [1, 0], [1, 0]]  # pairs of any kind, kept sorted and distinct
    assert w.ablated == [[1, 0], [1, 2]] and w.error == ""
    heads = [(1, 0), (1, 2)]
    joint = analysis.joint_ablation_effect(demo, tokens, heads, positions=SECOND)
    assert torch.equal(transport.decode(w.joint), joint) and w.joint["heads"] == [[1, 0], [1, 2]]
    low, high = bootstrap_interval(joint, N_BOOT, 0)
    p_value, p_method = sign_flip_p_value(joint, N_BOOT, 0)
    assert (w.joint["mean"], w.joint["low"], w.joint["high"]) == (float(joint.mean()), float(low), float(high))
    assert (w.joint["p_value"], w.joint["p_method"]) == (float(p_value), p_method)
    effect = w.effects_of().effect
    assert w.joint["sum_single"] == float(effect[1, 0]) + float(effect[1, 2])
    strip = transport.decode(w.strip)
    ablated_logits = analysis.run_with_ablation(demo, tokens, heads, "mean")
    assert torch.equal(strip[1], next_token_loss(ablated_logits, tokens)) and torch.equal(strip[0], clean_strip[0])
    assert strip.shape == (2, 8, 40) and w.strip["positions"] == list(SECOND) and w.strip["kind"] == "loss"
    assert w.strip["labels"][3] == cw.as_view(demo).token_strings(tokens[3].tolist())
    # the second-copy loss rises when every layer-1 head is off (reference: 0.33 -> 3.87 on 16 prompts)
    w.ablated = [[1, h] for h in range(4)]
    assert strip[1, :, 21:].mean() < transport.decode(w.strip)[1, :, 21:].mean()
    assert w.joint["mean"] > 2.5


def test_the_metric_and_method_recompute_and_equal_the_analysis(demo, tokens):
    w = cw.Ablation(demo, tokens, target=5, baseline_token=7, positions=30, n_boot=N_BOOT, ablated=[[0, 1]])
    w.method = "zero"
    fx = effects_of(demo, tokens, positions=30, method="zero")
    assert torch.equal(transport.decode(w.effects)[0], fx.effect)
    w.metric = "logit_diff"
    fx = effects_of(demo, tokens, metric="logit_diff", target=5, baseline_token=7, positions=30, method="zero")
    assert torch.equal(transport.decode(w.effects), torch.stack([fx.effect, fx.low, fx.high, fx.p_value]))
    joint = analysis.joint_ablation_effect(demo, tokens, [(0, 1)], "logit_diff", "zero", target=5, baseline_token=7, positions=30)
    assert torch.equal(transport.decode(w.joint), joint)
    strip = transport.decode(w.strip)
    logits = cw.as_view(demo).run_with_hooks(tokens, [])[0]
    assert strip.shape == (2, 8, 41) and w.strip["positions"] == [30] and w.strip["kind"] == "logit_diff"
    assert torch.equal(strip[0], logits[:, :, 5] - logits[:, :, 7])


def test_prompts_are_tokenised_through_the_view_and_must_have_one_length(demo):
    prompts = ["abcdabcd", "efghefgh", "ijklijkl"]
    w = cw.Ablation(demo, prompts, n_boot=N_BOOT)
    view = cw.as_view(demo)
    assert torch.equal(w._tokens, torch.cat([view.to_tokens(p) for p in prompts]))
    assert w.strip["labels"][1][1:] == list("efghefgh")
    with pytest.raises(ValueError, match=r"one number of tokens.*prompt 1 gives 6 tokens \(with BOS\) and prompt 0 4"):
        cw.Ablation(demo, ["abc", "abcde"])
    with pytest.raises(TypeError, match="a mix of both"):
        cw.Ablation(demo, ["abc", [2, 3, 4]])
    with pytest.raises(traitlets.TraitError, match="mean ablation over the batch itself needs at least two prompts"):
        cw.Ablation(demo, "abcabc")
    one = cw.Ablation(demo, "abcabc", method="mean", reference=prompts[:2] + ["mnopmnop"], n_boot=N_BOOT)
    assert one.error == "" and one.info["reference"] == "3 reference prompts"


def test_the_prompt_shown_switches_in_the_browser_without_the_kernel(demo):
    w = cw.Ablation(demo, n_boot=N_BOOT)
    runs = w.refresh_count
    w.prompt_index = 5
    w.set_state({"prompt_index": 7})
    assert w.prompt_index == 7 and w.refresh_count == runs and w.error == ""


def test_the_kernel_reports_its_progress_while_it_ablates(demo, tokens):
    w = cw.Ablation(demo, n_boot=N_BOOT)
    seen = []
    w.observe(lambda change: seen.append(change["new"]), names="progress")
    w.method = "zero"
    assert seen[0] == "ablating each head: 11 %" and seen[-2] == "ablating each head: 100 %" and seen[-1] == ""
    assert len(seen) == 9 + 1  # one run per head and the clean run, then idle


# ----- the error contract -------------------------------------------------------------------------

#: Bad values of each control, from Python and from the browser.
BAD = {
    "Ablation": {
        "ablated": [[[0, 0], [1, 9]], [[2, 0]], [None], ["a", 1], [[0, True]], [[0]], "junk", None, {}],
        "prompt_index": [8, -1, 10**30, 1.5, True, None, "1"],
        "metric": ["LOSS", "junk", "", None, 1],
        "method": ["median", "", None, 0],
    },
    "Patching": {
        "site": ["z", "OUT", "", None, 1],
        "by_position": [1, 0, "yes", None],
        "normalised": [1, "true", None],
        "method": ["Exact", "atp", "", None, 1],
        "estimator": ["atp**", "AtP", "", None, 0],
    },
}
GOOD = {"ablated": [[1, 1]], "prompt_index": 3, "metric": "logit_diff", "method": "zero", "site": "q", "by_position": True,
        "normalised": True, "estimator": "atp*"}
GOOD_OF = {("Patching", "method"): "attribution"}


def build(cls, model):
    if cls is cw.Ablation:
        return cls(model, n_boot=N_BOOT, target=5)
    clean = analysis.repeated_random_tokens(model, seq_len=5, batch=4, seed=1)
    return cls(model, clean, torch.cat([clean[:, :6], clean[:, 6:].roll(1, 0)], 1))


def pictures(w) -> dict:
    traits = _traits_of(type(w))
    return {n: getattr(w, n) for n in traits.ours if n not in traits.controls and n not in ("error", "busy", "progress")}


@pytest.mark.parametrize("cls", [cw.Ablation, cw.Patching], ids=lambda c: c.__name__)
def test_every_bad_value_of_every_control_is_refused_shown_and_kept_out(cls, demo):
    w = build(cls, demo)
    assert set(BAD[cls.__name__]) == _traits_of(cls).controls - {"layer", "head", "head_controls", "compact"}
    for name, values in BAD[cls.__name__].items():
        for value in values:
            before, picture = getattr(w, name), pictures(w)
            with pytest.raises(traitlets.TraitError) as raised:
                setattr(w, name, value)
            assert str(raised.value) == w.error and name in w.error, (name, value, w.error)
            w._set(error="")
            w.set_state({name: value})  # from the browser: never raises
            assert name in w.error and getattr(w, name) == before, (name, value)
            assert all(getattr(w, n) is v for n, v in picture.items()), (name, value)
        runs, good = w.refresh_count, GOOD_OF.get((cls.__name__, name), GOOD[name])
        setattr(w, name, good)
        assert w.error == "" and getattr(w, name) == good
        assert (w.refresh_count > runs) == (name in cls.inputs), name
        w.set_state({name: before})  # and back, from the browser
        assert w.error == "" and getattr(w, name) == before


def test_the_messages_say_what_is_wrong(demo):
    w = cw.Ablation(demo, n_boot=N_BOOT)
    with pytest.raises(traitlets.TraitError, match=r"head .1, 9.: head must be in \[0, 4\)"):
        w.ablated = [[1, 9]]
    with pytest.raises(traitlets.TraitError, match=r"prompt_index=8 is out of range: the batch has prompts 0..7"):
        w.prompt_index = 8
    with pytest.raises(traitlets.TraitError, match='metric="logit_diff" needs target='):
        w.metric = "logit_diff"
    with pytest.raises(traitlets.TraitError, match="method must be one of 'zero', 'mean', 'resample'"):
        w.method = "median"


@pytest.mark.parametrize("cls", [cw.Ablation, cw.Patching], ids=lambda c: c.__name__)
def test_computed_traits_are_read_only(cls, demo):
    w = build(cls, demo)
    traits = _traits_of(cls)
    for name in sorted(set(traits.ours) - traits.controls - {"_cw_view"}):
        with pytest.raises(traitlets.TraitError, match=f"{name} is computed by the widget"):
            setattr(w, name, {"x": 1} if isinstance(getattr(w, name), dict) else "x")
        w.set_state({name: {"data": b"\x00"}})
        assert f"{name} is computed by the widget" in w.error
        with pytest.raises(TypeError, match=f"{name!r}, which the widget computes"):
            cls(demo, **{name: getattr(w, name)})


def test_a_model_whose_runs_have_no_hook_points_says_why_in_the_widget():
    import transformers

    from circuitwidgets.demo import tiny_hf_model

    _, tokenizer = tiny_hf_model("gpt2")
    config = transformers.HeliumConfig(  # llama-like, not among the architectures TransformerLens 4 bridges
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, max_position_embeddings=256, vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    hf.tokenizer = tokenizer
    for w in (cw.Ablation(hf, n_boot=10), cw.Patching(hf)):
        assert "TransformerLens cannot bridge the architecture HeliumForCausalLM" in w.error
        assert "needs the weights in TransformerLens form" in w.error


# ----- the live model -------------------------------------------------------------------------------


def test_a_weight_edit_and_a_hook_show_at_the_next_action():
    model = cw.demo_model()
    tokens = analysis.repeated_random_tokens(model, seq_len=20, batch=8)
    w = cw.Ablation(model, n_boot=N_BOOT, ablated=[[1, 1]])
    p = cw.Patching(model)
    before, patched = transport.decode(w.effects), transport.decode(p.patching)
    with torch.no_grad():
        model.blocks[1].attn.W_V.data.mul_(0.5)  # in place, through .data
    w.ablated = [[1, 1], [1, 3]]  # a user action
    fx = effects_of(model, tokens, positions=SECOND)
    assert torch.equal(transport.decode(w.effects)[0], fx.effect) and not torch.equal(before[0], fx.effect)
    joint = analysis.joint_ablation_effect(model, tokens, [(1, 1), (1, 3)], positions=SECOND)
    assert torch.equal(transport.decode(w.joint), joint)
    p.set_state({"normalised": True})  # any browser action checks the model
    clean = analysis.repeated_random_tokens(model, seq_len=20, batch=8)
    corrupt = torch.cat([clean[:, :21], clean[:, 21:].roll(1, 0)], 1)
    result = analysis.patching(model, clean, corrupt, "loss", positions=SECOND, progress=False)
    assert torch.equal(transport.decode(p.patching)[0], result.values) and not torch.equal(patched[0], result.values)

    def silence(z, hook):  # every head of layer 1 outputs nothing
        return torch.zeros_like(z)

    model.add_hook("blocks.1.attn.hook_z", silence)
    try:
        w.set_state({"prompt_index": 2})  # a browser action: the hook shows
        assert transport.decode(w.effects)[0, 1].abs().max() == 0  # ablating a silent head changes nothing
        assert w.joint["mean"] == 0
    finally:
        model.reset_hooks()
    w.refresh()
    assert torch.equal(transport.decode(w.effects)[0], fx.effect)


# ----- Patching -------------------------------------------------------------------------------------


@pytest.mark.parametrize("site", ["out", "q", "k", "v", "pattern"])
def test_patching_payload_is_the_analysis_at_every_site(demo, tokens, corrupted, site):
    w = cw.Patching(demo, site=site)
    result = analysis.patching(demo, tokens, corrupted, "loss", site, positions=SECOND, progress=False)
    got = transport.decode(w.patching)
    assert torch.equal(got[0], result.values) and torch.equal(got[1], result.normalised)
    assert (w.patching["site"], w.patching["grouped"], w.patching["by_position"]) == (site, False, False)
    assert w.patching["clean_value"] == result.clean_value and w.patching["corrupted_value"] == result.corrupted_value
    assert w.result() is w.result(site) and w.error == ""


def test_patching_by_position_and_the_normalised_toggle(demo, short):
    clean, corrupt = short
    w = cw.Patching(demo, clean, corrupt, metric="logit_diff", target=clean[:, 10], positions=9, layer=1, head=2)
    runs = w.refresh_count
    w.normalised = True  # drawn from the payload already sent
    assert w.refresh_count == runs
    w.by_position = True
    result = analysis.patching(demo, clean, corrupt, "logit_diff", by_position=True, target=clean[:, 10], positions=9,
                               progress=False)
    got = transport.decode(w.patching)
    assert got.shape == (2, 2, 4, 11) and torch.equal(got[0], result.values) and torch.equal(got[1], result.normalised)
    assert w.patching["labels"] == cw.as_view(demo).token_strings(clean[0].tolist())
    assert w.patching["corrupted_labels"] == cw.as_view(demo).token_strings(corrupt[0].tolist())
    w.by_position = False  # computed before: not again
    assert w.result() is w.result("out", False)


def test_patching_says_when_k_and_v_are_grouped():
    model = small_bridge(n_key_value_heads=2)
    w = cw.Patching(model, site="k")
    values = transport.decode(w.patching)[0]
    assert w.patching["grouped"] is True and w.info["n_kv_heads"] == 2
    assert torch.equal(values[:, 0], values[:, 1]) and torch.equal(values[:, 2], values[:, 3])
    w.site = "pattern"  # a head's own use of its group's keys
    assert w.patching["grouped"] is False


def test_patching_selects_a_head_linkable_to_other_widgets(demo):
    w = cw.Patching(demo)
    other = cw.Ablation(demo, n_boot=N_BOOT)
    link = traitlets.link((w, "head"), (other, "head"))
    w.set_state({"layer": 1, "head": 3})  # a click on L1H3
    assert (w.layer, w.head, other.head) == (1, 3, 3)
    link.unlink()


def test_patching_checks_its_prompts_and_metric(demo, tokens, corrupted):
    with pytest.raises(ValueError, match="give both clean= and corrupted="):
        cw.Patching(demo, clean=tokens)
    with pytest.raises(ValueError, match=r"one shape \[batch, seq\]; got \[8, 41\] and \[8, 40\]"):
        cw.Patching(demo, tokens, corrupted[:, :40])
    with pytest.raises(ValueError, match='needs target='):
        cw.Patching(demo, tokens, corrupted, metric="logit_diff")
    with pytest.raises(TypeError, match="a callable on logits"):
        cw.Patching(demo, tokens, corrupted, metric=3)
    w = cw.Patching(demo, ["abcabc", "abdabd"], ["abcabd", "abdabc"], metric=lambda logits: logits[:, -1, 2])
    assert w.error == "" and w.info["metric"] == "<lambda>" and w.patching["shape"] == [2, 2, 4]
    same = cw.Patching(demo, tokens, tokens)  # nothing to restore: values, and a note instead of normalised
    assert torch.isnan(transport.decode(same.patching)[1]).all() and "score the same" in same.patching["not_normalised"]


# ----- export ---------------------------------------------------------------------------------------


def test_the_exported_pages_hold_the_grids(demo, short, tmp_path):
    w = cw.Ablation(demo, n_boot=N_BOOT, ablated=[[1, 0]])
    saved = saved_state(w, tmp_path)
    assert saved["_cw_view"] == "ablation" and saved["ablated"] == [[1, 0]]
    for name in ("effects", "joint", "strip"):
        assert torch.equal(decoded_saved(saved, name), transport.decode(getattr(w, name))), name
    p = cw.Patching(demo, *short, by_position=True)
    saved = saved_state(p, tmp_path)
    assert saved["_cw_view"] == "patching" and torch.equal(decoded_saved(saved, "patching"), transport.decode(p.patching))


def test_docstrings_list_every_trait():
    for cls in (cw.Ablation, cw.Patching):
        for name in ("error", *_traits_of(cls).controls):
            assert f"{name} (" in cls.__doc__ or name in ("layer", "head", "head_controls", "compact", "error"), (cls, name)
        assert "Example:" in cls.__doc__


def test_importing_the_patching_widget_leaves_analysis_patching_the_function():
    """`analysis.patching` is the function (its module is `analysis.activation_patching`), however imported."""
    import subprocess
    import sys

    code = "import circuitwidgets.analysis.activation_patching, circuitwidgets as cw; print(callable(cw.analysis.patching))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "True"
