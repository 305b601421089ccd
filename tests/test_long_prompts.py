"""Long prompts in AttentionPattern: runs that stop at the layer, overviews, exact tiles, compression.

Numbers are checked against `analysis.attention_patterns` (the model's own patterns): tiles and
hover rows to float rounding, overviews as max- and mean-pools of them, on tests/long_model.py
(n_ctx 8 192, a planted previous-token head) and on small random models.
"""

from __future__ import annotations

import math
import zlib

import pytest
import torch
import traitlets
from factories import small_bridge
from long_model import N_CTX, long_model

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import attention_patterns
from circuitwidgets.analysis import long_patterns as lp
from circuitwidgets.widgets import attention as attention_module
from circuitwidgets.widgets.attention import AttentionPattern

TOL = 2e-5  # float32 rounding of scores up to ~140 (the planted head) in exp(s - lse)


@pytest.fixture(scope="module")
def long():
    model, head = long_model()
    ids = torch.randint(1, 64, (2048,), generator=torch.Generator().manual_seed(1))
    ids[0] = 0
    return model, head, ids


@pytest.fixture(scope="module")
def exact(long):
    model, (layer, _), ids = long
    return attention_patterns(model, ids, layers=[layer])[0]


@pytest.fixture(scope="module")
def widget(long):
    model, (layer, head), ids = long
    return AttentionPattern(model, tokens=ids, layer=layer, head=head)


def ask(w, **request):
    w.tile_request = {"id": w.tile.get("id", 0) + 1, "layer": w.layer, "revision": w.patterns["revision"], **request}
    return transport.decode(w.tile)


def test_the_planted_head_is_a_previous_token_stripe(exact, long):
    _, (_, head), _ = long
    assert float(exact[head].diagonal(-1).min()) > 1 - 1e-9
    assert float(exact[head, 1:].sum(-1).min()) == pytest.approx(1.0, abs=1e-5)


def test_long_prompt_sends_a_compressed_max_pool_overview(widget, exact, long):
    _, (layer, head), ids = long
    p = widget.patterns
    assert p["lod"] == {"n": 2048, "factor": 4, "pool": "max", "exact": True}
    assert p["shape"] == [2, 512, 512] and p["layout"] == "tril" and p["encoding"] == "deflate"
    assert len(p["data"]) < p["raw_bytes"] / 10  # mostly zero codes
    overview = transport.decode(p)
    brute = torch.nn.functional.max_pool2d(exact[:, None], 4)[:, 0]
    assert (overview - brute).abs().max() <= transport.quantisation_step(p) + 1e-6
    # the one-cell stripe survives pooling: every diagonal block of the planted head holds a 1
    assert float(overview[head].diagonal().min()) > 0.99
    assert widget.str_tokens == [str(i) for i in ids.tolist()]


def test_mean_pool_overview(widget, exact):
    widget.pool = "mean"
    try:
        assert widget.patterns["lod"]["pool"] == "mean"
        overview = transport.decode(widget.patterns)
        brute = torch.nn.functional.avg_pool2d(exact[:, None], 4)[:, 0]  # cells above the diagonal count as 0
        assert (overview - brute).abs().max() <= transport.quantisation_step(widget.patterns) + 1e-6
    finally:
        widget.pool = "max"


def test_tiles_are_exact_cells_and_pools_of_them(widget, exact, long):
    _, (_, head), _ = long
    tile = ask(widget, head=head, row0=1000, col0=990, rows=64, cols=64, step=1)
    block = exact[head, 1000:1064, 990:1054]
    stored = ~torch.isnan(tile)
    assert widget.tile["shape"] == [64, 64] and widget.tile["step"] == 1
    assert (tile[stored] - block[stored]).abs().max() <= transport.quantisation_step(widget.tile) + 1e-6
    assert stored.sum() == (torch.arange(990, 1054)[None] <= torch.arange(1000, 1064)[:, None]).sum()  # NaN = above the diagonal
    other = ask(widget, head=0, row0=512, col0=0, rows=1024, cols=1024, step=2)  # a random head, pooled 2 x 2
    brute = torch.nn.functional.max_pool2d(exact[0, None, 512:1536, 0:1024], 2)[0]
    valid = ~torch.isnan(other)
    assert (other[valid] - brute[valid]).abs().max() <= transport.quantisation_step(widget.tile) + 1e-6
    # exact float values through the parts the kernel keeps, against the model's pattern
    block = widget._block(0, 1500, 1600, 0, 2048)
    assert (block[0] - exact[0, 1500:1600]).abs().max() < TOL


def test_hover_row_is_exact_at_every_zoom(widget, exact, long):
    _, (_, head), _ = long
    widget.selection = {"query": 1777, "key": 1776, "locked": True}
    row = transport.decode(widget.row)
    assert widget.row["shape"] == [2, 2048] and widget.row["revision"] == widget.patterns["revision"]
    assert (row - exact[:, 1777]).abs().max() < TOL
    assert float(row[head, 1776]) == pytest.approx(1.0, abs=1e-6)


