"""One uniform view of a TransformerLens model: weights, tokenisation, attention patterns.

`ModelView` resolves everything model-specific once, so the analysis layer never has to ask
which TransformerLens version or architecture it is looking at. It accepts a TransformerLens 4
`TransformerBridge` or a TransformerLens 2.x `HookedTransformer` by what they offer (duck typing).
Outside the demo model's own code, only this module reads ``model.cfg``, names hook points or runs
the model: analysis and widgets ask a `ModelView`.

Importing this module installs two process-wide torch hooks,
``torch.nn.modules.module.register_module_parameter_registration_hook`` and
``register_module_module_registration_hook``. They run whenever any module in the process
registers a parameter or a submodule (building a model, ``load_state_dict(assign=True)``,
``block.attn = new_attn``) and do nothing but add one to a counter. While the counter stands
still, `ModelView.is_stale` knows that no parameter was replaced and skips walking the model's
modules (about 4 ms on GPT-2 small, paid on every widget event otherwise). Cost: one Python call
per registration (778 registrations, under 0.1 ms, to build GPT-2 small), nothing during forward
or backward passes. They stay installed for the life of the process.

Example:
    >>> import circuitwidgets as cw
    >>> view = cw.ModelView(cw.demo_model())
    >>> view.W_Q.shape                      # [n_attn_layers, n_heads, d_model, d_head]
    torch.Size([2, 4, 64, 16])
    >>> view.patterns(view.to_tokens("abcabc")).shape   # [batch, layers, heads, query, key]
    torch.Size([1, 2, 4, 7, 7])
    >>> view.token_subset(prompt="abca")
    ([2, 3, 4], 'the 3 distinct tokens of the prompt, in order of first appearance')
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Sequence
from typing import Any

import torch
from torch.nn.modules import module as _torch_module

_REQUIRED = ("cfg", "blocks", "W_E", "W_U", "run_with_cache")
_CFG_FIELDS = ("n_layers", "n_heads", "d_model", "d_head", "d_vocab", "n_ctx")
_HEAD_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")
_KV_WEIGHTS = ("W_K", "W_V", "b_K", "b_V")
_LOW_PRECISION = (torch.float16, torch.bfloat16)

#: A vocabulary this small is shown whole when no tokens are given (`ModelView.token_subset`).
WHOLE_VOCAB = 64
#: Tokens drawn at random (fixed seed) from a larger vocabulary when no tokens are given.
DEFAULT_COUNT = 40
DEFAULT_SEED = 0
#: Most tokens a subset may hold (a 256 x 256 block per head is 64 K values).
MAX_TOKENS = 256


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision weights (analysis loses too much in fp16/bf16), else `dtype`."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


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
        attn_scale: what attention scores are divided by (``cfg.attn_scale``, else ``sqrt(d_head)``)
        positional_embedding_type: ``cfg.positional_embedding_type`` ("standard", "rotary", ...;
            "unknown" when the config does not say)

    Layer arguments everywhere in circuitwidgets are original block indices; results are
    stacked over ``attn_layers`` in that order (for ordinary models, simply every layer).

    Building a view needs this module's two process-wide torch registration hooks (installed
    on import; see the module docstring): they count parameter and submodule registrations so
    that `is_stale` can tell cheaply whether the model's parameters were replaced.
    """

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    b_Q: torch.Tensor
    b_K: torch.Tensor
    b_V: torch.Tensor

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
        scale = getattr(cfg, "attn_scale", -1.0)
        use_scale = getattr(cfg, "use_attn_scale", True) and isinstance(scale, (int, float)) and scale > 0
        self.attn_scale: float = float(scale) if use_scale else math.sqrt(self.d_head)
        self.positional_embedding_type: str = str(getattr(cfg, "positional_embedding_type", None) or "unknown")
        self.attn_layers: list[int] = [
            i for i, block in enumerate(model.blocks) if getattr(block, "attn", None) is not None
        ]
        if not self.attn_layers:
            raise ValueError(f"model {_describe(model)} has no attention layers to analyse")
        self._load_weights()
        self._registrations = _registrations
        self._parameters = list(model.parameters())
        self._fingerprint = self._weights_fingerprint()
        self._unembed_embed: torch.Tensor | None = None

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

    def _expand_kv(self, tensor: torch.Tensor, name: str, dim: int = 1) -> torch.Tensor:
        """Grouped-query models hold fewer K/V heads: give each query head its own copy."""
        n_kv = tensor.shape[dim]
        if n_kv == self.n_heads:
            return tensor
        if self.n_heads % n_kv:
            raise ValueError(f"{name} has {n_kv} heads, which does not divide n_heads={self.n_heads}")
        return tensor.repeat_interleave(self.n_heads // n_kv, dim=dim)

    def unembed_embed(self) -> torch.Tensor:
        """``W_U W_E`` (``[d_model, d_model]``, float32 for half-precision models), formed once per view.

        The one pass over the vocabulary behind every head's token-basis OV eigenvalues
        (``W_O (W_U W_E) W_V``); a view is rebuilt when the weights change, and this with it.

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> view.unembed_embed().shape, view.unembed_embed() is view.unembed_embed()
            (torch.Size([64, 64]), True)
        """
        value = self._unembed_embed
        if value is None:
            dtype = work_dtype(self.dtype)
            value = self.W_U.to(dtype) @ self.W_E.to(dtype)
            # Two threads may both compute it; each stores a whole tensor, so none reads half of one.
            self._unembed_embed = value
        return value

    def _weights_fingerprint(self) -> tuple:
        # In-place updates (optimiser steps, load_state_dict) bump a tensor's version counter;
        # ``.to()`` / ``p.data = ...`` move its storage.
        return tuple((p.data_ptr(), p._version) for p in self._parameters)

    def is_stale(self) -> bool:
        """True when the model's parameters changed since this view read them."""
        if self._registrations != _registrations:  # some module somewhere gained a parameter
            parameters = list(self.model.parameters())
            if len(parameters) != len(self._parameters):
                return True
            if any(a is not b for a, b in zip(parameters, self._parameters, strict=True)):
                return True
            self._registrations = _registrations
        return self._fingerprint != self._weights_fingerprint()

    @property
    def has_learned_positions(self) -> bool:
        return self.W_pos is not None

    @property
    def has_layernorm(self) -> bool:
        return self.normalization_type is not None

    def _positions_kind(self) -> str:
        kind = self.positional_embedding_type
        return "rotary or no learned" if kind == "unknown" else kind

    def no_positions_note(self) -> str:
        """Why there is no positional view, or "" when the model has learned absolute positions.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).no_positions_note()
            ''
        """
        if self.has_learned_positions:
            return ""
        return (
            f"No positional view: this model uses {self._positions_kind()} positions, not a learned W_pos. Its attention "
            "to a position depends on the query and key contents too, so there is no position-only pattern; "
            "look at AttentionPattern on a prompt instead."
        )

    def no_positions_error(self, what: str) -> ValueError:
        """The error of a position-only computation (`what`) on a model without learned positions.

        Example:
            >>> import circuitwidgets as cw
            >>> str(cw.ModelView(cw.demo_model()).no_positions_error("positional_qk"))[:48]
            'positional_qk needs learned absolute position em'
        """
        return ValueError(
            f"{what} needs learned absolute position embeddings (W_pos), but this model uses "
            f"{self._positions_kind()} positions: its attention to positions depends on the "
            "query and key contents, so there is no position-only pattern to show"
        )

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

    def check_pair(self, first: Any, second: Any) -> tuple[tuple[int, int], tuple[int, int]]:
        """``((l1, h1), (l2, h2))`` as ints, h1 in an earlier attention layer than h2 (a virtual head).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.as_view(cw.demo_model()).check_pair([0, 1], (1, 2.0))
            ((0, 1), (1, 2))
        """
        heads = []
        for name, head in (("first", first), ("second", second)):
            try:
                layer, index = head
                if any(isinstance(x, bool) or int(x) != x for x in (layer, index)):
                    raise TypeError
            except (TypeError, ValueError):
                raise TypeError(f"{name} must be a (layer, head) pair of ints; got {head!r}") from None
            self.layer_index(int(layer))
            heads.append((int(layer), self.check_head(int(index))))
        (l1, h1), (l2, h2) = heads
        if l1 >= l2:
            raise ValueError(f"a virtual head needs the first head in an earlier layer than the second; got {heads}")
        return (l1, h1), (l2, h2)

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

    def _check_prompt(self, prompt: Any, if_empty: str, instead: str) -> None:
        """A prompt must be a non-empty str, and the model must have a tokenizer for it."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        if not prompt:
            raise ValueError(f"prompt is empty: {if_empty}")
        if self.tokenizer is None:
            raise TypeError(f"this model has no tokenizer: pass {instead} instead of a prompt")

    def to_tokens(self, prompt: str, *, prepend_bos: bool = True, truncate: bool = False) -> torch.Tensor:
        """Tokenise `prompt` to ``[1, seq]``; raises on empty or over-long prompts unless `truncate`."""
        self._check_prompt(prompt, "type some text to see its attention patterns", "token ids (tokens=...)")
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
        return self.token_strings(tokens[0].tolist())

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """Each id's string (the id itself, as a string, without a tokenizer).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_strings([2, 3])
            ['a', 'b']
        """
        if self.tokenizer is None:
            return [str(i) for i in ids]
        return [self.tokenizer.decode([i]) for i in ids]

    def _encode(self, text: str) -> list[int]:
        """Token ids of `text`, without BOS and without truncation."""
        return [int(i) for i in self.model.to_tokens(text, prepend_bos=False, truncate=False)[0].tolist()]

    def token_id(self, text: str) -> int:
        """The id of `text`, which must be exactly one token.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_id("a")
            2
        """
        if not isinstance(text, str):
            raise TypeError(f"token text must be a str; got {type(text).__name__}")
        if self.tokenizer is None:
            raise TypeError(f"token {text!r} is a string but this model has no tokenizer; pass token ids")
        ids = self._encode(text)
        if len(ids) != 1:
            raise ValueError(f"token string {text!r} is {len(ids)} tokens, not one; pass token ids or single tokens")
        return ids[0]

    def token_ids(self, tokens: Any) -> list[int]:
        """Validated ids of a list of token ids or token strings (or a 1-D integer tensor), order and repeats kept.

        Each string must be exactly one token (see `token_id`).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_ids(["a", 5, "a"])
            [2, 5, 2]
        """
        if isinstance(tokens, str):
            raise TypeError("tokens takes a list of token ids or token strings; for the tokens of a text use prompt=")
        if isinstance(tokens, torch.Tensor):
            if tokens.ndim != 1 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
                raise TypeError(f"tokens must be a 1-D integer tensor; got shape {tuple(tokens.shape)}, dtype {tokens.dtype}")
            tokens = tokens.tolist()
        if not isinstance(tokens, Sequence):
            raise TypeError(f"tokens must be a list of token ids or strings; got {type(tokens).__name__}")
        ids = []
        for item in tokens:
            if isinstance(item, str):
                ids.append(self.token_id(item))
            elif isinstance(item, int) and not isinstance(item, bool):
                if not 0 <= item < self.d_vocab:
                    raise ValueError(f"token id {item} is out of range: 0..{self.d_vocab - 1}")
                ids.append(item)
            else:
                raise TypeError(f"tokens must hold ints or strings; got {item!r}")
        if not ids:
            raise ValueError("tokens is empty: give at least one token")
        return ids

    def token_subset(self, tokens: Any = None, prompt: str | None = None) -> tuple[list[int], str]:
        """The token ids to show and the sentence that says how they were chosen.

        - `prompt`: its distinct tokens in order of first appearance (special tokens such as BOS left out).
        - `tokens`: ids (ints, a 1-D tensor) or token strings (each must be exactly one token); repeats dropped.
        - neither: the whole vocabulary when it has at most `WHOLE_VOCAB` tokens, else `DEFAULT_COUNT`
          non-special tokens drawn uniformly at random with seed `DEFAULT_SEED` (an unbiased sample:
          the copying score and top-k accuracy summarise the whole vocabulary).

        At most `MAX_TOKENS` tokens (ValueError beyond).

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> view.token_subset(prompt="abca")
            ([2, 3, 4], 'the 3 distinct tokens of the prompt, in order of first appearance')
            >>> view.token_subset(tokens=["b", 2, "b"])
            ([3, 2], 'tokens chosen by the caller')
        """
        if tokens is not None and prompt is not None:
            raise ValueError("pass either tokens or prompt, not both")
        specials = set(self.special_token_ids)
        if prompt is not None:
            self._check_prompt(prompt, "give some text whose tokens to show", "tokens=[ids]")
            ids = self._encode(prompt)
            distinct = list(dict.fromkeys(i for i in ids if i not in specials)) or list(dict.fromkeys(ids))
            chosen, criterion = distinct, f"the {len(distinct)} distinct tokens of the prompt, in order of first appearance"
        elif tokens is not None:
            chosen, criterion = list(dict.fromkeys(self.token_ids(tokens))), "tokens chosen by the caller"
        elif self.d_vocab <= WHOLE_VOCAB:
            chosen, criterion = list(range(self.d_vocab)), f"the whole vocabulary ({self.d_vocab} tokens)"
        else:
            pool = torch.tensor([i for i in range(self.d_vocab) if i not in specials])
            gen = torch.Generator().manual_seed(DEFAULT_SEED)
            picked = pool[torch.randperm(len(pool), generator=gen)[:DEFAULT_COUNT]].sort().values
            chosen = [int(i) for i in picked]
            criterion = (
                f"{len(chosen)} tokens drawn uniformly at random (seed {DEFAULT_SEED}) from the "
                f"{self.d_vocab:,}-token vocabulary; pass tokens= or prompt= to choose"
            )
        if len(chosen) > MAX_TOKENS:
            raise ValueError(f"{len(chosen)} tokens is too many to draw: at most {MAX_TOKENS}")
        return chosen, criterion

    # ----- running the model ---------------------------------------------------------------
    def _run(self, tokens: Any, layers: Sequence[int] | None, extra: list[str]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One run under ``no_grad`` caching only the chosen layers' patterns and the hook points `extra`.

        Returns the patterns ``[batch, len(layers), n_heads, query, key]`` (float32) and the
        activations at `extra`. A full cache of GPT-2-small at 1 024 tokens is 3.3 GB; its
        attention patterns alone 576 MB.
        """
        tokens = self.check_tokens(tokens)
        chosen = self.check_layers(layers)
        names = [f"blocks.{layer}.attn.hook_pattern" for layer in chosen] + extra
        wanted = set(names)
        with torch.no_grad():
            _, cache = self.model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
        patterns = torch.stack([cache[name] for name in names[: len(chosen)]], dim=1).float()
        return patterns, [cache[name] for name in extra]

    def patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> torch.Tensor:
        """Attention patterns ``[batch, len(layers), n_heads, query, key]`` (float32).

        Runs the model once under ``no_grad``, caching only the requested layers' patterns.
        """
        return self._run(tokens, layers, [])[0]

    def patterns_and_values(self, tokens: Any, layers: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention patterns and value vectors of the chosen layers, from one run (float32).

        Returns ``(patterns [batch, len(layers), n_heads, query, key], values [batch,
        len(layers), seq, n_heads, d_head])``, the values being ``x W_V + b_V`` of each
        position (``x`` the attention layer's input), grouped K/V heads expanded per query head.

        Example:
            >>> import circuitwidgets as cw
            >>> patterns, values = cw.ModelView(cw.demo_model()).patterns_and_values([[0, 2, 3]], layers=[1])
            >>> patterns.shape, values.shape
            (torch.Size([1, 1, 4, 3, 3]), torch.Size([1, 1, 3, 4, 16]))
        """
        values_at = [f"blocks.{layer}.attn.hook_v" for layer in self.check_layers(layers)]
        patterns, values = self._run(tokens, layers, values_at)
        expanded = [self._expand_kv(v, "values", dim=2) for v in values]  # [batch, seq, heads, d_head] each
        return patterns, torch.stack(expanded, dim=1).float()

    def embedding_and_patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The residual stream entering block 0 and the attention patterns, from one run (float32).

        Returns ``(x0 [batch, seq, d_model], patterns [batch, len(layers), n_heads, query,
        key])``; ``x0`` is the token embedding plus the learned positional embedding, if any.

        Example:
            >>> import circuitwidgets as cw
            >>> x0, patterns = cw.ModelView(cw.demo_model()).embedding_and_patterns([[0, 2, 3]])
            >>> x0.shape, patterns.shape
            (torch.Size([1, 3, 64]), torch.Size([1, 2, 4, 3, 3]))
        """
        patterns, (x0,) = self._run(tokens, layers, ["blocks.0.hook_resid_pre"])
        return x0.float(), patterns

    def logits(self, tokens: Any) -> torch.Tensor:
        """Model logits ``[batch, seq, d_vocab]`` under ``no_grad``."""
        tokens = self.check_tokens(tokens)
        with torch.no_grad():
            return self.model(tokens)


_VIEWS: weakref.WeakKeyDictionary[Any, ModelView] = weakref.WeakKeyDictionary()


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
        with contextlib.suppress(TypeError):  # not weakly referenceable: rebuilt on every call
            _VIEWS[model] = view
    return view
