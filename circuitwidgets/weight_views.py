"""Weight views: one implementation of every weight-based computation, run wherever the weights are.

A *weight source* holds a model's norm-folded weights in TransformerLens shapes (the same for every
backend): `circuitwidgets.backends.weights.Weights` for weights on this machine, and
`circuitwidgets.raw_weights.TraceSource` inside an nnsight trace next to a remote model's weights.
A backend answers a weight-view request by running `answer` on its source, here or in the trace
(this module, `circuitwidgets.numerics`, `circuitwidgets.row_maxima` and `circuitwidgets.raw_weights`
import only torch and the standard library, and are shipped by value): the analysis never knows
which. A source gives:

- ``n_layers`` (attention layers stacked), ``parallel`` (whether products may use worker threads),
  ``holds_stacked`` (whether ``stacked`` costs nothing: the weights are held stacked);
- ``layer(i)``: ``(W_Q, W_K, W_V, W_O)`` of stacked layer ``i`` (every head), ``stacked(name)``: one of
  them for every layer; ``W_E``, ``W_U``, ``W_pos`` (or None); all folded, in the source's dtype;
- ``derived(key, form)``: ``form()``, kept as long as these weights (a product several requests share).

Requests are dicts, ``{"view": name in VIEWS, ...}``; answers are dicts of CPU tensors, small (blocks
on token subsets, ``d_head``-sized eigenvalues, per-head or per-pair scores, top lists). No
vocabulary-sized square matrix is ever formed. Layers are stacked indices (``source.layer``).

Scale-invariant scores (copying, composition, top-k) scale their factors by powers of two first
(`circuitwidgets.numerics.unit_scaled`): weights of 1e-30 or 1e30 give the scores of weights of 1.

Example:
    >>> import circuitwidgets as cw
    >>> source = cw.ModelView(cw.demo_model()).backend.weights()
    >>> answer(source, [{"view": "ov_block", "layer": 1, "sources": [2, 3], "outputs": [2, 3, 4]}])[0]["block"].shape
    torch.Size([4, 2, 3])
"""

from __future__ import annotations

import torch

from .numerics import times_pow2, unit_scaled, work_dtype
from .row_maxima import default_rows, diagonal_ranks, row_max

#: Entries of one block of a full-OV pass (top-k), and of a skip-trigram pass, on the CPU (2**25 and 2**23: 128 and
#: 32 MB of float32), computed in cache-sized tiles (`row_maxima`).
TOP_K_ENTRIES = 2**25
TRIGRAM_ENTRIES = 2**23
#: Entries of one chunk of the composition pair product (128 MB in float32).
PAIR_BLOCK_ENTRIES = 2**25
#: Writer factors up to this size (GPT-2 small: 28 MB) are kept with the weights for the other kinds.
KEEP_WRITER_BYTES = 2**26


def _work(tensor):
    return tensor.to(work_dtype(tensor.dtype))


def _heads(tensor, head):
    return tensor if head is None else tensor[head]


def _ids(ids, device):
    return torch.as_tensor(ids, dtype=torch.long).to(device)


# ----- eigenvalues -------------------------------------------------------------------------------


def sorted_eigenvalues(small):
    """Eigenvalues complex128 ``[..., r]`` of the ``[..., r, r]`` matrices `small` (float64, on the CPU), largest
    magnitude first (the order of `circuitwidgets.analysis.Factored.eigenvalues`)."""
    small = small.to("cpu", torch.complex128 if small.dtype.is_complex else torch.float64)
    values = torch.linalg.eigvals(small)
    return values.gather(-1, values.abs().argsort(dim=-1, descending=True))


def copying_of(eigenvalues):
    """``sum(lambda) / sum(|lambda|)`` over the last dimension, NaN for an all-zero spectrum.

    Example:
        >>> copying_of(torch.tensor([[2 + 0j, 1 + 1j, 1 - 1j], [0j, 0j, 0j]]))
        tensor([0.8284,    nan])
    """
    total = eigenvalues.sum(-1).real
    magnitude = eigenvalues.abs().sum(-1)
    return torch.where(magnitude > 0, total / magnitude, torch.full_like(total, float("nan")))


