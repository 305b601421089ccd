"""QK and OV circuits of one head or of every head of a layer, in the residual and token bases.

Conventions (TransformerLens row vectors, ``x @ W``):

- ``qk_circuit`` and ``full_qk_circuit`` are the raw bilinear forms ``W_Q W_K^T`` and
  ``W_E W_Q W_K^T W_E^T``, *not* divided by the attention scale, so they agree with
  TransformerLens' ``model.QK`` / ``FactoredMatrix``. Pass ``scaled=True`` to divide by the
  attention scale of the layer (``view.scale_of(layer)``: ``attn_scale`` of the model's config,
  ``sqrt(d_head)`` by default): entries are then attention logits, the units `positional_qk`
  softmaxes.
- ``head=None`` gives every head of the layer at once: a batched `Factored` (or tensor) with a
  leading ``[n_heads]`` dimension. An int head gives that head alone.
- Biases are left out of every circuit. A model's LayerNorm (or RMSNorm) is folded into the
  weights by its `ModelView`, as TransformerLens' ``fold_ln`` does, whether or not the model was
  loaded folded; its per-position scale is left out (``ModelView.norm_note`` says what was done).
- Vocabulary-sized circuits come back as `Factored` and are never materialised; `full_ov_block`
  and `full_qk_block` give their dense blocks on a token subset.

Example:
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.analysis import full_ov_block, full_ov_circuit, positional_qk
    >>> model = cw.demo_model()
    >>> full_ov_circuit(model, 1, 0).shape          # [source token, out token]
    (64, 64)
    >>> full_ov_circuit(model, 1).shape             # every head: [head, source token, out token]
    (4, 64, 64)
    >>> positional_qk(model, 0, 0).shape            # [destination position, source position]
    torch.Size([64, 64])
    >>> full_ov_block(model, 1, [2, 3, 4]).shape    # [head, source token, out token] on 3 tokens
    torch.Size([4, 3, 3])
"""

from __future__ import annotations

from typing import Any

import torch

from ..model import ModelView, as_view, work_dtype
from .factored import Factored


def attn_scale(view: ModelView, layer: int | None = None) -> float:
    """What attention layer `layer` divides its scores by (``sqrt(d_head)``, or ``cfg.attn_scale``, times
    ``layer + 1`` under ``scale_attn_by_inverse_layer_idx``); `layer` None: the one scale every layer shares."""
    return view.attn_scale if layer is None else view.scale_of(layer)


def head_weights(view: ModelView, layer: int, head: int | None, *names: str) -> list[torch.Tensor]:
    """The named weights of (block `layer`, `head`), validated, in the working dtype.

    ``head=None`` gives every head of the layer, with a leading ``[n_heads]`` dimension.
    """
    index = view.layer_index(layer)
    heads = slice(None) if head is None else view.check_head(head)
    dtype = work_dtype(view.dtype)
    return [getattr(view, name)[index, heads].to(dtype) for name in names]


def _check_scaled(scaled: Any) -> None:
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool; got {scaled!r}")


def qk_circuit(model: Any, layer: int, head: int | None = None, *, scaled: bool = False) -> Factored:
    """``W_Q W_K^T`` as a `Factored` ``[d_model (destination/query side), d_model (source/key side)]``.

    ``x_q @ W_QK @ x_k`` is the (unscaled) attention score of residual ``x_q`` on ``x_k``;
    ``scaled=True`` divides by the model's attention scale. ``head=None``: every head of the
    layer, ``[n_heads, d_model, d_model]``.

    Example:
        >>> import circuitwidgets as cw
        >>> cw.analysis.qk_circuit(cw.demo_model(), 0, 1).shape
        (64, 64)
        >>> cw.analysis.qk_circuit(cw.demo_model(), 0).shape
        (4, 64, 64)
    """
    view = as_view(model)
    _check_scaled(scaled)
    W_Q, W_K = head_weights(view, layer, head, "W_Q", "W_K")
    circuit = Factored(W_Q, W_K.mT)
    return circuit / view.scale_of(layer) if scaled else circuit


