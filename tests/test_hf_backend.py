"""The Hugging Face backend (`circuitwidgets.HFView`, `circuitwidgets/backends/hugging_face.py`): nnsight and plain HF models.

Patterns rebuilt inside the nnsight trace must equal Hugging Face's eager ``output_attentions``
(and TransformerLens' where both exist) on every architecture the rebuild has to get right:
learned positions (GPT-2), rotary with grouped-query attention (Llama, Qwen2), parallel attention
(GPT-NeoX), soft-capping with a sliding window (Gemma 2). The remote path is exercised with
nnsight's ``remote="local"``: the request is serialised and deserialised with every module the
server would not have hidden, so code that would fail on NDIF fails here.
"""

from __future__ import annotations

import ast
import copy
import math
from pathlib import Path

import pytest
import torch

nnsight = pytest.importorskip("nnsight")  # a test extra: always installed by `make test`

from factories import score_from_patterns as _score_from_patterns  # noqa: E402

import circuitwidgets as cw  # noqa: E402
from circuitwidgets import in_trace, transport  # noqa: E402
from circuitwidgets.backends.hugging_face import NO_WEIGHTS  # noqa: E402
from circuitwidgets.demo import tiny_hf_model  # noqa: E402
from circuitwidgets.head_metrics import target_mask as _target_mask  # noqa: E402
from circuitwidgets.model import HFView  # noqa: E402

KINDS = ["gpt2", "neox", "llama", "qwen2", "gemma2"]
PROMPT = "the cat sat on the mat. the dog ran to the park. the cat sat on the mat."


def eager_patterns(hf, tokens: torch.Tensor) -> torch.Tensor:
    """``[layers, batch, heads, q, k]`` from Hugging Face's eager attention (the reference)."""
    implementation = hf.config._attn_implementation
    hf.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            return torch.stack(hf(tokens, output_attentions=True).attentions)
    finally:
        hf.set_attn_implementation(implementation)


def wrapped(kind: str, **options):
    hf, tokenizer = tiny_hf_model(kind, **options)
    return hf, tokenizer, nnsight.TransformersModel(hf, tokenizer=tokenizer)


@pytest.mark.parametrize("kind", KINDS)
def test_patterns_from_the_trace_equal_eager_attention(kind):
    hf, _, model = wrapped(kind)
    view = cw.as_view(model)
    assert isinstance(view, HFView) and view.n_layers == 2
    tokens = view.to_tokens(PROMPT)
    assert tokens.shape[1] > 8  # longer than Gemma 2's sliding window: the window matters
    got = cw.analysis.attention_patterns(model, tokens)
    expected = eager_patterns(hf, tokens)[:, 0]
    assert got.shape == expected.shape
    assert float((got - expected).abs().max()) < 1e-5
    assert float(got.sum(-1).sub(1).abs().max()) < 1e-5


def test_the_sliding_window_and_soft_cap_are_applied():
    hf, _, model = wrapped("gemma2")
    tokens = cw.as_view(model).to_tokens(PROMPT)
    got = cw.analysis.attention_patterns(model, tokens)
    n = tokens.shape[1]
    far = torch.arange(n)[:, None] - torch.arange(n)[None, :] >= 8  # outside the window of 8
    assert hf.model.layers[0].self_attn.sliding_window == 8
    assert float(got[0][:, far].abs().max()) == 0.0  # the windowed layer sees nothing beyond it
    assert float(got[1][:, far].max()) > 0.0  # the global layer does
    # without the soft cap the weights differ: the rebuild really applies it
    query, key = torch.randn(1, 2, 5, 16) * 4, torch.randn(1, 2, 5, 16) * 4
    capped, plain = in_trace.attention_weights(query, key, None, 0.25, 5.0), in_trace.attention_weights(query, key, None, 0.25)
    assert not torch.allclose(capped, plain)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_the_nnsight_path_equals_the_transformerlens_path(kind):
    from transformer_lens.model_bridge import TransformerBridge

    hf, tokenizer, model = wrapped(kind)
    twin = copy.deepcopy(hf)
    bridge = TransformerBridge.boot_transformers(type(hf).__name__, hf_model=twin, tokenizer=tokenizer)
    tokens = cw.as_view(model).to_tokens(PROMPT)
    ours = cw.analysis.attention_patterns(model, tokens)
    theirs = cw.analysis.attention_patterns(bridge, tokens)
    assert float((ours - theirs).abs().max()) < 1e-5
    # and the weights: the same stacked, folded weights and circuits as ModelView of the bridge
    assert torch.allclose(cw.analysis.copying_scores(model), cw.analysis.copying_scores(bridge), atol=1e-5)
    assert torch.allclose(cw.as_view(model).W_Q, cw.as_view(bridge).W_Q)


