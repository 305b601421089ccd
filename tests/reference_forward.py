"""The demo model's forward pass written out in plain torch from the shipped weights.

Both TransformerLens versions must compute exactly this: tests/test_demo.py checks the
TransformerLens 4 bridge against it, tests/tl2 the TransformerLens 2.x HookedTransformer built
from `circuitwidgets.demo.hooked_state`, so the conversion between layouts is pinned.
"""

from __future__ import annotations

import math

import torch

from circuitwidgets.demo import MODELS, _state


def reference_logits(tokens: torch.Tensor, name: str = "2l") -> torch.Tensor:
    """Logits ``[batch, seq, d_vocab]`` of attention-only demo model `name` (default: the two-layer one)."""
    w = _state(name)
    config = MODELS[name][0]
    n_heads, d_head = config["n_heads"], config["d_head"]
    batch, seq = tokens.shape
    x = w["embed.weight"][tokens] + w["pos_embed.weight"][:seq]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    for layer in range(config["n_layers"]):
        p = f"blocks.{layer}.attn."
        q, k, v = (
            (x @ w[f"{p}{n}.weight"].T + w[f"{p}{n}.bias"]).view(batch, seq, n_heads, d_head).transpose(1, 2)
            for n in ("q", "k", "v")
        )
        scores = (q @ k.transpose(-1, -2) / math.sqrt(d_head)).masked_fill(~causal, float("-inf"))
        z = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, n_heads * d_head)
        x = x + z @ w[f"{p}o.weight"].T + w[f"{p}o.bias"]
    return x @ w["unembed.weight"].T + w["unembed.bias"]
