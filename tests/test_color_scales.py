"""Colour scales of attention pictures: the codes sent are positions on the chosen scale.

`color_scale` ("linear", "auto", "log", "power", "relative") decides what the uint8 codes hold, so
that a diffuse head of a long prompt (every weight ~1/n, code 0 on a linear 0-1 scale) is drawn.
Checked here: positions equal `in_trace.scale_positions` of the model's exact patterns on every
path (the full layer, a long prompt's overview, tiles and export levels, a traced Hugging Face
model), `decode` reads them back as weights, and the exact read-out row is the same on every scale.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from factories import small_bridge
from long_model import long_model

import circuitwidgets as cw
from circuitwidgets import in_trace, transport
from circuitwidgets.analysis import attention_patterns

sys.path.insert(0, str(Path(__file__).parent))

KINDS = in_trace.COLOR_SCALES
HALF_CODE = 0.5 / transport.CODE_MAX + 1e-6


def positions(payload) -> torch.Tensor:
    """The colour positions a payload's codes hold (its scale left out of the decoding)."""
    return transport.decode({**payload, "scale": None})


@pytest.mark.parametrize("kind", KINDS)
def test_positions_and_values_are_inverse_inside_the_drawn_range(kind):
    gen = torch.Generator().manual_seed(0)
    weights = torch.rand(3, 50, 50, generator=gen).tril() * 0.2 + 1e-3
    weights = weights / weights.sum(-1, keepdim=True)
    spec = transport.color_scale(kind, 50, his=in_trace.auto_top(weights))
    t = in_trace.scale_positions(weights, spec)
    assert float(t.min()) >= 0 and float(t.max()) <= 1
    inside = (t > 0) & (t < 1)  # the ends stand for everything clipped to them
    assert inside.float().mean() > 0.3
    back = in_trace.scale_values(t, spec)
    assert torch.allclose(back[inside], weights[inside], rtol=1e-4, atol=1e-7)


def test_each_scale_is_the_mapping_it_names():
    w = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.01, 0.0001, 0.9899]])
    at = lambda kind, **kw: in_trace.scale_positions(w, transport.color_scale(kind, 3, **kw))  # noqa: E731
    assert torch.equal(at("linear"), w)
    assert torch.allclose(at("power"), w.sqrt())
    floor = transport.color_scale("log", 3)["floor"]  # a hundredth of uniform, rounded down: 1e-3
    assert floor == 1e-3
    assert torch.allclose(at("log")[2], torch.tensor([1 / 3, 0.0, 1 + torch.log10(torch.tensor(0.9899)) / 3]))
    # relative: weight x sources the row sees (1, 2, 3) over 4
    assert torch.allclose(at("relative"), w * torch.tensor([1.0, 2.0, 3.0])[:, None] / 4)
    # auto: over the median of the rows' largest weights (here 0.9899), clipped at 1
    assert torch.allclose(at("auto", his=[0.9899]), (w / 0.9899).clamp(max=1))
    assert float(in_trace.auto_top(w)) == pytest.approx(0.9899)


@pytest.fixture(scope="module")
def demo():
    return cw.demo_model()


@pytest.mark.parametrize("kind", KINDS)
def test_the_whole_layer_is_sent_as_positions_of_the_exact_patterns(demo, kind):
    w = cw.AttentionPattern(demo, prompt="abcabcabcab", layer=1, head=2, color_scale=kind)
    exact = w.current_patterns()
    p = w.patterns
    assert p["scale"]["kind"] == kind and p["layout"] == "tril"
    want = in_trace.scale_positions(exact, p["scale"])
    assert (positions(p) - want).abs().max() <= HALF_CODE
    if kind == "auto":
        assert p["scale"]["his"] == pytest.approx(in_trace.auto_top(exact).tolist())
    w.selection = {"query": 9, "key": 3, "locked": True}  # the read-out row: exact weights on every scale
    assert torch.equal(transport.decode(w.row), exact[:, 9])