def test_a_plain_hugging_face_model_and_the_serialised_remote_path_give_the_same_patterns():
    hf, tokenizer, model = wrapped("llama")
    tokens = cw.as_view(model).to_tokens(PROMPT)
    expected = eager_patterns(hf, tokens)[:, 0]
    plain = HFView(hf, tokenizer=tokenizer)  # a transformers model, wrapped in nnsight here
    remote = HFView(model, remote="local")  # serialised as for NDIF, local modules hidden
    for view in (plain, remote):
        assert float((view.patterns(tokens)[0] - expected).abs().max()) < 1e-5
    assert remote.bytes_received > 0


def test_the_model_is_left_as_it_was():
    hf, _, model = wrapped("llama")
    before = ({name: type(m) for name, m in hf.named_modules()}, hf.config._attn_implementation, hf.training)
    view = cw.as_view(model)
    view.patterns(view.to_tokens(PROMPT))
    cw.analysis.copying_scores(model)
    assert ({name: type(m) for name, m in hf.named_modules()}, hf.config._attn_implementation, hf.training) == before


def test_a_weight_edit_shows_in_patterns_and_circuits():
    hf, _, model = wrapped("llama")
    tokens = cw.as_view(model).to_tokens(PROMPT)
    before = cw.analysis.attention_patterns(model, tokens)
    copying = cw.analysis.copying_scores(model)
    with torch.no_grad():
        hf.model.layers[1].self_attn.q_proj.weight.data.mul_(0)  # uniform attention in layer 1
        hf.model.layers[1].self_attn.v_proj.weight.data.mul_(-1)
    after = cw.analysis.attention_patterns(model, tokens)
    causal_uniform = torch.tril(torch.ones(tokens.shape[1], tokens.shape[1])) / torch.arange(1, tokens.shape[1] + 1)[:, None]
    assert float((after[1] - causal_uniform).abs().max()) < 1e-6
    assert torch.equal(after[0], before[0])
    assert torch.allclose(cw.analysis.copying_scores(model)[1], -copying[1], atol=1e-5)


def test_head_scores_are_reduced_in_the_trace():
    hf, _, model = wrapped("qwen2")
    tokens = cw.analysis.repeated_random_tokens(model, seq_len=12, batch=3)
    patterns = eager_patterns(hf, tokens).transpose(0, 1)  # [batch, layers, heads, q, k]
    for kind in ("previous_token", "duplicate_token", "induction", "prefix_matching"):
        got = cw.analysis.head_scores(model, kind, tokens)
        assert got.shape == (2, 4)
        assert torch.allclose(got, _score_from_patterns(patterns, _target_mask(tokens, kind)), atol=1e-5)


