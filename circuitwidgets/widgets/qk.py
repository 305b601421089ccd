"""`QKCircuit`: a head's full QK circuit on a token subset and its attention from positions alone."""

from __future__ import annotations

from typing import Any

import torch
import traitlets

from .. import transport
from ..analysis import positional_qk, qk_circuit
from ..model import as_view
from . import _cache
from .ov import HeadCircuitWidget, encode_heads, str_tokens_of

#: Positions shown in the positional view by default (rows are exact: row i only sees keys <= i).
DEFAULT_POSITIONS = 128


def _qk_block(model: Any, layer: int, head: int, ids: list[int]) -> torch.Tensor:
    """``(W_E W_Q W_K^T W_E^T / attn_scale)[ids][:, ids]`` via the d_model-sized `qk_circuit`."""
    view = as_view(model)
    index = torch.tensor(ids, device=view.device)
    circuit = qk_circuit(model, layer, head, scaled=True)
    embed = view.W_E[index].to(circuit.dtype)
    return (embed @ circuit @ embed.T).dense().float().cpu()


def no_positions_note(model: Any) -> str:
    """Why there is no positional view, or "" when the model has learned absolute positions."""
    view = as_view(model)
    if view.has_learned_positions:
        return ""
    kind = getattr(view.model.cfg, "positional_embedding_type", None) or "rotary or no learned"
    return (
        f"No positional view: this model uses {kind} positions, not a learned W_pos. Its attention "
        "to a position depends on the query and key contents too, so there is no position-only pattern; "
        "look at AttentionPattern on a prompt instead."
    )


class QKCircuit(HeadCircuitWidget):
    """The full QK circuit ``W_E W_Q W_Kᵀ W_Eᵀ`` of a head on a token subset, and its positional view.

    Left: heatmap of query token (row) × key token (column), in attention-logit units (divided
    by the model's attention scale, usually ``√d_head``; token embeddings only, no positions or
    biases). Right: ``softmax(mask(W_pos W_Q W_Kᵀ W_posᵀ / √d_head))`` over keys, the attention
    a head pays from positions alone (a previous-token head shows the stripe just below the
    diagonal). Models without learned positions (rotary) get a note in its place. The
    vocabulary-sized matrix is never built.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        layer, head: the head shown first.
        tokens: token ids or token strings (query and key tokens). Default: the whole vocabulary
            when it has at most 64 tokens, else 40 tokens drawn at random with seed 0 (shown in
            `token_criterion`). prompt: alternatively, the distinct tokens of this text.
        positions: how many positions (from 0) the positional view shows, default
            ``min(n_ctx, 128)``. Each row is exact whatever the cut: row i only sees keys <= i.

    Traits (all synced with the browser):
        layer (int), head (int): the head shown; out-of-range values raise ``TraitError`` and
            show the message in the widget. Switching head is instant (the layer is sent whole).
        tokens (list[int]), str_tokens (list[str]), token_criterion (str): the token subset.
        qk (bytes) + qk_meta (dict): the layer's token blocks ``[n_heads, n, n]`` as uint8, each
            head on its own symmetric range ``qk_meta["ranges"][h]``.
        values (bytes) + values_meta (dict): the same blocks as exact float32, for read-outs.
        positions (int): positions shown in the positional view.
        positional (bytes) + positional_meta (dict): ``[n_heads, positions, positions]`` uint8 in
            [0, 1], lower triangle only (empty without learned positions).
        positional_note (str): why there is no positional view, "" when there is one.
        info (dict): model facts for the controls. error (str), busy (bool): see `CircuitWidget`.

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.QKCircuit(cw.demo_model(), 0, 0, tokens=["a", "b"])
        >>> w.qk_meta["shape"], w.positional_meta["shape"]
        ([4, 2, 2], [4, 64, 64])
    """

    _kind = traitlets.Unicode("qk").tag(sync=True)
    qk = traitlets.Bytes(b"", help="uint8 token blocks [n_heads, n, n], one symmetric range per head").tag(sync=True)
    qk_meta = traitlets.Dict(help="shape, per-head ranges and layer of `qk`").tag(sync=True)
    values = traitlets.Bytes(b"", help="exact float32 token blocks [n_heads, n, n]").tag(sync=True)
    values_meta = traitlets.Dict(help="shape of `values`").tag(sync=True)
    positions = traitlets.Int(DEFAULT_POSITIONS, help="positions shown in the positional view").tag(sync=True)
    positional = traitlets.Bytes(b"", help="uint8 positional patterns [n_heads, P, P], lower triangle").tag(sync=True)
    positional_meta = traitlets.Dict(help="shape, range and layout of `positional`").tag(sync=True)
    positional_note = traitlets.Unicode("", help="why there is no positional view; '' when there is").tag(sync=True)

    def __init__(
        self,
        model: Any,
        layer: int = 0,
        head: int = 0,
        tokens: Any = None,
        *,
        prompt: str | None = None,
        positions: int | None = None,
        **kwargs: Any,
    ) -> None:
        n_ctx = as_view(model).n_ctx
        super().__init__(model, layer, head, tokens, prompt, positions=min(n_ctx, DEFAULT_POSITIONS) if positions is None else positions, **kwargs)
        self._ready = True
        self._run_refresh(raise_bugs=True)

    @traitlets.validate("positions")
    def _valid_positions(self, proposal: dict) -> int:
        value = proposal["value"]
        n_ctx = as_view(self._model).n_ctx
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n_ctx:
            raise self._trait_error(ValueError(f"positions={value!r} is out of range: 1..{n_ctx} (n_ctx)"), "controls")
        return value

    @traitlets.observe("positions")
    def _on_positions(self, change: dict) -> None:
        self._clear_error("controls")
        if self._ready:
            self._request_refresh()

    def _refresh(self) -> None:
        view = as_view(self._model)
        layer, ids, n_pos = self.layer, list(self.tokens), self.positions
        blocks = torch.stack(
            [_cache.cached(self._model, ("qk_block", layer, h, tuple(ids)), lambda h=h: _qk_block(self._model, layer, h, ids))
             for h in range(view.n_heads)]
        )
        codes, codes_meta = encode_heads(blocks)
        codes_meta["layer"] = layer
        exact, exact_meta = transport.encode_float32(blocks)
        note = no_positions_note(self._model)
        if note:
            pos_data, pos_meta = b"", {}
        else:
            patterns = torch.stack(
                [_cache.cached(self._model, ("positional_qk", layer, h, n_pos),
                               lambda h=h: positional_qk(self._model, layer, h)[:n_pos, :n_pos].clone())
                 for h in range(view.n_heads)]
            )
            pos_data, pos_meta = transport.encode_uint8(patterns, lo=0.0, hi=1.0, layout="tril")
            pos_meta["layer"] = layer
        self._internal = True
        try:
            self.str_tokens = str_tokens_of(view, ids)
            self.values, self.values_meta = exact, {**exact_meta, "layer": layer}
            self.positional_note = note
            self.positional, self.positional_meta = pos_data, pos_meta
            self.qk = codes
            self.qk_meta = codes_meta
        finally:
            self._internal = False

    def current_block(self) -> torch.Tensor:
        """Exact float32 token block ``[n, n]`` (query × key) of the head shown.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.QKCircuit(cw.demo_model(), 0, 0, tokens=[2, 3, 4]).current_block().shape
            torch.Size([3, 3])
        """
        return transport.decode(self.values, self.values_meta)[self.head]
