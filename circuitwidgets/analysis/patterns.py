"""Attention patterns of a prompt or of token ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..model import as_view


def attention_patterns(model: Any, prompt_or_tokens: Any, layers: Sequence[int] | None = None) -> torch.Tensor:
    """Attention patterns of one sequence, ``[n_layers, n_heads, destination (query), source (key)]`` (float32).

    `prompt_or_tokens` is a string (tokenised with BOS) or ``[seq]`` / ``[1, seq]`` token ids.
    `layers` selects attention layers by block index (default: all, in order).

    Example:
        >>> import circuitwidgets as cw
        >>> cw.analysis.attention_patterns(cw.demo_model(), "abcabc").shape
        torch.Size([2, 4, 7, 7])
    """
    view = as_view(model)
    tokens = view.tokens_of(prompt_or_tokens)
    if tokens.shape[0] != 1:
        raise ValueError(f"prompt_or_tokens must be one sequence; got a batch of {tokens.shape[0]}")
    return view.patterns(tokens, layers)[0]