def test_weight_views_of_a_model_whose_weights_are_elsewhere_are_computed_there(tmp_path):
    hf, tokenizer = tiny_hf_model("llama")
    hf.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = nnsight.TransformersModel(str(tmp_path), task="text-generation", tokenizer=tokenizer)  # weights on meta
    view = HFView(model, remote="local")  # (the simulated server loads the weights from the path, as NDIF does)
    assert not view.weights_local and (view.n_layers, view.n_heads, view.d_head) == (2, 4, 16)
    with pytest.raises(ValueError, match="weights are not on this machine"):
        view.W_E  # noqa: B018 - nothing here holds them
    local = HFView(hf, tokenizer=tokenizer)
    traces = view.backend.traces
    assert torch.allclose(cw.analysis.copying_scores(view), cw.analysis.copying_scores(local), atol=1e-5)
    assert torch.allclose(cw.analysis.full_ov_block(view, 1, [3, 4, 5]), cw.analysis.full_ov_block(local, 1, [3, 4, 5]))
    assert view.backend.traces > traces  # (computed in traces)
    w = cw.OVCircuit(view, layer=1, head=0)  # (nnsight's local dry run may have loaded the weights here by now)
    assert w.error == ""
    scores = cw.HeadScores(view)
    assert scores.kinds[:4] == ["previous_token", "duplicate_token", "induction", "prefix_matching"] and scores.error == ""
    # a logit attribution: reduced in the trace of the prompt (one float per term and position comes back)
    theirs, ours = (cw.analysis.logit_attribution_by_position(v, PROMPT, baseline_token=5) for v in (view, local))
    assert torch.allclose(theirs.heads, ours.heads, atol=1e-5, equal_nan=True)
    assert torch.allclose(theirs.total(), ours.logits, atol=1e-4, equal_nan=True)
    assert cw.LogitAttribution(view, prompt=PROMPT).error == ""
    # the attention views work: the trace (here the local dry run) brings the patterns
    tokens = view.to_tokens(PROMPT)
    assert float((view.patterns(tokens)[0] - eager_patterns(hf, tokens)[:, 0]).abs().max()) < 1e-5
    assert NO_WEIGHTS.startswith("this model's weights")


def test_attention_pattern_draws_codes_made_in_the_trace_and_exact_rows():
    hf, _, model = wrapped("llama")
    for remote in (None, "local"):
        w = cw.AttentionPattern(model, prompt=PROMPT, layer=1, head=2, remote=remote)
        assert w.error == ""
        expected = eager_patterns(hf, torch.tensor([w.tokens]))[1, 0]
        drawn = transport.decode(w.patterns)
        assert w.patterns["layout"] == "tril" and float((drawn - expected).abs().max()) <= 0.5 / transport.CODE_MAX + 1e-6
        w.selection = {"query": 20, "key": 3, "locked": True}
        assert w.row["query"] == 20
        row = transport.decode(w.row)
        if remote:  # the shown head's row, rebuilt here from its downloaded inputs; the other heads' are not here
            assert w.row["heads"] == [2] and float((row[0] - expected[2, 20]).abs().max()) < 1e-6
        else:
            assert float((row - expected[:, 20]).abs().max()) < 1e-6
        w.layer = 0
        assert float((transport.decode(w.patterns) - eager_patterns(hf, torch.tensor([w.tokens]))[0, 0]).abs().max()) < 0.002


def test_long_prompts_travel_as_pooled_overviews_with_exact_tiles():
    hf, _, model = wrapped("llama", layers=1, n_ctx=2048)
    tokens = torch.randint(1, 60, (1, 1600), generator=torch.Generator().manual_seed(0))
    w = cw.AttentionPattern(model, tokens=tokens, layer=0, head=1)
    lod = w.patterns["lod"]
    assert lod == {"n": 1600, "factor": 4, "pool": "max", "exact": True}
    expected = eager_patterns(hf, tokens)[0, 0]  # [heads, n, n]
    overview = transport.decode(w.patterns)
    assert overview.shape == (4, 400, 400)
    assert float((overview - in_trace.pool(expected, 4, "max")).abs().max()) <= 0.5 / transport.CODE_MAX + 1e-6
    w.tile_request = {"id": 7, "layer": 0, "head": 1, "row0": 1000, "col0": 900, "rows": 64, "cols": 64, "step": 1,
                      "revision": w.patterns["revision"]}
    assert w.tile["id"] == 7
    tile = transport.decode(w.tile)
    assert float((tile - expected[1, 1000:1064, 900:964]).abs().max()) <= 0.5 / transport.CODE_MAX + 1e-6
    w.selection = {"query": 1500, "key": 3, "locked": True}
    assert float((transport.decode(w.row) - expected[:, 1500]).abs().max()) < 1e-6


