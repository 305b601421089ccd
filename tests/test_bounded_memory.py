"""A TransformerLens bridge's long-prompt runs hold no ``n x n`` matrix (`circuitwidgets.backends.efficient`).

Every layer up to the one asked for attends through ``scaled_dot_product_attention``; the layer
asked for is reduced a block of rows at a time from its queries and keys (`in_trace.reduce_call`,
as inside a remote trace; `long_patterns.lse_and_pool` for the widget's zoomable parts). Checked:
the same logits as the eager model, the same answers as the eager patterns at every block edge,
the largest tensor any run creates (a dispatch mode sees every op's output), and the fallback, with
its note, where a hook needs the patterns.
"""

from __future__ import annotations

import pytest
import torch
from factories import small_bridge
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import circuitwidgets as cw
from circuitwidgets import in_trace
from circuitwidgets.analysis import long_patterns
from circuitwidgets.backends.efficient import efficient_reason, memory_efficient
from circuitwidgets.backends.reduce import reduce_in_run, reduce_patterns
from circuitwidgets.demo import tiny_hf_model
from circuitwidgets.widgets import _cache

SHAPES = {
    "gpt2-like": dict(normalization_type="LN", attn_only=False, d_mlp=64, act_fn="gelu_new", n_ctx=512),
    "llama-like": dict(normalization_type="RMS", positional_embedding_type="rotary", n_key_value_heads=2, n_ctx=512),
}


def _hf_gpt2_bridge():
    from circuitwidgets.backends.hugging_face import bridge_of

    hf, tokenizer = tiny_hf_model("gpt2")
    return bridge_of(hf, tokenizer).eval()


def _model(name):
    return _hf_gpt2_bridge() if name == "hf-gpt2" else small_bridge(**SHAPES[name]).eval()


MODELS = [*SHAPES, "hf-gpt2"]


class Largest(TorchDispatchMode):
    """The most cells of any tensor an op creates inside (what a run holds at once, at the least)."""

    cells = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self.cells = max(self.cells, leaf.numel())
        return out


@pytest.mark.parametrize("name", MODELS)
def test_efficient_runs_give_the_eager_logits_and_put_the_modules_back(name):
    model = _model(name)
    ids = torch.randint(1, 50, (1, 40), generator=torch.Generator().manual_seed(0))
    last = len(model.blocks) - 1
    assert efficient_reason(model, last) == ""
    with torch.no_grad():
        eager = model(ids)
        seen = []
        with memory_efficient(model, last, {1: lambda q, k, v, out, scaling: seen.append((q.shape, out.shape))}):
            efficient = model(ids)
    assert (efficient - eager).abs().max() < 1e-4 * eager.abs().max()
    assert seen and seen[0][0] == seen[0][1]
    attn = model.blocks[1].attn
    assert "forward" not in vars(getattr(attn, "original_component", attn)) and "_reconstruct_attention" not in vars(attn)
    with pytest.raises(RuntimeError, match="stop here"), torch.no_grad(), memory_efficient(model, 1, {0: _raise}):
        model(ids)
    first = model.blocks[0].attn
    assert "forward" not in vars(getattr(first, "original_component", first)) and "_reconstruct_attention" not in vars(first)


def _raise(*_):
    raise RuntimeError("stop here")


REQUEST = {"factor": 3, "pool": "max", "scores": ["previous_token", "duplicate_token", "induction", "entropy", "self"]}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("cells", [97, 600, 1 << 24])  # block edges everywhere, a few blocks, one block a layer
def test_reductions_equal_the_eager_patterns_at_every_block_edge(name, cells, monkeypatch):
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", cells)
    model = _model(name)
    view = cw.ModelView(model)
    ids = torch.randint(1, 50, (1, 37), generator=torch.Generator().manual_seed(1))
    ids[0, 20:30] = ids[0, 5:15]  # repeats: induction and duplicate targets
    runs = view._hooked("test")
    tile = (None, 5, 31, 2, 33, 2)
    requests = {0: {**REQUEST, "block": tile}, 1: {"factor": 1, "block": (1, 0, 37, 0, 37, 1)}}
    answers = reduce_in_run(runs, ids, requests)
    eager = runs.patterns_with(ids, [0, 1], [])[0]
    for layer, request in requests.items():
        expected, got = reduce_patterns(eager[:, layer], request, ids), answers[layer]
        assert (expected["codes"].int() - got["codes"].int()).abs().max() <= 1
        assert torch.allclose(expected["block"], got["block"], atol=1e-5)
        for metric in request.get("scores", ()):
            assert torch.allclose(expected["scores"][metric], got["scores"][metric], atol=1e-4, equal_nan=True)


