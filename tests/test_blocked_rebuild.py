"""The blocked rebuild of `circuitwidgets.in_trace` (issue 22): bounded memory at any length, the same answers.

`in_trace.reduce_call` builds a layer's weights a block of destination rows at a time (a few heads,
`in_trace.BLOCK_CELLS` weights a block, only the keys the rows may see). Here the budget is forced
tiny, so that blocks end at awkward rows (not multiples of the pooling factor unless the factor
needs them, sequences of 37, 64 and 65), and every answer — overview codes on every colour scale,
exact and pooled tiles, rows, destination scores of every pattern metric, the output check — is compared
with `reference`: the whole-matrix computation the module made before (every head's ``n x n``
at once, full softmax), copied here. On synthetic inputs (masks, a sliding window, soft-capping,
grouped K/V, a batch), on tiny Hugging Face models through `HFView` (plain and nnsight's
``remote="local"``), and through the widgets that draw them.
"""

from __future__ import annotations

import math

import pytest
import torch

nnsight = pytest.importorskip("nnsight")  # a test extra: always installed by `make test`

import circuitwidgets as cw  # noqa: E402
from circuitwidgets import head_metrics, in_trace, transport  # noqa: E402
from circuitwidgets.demo import tiny_hf_model  # noqa: E402
from circuitwidgets.model import HFView  # noqa: E402

BUDGETS = [1, 23, 97, 400]  # weights per block: one row, and blocks ending at rows that are no multiple of anything
METRICS = head_metrics.pattern_metrics()
KINDS = ("previous_token", "duplicate_token", "induction")
TARGETS = {"duplicate_token": "duplicate_token", "induction": "induction", "prefix_matching": "induction"}


# ----- the reference: the whole-matrix computation the module made before blocking ----------------------
def reference_weights(query, key, mask=None, scaling=None, softcap=None, sliding_window=None):
    q, k = query.detach().float(), key.detach().float()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scaling = 1.0 / math.sqrt(q.shape[-1]) if scaling is None else scaling
    scores = torch.matmul(q, k.transpose(-1, -2)) * scaling
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    n_q, n_k = scores.shape[-2], scores.shape[-1]
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    cols = torch.arange(n_k)[None, :]
    allowed = cols <= rows
    if sliding_window:
        allowed = allowed & (rows - cols < sliding_window)
    scores = scores.masked_fill(~allowed, float("-inf"))
    if mask is not None:
        cut = mask[..., -n_q:, :n_k]
        scores = scores.masked_fill(~cut, float("-inf")) if cut.dtype == torch.bool else scores + cut.float()
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0), scores.masked_fill(~allowed, 0).abs().amax()


def reference_scores(weights, metric, targets):
    n = weights.shape[-1]
    if metric == "previous_token":
        return torch.nn.functional.pad(weights.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0))
    if metric == "first_token":
        return torch.nn.functional.pad(weights[..., 1:, 0], (1, 0))
    if metric == "self":
        return weights.diagonal(dim1=-2, dim2=-1)
    if metric == "entropy":
        return -torch.special.xlogy(weights, weights).sum(-1)
    if metric == "distance":
        positions = torch.arange(n, dtype=weights.dtype)
        return positions * weights.sum(-1) - torch.matmul(weights, positions)
    return (weights * targets[TARGETS[metric]][:, None].to(weights.dtype)).sum(-1)


def reference(query, key, value, mask, options, output, request, tokens):
    """The answer to `request` from the whole ``[batch, heads, n, n]`` weights, and those weights."""
    weights, _ = reference_weights(query, key, mask, **options)
    group = query.shape[1] // key.shape[1]
    mixed = torch.matmul(weights, value.float().repeat_interleave(group, dim=1)).transpose(1, 2)
    rows = (weights.sum(-1) > 0).transpose(1, 2).unsqueeze(-1).float()
    theirs = output.float()
    result = {"error": ((mixed - theirs) * rows).abs().max() / (theirs * rows).abs().max().clamp_min(1e-30)}
    mode = request.get("pool", "max")
    if request.get("factor"):
        pooled = in_trace.pool(weights[0], request["factor"], mode)
        scale = request.get("scale")
        if scale is not None:
            top = in_trace.auto_top(pooled) if scale["kind"] == "auto" else None
            if top is not None:
                result["his"] = top
            pooled = in_trace.scale_positions(pooled, scale, top)
        result["codes"] = in_trace.quantize(pooled)
        result["positions"] = pooled.clamp(0, 1) * in_trace.CODE_MAX  # before rounding: where a code could tie
    if request.get("block") is not None:
        head, row0, row1, col0, col1, step = request["block"]
        chosen = weights if head is None else weights[:, head : head + 1]
        result["block"] = in_trace.pool(chosen[..., row0:row1, col0:col1], step, mode)
    targets = {kind: head_metrics.target_mask(tokens, kind) for kind in KINDS}
    if request.get("scores"):
        result["scores"] = {metric: reference_scores(weights, metric, targets) for metric in request["scores"]}
    return result, weights


