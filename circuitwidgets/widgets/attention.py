"""`AttentionPattern`: one layer's attention patterns, live on a prompt or on token ids."""

from __future__ import annotations

from typing import Any

import torch
import traitlets

from .. import transport
from ..analysis import attention_patterns
from ..model import as_view
from .base import CircuitWidget

#: Compute every layer in one model run when all of them fit in this many float32 values
#: (switching layer is then free); beyond it only the shown layer is kept.
ALL_LAYERS_BUDGET = 16_000_000


class AttentionPattern(CircuitWidget):
    """Heatmap of a head's attention pattern, thumbnails of every head in the layer, a token view.

    Switching head within a layer happens in the browser (the whole layer is sent, as uint8);
    editing the prompt or changing layer re-runs the model in the kernel.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        prompt: text to run (tokenised with BOS). Needs a tokenizer.
        tokens: token ids ``[seq]`` or ``[1, seq]``, in place of `prompt` (labels then show ids).
        layer: block index of an attention layer. head: head index in that layer.

    Traits (all synced with the browser):
        prompt (str, ""): the text shown; editing it in the widget re-runs the model.
        tokens (list[int], []): ids of the tokens drawn; set it to run token ids directly.
        source ("prompt" | "tokens"): which of the two the picture comes from.
        str_tokens (list[str]): token strings (ids without a tokenizer), the axis labels.
        layer (int, 0), head (int, 0): the head shown; out-of-range values raise ``TraitError``
            and show the message in the widget, keeping the last good picture.
        selection (dict): ``{"query": int | None, "key": int | None, "locked": bool}``, the hovered
            or clicked cell, set by the browser.
        patterns (bytes) + patterns_meta (dict): the layer's patterns ``[n_heads, query, key]`` as uint8
            (see `circuitwidgets.transport`), lower triangle only when causal.
        row (bytes) + row_meta (dict): exact float32 weights ``[n_heads, key]`` of the selected query.
        info (dict): model facts the controls need (layers, heads, n_ctx, tokenizer or not).

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc", layer=1, head=0)
        >>> w.patterns_meta["shape"], w.str_tokens[1:4]
        ([4, 7, 7], ['a', 'b', 'c'])
    """

    _kind = traitlets.Unicode("attention").tag(sync=True)
    prompt = traitlets.Unicode("", help="text the patterns are computed on").tag(sync=True)
    tokens = traitlets.List(traitlets.Int(), help="token ids drawn (or to run, in tokens mode)").tag(sync=True)
    source = traitlets.Enum(("prompt", "tokens"), "prompt", help="input the picture comes from").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings: the axis labels").tag(sync=True)
    layer = traitlets.Int(0, help="block index of the attention layer shown").tag(sync=True)
    head = traitlets.Int(0, help="head shown in the large heatmap").tag(sync=True)
    selection = traitlets.Dict(
        {"query": None, "key": None, "locked": False}, help="hovered or locked cell, set by the browser"
    ).tag(sync=True)
    patterns = traitlets.Bytes(b"", help="uint8 patterns of the layer [n_heads, query, key]").tag(sync=True)
    patterns_meta = traitlets.Dict(help="shape, range and layout of `patterns`").tag(sync=True)
    row = traitlets.Bytes(b"", help="exact float32 weights [n_heads, key] of the selected query").tag(sync=True)
    row_meta = traitlets.Dict(help="query, layer and revision `row` belongs to").tag(sync=True)
    info = traitlets.Dict(help="model facts for the controls").tag(sync=True)

    def __init__(
        self,
        model: Any,
        prompt: str | None = None,
        *,
        tokens: Any = None,
        layer: int = 0,
        head: int = 0,
        **kwargs: Any,
    ) -> None:
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        self._model = model
        view = as_view(model)
        self._ready = False
        self._internal = False
        self._cache: dict[tuple, torch.Tensor] = {}
        self._shown: torch.Tensor | None = None  # float32 [n_heads, q, k] of the picture on screen
        self._revision = 0
        info = {
            "n_layers": view.n_layers,
            "n_heads": view.n_heads,
            "attn_layers": list(view.attn_layers),
            "n_ctx": view.n_ctx,
            "has_tokenizer": view.tokenizer is not None,
        }
        super().__init__(info=info, layer=layer, head=head, **kwargs)
        if tokens is not None:
            self.tokens = self._token_list(tokens)
            self.source = "tokens"
        else:
            self.prompt = prompt or ""
            self.source = "prompt"
        self._ready = True
        self._run_refresh(raise_bugs=True)

    @property
    def model(self) -> Any:
        """The model this widget runs."""
        return self._model

    # ----- validation ----------------------------------------------------------------------
    @traitlets.validate("layer")
    def _valid_layer(self, proposal: dict) -> int:
        try:
            as_view(self._model).layer_index(proposal["value"])
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        self._clear_error("controls")  # a good value clears the message, changed or not
        return proposal["value"]

    @traitlets.validate("head")
    def _valid_head(self, proposal: dict) -> int:
        try:
            as_view(self._model).check_head(proposal["value"])
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        self._clear_error("controls")
        return proposal["value"]

    def _token_list(self, tokens: Any) -> list[int]:
        checked = as_view(self._model).check_tokens(tokens)
        if checked.shape[0] != 1:
            raise ValueError(f"tokens must be one sequence; got a batch of {checked.shape[0]}")
        return [int(t) for t in checked[0].tolist()]

    # ----- observers -------------------------------------------------------------------------
    @traitlets.observe("prompt")
    def _on_prompt(self, change: dict) -> None:
        if self._ready and not self._internal:
            self.source = "prompt"
            self._request_refresh()

    @traitlets.observe("tokens")
    def _on_tokens(self, change: dict) -> None:
        if self._ready and not self._internal:
            self.source = "tokens"
            self._request_refresh()

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        self._clear_error("controls")
        if self._ready:
            self._request_refresh()

    @traitlets.observe("head")
    def _on_head(self, change: dict) -> None:
        self._clear_error("controls")  # the browser already holds every head of the layer

    @traitlets.observe("selection")
    def _on_selection(self, change: dict) -> None:
        if self._ready:
            self._send_row()

    # ----- computation -------------------------------------------------------------------------
    def _input_tokens(self) -> torch.Tensor:
        view = as_view(self._model)
        if self.source == "tokens":
            return view.check_tokens(self.tokens)
        return view.to_tokens(self.prompt)

    def _layer_patterns(self, tokens: torch.Tensor, layer: int) -> torch.Tensor:
        view = as_view(self._model)
        key = (id(view), tuple(tokens[0].tolist()))
        if (*key, layer) not in self._cache:
            self._cache = {k: v for k, v in self._cache.items() if k[:2] == key}
            seq = tokens.shape[1]
            every = len(view.attn_layers) * view.n_heads * seq * seq <= ALL_LAYERS_BUDGET
            layers = list(view.attn_layers) if every else [layer]
            stacked = attention_patterns(self._model, tokens, layers=layers).cpu()
            for i, lay in enumerate(layers):
                self._cache[(*key, lay)] = stacked[i]
        return self._cache[(*key, layer)]

    def _refresh(self) -> None:
        tokens = self._input_tokens()
        layer = self.layer
        patterns = self._layer_patterns(tokens, layer)
        str_tokens = as_view(self._model).to_str_tokens(tokens)
        layout = "tril" if transport.is_causal(patterns) else "full"
        data, meta = transport.encode_uint8(patterns, lo=0.0, hi=1.0, layout=layout)
        self._revision += 1
        meta.update(layer=layer, revision=self._revision)
        self._shown = patterns
        self._internal = True
        try:
            self.tokens = [int(t) for t in tokens[0].tolist()]
            self.str_tokens = str_tokens
            self.patterns = data
            self.patterns_meta = meta
        finally:
            self._internal = False
        self._send_row()

    def _send_row(self) -> None:
        """Exact weights of the selected query (every head), for the read-out."""
        patterns = self._shown
        query = (self.selection or {}).get("query")
        if patterns is None or not isinstance(query, int) or not 0 <= query < patterns.shape[1]:
            return
        data, meta = transport.encode_float32(patterns[:, query, :])
        meta.update(query=query, layer=self.patterns_meta.get("layer"), revision=self._revision)
        with self.hold_sync():
            self.row = data
            self.row_meta = meta

    # ----- reading back ------------------------------------------------------------------------
    def current_patterns(self) -> torch.Tensor:
        """Exact float32 patterns ``[n_heads, query, key]`` of the layer on screen.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.AttentionPattern(cw.demo_model(), prompt="abab").current_patterns().shape
            torch.Size([4, 5, 5])
        """
        if self._shown is None:
            raise ValueError(f"nothing drawn yet: {self.error or 'no input'}")
        return self._shown
