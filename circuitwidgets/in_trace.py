"""The code that runs inside an nnsight trace, where the model runs: locally, or on NDIF's servers.

A remote engine runs only what it has installed (torch, numpy, einops and the Python builtins):
this module imports nothing but ``torch`` and ``math`` (a test checks it), and `HFView` ships it
with each request (``nnsight.register``, which sends its source by value). Everything here takes
and returns tensors or plain containers of them, so only the reduced result crosses the network.

Patterns are rebuilt from the inputs of the model's own attention call (the attention interface of
Hugging Face models: post-rotary queries and keys, the mask, the scale, soft-capping and the
sliding window), because the default attention (sdpa, flash) returns no weights and a remote user
cannot pick another. The rebuild follows Hugging Face's eager attention: ``softmax(mask +
softcap(q kᵀ · scaling))`` with grouped K/V heads repeated, in float32.

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

#: Heads whose ``[query, key]`` weights are built at once (bounds memory at long context: a
#: 4 096-token head is 64 MB of float32).
HEADS_AT_ONCE = 4
#: Code of weight 1 in the uint8 quantisation (`circuitwidgets.transport.CODE_MAX`: ``code = round(w · 254)``).
CODE_MAX = 254


def attention_weights(query, key, mask=None, scaling=None, softcap=None, sliding_window=None, stats=None):
    """Attention weights ``[batch, heads, query, key]`` float32 from the attention call's inputs.

    `query` ``[batch, heads, q, d_head]``, `key` ``[batch, kv_heads, k, d_head]`` (repeated to
    `heads`), `mask` None (causal) or a boolean (True = attend) or additive mask broadcastable to
    ``[batch, heads, q, k]``; `scaling` defaults to ``1/sqrt(d_head)``; `softcap`: scores become
    ``softcap · tanh(scores / softcap)`` before the mask; `sliding_window`: a query sees only the
    last `sliding_window` keys (itself included). The causal mask is always applied. A query
    that may attend to no key (a padding row) gets weights 0. `stats` (a dict), when given, keeps
    ``"max_score"``: the largest magnitude of a score (what the precision of the check scales with).
    """
    q = query.detach().float()
    k = key.detach().float()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    if scaling is None:
        scaling = 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q, k.transpose(-1, -2)) * scaling
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    if stats is not None:
        top = scores.abs().amax()
        stats["max_score"] = top if "max_score" not in stats else torch.maximum(stats["max_score"], top)
    n_q, n_k = scores.shape[-2], scores.shape[-1]
    rows = torch.arange(n_q, device=scores.device)[:, None] + (n_k - n_q)
    cols = torch.arange(n_k, device=scores.device)[None, :]
    allowed = cols <= rows
    if sliding_window:
        allowed = allowed & (rows - cols < sliding_window)
    scores = scores.masked_fill(~allowed, float("-inf"))
    if mask is not None:
        cut = mask.detach()[..., -n_q:, :n_k]
        if cut.dtype == torch.bool:
            scores = scores.masked_fill(~cut, float("-inf"))
        else:
            scores = scores + cut.float()
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # a row with no key allowed: all -inf


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


def head_chunks(query, key, value, mask, options, stats=None):
    """Yield ``(first_head, weights [batch, heads_in_chunk, q, k], mixed [batch, q, heads_in_chunk, d_head])``,
    `HEADS_AT_ONCE` heads at a time; ``mixed`` is the weights applied to the values (what the attention call returns)."""
    heads, kv_heads = query.shape[1], key.shape[1]
    group = heads // kv_heads
    step = max(group, HEADS_AT_ONCE // group * group)
    for first in range(0, heads, step):
        last = min(heads, first + step)
        kv = slice(first // group, -(-last // group))
        head_mask = mask
        if mask is not None and mask.ndim == 4 and mask.shape[1] == heads:
            head_mask = mask[:, first:last]
        weights = attention_weights(query[:, first:last], key[:, kv], head_mask, stats=stats, **options)
        values = value[:, kv].detach().float().repeat_interleave(group, dim=1)  # chunks hold whole K/V groups
        yield first, weights, torch.matmul(weights, values).transpose(1, 2)


def mismatch(mixed, output, rows, max_score):
    """Largest difference between the rebuilt weights applied to the values and the attention call's own
    output ``[batch, q, heads, d_head]`` over the `rows` ``[batch, q, heads]`` that attend to some key,
    relative to the output's largest entry; and the tolerance for the output's dtype.

    The rule: ``eps(dtype) · (2 + max_score / 2) + 1e-5``, ``max_score`` the largest score magnitude.
    A model in a reduced precision rounds its weights and its output to the dtype (about ``eps``
    each) and, in some kernels, its scores (growing with their size), while the rebuild works in
    float32 from the same inputs. Measured on small Llama, GPT-2, NeoX and Gemma 2 models in
    float16 and bfloat16, sdpa and eager, scores up to 9: a correct rebuild differs by 0.2-0.7 eps
    (bfloat16: at most 0.0055; float32: 2e-7), at least 5 times under the tolerance; an attention
    sink or a bias term differs by far more than that.
    """
    theirs = output.detach().float()
    keep = rows.unsqueeze(-1).to(theirs.dtype)
    scale = (theirs * keep).abs().max().clamp_min(1e-30)
    eps = torch.finfo(output.dtype).eps if output.dtype.is_floating_point else 1.2e-7
    tolerance = eps * (2 + max_score / 2) + 1e-5
    return ((mixed - theirs) * keep).abs().max() / scale, tolerance


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
    """
    return matrices.float().amax(-1).median(-1).values.clamp(min=1e-12)


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