def test_stale_and_bad_tile_requests(widget, long):
    _, (_, head), _ = long
    ask(widget, head=head, row0=0, col0=0, rows=16, cols=16, step=1)
    answered = widget.tile
    base = {"layer": 0, "head": head, "row0": 0, "col0": 0, "rows": 16, "cols": 16, "step": 1}
    widget.tile_request = {**base, "id": 99, "row0": 8, "revision": -5}
    assert widget.tile is answered  # a request of an earlier picture gets no answer
    now = widget.patterns["revision"]
    widget.tile_request = {**base, "id": 100, "row0": 5000, "revision": now}
    assert "outside" in widget.error and widget.tile is answered
    widget.tile_request = {**base, "id": 101, "rows": 2048, "cols": 2048, "revision": now}
    assert "more than 1024" in widget.error
    widget.tile_request = {**base, "id": 102, "head": 7, "revision": now}
    assert "head=7" in widget.error
    widget.tile_request = {**base, "id": 103, "step": "1", "revision": now}
    assert "integer fields" in widget.error
    ask(widget, head=head, row0=0, col0=0, rows=16, cols=16, step=1)
    assert widget.error == "" and widget.tile["id"] != answered["id"]


def test_kernel_keeps_q_k_and_lse_not_the_pattern(widget):
    parts = widget._answer.parts
    assert parts["patterns"] is None and parts["error"] < 1e-4
    held = sum(parts[name].numel() * parts[name].element_size() for name in ("q", "k", "lse"))
    assert held == 2 * 2048 * (32 + 32 + 1) * 4  # q, k [H, n, d_head] and lse [H, n], float32
    with pytest.raises(traitlets.TraitError):
        widget.pool = "median"


def test_full_length_8192(long):
    """At n_ctx: the first payload is small, the stripe's cells come back exact."""
    model, (layer, head), _ = long
    ids = torch.randint(1, 64, (N_CTX,), generator=torch.Generator().manual_seed(2))
    w = AttentionPattern(model, tokens=ids, layer=layer, head=head)
    p = w.patterns
    assert p["shape"] == [2, 512, 512] and p["lod"]["factor"] == 16
    assert len(p["data"]) + sum(len(s) for s in w.str_tokens) < 10_000_000
    tile = ask(w, head=head, row0=8000, col0=7990, rows=64, cols=64, step=1)
    rows = torch.arange(8000, 8054)
    assert torch.equal(tile[rows - 8000, rows - 1 - 7990], torch.ones(54))
    overview = transport.decode(p)
    assert float(overview[head].diagonal().min()) > 0.99
    assert float(overview[head].diagonal(-2).max()) < 0.01  # max-pooling keeps the stripe, and only it


