"""Q-, K- and V-composition between heads: the scores of every pair, and the term one pair builds.

`composition_scores` scores every pair (below); `composition_term` gives the circuit term a pair
builds, as a `Factored` over the vocabulary (K: destination token x the token h1 moved into the
source position; Q: the mirror; V: the virtual head's full OV circuit), and
`composition_term_positivity` its ``sum(lambda) / sum(|lambda|)``.

Score of (h1, h2), h1 in an earlier layer: ``||W_A W_B||_F / (||W_A||_F ||W_B||_F)`` with
``W_A = W_OV^{h1} = W_V W_O`` and ``W_B`` = ``W_QK^{h2}`` (Q), ``(W_QK^{h2})^T`` (K) or
``W_OV^{h2}`` (V) — the orientation of TransformerLens' ``all_composition_scores``.

How it stays small: write ``W_A = P S`` and ``W_B = X Y^T`` with ``d_model x d_head`` factors
``P, X, Y`` and ``d_head x d_model`` ``S``. With the QR decompositions ``P = U_P R_P`` and
``Y = U_Y R_Y`` (orthonormal ``U``), Frobenius norms ignore ``U_P`` and ``U_Y^T``, so

    ||W_A W_B|| = ||(R_P S)(X R_Y^T)||,  ||W_A|| = ||R_P S||,  ||W_B|| = ||X R_Y^T||

where ``R_P S`` is ``d_head x d_model`` and ``X R_Y^T`` is ``d_model x d_head``. Each pair then
costs one ``d_head x d_head`` block of a large batched matrix product, and no
``d_model x d_model`` matrix is formed for any head or pair.

The score does not change when ``W_V``, ``W_O``, ``W_Q`` or ``W_K`` of a head is multiplied by a
positive number, so the factors of a head whose largest entry lies outside ``2**-16 .. 2**16``
are first scaled by a power of two that brings it into [0.5, 1) (exact:
`circuitwidgets.model.unit_scaled`). Weights of 1e-30 or 1e30 then score as at a usual scale,
where the plain float32 products would underflow to 0 (a NaN score) or overflow to Inf.

Example:
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.analysis import composition_scores, composition_baseline
    >>> scores = composition_scores(cw.demo_model(), "K")   # [layer1, head1, layer2, head2]
    >>> scores.shape
    torch.Size([2, 4, 2, 4])
    >>> bool(scores[1].isnan().all())                     # nothing comes after the last layer
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from ..backends import remote_weights
from ..model import as_view, unit_scaled, work_dtype
from .circuits import head_weights, weights_elsewhere
from .copying import copying_score_of
from .factored import Factored
from .interventions import progress_of

KINDS = ("Q", "K", "V")
_BLOCK_ENTRIES = 2**25  # entries of one chunk of the pair product (128 MB in float32)
_KEEP_BYTES = 2**26  # writer factors up to this size (GPT-2 small: 28 MB) are kept with the weights for the other kinds


def _check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    return kind


def _r_factor(tensor: torch.Tensor) -> torch.Tensor:
    """An upper-triangular ``R`` with ``R^T R = Y^T Y`` for each ``[d_model, d_head]`` matrix ``Y`` (rank-deficient is fine).

    The Frobenius norms below need only ``R^T R = Y^T Y``, which the ``R`` of the QR decomposition
    ``Y = U R`` has. The Cholesky factor of the ``d_head x d_head`` Gram matrix ``Y^T Y`` is that
    ``R`` (up to the signs of its rows) and costs a third of a Householder QR; a matrix whose Gram
    matrix Cholesky refuses (rank-deficient, e.g. an all-zero head) gets its QR ``R`` instead.

    Example:
        >>> Y = torch.tensor([[3.0, 0.0], [4.0, 0.0]])          # rank 1: QR takes over
        >>> R = _r_factor(torch.stack([Y, torch.eye(2)]))
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


