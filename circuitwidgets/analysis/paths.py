"""Virtual heads and the path expansion of attention-only models with frozen patterns.

Without LayerNorm and MLPs, and with each head's attention pattern held fixed at its value on
the given tokens, the logits are a sum of paths from the embedding to the unembedding:
the direct path, one term per head, and for two layers one *virtual head* per pair of heads
(an earlier head's output read by a later head's values). With the patterns frozen this sum
is exact, so each term says how much of each logit that path contributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..model import ModelView, as_view

Head = tuple[int, int]


def _one_sequence(view: ModelView, tokens: Any) -> torch.Tensor:
    tokens = view.tokens_of(tokens)
    if tokens.shape[0] != 1:
        raise ValueError(f"tokens must be one sequence; got a batch of {tokens.shape[0]}")
    return tokens


def virtual_head_pattern(model: Any, tokens: Any, first: Head, second: Head) -> torch.Tensor:
    """Pattern of the virtual head ``first -> second``, ``[query, key]`` = ``A^second @ A^first``.

    The later head's pattern is on the left: query i of `second` reads position m, which
    itself gathered from key j through `first`. Rows sum to 1, like any attention pattern.
    `first` and `second` are ``(layer, head)`` with ``first``'s layer earlier (block indices).
    `tokens` is a prompt or one sequence of token ids.

    Example:
        >>> import circuitwidgets as cw
        >>> A = cw.analysis.virtual_head_pattern(cw.demo_model(), "abcabc", (0, 1), (1, 2))
        >>> A.shape, bool(torch.allclose(A.sum(-1), torch.ones(7)))
        (torch.Size([7, 7]), True)
    """
    view = as_view(model)
    first, second = view.check_pair(first, second)
    tokens = _one_sequence(view, tokens)
    patterns = view.patterns(tokens, layers=[first[0], second[0]])[0]
    return patterns[1, second[1]] @ patterns[0, first[1]]


@dataclass
class PathExpansion:
    """Logit contributions ``[seq, d_vocab]`` of every path; `total()` sums them to the logits.

    Attributes:
        direct: ``[seq, d_vocab]`` the embedding straight to the unembedding, ``x0 W_U``.
        heads: ``[n_layers, n_heads, seq, d_vocab]`` each head alone, ``A^h x0 W_OV^h W_U``.
        virtual: ``{(first, second): [seq, d_vocab]}`` each pair of heads in layers 0 and 1,
            ``A^second A^first x0 W_OV^first W_OV^second W_U`` (empty for one layer).
        bias: ``[d_vocab]`` the constant rest, the same at every position: ``b_U``, the heads'
            value biases through ``W_O``, ``b_O`` and, for two layers, the layer-0 bias read by
            the layer-1 heads' OV circuits (rows of a pattern sum to 1, so it is constant).
    ``x0`` is the residual stream entering block 0 (token plus positional embedding).
    """

    direct: torch.Tensor
    heads: torch.Tensor
    virtual: dict[tuple[Head, Head], torch.Tensor] = field(default_factory=dict)
    bias: torch.Tensor | None = None

    def total(self) -> torch.Tensor:
        """Sum of all terms, ``[seq, d_vocab]``: the model's logits on these tokens."""
        out = self.direct + self.heads.sum((0, 1))
        for term in self.virtual.values():
            out = out + term
        return out if self.bias is None else out + self.bias


def path_expansion(model: Any, tokens: Any, *, pairs: list[tuple[Head, Head]] | None = None) -> PathExpansion:
    """Split an attention-only model's logits on `tokens` into paths (see `PathExpansion`).

    Works for models with one or two attention layers, no LayerNorm and no MLPs (a ValueError
    otherwise): with more layers the number of paths grows combinatorially and a pairwise
    expansion is no longer exact. The patterns are the model's own on `tokens` (one run).
    `pairs` restricts the virtual heads computed (default: all ``n_heads**2`` pairs of a
    two-layer model); the bias term then still makes `total()` exact only with all pairs.

    Cost: every term is ``[seq, d_vocab]`` float32, ``(1 + n_heads * n_layers + len(pairs)) *
    seq * d_vocab * 4`` bytes in all — 20 MB for 4 heads, 64 tokens and a 4 096-token
    vocabulary, but 1.5 GB for 12 heads over 50 257 tokens at 50 positions (pass `pairs`).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> paths = cw.analysis.path_expansion(model, "abcabc")
        >>> paths.heads.shape[:2], len(paths.virtual)
        (torch.Size([2, 4]), 16)
        >>> bool(torch.allclose(paths.total(), model(cw.ModelView(model).to_tokens("abcabc"))[0], atol=1e-4))
        True
    """
    view = as_view(model)
    if view.has_layernorm:
        raise ValueError(
            f"path_expansion needs a model without LayerNorm; this one has normalization_type="
            f"{view.normalization_type!r}, which makes the paths non-linear"
        )
    if not view.attn_only or len(view.attn_layers) != view.n_layers:
        raise ValueError("path_expansion needs an attention-only model (cfg.attn_only=True, no MLPs)")
    if view.n_layers not in (1, 2):
        raise ValueError(f"path_expansion supports one or two layers; this model has n_layers={view.n_layers}")
    tokens = _one_sequence(view, tokens)
    if pairs is None:
        pairs = [((0, h1), (1, h2)) for h1 in range(view.n_heads) for h2 in range(view.n_heads)] if view.n_layers == 2 else []
    else:
        pairs = [view.check_pair(a, b) for a, b in pairs]

    x0, A = view.embedding_and_patterns(tokens)
    x0, A = x0[0], A[0]  # [seq, d_model], [layers, heads, q, k]
    with torch.no_grad():
        W_V, W_O, W_U = view.W_V.float(), view.W_O.float(), view.W_U.float()
        # what each head writes per position before mixing: x0 W_V W_O, [layers, heads, seq, d_model]
        written = torch.einsum("sm,lhmd,lhdn->lhsn", x0, W_V, W_O)
        moved = A @ written  # A^h x0 W_OV^h
        heads = moved @ W_U
        virtual = {}
        for first, second in pairs:
            # A^2 (A^1 x0 W_OV^1) W_OV^2 W_U
            path = A[1, second[1]] @ (moved[0, first[1]] @ W_V[1, second[1]] @ W_O[1, second[1]])
            virtual[(first, second)] = path @ W_U
        # constant per layer: sum_h b_V^h W_O^h + b_O (pattern rows sum to 1)
        const = torch.einsum("lhd,lhdn->ln", view.b_V.float(), W_O) + view.b_O.float()
        bias_resid = const.sum(0)
        if view.n_layers == 2:
            bias_resid = bias_resid + torch.einsum("n,hnd,hdm->m", const[0], W_V[1], W_O[1])
        bias = bias_resid @ W_U + view.b_U.float()
    return PathExpansion(direct=x0 @ W_U, heads=heads, virtual=virtual, bias=bias)