def unembed_embed_scaled(source):
    """``(M, e)`` with ``W_U W_E == M * 2**e`` (``[d_model, d_model]``), ``M`` free of under- and overflow, formed
    once per source (``derived``): the one pass over the vocabulary behind every head's token-basis eigenvalues.

    ``W_U`` and ``W_E`` whose largest magnitude lies within ``2**-16 .. 2**16`` are used as they are
    (``e == 0``); others are first scaled by a power of two (`unit_scaled`).
    """

    def form():
        dtype = work_dtype(source.W_E.dtype)
        W_U, e_U = unit_scaled(source.W_U.to(dtype), slack=16)
        W_E, e_E = unit_scaled(source.W_E.to(dtype), slack=16)
        return W_U @ W_E, int(e_U + e_E)

    return source.derived("unembed_embed_scaled", form)


def embed_embed(source):
    """``W_E^T W_E`` ``[d_model, d_model]`` (working dtype), formed once per source."""

    def form():
        W_E = source.W_E
        W_E = W_E.to(work_dtype(W_E.dtype))
        return W_E.mT @ W_E

    return source.derived("embed_embed", form)


def _layers_eigenvalues(source, layers):
    """Token-basis eigenvalues of ``W_O (W_U W_E) W_V`` for stacked `layers`, ``(values, exponent)``: the eigenvalues
    are ``values * 2**exponent``, `values` complex128 ``[len(layers), heads, d_head]`` on the CPU."""
    unembed_embed, exponent = unembed_embed_scaled(source)
    out, exponents = [], []
    for layer in layers:
        _, _, W_V, W_O = source.layer(layer)
        W_V, e_V = unit_scaled(W_V.to(unembed_embed.dtype), dim=(-2, -1), slack=16)
        W_O, e_O = unit_scaled(W_O.to(unembed_embed.dtype), dim=(-2, -1), slack=16)
        # the d_head x d_head eigenproblems are CPU work: move the d_model-sized factors, not the other way
        out.append(sorted_eigenvalues((W_O @ unembed_embed).cpu() @ W_V.cpu()))
        exponents.append((e_V + e_O).flatten(-3) + exponent)
    return torch.stack(out), torch.stack(exponents)


def _head_eigenvalues(source, layer, head):
    """One head's token-basis eigenvalues from two thin passes over the vocabulary (no ``d_model x d_model`` product)."""
    _, _, W_V, W_O = (w[head] for w in source.layer(layer))
    dtype = work_dtype(W_V.dtype)
    W_V, e_V = unit_scaled(W_V.to(dtype), slack=16)
    W_O, e_O = unit_scaled(W_O.to(dtype), slack=16)
    W_E, e_E = unit_scaled(source.W_E.to(dtype), slack=16)  # copied only for tiny or huge embeddings
    W_U, e_U = unit_scaled(source.W_U.to(dtype), slack=16)
    values = sorted_eigenvalues(W_O @ (W_U @ (W_E @ W_V)))
    return times_pow2(values, e_V + e_O + e_E + e_U)


def ov_eigenvalues(source, request, report=None):
    """``{"eigenvalues": complex128 [len(layers), heads, d_head], "copying": float32 [len(layers), heads]}``: the
    token-basis eigenvalues of each head's full OV circuit ``W_E W_V W_O W_U`` (those of ``W_O (W_U W_E) W_V``),
    largest magnitude first, at their true scale (left out when ``request["eigenvalues"]`` is False), and the
    copying scores. ``request["head"]``: that head alone (``[len(layers), d_head]``, from thin passes)."""
    head = request.get("head")
    if head is not None:
        values = torch.stack([_head_eigenvalues(source, layer, head) for layer in request["layers"]])
        return {"eigenvalues": values, "copying": copying_of(values).float()}
    values, exponent = _layers_eigenvalues(source, request["layers"])
    out = {"copying": copying_of(values).float()}  # (scale-invariant: the scaled values do)
    if request.get("eigenvalues", True):
        out["eigenvalues"] = times_pow2(values, exponent[..., None])
    return out


