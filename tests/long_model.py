"""A small model that accepts 8 192 tokens, with a planted previous-token head, for long-prompt tests.

`long_model()` returns ``(model, (layer, head))``: a TransformerLens 4 `TransformerBridge`
(boot_native, attention only, no LayerNorm, learned positions, n_ctx 8 192, d_model 32, 2 heads of 32),
built in under a second. The residual stream holds a position code in its
first 28 dimensions, ``(cos, sin)`` of ``i * pi / 2**f`` for f = 0..13, so that the planted head's
query (the code rotated back one step) and key (the code) score
``sum_f cos(pi (i - 1 - j) / 2**f)``: 14 at ``j = i - 1`` and at most 11 anywhere else in
0..8 191, scaled to a margin of 30 nats. Every other head has small random weights.

Example:
    >>> model, (layer, head) = long_model()
    >>> model.cfg.n_ctx, (layer, head)
    (8192, (0, 1))
"""

from __future__ import annotations

import math

import torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

N_CTX, D_MODEL, N_HEADS, D_HEAD, D_VOCAB = 8192, 32, 2, 32, 64
FREQS = 14  # position code dimensions 0..27
PREV_HEAD = (0, 1)
MARGIN_SCALE = 10.0  # score margin 3 x 10 = 30 nats


def _rotation(angles: torch.Tensor) -> torch.Tensor:
    """Block-diagonal ``[2F, 2F]`` matrix turning each (cos, sin) pair by -angle (row-vector convention)."""
    out = torch.zeros(2 * len(angles), 2 * len(angles), dtype=torch.float64)
    for f, a in enumerate(angles.tolist()):
        c, s = math.cos(a), math.sin(a)
        # [cos x, sin x] @ R = [cos(x - a), sin(x - a)]
        out[2 * f : 2 * f + 2, 2 * f : 2 * f + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    return out


def long_model(seed: int = 0) -> tuple[TransformerBridge, tuple[int, int]]:
    """``(model, (layer, head))`` of the planted previous-token head (module docstring)."""
    cfg = TransformerBridgeConfig(
        d_model=D_MODEL, d_head=D_HEAD, n_heads=N_HEADS, n_layers=2, n_ctx=N_CTX, d_vocab=D_VOCAB,
        attn_only=True, normalization_type=None, seed=seed,
    )
    model = TransformerBridge.boot_native(cfg)
    gen = torch.Generator().manual_seed(seed)
    angles = math.pi / 2 ** torch.arange(FREQS, dtype=torch.float64)
    pos = torch.arange(N_CTX, dtype=torch.float64)[:, None] * angles[None, :]
    W_pos = torch.zeros(N_CTX, D_MODEL)
    W_pos[:, : 2 * FREQS] = torch.stack([pos.cos(), pos.sin()], dim=-1).reshape(N_CTX, 2 * FREQS).float()
    layer, head = PREV_HEAD
    q = torch.zeros(D_MODEL, D_HEAD)
    q[: 2 * FREQS, : 2 * FREQS] = (_rotation(angles) * MARGIN_SCALE * math.sqrt(D_HEAD)).float()
    k = torch.zeros(D_MODEL, D_HEAD)
    k[: 2 * FREQS, : 2 * FREQS] = torch.eye(2 * FREQS)
    params = dict(model.named_parameters())

    def param(suffix: str) -> torch.nn.Parameter:
        (name,) = [n for n in params if n.endswith(suffix)]
        return params[name]

    with torch.no_grad():
        for p in params.values():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        param("pos._original_component.weight").copy_(W_pos)
        attn = f"layers.{layer}._original_component.attn._original_component."
        for short, weight in (("q", q), ("k", k)):
            linear = param(f"{attn}{short}._original_component.weight")  # [n_heads * d_head, d_model]
            linear[head * D_HEAD : (head + 1) * D_HEAD] = weight.T
            param(f"{attn}{short}._original_component.bias")[head * D_HEAD : (head + 1) * D_HEAD] = 0.0
    if not torch.equal(model.W_Q.detach()[layer, head], q) or not torch.equal(model.W_pos.detach(), W_pos):
        raise RuntimeError("planted weights did not land where TransformerLens reads them")
    return model.eval(), PREV_HEAD