def assert_same(got, want):
    """`got` (`reduce_call` / `HFView.reduced`) equals the reference `want`; codes exactly (but at a rounding tie)."""
    if "codes" in want:
        assert got["codes"].dtype == torch.uint8 and got["codes"].shape == want["codes"].shape
        differ = got["codes"] != want["codes"]
        if differ.any():  # only where the reference's position sits on a rounding tie (float rounding of the sum)
            assert int((got["codes"].int() - want["codes"].int()).abs().max()) == 1
            assert float((want["positions"][differ] % 1 - 0.5).abs().max()) < 1e-4
    assert ("his" in got) == ("his" in want)
    if "his" in want:
        assert torch.allclose(got["his"], want["his"], atol=1e-7, rtol=1e-6)
    if "block" in want:
        assert got["block"].shape == want["block"].shape
        assert got["block"].numel() == 0 or float((got["block"] - want["block"]).abs().max()) < 1e-6
    for metric, scores in want.get("scores", {}).items():
        assert got["scores"][metric].shape == scores.shape
        assert float((got["scores"][metric] - scores).abs().max()) < 2e-5 * max(1.0, float(scores.abs().max()))


REQUESTS = [
    {"factor": 1},
    {"factor": 3, "pool": "max"},
    {"factor": 4, "pool": "mean"},
    {"factor": 8, "pool": "mean"},
    {"factor": 5, "pool": "max", "scale": "auto"},
    {"factor": 2, "pool": "mean", "scale": "log"},
    {"factor": 3, "pool": "max", "scale": "relative"},
    {"factor": 1, "scale": "power"},
    {"block": (None, 0, 10**6, 0, 10**6, 1)},  # the whole layer
    {"block": (2, 5, 31, 2, 40, 1)},
    {"block": (None, 7, 36, 3, 36, 3), "pool": "mean"},
    {"block": (3, 11, 12, 0, 10**6, 1)},  # a hovered row
    {"block": (1, 33, 60, 30, 64, 4), "pool": "max"},
    {"factor": 4, "block": (None, 9, 27, 1, 30, 2), "pool": "mean", "scores": METRICS},
    {"scores": METRICS},
]


def request_for(request, n):
    """`request` with its scale spelled as the widget spells it (`transport.color_scale`) for `n` tokens."""
    if "scale" not in request:
        return request
    return {**request, "scale": transport.color_scale(request["scale"], n, step=request["factor"])}