def _thin_factors(
    W_V: torch.Tensor, W_O: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, kind: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R_P S, X R_Y^T)``: ``[..., d_head, d_model]`` for the writer, ``[..., d_model, d_head]`` for the reader."""
    weights = {"W_V": W_V, "W_O": W_O, "W_Q": W_Q, "W_K": W_K}
    return _writer(W_V, W_O), _reader(kind, *(weights[name] for name in _READS[kind]))


# the weights each kind's reader W_B = X Y^T is made of: Q: W_Q W_K^T, K: W_K W_Q^T, V: W_V W_O = W_V (W_O^T)^T
_READS = {"Q": ("W_Q", "W_K"), "K": ("W_K", "W_Q"), "V": ("W_V", "W_O")}


def _writer(W_V: torch.Tensor, W_O: torch.Tensor) -> torch.Tensor:
    """``R_P S`` of ``W_A = W_V W_O`` (``P = W_V``, ``S = W_O``), ``[..., d_head, d_model]``."""
    return _r_factor(W_V) @ W_O


def _reader(kind: str, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """``X R_Y^T`` of the reader ``W_B = X Y^T``, ``[..., d_model, d_head]``; `first`, `second`: the weights
    ``_READS[kind]`` names."""
    x, y = (first, second.mT) if kind == "V" else (first, second)
    return x @ _r_factor(y).mT


def _unit(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each trailing matrix divided, in place, by its Frobenius norm (zeros stay zero), and the norms."""
    norms = tensor.flatten(-2).norm(dim=-1)
    safe = torch.where(norms > 0, norms, torch.ones_like(norms))
    return tensor.div_(safe[..., None, None]), norms


