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
from typing import Any

import torch

from ..model import as_view, unit_scaled, work_dtype
from .circuits import head_weights
from .copying import copying_score_of
from .factored import Factored

KINDS = ("Q", "K", "V")
_BLOCK_ENTRIES = 2**25  # entries of one chunk of the pair product (128 MB in float32)


def _check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    return kind


def _r_factor(tensor: torch.Tensor) -> torch.Tensor:
    """``R`` of the reduced QR of each ``[d_model, d_head]`` matrix (rank-deficient is fine)."""
    return torch.linalg.qr(tensor, mode="r").R


def _thin_factors(
    W_V: torch.Tensor, W_O: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, kind: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R_P S, X R_Y^T)``: ``[..., d_head, d_model]`` for the writer, ``[..., d_model, d_head]`` for the reader."""
    writer = _r_factor(W_V) @ W_O
    if kind == "Q":  # W_B = W_Q W_K^T
        x, y = W_Q, W_K
    elif kind == "K":  # W_B = W_K W_Q^T
        x, y = W_K, W_Q
    else:  # W_B = W_V W_O = W_V (W_O^T)^T
        x, y = W_V, W_O.mT
    reader = x @ _r_factor(y).mT
    return writer, reader


def _unit(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each trailing matrix divided, in place, by its Frobenius norm (zeros stay zero), and the norms."""
    norms = tensor.flatten(-2).norm(dim=-1)
    safe = torch.where(norms > 0, norms, torch.ones_like(norms))
    return tensor.div_(safe[..., None, None]), norms


def _cross_norms(writers: torch.Tensor, readers: torch.Tensor) -> torch.Tensor:
    """``||writers[i] @ readers[j]||_F`` for all i, j: ``[n1, a, m] x [n2, m, b] -> [n1, n2]``."""
    n1, a, m = writers.shape
    n2, _, b = readers.shape
    rows = writers.reshape(n1 * a, m)
    columns = readers.permute(1, 0, 2).reshape(m, n2 * b)
    step = max(1, _BLOCK_ENTRIES // max(n1 * a * b, 1))  # readers per chunk
    out = torch.empty(n1, n2, dtype=writers.dtype, device=writers.device)
    for start in range(0, n2, step):
        stop = min(start + step, n2)
        block = rows @ columns[:, start * b : stop * b]
        out[:, start:stop] = block.reshape(n1, a, stop - start, b).square().sum(dim=(1, 3)).sqrt()
    return out


def _scores_from_factors(writers: torch.Tensor, readers: torch.Tensor) -> torch.Tensor:
    """``[L, H, L, H]`` scores, NaN unless layer1 < layer2 and both matrices are non-zero."""
    n_layers, n_heads = writers.shape[:2]
    writers, writer_norms = _unit(writers)
    readers, reader_norms = _unit(readers)
    out = torch.full((n_layers, n_heads, n_layers, n_heads), float("nan"), dtype=writers.dtype, device=writers.device)
    reader_stack = readers.flatten(0, 1)
    for layer in range(n_layers - 1):
        later = reader_stack[(layer + 1) * n_heads :]
        out[layer, :, layer + 1 :] = _cross_norms(writers[layer], later).reshape(n_heads, -1, n_heads)
    degenerate = (writer_norms == 0)[:, :, None, None] | (reader_norms == 0)[None, None]
    return out.masked_fill(degenerate, float("nan"))


def _layer_factors(view: Any, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The thin writer and reader factors of every head, built one layer at a time.

    Layer by layer, a half-precision model never has all four weights in the working dtype at
    once (Llama-1B shape: 1 GB of float32 copies): only the factors, half that, are kept.
    """
    dtype = work_dtype(view.dtype)
    n_layers, n_heads, d_model, d_head = view.W_Q.shape
    writers = torch.empty(n_layers, n_heads, d_head, d_model, dtype=dtype, device=view.device)
    readers = torch.empty(n_layers, n_heads, d_model, d_head, dtype=dtype, device=view.device)
    for i in range(n_layers):
        # heads whose largest weight lies outside 2**-16 .. 2**16 are scaled by a power of two (the
        # scores are scale-invariant), so that their products stay in range; others are used as they are
        W_V, W_O, W_Q, W_K = (
            unit_scaled(getattr(view, name)[i].to(dtype), dim=(-2, -1), slack=16)[0] for name in ("W_V", "W_O", "W_Q", "W_K")
        )
        writers[i], readers[i] = _thin_factors(W_V, W_O, W_Q, W_K, kind)
    return writers, readers


def composition_scores(model: Any, kind: str, baseline: bool = False) -> torch.Tensor:
    """Composition scores ``[n_attn_layers, n_heads, n_attn_layers, n_heads]`` float32 on CPU.

    Entry ``[l1, h1, l2, h2]`` scores how much head h2 of attention layer ``l2`` reads, through
    its queries (``kind="Q"``), keys (``"K"``) or values (``"V"``), what head h1 of layer ``l1``
    writes; raw scores lie in [0, 1]. Layer positions follow ``view.attn_layers``. Entries with
    ``l1 >= l2`` are NaN (undefined, not zero), as are pairs with an all-zero matrix.
    ``baseline=True`` subtracts `composition_baseline` (what random matrices already score).

    Example:
        >>> import circuitwidgets as cw
        >>> k = cw.analysis.composition_scores(cw.demo_model(), "K")
        >>> k[0, :, 1, :].shape                      # layer-0 heads (rows) -> layer-1 heads
        torch.Size([4, 4])
    """
    view = as_view(model)
    _check_kind(kind)
    if not isinstance(baseline, bool):
        raise TypeError(f"baseline must be a bool; got {baseline!r}")
    with torch.no_grad():
        scores = _scores_from_factors(*_layer_factors(view, kind)).to("cpu", torch.float32)
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