# ----- blocks on token subsets -------------------------------------------------------------------


def ov_block(source, request, report=None):
    """``{"block": (W_E W_V W_O W_U)[sources][:, outputs]}`` float32 ``[heads, ns, no]`` (``[ns, no]`` for one head)."""
    _, _, W_V, W_O = source.layer(request["layer"])
    head = request.get("head")
    W_V, W_O = _work(_heads(W_V, head)), _work(_heads(W_O, head))
    rows = source.W_E[_ids(request["sources"], source.W_E.device)].to(W_V.dtype)
    columns = source.W_U[:, _ids(request["outputs"], source.W_U.device)].to(W_O.dtype)
    return {"block": ((rows @ W_V) @ (W_O @ columns)).float().cpu()}


def qk_block(source, request, report=None):
    """``{"block": (W_E W_Q W_K^T W_E^T / scale)[queries][:, keys]}`` float32 ``[heads, nq, nk]`` (``scale`` 1: unscaled)."""
    W_Q, W_K, _, _ = source.layer(request["layer"])
    head = request.get("head")
    W_Q, W_K = _work(_heads(W_Q, head)), _work(_heads(W_K, head))
    queries = source.W_E[_ids(request["queries"], source.W_E.device)].to(W_Q.dtype)
    keys = source.W_E[_ids(request["keys"], source.W_E.device)].to(W_K.dtype)
    return {"block": ((queries @ W_Q) / request.get("scale", 1.0) @ (keys @ W_K).mT).float().cpu()}


def positional_qk(source, request, report=None):
    """``{"tril": [heads, n (n + 1) / 2]}`` (one head: ``[n (n + 1) / 2]``) float32: the lower triangle, row by row,
    of the position-only attention ``softmax(mask(W_pos W_Q W_K^T W_pos^T / scale))`` of the first ``n`` positions
    (``softmax`` False: the scaled scores)."""
    n, head = request["positions"], request.get("head")
    W_Q, W_K, _, _ = source.layer(request["layer"])
    W_Q, W_K = _work(_heads(W_Q, head)), _work(_heads(W_K, head))
    W_pos = source.W_pos[:n].to(W_Q.dtype)
    scores = ((W_pos @ W_Q) @ (W_pos @ W_K).mT).float() / request["scale"]
    rows, cols = torch.tril_indices(n, n, device=scores.device)
    if request.get("softmax", True):
        future = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return {"tril": scores[..., rows, cols].cpu()}


# ----- top-k accuracy of the full OV circuit -----------------------------------------------------


def summed_ov_factors(source, heads):
    """``(left [d_vocab, r], right [r, d_vocab])`` with ``left @ right`` the sum over `heads` (stacked ``(layer,
    head)`` pairs) of ``W_E W_V W_O W_U``, up to one positive power-of-two factor: each weight is scaled by one
    power of two shared by all the heads (`unit_scaled`), so the heads keep their relative sizes."""
    W_V = torch.stack([source.layer(layer)[2][head] for layer, head in heads])
    W_O = torch.stack([source.layer(layer)[3][head] for layer, head in heads])
    dtype = work_dtype(W_V.dtype)
    W_V, _ = unit_scaled(W_V.to(dtype), slack=16)  # [pairs, d_model, d_head]
    W_O, _ = unit_scaled(W_O.to(dtype), slack=16)
    W_E, _ = unit_scaled(source.W_E.to(dtype), slack=16)  # copied only for tiny or huge embeddings
    W_U, _ = unit_scaled(source.W_U.to(dtype), slack=16)
    # sum_h (W_E W_V^h)(W_O^h W_U) = [W_E W_V^1, W_E W_V^2, ...] @ [W_O^1 W_U; W_O^2 W_U; ...]
    return torch.cat([W_E @ w for w in W_V], dim=1), torch.cat([w @ W_U for w in W_O], dim=0)


