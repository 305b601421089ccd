"""Feature-level attention: one implementation of a head's score and output split over a dictionary's features.

Run here, on a local run's activations (`circuitwidgets.backends.features`), or inside an nnsight trace
next to a remote model's weights: this module imports only torch and is shipped by value
(`circuitwidgets.backends.traces`), like `circuitwidgets.logit_terms`. Only what it returns (terms, top
pairs, marginals of the active features) leaves the place where it runs.

A dictionary `spec` (a dict, `circuitwidgets.dictionary.Dictionary.spec`) reads ``x_in`` and reconstructs
``x`` (the same activation for a sparse autoencoder, another site for a transcoder)::

    a = act(x_in W_enc + b_enc)       relu; "jumprelu": a·[pre > threshold]; "topk": the k largest pre, relu'd
    x = a W_dec + b_dec + e           e, the error, what the features leave out

**QK** (`qk_split`, definitions in ``circuits-spec.md``, *Feature-level QK*). A head's score at destination d and
source s is ``S = c · R_d q_d · R_s k_s`` with ``q_d = (x_d / σ_d) W_Q + b_Q`` (``W_Q``, ``b_Q`` folded as
`circuitwidgets.backends.weights.Weights` folds them: the norm's weight in, centred with LayerNorm, its bias
in ``b_Q``), ``σ_d`` the norm's scale at d frozen at this run's value, ``R`` the rotary rotation at the
position, ``c`` the model's own scale. ``x_d`` splits into its active features, its error and its bias
(``b_dec``), so ``q_d`` splits into parts (features, error, ``b_dec / σ_d`` through ``W_Q`` plus ``b_Q``:
"bias"), each rotated, and likewise ``k_s``. `TERMS` are the nine products of a query part and a key part; they
sum to S up to float error. ``features × features`` is itself the sum of one value per pair of an active query
feature and an active key feature.

**OV** (`ov_split`): what head h writes at destination d, ``z_d = Σ_s A[d, s] v_s``, split over the source
features (summed over the sources, each weighted by the pattern), the error and the bias, read out along the
columns of a read-out matrix ``G`` ``[d_head, outputs]`` (an output dictionary's encoder through ``W_O``, or the
unembedding divided by the frozen final scale).

Example:
    >>> import torch
    >>> spec = {"W_enc": torch.eye(3), "b_enc": torch.zeros(3), "activation": "topk", "k": 1, "threshold": None}
    >>> encode(spec, torch.tensor([[0.5, -2.0, 1.0]])).tolist()
    [[0.0, 0.0, 1.0]]
"""

import torch

#: The terms of a score's split, in order: query part × key part.
TERMS = (
    "features × features",
    "features × key error",
    "query error × features",
    "error × error",
    "features × key bias",
    "query bias × features",
    "query error × key bias",
    "query bias × key error",
    "query bias × key bias",
)
#: The terms of a head's output read out (`ov_split`).
OV_TERMS = ("features", "error", "bias")
#: Pre-activations ``[rows, features]`` encoded at once (float32: 16 MB): any prompt length in bounded memory.
ENCODE_CELLS = 1 << 22
#: Decoder rows ``[active entries, d_model]`` taken at once (float64: 16 MB).
DECODE_CELLS = 1 << 21
#: Products ``[features, outputs]`` of the OV read-out formed at once (float32: 64 MB).
READ_CELLS = 1 << 24
#: What `split_check` allows: ``|sum of terms - score|`` relative to ``1 + sum |terms|`` (float32 runs).
TOLERANCE = 1e-4


def encode(spec, x):
    """Feature activations ``[n, features]`` (float32) of inputs `x` ``[n, d_in]``."""
    pre = x.float() @ spec["W_enc"].float().to(x.device) + spec["b_enc"].float().to(x.device)
    kind = spec["activation"]
    if kind == "topk":
        k = min(int(spec["k"]), pre.shape[-1])
        values, index = pre.topk(k, dim=-1)
        return torch.zeros_like(pre).scatter_(-1, index, values.relu())
    acts = pre.relu()
    if kind == "jumprelu":
        acts = acts * (pre > spec["threshold"].float().to(x.device)).to(acts.dtype)
    return acts


