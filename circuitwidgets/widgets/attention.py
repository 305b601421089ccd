"""`AttentionPattern`: one layer's attention patterns, live on a prompt or on token ids."""

from __future__ import annotations

from typing import Any

import torch
import traitlets

from . import _cache
from .base import CircuitWidget

#: Compute every layer in one model run when all of them fit in this many float32 values
#: (switching layer is then free); beyond it only the shown layer is kept.
ALL_LAYERS_BUDGET = 16_000_000


class AttentionPattern(CircuitWidget, view="attention"):
    """Heatmap of a head's attention pattern, thumbnails of every head in the layer, a token view.

    Rows are destinations (the query position, where the head writes), columns sources (the key
    position, the token attended to); each row sums to 1.

    Switching head within a layer happens in the browser (the whole layer is sent, as uint8);
    editing the prompt or changing layer re-runs the model in the kernel.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        prompt: text to run (tokenised with BOS). Needs a tokenizer.
        tokens: token ids ``[seq]`` or ``[1, seq]``, in place of `prompt` (labels then show ids).
        layer: block index of an attention layer. head: head index in that layer.


    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc", layer=1, head=0)
        >>> w.patterns["shape"], w.str_tokens[1:4]
        ([4, 7, 7], ['a', 'b', 'c'])
    """

    prompt = traitlets.Unicode("", help="the text shown; editing it in the widget re-runs the model").tag(sync=True)
    tokens = traitlets.List(traitlets.Int(), help="ids of the tokens drawn; set it to run token ids directly").tag(sync=True)
    source = traitlets.Enum(("prompt", "tokens"), "prompt", help="which of the two the picture comes from").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings (ids without a tokenizer)").tag(sync=True)
    selection = traitlets.Dict(
        {"query": None, "key": None, "locked": False},
        help="the hovered or clicked cell, {'query', 'key', 'locked'}, set by the browser",
    ).tag(sync=True)
    patterns = traitlets.Dict(
        help="payload (circuitwidgets.transport) of the layer's patterns [n_heads, destination (query), source (key)] as uint8, lower "
        "triangle only when causal, with its layer, revision and labels (the token strings)"
    ).tag(sync=True)
    row = traitlets.Dict(help="payload of the exact float32 weights [n_heads, source (key)] of the selected destination (query)").tag(sync=True)
    info = traitlets.Dict(help="model facts the controls need (layers, heads, n_ctx, tokenizer or not)").tag(sync=True)

    def __init__(
        self, model: Any, prompt: str | None = None, *, tokens: Any = None, layer: int = 0, head: int = 0, **kwargs: Any
    ) -> None:
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        self._shown: torch.Tensor | None = None  # float32 [n_heads, q, k] of the picture on screen
        super().__init__(model, layer=layer, head=head, **kwargs)
        mv = self.mv
        self.info = {
            "n_layers": mv.n_layers,
            "n_heads": mv.n_heads,
            "attn_layers": list(mv.attn_layers),
            "n_ctx": mv.n_ctx,
            "has_tokenizer": mv.tokenizer is not None,
        }
        if tokens is not None:
            self.tokens, self.source = self._sequence(self.mv.check_tokens(tokens)), "tokens"
        elif prompt is not None:
            self.prompt, self.source = prompt, "prompt"
        self._start()

    @traitlets.validate("prompt")
    def _valid_prompt(self, proposal: dict) -> str:
        return self._checked(self.mv.to_tokens, proposal["value"])

    @traitlets.validate("tokens")
    def _valid_tokens(self, proposal: dict) -> list[int]:
        return self._checked(self._sequence, proposal["value"]) if not self._quiet else proposal["value"]

    @traitlets.observe("prompt", "tokens")
    def _on_input(self, change: dict) -> None:
        if self._live:
            self.source = "prompt" if change["name"] == "prompt" else "tokens"
            self._request_refresh()

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        self._request_refresh()  # a head switch needs nothing: the browser holds the whole layer

    @traitlets.observe("selection")
    def _on_selection(self, change: dict) -> None:
        if self._ready:
            self._send_row()

    def _layer_patterns(self, tokens: torch.Tensor, layer: int) -> torch.Tensor:
        mv = self.mv
        seq = tokens.shape[1]
        every = len(mv.attn_layers) * mv.n_heads * seq * seq <= ALL_LAYERS_BUDGET
        layers = tuple(mv.attn_layers) if every else (layer,)
        stacked = _cache.patterns(self.mv, tuple(tokens[0].tolist()), layers)
        return stacked[layers.index(layer)]

    def _refresh(self) -> None:
        mv = self.mv
        tokens = mv.check_tokens(self.tokens) if self.source == "tokens" else mv.to_tokens(self.prompt)
        patterns = self._layer_patterns(tokens, self.layer)
        str_tokens = mv.to_str_tokens(tokens)
        self._shown = patterns
        self.tokens = tokens[0].tolist()
        self.str_tokens = str_tokens
        self.patterns = self.payload_uint8(patterns, layer=self.layer, labels=str_tokens)
        self._send_row()

    def _send_row(self) -> None:
        """Exact weights of the selected query (every head), for the read-out."""
        patterns = self._shown
        query = (self.selection or {}).get("query")
        if patterns is None or not isinstance(query, int) or not 0 <= query < patterns.shape[1]:
            return
        self.row = self.payload_float32(
            patterns[:, query, :], query=query, layer=self.patterns["layer"], revision=self.patterns["revision"]
        )

    def current_patterns(self) -> torch.Tensor:
        """Exact float32 patterns ``[n_heads, destination (query), source (key)]`` of the layer on screen.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.AttentionPattern(cw.demo_model(), prompt="abab").current_patterns().shape
            torch.Size([4, 5, 5])
        """
        if self._shown is None:
            raise ValueError(f"nothing drawn yet: {self.error or 'no input'}")
        return self._shown
