"""Does a head copy? Eigenvalues and top-k accuracy of its full OV circuit ``W_E W_V W_O W_U``.

The full OV circuit is ``d_vocab x d_vocab`` but has rank <= d_head: with ``A = W_E W_V`` and
``B = W_O W_U`` its non-zero eigenvalues are those of the ``d_head x d_head`` matrix
``B A = W_O (W_U W_E) W_V``. For whole layers we form ``W_U W_E`` (``d_model x d_model``,
one pass over the vocabulary, kept by the `ModelView` until the weights change) and then only
small per-head products.

The copying score and top-k accuracy do not change when a weight matrix is multiplied by a
positive number, so a factor whose largest entry lies outside ``2**-16 .. 2**16`` is first
scaled by a power of two (exact, see `circuitwidgets.model.unit_scaled`): weights of 1e-30 or
1e30 give the same scores as weights of 1, where the plain float32 products would underflow to
0 or overflow to Inf. Eigenvalues come back at their true scale, in float64.

Example:
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.analysis import copying_scores, ov_top_k_accuracy
    >>> model = cw.demo_model()
    >>> copying_scores(model).shape                  # [n_attn_layers, n_heads]
    torch.Size([2, 4])
    >>> 0.0 <= ov_top_k_accuracy(model, 1, 0, k=5) <= 1.0
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..backends import remote_weights
from ..model import ModelView, as_view, times_pow2, unit_scaled, work_dtype
from .circuits import head_weights, weights_elsewhere
from .factored import Factored
from .row_maxima import default_rows, diagonal_ranks

# Rows of the full OV circuit per block (progress report) in ov_top_k_accuracy on the CPU: 2**25
# entries, whatever the vocabulary size (GPT-2: 667 rows of 50 257), computed in cache-sized tiles.
_CHUNK_ENTRIES = 2**25


def copying_score_of(eigenvalues: torch.Tensor) -> torch.Tensor:
    """The copying score ``sum(lambda) / sum(|lambda|)`` of spectra, over the last dimension.

    For eigenvalues already at hand (e.g. of a sum of heads' circuits); NaN for an all-zero
    spectrum.

    Example:
        >>> import torch
        >>> copying_score_of(torch.tensor([[2 + 0j, 1 + 1j, 1 - 1j], [0j, 0j, 0j]]))
        tensor([0.8284,    nan])
    """
    total = eigenvalues.sum(-1).real
    magnitude = eigenvalues.abs().sum(-1)
    return torch.where(magnitude > 0, total / magnitude, torch.full_like(total, float("nan")))


def copying_scores(model: Any) -> torch.Tensor:
    """Copying score of every head, ``[n_attn_layers, n_heads]`` float32 on CPU, in [-1, 1].

    ``sum(lambda) / sum(|lambda|)`` over the eigenvalues of the full OV circuit in the token
    basis (computed from the ``d_head x d_head`` matrices ``W_O W_U W_E W_V``; eigenvalues in
    float64). 1 means the head raises the logit of the token it attends to; NaN for a head
    whose full OV circuit is zero. Rows follow ``view.attn_layers``.

    Example:
        >>> import circuitwidgets as cw
        >>> scores = cw.analysis.copying_scores(cw.demo_model())
        >>> bool(((scores >= -1) & (scores <= 1)).all())
        True
    """
    view = as_view(model)
    if weights_elsewhere(view):
        return remote_weights.remote_copying_scores(view.backend)
    return copying_score_of(_token_basis_eigenvalues(view, slice(None))[0]).float()


def _token_basis_eigenvalues(view: ModelView, layers: int | slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues of ``W_O (W_U W_E) W_V`` for the stacked layers `layers`, as ``(values, exponent)``.

    The eigenvalues are ``values * 2**exponent``: `values` complex128 ``[..., n_heads, d_head]``
    on CPU, from factors scaled by powers of two (`unit_scaled`), and `exponent` int64
    ``[..., n_heads]`` the scale taken out.
    """
    unembed_embed, exponent = view.unembed_embed_scaled()  # d_model x d_model, cached (GPT-2: 59 GFLOP once)
    W_V, e_V = unit_scaled(view.W_V[layers].to(unembed_embed.dtype), dim=(-2, -1), slack=16)
    W_O, e_O = unit_scaled(view.W_O[layers].to(unembed_embed.dtype), dim=(-2, -1), slack=16)
    # the d_head x d_head eigenproblems are CPU work: move the d_model-sized factors, not the other way
    values = Factored(W_V.cpu(), (W_O @ unembed_embed).cpu()).eigenvalues()
    return values, (e_V + e_O).flatten(-3) + exponent


def ov_eigenvalues(model: Any, layer: int, head: int | None = None) -> torch.Tensor:
    """Non-zero eigenvalues of the full OV circuit, complex128 ``[d_head]`` on CPU, largest magnitude first.

    Eigenvalues of ``W_O W_U W_E W_V`` (``d_head x d_head``); these are the eigenvalues of
    ``W_E W_V W_O W_U`` other than its ``d_vocab - d_head`` zeros.

    ``head=None`` gives every head of the layer, ``[n_heads, d_head]``, from ``W_U W_E``
    (``d_model x d_model``), formed once per model and weight version and kept by its
    `ModelView`. Measured on GPT-2 small's shape: forming it costs about three single heads,
    and then a whole layer of 12 heads costs about a quarter of one single head. One int head
    takes two thin passes over the vocabulary instead (no ``d_model x d_model`` product); the
    values agree to rounding (eigenvalues of equal magnitude may come in either order).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> cw.analysis.ov_eigenvalues(model, 1, 0).shape
        torch.Size([16])
        >>> cw.analysis.ov_eigenvalues(model, 1).shape          # every head of layer 1
        torch.Size([4, 16])
    """
    view = as_view(model)
    if weights_elsewhere(view):
        return remote_weights.remote_ov_eigenvalues(view.backend, view.check_layers([layer])[0], head)
    if head is None:
        values, exponent = _token_basis_eigenvalues(view, view.layer_index(layer))
        return times_pow2(values, exponent[..., None])
    W_V, W_O = head_weights(view, layer, head, "W_V", "W_O")
    W_V, e_V = unit_scaled(W_V, slack=16)
    W_O, e_O = unit_scaled(W_O, slack=16)
    W_E, e_E = unit_scaled(view.W_E.to(W_V.dtype), slack=16)  # copied only for tiny or huge embeddings
    W_U, e_U = unit_scaled(view.W_U.to(W_V.dtype), slack=16)
    # W_O (W_U (W_E W_V)): two thin passes over the vocabulary, no d_model x d_model product
    small = W_O @ (W_U @ (W_E @ W_V))
    values = torch.linalg.eigvals(small.to("cpu", torch.float64))
    return times_pow2(values[values.abs().argsort(descending=True)], e_V + e_O + e_E + e_U)


def _heads_argument(view: ModelView, layer: Any, head: Any, heads: Any) -> list[tuple[int, int]]:
    if heads is None:
        if layer is None or head is None:
            raise TypeError("give layer and head, or heads=[(layer, head), ...]")
        return [(layer, head)]
    if layer is not None or head is not None:
        raise TypeError("give either layer and head, or heads=[...], not both")
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence) or not heads:
        raise TypeError(f"heads must be a non-empty list of (layer, head) pairs; got {heads!r}")
    pairs = []
    for pair in heads:
        if not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(f"heads must hold (layer, head) pairs; got {pair!r}")
        pairs.append((pair[0], pair[1]))
    return pairs


