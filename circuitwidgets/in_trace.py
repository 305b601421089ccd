"""The code that runs inside an nnsight trace, where the model runs: locally, or on NDIF's servers.

A remote engine runs only what it has installed (torch, numpy, einops and the Python builtins):
this module imports nothing but ``torch``, the standard library and `circuitwidgets.head_metrics`
(a test checks it), and `HFView` ships them with each request (``nnsight.register``, which sends
their source by value). Everything here takes
and returns tensors or plain containers of them, so only the reduced result crosses the network.

Patterns are rebuilt from the inputs of the model's own attention call (the attention interface of
Hugging Face models: post-rotary queries and keys, the mask, the scale, soft-capping and the
sliding window), because the default attention (sdpa, flash) returns no weights and a remote user
cannot pick another. The rebuild follows Hugging Face's eager attention: ``softmax(mask +
softcap(q kᵀ · scaling))`` with grouped K/V heads repeated, in float32, a block of destination rows
at a time (`reduce_call`): no ``[heads, n, n]`` ever exists, so memory stays bounded at any length.

Example:
    >>> import torch
    >>> q, k = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    >>> weights = attention_weights(q, k, None, 0.5)
    >>> tuple(weights.shape), bool(torch.allclose(weights.sum(-1), torch.ones(1, 2, 5)))
    ((1, 2, 5, 5), True)
    >>> float(weights[0, 0, 0, 1])      # causal: nothing above the diagonal
    0.0
"""

import math

import torch

from .head_metrics import destination_scores

#: Cells of one block of weights ``[batch, heads, rows, keys]`` built at once (float32: 4 bytes a cell, so 64 MB).
#: The rebuild holds a few blocks at a time whatever the length; tests shrink it to put block edges everywhere.
BLOCK_CELLS = 1 << 24
#: The output check runs on every this many blocks of rows of a head group (and its last): an attention the rebuild does
#: not know (sinks, ALiBi, a custom kernel) differs on every row, and checking every row costs a third of the work.
CHECK_EVERY = 4
#: Code of weight 1 in the uint8 quantisation (`circuitwidgets.transport.CODE_MAX`: ``code = round(w · 254)``).
CODE_MAX = 254