def synthetic(n, kind, batch=1, heads=4, kv_heads=2, d_head=8, seed=0):
    """Inputs of an attention call ``(query, key, value, mask, options)`` and its output; `kind` picks the mask."""
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(batch, heads, n, d_head, generator=g) * 2
    key = torch.randn(batch, kv_heads, n, d_head, generator=g) * 2
    value = torch.randn(batch, kv_heads, n, d_head, generator=g)
    options = {"scaling": None, "softcap": None, "sliding_window": None}
    mask = None
    if kind == "padding":  # boolean, left padding of the first sequence: its first rows attend to nothing
        mask = torch.ones(batch, 1, n, n, dtype=torch.bool)
        mask[0, ..., :3] = False
    elif kind == "window":  # additive, with soft-capping and a sliding window
        mask = torch.zeros(batch, 1, n, n)
        mask[..., 1] = -2.0
        options = {"scaling": 0.3, "softcap": 5.0, "sliding_window": 9}
    weights, _ = reference_weights(query, key, mask, **options)
    output = torch.matmul(weights, value.repeat_interleave(heads // kv_heads, dim=1)).transpose(1, 2)
    tokens = torch.randint(0, 5, (batch, n), generator=g)  # few distinct tokens: duplicate and induction targets
    return (query, key, value, mask, options, output), tokens


@pytest.mark.parametrize("n", [37, 64, 65])
@pytest.mark.parametrize("kind", ["causal", "padding", "window"])
def test_every_request_equals_the_whole_matrix_at_every_block_boundary(n, kind, monkeypatch):
    monkeypatch.setattr(in_trace, "CHECK_EVERY", 1)  # (every block checked: the check's error is the whole layer's)
    call, tokens = synthetic(n, kind, batch=2 if kind == "padding" else 1)
    for request in REQUESTS:
        request = request_for(request, n)
        want, _ = reference(*call, request, tokens)
        for budget in BUDGETS:
            monkeypatch.setattr(in_trace, "BLOCK_CELLS", budget)
            got = in_trace.reduce_call(*call, request, tokens=tokens)
            assert_same(got, want)
            error, tolerance = got["mismatch"]
            if request.get("factor") or request.get("scores"):
                assert abs(float(error) - float(want["error"])) < 1e-6  # the whole layer is checked
            else:  # a tile alone checks its own rows and head
                assert float(error) <= float(want["error"]) + 1e-6
            assert float(error) < float(tolerance) < 1e-3


@pytest.mark.parametrize("head", [0, 3])
def test_a_sampled_check_still_sees_an_attention_it_does_not_know(head, monkeypatch):
    """Every CHECK_EVERY-th block (and each head group's last) is checked: an output that differs on every row of one
    head (a sink, a bias term) is caught, in whichever head group it is; the checked error never exceeds the whole."""
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 23)
    query, key, value, mask, options, output = synthetic(65, "causal")[0]
    request = {"factor": 4}
    sampled = in_trace.reduce_call(query, key, value, mask, options, output, request)["mismatch"]
    monkeypatch.setattr(in_trace, "CHECK_EVERY", 1)
    whole = in_trace.reduce_call(query, key, value, mask, options, output, request)["mismatch"]
    assert float(sampled[0]) <= float(whole[0]) + 1e-7 and float(whole[0]) < float(whole[1])
    monkeypatch.setattr(in_trace, "CHECK_EVERY", 4)
    shifted = output.clone()
    shifted[:, :, head] += 0.05 * output.abs().max()  # one head's output moved on every row
    error, tolerance = in_trace.reduce_call(query, key, value, mask, options, shifted, request)["mismatch"]
    assert float(error) > 10 * float(tolerance)


def test_blocks_end_on_pooled_windows_and_tile_windows_and_stay_in_budget():
    blocks = list(in_trace.row_blocks(0, 65, 23, factor=1))
    assert blocks[0] == (0, 4) and blocks[-1][1] == 65  # r x (keys seen) within 23: 4 rows at first, then 1
    assert all(b == c for (_, b), (c, _) in zip(blocks, blocks[1:], strict=False))
    edges = [b for _, b in in_trace.row_blocks(0, 65, 23, factor=4)]
    assert edges[-1] == 65 and all(e % 4 == 0 for e in edges[:-1])
    edges = [b for _, b in in_trace.row_blocks(0, 65, 200, factor=2, tile=(7, 36, 3))]
    assert all(e % 2 == 0 for e in edges[:-1]) and all((e - 7) % 3 == 0 for e in edges if 7 < e < 36)
    assert in_trace.head_groups(0, 8, 4, 10, 1) == [(0, 8)]
    assert in_trace.head_groups(0, 8, 4, 5, 1) == [(0, 4), (4, 8)]
    assert in_trace.head_groups(0, 8, 4, 3, 1) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert in_trace.head_groups(0, 8, 4, 3, 4) == [(h, h + 1) for h in range(8)]


def test_no_block_holds_more_than_its_budget_at_a_long_length(monkeypatch):
    """2 048 tokens x 8 heads: the whole layer would be 33.6 M weights; no block exceeds `BLOCK_CELLS`."""
    n, heads = 2048, 8
    call, tokens = synthetic(n, "causal", heads=heads, kv_heads=2, d_head=4)
    shapes = []
    block_weights = in_trace.block_weights

    def spy(*args, **kwargs):
        results = block_weights(*args, **kwargs)
        shapes.append(tuple(results[0].shape))
        return results

    monkeypatch.setattr(in_trace, "block_weights", spy)
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 1 << 20)
    request = {"factor": 4, "pool": "mean", "scores": ("induction", "entropy")}
    got = in_trace.reduce_call(*call, request, tokens=tokens)
    assert max(math.prod(s) for s in shapes) <= (1 << 20) + 4 * heads * n  # (up to one pooled window's rows more)
    assert sum(s[1] * s[2] for s in shapes) == heads * n  # every row of every head, once
    assert sum(math.prod(s) for s in shapes) < 0.6 * heads * n * n  # the keys a row cannot see are never built
    want, _ = reference(*call, request, tokens)
    assert_same(got, want)


# ----- tiny Hugging Face models through HFView, plain and remote="local" ----------------------------------
def captured(view, layer, tokens):
    """The attention call's inputs and output at `layer` of an `HFView`'s model, from a local trace."""
    envoy = view.backend._envoy(layer)
    with torch.no_grad(), view.backend.model().trace(tokens):
        query, key, value, mask, options = in_trace.call_inputs(envoy)
        saved = nnsight.save([query, key, value, mask, options, envoy.source.attention_interface_1.output[0]])
    return saved