def ov_circuit(model: Any, layer: int, head: int | None = None) -> Factored:
    """``W_V W_O`` as a `Factored` ``[d_model (read), d_model (written)]`` (``head=None``: ``[n_heads, ...]``).

    Example:
        >>> import circuitwidgets as cw
        >>> cw.analysis.ov_circuit(cw.demo_model(), 1, 0).rank_bound   # d_head
        16
    """
    view = as_view(model)
    W_V, W_O = head_weights(view, layer, head, "W_V", "W_O")
    return Factored(W_V, W_O)


def full_qk_circuit(model: Any, layer: int, head: int | None = None, *, scaled: bool = False) -> Factored:
    """``W_E W_Q W_K^T W_E^T`` as a `Factored` ``[destination (query) token, source (key) token]`` (rank <= d_head).

    Token embeddings only (no positions, biases or LayerNorm). ``scaled=True`` divides by the
    model's attention scale, giving attention logits. ``head=None``: every head of the layer,
    ``[n_heads, d_vocab, d_vocab]`` (its factors hold ``2 n_heads d_vocab d_head`` numbers).

    Example:
        >>> import circuitwidgets as cw
        >>> qk = cw.analysis.full_qk_circuit(cw.demo_model(), 1, 0)
        >>> qk.top_k(3, column=5).indices.shape     # destination tokens that most attend to source 5
        torch.Size([3])
    """
    view = as_view(model)
    _check_scaled(scaled)
    W_Q, W_K = head_weights(view, layer, head, "W_Q", "W_K")
    W_E = view.W_E.to(W_Q.dtype)
    circuit = Factored(W_E @ W_Q, (W_E @ W_K).mT)
    return circuit / view.scale_of(layer) if scaled else circuit


def full_ov_circuit(model: Any, layer: int, head: int | None = None) -> Factored:
    """``W_E W_V W_O W_U`` as a `Factored` ``[source token, out token]`` (rank <= d_head).

    Row ``s`` is what attending to token ``s`` adds to the logits (direct path, no biases).
    ``head=None``: every head of the layer, ``[n_heads, d_vocab, d_vocab]``.

    Example:
        >>> import circuitwidgets as cw
        >>> ov = cw.analysis.full_ov_circuit(cw.demo_model(), 1, 0)
        >>> ov.rows([3, 4]).shape
        torch.Size([2, 64])
    """
    view = as_view(model)
    W_V, W_O = head_weights(view, layer, head, "W_V", "W_O")
    return Factored(view.W_E.to(W_V.dtype) @ W_V, W_O @ view.W_U.to(W_O.dtype))


def full_ov_block(model: Any, layer: int, tokens: Any) -> torch.Tensor:
    """``(W_E W_V W_O W_U)[ids][:, ids]`` of every head of `layer`: ``[n_heads, n, n]`` float32 on CPU.

    `tokens` are ids (or single-token strings, see `ModelView.token_ids`), in the order of the
    rows (source tokens) and columns (out tokens, whose logits move). Built from the ``d_model``-sized
    `ov_circuit`: no vocabulary-wide product.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> block = cw.analysis.full_ov_block(model, 1, [2, 3, 4])
        >>> block.shape
        torch.Size([4, 3, 3])
        >>> bool(torch.allclose(block[0], cw.analysis.full_ov_circuit(model, 1, 0).block([2, 3, 4], [2, 3, 4]), atol=1e-5))
        True
    """
    view = as_view(model)
    ids = view.token_ids(tokens)
    request = {"view": "ov_block", "layer": view.layer_index(layer), "sources": ids, "outputs": ids}
    return view.weight_views([request])[0]["block"]


def full_qk_block(model: Any, layer: int, tokens: Any, *, scaled: bool = True) -> torch.Tensor:
    """``(W_E W_Q W_K^T W_E^T / attn_scale)[ids][:, ids]`` of every head: ``[n_heads, n, n]`` float32 on CPU.

    Rows are destination (query) tokens, columns source (key) tokens, in the order of `tokens` (ids or single-token
    strings). ``scaled=False`` leaves out the division by the attention scale. Built from the
    ``d_model``-sized weights (`circuitwidgets.weight_views`, wherever they are): no vocabulary-wide product.

    Example:
        >>> import circuitwidgets as cw
        >>> cw.analysis.full_qk_block(cw.demo_model(), 0, ["a", "b"]).shape
        torch.Size([4, 2, 2])
    """
    view = as_view(model)
    _check_scaled(scaled)
    ids = view.token_ids(tokens)
    scale = view.scale_of(layer) if scaled else 1.0
    request = {"view": "qk_block", "layer": view.layer_index(layer), "queries": ids, "keys": ids, "scale": scale}
    return view.weight_views([request])[0]["block"]