def ov_top_k(source, request, report=None):
    """``{"hits": long [len(ks)]}``: for each ``k`` in ``request["ks"]``, how many source tokens have fewer than ``k``
    other logits of their full-OV row (of the sum over ``request["heads"]``) not below their own. ``rows``: rows per
    block (None: as many as fit in `TOP_K_ENTRIES`); ``report(rows_done, d_vocab)`` after each block."""
    left, right = summed_ov_factors(source, request["heads"])
    ks, vocab = request["ks"], left.shape[0]
    rows = request.get("rows") or default_rows(TOP_K_ENTRIES, vocab, left.device)
    step = None if report is None else (lambda done: report(done, vocab))
    # per row, how many other entries are not below the own logit (ties count against it); exact below max(ks):
    # a row that reaches it is a miss at every k, and is skipped from then on
    ranks = diagonal_ranks(left.contiguous(), right.contiguous(), rows, max(ks), step, parallel=source.parallel)
    return {"hits": torch.stack([(ranks < k).sum() for k in ks])}


# ----- skip-trigrams -----------------------------------------------------------------------------


def top_of(values, k):
    """``(values, ids)`` of the `k` largest, largest first (equal values in id order), on the CPU."""
    top = torch.topk(values, k)
    by_id = torch.sort(top.indices).indices  # then a stable sort by value keeps ties in id order
    ids, picked = top.indices[by_id], top.values[by_id]
    order = torch.sort(picked, descending=True, stable=True).indices
    return picked[order].cpu(), ids[order].cpu()


def skip_trigrams(source, request, report=None):
    """Top `k` destinations (column ``source`` of ``W_E W_QK W_E^T / scale``) and outs (its row of ``W_E W_OV W_U``):
    vector chains, right to left, ``d_vocab x d_model`` work (not even the ``d_vocab x d_head`` factors)."""
    W_Q, W_K, W_V, W_O = (w[request["head"]] for w in source.layer(request["layer"]))
    dtype = work_dtype(W_Q.dtype)
    W_Q, W_K, W_V, W_O = (w.to(dtype) for w in (W_Q, W_K, W_V, W_O))
    W_E, W_U = source.W_E.to(dtype), source.W_U.to(dtype)
    embed = W_E[request["source"]]
    column = (W_E @ (W_Q @ (W_K.T @ embed))).float() / request["scale"]  # every destination's logit on the source
    row = (((embed @ W_V) @ W_O) @ W_U).float()  # the source's effect on every logit
    dest_values, destinations = top_of(column, request["k"])
    out_values, outs = top_of(row, request["k"])
    return {"destination_values": dest_values, "destinations": destinations, "out_values": out_values, "outs": outs}


def skip_trigram_sources(source, request, report=None):
    """The `k` strongest sources: ``max(0, max_d QK[d, s]) * max(0, max_o OV[s, o])``, `rows` rows at a time (None:
    as many as fit in `TRIGRAM_ENTRIES`); ``report(rows_done, 2 * d_vocab)`` after each block of the two passes."""
    W_Q, W_K, W_V, W_O = (w[request["head"]] for w in source.layer(request["layer"]))
    dtype = work_dtype(W_Q.dtype)
    W_E, W_U = source.W_E.to(dtype), source.W_U.to(dtype)
    vocab = W_E.shape[0]
    rows = request.get("rows") or default_rows(TRIGRAM_ENTRIES, vocab, W_E.device)

    def step(offset):
        return None if report is None else (lambda done: report(offset + done, 2 * vocab))

    # column s of QK is row s of QK^T = (W_E W_K) (W_E W_Q / scale)^T: a row pass like OV's
    queries = (W_E @ W_Q.to(dtype)) / request["scale"]
    keys = W_E @ W_K.to(dtype)
    top_qk, destinations = row_max(keys.contiguous(), queries.mT.contiguous(), rows, step(0), parallel=source.parallel)
    left, right = W_E @ W_V.to(dtype), W_O.to(dtype) @ W_U
    top_ov, outs = row_max(left.contiguous(), right.contiguous(), rows, step(vocab), parallel=source.parallel)
    strengths = top_qk.clamp_min(0) * top_ov.clamp_min(0)
    order = torch.sort(strengths, descending=True, stable=True).indices[: request["k"]]
    return {
        "sources": order, "strengths": strengths[order], "top_qk": top_qk[order], "destinations": destinations[order],
        "top_ov": top_ov[order], "outs": outs[order],
    }