def _cross_norms(
    writers: torch.Tensor, columns: torch.Tensor, b: int, on_chunk: Callable[[int], None] | None = None
) -> torch.Tensor:
    """``||writers[i] @ readers[j]||_F`` for all i, j, with ``columns = [readers[0] | readers[1] | ...]``:
    ``[n1, a, m] x [m, n2 * b] -> [n1, n2]``; ``on_chunk(pairs)`` after each chunk of readers (n1 x its readers)."""
    n1, a, m = writers.shape
    n2 = columns.shape[1] // b
    rows = writers.reshape(n1 * a, m)
    step = max(1, _BLOCK_ENTRIES // max(n1 * a * b, 1))  # readers per chunk
    out = torch.empty(n1, n2, dtype=writers.dtype, device=writers.device)
    for start in range(0, n2, step):
        stop = min(start + step, n2)
        block = rows @ columns[:, start * b : stop * b]
        out[:, start:stop] = block.reshape(n1, a, stop - start, b).square_().sum(dim=(1, 3)).sqrt_()
        if on_chunk is not None:
            on_chunk(n1 * (stop - start))
    return out


def _scores_from_factors(writers: torch.Tensor, readers: torch.Tensor) -> torch.Tensor:
    """``[L, H, L, H]`` scores, NaN unless layer1 < layer2 and both matrices are non-zero."""
    return _scores_from_units(*_unit(writers), *_unit(readers))


def _scores_from_units(
    writers: torch.Tensor,
    writer_norms: torch.Tensor,
    readers: torch.Tensor,
    reader_norms: torch.Tensor,
    report: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """`_scores_from_factors` of factors already divided by their norms (`_unit`); reads them, changes nothing.
    ``report(pairs_done)`` after each chunk of pairs, up to `pair_count`."""
    n_layers, n_heads = writers.shape[:2]
    done = 0

    def on_chunk(pairs: int) -> None:
        nonlocal done
        done += pairs
        if report is not None:
            report(done)

    out = torch.full((n_layers, n_heads, n_layers, n_heads), float("nan"), dtype=writers.dtype, device=writers.device)
    d_head = readers.shape[-1]
    columns = readers.permute(2, 0, 1, 3).reshape(readers.shape[2], -1)  # [d_model, (layer, head, d_head)], one copy
    for layer in range(n_layers - 1):
        later = columns[:, (layer + 1) * n_heads * d_head :]
        out[layer, :, layer + 1 :] = _cross_norms(writers[layer], later, d_head, on_chunk).reshape(n_heads, -1, n_heads)
    if report is not None and done == 0:  # a single attention layer: no pair, one report (0, 0)
        report(0)
    degenerate = (writer_norms == 0)[:, :, None, None] | (reader_norms == 0)[None, None]
    return out.masked_fill(degenerate, float("nan"))


def _unit_writers(view: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The writer factors of every head divided by their norms, and the norms (`_unit`): the same for the three kinds,
    so formed once per weight state and kept with the weights (`Weights.derived`) unless larger than `_KEEP_BYTES`."""
    n_layers, n_heads, d_model, d_head = view.W_Q.shape
    dtype = work_dtype(view.dtype)

    def form() -> tuple[torch.Tensor, torch.Tensor]:
        shape = (n_layers, n_heads, d_head, d_model)
        return _unit(_by_layers(view, ("W_V", "W_O"), dtype, shape, _writer))

    if n_layers * n_heads * d_model * d_head * dtype.itemsize > _KEEP_BYTES:
        return form()
    return view.backend.weights().derived("composition writers", form)


def _by_layers(view: Any, names: tuple[str, ...], dtype: torch.dtype, shape: tuple[int, ...], build: Any) -> torch.Tensor:
    """``build(*weights)`` of the weights `names`, in `dtype` and scaled into range (`_in_range`): of all layers at
    once when the weights are in `dtype` already, else one layer at a time into a ``shape`` result.

    Layer by layer, a half-precision model never has all its weights in the working dtype at
    once (Llama-1B shape: 1 GB of float32 copies): only the factors are kept.
    """
    if view.W_Q.dtype == dtype:  # no copies in the working dtype: every layer at once (fewer, larger products)
        return build(*_in_range(view, names, slice(None), dtype))
    out = torch.empty(shape, dtype=dtype, device=view.device)
    for i in range(shape[0]):
        out[i] = build(*_in_range(view, names, i, dtype))
    return out


def _in_range(view: Any, names: tuple[str, ...], layers: int | slice, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The weights `names` of `layers` in `dtype`, each head's scaled by a power of two when its largest weight lies
    outside 2**-16 .. 2**16 (the scores are scale-invariant), so that their products stay in range."""
    return tuple(unit_scaled(getattr(view, name)[layers].to(dtype), dim=(-2, -1), slack=16)[0] for name in names)


def pair_count(n_layers: int, n_heads: int) -> int:
    """Head pairs ``(h1, h2)`` with h1 in an earlier layer: the `total` that `composition_scores` reports progress of.

    Example:
        >>> pair_count(28, 24)          # Llama-3.2-3B's shape: 672 heads
        217728
    """
    return n_heads * n_heads * n_layers * (n_layers - 1) // 2


def composition_scores(model: Any, kind: str, baseline: bool = False, *, progress: Any = False) -> torch.Tensor:
    """Composition scores ``[n_attn_layers, n_heads, n_attn_layers, n_heads]`` float32 on CPU.

    Entry ``[l1, h1, l2, h2]`` scores how much head h2 of attention layer ``l2`` reads, through
    its queries (``kind="Q"``), keys (``"K"``) or values (``"V"``), what head h1 of layer ``l1``
    writes; raw scores lie in [0, 1]. Layer positions follow ``view.attn_layers``. Entries with
    ``l1 >= l2`` are NaN (undefined, not zero), as are pairs with an all-zero matrix.
    ``baseline=True`` subtracts `composition_baseline` (what random matrices already score).

    Cost: ``d_head**2 * d_model`` multiply-adds per pair, all pairs batched (Llama-3.2-3B's shape,
    217 728 pairs: minutes on a laptop CPU). `progress`: False/None (default), True (a tqdm bar), or
    a callable ``progress(pairs_done, pairs_total)`` called after each chunk of pairs, ending at
    ``pairs_total`` (`pair_count`); an exception it raises stops the computation.

    Example:
        >>> import circuitwidgets as cw
        >>> k = cw.analysis.composition_scores(cw.demo_model(), "K")
        >>> k[0, :, 1, :].shape                      # layer-0 heads (rows) -> layer-1 heads
        torch.Size([4, 4])
        >>> seen = []
        >>> _ = cw.analysis.composition_scores(cw.demo_model(), "K", progress=lambda done, total: seen.append((done, total)))
        >>> seen[-1]                                 # 4 x 4 pairs between the two layers
        (16, 16)
    """
    view = as_view(model)
    _check_kind(kind)
    if not isinstance(baseline, bool):
        raise TypeError(f"baseline must be a bool; got {baseline!r}")
    if weights_elsewhere(view):  # computed where the weights are (one request; the server shows no progress here)
        scores = remote_weights.remote_composition_scores(view.backend, kind)
        return scores - composition_baseline(view, kind=kind) if baseline else scores
    n_layers, n_heads, d_model, d_head = view.W_Q.shape
    report = progress_of(progress, pair_count(n_layers, n_heads), f"{kind}-composition scores (head pairs)")
    with torch.no_grad():
        shape = (n_layers, n_heads, d_model, d_head)
        readers = _by_layers(view, _READS[kind], work_dtype(view.dtype), shape, lambda x, y: _reader(kind, x, y))
        scores = _scores_from_units(*_unit_writers(view), *_unit(readers), report).to("cpu", torch.float32)
    if baseline:
        scores = scores - composition_baseline(view, kind=kind)
    return scores


def composition_baseline(model: Any, kind: str = "K", *, samples: int = 32, seed: int = 0) -> float:
    """Mean score of random matrices shaped like this model's heads (Gaussian factors).

    Draws `samples` random writer heads (``W_V, W_O``) and `samples` random reader heads with
    this model's ``d_model`` and ``d_head`` (fixed `seed`) and averages the scores of all
    ``samples**2`` pairs. The Q, K and V matrices have the same shapes, so the baseline is the
    same for every `kind` (the argument is validated for symmetry with `composition_scores`).
    Why about ``1/sqrt(d_model)``: for a random rotation of ``W_B``, ``E||W_A W_B||^2 =
    ||W_A||^2 ||W_B||^2 / d_model`` exactly, so the mean squared score is ``1/d_model`` and the
    mean score sits just below its square root (0.125 at d_model 64, 0.036 at 768).

    Example:
        >>> import circuitwidgets as cw
        >>> round(cw.analysis.composition_baseline(cw.demo_model()), 2)
        0.12
    """
    view = as_view(model)
    _check_kind(kind)
    for name, value, low in (("samples", samples, 2), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {value!r}")
        if value < low:
            raise ValueError(f"{name}={value} must be >= {low}")
    return _random_baseline(view.d_model, view.d_head, samples, seed)


@functools.lru_cache(maxsize=32)
def _random_baseline(d_model: int, d_head: int, samples: int, seed: int) -> float:
    gen = torch.Generator().manual_seed(seed)
    W_V, W_Q, W_K = (torch.randn(2, samples, d_model, d_head, generator=gen) for _ in range(3))
    W_O = torch.randn(2, samples, d_head, d_model, generator=gen)
    writers, readers = _thin_factors(W_V, W_O, W_Q, W_K, "Q")
    # layer 0 holds the random writers, layer 1 the random readers: every pair is defined
    scores = _scores_from_factors(writers, readers)[0, :, 1, :]
    return float(scores.mean())



# ----- composition terms: what an edge builds ---------------------------------------------------


def _check_writer_reader(view: Any, first: Any, second: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((l1, h1), (l2, h2))`` validated, h1 (the writer) in an earlier layer than h2 (the reader)."""
    try:
        return view.check_pair(first, second)
    except ValueError as exc:
        if "earlier layer" not in str(exc):
            raise
        raise ValueError(
            f"composition needs the first head (h1, the writer) in an earlier layer than the second (h2, the "
            f"reader); got first={tuple(first)}, second={tuple(second)}"
        ) from None


def composition_term(model: Any, kind: str, first: Any, second: Any, *, scaled: bool = False) -> Factored:
    """The circuit term that composing `first` (h1) into `second` (h2) builds, as a `Factored` (token embeddings only).

    ``first = (l1, h1)`` must be in an earlier layer than ``second = (l2, h2)`` (block
    indices). With ``W_QK = W_Q W_K^T`` and ``W_OV = W_V W_O`` of each head:

    - ``"K"``: ``W_E W_QK^{h2} (W_E W_OV^{h1})^T``, ``[destination (query) token, token that h1 moved
      into the source (key) position]``: the attention score h2 gives a key position whose
      residual holds h1's output for that token. A previous-token h1 under an induction h2
      gives positive eigenvalues (the current token matched against each position's preceding one).
    - ``"Q"``: ``(W_E W_OV^{h1}) W_QK^{h2} W_E^T``, ``[token h1 moved into the destination (query)
      position, source (key) token]``.
    - ``"V"``: the virtual head's full OV circuit ``W_E W_OV^{h1} W_OV^{h2} W_U``, ``[source token,
      out token]``.

    Rank <= d_head: the factors are ``d_vocab x d_head`` and ``d_head x d_vocab``, so blocks on
    token subsets and eigenvalues (``.eigenvalues()``, from the ``d_head x d_head`` side) stay
    cheap on a 50 257-token vocabulary. Q and K terms are raw bilinear forms like
    `full_qk_circuit`; ``scaled=True`` divides them by the model's attention scale (entries are
    then attention-logit contributions). The V term is in logits, `scaled` must stay False.
    Positions and biases are left out; LayerNorm is folded in (``ModelView.norm_note``).
    `composition_term_positivity` gives ``sum(lambda) / sum(|lambda|)``.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> term = cw.analysis.composition_term(model, "K", (0, 0), (1, 1))
        >>> term.shape, term.rank_bound                  # [destination token, token moved to the source]
        ((64, 64), 16)
        >>> term.block([2, 3], [2, 3]).shape
        torch.Size([2, 2])
        >>> cw.analysis.composition_term(model, "V", (0, 0), (1, 1)).eigenvalues().shape
        torch.Size([16])
    """
    view = as_view(model)
    _check_kind(kind)
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool; got {scaled!r}")
    if scaled and kind == "V":
        raise ValueError("scaled=True divides Q and K terms by the attention scale; the V term is in logits")
    (l1, h1), (l2, h2) = _check_writer_reader(view, first, second)
    W_V1, W_O1 = head_weights(view, l1, h1, "W_V", "W_O")
    W_Q2, W_K2, W_V2, W_O2 = head_weights(view, l2, h2, "W_Q", "W_K", "W_V", "W_O")
    W_E = view.W_E.to(W_V1.dtype)
    moved = W_E @ W_V1  # [d_vocab, d_head]: h1 reads each token; W_O1 writes it
    if kind == "K":  # (W_E W_Q2) (W_E W_V1 W_O1 W_K2)^T
        term = Factored(W_E @ W_Q2, (moved @ (W_O1 @ W_K2)).mT)
    elif kind == "Q":  # (W_E W_V1 W_O1 W_Q2) (W_E W_K2)^T
        term = Factored(moved @ (W_O1 @ W_Q2), (W_E @ W_K2).mT)
    else:  # (W_E W_V1) (W_O1 W_V2 W_O2 W_U)
        term = Factored(moved, (W_O1 @ W_V2) @ (W_O2 @ view.W_U.to(W_V1.dtype)))
    return term / view.scale_of(l2) if scaled else term


def composition_term_positivity(model: Any, kind: str, first: Any, second: Any) -> float:
    """``sum(lambda) / sum(|lambda|)`` over the eigenvalues of `composition_term`, in [-1, 1].

    For K and Q the term is square in the vocabulary (destination token x moved token, or moved
    token x source token): 1 means the later head attends where the two tokens are the same
    (an induction head on a previous-token head). For V it is the copying score of the virtual
    head's full OV circuit. Eigenvalues from the ``d_head x d_head`` side, in float64; NaN when
    the term is zero.

    Example:
        >>> import circuitwidgets as cw
        >>> p = cw.analysis.composition_term_positivity(cw.demo_model(), "K", (0, 0), (1, 1))
        >>> -1.0 <= p <= 1.0
        True
    """
    return float(copying_score_of(composition_term(model, kind, first, second).eigenvalues()))


def composition_term_view(
    model: Any, kind: str, first: Any, second: Any, tokens: Any, *, scaled: bool = False
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """What a pair's term panel shows: ``(block [n, n] float32 on CPU, eigenvalues, positivity)`` of
    `composition_term` on `tokens` (rows and columns), its eigenvalues and `composition_term_positivity`.

    For a model whose weights stay on the server (`circuits.weights_elsewhere`) all three come from
    one request computed there.

    Example:
        >>> import circuitwidgets as cw
        >>> block, eigs, p = cw.analysis.composition_term_view(cw.demo_model(), "K", (0, 0), (1, 1), [2, 3, 4])
        >>> block.shape, -1.0 <= p <= 1.0
        (torch.Size([3, 3]), True)
    """
    view = as_view(model)
    if weights_elsewhere(view):
        found = remote_weights.remote_composition_term(view.backend, kind, first, second, tokens, scaled=scaled)
        return found["block"].float().cpu(), found["eigenvalues"], float(found["positivity"])
    term = composition_term(view, kind, first, second, scaled=scaled)
    ids = view.token_ids(tokens)
    eigs = term.eigenvalues()
    return term.block(ids, ids).to("cpu", torch.float32), eigs, float(copying_score_of(eigs))