#: Tokens a rotary model's positional view averages over, and the longest it computes by default.
ROTARY_SAMPLES = 8
ROTARY_POSITIONS = 256


def positional_qk(
    model: Any, layer: int, head: int | None = None, *, softmax: bool = True, positions: int | None = None
) -> torch.Tensor:
    """Attention from positions alone, ``[positions destination (query), positions source (key)]`` float32 on CPU.

    Learned absolute positions: ``softmax(mask(W_pos W_Q W_K^T W_pos^T / attn_scale))`` over
    sources, with the causal mask (source > destination) applied: each row sums to 1 and a
    previous-token head shows a stripe just below the diagonal. ``softmax=False`` returns the
    scaled scores with masked entries NaN.

    Rotary positions: there is no position vector to multiply, so the view is the head's own
    attention on sequences of one repeated token (no BOS), averaged over `ROTARY_SAMPLES` tokens
    (the default token sample of `ModelView.token_subset`). With every position holding the
    same token, every layer's residual is the same at every position, and the scores depend on
    the offset (destination - source) alone, through the head's rotary frequencies. Needs a model
    run; ``softmax=False`` is refused (the run gives patterns, not scores).

    `positions` (default: ``n_ctx`` for learned positions, ``min(n_ctx, ROTARY_POSITIONS)`` for
    rotary) keeps the first positions; each row is exact whatever the cut.
    ``head=None``: every head of the layer, ``[n_heads, positions, positions]``.
    Other models (no positional embedding at all) raise ValueError.

    Example:
        >>> import circuitwidgets as cw
        >>> pattern = cw.analysis.positional_qk(cw.demo_model(), 0, 0)
        >>> bool(torch.allclose(pattern.sum(-1), torch.ones(64)))
        True
    """
    view = as_view(model)
    if not isinstance(softmax, bool):
        raise TypeError(f"softmax must be a bool; got {softmax!r}")
    index = view.layer_index(layer)
    one = None if head is None else view.check_head(head)
    n = _positions(view, positions, ROTARY_POSITIONS if view.has_rotary else view.n_ctx)
    if view.has_rotary:
        if not softmax:
            raise ValueError("positional_qk(softmax=False) needs learned positions: a rotary model's view is its patterns")
        return _rotary_positional(view, layer, one, n)
    if not view.has_learned_positions:
        raise view.no_positions_error("positional_qk")
    request = {"view": "positional_qk", "layer": index, "positions": n, "softmax": softmax, "scale": view.scale_of(layer)}
    if one is not None:
        request["head"] = one
    tril = view.weight_views([request])[0]["tril"]  # (where the weights are remote, only the lower triangles travel)
    out = torch.full((*tril.shape[:-1], n, n), 0.0 if softmax else float("nan"))
    rows, cols = torch.tril_indices(n, n)
    out[..., rows, cols] = tril
    return out


def _positions(view: ModelView, positions: Any, default: int) -> int:
    if positions is None:
        return min(view.n_ctx, default)
    if isinstance(positions, bool) or not isinstance(positions, int) or not 1 <= positions <= view.n_ctx:
        raise ValueError(f"positions={positions!r} is out of range: 1..{view.n_ctx} (n_ctx)")
    return positions


def _rotary_positional(view: ModelView, layer: int, head: int | None, n: int) -> torch.Tensor:
    """Mean pattern of `layer` over sequences ``[t] * n`` of `ROTARY_SAMPLES` sampled tokens, averaged where the model
    runs (a remote model sends one ``[n_heads, n, n]`` back, not one per sample)."""
    ids, _ = view.token_subset()
    tokens = torch.tensor(ids[:ROTARY_SAMPLES], device=view.device)[:, None].expand(-1, n)
    mean = view.reduced(tokens, {layer: {"block": (head, 0, n, 0, n, 1), "batch_mean": True}})[layer]["block"][0]
    return (mean if head is None else mean[0]).float().cpu()
