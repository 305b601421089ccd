"""The backend protocol: what every model path answers, whatever runs the model.

A backend *has* five parts, each answering one kind of question:

- `Facts`: sizes, attention layers, the scale each layer divides its scores by, positions, norms;
- ``tokens``: a `circuitwidgets.backends.tokens.TokenAdapter`;
- ``weights()``: the stacked, norm-folded weights (`circuitwidgets.backends.weights.Weights`), or a
  `Missing` that says why there are none (not on this machine; an architecture TransformerLens
  cannot bridge) — never an object whose attributes raise;
- runs: ``patterns``, ``reduced`` (the request vocabulary of `circuitwidgets.in_trace`: overview
  codes, exact blocks, rows, head-score masses), ``logits``, and ``hooked(what)``, the hook-point runs
  (`circuitwidgets.backends.hooked.HookedRuns`: residual terms, values, long-prompt parts) or
  a `Missing`;
- change: ``changed()`` (weights), ``hook_state()`` (hooks) and ``lock`` (serialises runs).

`circuitwidgets.model` chooses a backend for a model (the only module that knows them all) and wraps
it in a `circuitwidgets.model.ModelView`; backends never import each other or that module.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .tokens import TokenAdapter


@dataclass(frozen=True)
class Missing:
    """A part a backend cannot give, and why (shown to the user as it is)."""

    reason: str

    def error(self) -> ValueError:
        return ValueError(self.reason)


@dataclass(frozen=True)
class Facts:
    """What a model is, independent of its weights' values.

    ``attn_layers``: block index of each attention layer (hybrid models skip some);
    ``attn_scales``: what each of those layers divides its attention scores by (``sqrt(d_head)``,
    times ``layer + 1`` for GPT-2's ``scale_attn_by_inverse_layer_idx``); ``n_kv_heads``: key/value
    heads (fewer than ``n_heads`` with grouped-query attention); ``positional_embedding_type``:
    "standard" (learned), "rotary", ... or "unknown".
    """

    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    d_vocab: int
    n_ctx: int
    attn_layers: tuple[int, ...]
    attn_scales: tuple[float, ...]
    positional_embedding_type: str
    normalization_type: str | None
    attn_only: bool
    device: torch.device
    dtype: torch.dtype


class Backend(Protocol):
    """One model path (see the module docstring). `circuitwidgets.model.ModelView` is its only client."""

    facts: Facts
    tokens: TokenAdapter
    lock: threading.RLock
    #: True when patterns are reduced where the model runs (one trace per request; remote models).
    reduces_in_trace: bool
    #: False when the weights are not on this machine (on ``meta``: an nnsight model for NDIF).
    weights_local: bool
    #: What `circuitwidgets.model.view_of` was asked with (rebuilt with the same when stale).
    options: tuple

    @property
    def model(self) -> Callable[[], Any]:
        """Gives the model the backend runs (ReferenceError once a weakly held one is gone)."""

    def weights(self) -> Any: ...
    def hooked(self, what: str) -> Any: ...
    def changed(self) -> bool: ...
    def hook_state(self) -> tuple: ...
    def patterns(self, tokens: torch.Tensor, layers: list[int]) -> torch.Tensor: ...
    def reduced(self, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]: ...
    def logits(self, tokens: torch.Tensor) -> torch.Tensor: ...
