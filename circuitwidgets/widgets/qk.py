"""`QKCircuit`: a head's full QK circuit on a token subset and its attention from positions alone."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import traitlets

from .. import analysis, transport
from ..analysis.circuits import ROTARY_SAMPLES
from . import _cache
from ._color import color_scale_trait
from .token_subset import TokenSubsetWidget

#: Positions shown in the positional view by default (rows are exact: row i only sees keys <= i).
DEFAULT_POSITIONS = 128


class QKCircuit(TokenSubsetWidget, view="qk"):
    """The full QK circuit ``W_E W_Q W_Kᵀ W_Eᵀ`` of a head on a token subset, and its positional view.

    Left: heatmap of destination (query) token (row) × source (key) token (column), in attention-logit units (divided
    by the model's attention scale, usually ``√d_head``; token embeddings only, no positions or
    biases). Right: ``softmax(mask(W_pos W_Q W_Kᵀ W_posᵀ / √d_head))`` over keys, the attention
    a head pays from positions alone (a previous-token head shows the stripe just below the
    diagonal). Rotary models get the head's attention on one repeated token instead, which
    depends on the offset alone (`analysis.positional_qk`); models with neither get a note.
    A caption under each side says what it leaves out. The vocabulary-sized matrix is never built.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        layer, head: the head shown first.
        tokens: token ids or token strings (destination and source tokens). Default: the whole vocabulary
            when it has at most 64 tokens, else 40 tokens drawn at random with seed 0 (shown in
            `token_criterion`). prompt: alternatively, the distinct tokens of this text.
        positions: how many positions (from 0) the positional view shows, default
            ``min(n_ctx, 128)``. Each row is exact whatever the cut: row i only sees keys <= i.
        defer: inside a running event loop (a notebook kernel), show the widget at once with its
            progress note and compute just after the cell returns (as a `Dashboard` does).


    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.QKCircuit(cw.demo_model(), 0, 0, tokens=["a", "b"])
        >>> w.qk["shape"], w.positional["shape"]
        ([4, 2, 2], [4, 64, 64])
    """

    controls = ("positions", "color_scale")
    inputs = ("positions", "color_scale")

    qk = traitlets.Dict(
        help="payload (circuitwidgets.transport) of the layer's token blocks [n_heads, n, n] as uint8, each head on "
        "its own symmetric range qk['ranges'][h], with the labels and ids of the tokens"
    ).tag(sync=True)
    values = traitlets.Dict(help="payload of the same blocks as exact float32, for read-outs").tag(sync=True)
    positions = traitlets.Int(DEFAULT_POSITIONS, help="positions shown in the positional view").tag(sync=True)
    positional = traitlets.Dict(
        help="payload of [n_heads, positions, positions] uint8 in [0, 1], lower triangle only; without data (and "
        "with a 'note') when the model has no learned positions"
    ).tag(sync=True)
    color_scale = color_scale_trait()
    positional_note = traitlets.Unicode("", help="why there is no positional view, '' when there is one").tag(sync=True)

    def __init__(
        self, model: Any, layer: int = 0, head: int = 0, tokens: Any = None, *,
        prompt: str | None = None, positions: int | None = None, defer: bool = False, **kwargs: Any,
    ) -> None:
        super().__init__(model, layer, head, tokens, prompt, **kwargs)
        self.positions = min(self.mv.n_ctx, DEFAULT_POSITIONS) if positions is None else positions
        self._start(defer)

    def _check_positions(self, value: int) -> int:
        n_ctx = self.mv.n_ctx
        if not 1 <= value <= n_ctx:
            raise ValueError(f"positions={value} is out of range: 1..{n_ctx} (n_ctx)")
        return value

    def _refresh(self) -> None:
        layer, ids, n_pos = self.layer, list(self.tokens), self.positions
        compute = partial(analysis.full_qk_block, self.mv, layer, ids)
        blocks = _cache.cached(self.mv, ("qk_block", layer, tuple(ids)), compute)
        note = self.mv.no_positions_note()
        if note:
            positional = self.empty_payload(layer=layer, note=note)
        else:
            patterns = _cache.cached(
                self.mv, ("positional_qk", layer, n_pos),
                lambda: analysis.positional_qk(self.mv, layer, positions=n_pos).float().cpu().clone(),
                runs_model=self.mv.has_rotary,  # a rotary model's view is a run on repeated tokens
            )
            drawn, scale = transport.scaled(patterns, self.color_scale, n_pos)
            positional = self.payload_uint8(
                drawn, layout="tril", layer=layer, caption=self._positional_caption(n_pos), scale=scale
            )
        labels = self._labels()
        self.values = self.payload_float32(blocks, layer=layer)
        self.positional_note = note
        self.positional = positional
        self.qk = self.payload_heads(blocks, layer=layer, labels=labels, ids=ids, caption=self._token_caption())

    def _token_caption(self) -> str:
        rotary = "Rotary: the rotation of queries and keys by position is left out too (the two tokens at offset 0)."
        return self._caption(rotary if self.mv.has_rotary else "")

    def _positional_caption(self, n_pos: int) -> str:
        shown = f"positions 0–{n_pos - 1} of {self.mv.n_ctx}"
        if self.mv.has_rotary:
            return (
                f"Rotary positions: the head's attention on one token repeated (no BOS), mean over "
                f"{ROTARY_SAMPLES} tokens; it depends on the offset alone; {shown}."
            )
        return f"softmax over sources of mask(W_pos W_Q W_Kᵀ W_posᵀ / √d_head); {shown}."

    def current_block(self) -> torch.Tensor:
        """Exact float32 token block ``[n, n]`` (destination (query) × source (key)) of the head shown.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.QKCircuit(cw.demo_model(), 0, 0, tokens=[2, 3, 4]).current_block().shape
            torch.Size([3, 3])
        """
        return transport.decode(self.values)[self.head]