def block_weights(query, key, mask, options, row0, row1, width, stats=None, buffer=None, value=None):
    """Weights ``[batch, heads, row1 - row0, width]`` float32 of query rows ``row0:row1`` over keys ``0:width``,
    and the rows that attend to some key ``[batch, heads, rows]``.

    `query` ``[batch, heads, q, d_head]`` float32 already multiplied by the attention's scaling, `key`
    ``[batch, kv_heads, k, d_head]`` float32 (each K/V head serving ``heads / kv_heads`` consecutive heads),
    `mask` and `options` as the attention call has them (`attention_weights`; a mask with one entry per
    head cut to `query`'s heads). The keys past `width` must be ones the causal rule hides from these
    rows: ``width >= row1 + k - q``. `stats` keeps ``"max_score"``, the largest magnitude of a row's
    largest score (the scores a weight rests on; what the precision of the check scales with).
    `buffer`: a flat float32 tensor of at least as many cells, which the weights are written into
    (reused from block to block: a fresh tensor a block costs its page faults every time).
    `value` ``[batch, kv_heads, k, d_head + 1]``: the values with a column of ones; given, a third result
    is the weights applied to the values ``[batch, heads, rows, d_head]`` (the rows' sums come with them,
    from the same product, instead of from a pass of their own).
    """
    batch, heads, n_q, d_head = query.shape
    kv_heads, n_k = key.shape[1], key.shape[2]
    rows, offset = row1 - row0, n_k - n_q
    softcap, window = options.get("softcap"), options.get("sliding_window")
    q = query[:, :, row0:row1].reshape(batch, kv_heads, heads // kv_heads * rows, d_head)
    cells = batch * heads * rows * width
    if buffer is None or buffer.numel() < cells:
        buffer = torch.empty(cells, device=query.device)
    scores = buffer[:cells].view(batch, kv_heads, heads // kv_heads * rows, width)
    torch.matmul(q, key[:, :, :width].transpose(-1, -2), out=scores)
    scores = scores.view(batch, heads, rows, width)
    if softcap:
        scores.div_(softcap).tanh_().mul_(softcap)
    seen = torch.arange(row0, row1, device=scores.device)[:, None] + offset  # the last key each row may see
    first = 0 if window else max(0, row0 + offset + 1)  # keys before `first` are seen by every row (no window)
    cols = torch.arange(first, width, device=scores.device)[None, :]
    hidden = cols > seen
    if window:
        hidden = hidden | (seen - cols >= window)
    scores[..., first:].masked_fill_(hidden, float("-inf"))
    if mask is not None:
        cut = mask.detach()
        if cut.shape[-2] > 1:
            start = cut.shape[-2] - n_q + row0
            cut = cut[..., start : start + rows, :]
        cut = cut[..., :width]
        if cut.dtype == torch.bool:
            scores.masked_fill_(~cut, float("-inf"))
        else:
            scores.add_(cut.float())
    # softmax in place: exp(s - row max) / its sum; a row with no key allowed (all -inf) gets weights 0
    top = scores.amax(-1, keepdim=True)
    attends = torch.isfinite(top)
    top = torch.where(attends, top, torch.zeros_like(top))
    if stats is not None and top.numel():
        largest = top.abs().amax()
        stats["max_score"] = largest if "max_score" not in stats else torch.maximum(stats["max_score"], largest)
    scores.sub_(top).exp_()
    if not bool(attends.all()):
        scores.masked_fill_(~attends, 0.0)
    if value is None:
        total = scores.sum(-1, keepdim=True)
    else:
        product = torch.matmul(scores.view(batch, kv_heads, -1, width), value[:, :, :width]).view(batch, heads, rows, -1)
        total = product[..., -1:]
    total = total.masked_fill(total == 0, 1.0)
    scores.div_(total)
    if value is None:
        return scores, attends[..., 0]
    return scores, attends[..., 0], product[..., :-1] / total


def attention_weights(query, key, mask=None, scaling=None, softcap=None, sliding_window=None, stats=None):
    """Attention weights ``[batch, heads, query, key]`` float32 from the attention call's inputs.

    `query` ``[batch, heads, q, d_head]``, `key` ``[batch, kv_heads, k, d_head]`` (repeated to
    `heads`), `mask` None (causal) or a boolean (True = attend) or additive mask broadcastable to
    ``[batch, heads, q, k]``; `scaling` defaults to ``1/sqrt(d_head)``; `softcap`: scores become
    ``softcap · tanh(scores / softcap)`` before the mask; `sliding_window`: a query sees only the
    last `sliding_window` keys (itself included). The causal mask is always applied. A query
    that may attend to no key (a padding row) gets weights 0. `stats` (a dict), when given, keeps
    ``"max_score"`` (`block_weights`). The whole matrix at once: `layer_reduction` builds it a block of rows at a time instead.
    """
    options = {"softcap": softcap, "sliding_window": sliding_window}
    q = query.detach().float() * (1.0 / math.sqrt(query.shape[-1]) if scaling is None else scaling)
    return block_weights(q, key.detach().float(), mask, options, 0, q.shape[2], key.shape[2], stats)[0]


def call_inputs(attention):
    """``(query, key, value, mask, options)`` of one attention module's attention-interface call, inside a trace.

    `attention` is the nnsight envoy of a Hugging Face attention module whose forward calls
    ``attention_interface(self, query, key, value, attention_mask, ..., scaling=...)`` (GPT-2,
    GPT-NeoX, Llama, Mistral, Qwen2, Gemma 2 and most others in transformers 5).
    """
    args, kwargs = attention.source.attention_interface_1.inputs
    mask = args[4] if len(args) > 4 else kwargs.get("attention_mask")
    options = {name: kwargs.get(name) for name in ("scaling", "softcap", "sliding_window")}
    return args[1], args[2], args[3], mask, options


def quantize(weights):
    """Weights in [0, 1] as uint8 codes ``round(w · 254)``, as `circuitwidgets.transport.encode_uint8` makes them."""
    return torch.nan_to_num(weights, nan=0.0).clamp(0, 1).mul(CODE_MAX).round().to(torch.uint8)


#: Colour scales of attention pictures (the widgets' ``color_scale``): how a weight becomes a colour
#: position in [0, 1], which the uint8 codes then hold (``code = round(position · 254)``).
#: linear: the weight itself (comparable across heads); auto: the weight over its head's `auto_top`;
#: log: log10 of the weight between ``floor`` and 1; power: the weight to ``gamma``; relative: the
#: weight times the sources its destination sees (1 = uniform attention), over ``relative_max``.
COLOR_SCALES = ("linear", "auto", "log", "power", "relative")


def visible_sources(rows, row0, step, n, causal=True):
    """Sources seen by each of `rows` destination cells from `row0` (pooled over `step`: its last row), as float."""
    if not causal:
        return torch.full((rows,), float(n))
    last = row0 + (torch.arange(rows, dtype=torch.float32) + 1) * step
    return last.clamp(max=float(n))


def auto_top(matrices):
    """The top of each ``[rows, cols]`` matrix's auto colour scale: the median of its rows' largest weights.

    Not the largest weight, which is 1 for every causal head (the first destination sees only
    itself): the median row peak is a diffuse head's typical peak (a few / n) and a sharp head's ~1.
    Only rows that hold some weight count: padding (a shorter text in a batch) and empty rows would
    pull the median to 0, and one colour would then stand for every weight. The median of an even
    count is the mean of the middle two. A matrix with no weight at all gets 1.
    """
    peaks = matrices.float().amax(-1)
    peaks = torch.where(peaks > 0, peaks, torch.full_like(peaks, float("nan")))
    top = torch.nanquantile(peaks, 0.5, dim=-1)
    return torch.where(top.isnan(), torch.ones_like(top), top).clamp(min=1e-12)


def scale_positions(weights, scale, his=None):
    """Weights ``[..., rows, cols]`` as colour positions in [0, 1] on `scale` (a transport scale dict).

    `his`: auto's per-matrix largest weights, one per leading matrix (default ``scale["his"]``).
    Relative reads the scale's ``row0``, ``step``, ``n`` and ``causal`` to know what each row sees.
    """
    kind = scale["kind"]
    w = weights.float()
    if kind == "linear":
        t = w
    elif kind == "auto":
        his = scale["his"] if his is None else his
        top = torch.as_tensor(his, dtype=torch.float32, device=w.device).clamp(min=1e-30)
        t = w / top.reshape(*top.shape, *([1] * (w.dim() - top.dim())))
    elif kind == "log":
        lo = math.log10(scale["floor"])
        t = (torch.log10(w.clamp(min=scale["floor"])) - lo) / -lo
    elif kind == "power":
        t = w.clamp(min=0) ** scale["gamma"]
    elif kind == "relative":
        seen = visible_sources(w.shape[-2], scale["row0"], scale["step"], scale["n"], scale["causal"]).to(w.device)
        t = w * seen[:, None] / scale["relative_max"]
    else:
        raise ValueError(f"color scale must be one of {COLOR_SCALES}; got {kind!r}")
    return t.clamp(0, 1)


def scale_values(positions, scale):
    """Inverse of `scale_positions` (what a colour position stands for; the ends stand for their clipped range)."""
    kind, t = scale["kind"], positions.float()
    if kind == "linear":
        return t
    if kind == "auto":
        top = torch.as_tensor(scale["his"], dtype=torch.float32)
        return t * top.reshape(*top.shape, *([1] * (t.dim() - top.dim())))
    if kind == "log":
        lo = math.log10(scale["floor"])
        return torch.where(t > 0, 10 ** (lo - lo * t), torch.zeros_like(t))
    if kind == "power":
        return t ** (1 / scale["gamma"])
    if kind == "relative":
        seen = visible_sources(t.shape[-2], scale["row0"], scale["step"], scale["n"], scale["causal"])
        return t * scale["relative_max"] / seen[:, None]
    raise ValueError(f"color scale must be one of {COLOR_SCALES}; got {kind!r}")


def pool(weights, factor, mode="max"):
    """``[..., R, C]`` pooled over ``factor x factor`` cells (``"max"`` or ``"mean"`` of the cells inside the matrix)."""
    if factor == 1:
        return weights
    *lead, rows, cols = weights.shape
    x = weights.reshape(-1, 1, rows, cols)
    if mode == "max":
        out = torch.nn.functional.max_pool2d(x, factor, ceil_mode=True)
    else:
        sums = torch.nn.functional.avg_pool2d(x, factor, ceil_mode=True, divisor_override=1)
        r = torch.full((math.ceil(rows / factor),), float(factor), device=x.device)
        c = torch.full((math.ceil(cols / factor),), float(factor), device=x.device)
        r[-1], c[-1] = rows - factor * (len(r) - 1), cols - factor * (len(c) - 1)
        out = sums / (r[:, None] * c[None, :])
    return out.reshape(*lead, out.shape[-2], out.shape[-1])


def row_blocks(start, stop, cells, offset=0, factor=1, tile=None):
    """``(row0, row1)`` blocks covering rows ``start:stop``, each of about the rows r whose keys (the first
    ``row0 + offset + r``, as the causal rule lets them see) make `cells` weights per head.

    Every edge but `stop` is a multiple of `factor` (a pooled window never straddles two blocks) and,
    inside a tile ``(row0, row1, step)``, an edge of the tile's `step` windows.

    Example:
        >>> list(row_blocks(0, 10, 12, factor=2))
        [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    """

    def fits(edge):
        if edge == stop:
            return True
        if edge % factor:
            return False
        return tile is None or not tile[0] < edge < tile[1] or (edge - tile[0]) % tile[2] == 0

    row0 = start
    while row0 < stop:
        seen = max(0, row0 + offset)
        edge = min(stop, row0 + max(1, (math.isqrt(seen * seen + 4 * cells) - seen) // 2))
        while edge > row0 and not fits(edge):
            edge -= 1
        if edge == row0:  # no edge within the budget: the first one past it
            edge = row0 + 1
            while not fits(edge):
                edge += 1
        yield row0, edge
        row0 = edge


def head_groups(first, last, group, per_head_rows, factor):
    """``(first_head, last_head)`` chunks of ``first:last``: whole K/V groups, or parts of one group, as many heads
    as let a block hold `factor` rows (a pooled window's height) within `BLOCK_CELLS`."""
    size = max(1, min(last - first, per_head_rows // max(1, factor)))
    if size >= group:
        size -= size % group
    else:
        while group % size:
            size -= 1
    return [(h, min(last, h + size)) for h in range(first, last, size)]


def layer_reduction(attention, request, tokens=None, tick=None):
    """What one request keeps of one attention layer, computed where the model runs.

    `request` is a dict: ``"factor"`` (pool the layer over factor x factor cells, 1 = every cell)
    and ``"pool"`` ("max"/"mean") give ``"codes"``, the uint8 codes ``[heads, n/f, n/f]`` of the
    first sequence, which the widget draws (on the colour scale ``"scale"``, when given: `scale_positions`,
    with auto's per-head largest weights in ``"his"``); ``"scores"`` (pattern metrics of `head_metrics.METRICS`) give
    ``"scores"`` ``{metric: `head_metrics.destination_scores` [batch, heads, q]}`` (from `tokens`);
    ``"block"`` ``(head or None, row0, row1, col0, col1, step)`` gives ``"block"``, exact float32 weights of those
    cells ``[batch, heads, rows, cols]`` (pooled over step x step);
    ``"batch_mean"`` (True) averages that block over the batch (``[1, heads, rows, cols]``).
    ``"head_inputs"`` (a head) gives ``"inputs"``, that head's `head_inputs`.
    ``"mismatch"`` ``(difference, tolerance)`` compares the rebuilt weights applied to the values with the call's
    own output (`check_tolerance`): an attention this rebuild does not know (sinks, ALiBi, a custom kernel) shows
    there instead of as a plausible wrong picture. The weights are built a block of rows at a time (`reduce_call`):
    memory stays bounded at any length.
    """
    query, key, value, mask, options = call_inputs(attention)
    output = attention.source.attention_interface_1.output[0]
    result = reduce_call(query, key, value, mask, options, output, request, tokens, tick)
    if request.get("head_inputs") is not None:  # one head's inputs: its cells are then rebuilt where the user is
        result["inputs"] = head_inputs(query, key, options, request["head_inputs"])
    return result


def head_inputs(query, key, options, head):
    """Head `head`'s attention-call inputs, to rebuild its weights elsewhere (`attention_weights` of them).

    Its queries and its K/V group's keys ``[seq, d_head]`` of the first sequence, after the model's
    rotation, in the call's dtype (copies: a view would carry the whole layer's storage), and the
    call's options that are set (``scaling``, ``softcap``, ``sliding_window``).
    """
    group = query.shape[1] // key.shape[1]
    kept = {name: value for name, value in options.items() if value is not None}
    return {"q": query[0, head].detach().clone(), "k": key[0, head // group].detach().clone(), "options": kept}


def reduce_call(query, key, value, mask, options, output, request, tokens=None, tick=None):
    """`layer_reduction` from the attention call's inputs and its `output` ``[batch, q, heads, d_head]``.

    Heads go a few at a time (whole K/V groups where a block can hold them) and rows a block at a
    time, each block holding about `BLOCK_CELLS` weights and only the keys its rows may see (the
    causal rule hides the rest); block edges fall on the overview's pooled windows and the tile's,
    so every answer is what the whole matrix would give (to float rounding: a uint8 code may differ
    by one where its weight sits on a rounding tie). A request for a tile alone (a zoom, a hovered
    row) builds only the tile's rows and head. The output check runs on the first and last block of
    each head group and every `CHECK_EVERY`-th in between. `tick` (local runs only), when given, is
    called ``tick(done, total)`` after each block: it may raise to stop the work there.
    """
    batch, heads, n_q, _ = query.shape
    kv_heads, n_k = key.shape[1], key.shape[2]
    group, offset, device = heads // kv_heads, n_k - n_q, query.device
    scaling = 1.0 / math.sqrt(query.shape[-1]) if options.get("scaling") is None else options["scaling"]
    factor, mode, tile = request.get("factor") or 0, request.get("pool", "max"), request.get("block")
    metrics = tuple(request.get("scores", ()))
    tokens = None if tokens is None else tokens.to(device)
    first, last, start, stop = 0, heads, 0, n_q
    if tile is not None and not (factor or metrics):  # a tile (or a row) alone: its rows and heads
        if tile[0] is not None:
            first, last = tile[0], tile[0] + 1
        start, stop = min(max(tile[1], 0), n_q), min(max(tile[2], 0), n_q)
    elif tile is None and not (factor or metrics) and request.get("head_inputs") is not None:
        first, last = request["head_inputs"], request["head_inputs"] + 1  # a head's inputs alone: only its weights checked
    align = factor or 1
    tile_at = None if tile is None else (tile[1], tile[2], tile[5])
    codes = torch.zeros(last - first, -(-n_q // factor), -(-n_k // factor), device=device) if factor else None
    tiles, scores = [], {metric: [] for metric in metrics}
    worst, stats = torch.zeros((), device=device), {}
    groups = head_groups(first, last, group, max(1, BLOCK_CELLS // (batch * n_k)), align)
    plan = [list(row_blocks(start, stop, BLOCK_CELLS // (batch * (h1 - h0)), offset, align, tile_at)) for h0, h1 in groups]
    total, done = sum(len(blocks) for blocks in plan), 0
    for (h0, h1), blocks in zip(groups, plan, strict=True):
        kv0, kvs = h0 // group, max(1, (h1 - h0) // group)
        q = query[:, h0:h1].detach().float() * scaling
        k = key[:, kv0 : kv0 + kvs].detach().float()
        v = value[:, kv0 : kv0 + kvs].detach().float()
        # (each value's largest magnitude: a row's Σ w |v| comes with the product, the scale of its rounding; ones:
        # each row's sum comes with it too)
        v = torch.cat([v, v.abs().amax(-1, keepdim=True), torch.ones_like(v[..., :1])], dim=-1)
        theirs = output[:, :, h0:h1].detach().float().transpose(1, 2).contiguous()  # [batch, heads, q, d_head]
        head_mask = mask
        if mask is not None and mask.ndim == 4 and mask.shape[1] == heads and heads > 1:
            head_mask = mask[:, h0:h1]
        tile_rows, score_rows, buffer = [], {metric: [] for metric in metrics}, None
        for index, (row0, row1) in enumerate(blocks):
            width = min(n_k, max(1, -(-(row1 + offset) // align) * align))  # the keys these rows may see
            cells = batch * (h1 - h0) * (row1 - row0) * width
            if buffer is None or buffer.numel() < cells:  # one buffer for the blocks (a little more: edges move)
                buffer = torch.empty(cells + cells // 4, device=device)
            if index % CHECK_EVERY == 0 or index == len(blocks) - 1:  # the check: these weights applied to the values
                weights, attends, mixed = block_weights(q, k, head_mask, options, row0, row1, width, stats, buffer, v)
                gap = (mixed[..., :-1] - theirs[:, :, row0:row1]).abs_().amax(-1)  # against the call's own output
                # relative to each row's own scale (Σ w |v|), not the layer's largest output: an unknown term that
                # moves small rows (a sink taking a few percent of a row's weight) shows as much as in large ones
                scale = torch.where(attends, mixed[..., -1], 0.0)
                floor = scale.amax().clamp_min(1e-30) * 1e-2  # (a row of values near 0: its rounding is the block's)
                worst = torch.maximum(worst, torch.where(attends, gap / scale.clamp_min(floor), 0.0).amax())
            else:
                weights, attends = block_weights(q, k, head_mask, options, row0, row1, width, stats, buffer)
            if factor:
                pooled = pool(weights[0], factor, mode)
                at = row0 // factor
                codes[h0 - first : h1 - first, at : at + pooled.shape[-2], : pooled.shape[-1]] = pooled
            if tile is not None:
                head, t0, t1, c0, c1, step = tile
                if max(row0, t0) < min(row1, t1) and (head is None or h0 <= head < h1):
                    chosen = weights if head is None else weights[:, head - h0 : head - h0 + 1]
                    part = chosen[..., max(row0, t0) - row0 : min(row1, t1) - row0, c0:c1]
                    missing = len(range(n_k)[c0:c1]) - part.shape[-1]  # keys past `width`: weight 0
                    part = torch.nn.functional.pad(part, (0, missing)) if missing > 0 else part
                    tile_rows.append(pool(part, step, mode).clone() if step == 1 else pool(part, step, mode))
            for metric in metrics:  # (their targets made from the tokens, these rows only)
                score_rows[metric].append(destination_scores(weights, metric, tokens, row0 + offset))
            done += 1
            if tick is not None:
                tick(done, total)
        if tile_rows:
            tiles.append(torch.cat(tile_rows, dim=2))
        for metric in metrics:
            scores[metric].append(torch.cat(score_rows[metric], dim=2))
    result = {"mismatch": (worst, check_tolerance(output.dtype, stats.get("max_score", 0.0)))}
    if factor:
        scale = request.get("scale")
        if scale is not None:  # codes on the picture's colour scale (auto: each head over its largest)
            top = auto_top(codes) if scale["kind"] == "auto" else None
            if top is not None:
                result["his"] = top
            codes = scale_positions(codes, scale, top)
        result["codes"] = quantize(codes)
    if tile is not None:  # [batch, heads, rows, cols]
        empty = torch.zeros(batch, last - first, 0, -(-len(range(n_k)[tile[3] : tile[4]]) // tile[5]), device=device)
        result["block"] = torch.cat(tiles, dim=1) if tiles else empty
        if request.get("batch_mean"):  # one mean picture of several sequences (a rotary model's positional view)
            result["block"] = result["block"].mean(0, keepdim=True)
    if metrics:
        result["scores"] = {metric: torch.cat(parts, dim=1) for metric, parts in scores.items()}
    return result


def check_tolerance(dtype, max_score):
    """What the output check allows: the largest difference between the rebuilt weights applied to the values and
    the attention call's own output (over the rows that attend to some key), relative to that row's own scale
    ``Σ_s w_s max|v_s|`` (floored at a hundredth of the block's largest).

    The rule: ``eps(dtype) · (2 + max_score / 2) + 1e-5``, ``max_score`` the largest magnitude of a row's largest
    score (`block_weights`). A model in a reduced precision rounds its weights and its output to the dtype
    (about ``eps`` each) and, in some kernels, its scores (growing with their size), while the rebuild works in
    float32 from the same inputs. Measured on small Llama, GPT-2, NeoX and Gemma 2 models in float16 and
    bfloat16, sdpa and eager, scores up to 9: a correct rebuild differs by 0.2-0.7 eps (bfloat16: at most
    0.0055; float32: 2e-7), under the tolerance's floor of 2 eps; an attention sink or a bias term differs by
    far more than that.
    """
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 1.2e-7
    return eps * (2 + max_score / 4) + 1e-5


def reduce_layers(attentions, requests, tokens, tick=None):
    """`layer_reduction` of each attention envoy with its request (a list, in the order the layers run).

    `tokens` ``[batch, seq]`` are the trace's input ids, from which the head-score targets are derived
    (a block of rows at a time). `tick` (a local trace only: it is not sent anywhere) is ``tick(stage,
    done, total)``: ``("layer", i + 1, len(requests))`` before each layer (of several), ``("block", done, total)``
    after each block.
    """
    results = []
    for i in range(len(requests)):
        if tick is not None and len(requests) > 1:  # (one layer: its blocks say it all; "layer 1 of 1" would not)
            tick("layer", i + 1, len(requests))
        blocks = None if tick is None else (lambda done, total: tick("block", done, total))
        results.append(layer_reduction(attentions[i], requests[i], tokens=tokens, tick=blocks))
    return results
