"""Small random models for the tests, built in milliseconds with TransformerLens 4's `boot_native`.

`small_bridge(**overrides)` is the one factory: an attention-only `TransformerBridge` without
LayerNorm (2 layers x 4 heads of 16, d_model 64, 64 tokens, n_ctx 24), with any
`TransformerBridgeConfig` field overridden (``n_key_value_heads=2``, ``normalization_type="LN"``,
``positional_embedding_type="rotary"``, ...). `NARROW` holds the overrides of the narrower shape
the detector, path and model-view tests use.
"""

from __future__ import annotations

from typing import Any

import torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

SMALL: dict[str, Any] = dict(
    d_model=64, d_head=16, n_heads=4, n_layers=2, n_ctx=24, d_vocab=64, attn_only=True, normalization_type=None, seed=0
)
NARROW: dict[str, Any] = dict(d_model=32, d_head=8, n_ctx=40, d_vocab=50)


def small_bridge(**overrides: Any) -> TransformerBridge:
    """A randomly initialised `TransformerBridge` with `SMALL`'s config updated by `overrides`, in eval mode."""
    return TransformerBridge.boot_native(TransformerBridgeConfig(**{**SMALL, **overrides})).eval()


def narrow_bridge(**overrides: Any) -> TransformerBridge:
    """`small_bridge` with d_model 32, d_head 8, n_ctx 40 and 50 tokens (`NARROW`), then `overrides`."""
    return small_bridge(**{**NARROW, **overrides})


def score_from_patterns(patterns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reference head score: the attention mass on the `mask` targets (``[batch, query, key]``), averaged over the
    queries that have a target, then over the sequences that have one; `patterns` ``[batch, ..., query, key]``."""
    batch, seq = mask.shape[0], mask.shape[1]
    extra = patterns.ndim - 3
    mass = (patterns * mask.to(patterns.dtype).reshape(batch, *([1] * extra), seq, seq)).sum(-1)
    has = mask.any(-1)
    if not bool(has.any()):
        raise ValueError("no query in tokens has a target for this kind (e.g. no repeated token); use other tokens")
    per_seq = (mass * has.to(mass.dtype).reshape(batch, *([1] * extra), seq)).sum(-1)
    per_seq = per_seq / has.sum(-1).clamp_min(1).reshape(batch, *([1] * extra))
    return per_seq[has.any(-1)].mean(0)
