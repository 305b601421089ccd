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

from .. import weight_views
from ..model import ModelView, as_view
from ._arguments import check_pass


def copying_score_of(eigenvalues: torch.Tensor) -> torch.Tensor:
    """The copying score ``sum(lambda) / sum(|lambda|)`` of spectra, over the last dimension.

    For eigenvalues already at hand (e.g. of a sum of heads' circuits); NaN for an all-zero
    spectrum.

    Example:
        >>> import torch
        >>> copying_score_of(torch.tensor([[2 + 0j, 1 + 1j, 1 - 1j], [0j, 0j, 0j]]))
        tensor([0.8284,    nan])
    """
    return weight_views.copying_of(eigenvalues)


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
    request = {"view": "ov_eigenvalues", "layers": list(range(len(view.attn_layers))), "eigenvalues": False}
    return view.weight_views([request])[0]["copying"]


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
    request: dict[str, Any] = {"view": "ov_eigenvalues", "layers": [view.layer_index(layer)]}
    if head is not None:
        request["head"] = view.check_head(head)
    return view.weight_views([request])[0]["eigenvalues"][0]


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
    (`circuitwidgets.row_maxima.diagonal_ranks`, run by `circuitwidgets.weight_views` wherever the weights
    are). A token counts when its own logit is
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
    check_pass(chunk_size, progress)
    stacked = [(view.layer_index(layer), view.check_head(head)) for layer, head in pairs]
    request = {"view": "ov_top_k", "heads": stacked, "ks": ks, "rows": chunk_size}
    hits = view.weight_views([request], progress)[0]["hits"].tolist()
    scores = tuple(h / view.d_vocab for h in hits)
    return scores[0] if isinstance(k, int) else scores


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