# ----- composition scores ------------------------------------------------------------------------


def r_factor(tensor):
    """An upper-triangular ``R`` with ``R^T R = Y^T Y`` for each ``[d_model, d_head]`` matrix ``Y`` (rank-deficient is fine).

    The Frobenius norms of composition need only ``R^T R = Y^T Y``, which the ``R`` of the QR
    decomposition ``Y = U R`` has. The Cholesky factor of the ``d_head x d_head`` Gram matrix ``Y^T Y``
    is that ``R`` (up to the signs of its rows) and costs a third of a Householder QR; a matrix whose
    Gram matrix Cholesky refuses (rank-deficient, e.g. an all-zero head) gets its QR ``R`` instead.

    Example:
        >>> Y = torch.tensor([[3.0, 0.0], [4.0, 0.0]])          # rank 1: QR takes over
        >>> R = r_factor(torch.stack([Y, torch.eye(2)]))
        >>> torch.allclose(R.mT @ R, torch.stack([Y.mT @ Y, torch.eye(2)]))
        True
    """
    lower, info = torch.linalg.cholesky_ex(tensor.mT @ tensor)
    r = lower.mT
    failed = info != 0
    if bool(failed.any()):
        r = r.clone()
        r[failed] = torch.linalg.qr(tensor[failed], mode="r").R
    return r


def writer_factor(W_V, W_O):
    """``R_P S`` of ``W_A = W_V W_O`` (``P = W_V``, ``S = W_O``), ``[..., d_head, d_model]``."""
    return r_factor(W_V) @ W_O


def reader_factor(kind, W_Q, W_K, W_V, W_O):
    """``X R_Y^T`` of the reader ``W_B = X Y^T`` of `kind`, ``[..., d_model, d_head]``: Q ``W_Q W_K^T``, K
    ``W_K W_Q^T``, V ``W_V W_O``."""
    if kind == "Q":
        return W_Q @ r_factor(W_K).mT
    if kind == "K":
        return W_K @ r_factor(W_Q).mT
    return W_V @ r_factor(W_O.mT).mT


def unit(tensor):
    """Each trailing matrix divided, in place, by its Frobenius norm (zeros stay zero), and the norms."""
    norms = tensor.flatten(-2).norm(dim=-1)
    safe = torch.where(norms > 0, norms, torch.ones_like(norms))
    return tensor.div_(safe[..., None, None]), norms