def target_mask(tokens, kind):
    """Boolean ``[batch, query, key]``: the keys each query should attend to for a head-score `kind`.

    previous_token: key i-1. duplicate_token: earlier keys j < i holding the same token.
    induction / prefix_matching: keys j+1 for every earlier j < i-1 with ``tokens[j] == tokens[i]``.
    """
    seq = tokens.shape[1]
    query = torch.arange(seq, device=tokens.device)[:, None]
    key = torch.arange(seq, device=tokens.device)[None, :]
    if kind == "previous_token":
        return (key == query - 1).expand(tokens.shape[0], seq, seq).clone()
    same = tokens[:, :, None] == tokens[:, None, :]
    if kind == "duplicate_token":
        return same & (key < query)
    shifted = torch.zeros_like(same)
    shifted[:, :, 1:] = same[:, :, :-1]
    return shifted & (key < query)


def target_mass(weights, mask):
    """Attention mass on the `mask` targets per sequence, averaged over queries that have one.

    `weights` ``[batch, ..., query, key]``, `mask` boolean ``[batch, query, key]``. Returns
    ``(per_sequence [batch, ...], used [batch])``: `used` marks sequences with a query that has a target.
    """
    batch, seq = mask.shape[0], mask.shape[1]
    extra = weights.ndim - 3
    mask_f = mask.to(weights.dtype).reshape(batch, *([1] * extra), seq, seq)
    mass = (weights * mask_f).sum(-1)
    has = mask.any(-1)
    n_queries = has.sum(-1)
    has_f = has.to(weights.dtype).reshape(batch, *([1] * extra), seq)
    per_seq = (mass * has_f).sum(-1) / n_queries.clamp_min(1).reshape(batch, *([1] * extra))
    return per_seq, n_queries > 0


#: Per-destination head metrics a request's ``"scores"`` may name (`circuitwidgets.analysis.head_scan`).
DESTINATION_METRICS = ("previous_token", "first_token", "duplicate_token", "induction", "entropy", "distance", "self")


def destination_scores(weights, metric, targets=None):
    """One value per destination ``[batch, heads, q]`` of a head `metric`, from weights ``[batch, heads, q, k]``.

    previous_token: ``A[d, d-1]``; first_token: ``A[d, 0]``; self: ``A[d, d]``; entropy: ``-sum_s A log A``;
    distance: ``sum_s A[d, s] (d - s)``; duplicate_token / induction: the mass on `targets[metric]` (boolean
    ``[batch, q, k]``, `target_mask`). Where a metric is undefined (d = 0 for the first two, a destination with no
    target) the value is 0: the caller knows where from the tokens alone (a NaN would read as a broken model).
    """
    n = weights.shape[-1]  # (square: the whole sequence's queries and keys)
    if metric == "previous_token":
        return torch.nn.functional.pad(weights.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0))
    if metric == "first_token":
        return torch.nn.functional.pad(weights[..., 1:, 0], (1, 0))
    if metric == "self":
        return weights.diagonal(dim1=-2, dim2=-1)
    if metric == "entropy":
        return -torch.special.xlogy(weights, weights).sum(-1)
    if metric == "distance":
        positions = torch.arange(n, device=weights.device, dtype=weights.dtype)
        return positions * weights.sum(-1) - torch.matmul(weights, positions)
    mask = targets[metric]
    return (weights * mask[:, None].to(weights.dtype)).sum(-1)