def sparse_codes(spec, x):
    """The active features of each row of `x` ``[n, d_in]``: ``(rows, features, values)``, 1-D each (a block of rows
    encoded at a time: never ``[n, features]``)."""
    n_features = spec["W_enc"].shape[-1]
    step = max(1, ENCODE_CELLS // max(1, n_features))
    rows, features, values = [], [], []
    for start in range(0, x.shape[0], step):
        acts = encode(spec, x[start : start + step])
        r, f = acts.nonzero(as_tuple=True)
        rows.append(r + start)
        features.append(f)
        values.append(acts[r, f])
    if not rows:
        empty = torch.zeros(0, dtype=torch.long, device=x.device)
        return empty, empty, torch.zeros(0, device=x.device)
    return torch.cat(rows), torch.cat(features), torch.cat(values)


def rope(x, cos, sin, pairs):
    """`x` ``[..., d_head]`` rotated by rotary tables `cos`, `sin` ``[..., rotary_dim]`` (broadcast against `x`): the
    first ``rotary_dim`` dimensions become ``x·cos + flip(x)·sin`` with ``flip`` pairing dimensions 2i, 2i+1
    (`pairs` "adjacent": GPT-J, TransformerLens' native bridge) or i, i + rotary_dim/2 ("half": Hugging Face,
    GPT-NeoX); the others pass. `cos` None: `x` itself."""
    if cos is None:
        return x
    rd = cos.shape[-1]
    part, rest = x[..., :rd], x[..., rd:]
    if pairs == "adjacent":
        flip = torch.stack((-part[..., 1::2], part[..., 0::2]), dim=-1).flatten(-2)
    else:
        half = rd // 2
        flip = torch.cat((-part[..., half:], part[..., :half]), dim=-1)
    turned = part * cos.to(x.dtype) + flip * sin.to(x.dtype)
    return torch.cat((turned, rest), dim=-1) if rest.shape[-1] else turned


def side_parts(spec, x_in, x, sigma, W, b, cos=None, sin=None, pairs="half"):
    """One side of a head's input at some positions, split: its active features, error and bias through `W`.

    `x_in` ``[n, d_in]`` what the dictionary reads, `x` ``[n, d_model]`` the head's input residual (what it
    reconstructs), `sigma` ``[n]`` the norm's frozen scale (ones without a norm), `W` ``[d_model, d_head]`` and `b`
    ``[d_head]`` the head's folded weight and bias, `cos`/`sin` ``[n, rotary_dim]`` the rotation at each position.
    Returns float64 ``{"rows", "ids", "acts" [m], "features" [m, d_head], "error" [n, d_head], "bias" [n, d_head]}``:
    feature i of row r contributes ``a_i W_dec[i] W / σ_r``, rotated.
    """
    rows, ids, acts = sparse_codes(spec, x_in)
    f64 = torch.float64
    W, b = W.to(x.device, f64), b.to(x.device, f64)
    b_dec = spec["b_dec"].to(x.device, f64)
    sigma = sigma.to(x.device, f64)
    recon = torch.zeros(x.shape[0], x.shape[1], dtype=f64, device=x.device)
    features = torch.zeros(ids.numel(), W.shape[1], dtype=f64, device=x.device)
    step = max(1, DECODE_CELLS // max(1, x.shape[1]))
    for start in range(0, ids.numel(), step):  # the active features' decoder rows, a block at a time (never the decoder)
        chosen = ids[start : start + step].to(spec["W_dec"].device)
        decoded = spec["W_dec"][chosen].to(x.device, f64) * acts[start : start + step].to(x.device, f64)[:, None]
        recon.index_add_(0, rows[start : start + step], decoded)
        features[start : start + step] = decoded @ W
    recon += b_dec
    error = x.to(f64) - recon
    features = features / sigma[rows, None]
    error_part = (error @ W) / sigma[:, None]
    bias_part = (b_dec @ W)[None, :] / sigma[:, None] + b[None, :]
    if cos is not None:
        cos, sin = cos.to(x.device, f64), sin.to(x.device, f64)
        features = rope(features, cos[rows], sin[rows], pairs)
        error_part, bias_part = rope(error_part, cos, sin, pairs), rope(bias_part, cos, sin, pairs)
    return {"rows": rows, "ids": ids, "acts": acts, "features": features, "error": error_part, "bias": bias_part}


def _group_top(groups, values, k):
    """Indices of the `k` largest ``|values|`` within each group (`groups` sorted ascending or not), by group."""
    if values.numel() == 0:
        return torch.zeros(0, dtype=torch.long, device=values.device)
    order = torch.argsort(values.abs(), descending=True, stable=True)
    order = order[torch.argsort(groups[order], stable=True)]  # by group, largest first within each
    g = groups[order]
    start = torch.ones_like(g, dtype=torch.bool)
    start[1:] = g[1:] != g[:-1]
    first = torch.cummax(torch.where(start, torch.arange(g.numel(), device=g.device), torch.zeros_like(g)), 0).values
    rank = torch.arange(g.numel(), device=g.device) - first
    return order[rank < k]


def qk_split(query, key, n_sources, scale, k):
    """The split of the scores of one destination over `n_sources` sources (`side_parts` of each side: `query` of
    one row, `key` of `n_sources` rows), times the model's `scale`. Returns float64 on the CPU:

    ``terms`` ``[n_sources, 9]`` (`TERMS`); ``query_ids``, ``query_acts`` ``[nq]`` and ``query_marginals``
    ``[n_sources, nq]`` (each active query feature's product with the whole key: its row sum); ``key_rows``,
    ``key_ids``, ``key_acts``, ``key_marginals`` ``[m]`` (each active key feature's product with the whole query);
    ``pair_rows``, ``pair_query``, ``pair_key``, ``pair_values``: the `k` pairs of largest ``|value|`` of each source
    (indices into the query and key features); ``top``: those `k` over every source (indices into the pairs).
    """
    qF, qE, qB = query["features"], query["error"][0], query["bias"][0]
    kF, kE, kB, rows = key["features"], key["error"], key["bias"], key["rows"]
    q_sum = qF.sum(0)
    k_sum = torch.zeros_like(kE).index_add_(0, rows, kF)
    dot = lambda a, b: (a * b).sum(-1) * scale  # noqa: E731 - [n, d] · [d] or [n, d]
    terms = torch.stack([
        dot(k_sum, q_sum), dot(kE, q_sum), dot(k_sum, qE), dot(kE, qE), dot(kB, q_sum), dot(k_sum, qB),
        dot(kB, qE), dot(kE, qB), dot(kB, qB),
    ], dim=1)
    q_total = q_sum + qE + qB
    k_total = k_sum + kE + kB
    query_marginals = (k_total @ qF.T) * scale  # [n_sources, nq]
    key_marginals = (kF @ q_total) * scale  # [m]
    pairs = (qF @ kF.T) * scale  # [nq, m]
    n_q = qF.shape[0]
    flat_rows = rows[None, :].expand(n_q, -1).reshape(-1)
    flat = pairs.reshape(-1)
    kept = _group_top(flat_rows, flat, k)
    pair_rows, values = flat_rows[kept], flat[kept]
    top = torch.argsort(values.abs(), descending=True, stable=True)[:k]
    return {
        "terms": terms.cpu(),
        "query_ids": query["ids"].cpu(), "query_acts": query["acts"].double().cpu(), "query_marginals": query_marginals.cpu(),
        "key_rows": rows.cpu(), "key_ids": key["ids"].cpu(), "key_acts": key["acts"].double().cpu(),
        "key_marginals": key_marginals.cpu(),
        "pair_rows": pair_rows.cpu(),
        "pair_query": (kept // max(1, kF.shape[0])).cpu(),
        "pair_key": (kept % max(1, kF.shape[0])).cpu(),
        "pair_values": values.cpu(), "top": top.cpu(),
    }


def ov_split(source, weights, read, k):
    """What a head moves to one destination, split over the source features and read out along `read`.

    `source`: `side_parts` of every source through the head's value weights (no rotation), `weights` ``[n]`` the
    pattern's row over those sources, `read` ``[d_head, outputs]`` the read-out (float64). A source feature's part
    is summed over the sources it is active at, each weighted by the pattern. Returns float64 on the CPU:
    ``ids``, ``weight`` (``Σ_s A[s] a_i(s)``), ``norm`` (``‖part · read‖``) ``[nf]`` of each source feature;
    ``outputs``, ``total`` ``[k]`` the `k` outputs with the largest ``|total|`` and the head's whole read-out there,
    ``terms`` ``[k, 3]`` (`OV_TERMS`) of each; ``pair_feature``, ``pair_output``, ``pair_values`` the `k` (source
    feature, output) pairs of largest ``|value|``; ``written`` ``[d_head]`` the sum of every part (the head's ``z``).
    """
    weights = weights.to(source["error"].device, torch.float64)
    ids, inverse = torch.unique(source["ids"], return_inverse=True)
    per = source["features"] * weights[source["rows"], None]
    feature_parts = torch.zeros(ids.numel(), per.shape[1], dtype=per.dtype, device=per.device).index_add_(0, inverse, per)
    feature_weight = torch.zeros(ids.numel(), dtype=per.dtype, device=per.device).index_add_(
        0, inverse, source["acts"].to(per.dtype) * weights[source["rows"]]
    )
    error = (source["error"] * weights[:, None]).sum(0)
    bias = (source["bias"] * weights[:, None]).sum(0)
    read = read.to(per.device, torch.float64)
    written = feature_parts.sum(0) + error + bias
    total = written @ read
    outputs = torch.argsort(total.abs(), descending=True, stable=True)[:k]
    terms = torch.stack([feature_parts.sum(0) @ read[:, outputs], error @ read[:, outputs], bias @ read[:, outputs]], 1)
    step = max(1, READ_CELLS // max(1, read.shape[1]))
    norms, best_values, best_index = [], [], []
    for start in range(0, ids.numel(), step):
        block = feature_parts[start : start + step] @ read  # [features, outputs]
        norms.append(block.norm(dim=1))
        values, index = block.abs().reshape(-1).topk(min(k, block.numel()))
        best_values.append(block.reshape(-1)[index])
        best_index.append(index + start * read.shape[1])
    if best_values:
        values, index = torch.cat(best_values), torch.cat(best_index)
        order = torch.argsort(values.abs(), descending=True, stable=True)[:k]
        values, index = values[order], index[order]
    else:
        values, index = torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.long)
    return {
        "ids": ids.cpu(), "weight": feature_weight.cpu(),
        "norm": (torch.cat(norms) if norms else torch.zeros(0, dtype=torch.float64)).cpu(),
        "outputs": outputs.cpu(), "total": total[outputs].cpu(), "terms": terms.cpu(),
        "pair_feature": ids[index // read.shape[1]].cpu() if index.numel() else index.cpu(),
        "pair_output": (index % read.shape[1]).cpu(), "pair_values": values.cpu(), "written": written.cpu(),
    }


def head_split(spec, z, n_heads):
    """Each head's part of every feature's pre-activation at the positions of `z` ``[n, n_heads, d_head]``, for a
    dictionary that reads every head's ``z`` flattened (``[n, n_heads · d_head]``, TransformerLens ``hook_z``):
    ``[n, n_heads, features]`` (float32), summing with the encoder bias ``b_enc`` to the pre-activation."""
    d_head = z.shape[-1]
    W = spec["W_enc"].float().to(z.device).reshape(n_heads, d_head, -1)
    return torch.einsum("nhd,hdf->nhf", z.float(), W)


def feature_cards(spec, x_in, ids, W_U=None, k=5):
    """What a hover shows of each feature `ids` ``[f]``: its `k` top activating positions among the rows of `x_in`
    ``[n, d_in]`` (``positions``, ``values`` ``[f, k]``, value 0 where fewer are active) and, with the folded
    unembedding `W_U` ``[d_model, d_vocab]``, its decoder direction's direct effect on the logits: the `k` tokens it
    raises and lowers most (``up``, ``up_values``, ``down``, ``down_values`` ``[f, k]``)."""
    ids = ids.to(x_in.device)
    if spec["activation"] == "topk":  # a feature's activation depends on every other's
        acts = torch.cat([encode(spec, x_in[s : s + 256])[:, ids] for s in range(0, x_in.shape[0], 256)])
    else:
        index = ids.to(spec["W_enc"].device)
        sub = {**spec, "W_enc": spec["W_enc"][:, index], "b_enc": spec["b_enc"][index]}
        if spec["activation"] == "jumprelu":
            sub["threshold"] = spec["threshold"][ids.to(spec["threshold"].device)]
        acts = encode(sub, x_in)
    top = min(k, acts.shape[0])
    values, positions = acts.T.topk(top, dim=1) if acts.numel() else (acts.T, acts.T.long())
    card = {"ids": ids.cpu(), "positions": positions.cpu(), "values": values.cpu()}
    if W_U is not None and ids.numel():
        W_dec = spec["W_dec"][ids.to(spec["W_dec"].device)].float().to(W_U.device)
        logits = W_dec @ W_U.float()
        width = min(k, logits.shape[1])
        up, down = logits.topk(width, dim=1), (-logits).topk(width, dim=1)
        card.update(up=up.indices.cpu(), up_values=up.values.cpu(), down=down.indices.cpu(), down_values=-down.values.cpu())
    return card


def _rows(request, n):
    sources = request.get("sources")
    return list(range(n)) if sources is None else [int(s) for s in sources]


def _gap(total, reference):
    """``|total - reference|`` relative to ``1 + |reference|`` (largest over the entries)."""
    return float(((total - reference).abs() / (1 + reference.abs())).max()) if reference.numel() else 0.0


def answer(request, run, weights):
    """The answer to one feature-attention `request`, from one run's activations `run` and the head's `weights`.

    `request`: ``kind`` ("qk", "ov" or "heads"), ``destination`` d, ``sources`` (None: every source up to d), ``scale``
    (what the scores are multiplied by), ``k``, ``cards`` (hover cards of the features shown), the dictionaries'
    `spec`s under ``"query"`` and ``"key"`` (QK), ``"source"`` and ``"output"`` (OV; ``"output"`` None with
    ``read`` "unembed"), ``"heads"`` (a dictionary of every head's z).
    `run` (one sequence, positions ``0..n-1`` up to d or the whole prompt): ``x`` ``[n, d_model]`` the head's
    input residual, ``inputs`` ``{role: [seq, d_in]}`` what each dictionary reads, ``sigma`` ``[n]`` the input norm's
    scale (None: no norm), ``cos``/``sin`` ``[n, rotary_dim]`` (None: no rotation) and ``pairs``, ``q`` ``[d_head]``
    the model's query at d after rotation, ``k`` ``[n, d_head]`` its keys, ``v`` ``[n, d_head]`` its values, ``z``
    ``[n_heads, d_head]`` (OV, heads: every head's output before W_O at d), ``final_scale`` (OV, unembed).
    `weights`: the head's folded ``W_Q``, ``b_Q``, ``W_K``, ``b_K``, ``W_V``, ``b_V``, ``W_O`` (folded) and ``W_O_raw``
    (as the model writes), ``W_U`` (folded; unembed and cards).
    Returns the split (`qk_split`, `ov_split`, `head_split`) with ``score`` (the model's own: QK its scores, OV the
    read-out of its output) and ``gap`` (`TOLERANCE`'s measure of how far the terms are from it).
    """
    kind, d, k = request["kind"], int(request["destination"]), int(request["k"])
    with torch.no_grad():
        if kind == "heads":
            spec = request["heads"]
            z = run["z"].float()
            split = head_split(spec, z[None], z.shape[0])[0]
            acts = encode(spec, z.reshape(1, -1))[0]
            pre = split.sum(0) + spec["b_enc"].float().to(split.device)
            return {"split": split.cpu(), "acts": acts.cpu(), "pre": pre.cpu(), "gap": 0.0}
        x = run["x"]
        n = x.shape[0]
        sigma = run["sigma"] if run.get("sigma") is not None else torch.ones(n, device=x.device)
        cos, sin, pairs = run.get("cos"), run.get("sin"), run.get("pairs", "half")
        if kind == "qk":
            sources = _rows(request, d + 1)
            at = lambda t, rows: None if t is None else t[rows]  # noqa: E731
            query = side_parts(request["query"], run["inputs"]["query"][[d]], x[[d]], sigma[[d]], weights["W_Q"], weights["b_Q"],
                               at(cos, [d]), at(sin, [d]), pairs)
            key = side_parts(request["key"], run["inputs"]["key"][sources], x[sources], sigma[sources], weights["W_K"],
                             weights["b_K"], at(cos, sources), at(sin, sources), pairs)
            result = qk_split(query, key, len(sources), float(request["scale"]), k)
            score = (run["k"][sources].double() @ run["q"].double()) * float(request["scale"])
            result["score"] = score.cpu()
            result["gap"] = _gap(result["terms"].sum(1), result["score"])
            if request.get("cards"):
                W_U = weights.get("W_U")
                result["cards"] = {
                    side: feature_cards(request[side], run["inputs"][side], _shown(result, side, k), W_U, 5)
                    for side in ("query", "key")
                }
            return result
        # OV: the pattern's row from the model's queries and keys, checked against its own output
        scores = (run["k"][: d + 1].double() @ run["q"].double()) * float(request["scale"])
        pattern = torch.softmax(scores, 0)
        rows = list(range(d + 1))
        source = side_parts(
            request["source"], run["inputs"]["source"][rows], x[rows], sigma[rows], weights["W_V"], weights["b_V"]
        )
        if request.get("read") == "unembed":
            W_O = weights["W_O"].double()
            read = (W_O @ weights["W_U"].to(W_O.device).double())
            if run.get("final_scale") is not None:
                read = read / float(run["final_scale"])
        elif request.get("read") == "z":
            head, d_head = int(request["head"]), int(weights["W_V"].shape[-1])
            read = request["output"]["W_enc"][head * d_head : (head + 1) * d_head].double()
        else:
            read = weights["W_O_raw"].double() @ request["output"]["W_enc"].to(weights["W_O_raw"].device).double()
        result = ov_split(source, pattern, read, k)
        z = run["z"][int(request["head"])].double().cpu()
        result["z_gap"] = _gap(result["written"], z)
        value = (run["v"][: d + 1].double() * pattern[:, None]).sum(0).cpu()
        result["pattern_gap"] = _gap(value, z)
        result["pattern"] = pattern.cpu()
        result["score"] = (z.to(read.device) @ read[:, result["outputs"].to(read.device)]).cpu()
        result["gap"] = max(result["z_gap"], result["pattern_gap"], _gap(result["terms"].sum(1), result["score"]))
        if request.get("cards"):
            result["cards"] = {"source": feature_cards(request["source"], run["inputs"]["source"], _ov_shown(result, k),
                                                       weights.get("W_U"), 5)}
        return result


def _shown(result, side, k):
    """The features of one side a widget shows: those of the top pairs and the `k` largest marginals (ids)."""
    ids = result[f"{side}_ids"]
    marginals = result[f"{side}_marginals"]
    marginals = marginals.abs().amax(0) if marginals.ndim == 2 else marginals.abs()
    picked = [ids[torch.argsort(marginals, descending=True, stable=True)[:k]]]
    pairs = result[f"pair_{side}"][result["top"]]
    picked.append(ids[pairs])
    return torch.unique(torch.cat(picked)) if ids.numel() else ids


def _ov_shown(result, k):
    picked = [result["ids"][torch.argsort(result["norm"], descending=True, stable=True)[:k]], result["pair_feature"]]
    return torch.unique(torch.cat(picked)) if result["ids"].numel() else result["ids"]


# ----- inside a trace, next to a remote model's weights -------------------------------------------------------------
#: The order in which a block computes what a trace reads of it (nnsight hands activations over in that order).
_STAGES = {"resid_pre": 0, "attention": 1, "z": 2, "attn_out": 3, "resid_post": 4}


def _value(value):
    """A module's activation of the one sequence ``[seq, ...]``: its output may be a tuple (hidden state first)."""
    value = value[0] if isinstance(value, (tuple, list)) else value
    return value[0].detach().float()


def split_biases(spec, raw, d_model):
    """``(b_Q, b_K, b_V)`` ``[heads, d_head]`` (K/V heads repeated) of one layer's raw projection biases `raw` (a dict of
    tensors or None, named as `circuitwidgets.raw_weights.split_heads` names the weights); zeros where there are none."""
    layout, n, d_head = spec["layout"], spec["n_heads"], spec["d_head"]
    n_kv = spec.get("n_kv_heads") or n
    if layout == "conv1d" and raw.get("qkv") is not None:
        qkv = raw["qkv"].detach().float()
        width = n * d_head
        parts = [qkv[:width].reshape(n, d_head), qkv[width : 2 * width].reshape(n, d_head), qkv[2 * width :].reshape(n, d_head)]
    elif layout == "neox" and raw.get("qkv") is not None:
        qkv = raw["qkv"].detach().float().reshape(n, 3, d_head)
        parts = [qkv[:, 0], qkv[:, 1], qkv[:, 2]]
    else:
        parts = []
        for name, heads in (("q", n), ("k", n_kv), ("v", n_kv)):
            bias = raw.get(name)
            part = torch.zeros(heads, d_head) if bias is None else bias.detach().float().reshape(heads, d_head)
            parts.append(part.repeat_interleave(n // heads, dim=0) if heads != n else part)
    return tuple(parts)


def trace_weights(spec, layer, head, parts=None, want_unembed=False):
    """The head's weights (`answer`'s `weights`) from a layer's raw envoys `layer` (``proj``, ``ln1``), folded as
    `circuitwidgets.backends.weights.Weights` folds them, with the folded unembedding of `parts` when asked."""
    from .raw_weights import TraceSource, fold_layer, split_heads

    raw = {name: envoy.weight for name, envoy in layer["proj"].items()}
    W_Q, W_K, W_V, W_O = split_heads(spec, raw)
    norm = layer.get("ln1")
    ln_weight = None if norm is None else getattr(norm, "weight", None)
    ln_bias = None if norm is None else getattr(norm, "bias", None)
    folded = fold_layer(spec, W_Q, W_K, W_V, W_O, ln_weight)
    biases = split_biases(spec, {name: getattr(envoy, "bias", None) for name, envoy in layer["proj"].items()}, W_Q.shape[1])
    found = {"W_O_raw": W_O[head], "W_O": folded[3][head]}
    for name, W, unfolded, bias in zip(("Q", "K", "V"), folded[:3], (W_Q, W_K, W_V), biases, strict=True):
        b = bias[head].to(W.device)
        if ln_bias is not None:
            b = b + ln_bias.detach().float().to(W.device) @ unfolded[head]
        found[f"W_{name}"], found[f"b_{name}"] = W[head], b
    if want_unembed:
        found["W_U"] = TraceSource(spec, parts).W_U
    return found


def _scale_of(spec, x, eps):
    """The norm's scale at each row of `x` ``[n, d_model]`` (LayerNorm or RMSNorm, `spec["norm"]`), None without one."""
    kind = (spec.get("norm") or "").upper()
    if kind.startswith("LN"):
        return (x.var(-1, unbiased=False) + eps).sqrt()
    if kind.startswith("RMS"):
        return (x.pow(2).mean(-1) + eps).sqrt()
    return None


def in_trace(spec, parts, request):
    """`answer` to `request` from inside the trace of the prompt, reading `parts` (envoys) in the order the model runs.

    `spec`: `circuitwidgets.backends.remote_weights.architecture`'s, with ``eps`` (the input norms') and ``final_eps``.
    `parts`: ``layers`` (each ``{"block", "attention", "proj", "ln1"}``), ``embed``, ``pos``, ``final``, ``unembed``.
    Reads block inputs (``resid_pre``), block outputs (``resid_post``), the output projection's input (``z``) and
    output (``attn_out``), the attention call's inputs (queries and keys after rotation, scaling) and the rotary
    tables the attention module was handed; the final norm's input for logits.
    """
    from .in_trace import call_inputs

    kind, d = request["kind"], int(request["destination"])
    sites = dict(request["sites"])
    reads = {(int(layer), _STAGES[word]) for word, layer in sites.values()}
    block = int(request["layer"])
    if kind != "heads":
        reads |= {(block, 0), (block, 1), (block, 2)}
    got = {}
    for layer, stage in sorted(reads):
        part = parts["layers"][layer]
        if stage == 0:
            got[(layer, 0)] = _value(part["block"].input)
        elif stage == 1:
            args, kwargs = part["attention"].inputs
            tables = kwargs.get("position_embeddings")
            if tables is None and len(args) > 1 and isinstance(args[1], (tuple, list)):
                tables = args[1]
            query, key, value, _, _ = call_inputs(part["attention"])
            got[(layer, 1)] = (tables, query, key, value)
        elif stage == 2:
            got[(layer, 2)] = _value(part["proj"]["o"].input)
        elif stage == 3:
            got[(layer, 3)] = _value(part["proj"]["o"].output)
        else:
            got[(layer, 4)] = _value(part["block"].output)
    inputs = {role: got[(int(layer), _STAGES[word])] for role, (word, layer) in sites.items()}
    n_heads = spec["n_heads"]
    if kind == "heads":
        z = inputs["heads"][d].reshape(n_heads, -1)
        return answer(request, {"z": z}, {})
    head = int(request["head"])
    x = got[(block, 0)][: d + 1]
    tables, query, key, value = got[(block, 1)]
    group = query.shape[1] // key.shape[1]
    run = {
        "x": x, "inputs": {role: value.reshape(value.shape[0], -1) for role, value in inputs.items()},
        "sigma": _scale_of(spec, x, spec.get("eps", 1e-5)), "pairs": "half",
        "q": query[0, head, d].detach().float(), "k": key[0, head // group, : d + 1].detach().float(),
        "z": got[(block, 2)][d].reshape(n_heads, -1),
    }
    if tables is not None:
        run["cos"], run["sin"] = tables[0][0, : d + 1].detach().float(), tables[1][0, : d + 1].detach().float()
    if kind == "ov":  # the values, for the check of the pattern rebuilt from the queries and keys
        run["v"] = value[0, head // group, : d + 1].detach().float()
    unembed = request.get("read") == "unembed"
    weights = trace_weights(spec, parts["layers"][block], head, parts, want_unembed=unembed or bool(request.get("cards")))
    if unembed:
        final = parts.get("final")
        resid = _value(final.input) if final is not None else None
        if resid is not None:
            scale = _scale_of(spec, resid[d : d + 1], spec.get("final_eps", 1e-5))
            run["final_scale"] = None if scale is None else float(scale[0])
    return answer(request, run, weights)