def ov_top_k_accuracy(
    model: Any,
    layer: int | None = None,
    head: int | None = None,
    k: int | Sequence[int] = 1,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    chunk_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> float | tuple[float, ...]:
    """Fraction of source tokens whose own logit is among the `k` largest of their full-OV row.

    Row ``s`` of ``W_E W_V W_O W_U`` is computed in chunks of `chunk_size` rows (default: as
    many as fit in 2**25 entries on the CPU, 2**27 on a GPU), never the whole matrix; on the CPU
    in cache-sized tiles shared among the intra-op threads
    (`circuitwidgets.analysis.row_maxima.diagonal_ranks`). A token counts when its own logit is
    strictly above the k-th largest of the other entries of its row, i.e. fewer than `k` other
    entries are >= it: ties count against it, so a row whose own logit ties for the k-th place is
    a miss, and an all-zero circuit scores 0 (not 100 %) for every ``k < d_vocab``
    (``k = d_vocab`` counts every token with a finite own logit). A row is counted only until it
    has ``max(k)`` entries not below its own logit: rows that are misses for every `k` are
    skipped from then on, so a head that copies few tokens takes a fraction of a full pass.
    ``heads=[(layer, head), ...]`` scores the sum of several heads' circuits (e.g. two
    induction heads that share the copying work) instead of one. The factors are scaled by
    powers of two first (the same for every head of the sum), so tiny or huge weights give the
    accuracy of the same weights at a usual scale.

    Args:
        k: an int, or several (e.g. ``(1, 5)``): then one pass over the vocabulary answers all
            of them and a tuple of accuracies comes back, in the order given.
        progress: called after each chunk as ``progress(rows_done, d_vocab)``; an exception it
            raises stops the pass and propagates (how a caller cancels).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> one = cw.analysis.ov_top_k_accuracy(model, 1, 0)
        >>> top1, top5 = cw.analysis.ov_top_k_accuracy(model, 1, 0, k=(1, 5))
        >>> top1 == one and top5 >= top1
        True
        >>> both = cw.analysis.ov_top_k_accuracy(model, heads=[(1, 0), (1, 1)])
    """
    view = as_view(model)
    pairs = _heads_argument(view, layer, head, heads)
    ks = _check_ks(view, k)
    if weights_elsewhere(view):  # (one request; the server has no progress to show here)
        return remote_weights.remote_ov_top_k_accuracy(view.backend, k=k if isinstance(k, int) else tuple(ks), heads=pairs)
    if chunk_size is None:
        chunk_size = default_rows(_CHUNK_ENTRIES, view.d_vocab, view.W_E.device)
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be an int or None; got {chunk_size!r}")
    elif chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size} must be >= 1")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None; got {progress!r}")

    circuit = _summed_circuit(view, pairs)
    vocab = view.d_vocab
    report = None if progress is None else (lambda done: progress(done, vocab))
    with torch.no_grad():
        # per row, how many other entries are not below the own logit (ties count against it);
        # exact below max(ks): a row that reaches it is a miss at every k, and is skipped from then on
        ranks = diagonal_ranks(circuit.left.contiguous(), circuit.right.contiguous(), chunk_size, max(ks), report)
    hits = [int((ranks < kk).sum()) for kk in ks]
    scores = tuple(h / view.d_vocab for h in hits)
    return scores[0] if isinstance(k, int) else scores