def test_unexact_models_keep_the_pattern_instead(monkeypatch):
    """A pattern that is not softmax(q.k / scale) (here a hook sharpens it) is kept whole."""
    model = small_bridge(n_ctx=64)
    ids = torch.randint(0, 64, (60,), generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(attention_module, "LOD_BYTES", 100)
    sharpen = lambda p, hook: p**2 / (p**2).sum(-1, keepdim=True)  # noqa: E731
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern", sharpen)]):
        w = AttentionPattern(model, tokens=ids, layer=1)
        expected = attention_patterns(model, ids, layers=[1])[0]
    assert w.patterns["lod"]["exact"] is False and w._answer.patterns is not None  # kept whole
    assert torch.allclose(w.current_patterns(), expected, atol=1e-6)
    tile = ask(w, head=2, row0=10, col0=0, rows=20, cols=20, step=1)
    assert (tile.nan_to_num(0) - expected[2, 10:30, 0:20]).abs().max() <= transport.quantisation_step(w.tile) + 1e-6


def test_lod_off_is_the_full_matrix_path(long, exact):
    model, (layer, head), ids = long
    w = AttentionPattern(model, tokens=ids[:1200], layer=layer, head=head, lod=False)
    assert "lod" not in w.patterns and w.patterns["shape"] == [2, 1200, 1200]
    assert torch.equal(w.current_patterns(), attention_patterns(model, ids[:1200], layers=[layer])[0])


KINDS = [{}, {"positional_embedding_type": "rotary"}, {"n_key_value_heads": 2}, {"normalization_type": "LN"}]


@pytest.mark.parametrize("overrides", KINDS)
def test_parts_rebuild_the_model_pattern(overrides, monkeypatch):
    """q, k and lse reproduce the pattern on learned-position, rotary, grouped-query and LayerNorm models.

    TransformerLens 4.3's native bridge never fires its rotary hook points (``hook_rot_q``): its
    queries and keys are rotated by the attention module's own ``apply_rope``, so a rotary model
    keeps only q, k and lse too.
    """
    model = small_bridge(n_ctx=80, **overrides)
    ids = torch.randint(0, 64, (80,), generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(attention_module, "LOD_BYTES", 100)
    w = AttentionPattern(model, tokens=ids, layer=1)
    assert w.patterns["lod"]["exact"] is True, w._answer.parts["error"]
    assert w._answer.parts["patterns"] is None  # lean: the pattern is rebuilt from q, k and lse
    expected = attention_patterns(model, ids, layers=[1])[0]
    assert (w.current_patterns() - expected).abs().max() < 1e-5


def test_the_run_stops_at_the_layer(monkeypatch):
    """Patterns of layer 0 never run layer 1 (nor the unembedding)."""
    model = small_bridge(n_layers=3)
    seen = []
    for i, block in enumerate(model.blocks):
        block.register_forward_pre_hook(lambda m, args, i=i: seen.append(i))
    view = cw.ModelView(model)
    view._hook_cache = None
    ids = torch.tensor([[1, 2, 3, 4]])
    seen.clear()
    view.patterns(ids, layers=[0])
    assert seen == [0]
    seen.clear()
    view.attention_parts(ids, 1, lambda p, q, k: None)
    assert seen == [0, 1]
    seen.clear()
    view.patterns(ids, layers=[2])
    assert seen == [0, 1, 2]


def test_short_prompts_keep_every_layer_below_the_shown_one(planted_words):
    model, _ = planted_words
    w = AttentionPattern(model, prompt="t1 t2 t3", layer=1)
    runs = []
    original = cw.ModelView.patterns
    cw.ModelView.patterns = lambda self, *a, **k: runs.append(1) or original(self, *a, **k)
    try:
        w.layer = 0  # computed on the way to layer 1: no run
        assert runs == [] and "lod" not in w.patterns and w.patterns["layer"] == 0
    finally:
        cw.ModelView.patterns = original


def test_deflate_round_trip_and_when_it_pays():
    sparse = torch.zeros(3, 300, 300)
    sparse[:, torch.arange(1, 300), torch.arange(299)] = 1.0
    p = transport.uint8_payload(sparse, compress=True)
    assert p["encoding"] == "deflate" and p["raw_bytes"] == 3 * 300 * 301 // 2
    assert zlib.decompress(p["data"]) == transport.uint8_payload(sparse)["data"]
    assert torch.equal(transport.decode(p), sparse)
    noise = torch.rand(400, 400, generator=torch.Generator().manual_seed(0))
    q = transport.uint8_payload(noise, compress=True)
    assert "encoding" not in q  # random codes do not shrink enough to pay
    small = transport.uint8_payload(torch.zeros(10, 10), compress=True)
    assert "encoding" not in small and len(small["data"]) == 55
    with pytest.raises(ValueError, match="encoding"):
        transport.decode({**p, "encoding": "gzip"})


def test_pool_and_block_against_brute_force():
    torch.manual_seed(0)
    q, k = torch.randn(3, 37, 8), torch.randn(3, 37, 8)
    s = (q @ k.transpose(1, 2) / math.sqrt(8)).masked_fill(torch.ones(37, 37).triu(1).bool(), float("-inf"))
    pattern = s.softmax(-1)
    lse = lp.row_lse(q, k, math.sqrt(8), pattern)
    assert torch.allclose(lse, torch.logsumexp(s, -1), atol=1e-5)
    block = lp.pooled_block(q, k, lse, math.sqrt(8), 5, 37, 3, 30, 4, "max")
    brute = torch.nn.functional.max_pool2d(pattern[:, None, 5:37, 3:30], 4, ceil_mode=True)[:, 0]
    assert torch.allclose(block, brute, atol=1e-6)
    mean = lp.pool(pattern, 5, "mean")
    assert torch.allclose(mean[:, -1, -1], pattern[:, 35:, 35:].mean((-1, -2)), atol=1e-7)
    with pytest.raises(ValueError, match="outside"):
        lp.pattern_block(q, k, lse, 1.0, 0, 40, 0, 5)


def test_export_holds_finer_levels_of_the_shown_head(widget, exact, long, tmp_path):
    _, (_, head), _ = long
    path = widget.save_html(tmp_path / "long.html")
    assert path.stat().st_size < 20_000_000
    steps = [level["step"] for level in widget.levels]
    assert steps == [2, 1] and all(level["head"] == head for level in widget.levels)  # factor 4 at 2 048 tokens
    finest = transport.decode(widget.levels[-1])
    stored = ~torch.isnan(finest)
    assert (finest[stored] - exact[head][stored]).abs().max() <= transport.quantisation_step(widget.levels[-1]) + 1e-6
    assert '"levels"' in path.read_text(encoding="utf-8")
