"""One uniform view of a TransformerLens model: weights, tokenisation, attention patterns.

`ModelView` resolves everything model-specific once, so the analysis layer never has to ask
which TransformerLens version or architecture it is looking at. It accepts a TransformerLens 4
`TransformerBridge` or a TransformerLens 2.x `HookedTransformer` by what they offer (duck typing).

Example:
    >>> import circuitwidgets as cw
    >>> view = cw.ModelView(cw.demo_model())
    >>> view.W_Q.shape                      # [n_attn_layers, n_heads, d_model, d_head]
    torch.Size([2, 4, 64, 16])
    >>> view.patterns(view.to_tokens("abcabc")).shape   # [batch, layers, heads, query, key]
    torch.Size([1, 2, 4, 7, 7])
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch
from torch.nn.modules import module as _torch_module

_REQUIRED = ("cfg", "blocks", "W_E", "W_U", "run_with_cache")
_CFG_FIELDS = ("n_layers", "n_heads", "d_model", "d_head", "d_vocab", "n_ctx")
_HEAD_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")
_KV_WEIGHTS = ("W_K", "W_V", "b_K", "b_V")


# Counts every parameter or submodule (re)registered on any torch module, e.g. by
# ``load_state_dict(assign=True)`` or ``block.attn = new_attn``. While it stands still, a
# view's parameter list is still the model's, so staleness checks need not walk the modules
# (``model.parameters()`` walks ~700 modules of GPT-2 small: ~4 ms, paid on every widget event).
_registrations = 0


def _count_registration(*_: Any) -> None:
    global _registrations
    _registrations += 1


_torch_module.register_module_parameter_registration_hook(_count_registration)
_torch_module.register_module_module_registration_hook(_count_registration)


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class ModelView:
    """Model-specific facts resolved once: stacked weights, layers, tokenisation, patterns.

    Attributes (all detached, on the model's device and dtype):
        W_Q, W_K, W_V: ``[n_attn_layers, n_heads, d_model, d_head]`` (grouped K/V heads expanded)
        W_O: ``[n_attn_layers, n_heads, d_head, d_model]``
        b_Q, b_K, b_V: ``[n_attn_layers, n_heads, d_head]``; b_O: ``[n_attn_layers, d_model]``
        W_E: ``[d_vocab, d_model]``; W_U: ``[d_model, d_vocab]``; b_U: ``[d_vocab]``
        W_pos: ``[n_ctx, d_model]``, or ``None`` for models without learned positions (rotary)
        attn_layers: original block index of each attention layer (hybrid models skip some)

    Layer arguments everywhere in circuitwidgets are original block indices; results are
    stacked over ``attn_layers`` in that order (for ordinary models, simply every layer).
    """

    def __init__(self, model: Any):
        if isinstance(model, ModelView):
            raise TypeError("model is already a ModelView; use circuitwidgets.model.as_view(model)")
        missing = [name for name in _REQUIRED if not hasattr(model, name)]
        if missing:
            raise TypeError(
                f"model must be a TransformerLens TransformerBridge or HookedTransformer; got "
                f"{_describe(model)}, which lacks {', '.join(missing)}"
            )
        self.model = model
        cfg = model.cfg
        for field in _CFG_FIELDS:
            if not isinstance(getattr(cfg, field, None), int):
                raise TypeError(f"model.cfg.{field} must be an int; got {getattr(cfg, field, None)!r}")
        self.n_layers: int = cfg.n_layers
        self.n_heads: int = cfg.n_heads
        self.d_model: int = cfg.d_model
        self.d_head: int = cfg.d_head
        self.d_vocab: int = cfg.d_vocab
        self.n_ctx: int = cfg.n_ctx
        self.normalization_type: str | None = getattr(cfg, "normalization_type", None)
        self.attn_only: bool = bool(getattr(cfg, "attn_only", False))
        self.attn_layers: list[int] = [
            i for i, block in enumerate(model.blocks) if getattr(block, "attn", None) is not None
        ]
        if not self.attn_layers:
            raise ValueError(f"model {_describe(model)} has no attention layers to analyse")
        self._load_weights()
        self._registrations = _registrations
        self._parameters = list(model.parameters())
        self._fingerprint = self._weights_fingerprint()

    # ----- weights -------------------------------------------------------------------------
    def _load_weights(self) -> None:
        model = self.model
        with torch.no_grad():
            stacked = {name: self._stack(name) for name in _HEAD_WEIGHTS}
            for name in _KV_WEIGHTS:
                stacked[name] = self._expand_kv(stacked[name], name)
            for name, tensor in stacked.items():
                setattr(self, name, tensor)
            self.b_O = self._stack("b_O")
            self.W_E = model.W_E.detach()
            self.W_U = model.W_U.detach()
            b_U = getattr(model, "b_U", None)
            self.b_U = (
                b_U.detach() if b_U is not None else torch.zeros(self.d_vocab, dtype=self.W_U.dtype, device=self.W_U.device)
            )
            try:
                self.W_pos = model.W_pos.detach()
            except (AttributeError, NotImplementedError):
                self.W_pos = None
        self.device = self.W_E.device
        self.dtype = self.W_E.dtype
        for name in (*_HEAD_WEIGHTS, "b_O", "W_E", "W_U", "b_U", "W_pos"):
            tensor = getattr(self, name)
            if tensor is not None and not torch.isfinite(tensor).all():
                bad = int((~torch.isfinite(tensor)).sum())
                raise ValueError(f"model weight {name} contains {bad} NaN/Inf values; scores would be meaningless")

    def _stack(self, name: str) -> torch.Tensor:
        """Stack a per-layer attention weight over the attention layers only."""
        whole = None
        if len(self.attn_layers) == self.n_layers:
            try:
                whole = getattr(self.model, name)
            except (AttributeError, NotImplementedError, RuntimeError):
                whole = None
        if whole is None:
            whole = torch.stack([getattr(self.model.blocks[i].attn, name) for i in self.attn_layers])
        return whole.detach()

    def _expand_kv(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        """Grouped-query models hold fewer K/V heads: give each query head its own copy."""
        n_kv = tensor.shape[1]
        if n_kv == self.n_heads:
            return tensor
        if self.n_heads % n_kv:
            raise ValueError(f"{name} has {n_kv} heads, which does not divide n_heads={self.n_heads}")
        return tensor.repeat_interleave(self.n_heads // n_kv, dim=1)

    def _weights_fingerprint(self) -> tuple:
        # In-place updates (optimiser steps, load_state_dict) bump a tensor's version counter;
        # ``.to()`` / ``p.data = ...`` move its storage.
        return tuple((p.data_ptr(), p._version) for p in self._parameters)

    def is_stale(self) -> bool:
        """True when the model's parameters changed since this view read them."""
        if self._registrations != _registrations:  # some module somewhere gained a parameter
            parameters = list(self.model.parameters())
            if len(parameters) != len(self._parameters) or any(a is not b for a, b in zip(parameters, self._parameters)):
                return True
            self._registrations = _registrations
        return self._fingerprint != self._weights_fingerprint()

    @property
    def has_learned_positions(self) -> bool:
        return self.W_pos is not None

    @property
    def has_layernorm(self) -> bool:
        return self.normalization_type is not None

    # ----- layers and heads ----------------------------------------------------------------
    def layer_index(self, layer: int) -> int:
        """Position in the stacked weights of the attention layer with block index `layer`."""
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int; got {layer!r}")
        if layer < 0 or layer >= self.n_layers:
            raise ValueError(f"layer={layer} is out of range: this model has layers 0..{self.n_layers - 1}")
        if layer not in self.attn_layers:
            raise ValueError(f"layer={layer} has no attention; attention layers are {self.attn_layers}")
        return self.attn_layers.index(layer)

    def check_head(self, head: int) -> int:
        if isinstance(head, bool) or not isinstance(head, int):
            raise TypeError(f"head must be an int; got {head!r}")
        if head < 0 or head >= self.n_heads:
            raise ValueError(f"head={head} is out of range: this model has heads 0..{self.n_heads - 1}")
        return head

    def check_layers(self, layers: Sequence[int] | None) -> list[int]:
        """Block indices of the requested attention layers (all of them for ``None``)."""
        if layers is None:
            return list(self.attn_layers)
        if isinstance(layers, int):
            layers = [layers]
        chosen = list(layers)
        if not chosen:
            raise ValueError("layers must name at least one layer, or be None for all")
        for layer in chosen:
            self.layer_index(layer)
        return chosen

    # ----- tokens --------------------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        return getattr(self.model, "tokenizer", None)

    @property
    def bos_token_id(self) -> int | None:
        tok = self.tokenizer
        return None if tok is None else getattr(tok, "bos_token_id", None)

    @property
    def special_token_ids(self) -> list[int]:
        """Token ids never drawn as random tokens (BOS, EOS, PAD, UNK, ...)."""
        tok = self.tokenizer
        if tok is None:
            return []
        ids = getattr(tok, "all_special_ids", None) or []
        return sorted({int(i) for i in ids if i is not None and 0 <= int(i) < self.d_vocab})

    def to_tokens(self, prompt: str, *, prepend_bos: bool = True, truncate: bool = False) -> torch.Tensor:
        """Tokenise `prompt` to ``[1, seq]``; raises on empty or over-long prompts unless `truncate`."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        if not prompt:
            raise ValueError("prompt is empty: type some text to see its attention patterns")
        if self.tokenizer is None:
            raise TypeError("this model has no tokenizer: pass token ids (tokens=...) instead of a prompt")
        tokens = self.model.to_tokens(prompt, prepend_bos=prepend_bos, truncate=False)
        if tokens.shape[-1] > self.n_ctx:
            if not truncate:
                raise ValueError(
                    f"prompt is {tokens.shape[-1]} tokens long, longer than the model's n_ctx={self.n_ctx}; "
                    "shorten it or pass truncate=True"
                )
            tokens = tokens[..., : self.n_ctx]
        return tokens.to(self.device)

    def check_tokens(self, tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        """Validate token ids and return them as a ``[batch, seq]`` long tensor on the model's device."""
        if not isinstance(tokens, torch.Tensor):
            try:
                tokens = torch.as_tensor(tokens)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise TypeError(f"tokens must be a tensor or nested list of token ids; got {type(tokens).__name__}") from exc
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must hold integer ids; got dtype {tokens.dtype}")
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [seq] or [batch, seq]; got shape {tuple(tokens.shape)}")
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(f"tokens is empty (shape {tuple(tokens.shape)})")
        if tokens.shape[1] > self.n_ctx:
            if not truncate:
                raise ValueError(
                    f"tokens has {tokens.shape[1]} positions, longer than the model's n_ctx={self.n_ctx}; "
                    "shorten it or pass truncate=True"
                )
            tokens = tokens[:, : self.n_ctx]
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.d_vocab:
            bad = low if low < 0 else high
            raise ValueError(f"tokens contains id {bad}, outside the vocabulary 0..{self.d_vocab - 1}")
        return tokens.long().to(self.device)

    def tokens_of(self, prompt_or_tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        """A prompt string or token ids, as a validated ``[batch, seq]`` tensor."""
        if isinstance(prompt_or_tokens, str):
            return self.to_tokens(prompt_or_tokens, truncate=truncate)
        return self.check_tokens(prompt_or_tokens, truncate=truncate)

    def to_str_tokens(self, tokens: Any) -> list[str]:
        """Strings of a ``[seq]`` (or ``[1, seq]``) token tensor; token ids without a tokenizer."""
        tokens = self.check_tokens(tokens)
        if tokens.shape[0] != 1:
            raise ValueError(f"to_str_tokens takes one sequence; got a batch of {tokens.shape[0]}")
        ids = tokens[0].tolist()
        if self.tokenizer is None:
            return [str(i) for i in ids]
        return [self.tokenizer.decode([i]) for i in ids]

    # ----- running the model ---------------------------------------------------------------
    def patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> torch.Tensor:
        """Attention patterns ``[batch, len(layers), n_heads, query, key]`` (float32).

        Runs the model under ``no_grad`` caching only the requested ``hook_pattern``s
        (a full cache of GPT-2-small at 1 024 tokens is 3.3 GB; the patterns alone 576 MB).
        """
        tokens = self.check_tokens(tokens)
        chosen = self.check_layers(layers)
        names = [f"blocks.{layer}.attn.hook_pattern" for layer in chosen]
        wanted = set(names)
        with torch.no_grad():
            _, cache = self.model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
            stacked = torch.stack([cache[name] for name in names], dim=1)
        return stacked.float()

    def logits(self, tokens: Any) -> torch.Tensor:
        """Model logits ``[batch, seq, d_vocab]`` under ``no_grad``."""
        tokens = self.check_tokens(tokens)
        with torch.no_grad():
            return self.model(tokens)


_VIEWS: "weakref.WeakKeyDictionary[Any, ModelView]" = weakref.WeakKeyDictionary()


def as_view(model: Any) -> ModelView:
    """The `ModelView` of `model` (itself if already a view), cached until its weights change."""
    if isinstance(model, ModelView):
        return model
    try:
        view = _VIEWS.get(model)
    except TypeError:
        view = None
    if view is None or view.is_stale():
        view = ModelView(model)
        try:
            _VIEWS[model] = view
        except TypeError:
            pass
    return view