def test_one_request_of_a_32_head_layer_at_4096_tokens_stays_small():
    _, _, model = wrapped("llama", layers=1, heads=32, kv_heads=8, d_head=4, n_ctx=4096)
    view = HFView(model, remote="local")
    n = 4096
    tokens = torch.randint(1, 60, (1, n), generator=torch.Generator().manual_seed(1))
    result = view.reduced(tokens, {0: {"factor": math.ceil(n / 512), "pool": "max"}})[0]
    assert result["codes"].shape == (32, 512, 512) and result["codes"].dtype == torch.uint8
    full = 32 * n * n * 4  # the layer's float32 patterns: 2.1 GB
    assert view.bytes_received <= 10_000_000 < full / 200


def test_the_trace_code_imports_only_what_a_remote_engine_has():
    tree = ast.parse(Path(in_trace.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0] if node.module else ".")
    assert imported == {"math", "torch", "head_metrics"}  # (head_metrics: torch only, shipped with it by value)
    # the quantisation made in the trace is the transport's, code for code
    weights = torch.rand(3, 50, 50)
    data, _ = transport.encode_uint8(weights)
    assert bytes(in_trace.quantize(weights).flatten().tolist()) == data


def test_the_widgets_take_nnsight_models_in_place_of_transformerlens_ones():
    _, _, model = wrapped("gpt2")
    scores = cw.HeadScores(model, kinds=["previous_token", "induction", "ov_copying"])
    assert scores.error == "" and set(scores.computed) == {"previous_token", "induction", "ov_copying"}
    assert cw.OVCircuit(model, layer=1, head=0).error == ""
    assert cw.QKCircuit(model, layer=1, head=0).error == ""
    with pytest.raises(TypeError, match="nnsight model or a Hugging Face model"):
        HFView(object())


def test_remote_false_leaves_a_transformerlens_model_alone_and_an_hfview_takes_remote_itself():
    w = cw.AttentionPattern(cw.demo_model(), prompt="abab", remote=False)  # a notebook's remote=ON_NDIF flag
    assert w.error == "" and not isinstance(w.mv, HFView)
    with pytest.raises(TypeError, match="take an nnsight or Hugging Face model"):
        cw.AttentionPattern(cw.demo_model(), prompt="abab", remote=True)
    _, _, model = wrapped("llama")
    with pytest.raises(TypeError, match="HFView takes them"):
        cw.AttentionPattern(HFView(model), prompt="abab", remote="local")


def test_logit_attribution_and_direct_copying_run_on_the_bridge_over_the_same_parameters():
    from transformer_lens.model_bridge import TransformerBridge

    hf, tokenizer, model = wrapped("llama")
    tokens = cw.as_view(model).to_tokens(PROMPT)
    terms = cw.analysis.logit_attribution(model, tokens, position=-2)
    with torch.no_grad():
        logit = float(hf(tokens).logits[0, -2, int(tokens[0, -1])])
    assert terms.total() == pytest.approx(logit, abs=1e-4) and terms.logit == pytest.approx(logit, abs=1e-4)
    bridge = TransformerBridge.boot_transformers(type(hf).__name__, hf_model=copy.deepcopy(hf), tokenizer=tokenizer)
    ours = cw.analysis.head_scores(model, "direct_copying", tokens)
    assert torch.allclose(ours, cw.analysis.head_scores(bridge, "direct_copying", tokens), atol=1e-6)


def test_a_dashboard_of_an_nnsight_model_shares_one_view_and_every_child_draws():
    _, _, model = wrapped("llama")
    dash = cw.Dashboard(model, prompt=PROMPT, remote="local")
    children = [dash.head_scores, dash.composition, dash.attention, dash.attribution, dash.ov, dash.qk]
    assert [c.error for c in children] == [""] * 6
    assert len({id(c.model) for c in children}) == 1 and isinstance(dash.attention.model, HFView)
    assert dash.attention.model.remote == "local"
    assert cw.AttentionPattern(model, prompt=PROMPT, remote="local").model is dash.attention.model  # shared, not rebuilt
    dash.close()