def test_a_scale_change_redraws_the_same_run(demo):
    w = cw.AttentionPattern(demo, prompt="abcabcabcab", layer=1)
    before = w.patterns["revision"]
    w.color_scale = "relative"
    assert w.patterns["revision"] > before and w.patterns["scale"]["kind"] == "relative"
    w.color_scale = "linear"
    assert w.patterns["scale"]["kind"] == "linear"
    assert (transport.decode(w.patterns) - w.current_patterns()).abs().max() <= 1 / 254


@pytest.fixture(scope="module")
def long():
    model, (layer, head) = long_model()
    ids = torch.randint(1, 64, (2048,), generator=torch.Generator().manual_seed(1))
    ids[0] = 0
    exact = attention_patterns(model, ids, layers=[layer])[0]
    return model, layer, head, ids, exact


@pytest.mark.parametrize("kind", KINDS)
def test_overview_tiles_and_export_levels_are_positions_on_the_same_scale(long, kind, tmp_path):
    model, layer, head, ids, exact = long
    w = cw.AttentionPattern(model, tokens=ids, layer=layer, head=head, color_scale=kind)
    p = w.patterns
    assert p["lod"]["factor"] == 4 and p["scale"]["step"] == 4 and p["scale"]["n"] == 2048
    pooled = torch.nn.functional.max_pool2d(exact[:, None], 4)[:, 0]
    assert (positions(p) - in_trace.scale_positions(pooled, p["scale"])).abs().max() <= HALF_CODE
    for row0, col0, step in ((1000, 990, 1), (512, 0, 2)):
        w.tile_request = {"id": row0, "layer": layer, "revision": p["revision"], "head": 0, "row0": row0, "col0": col0,
                          "rows": 64 * step, "cols": 64 * step, "step": step}
        tile = w.tile
        assert tile["scale"]["row0"] == row0 and tile["scale"]["step"] == step
        if kind == "auto":  # a tile keeps its head's range of the overview: the colours agree
            assert tile["scale"]["his"] == [p["scale"]["his"][0]]
        block = exact[0, None, None, row0 : row0 + 64 * step, col0 : col0 + 64 * step]
        brute = torch.nn.functional.max_pool2d(block, step)[0, 0]
        drawn, want = positions(tile), in_trace.scale_positions(brute, tile["scale"])
        stored = ~torch.isnan(drawn)
        assert (drawn[stored] - want[stored]).abs().max() <= HALF_CODE
    w.save_html(tmp_path / "long.html")
    assert w.levels and all(level["scale"]["kind"] == kind for level in w.levels)
    assert w.levels[0]["scale"]["his"] == (None if kind != "auto" else [p["scale"]["his"][head]])


@pytest.mark.parametrize("kind", ["auto", "log", "relative"])
def test_a_traced_model_draws_the_same_positions_as_its_exact_patterns(kind):
    model, tokenizer = cw.demo.tiny_hf_model("llama")
    view = cw.HFView(model, tokenizer=tokenizer, remote="local")  # nnsight's remote path, run here
    w = cw.AttentionPattern(view, prompt="the cat sat on the mat and the cat sat", layer=1, color_scale=kind)
    exact = w.current_patterns()
    p = w.patterns
    if kind == "auto":  # each head's top, found inside the trace
        assert p["scale"]["his"] == pytest.approx(in_trace.auto_top(exact).tolist(), rel=1e-5)
    assert (positions(p) - in_trace.scale_positions(exact, p["scale"])).abs().max() <= HALF_CODE


def test_a_diffuse_head_at_2000_tokens_is_blank_on_linear_and_drawn_on_log_and_relative():
    model = small_bridge(d_model=768, d_head=64, n_heads=12, n_layers=1, n_ctx=2048, d_vocab=1000, attn_only=False,
                         normalization_type="LN", d_mlp=3072, act_fn="gelu")  # GPT-2 small's shape, random weights
    ids = torch.randint(0, 1000, (1, 2000), generator=torch.Generator().manual_seed(0))
    late = slice(250, 500)  # overview rows of destinations 1 000..1 999 (pooled 4 x 4)
    seen = {}
    for kind in ("linear", "log", "relative"):
        w = cw.AttentionPattern(model, tokens=ids, layer=0, head=3, color_scale=kind)
        drawn = positions(w.patterns)[3, late]
        below = torch.tril(torch.ones(500, 500, dtype=torch.bool))[late]
        seen[kind] = float((drawn[below] > 0).float().mean()), float(drawn[below].mean())
    # linear: weights ~1/2000 round to code 0 or 1 (the near-blank triangle of the issue) but for a few
    # larger ones the max-pool picks up; log and relative draw every cell, well off the background
    assert seen["linear"][0] < 0.5 and seen["linear"][1] < 0.01
    for kind in ("log", "relative"):
        assert seen[kind][0] == 1.0 and seen[kind][1] > 0.2


