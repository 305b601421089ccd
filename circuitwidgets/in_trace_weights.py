"""Weight views computed where the weights are: inside an nnsight trace, locally or on NDIF's servers.

Like `circuitwidgets.in_trace`, this module imports nothing but ``torch`` (a test
checks it) and is shipped by value with each request (``nnsight.register``). It reads a Hugging
Face model's raw attention, norm, embedding and unembedding parameters from its envoys, folds the
norms as `circuitwidgets.backends.weights.Weights` does (``diag(w_ln1)`` into ``W_Q, W_K, W_V``,
the final norm's weight into ``W_U``; with LayerNorm, every weight that writes or reads the residual
stream centred along ``d_model``), and reduces every view to what the local analysis returns: blocks
on token subsets, ``d_head``-sized eigenvalues, scores per head or head pair, top lists. No
vocabulary-sized square matrix is formed; the vocabulary-sized weights are read in chunks of rows.

Shapes follow TransformerLens (``x @ W``): per layer ``W_Q, W_K, W_V`` ``[heads, d_model, d_head]``
(grouped K/V heads repeated), ``W_O`` ``[heads, d_head, d_model]``, all float32.

Example:
    >>> import torch
    >>> q, o = torch.randn(4, 8), torch.randn(8, 4)     # nn.Linear q_proj and o_proj weights [out, in], d_model 8
    >>> spec = {"layout": "linear", "n_heads": 2, "n_kv_heads": 1, "d_head": 2, "norm": "RMS"}
    >>> W_Q, W_K, W_V, W_O = split_heads(spec, {"q": q, "k": q[:2], "v": q[:2], "o": o})
    >>> tuple(W_Q.shape), tuple(W_K.shape), tuple(W_O.shape)
    ((2, 8, 2), (2, 8, 2), (2, 2, 8))
    >>> bool(torch.equal(W_K[0], W_K[1]))               # one K head serves both query heads
    True
"""

import torch

#: Rows of a vocabulary-sized weight converted to float32 at once (4 MB a row block at d_model 4096: 2**20 cells).
CHUNK_CELLS = 1 << 22


def _f32(tensor):
    return tensor.detach().to(torch.float32)


def _heads_in(weight, n, d_head):
    """``[d_model, n * d_head]`` (columns grouped by head) -> ``[n, d_model, d_head]``."""
    return weight.reshape(weight.shape[0], n, d_head).permute(1, 0, 2)