def test_a_plain_hugging_face_model_shown_in_a_widget_is_freed_with_it():
    import gc
    import weakref

    hf, tokenizer = tiny_hf_model("gpt2")
    hf.tokenizer = tokenizer  # what a plain model needs to be passed directly
    w = cw.AttentionPattern(hf, prompt="abcabc")
    assert w.error == "" and cw.as_view(hf) is cw.as_view(hf)
    gone = weakref.ref(hf)
    w.close()
    del w, hf
    gc.collect()
    assert gone() is None


def test_an_attention_the_rebuild_does_not_know_is_refused_not_drawn_wrong():
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def with_a_sink(module, query, key, value, attention_mask, scaling=None, **kwargs):
        # an extra logit-0 "sink" key every query can attend to (as gpt-oss has): weights no longer sum to 1
        weights = in_trace.attention_weights(query, key, None, scaling)
        scores = torch.log(weights.clamp_min(1e-30))
        with_sink = torch.cat([scores, torch.zeros_like(scores[..., :1])], dim=-1).softmax(-1)[..., :-1]
        values = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)
        return torch.matmul(with_sink, values).transpose(1, 2).contiguous(), None

    AttentionInterface.register("cw_test_sink", with_a_sink)
    hf, _, model = wrapped("llama")
    tokens = cw.as_view(model).to_tokens(PROMPT)
    hf.set_attn_implementation("cw_test_sink")
    with pytest.raises(ValueError, match="do not reproduce the model's own attention output"):
        cw.analysis.attention_patterns(model, tokens)
    hf.set_attn_implementation("sdpa")
    assert sdpa_attention_forward is not None
    assert cw.analysis.attention_patterns(model, tokens).shape[0] == 2  # the model's own attention again


def test_a_module_replaced_in_the_model_shows_in_the_circuits():
    hf, _, model = wrapped("gpt2")
    before = cw.analysis.copying_scores(model)
    old = hf.transformer.h[1].attn.c_proj
    new = type(old)(old.nf, old.nx)
    with torch.no_grad():
        new.weight.copy_(-old.weight)
        new.bias.zero_()
    hf.transformer.h[1].attn.c_proj = new  # W_O of layer 1 negated: its copying scores flip sign
    after = cw.analysis.copying_scores(model)
    assert torch.allclose(after[1], -before[1], atol=1e-5) and torch.allclose(after[0], before[0])


def test_torch_hooks_on_the_model_are_seen_and_their_results_never_cached():
    hf, _, model = wrapped("llama")
    prompt = "abcabc"
    w = cw.AttentionPattern(model, prompt=prompt, layer=1)
    clean = transport.decode(w.patterns)
    view = cw.as_view(model)
    assert view.hook_state() == ()
    layer0 = hf.model.layers[0]
    handle = layer0.register_forward_hook(lambda module, args, out: (out[0] * 0, *out[1:]) if isinstance(out, tuple) else out * 0)
    state = view.hook_state()
    assert state and state[0][0] == "model.layers.0" and state[0][1] == "forward"
    hooked = cw.AttentionPattern(model, prompt=prompt, layer=1)
    assert not torch.equal(transport.decode(hooked.patterns), clean)
    handle.remove()
    again = layer0.register_forward_hook(lambda module, args, out: out)
    assert view.hook_state() not in ((), state)  # a new hook is a new state, never mistaken for the old one
    again.remove()
    assert torch.equal(transport.decode(cw.AttentionPattern(model, prompt=prompt, layer=1).patterns), clean)


def test_the_old_hf_view_names_still_import_and_are_the_new_objects():
    from circuitwidgets import hf_view, model

    assert hf_view.HFView is model.HFView and hf_view.view_for is model.view_for
    assert hf_view.tiny_hf_model is tiny_hf_model and hf_view.NO_WEIGHTS == NO_WEIGHTS
