"""The backend protocol: what every model path answers, whatever runs the model.

A backend *has* five parts, each answering one kind of question:

- `Facts`: sizes, attention layers, the scale each layer divides its scores by, positions, norms;
- ``tokens``: a `circuitwidgets.backends.tokens.TokenAdapter`;
- ``weights()``: the stacked, norm-folded weights (`circuitwidgets.backends.weights.Weights`), or a
  `Missing` that says why there are none (not on this machine; an architecture TransformerLens
  cannot bridge) — never an object whose attributes raise;
- runs: ``patterns``, ``reduced`` (the request vocabulary of `circuitwidgets.in_trace`: overview
  codes, exact blocks, rows, head-score masses), ``logits``, and ``hooked(what)``, the hook-point runs
  (`circuitwidgets.backends.hooked.HookedRuns`: residual terms, values, long-prompt parts, runs restarted
  at a block and runs with gradients: `circuitwidgets.backends.resume`) or a `Missing`;
- feature attention: ``feature_terms(tokens, request)``, a head's score (QK) or output (OV) split over a
  dictionary's features (`circuitwidgets.feature_terms`), from one run here or one trace where the model runs;
- weight views: ``weight_views(requests)``, the requests of `circuitwidgets.weight_views` (OV/QK blocks,
  eigenvalues, copying, top-k, skip-trigrams, positional QK, composition) answered wherever the
  weights are: here from `Weights`, or inside a trace next to a remote model's; ``logit_terms``, a
  logit attribution, likewise;
- change: ``changed()`` (weights), ``weights_digest()`` (the weights' contents, short), ``hook_state()``
  (hooks) and ``lock`` (serialises runs);
- capabilities: ``supports(feature)`` for each of `FEATURES`, a `Support` that is false with the
  reason where the backend cannot (a widget greys out the control and shows the reason).

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
class Support:
    """Whether a backend can do a feature: true, or false with the reason (shown to the user as it is).

    Example:
        >>> bool(Support()), bool(Support("no hooks here")), Support("no hooks here").reason
        (True, False, 'no hooks here')
    """

    reason: str = ""

    def __bool__(self) -> bool:
        return not self.reason


#: What a backend may support (`Backend.supports`), and what each means.
FEATURES: dict[str, str] = {
    "patterns": "attention patterns and pattern-based head scores (exact at any length, reduced where the model runs)",
    "weights_here": "the weights as tensors on this machine (ModelView.W_Q ..., factored circuits)",
    "weight_views": "weight-based views (OV/QK blocks, eigenvalues, copying, top-k, skip-trigrams, positional QK, "
    "composition), computed here or where the weights are",
    "hooks": "runs with hooks at sites (ablation, activation patching, values, residual terms)",
    "logit_attribution": "direct logit attribution (every head's, MLP's and embedding's term of a logit)",
    "resume": "runs restarted at a block from a recorded residual stream, unembedding only the positions a metric "
    "reads (fast exact ablation and patching sweeps, path patching)",
    "gradients": "runs with gradients: activations and the gradient of a metric at sites (attribution patching)",
    "feature_attention": "feature-level attention: a head's score and output split over a dictionary's features "
    "(circuitwidgets.feature_terms), computed where the model runs",
}


def check_feature(feature: str) -> None:
    if feature not in FEATURES:
        raise ValueError(f"feature must be one of {', '.join(FEATURES)}; got {feature!r}")


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
    """One model path (see the module docstring), reached only through `circuitwidgets.model.ModelView`."""

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
    def supports(self, feature: str) -> Support: ...
    def weight_views(self, requests: list[dict[str, Any]], report: Any = None) -> list[dict[str, Any]]: ...
    def logit_terms(self, tokens: torch.Tensor, request: dict[str, Any], residual: Any = None) -> dict[str, Any]: ...
    def feature_terms(self, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]: ...
    def changed(self) -> bool: ...
    def weights_digest(self) -> str: ...
    def hook_state(self) -> tuple: ...
    def patterns(self, tokens: torch.Tensor, layers: list[int]) -> torch.Tensor: ...
    def reduced(self, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]: ...
    def logits(self, tokens: torch.Tensor) -> torch.Tensor: ...