@pytest.mark.parametrize("kind", ["llama", "gpt2", "gemma2"])
@pytest.mark.parametrize("remote", [False, "local"])
def test_hf_views_answer_as_the_whole_matrix_does(kind, remote, monkeypatch):
    hf, tokenizer = tiny_hf_model(kind, n_ctx=128)
    model = nnsight.TransformersModel(hf, tokenizer=tokenizer)
    view = HFView(model, remote=remote)
    n = 65 if kind != "gemma2" else 37
    tokens = torch.randint(1, 12, (1, n), generator=torch.Generator().manual_seed(3))
    call = captured(view, 1, tokens)
    for request in REQUESTS[1:4] + REQUESTS[9:]:
        request = request_for(request, n)
        want, _ = reference(*call, request, tokens)
        for budget in (23, 400):
            monkeypatch.setattr(in_trace, "BLOCK_CELLS", budget)  # shipped by value with the module: the remote run has it
            got = view.reduced(tokens, {1: request})[1]  # (raises if the output check fails)
            assert_same(got, want)


# ----- the widgets that draw them -------------------------------------------------------------------------
def two_models(kind="llama", **options):
    """Two equal tiny models (same seed): each widget its own, so that no cache answers for the other."""
    pairs = [tiny_hf_model(kind, **options) for _ in range(2)]
    return [nnsight.TransformersModel(hf, tokenizer=tokenizer) for hf, tokenizer in pairs]


def same_codes(*payloads):
    """Payloads of the same uint8 codes: all equal but, at most, a few rounding ties one code apart."""
    codes = [(transport.decode(p) * transport.CODE_MAX).round() for p in payloads]
    assert codes[0].shape == codes[1].shape
    apart = (codes[0] - codes[1]).abs()
    assert float(apart.max()) <= 1 and int((apart > 0).sum()) <= codes[0].numel() // 10_000


def drawn(model, budget, monkeypatch, **kwargs):
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", budget)
    return cw.AttentionPattern(HFView(model, remote=kwargs.pop("remote", False)), **kwargs)


@pytest.mark.parametrize("remote", [False, "local"])
def test_attention_pattern_overview_tiles_and_rows_equal_the_unblocked_rebuild(remote, monkeypatch):
    small, whole = two_models(layers=2, n_ctx=2048)
    tokens = torch.randint(1, 60, (1, 1501), generator=torch.Generator().manual_seed(0))
    for color_scale in ("linear", "auto"):
        widgets = [
            drawn(model, budget, monkeypatch, tokens=tokens, layer=1, head=1, color_scale=color_scale, remote=remote)
            for model, budget in ((small, 40_000), (whole, 1 << 40))  # a few rows a block; one block for the layer
        ]
        assert all(w.error == "" for w in widgets)
        assert widgets[0].patterns["lod"]["factor"] == 3  # a long prompt: the pooled overview
        same_codes(*(w.patterns for w in widgets))
        scales = [dict(w.patterns["scale"]) for w in widgets]
        his = [scale.pop("his", None) or [0.0] for scale in scales]
        assert his[0] == pytest.approx(his[1], rel=1e-6) and scales[0] == scales[1]
        for widget, budget in zip(widgets, (40_000, 1 << 40), strict=True):
            monkeypatch.setattr(in_trace, "BLOCK_CELLS", budget)
            widget.tile_request = {"id": 3, "layer": 1, "head": 1, "row0": 601, "col0": 500, "rows": 70, "cols": 70,
                                   "step": 1, "revision": widget.patterns["revision"]}
            widget.selection = {"query": 1499, "key": 3, "locked": True}
        same_codes(*(w.tile for w in widgets))
        rows = [transport.decode(w.row) for w in widgets]  # (remote: the rows of the heads held here only)
        assert widgets[0].row["heads"] == widgets[1].row["heads"] and 1 in widgets[0].row["heads"]
        assert not torch.isnan(rows[0]).any() and float((rows[0] - rows[1]).abs().max()) < 1e-7


def test_head_scores_equal_the_unblocked_rebuild(monkeypatch):
    small, whole = two_models()
    kinds = ["previous_token", "duplicate_token", "induction"]
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 37)
    blocked = cw.HeadScores(HFView(small), kinds=kinds)
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 1 << 40)
    plain = cw.HeadScores(HFView(whole), kinds=kinds)
    assert blocked.error == plain.error == ""
    for kind in kinds:
        assert torch.allclose(blocked.scores_of(kind), plain.scores_of(kind), atol=1e-6)


def test_a_head_scan_equals_the_unblocked_rebuild(monkeypatch):
    small, whole = two_models()
    texts = ["the cat sat on the mat. the cat sat on the mat.", "one two three one two three one two"]
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 29)
    blocked = cw.analysis.scan_heads(HFView(small), texts, progress=False)
    monkeypatch.setattr(in_trace, "BLOCK_CELLS", 1 << 40)
    plain = cw.analysis.scan_heads(HFView(whole), texts, progress=False)
    for metric in blocked.metrics:
        assert torch.allclose(torch.as_tensor(blocked.values[metric]), torch.as_tensor(plain.values[metric]), atol=2e-5,
                              equal_nan=True)