@pytest.mark.parametrize("kind", ["log", "relative", "auto"])
def test_the_other_views_of_attention_weights_draw_on_the_same_scales(demo, kind):
    qk = cw.QKCircuit(demo, 0, 0, tokens=["a", "b"], color_scale=kind)
    positional = cw.analysis.positional_qk(demo, 0, positions=qk.positions).float()
    p = qk.positional
    assert p["scale"]["kind"] == kind and p["scale"]["n"] == qk.positions
    assert (positions(p) - in_trace.scale_positions(positional, p["scale"])).abs().max() <= HALF_CODE
    pair = [[0, 1], [1, 2]]
    comp = cw.CompositionDiagram(demo, "K", prompt="abcabcab", selected_pair=pair, color_scale=kind)
    stack = comp._shown_pair  # the two heads' patterns and the virtual head, exact
    p = comp.pair_patterns
    assert (positions(p) - in_trace.scale_positions(stack, p["scale"])).abs().max() <= HALF_CODE
    comp.color_scale = "linear"
    assert comp.pair_patterns["scale"]["kind"] == "linear"
    assert (transport.decode(comp.pair_patterns) - stack).abs().max() <= 1 / 254


def test_attention_from_tensors_takes_a_scale_and_counts_every_source_when_not_causal():
    weights = torch.softmax(torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(0)), -1)  # an encoder's
    w = cw.AttentionPattern.from_tensors(list("abcde"), weights, color_scale="relative")
    p = w.patterns
    assert p["scale"]["causal"] is False and p["layout"] == "full"
    assert (positions(p) - (weights * 5 / 4).clamp(max=1)).abs().max() <= HALF_CODE  # each row sees all 5
    w.color_scale = "log"
    assert w.patterns["scale"]["kind"] == "log"
    with pytest.raises(Exception, match="color_scale"):
        w.color_scale = "rainbow"
    assert w.patterns["scale"]["kind"] == "log"  # refused: the picture stays


def test_head_atlas_examples_are_drawn_on_its_scale(demo):
    texts = cw.analysis.repeated_random_tokens(demo, seq_len=8, batch=4)
    atlas = cw.HeadAtlas(demo, texts=texts, layer=1, head=2, color_scale="relative")
    p = atlas.examples
    exact = torch.zeros(p["shape"])
    for i, item in enumerate(p["items"]):  # each example's own pattern, padded to the longest
        tokens = atlas.head_scan.tokens_of(item["text"])
        exact[i, : len(tokens), : len(tokens)] = attention_patterns(demo, torch.tensor(tokens), layers=[1])[0, 2]
    assert p["scale"]["kind"] == "relative"
    assert (positions(p) - in_trace.scale_positions(exact, p["scale"])).abs().max() <= HALF_CODE
    atlas.color_scale = "linear"
    assert (transport.decode(atlas.examples) - exact).abs().max() <= 1 / 254


def test_a_dashboard_links_the_scale_of_its_views_of_attention_weights(demo):
    d = cw.Dashboard(demo, prompt="abcabcab", layer=1, head=2)
    d.composition.selected_pair = [[0, 1], [1, 2]]
    d.attention.color_scale = "log"
    for child in (d.attention, d.composition, d.qk):
        assert child.color_scale == "log"
    assert d.attention.patterns["scale"]["kind"] == d.qk.positional["scale"]["kind"] == "log"
    assert d.composition.pair_patterns["scale"]["kind"] == "log"
    d.qk.color_scale = "relative"  # from any of them, both ways
    assert d.attention.patterns["scale"]["kind"] == "relative"
    scale_links = [link for link in d.js_links if link.source[1] == "color_scale"]
    assert len(scale_links) == 2
