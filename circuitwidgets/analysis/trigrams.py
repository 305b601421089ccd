"""Skip-trigrams of one head: "[source] … [destination] → [out]", read from the circuit's factors.

A one-layer attention-only transformer is a sum of skip-trigrams (Elhage et al., 2021): a head
at **destination** token ``d`` (the query) attends to an earlier **source** token ``s`` (the
key) by its QK circuit, and attending to ``s`` raises the logit of an **out** token ``o`` by
its OV circuit. For a head and a source token:

- destinations: column ``s`` of the full QK circuit ``W_E W_Q W_Kᵀ W_Eᵀ / attn_scale``
  (query ``d`` × key ``s``), in attention-logit units;
- outs: row ``s`` of the full OV circuit ``W_E W_V W_O W_U``, in logit units.

Token embeddings only: the positional term (``W_pos`` in the query and key) and biases are left
out; LayerNorm is folded in (``ModelView.norm_note``). The lists of one source are chains of matrix-vector products with the
weights, and the ranking of all sources passes over the circuits' thin factors in chunks: never
the ``d_vocab × d_vocab`` matrix.

**Triple score** of ``(d, o)`` for source ``s``: ``QK[d, s] · OV[s, o]``, the attention logit
of the destination on the source times the logit the source moves.

**Strength of a source** (`skip_trigram_sources`):
``max(0, max_d QK[d, s]) · max(0, max_o OV[s, o])``, the product of its top scaled-QK value and
its top OV value. When both are positive it is the score of the source's strongest triple (the
product is largest for the top destination and the top out), so the ranking puts first the
sources whose best trigram is strongest; a source that no destination attends to with a positive
logit, or whose row raises no logit, gets 0. (The plain product of the top values was preferred
to a softmax-weighted form: it needs nothing beyond the two maxima, so the ranking of all
sources costs two chunked passes over the factors; and raw QK values are what the QK circuit
holds, no context of other keys being assumed.)

On models with more than one layer, or with MLPs, these are the head's direct-path trigrams on
token embeddings: exact only for a one-layer attention-only model (deeper heads read the
residual stream, not only token embeddings, and their output passes through later layers).

Example:
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.analysis import skip_trigram_sources, skip_trigrams
    >>> model = cw.demo_model()
    >>> top = skip_trigram_sources(model, 1, 0, k=3)
    >>> top.sources.shape, bool((top.strengths[:-1] >= top.strengths[1:]).all())
    (torch.Size([3]), True)
    >>> lists = skip_trigrams(model, 1, 0, int(top.sources[0]), k=5)
    >>> lists.destinations.shape, lists.outs.shape
    (torch.Size([5]), torch.Size([5]))
    >>> bool(torch.isclose(lists.strength, top.strengths[0]))
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from ..model import ModelView, as_view
from ._arguments import check_pass


class SourceTrigrams(NamedTuple):
    """The skip-trigrams of one source token (`skip_trigrams`); tensors on the CPU.

    Attributes:
        source: the source token's id.
        destinations, destination_values: ids (long ``[k]``) of the destination (query) tokens
            that attend most to the source, and their attention logits ``QK[d, s] / attn_scale``
            (float32 ``[k]``, largest first).
        outs, out_values: ids of the out tokens whose logits the source raises most, and the
            logits ``OV[s, o]`` (largest first).
    """

    source: int
    destinations: torch.Tensor
    destination_values: torch.Tensor
    outs: torch.Tensor
    out_values: torch.Tensor

    @property
    def strength(self) -> torch.Tensor:
        """``max(0, top destination value) · max(0, top out value)`` (0-d float32), as in `skip_trigram_sources`."""
        return self.destination_values[0].clamp_min(0) * self.out_values[0].clamp_min(0)

    def triples(self, k: int | None = None) -> list[tuple[int, int, float]]:
        """The `k` strongest ``(destination, out, score)`` among these destinations × outs.

        ``score = QK[d, s] · OV[s, o]``, largest first (ties: the earlier destination, then out);
        default `k`: as many as there are destinations. A copying triple has ``out == source``.

        Example:
            >>> import circuitwidgets as cw
            >>> lists = cw.analysis.skip_trigrams(cw.demo_model(), 1, 0, "a", k=4)
            >>> [len(t) for t in lists.triples(2)]
            [3, 3]
        """
        count = len(self.destinations) if k is None else k
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"k must be a positive int; got {k!r}")
        scores = self.destination_values[:, None] * self.out_values[None, :]
        order = torch.sort(scores.flatten(), descending=True, stable=True).indices[:count]
        n_out = len(self.outs)
        return [
            (int(self.destinations[i // n_out]), int(self.outs[i % n_out]), float(scores.flatten()[i]))
            for i in order.tolist()
        ]


class TrigramSources(NamedTuple):
    """Source tokens ranked by trigram strength (`skip_trigram_sources`); tensors on the CPU, ``[k]``.

    Attributes:
        sources: source token ids, strongest first (ties: the smaller id first).
        strengths: ``max(0, top_qk) · max(0, top_ov)`` of each (float32).
        top_qk, destinations: each source's largest attention logit ``max_d QK[d, s] / attn_scale``
            and the destination (query) token that has it.
        top_ov, outs: each source's largest logit ``max_o OV[s, o]`` and the out token that has it.
    """

    sources: torch.Tensor
    strengths: torch.Tensor
    top_qk: torch.Tensor
    destinations: torch.Tensor
    top_ov: torch.Tensor
    outs: torch.Tensor


def _check_k(k: Any, d_vocab: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int; got {k!r}")
    if not 1 <= k <= d_vocab:
        raise ValueError(f"k={k} is out of range: 1..{d_vocab} (d_vocab)")
    return k


def source_id(view: ModelView, source: Any) -> int:
    """The id of `source`: a token id, or a string that is exactly one token (``"#<id>"`` names an id).

    Without a tokenizer, a string of digits is an id too.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> view = cw.as_view(model)
        >>> source_id(view, "a"), source_id(view, 5), source_id(view, "#7")
        (2, 5, 7)
    """
    if isinstance(source, torch.Tensor) and source.ndim == 0 and not source.dtype.is_floating_point:
        source = int(source)
    if isinstance(source, str) and len(source) > 1 and source[0] == "#" and source[1:].isdigit():
        source = int(source[1:])
    elif isinstance(source, str) and view.tokenizer is None:
        if not source.strip().isdigit():
            raise TypeError(f"source {source!r} is a string but this model has no tokenizer: give a token id (or '#<id>')")
        source = int(source)  # without a tokenizer, digits typed in a widget are an id
    if isinstance(source, bool) or not isinstance(source, (int, str)):
        raise TypeError(f"source must be a token id or a single-token string; got {source!r}")
    return view.token_ids([source])[0]


def skip_trigrams(model: Any, layer: int, head: int, source: Any, k: int = 10) -> SourceTrigrams:
    """The top `k` destinations and top `k` outs of one source token, for the head (`layer`, `head`).

    Destinations: the largest entries of column `source` of the full QK circuit
    ``W_E W_Q W_Kᵀ W_Eᵀ / attn_scale`` (destination (query) × source (key), attention logits).
    Outs: the largest entries of row `source` of the full OV circuit ``W_E W_V W_O W_U``. Token
    embeddings only: the positional term and biases are left out (LayerNorm folded in). Each list is a
    chain of matrix-vector products (``W_E (W_Q (W_Kᵀ e_s))`` and ``((e_s W_V) W_O) W_U``, with
    ``e_s`` the source's embedding): ``d_vocab × d_model`` work, never ``d_vocab × d_vocab``.

    `source`: a token id or a string that is exactly one token (``"#<id>"`` also names an id).
    Exact skip-trigrams only for a one-layer attention-only model (see the module docstring).

    Example:
        >>> import circuitwidgets as cw
        >>> lists = cw.analysis.skip_trigrams(cw.demo_model(), 1, 0, "a", k=3)
        >>> lists.source, lists.destinations.shape, bool(lists.out_values[0] >= lists.out_values[1])
        (2, torch.Size([3]), True)
    """
    view = as_view(model)
    index, head = view.layer_index(layer), view.check_head(head)
    s = source_id(view, source)
    k = _check_k(k, view.d_vocab)
    request = {"view": "skip_trigrams", "layer": index, "head": head, "source": s, "k": k, "scale": view.scale_of(layer)}
    found = view.weight_views([request])[0]
    return SourceTrigrams(s, found["destinations"], found["destination_values"], found["outs"], found["out_values"])


def skip_trigram_sources(
    model: Any,
    layer: int,
    head: int,
    k: int = 20,
    *,
    chunk_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TrigramSources:
    """The `k` source tokens with the strongest skip-trigrams for head (`layer`, `head`).

    Strength of source ``s`` = ``max(0, max_d QK[d, s]) · max(0, max_o OV[s, o])``, with
    ``QK = W_E W_Q W_Kᵀ W_Eᵀ / attn_scale`` (destination (query) × source (key); token
    embeddings only, no positional term) and ``OV = W_E W_V W_O W_U`` (source × out): the
    score ``QK[d, s] · OV[s, o]`` of its strongest triple when both maxima are positive (the
    module docstring says why this form). Every column maximum of QK and row maximum of OV is
    computed from the factors `chunk_size` rows at a time (default on the CPU: 2**23 entries,
    32 MB; on a GPU 2**27), never the whole matrix: two passes of ``d_vocab² · d_head``
    multiply-adds, on the CPU in cache-sized tiles shared among the intra-op threads
    (`circuitwidgets.row_maxima.row_max`, run by `circuitwidgets.weight_views` wherever the weights are). A
    maximum held by several tokens names the
    smallest id, as ``torch.max`` does.

    Args:
        k: how many sources to return (1..d_vocab; ``d_vocab`` ranks them all).
        progress: called after each chunk as ``progress(rows_done, 2 * d_vocab)``; an exception
            it raises stops the pass and propagates (how a caller cancels).

    Example:
        >>> import circuitwidgets as cw
        >>> ranked = cw.analysis.skip_trigram_sources(cw.demo_model(), 1, 0, k=64)
        >>> sorted(ranked.sources.tolist()) == list(range(64))
        True
    """
    view = as_view(model)
    index, head = view.layer_index(layer), view.check_head(head)
    k = _check_k(k, view.d_vocab)
    check_pass(chunk_size, progress)
    request = {"view": "skip_trigram_sources", "layer": index, "head": head, "k": k, "rows": chunk_size,
               "scale": view.scale_of(layer)}
    found = view.weight_views([request], progress)[0]
    return TrigramSources(**found)