def test_no_run_holds_a_layer_of_patterns(monkeypatch):
    """The largest tensor of a memory-efficient run is a block, far under one layer's n x n; the eager run's is not."""
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 1 << 12)
    monkeypatch.setattr(long_patterns, "CHUNK_CELLS", 1 << 12)
    model = small_bridge(**SHAPES["gpt2-like"]).eval()
    view = cw.ModelView(model)
    n, heads = 256, model.cfg.n_heads
    layer_cells = heads * n * n
    ids = torch.randint(1, 50, (1, n), generator=torch.Generator().manual_seed(2))
    with Largest() as probe:
        view.reduced(ids, {1: {"factor": 4, "kinds": ["previous_token"], "block": (0, 10, 60, 0, n, 1)}})
    assert probe.cells < layer_cells / 4
    with Largest() as probe:
        _cache.attention_parts(view, tuple(ids[0].tolist()), 1, 4)
    assert probe.cells < layer_cells / 4
    parts = _cache.attention_parts(view, tuple(ids[0].tolist()), 1, 4)
    assert parts["patterns"] is None and parts["error"] < 1e-5
    with Largest() as probe:
        view.attention_parts(ids, 1, lambda pattern, q, k: None)  # the eager run (what a hook on the pattern needs)
    assert probe.cells >= layer_cells


@pytest.mark.parametrize("name", ["gpt2-like", "llama-like"])
def test_a_long_logit_attribution_holds_no_layer_of_patterns_and_equals_the_eager_one(name, monkeypatch):
    """Past `EAGER_BYTES` a layer's patterns, the run behind a logit attribution attends memory-efficiently: its terms
    equal the eager run's, and its largest tensor is far under one layer's n x n (the eager run's is not)."""
    from circuitwidgets.backends import hooked

    model = _model(name)
    view = cw.ModelView(model)
    n, heads = 256, model.cfg.n_heads
    ids = torch.randint(1, 50, (1, n), generator=torch.Generator().manual_seed(4))
    with Largest() as probe:
        eager = cw.analysis.logit_attribution_by_position(view, ids)
    assert probe.cells >= heads * n * n
    monkeypatch.setattr(hooked, "EAGER_BYTES", 4 * n)  # (a "long" prompt at this size)
    with Largest() as probe:
        lean = cw.analysis.logit_attribution_by_position(view, ids)
    assert probe.cells < heads * n * n / 4
    scale = float(eager.heads.nan_to_num().abs().max())
    assert scale > 0.01 and float((lean.heads - eager.heads).nan_to_num().abs().max()) <= 1e-5 * max(1.0, scale)
    assert float((lean.logits - eager.logits).nan_to_num().abs().max()) <= 1e-4
    assert float((lean.total() - lean.logits)[:-1].abs().max()) <= 1e-4


def test_parts_without_patterns_rebuild_the_eager_pattern():
    model = small_bridge(**SHAPES["llama-like"]).eval()
    view = cw.ModelView(model)
    ids = torch.randint(1, 50, (1, 300), generator=torch.Generator().manual_seed(3))
    parts = _cache.attention_parts(view, tuple(ids[0].tolist()), 1, 5)
    eager = view._hooked("test").patterns_with(ids, [1], [])[0][0, 0]
    assert parts["patterns"] is None
    rebuilt = long_patterns.pattern_block(parts["q"], parts["k"], parts["lse"], parts["scale"], 0, 300, 0, 300)
    assert torch.allclose(rebuilt, eager, atol=1e-6)
    assert torch.allclose(parts["overview"]["max"], long_patterns.pool(eager, 5, "max"), atol=1e-6)


def test_a_hook_on_the_pattern_keeps_the_eager_run_and_says_so(monkeypatch):
    monkeypatch.setattr("circuitwidgets.widgets.attention.LOD_BYTES", 1000)
    model = small_bridge(**SHAPES["gpt2-like"]).eval()
    ids = torch.randint(1, 50, (200,), generator=torch.Generator().manual_seed(4)).tolist()
    plain = cw.AttentionPattern(model, tokens=ids, layer=1)
    assert plain.memory_note == "" and plain.patterns["lod"]
    assert cw.ModelView(model).memory_reason(1) == ""
    sharpen = lambda p, hook: p**2 / (p**2).sum(-1, keepdim=True)  # noqa: E731
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", sharpen)]):
        reason = cw.ModelView(model).memory_reason(1)
        hooked = cw.AttentionPattern(model, tokens=ids, layer=1)
        assert "hook" in reason and "block 0" in reason
        assert hooked.memory_note.endswith(reason) and "200 x 200" in hooked.memory_note
    plain.close()
    hooked.close()


@pytest.mark.parametrize("cells", [5, 300, 1 << 24])
@pytest.mark.parametrize("factor", [1, 3, 8])
@pytest.mark.parametrize("mode", ["max", "mean"])
def test_one_pass_lse_and_overview(cells, factor, mode, monkeypatch):
    monkeypatch.setattr(long_patterns, "CHUNK_CELLS", cells)
    q, k = torch.randn(2, 29, 8) * 2, torch.randn(2, 29, 8)
    scores = (q @ k.transpose(1, 2) / 2.5).masked_fill(torch.ones(29, 29).triu(1).bool(), float("-inf"))
    lse, pooled = long_patterns.lse_and_pool(q, k, 2.5, factor, mode)
    assert torch.allclose(lse, scores.logsumexp(-1), atol=1e-5)
    assert torch.allclose(pooled, long_patterns.pool(scores.softmax(-1), factor, mode), atol=1e-6)