def split_heads(spec, raw):
    """``(W_Q, W_K, W_V, W_O)`` float32 of one layer from its raw projection weights `raw` (a dict), unfolded.

    ``spec["layout"]``: ``"linear"`` (Llama, Qwen2, Mistral: ``nn.Linear`` weights ``q, k, v, o`` stored
    ``[out, in]``), ``"conv1d"`` (GPT-2: ``Conv1D`` ``qkv`` ``[d_model, 3 d_model]`` and ``o``, stored
    ``[in, out]``) or ``"neox"`` (GPT-NeoX: one ``nn.Linear`` ``qkv`` whose outputs are ``[heads, 3, d_head]``).
    K/V heads are repeated to one per query head (``spec["n_kv_heads"]``).
    """
    layout, n, d_head = spec["layout"], spec["n_heads"], spec["d_head"]
    n_kv = spec.get("n_kv_heads") or n
    if layout == "linear":
        W_Q = _heads_in(_f32(raw["q"]).T, n, d_head)
        W_K = _heads_in(_f32(raw["k"]).T, n_kv, d_head)
        W_V = _heads_in(_f32(raw["v"]).T, n_kv, d_head)
    elif layout == "conv1d":
        qkv = _f32(raw["qkv"])
        width = n * d_head
        W_Q = _heads_in(qkv[:, :width], n, d_head)
        W_K = _heads_in(qkv[:, width : 2 * width], n, d_head)
        W_V = _heads_in(qkv[:, 2 * width :], n, d_head)
    elif layout == "neox":
        qkv = _f32(raw["qkv"]).reshape(n, 3, d_head, -1)  # [heads, (q, k, v), d_head, d_model]
        W_Q, W_K, W_V = (qkv[:, i].transpose(1, 2) for i in range(3))
    else:
        raise ValueError(f"unknown weight layout {layout!r}")
    W_O = output_heads(spec, raw["o"])
    if n_kv != n:
        W_K = W_K.repeat_interleave(n // n_kv, dim=0)
        W_V = W_V.repeat_interleave(n // n_kv, dim=0)
    return W_Q, W_K, W_V, W_O


def output_heads(spec, weight):
    """``W_O`` ``[heads, d_head, d_model]`` float32 from the output projection's raw weight (``[out, in]`` for
    ``nn.Linear``, ``[in, out]`` for GPT-2's ``Conv1D``): head h writes ``z_h @ W_O[h]``."""
    weight = _f32(weight) if spec["layout"] == "conv1d" else _f32(weight).T
    return weight.reshape(spec["n_heads"], spec["d_head"], -1)


def fold_layer(spec, W_Q, W_K, W_V, W_O, ln_weight):
    """The layer's weights with its input norm folded in, as `Weights` folds them (biases are not used by any view).

    ``diag(w) W`` for ``W_Q, W_K, W_V``; with LayerNorm (``spec["norm"] == "LN"``) their rows are
    then centred (minus their mean over ``d_model``) and ``W_O`` is centred along ``d_model``.
    """
    centre = spec.get("norm") == "LN"
    folded = []
    for weight in (W_Q, W_K, W_V):
        if ln_weight is not None:
            weight = weight * _f32(ln_weight)[None, :, None]
        if centre:
            weight = weight - weight.mean(-2, keepdim=True)
        folded.append(weight)
    if centre:
        W_O = W_O - W_O.mean(-1, keepdim=True)
    return folded[0], folded[1], folded[2], W_O


def embed_rows(spec, W_E, ids=None):
    """Rows `ids` (all when None) of the folded ``W_E`` ``[n, d_model]`` float32 (centred with LayerNorm)."""
    rows = _f32(W_E if ids is None else W_E[_ids(ids, W_E.device)])
    return rows - rows.mean(-1, keepdim=True) if spec.get("norm") == "LN" else rows


def unembed_columns(spec, lm_head, final_weight, ids=None):
    """Columns `ids` of the folded ``W_U`` ``[d_model, n]`` float32, from the unembedding's ``[d_vocab, d_model]``
    weight: scaled by the final norm's weight, centred along ``d_model`` with LayerNorm."""
    columns = _f32(lm_head if ids is None else lm_head[_ids(ids, lm_head.device)]).T
    if final_weight is not None:
        columns = columns * _f32(final_weight)[:, None]
    return columns - columns.mean(0, keepdim=True) if spec.get("norm") == "LN" else columns


def _ids(ids, device):
    return ids.to(device) if isinstance(ids, torch.Tensor) else torch.tensor(ids, dtype=torch.long, device=device)


def _chunks(n, width):
    step = max(1, CHUNK_CELLS // max(1, width))
    return [(start, min(n, start + step)) for start in range(0, n, step)]


def embed_times(spec, W_E, right):
    """``W_E @ right`` ``[d_vocab, r]`` for the folded ``W_E``, read a block of rows at a time."""
    n, width = W_E.shape
    out = torch.empty(n, right.shape[-1], device=right.device)
    for start, stop in _chunks(n, width):
        out[start:stop] = embed_rows(spec, W_E[start:stop]).to(right.device) @ right
    return out


def times_unembed(spec, left, lm_head, final_weight):
    """``left @ W_U`` ``[r, d_vocab]`` for the folded ``W_U``, read a block of vocabulary rows at a time."""
    n, width = lm_head.shape
    out = torch.empty(left.shape[0], n, device=left.device)
    for start, stop in _chunks(n, width):
        out[:, start:stop] = left @ unembed_columns(spec, lm_head[start:stop], final_weight).to(left.device)
    return out


def gram_products(spec, W_E, lm_head, final_weight, unembed=True, embed=False):
    """``(W_U W_E, W_E^T W_E)`` ``[d_model, d_model]`` of the folded weights (None where not asked), one pass over
    the vocabulary: the products behind every token-basis eigenvalue."""
    d_model = W_E.shape[1]
    ue = torch.zeros(d_model, d_model, device=W_E.device) if unembed else None
    ee = torch.zeros(d_model, d_model, device=W_E.device) if embed else None
    for start, stop in _chunks(W_E.shape[0], d_model):
        e = embed_rows(spec, W_E[start:stop])
        if ue is not None:
            ue += unembed_columns(spec, lm_head[start:stop], final_weight).to(e.device) @ e
        if ee is not None:
            ee += e.T @ e
    return ue, ee


def sorted_eigenvalues(small):
    """Eigenvalues complex128 ``[..., r]`` of the ``[..., r, r]`` matrices `small` (float64, on the CPU), largest
    magnitude first, as `Factored.eigenvalues` orders them."""
    values = torch.linalg.eigvals(small.to("cpu", torch.float64))
    return values.gather(-1, values.abs().argsort(dim=-1, descending=True))


def copying_of(eigenvalues):
    """``sum(lambda) / sum(|lambda|)`` over the last dimension, NaN for an all-zero spectrum."""
    total = eigenvalues.sum(-1).real
    magnitude = eigenvalues.abs().sum(-1)
    return torch.where(magnitude > 0, total / magnitude, torch.full_like(total, float("nan")))


# ----- composition scores ----------------------------------------------------------------------


def r_factor(tensor):
    """An upper-triangular ``R`` with ``R^T R = Y^T Y`` per ``[d_model, d_head]`` matrix (Cholesky, QR where it fails)."""
    lower, info = torch.linalg.cholesky_ex(tensor.mT @ tensor)
    r = lower.mT
    failed = info != 0
    if bool(failed.any()):
        r = r.clone()
        r[failed] = torch.linalg.qr(tensor[failed], mode="r").R
    return r


def unit(tensor):
    """Each trailing matrix divided by its Frobenius norm (zeros stay zero), and the norms."""
    norms = tensor.flatten(-2).norm(dim=-1)
    safe = torch.where(norms > 0, norms, torch.ones_like(norms))
    return tensor / safe[..., None, None], norms


def composition_factors(kind, W_Q, W_K, W_V, W_O):
    """The reader factor ``X R_Y^T`` ``[heads, d_model, d_head]`` of ``W_B`` for `kind` ("Q", "K", "V")."""
    if kind == "Q":
        return W_Q @ r_factor(W_K).mT
    if kind == "K":
        return W_K @ r_factor(W_Q).mT
    return W_V @ r_factor(W_O.mT).mT


def composition_from(writers, readers):
    """``[L, H, L, H]`` scores ``||W_A W_B||_F / (||W_A|| ||W_B||)`` from stacked writer ``R_P S`` ``[L, H, d_head,
    d_model]`` and reader ``[L, H, d_model, d_head]`` factors; NaN unless layer1 < layer2 and both are non-zero."""
    writers, writer_norms = unit(writers)
    readers, reader_norms = unit(readers)
    n_layers, n_heads, d_head = writers.shape[0], writers.shape[1], readers.shape[-1]
    out = torch.full((n_layers, n_heads, n_layers, n_heads), float("nan"), device=writers.device)
    columns = readers.permute(2, 0, 1, 3).reshape(readers.shape[2], -1)
    for layer in range(n_layers - 1):
        later = columns[:, (layer + 1) * n_heads * d_head :]
        block = writers[layer].reshape(n_heads * d_head, -1) @ later
        norms = block.reshape(n_heads, d_head, -1, d_head).square().sum(dim=(1, 3)).sqrt()
        out[layer, :, layer + 1 :] = norms.reshape(n_heads, -1, n_heads)
    degenerate = (writer_norms == 0)[:, :, None, None] | (reader_norms == 0)[None, None]
    return out.masked_fill(degenerate, float("nan"))


# ----- top lists -------------------------------------------------------------------------------


def top_of(values, k):
    """``(values, ids)`` of the `k` largest, largest first, ties in id order (as the local skip-trigram lists)."""
    top = torch.topk(values, k)
    by_id = torch.sort(top.indices).indices
    ids, picked = top.indices[by_id], top.values[by_id]
    order = torch.sort(picked, descending=True, stable=True).indices
    return picked[order].cpu(), ids[order].cpu()


def row_max(left, right, rows):
    """``(max, argmax)`` of every row of ``left @ right`` (ties: the first column), `rows` rows at a time: the
    whole product is never held."""
    n = left.shape[0]
    values = torch.empty(n, device=left.device)
    indices = torch.empty(n, dtype=torch.long, device=left.device)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        best = (left[start:stop] @ right).max(dim=-1)
        values[start:stop], indices[start:stop] = best.values, best.indices
    return values.cpu(), indices.cpu()


def diagonal_ranks(left, right, rows, cap):
    """Per row ``s`` of ``left @ right``: how many other entries are not below entry ``s`` (capped at `cap`)."""
    n = left.shape[0]
    ranks = torch.empty(n, dtype=torch.long, device=left.device)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = left[start:stop] @ right
        own = block[torch.arange(stop - start, device=block.device), torch.arange(start, stop, device=block.device)]
        ranks[start:stop] = ((block >= own[:, None]).sum(-1) - 1).clamp_max(cap)
    return ranks.cpu()


# ----- the views -------------------------------------------------------------------------------


class _Model:
    """The parts of one model a request reads (envoys inside the trace), folded once per layer on first use."""

    def __init__(self, spec, parts):
        self.spec, self.parts = spec, parts
        self._layers = {}
        self._grams = {}

    def layer(self, index):
        if index not in self._layers:
            part = self.parts["layers"][index]
            raw = {name: envoy.weight for name, envoy in part["proj"].items()}
            norm = part.get("ln1")
            ln_weight = None if norm is None else getattr(norm, "weight", None)
            W_Q, W_K, W_V, W_O = split_heads(self.spec, raw)
            folded = fold_layer(self.spec, W_Q, W_K, W_V, W_O, ln_weight)
            # one device for every layer (a model split over GPUs): products across layers need it
            self._layers[index] = tuple(w.to(self.embed().device) for w in folded)
        return self._layers[index]

    def embed(self):
        return self.parts["embed"].weight

    def lm_head(self):
        return self.parts["unembed"].weight

    def final_weight(self):
        norm = self.parts.get("final")
        return None if norm is None else getattr(norm, "weight", None)

    def grams(self, unembed=True, embed=False):
        key = (unembed, embed)
        if key not in self._grams:
            self._grams[key] = gram_products(self.spec, self.embed(), self.lm_head(), self.final_weight(), unembed, embed)
        return self._grams[key]

    def rows(self, ids):
        return embed_rows(self.spec, self.embed(), ids)

    def columns(self, ids):
        return unembed_columns(self.spec, self.lm_head(), self.final_weight(), ids)


def _heads(tensor, head):
    return tensor if head is None else tensor[head]


def positional_qk(model, request):
    """``{"tril": [heads, n (n + 1) / 2]}`` (one head: ``[n (n + 1) / 2]``): the lower triangle, row by row, of the
    position-only attention ``softmax(mask(W_pos W_Q W_K^T W_pos^T / scale))`` of the first ``n`` positions (with
    ``softmax`` False the scaled scores), ``W_pos`` folded as ``W_E`` is (centred with LayerNorm)."""
    n, head = request["positions"], request.get("head")
    W_Q, W_K, _, _ = model.layer(request["layer"])
    W_pos = embed_rows(model.spec, model.parts["pos"].weight[:n]).to(W_Q.device)
    W_Q, W_K = _heads(W_Q, head), _heads(W_K, head)
    scores = (W_pos @ W_Q) @ (W_pos @ W_K).mT / request["scale"]
    rows, cols = torch.tril_indices(n, n, device=scores.device)
    if request.get("softmax", True):
        future = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return {"tril": scores[..., rows, cols].cpu()}


def ov_block(model, request):
    """``{"block": (W_E W_V W_O W_U)[sources][:, outputs]}`` ``[heads, ns, no]`` (``[ns, no]`` for one head)."""
    _, _, W_V, W_O = model.layer(request["layer"])
    head = request.get("head")
    W_V, W_O = _heads(W_V, head), _heads(W_O, head)
    left = model.rows(request["sources"]).to(W_V.device)
    right = model.columns(request["outputs"]).to(W_O.device)
    return {"block": ((left @ W_V) @ (W_O @ right)).cpu()}


def qk_block(model, request):
    """``{"block": (W_E W_Q W_K^T W_E^T / scale)[queries][:, keys]}`` ``[heads, nq, nk]`` (``scale`` 1: unscaled)."""
    W_Q, W_K, _, _ = model.layer(request["layer"])
    head = request.get("head")
    W_Q, W_K = _heads(W_Q, head), _heads(W_K, head)
    queries = model.rows(request["queries"]).to(W_Q.device)
    keys = model.rows(request["keys"]).to(W_K.device)
    return {"block": ((queries @ W_Q) / request.get("scale", 1.0) @ (keys @ W_K).mT).cpu()}


def ov_eigenvalues(model, request):
    """``{"eigenvalues": complex128 [len(layers), heads, d_head], "copying": float32 [len(layers), heads]}``: the
    token-basis eigenvalues of ``W_O (W_U W_E) W_V`` per head, largest magnitude first (left out when
    ``request["eigenvalues"]`` is False), and the copying scores."""
    unembed_embed, _ = model.grams(unembed=True)
    smalls = []
    for layer in request["layers"]:
        _, _, W_V, W_O = model.layer(layer)
        smalls.append((W_O @ unembed_embed.to(W_O.device)) @ W_V)
    values = sorted_eigenvalues(torch.stack(smalls))
    out = {"copying": copying_of(values).float()}
    if request.get("eigenvalues", True):
        out["eigenvalues"] = values
    return out


def composition(model, request):
    """``{kind: [L, H, L, H] float32}`` raw composition scores for each kind in ``request["kinds"]``."""
    layers = [model.layer(i) for i in range(len(model.parts["layers"]))]
    writers = torch.stack([r_factor(W_V) @ W_O for _, _, W_V, W_O in layers])
    out = {}
    for kind in request["kinds"]:
        readers = torch.stack([composition_factors(kind, *weights) for weights in layers])
        out[kind] = composition_from(writers, readers).cpu()
    return out


def composition_term(model, request):
    """The term pair (``first`` -> ``second``) builds for ``kind``: ``{"block": [rows, columns], "eigenvalues": [d_head]
    complex128, "positivity": 0-d}`` (Q/K divided by ``request["scale"]``, 1 for the unscaled term)."""
    kind, (l1, h1), (l2, h2) = request["kind"], request["first"], request["second"]
    _, _, W_V1, W_O1 = (w[h1] for w in model.layer(l1))
    W_Q2, W_K2, W_V2, W_O2 = (w[h2] for w in model.layer(l2))
    scale = request.get("scale", 1.0)
    rows, cols = model.rows(request["rows"]), request["columns"]
    if kind == "V":
        carried = (W_O1 @ W_V2) @ W_O2  # [d_head, d_model]
        block = (rows @ W_V1) @ (carried @ model.columns(cols))
        unembed_embed, _ = model.grams(unembed=True)
        small = carried @ unembed_embed @ W_V1
    else:
        _, embed_embed = model.grams(unembed=False, embed=True)
        if kind == "K":  # (W_E W_Q2) (W_E W_V1 W_O1 W_K2)^T
            read, moved = W_Q2, W_V1 @ (W_O1 @ W_K2)
            block = (rows @ read) @ (model.rows(cols) @ moved).mT
            small = moved.mT @ embed_embed @ read
        else:  # (W_E W_V1 W_O1 W_Q2) (W_E W_K2)^T
            moved, read = W_V1 @ (W_O1 @ W_Q2), W_K2
            block = (rows @ moved) @ (model.rows(cols) @ read).mT
            small = read.mT @ embed_embed @ moved
        block, small = block / scale, small / scale
    values = sorted_eigenvalues(small)
    return {"block": block.cpu(), "eigenvalues": values, "positivity": copying_of(values)}


def skip_trigrams(model, request):
    """Top `k` destinations (column ``s`` of ``W_E W_QK W_E^T / scale``) and outs (row ``s`` of ``W_E W_OV W_U``)."""
    W_Q, W_K, W_V, W_O = (w[request["head"]] for w in model.layer(request["layer"]))
    spec, k = model.spec, request["k"]
    embed = model.rows([request["source"]])[0]
    column = embed_times(spec, model.embed(), (W_Q @ (W_K.T @ embed))[:, None])[:, 0] / request["scale"]
    row = times_unembed(spec, ((embed @ W_V) @ W_O)[None], model.lm_head(), model.final_weight())[0]
    dest_values, dest_ids = top_of(column, k)
    out_values, out_ids = top_of(row, k)
    return {"destination_values": dest_values, "destinations": dest_ids, "out_values": out_values, "outs": out_ids}


def skip_trigram_sources(model, request):
    """The `k` strongest sources: ``max(0, max_d QK[d, s]) * max(0, max_o OV[s, o])``, a chunk of rows at a time."""
    W_Q, W_K, W_V, W_O = (w[request["head"]] for w in model.layer(request["layer"]))
    spec, rows = model.spec, request.get("rows", 256)
    embed = model.embed()
    # column s of QK is row s of (W_E W_K) (W_E W_Q / scale)^T
    queries = embed_times(spec, embed, W_Q) / request["scale"]  # [d_vocab, d_head]
    top_qk, destinations = row_max(embed_times(spec, embed, W_K), queries.mT, rows)
    right = times_unembed(spec, W_O, model.lm_head(), model.final_weight())  # [d_head, d_vocab]
    top_ov, outs = row_max(embed_times(spec, embed, W_V), right, rows)
    strengths = top_qk.clamp_min(0) * top_ov.clamp_min(0)
    order = torch.sort(strengths, descending=True, stable=True).indices[: request["k"]]
    return {
        "sources": order, "strengths": strengths[order], "top_qk": top_qk[order], "destinations": destinations[order],
        "top_ov": top_ov[order], "outs": outs[order],
    }


def ov_top_k(model, request):
    """``{"hits": long [len(ks)]}``: for each ``k`` in ``request["ks"]``, how many source tokens have fewer than ``k``
    other logits of their full-OV row (of the sum over ``request["heads"]``) not below their own."""
    spec, embed = model.spec, model.embed()
    lefts, rights = [], []
    for layer, head in request["heads"]:
        _, _, W_V, W_O = model.layer(layer)
        lefts.append(embed_times(spec, embed, W_V[head]))
        rights.append(times_unembed(spec, W_O[head], model.lm_head(), model.final_weight()))
    ks = request["ks"]
    ranks = diagonal_ranks(torch.cat(lefts, dim=1), torch.cat(rights, dim=0), request.get("rows", 256), max(ks))
    return {"hits": torch.stack([(ranks < k).sum() for k in ks])}


VIEWS = {
    "ov_block": ov_block,
    "qk_block": qk_block,
    "ov_eigenvalues": ov_eigenvalues,
    "composition": composition,
    "composition_term": composition_term,
    "skip_trigrams": skip_trigrams,
    "skip_trigram_sources": skip_trigram_sources,
    "ov_top_k": ov_top_k,
    "positional_qk": positional_qk,
}


def weight_views(spec, parts, requests):
    """The answers (a list of dicts of tensors, on the CPU) to `requests`, each ``{"view": name in VIEWS, ...}``.

    `spec`: the layout (`split_heads`), ``norm`` ("LN", "RMS" or None), head counts; `parts`: envoys of
    the model, ``{"layers": [{"proj": {name: envoy}, "ln1": envoy or None}], "embed", "unembed",
    "final"}``. Each layer's weights are read and folded once however many requests read them.
    """
    model = _Model(spec, parts)
    with torch.no_grad():
        return [VIEWS[request["view"]](model, request) for request in requests]

