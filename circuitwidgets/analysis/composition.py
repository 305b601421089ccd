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

from .. import weight_views
from ..model import as_view
from ..weight_views import pair_count  # noqa: F401 - re-exported (the total composition_scores reports)
from .factored import Factored
from .interventions import progress_of

KINDS = ("Q", "K", "V")


def _check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    return kind


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
    n_layers, n_heads = len(view.attn_layers), view.n_heads
    report = progress_of(progress, pair_count(n_layers, n_heads), f"{kind}-composition scores (head pairs)")
    request = {"view": "composition", "kinds": [kind]}
    scores = view.weight_views([request], lambda done, total: report(done))[0][kind]
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
    writers, readers = weight_views.writer_factor(W_V, W_O), weight_views.reader_factor("Q", W_Q, W_K, W_V, W_O)
    # layer 0 holds the random writers, layer 1 the random readers: every pair is defined
    scores = weight_views.scores_from_units(*weight_views.unit(writers), *weight_views.unit(readers))[0, :, 1, :]
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


def _check_term(view: Any, kind: Any, first: Any, second: Any, scaled: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """The pair of a composition term, validated with its `kind` and `scaled`."""
    _check_kind(kind)
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool; got {scaled!r}")
    if scaled and kind == "V":
        raise ValueError("scaled=True divides Q and K terms by the attention scale; the V term is in logits")
    return _check_writer_reader(view, first, second)


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
    (l1, h1), (l2, h2) = _check_term(view, kind, first, second, scaled)
    source = view.weight_source(f"the {kind}-composition term")
    scale = view.scale_of(l2) if scaled else 1.0
    pair = (view.layer_index(l1), h1), (view.layer_index(l2), h2)
    return Factored(*weight_views.composition_term_factors(source, kind, *pair, scale))


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
    return composition_term_view(model, kind, first, second, [0])[2]


def composition_term_view(
    model: Any, kind: str, first: Any, second: Any, tokens: Any, *, scaled: bool = False
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """What a pair's term panel shows: ``(block [n, n] float32 on CPU, eigenvalues, positivity)`` of
    `composition_term` on `tokens` (rows and columns), its eigenvalues and `composition_term_positivity`.

    All three come from one weight-view request, computed where the weights are.

    Example:
        >>> import circuitwidgets as cw
        >>> block, eigs, p = cw.analysis.composition_term_view(cw.demo_model(), "K", (0, 0), (1, 1), [2, 3, 4])
        >>> block.shape, -1.0 <= p <= 1.0
        (torch.Size([3, 3]), True)
    """
    view = as_view(model)
    (l1, h1), (l2, h2) = _check_term(view, kind, first, second, scaled)
    ids = view.token_ids(tokens)
    request = {
        "view": "composition_term", "kind": kind, "first": (view.layer_index(l1), h1), "second": (view.layer_index(l2), h2),
        "rows": ids, "columns": ids, "scale": view.scale_of(l2) if scaled else 1.0,
    }
    found = view.weight_views([request])[0]
    return found["block"], found["eigenvalues"], float(found["positivity"])