def layer_reduction(attention, request, targets=None):
    """What one request keeps of one attention layer, computed where the model runs.

    `request` is a dict: ``"factor"`` (pool the layer over factor x factor cells, 1 = every cell)
    and ``"pool"`` ("max"/"mean") give ``"codes"``, the uint8 codes ``[heads, n/f, n/f]`` of the
    first sequence, which the widget draws (on the colour scale ``"scale"``, when given: `scale_positions`,
    with auto's per-head largest weights in ``"his"``); ``"scores"`` (`DESTINATION_METRICS`) give ``"scores"``
    ``{metric: `destination_scores` [batch, heads, q]}``; ``"block"`` ``(head or None, row0, row1, col0, col1, step)``
    gives ``"block"``, exact
    float32 weights of those cells ``[batch, heads, rows, cols]`` (pooled over step x step); ``"kinds"`` (head-score kinds) give
    ``"mass"`` ``{kind: `target_mass` ([batch, heads], used)}`` on `targets` ``{kind: mask}``. Heads are
    built a few at a time, so the full ``[heads, n, n]`` float32 never exists at once. ``"mismatch"``
    is `mismatch` of the rebuilt weights against the call's own output: an attention this rebuild does
    not know (sinks, ALiBi, a custom kernel) shows there instead of as a plausible wrong picture.
    """
    query, key, value, mask, options = call_inputs(attention)
    codes, blocks, mixed, rows, his = [], [], [], [], []
    mass: dict = {kind: [] for kind in request.get("kinds", ())}
    scores: dict = {metric: [] for metric in request.get("scores", ())}
    stats: dict = {}
    block = request.get("block")
    for first, weights, applied in head_chunks(query, key, value, mask, options, stats):
        mixed.append(applied)
        rows.append((weights.sum(-1) > 0).transpose(1, 2))  # [batch, q, heads]: rows that attend somewhere
        count = weights.shape[1]
        if request.get("factor"):
            pooled = pool(weights[0], request["factor"], request.get("pool", "max"))
            scale = request.get("scale")
            if scale is not None:  # codes on the picture's colour scale (auto: each head over its largest)
                top = auto_top(pooled) if scale["kind"] == "auto" else None
                his.extend([] if top is None else [top])
                pooled = scale_positions(pooled, scale, top)
            codes.append(quantize(pooled))
        if block is not None:
            head, row0, row1, col0, col1, step = block
            if head is None or first <= head < first + count:
                chosen = weights if head is None else weights[:, head - first : head - first + 1]
                blocks.append(pool(chosen[..., row0:row1, col0:col1], step, request.get("pool", "max")))
        for kind in mass:
            mass[kind].append(target_mass(weights, targets[kind]))
        for metric in scores:
            scores[metric].append(destination_scores(weights, metric, targets))
    output = attention.source.attention_interface_1.output[0]
    result = {"mismatch": mismatch(torch.cat(mixed, dim=2), output, torch.cat(rows, dim=2), stats["max_score"])}
    if codes:
        result["codes"] = torch.cat(codes)
    if his:
        result["his"] = torch.cat(his)
    if blocks:
        result["block"] = torch.cat(blocks, dim=1)  # [batch, heads, rows, cols]
    if mass:
        result["mass"] = {kind: (torch.cat([p for p, _ in parts], dim=1), parts[0][1]) for kind, parts in mass.items()}
    if scores:
        result["scores"] = {metric: torch.cat(parts, dim=1) for metric, parts in scores.items()}
    return result


def reduce_layers(attentions, requests, tokens):
    """`layer_reduction` of each attention envoy with its request (a list, in the order the layers run).

    `tokens` ``[batch, seq]`` are the trace's input ids, from which the head-score targets are derived.
    """
    targets = targets_of(requests, tokens)
    return [layer_reduction(attentions[i], requests[i], targets) for i in range(len(requests))]


def targets_of(requests, tokens):
    """``{kind: target_mask}`` for the head-score kinds and the target metrics (duplicate_token, induction) `requests` name."""
    kinds = {kind for request in requests for kind in request.get("kinds", ())}
    kinds |= {m for request in requests for m in request.get("scores", ()) if m in ("duplicate_token", "induction")}
    return {kind: target_mask(tokens, kind) for kind in kinds}
