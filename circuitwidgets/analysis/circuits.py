"""QK and OV circuits of one head, in the residual basis and in the token basis.

Conventions (TransformerLens row vectors, ``x @ W``):

- ``qk_circuit`` and ``full_qk_circuit`` are the raw bilinear forms ``W_Q W_K^T`` and
  ``W_E W_Q W_K^T W_E^T``, *not* divided by the attention scale, so they agree with
  TransformerLens' ``model.QK`` / ``FactoredMatrix``. Pass ``scaled=True`` to divide by the
  model's attention scale (``cfg.attn_scale``, which is ``sqrt(d_head)`` by default): entries
  are then attention logits, the units `positional_qk` softmaxes.
- Biases and LayerNorm are left out of every circuit (fold LayerNorm into the weights first
  if the model has it, e.g. ``fold_ln=True`` when loading a HookedTransformer).
- Vocabulary-sized circuits come back as `Factored` and are never materialised.

Example:
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.analysis import full_ov_circuit, positional_qk
    >>> model = cw.demo_model()
    >>> full_ov_circuit(model, 1, 0).shape          # [source token, output logit]
    (64, 64)
    >>> positional_qk(model, 0, 0).shape            # [query position, key position]
    torch.Size([64, 64])
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..model import ModelView, as_view
from .factored import Factored

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision weights (analysis loses too much in fp16/bf16), else `dtype`."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def attn_scale(view: ModelView) -> float:
    """What the model divides attention scores by: ``cfg.attn_scale`` when set, else ``sqrt(d_head)``."""
    cfg = view.model.cfg
    scale = getattr(cfg, "attn_scale", -1.0)
    if getattr(cfg, "use_attn_scale", True) and isinstance(scale, (int, float)) and scale > 0:
        return float(scale)
    return math.sqrt(view.d_head)


def head_weights(view: ModelView, layer: int, head: int, *names: str) -> list[torch.Tensor]:
    """The named per-head weights of (block `layer`, `head`), validated, in the working dtype."""
    index = view.layer_index(layer)
    view.check_head(head)
    dtype = work_dtype(view.dtype)
    return [getattr(view, name)[index, head].to(dtype) for name in names]


def _check_scaled(scaled: Any) -> None:
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be a bool; got {scaled!r}")


def qk_circuit(model: Any, layer: int, head: int, *, scaled: bool = False) -> Factored:
    """``W_Q W_K^T`` of one head as a `Factored` ``[d_model (query side), d_model (key side)]``.

    ``x_q @ W_QK @ x_k`` is the (unscaled) attention score of residual ``x_q`` on ``x_k``;
    ``scaled=True`` divides by the model's attention scale.

    Example:
        >>> import circuitwidgets as cw
        >>> cw.analysis.qk_circuit(cw.demo_model(), 0, 1).shape
        (64, 64)
    """
    view = as_view(model)
    _check_scaled(scaled)
    W_Q, W_K = head_weights(view, layer, head, "W_Q", "W_K")
    circuit = Factored(W_Q, W_K.T)
    return circuit / attn_scale(view) if scaled else circuit


def ov_circuit(model: Any, layer: int, head: int) -> Factored:
    """``W_V W_O`` of one head as a `Factored` ``[d_model (read), d_model (written)]``.

    Example:
        >>> import circuitwidgets as cw
        >>> cw.analysis.ov_circuit(cw.demo_model(), 1, 0).rank_bound   # d_head
        16
    """
    view = as_view(model)
    W_V, W_O = head_weights(view, layer, head, "W_V", "W_O")
    return Factored(W_V, W_O)


def full_qk_circuit(model: Any, layer: int, head: int, *, scaled: bool = False) -> Factored:
    """``W_E W_Q W_K^T W_E^T`` as a `Factored` ``[query token, key token]`` (rank <= d_head).

    Token embeddings only (no positions, biases or LayerNorm). ``scaled=True`` divides by the
    model's attention scale, giving attention logits.

    Example:
        >>> import circuitwidgets as cw
        >>> qk = cw.analysis.full_qk_circuit(cw.demo_model(), 1, 0)
        >>> qk.top_k(3, column=5).indices.shape     # query tokens that most attend to token 5
        torch.Size([3])
    """
    view = as_view(model)
    _check_scaled(scaled)
    W_Q, W_K = head_weights(view, layer, head, "W_Q", "W_K")
    W_E = view.W_E.to(W_Q.dtype)
    circuit = Factored(W_E @ W_Q, (W_E @ W_K).T)
    return circuit / attn_scale(view) if scaled else circuit


def full_ov_circuit(model: Any, layer: int, head: int) -> Factored:
    """``W_E W_V W_O W_U`` as a `Factored` ``[source token, output logit]`` (rank <= d_head).

    Row ``s`` is what attending to token ``s`` adds to the logits (direct path, no biases).

    Example:
        >>> import circuitwidgets as cw
        >>> ov = cw.analysis.full_ov_circuit(cw.demo_model(), 1, 0)
        >>> ov.rows([3, 4]).shape
        torch.Size([2, 64])
    """
    view = as_view(model)
    W_V, W_O = head_weights(view, layer, head, "W_V", "W_O")
    return Factored(view.W_E.to(W_V.dtype) @ W_V, W_O @ view.W_U.to(W_O.dtype))


def positional_qk(model: Any, layer: int, head: int, *, softmax: bool = True) -> torch.Tensor:
    """Attention of one head from positions alone, ``[n_ctx query, n_ctx key]`` float32 on CPU.

    ``softmax(mask(W_pos W_Q W_K^T W_pos^T / attn_scale))`` over keys, with the causal mask
    (key > query) applied: each row sums to 1 and a previous-token head shows a stripe just
    below the diagonal. ``softmax=False`` returns the scaled scores with masked entries NaN.
    Needs learned absolute positions: rotary (or no) positional embeddings raise ValueError.

    Example:
        >>> import circuitwidgets as cw
        >>> pattern = cw.analysis.positional_qk(cw.demo_model(), 0, 0)
        >>> bool(torch.allclose(pattern.sum(-1), torch.ones(64)))
        True
    """
    view = as_view(model)
    if not isinstance(softmax, bool):
        raise TypeError(f"softmax must be a bool; got {softmax!r}")
    W_Q, W_K = head_weights(view, layer, head, "W_Q", "W_K")
    if not view.has_learned_positions:
        kind = getattr(view.model.cfg, "positional_embedding_type", None)
        raise ValueError(
            "positional_qk needs learned absolute position embeddings (W_pos), but this model uses "
            f"{kind or 'rotary or no learned'} positions: its attention to positions depends on the "
            "query and key contents, so there is no position-only pattern to show"
        )
    W_pos = view.W_pos.to(W_Q.dtype)
    scores = ((W_pos @ W_Q) @ (W_pos @ W_K).T).float() / attn_scale(view)
    n = scores.shape[0]
    future = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
    if not softmax:
        return scores.masked_fill(future, float("nan")).cpu()
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1).cpu()