def _summed_circuit(view: ModelView, pairs: list[tuple[int, int]]) -> Factored:
    """``sum over pairs of W_E W_V W_O W_U`` as one `Factored`, up to one positive power-of-two factor.

    Each weight is scaled by one power of two shared by all the heads (`unit_scaled`), so the
    heads keep their relative sizes and no product under- or overflows.
    """
    layers = [view.layer_index(layer) for layer, _ in pairs]
    heads = [view.check_head(head) for _, head in pairs]
    dtype = work_dtype(view.dtype)
    W_V, _ = unit_scaled(view.W_V[layers, heads].to(dtype), slack=16)  # [pairs, d_model, d_head]
    W_O, _ = unit_scaled(view.W_O[layers, heads].to(dtype), slack=16)
    W_E, _ = unit_scaled(view.W_E.to(dtype), slack=16)  # copied only for tiny or huge embeddings
    W_U, _ = unit_scaled(view.W_U.to(dtype), slack=16)
    # sum_h (W_E W_V^h)(W_O^h W_U) = [W_E W_V^1, W_E W_V^2, ...] @ [W_O^1 W_U; W_O^2 W_U; ...]
    left = torch.cat([W_E @ w for w in W_V], dim=1)
    right = torch.cat([w @ W_U for w in W_O], dim=0)
    return Factored(left, right)


def _check_ks(view: ModelView, k: Any) -> list[int]:
    ks = [k] if isinstance(k, int) and not isinstance(k, bool) else k
    if not isinstance(ks, Sequence) or isinstance(ks, str) or not ks:
        raise TypeError(f"k must be an int or a non-empty sequence of ints; got {k!r}")
    for kk in ks:
        if isinstance(kk, bool) or not isinstance(kk, int):
            raise TypeError(f"k must be an int or a non-empty sequence of ints; got {k!r}")
        if not 1 <= kk <= view.d_vocab:
            raise ValueError(f"k={kk} is out of range: 1..{view.d_vocab} (d_vocab)")
    return list(ks)