def _cross_norms(writers, columns, b, on_chunk=None):
    """``||writers[i] @ readers[j]||_F`` for all i, j, with ``columns = [readers[0] | readers[1] | ...]``:
    ``[n1, a, m] x [m, n2 * b] -> [n1, n2]``; ``on_chunk(pairs)`` after each chunk of readers (n1 x its readers)."""
    n1, a, m = writers.shape
    n2 = columns.shape[1] // b
    rows = writers.reshape(n1 * a, m)
    step = max(1, PAIR_BLOCK_ENTRIES // max(n1 * a * b, 1))  # readers per chunk
    out = torch.empty(n1, n2, dtype=writers.dtype, device=writers.device)
    for start in range(0, n2, step):
        stop = min(start + step, n2)
        block = rows @ columns[:, start * b : stop * b]
        out[:, start:stop] = block.reshape(n1, a, stop - start, b).square_().sum(dim=(1, 3)).sqrt_()
        if on_chunk is not None:
            on_chunk(n1 * (stop - start))
    return out


def pair_count(n_layers, n_heads):
    """Head pairs ``(h1, h2)`` with h1 in an earlier layer: the total that composition reports progress of.

    Example:
        >>> pair_count(28, 24)          # Llama-3.2-3B's shape: 672 heads
        217728
    """
    return n_heads * n_heads * n_layers * (n_layers - 1) // 2


def scores_from_units(writers, writer_norms, readers, reader_norms, report=None):
    """``[L, H, L, H]`` composition scores of factors already divided by their norms (`unit`); reads them, changes
    nothing. NaN unless layer1 < layer2 and both matrices are non-zero. ``report(pairs_done, pairs_total)`` after
    each chunk (`pair_count`)."""
    n_layers, n_heads = writers.shape[:2]
    total, done = pair_count(n_layers, n_heads), 0

    def on_chunk(pairs):
        nonlocal done
        done += pairs
        if report is not None:
            report(done, total)

    out = torch.full((n_layers, n_heads, n_layers, n_heads), float("nan"), dtype=writers.dtype, device=writers.device)
    d_head = readers.shape[-1]
    columns = readers.permute(2, 0, 1, 3).reshape(readers.shape[2], -1)  # [d_model, (layer, head, d_head)], one copy
    for layer in range(n_layers - 1):
        later = columns[:, (layer + 1) * n_heads * d_head :]
        out[layer, :, layer + 1 :] = _cross_norms(writers[layer], later, d_head, on_chunk).reshape(n_heads, -1, n_heads)
    if report is not None and done == 0:  # a single attention layer: no pair, one report (0, 0)
        report(0, 0)
    degenerate = (writer_norms == 0)[:, :, None, None] | (reader_norms == 0)[None, None]
    return out.masked_fill(degenerate, float("nan"))


def _in_range(weights):
    """Each head's weights scaled by a power of two when its largest entry lies outside 2**-16 .. 2**16 (the scores
    are scale-invariant), so that their products stay in range."""
    return tuple(unit_scaled(w, dim=(-2, -1), slack=16)[0] for w in weights)


def _by_layers(source, build, dtype):
    """``build(W_Q, W_K, W_V, W_O)`` of every layer, in `dtype` and scaled into range: of all layers at once when the
    source holds them stacked in `dtype`, else one layer at a time (a half-precision model never has all its
    weights in the working dtype at once: Llama-1B's shape, 1 GB of float32 copies; only the factors are kept)."""
    if source.holds_stacked and source.stacked("W_Q").dtype == dtype:
        return build(*_in_range(source.stacked(name) for name in ("W_Q", "W_K", "W_V", "W_O")))
    layers = [build(*_in_range(w.to(dtype) for w in source.layer(i))) for i in range(source.n_layers)]
    return torch.stack(layers)


def _unit_writers(source, dtype):
    """The writer factors of every head divided by their norms, and the norms: the same for the three kinds, so
    formed once per weight state and kept with the weights (``derived``) unless larger than `KEEP_WRITER_BYTES`."""

    def form():
        return unit(_by_layers(source, lambda W_Q, W_K, W_V, W_O: writer_factor(W_V, W_O), dtype))

    W_V = source.layer(0)[2]
    size = source.n_layers * W_V.numel() * dtype.itemsize
    return form() if size > KEEP_WRITER_BYTES else source.derived("composition writers", form)


def composition(source, request, report=None):
    """``{kind: [L, H, L, H] float32}`` raw composition scores for each kind in ``request["kinds"]`` (see
    `circuitwidgets.analysis.composition_scores`); ``report(pairs_done, pairs_total)`` after each chunk of pairs,
    kind by kind."""
    dtype = work_dtype(source.layer(0)[0].dtype)
    out = {}
    for kind in request["kinds"]:
        readers = _by_layers(source, lambda W_Q, W_K, W_V, W_O, kind=kind: reader_factor(kind, W_Q, W_K, W_V, W_O), dtype)
        writers, writer_norms = _unit_writers(source, dtype)
        readers, reader_norms = unit(readers)
        out[kind] = scores_from_units(writers, writer_norms, readers, reader_norms, report).to("cpu", torch.float32)
    return out


def composition_term_factors(source, kind, first, second, scale=1.0):
    """``(left [d_vocab, d_head], right [d_head, d_vocab])`` of the term that composing `first` (h1, stacked
    ``(layer, head)``) into `second` (h2) builds (see `circuitwidgets.analysis.composition_term`): K ``W_E W_QK^{h2}
    (W_E W_OV^{h1})^T``, Q ``(W_E W_OV^{h1}) W_QK^{h2} W_E^T``, V ``W_E W_OV^{h1} W_OV^{h2} W_U``; Q and K divided by
    `scale`."""
    (l1, h1), (l2, h2) = first, second
    _, _, W_V1, W_O1 = (w[h1] for w in source.layer(l1))
    W_Q2, W_K2, W_V2, W_O2 = (w[h2] for w in source.layer(l2))
    dtype = work_dtype(W_V1.dtype)
    W_V1, W_O1, W_Q2, W_K2, W_V2, W_O2 = (w.to(dtype) for w in (W_V1, W_O1, W_Q2, W_K2, W_V2, W_O2))
    W_E = source.W_E.to(dtype)
    moved = W_E @ W_V1  # [d_vocab, d_head]: h1 reads each token; W_O1 writes it
    if kind == "K":  # (W_E W_Q2) (W_E W_V1 W_O1 W_K2)^T
        return (W_E @ W_Q2) / scale, (moved @ (W_O1 @ W_K2)).mT
    if kind == "Q":  # (W_E W_V1 W_O1 W_Q2) (W_E W_K2)^T
        return (moved @ (W_O1 @ W_Q2)) / scale, (W_E @ W_K2).mT
    return moved, (W_O1 @ W_V2) @ (W_O2 @ source.W_U.to(dtype))  # (W_E W_V1) (W_O1 W_V2 W_O2 W_U)


def composition_term(source, request, report=None):
    """The term a pair (``first`` -> ``second``) builds for ``kind``: ``{"block": float32 [rows, columns], "eigenvalues":
    complex128 [d_head], "positivity": float64 0-d}`` (Q and K divided by ``request["scale"]``, 1: unscaled)."""
    left, right = composition_term_factors(source, request["kind"], request["first"], request["second"],
                                           request.get("scale", 1.0))
    rows, columns = _ids(request["rows"], left.device), _ids(request["columns"], left.device)
    values = sorted_eigenvalues(right @ left)
    return {"block": (left[rows] @ right[:, columns]).float().cpu(), "eigenvalues": values, "positivity": copying_of(values)}


VIEWS = {
    "ov_block": ov_block,
    "qk_block": qk_block,
    "positional_qk": positional_qk,
    "ov_eigenvalues": ov_eigenvalues,
    "ov_top_k": ov_top_k,
    "skip_trigrams": skip_trigrams,
    "skip_trigram_sources": skip_trigram_sources,
    "composition": composition,
    "composition_term": composition_term,
}


def answer(source, requests, report=None):
    """The answers (a list of dicts of CPU tensors) to `requests`, each ``{"view": name in VIEWS, ...}``, from the
    weight `source`; ``report(done, total)`` follows the long views (top-k rows, skip-trigram rows, composition pairs)."""
    with torch.no_grad():
        return [VIEWS[request["view"]](source, request, report) for request in requests]
