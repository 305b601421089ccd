"""`ModelView`: one view of any model, over the backend that runs it; `as_view` chooses and checks it.

This is the one module that knows every backend (`circuitwidgets.backends`): it picks the backend
for a model — TransformerLens (4 bridge, 2.x HookedTransformer), Hugging Face or nnsight (local or
on NDIF) — and wraps it in a `ModelView`, the only object analysis and widgets talk to. Backends never
import each other or this module.

Every analysis call and every widget action starts with `as_view(model)`, which checks the view it
returns against the model (`ModelView.is_stale`: weights edited by any route, ``.data`` included,
parameters or modules replaced, dtype or device moves; see `circuitwidgets.backends.change`) and
builds a new one when the model changed. A view passed where a model is expected is checked the
same way: a view held across an edit gives the edited model's answers, not the old ones. Hooks
change runs, not weights: `ModelView.hook_state` says which are present, so caches of run results
can be keyed on it. Runs happen one at a time per model (`ModelView.lock`), in eval mode.

The views `as_view` caches hold their models by weak reference, and no cache holds a model through
its value: deleting the last reference to a model frees it and its views.

Example:
    >>> import circuitwidgets as cw
    >>> view = cw.ModelView(cw.demo_model())
    >>> view.W_Q.shape                      # [n_attn_layers, n_heads, d_model, d_head]
    torch.Size([2, 4, 64, 16])
    >>> view.patterns(view.to_tokens("abcabc")).shape   # [batch, layers, heads, query, key]
    torch.Size([1, 2, 4, 7, 7])
    >>> view.token_subset(prompt="abca")
    ([2, 3, 4], 'the 3 distinct tokens of the prompt, in order of first appearance')
    >>> view.hook_state()
    ()
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import pkgutil
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from . import backends
from .ablation import ablation_hooks, ablation_sources, check_heads
from .backends import change, remote_weights
from .backends.change import fingerprints as _fingerprints  # noqa: F401 - benchmarks/bench_staleness.py
from .backends.change import hook_state_of  # noqa: F401 - re-exported
from .backends.change import model_lock as _model_lock
from .backends.hooked import describe, final_norm_of, past_eager
from .backends.hugging_face import NO_WEIGHTS, HuggingFaceBackend, is_hugging_face_model  # noqa: F401
from .backends.protocol import FEATURES, Backend, Missing, Support  # noqa: F401 - FEATURES re-exported
from .backends.tokens import CHOSEN, DEFAULT_COUNT, DEFAULT_SEED, MAX_TOKENS, WHOLE_VOCAB, TokenAdapter  # noqa: F401
from .backends.weights import WEIGHT_NAMES
from .numerics import LOW_PRECISION, non_finite_error, times_pow2, unit_scaled, work_dtype  # noqa: F401 - re-exported

__all__ = [
    "HFView", "ModelView", "as_view", "backend_types", "checked", "current_view", "register_backend", "view_for",
    "with_trace_options",
]
_GUARD = threading.Lock()


_BACKEND_TYPES: list[Any] = []


def backend_types() -> list[Any]:
    """Every backend, in the order they are tried on a model: the class each module of `circuitwidgets.backends`
    names ``BACKEND``, and those added with `register_backend`, by their ``ORDER`` (the TransformerLens backend,
    which takes any model and refuses what it cannot run, last).

    Example:
        >>> [cls.__name__ for cls in backend_types()]
        ['AblatedBackend', 'HuggingFaceBackend', 'TransformerLensBackend']
    """
    with _GUARD:
        if not _BACKEND_TYPES:
            for found in pkgutil.iter_modules(backends.__path__):
                cls = getattr(importlib.import_module(f"{backends.__name__}.{found.name}"), "BACKEND", None)
                if cls is not None and cls not in _BACKEND_TYPES:
                    _BACKEND_TYPES.append(cls)
        return sorted(_BACKEND_TYPES, key=lambda cls: cls.ORDER)


def register_backend(cls: type) -> type:
    """Add a backend defined outside `circuitwidgets.backends` (a class implementing `Backend`, with ``ORDER``,
    ``DEFAULT_OPTIONS``, ``accepts(model)`` and ``build(model, *, weak, options, dispatch)``); returns it.

    Example:
        >>> known = backend_types()[-1]
        >>> register_backend(known) is known and backend_types()[-1] is known     # (already known: no change)
        True
    """
    needed = ("ORDER", "DEFAULT_OPTIONS", "accepts", "build", "supports", "weight_views", "logit_terms", "feature_terms")
    missing = [name for name in needed if not hasattr(cls, name)]
    if missing:
        raise TypeError(f"a backend needs {', '.join(missing)} (see circuitwidgets.backends.protocol)")
    types = backend_types()
    with _GUARD:
        if cls not in types:
            _BACKEND_TYPES.append(cls)
    return cls


def _backend_type(model: Any) -> Any:
    return next(cls for cls in backend_types() if cls.accepts(model))


def _backend_for(model: Any, weak: bool, options: tuple = ()) -> Backend:
    """The backend that runs `model` (the first of `backend_types` that accepts it), built with `options`."""
    return _backend_type(model).build(model, weak=weak, options=options, dispatch=_backend_for)


class ModelView:
    """Model-specific facts resolved once: stacked weights, layers, tokenisation, patterns — over one backend.

    Attributes (weights detached, on the model's device and dtype; a model whose weights cannot be
    had here raises ValueError saying why on first use):
        W_Q, W_K, W_V: ``[n_attn_layers, n_heads, d_model, d_head]`` (grouped K/V heads expanded)
        W_O: ``[n_attn_layers, n_heads, d_head, d_model]``
        b_Q, b_K, b_V: ``[n_attn_layers, n_heads, d_head]``; b_O: ``[n_attn_layers, d_model]``
        W_E: ``[d_vocab, d_model]``; W_U: ``[d_model, d_vocab]``; b_U: ``[d_vocab]``
        W_pos: ``[n_ctx, d_model]``, or ``None`` for models without learned positions (rotary)
        ln_final_w, ln_final_b: None once folded (norms are folded as ``fold_ln`` does; `norm_note` says how)
        attn_layers: original block index of each attention layer (hybrid models skip some)
        attn_scales: what each attention layer divides its scores by (`scale_of` for one layer)
        positional_embedding_type: "standard", "rotary", ... ("unknown" when the config does not say)

    Layer arguments are original block indices; results are stacked over ``attn_layers``.
    ``weak=True`` (how `as_view` builds the views it caches) holds the model by weak reference:
    `model` then raises ReferenceError once it is gone. Building a view refuses a model with NaN or
    Inf in any parameter (ValueError naming the parameter).
    """

    def __init__(self, model: Any, *, weak: bool = False, backend: Backend | None = None):
        if isinstance(model, ModelView):
            raise TypeError("model is already a ModelView; use circuitwidgets.model.as_view(model)")
        self.backend: Backend = backend if backend is not None else _backend_for(model, weak)
        self._given = change.weak_ref(model) if weak else (lambda: model)
        facts = self.backend.facts
        self.facts = facts
        self.n_layers, self.n_heads, self.n_kv_heads = facts.n_layers, facts.n_heads, facts.n_kv_heads
        self.d_model, self.d_head, self.d_vocab, self.n_ctx = facts.d_model, facts.d_head, facts.d_vocab, facts.n_ctx
        self.attn_layers: list[int] = list(facts.attn_layers)
        self.attn_scales: list[float] = list(facts.attn_scales)
        self.positional_embedding_type = facts.positional_embedding_type
        self.normalization_type = facts.normalization_type
        self.attn_only = facts.attn_only
        self.device, self.dtype = self.backend.tokens.device, facts.dtype
        self.tokens: TokenAdapter = self.backend.tokens
        #: Serialises runs of this model (shared by every view of it; re-entrant).
        self.lock: threading.RLock = self.backend.lock

    # ----- the model and its weights ---------------------------------------------------------
    @property
    def model(self) -> Any:
        """The model this view runs (for an nnsight or Hugging Face model, its nnsight wrapper)."""
        return self.backend.model()

    @property
    def user_model(self) -> Any:
        """The object this view was made of, as the user passed it (ReferenceError once a weakly held one is gone)."""
        given = self._given()
        if given is None:
            raise ReferenceError("the model of this ModelView was deleted (a view holds its model weakly); use a live model")
        return given

    @property
    def reduces_in_trace(self) -> bool:
        """True when patterns are reduced where the model runs, one trace per request (Hugging Face, nnsight, NDIF)."""
        return self.backend.reduces_in_trace

    @property
    def runs_remotely(self) -> bool:
        """True when each run is a request to another machine (an nnsight model with ``remote=``: NDIF, or its
        serialising dry run): a trace costs a round trip and a download, so what a view can keep, it keeps.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).runs_remotely
            False
        """
        return bool(getattr(self.backend, "remote", False))

    @property
    def weights_local(self) -> bool:
        """False for a model whose weights are not on this machine (an nnsight model for NDIF: on meta)."""
        return bool(self.backend.weights_local)

    def weights_missing(self, what: str) -> str | None:
        """Why `what` (a weight-based view) cannot be had on this model, or None when the weights are here."""
        weights = self.backend.weights()
        return weights.reason.replace("{what}", what) if isinstance(weights, Missing) else None

    def require_weights(self, what: str) -> None:
        """Raise ValueError saying why when the weights that `what` needs cannot be had."""
        reason = self.weights_missing(what)
        if reason is not None:
            raise ValueError(reason)

    def __getattr__(self, name: str) -> Any:
        # only reached for names never set: the weights, read from the backend on first use
        if name in WEIGHT_NAMES and "backend" in self.__dict__:
            weights = self.backend.weights()
            if isinstance(weights, Missing):
                if name == "norm_note" and self.supports("weight_views"):  # weights elsewhere: folded there, as here
                    return remote_weights.norm_note(self.facts.normalization_type)
                raise ValueError(weights.reason.replace("{what}", f"the weight {name}"))
            return getattr(weights, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ----- what the backend can do, and its weight views ------------------------------------------
    def supports(self, feature: str) -> Support:
        """Whether this model's backend can do `feature` (one of `FEATURES`): a `Support`, false with the reason.

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> bool(view.supports("hooks")), bool(view.supports("weight_views"))
            (True, True)
        """
        return self.backend.supports(feature)

    def weight_views(self, requests: list[dict[str, Any]], report: Callable[[int, int], None] | None = None) -> list:
        """Answers to weight-view `requests` (`circuitwidgets.weight_views`: OV/QK blocks, eigenvalues, copying,
        top-k, skip-trigrams, positional QK, composition), computed wherever the weights are (here, or in a trace
        next to a remote model's: then in one request, and `report` sees no progress); ValueError saying why
        where the weights are nowhere. Layers in requests are stacked indices (`layer_index`).

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> view.weight_views([{"view": "ov_eigenvalues", "layers": [0, 1], "eigenvalues": False}])[0]["copying"].shape
            torch.Size([2, 4])
        """
        return self.backend.weight_views(requests, report)

    def logit_terms(self, tokens: Any, request: dict[str, Any], residual: dict[str, Any] | None = None) -> dict[str, Any]:
        """A logit attribution of one sequence (`circuitwidgets.logit_terms`), computed where the model runs: from
        `residual` (`residual_terms` of these tokens) when given and the run is here, else from one run (or trace).
        `request`: ``targets`` (an id per position), ``baseline`` (an id or None), ``known`` (which targets are real)."""
        return self.backend.logit_terms(self._one_sequence(tokens), request, residual)

    def feature_terms(self, tokens: Any, request: dict[str, Any]) -> dict[str, Any]:
        """A head's score (QK) or output (OV) at one destination split over dictionaries' features
        (`circuitwidgets.feature_terms.answer`), computed where the model runs: from one run here, or one trace next to a
        remote model's weights (then only the terms, top pairs and marginals come back). `request` as
        `circuitwidgets.analysis.features` builds it (its dictionaries' sites as protocol sites); ValueError saying why
        where the backend cannot (`supports("feature_attention")`) or the terms do not sum to the model's own value."""
        support = self.supports("feature_attention")
        if not support:
            raise ValueError(support.reason)
        return self.backend.feature_terms(self._one_sequence(tokens), request)

    def weight_source(self, what: str) -> Any:
        """The weights on this machine as a weight source of `circuitwidgets.weight_views` (for factored circuits
        built here); ValueError saying why `what` cannot be had where they are not here."""
        self.require_weights(what)
        return self.backend.weights()

    def unembed_embed(self) -> torch.Tensor:
        """``W_U W_E`` (``[d_model, d_model]``, float32 for half-precision models), formed once per view.

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> view.unembed_embed().shape, view.unembed_embed() is view.unembed_embed()
            (torch.Size([64, 64]), True)
        """
        self.require_weights("W_U W_E")
        return self.backend.weights().unembed_embed()

    def unembed_embed_scaled(self) -> tuple[torch.Tensor, int]:
        """``(M, e)`` with ``W_U W_E == M * 2**e`` and ``M`` free of under- and overflow, formed once per view.

        Example:
            >>> import circuitwidgets as cw
            >>> unit, exponent = cw.ModelView(cw.demo_model()).unembed_embed_scaled()
            >>> exponent
            0
        """
        self.require_weights("W_U W_E")
        return self.backend.weights().unembed_embed_scaled()

    # ----- change ------------------------------------------------------------------------------
    def is_stale(self) -> bool:
        """True when the model's parameters changed since this view read them (see `circuitwidgets.backends.change`).

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> view = cw.ModelView(model)
            >>> view.is_stale()
            False
            >>> _ = next(model.parameters()).data.mul_(2)   # behind autograd's back: no version bump
            >>> view.is_stale()
            True
        """
        return self.backend.changed()

    def weights_digest(self) -> str:
        """A short digest of the weights' contents as this view read them: the same weights give the same digest (in
        another session too), an edit another; what a saved result keeps to say which weights it came from.

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> cw.ModelView(model).weights_digest() == cw.ModelView(cw.demo_model()).weights_digest()
            True
        """
        return self.backend.weights_digest()

    def hook_state(self) -> tuple:
        """The hooks that can change a forward pass of the model now: ``()`` when there are none.

        A hashable tuple of ``(module name, "forward" | "forward_pre", hook ids)``; hook ids are never
        reused, so hooks removed and added again give a new state. Key caches of run results on it.

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> view = cw.as_view(model)
            >>> with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", lambda x, hook: x)]):
            ...     [(name, kind) for name, kind, _ in view.hook_state()]
            [('blocks.0.attn.hook_pattern', 'forward')]
            >>> view.hook_state()
            ()
        """
        return self.backend.hook_state()

    # ----- facts -------------------------------------------------------------------------------
    @property
    def has_learned_positions(self) -> bool:
        if self.weights_missing("W_pos") is not None:
            return self.positional_embedding_type == "standard"
        return self.W_pos is not None

    @property
    def has_layernorm(self) -> bool:
        return self.normalization_type is not None

    @property
    def has_rotary(self) -> bool:
        """Rotary positions (no W_pos): position enters as a rotation of each head's queries and keys."""
        return not self.has_learned_positions and self.positional_embedding_type == "rotary"

    @property
    def attn_scale(self) -> float:
        """The scale every attention layer divides its scores by; ValueError when layers differ (use `scale_of`)."""
        if len(set(self.attn_scales)) > 1:
            raise ValueError(
                f"this model's attention layers divide their scores by different scales {self.attn_scales} "
                "(scale_attn_by_inverse_layer_idx): use ModelView.scale_of(layer)"
            )
        return self.attn_scales[0]

    def scale_of(self, layer: int) -> float:
        """What attention layer `layer` (block index) divides its scores by.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).scale_of(1)
            4.0
        """
        return self.attn_scales[self.layer_index(layer)]

    def _positions_kind(self) -> str:
        kind = self.positional_embedding_type
        return "rotary or no learned" if kind == "unknown" else kind

    def no_positions_note(self) -> str:
        """Why there is no positional view, or "" when there is one (learned absolute or rotary positions).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).no_positions_note()
            ''
        """
        if not self.supports("weight_views"):
            return ("No positional view here: it needs the position weights, and this model's are not loaded anywhere "
                    "(load them, or run it remotely)")
        if self.has_learned_positions or self.has_rotary:
            return ""
        return (
            f"No positional view: this model uses {self._positions_kind()} positions, not a learned W_pos. Its attention "
            "to a position depends on the query and key contents too, so there is no position-only pattern; "
            "look at AttentionPattern on a prompt instead."
        )

    def no_positions_error(self, what: str) -> ValueError:
        """The error of a position-only computation (`what`) on a model without learned positions."""
        return ValueError(
            f"{what} needs learned absolute position embeddings (W_pos), but this model uses "
            f"{self._positions_kind()} positions: its attention to positions depends on the "
            "query and key contents, so there is no position-only pattern to show"
        )

    @property
    def final_norm(self) -> str | None:
        """How the residual stream is normalised before the unembedding: "LN", "RMS" or None."""
        return final_norm_of(self.normalization_type)

    # ----- layers and heads ------------------------------------------------------------------
    def layer_index(self, layer: int) -> int:
        """Position in the stacked weights of the attention layer with block index `layer`."""
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int; got {type(layer).__name__} {layer!r:.40}")
        if layer < 0 or layer >= self.n_layers:
            raise ValueError(f"layer={layer} is out of range: this model has layers 0..{self.n_layers - 1}")
        if layer not in self.attn_layers:
            raise ValueError(f"layer={layer} has no attention; attention layers are {self.attn_layers}")
        return self.attn_layers.index(layer)

    def check_head(self, head: int) -> int:
        if isinstance(head, bool) or not isinstance(head, int):
            raise TypeError(f"head must be an int; got {type(head).__name__} {head!r:.40}")
        if head < 0 or head >= self.n_heads:
            raise ValueError(f"head={head} is out of range: this model has heads 0..{self.n_heads - 1}")
        return head

    def check_pair(self, first: Any, second: Any) -> tuple[tuple[int, int], tuple[int, int]]:
        """``((l1, h1), (l2, h2))`` as ints, h1 in an earlier attention layer than h2 (a virtual head).

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()        # held: a view holds its model weakly
            >>> cw.as_view(model).check_pair([0, 1], (1, 2.0))
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

    # ----- tokens (the backend's TokenAdapter) -------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        return self.tokens.tokenizer

    @property
    def bos_token_id(self) -> int | None:
        return self.tokens.bos_token_id

    @property
    def special_token_ids(self) -> list[int]:
        return self.tokens.special_token_ids

    def _check_prompt(self, prompt: Any, if_empty: str, instead: str) -> None:
        self.tokens.check_prompt(prompt, if_empty, instead)

    def _encode(self, text: str) -> list[int]:
        return self.tokens.encode(text)

    def to_tokens(self, prompt: str, *, prepend_bos: bool = True, truncate: bool = False) -> torch.Tensor:
        """`TokenAdapter.to_tokens`: `prompt` as ``[1, seq]`` ids, BOS first, checked against ``n_ctx``."""
        return self.tokens.to_tokens(prompt, prepend_bos=prepend_bos, truncate=truncate)

    def check_tokens(self, tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        """`TokenAdapter.check_tokens`: validated ``[batch, seq]`` ids on the model's device.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).check_tokens([2, 3]).tolist()
            [[2, 3]]
        """
        return self.tokens.check_tokens(tokens, truncate=truncate)

    def tokens_of(self, prompt_or_tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        return self.tokens.tokens_of(prompt_or_tokens, truncate=truncate)

    def to_str_tokens(self, tokens: Any) -> list[str]:
        return self.tokens.to_str_tokens(tokens)

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """Each id's string; a byte-level token holding part of a character shows its bytes, ``<F0 9F>``.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_strings([2, 3])
            ['a', 'b']
        """
        return self.tokens.token_strings(ids)

    def token_id(self, text: str) -> int:
        """The id of `text`, which must be exactly one token.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_id("a")
            2
        """
        return self.tokens.token_id(text)

    def token_ids(self, tokens: Any) -> list[int]:
        """Validated ids of token ids or one-token strings, order and repeats kept.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_ids(["a", 5, "a"])
            [2, 5, 2]
        """
        return self.tokens.token_ids(tokens)

    def token_subset(self, tokens: Any = None, prompt: str | None = None) -> tuple[list[int], str]:
        """`TokenAdapter.token_subset`: the token ids to show and how they were chosen.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_subset(tokens=["b", 2, "b"])
            ([3, 2], 'tokens chosen by the caller')
        """
        return self.tokens.token_subset(tokens, prompt)

    # ----- runs --------------------------------------------------------------------------------
    def _hooked(self, what: str) -> Any:
        runs = self.backend.hooked(what)
        if isinstance(runs, Missing):
            raise runs.error()
        return runs

    def _one_sequence(self, tokens: Any) -> torch.Tensor:
        tokens = self.check_tokens(tokens)
        if tokens.shape[0] != 1:
            raise ValueError(f"tokens must be one sequence; got a batch of {tokens.shape[0]}")
        return tokens

    def _non_finite_error(self, what: str) -> ValueError:
        return non_finite_error(what, self.dtype)

    def patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> torch.Tensor:
        """Attention patterns ``[batch, len(layers), n_heads, query, key]`` (float32), from one run that stops there."""
        return self.backend.patterns(self.check_tokens(tokens), self.check_layers(layers))

    def reduced(self, tokens: Any, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """``{layer: answer}`` to each layer's request in `circuitwidgets.in_trace`'s vocabulary (overview codes,
        exact blocks, head-score masses), from one run; a remote model computes them where it runs.

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> view.reduced([[0, 2, 3]], {1: {"factor": 1}})[1]["codes"].shape
            torch.Size([4, 3, 3])
        """
        tokens = self.check_tokens(tokens)
        self.check_layers(list(requests))
        return self.backend.reduced(tokens, requests)

    def attention_parts(
        self, tokens: Any, layer: int, on_pattern: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any]
    ) -> Any:
        """``on_pattern(pattern, q, k)`` of one attention layer of one sequence, inside one run that stops there
        (`circuitwidgets.backends.hooked.HookedRuns.attention_parts`).

        Example:
            >>> import circuitwidgets as cw
            >>> shapes = lambda p, q, k: (tuple(p.shape), tuple(q.shape), tuple(k.shape))
            >>> cw.ModelView(cw.demo_model()).attention_parts([[0, 2, 3]], 1, shapes)
            ((4, 3, 3), (4, 3, 16), (4, 3, 16))
        """
        tokens = self._one_sequence(tokens)
        block = self.check_layers([layer])[0]
        return self._hooked("long-prompt patterns (queries and keys)").attention_parts(tokens, block, on_pattern)

    def attention_inputs(self, tokens: Any, layer: int, on_inputs: Callable[..., Any]) -> Any:
        """``on_inputs(q, k, v, out, scaling)`` of one attention layer of one sequence (``[n_heads, seq, d_head]``
        float32: its queries after rotation, keys and values with K/V groups expanded, the heads' outputs), from a
        run in which no layer holds an ``n x n`` matrix and that stops there; None, with nothing run, where the
        model's attention cannot run so (`memory_reason` says why: then use `attention_parts`).

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> shapes = lambda q, k, v, out, scaling: (tuple(q.shape), tuple(out.shape), scaling)
            >>> cw.ModelView(model).attention_inputs([[0, 2, 3]], 1, shapes)
            ((4, 3, 16), (4, 3, 16), 0.25)
        """
        tokens = self._one_sequence(tokens)
        block = self.check_layers([layer])[0]
        return self._hooked("long-prompt patterns (queries and keys)").attention_inputs(tokens, block, on_inputs)

    def memory_reason(self, layer: int) -> str:
        """Why a run up to `layer` holds each attention layer's ``n x n`` patterns ('' where it need not).

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> cw.ModelView(model).memory_reason(1)
            ''
        """
        if self.reduces_in_trace:
            return ""  # (rebuilt a block at a time where the model runs: `circuitwidgets.in_trace`)
        return str(self._hooked("patterns").memory_reason(self.check_layers([layer])[0]))

    def runs_layer_by_layer(self, n_tokens: int) -> bool:
        """True when a run of `n_tokens` that keeps no pattern attends memory-efficiently, a layer at a time, and
        reports each layer's progress (one layer's float32 patterns would pass ``EAGER_BYTES``).

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> cw.ModelView(model).runs_layer_by_layer(64), cw.ModelView(model).runs_layer_by_layer(4096)
            (False, True)
        """
        return past_eager(self.n_heads, n_tokens)

    def patterns_and_values(self, tokens: Any, layers: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Patterns ``[batch, len(layers), n_heads, query, key]`` and values ``[batch, len(layers), seq, n_heads, d_head]``.

        Example:
            >>> import circuitwidgets as cw
            >>> patterns, values = cw.ModelView(cw.demo_model()).patterns_and_values([[0, 2, 3]], layers=[1])
            >>> patterns.shape, values.shape
            (torch.Size([1, 1, 4, 3, 3]), torch.Size([1, 1, 3, 4, 16]))
        """
        tokens, chosen = self.check_tokens(tokens), self.check_layers(layers)
        return self._hooked("the value vectors").patterns_and_values(tokens, chosen)

    def embedding_and_patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The residual stream entering block 0 ``[batch, seq, d_model]`` and the patterns, from one run.

        Example:
            >>> import circuitwidgets as cw
            >>> x0, patterns = cw.ModelView(cw.demo_model()).embedding_and_patterns([[0, 2, 3]])
            >>> x0.shape, patterns.shape
            (torch.Size([1, 3, 64]), torch.Size([1, 2, 4, 3, 3]))
        """
        tokens, chosen = self.check_tokens(tokens), self.check_layers(layers)
        return self._hooked("the residual stream").embedding_and_patterns(tokens, chosen)

    def logits(self, tokens: Any) -> torch.Tensor:
        """Model logits ``[batch, seq, d_vocab]``, from a run in eval mode holding `lock`.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).logits([[0, 2, 3]]).shape
            torch.Size([1, 3, 64])
        """
        return self.backend.logits(self.check_tokens(tokens))

    def run_with_hooks(
        self, tokens: Any, hooks: Sequence[tuple[Any, Callable[..., Any]]], keep: Sequence[Any] = ()
    ) -> tuple[torch.Tensor, dict[Any, torch.Tensor]]:
        """Logits ``[batch, seq, d_vocab]`` (float32) of one run with `hooks`, ``(where, function)`` pairs as
        TransformerLens ``fwd_hooks`` (a function may return a replacement activation), and the activations at
        the places in `keep`, keyed as given; the hooks live for that run only. A place is a site
        ``(word, layer)`` (`circuitwidgets.sites`: what analysis uses, mapped by the backend) or, on a
        TransformerLens model, a hook point's name. A model whose runs have no hook points raises ValueError
        saying why (`supports("hooks")`).

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> logits, kept = view.run_with_hooks([[0, 2, 3]], [], keep=[("z", 1)])
            >>> logits.shape, kept[("z", 1)].shape
            (torch.Size([1, 3, 64]), torch.Size([1, 3, 4, 16]))
        """
        runs = self._hooked("running the model with hooks (an ablation or a patch)")
        return runs.run_with(self.check_tokens(tokens), hooks, keep)

    def record(self, tokens: Any, keep: Sequence[Any] = (), copies: int = 1) -> Any:
        """One run of `tokens` recorded so that later runs restart at any block: a
        `circuitwidgets.backends.resume.Resumable` (``.residual[block]``, ``.logits``, ``.kept``,
        ``.run(start, hooks, positions=…, residual=…, copies=…, keep=…, stop=…)``), keeping the activations at
        `keep` (sites). Raises ValueError saying why where the backend cannot (`supports("resume")`), and
        `circuitwidgets.backends.resume.ResumeError` (a ValueError) where restarting does not reproduce this
        model's logits (checked once here, with `copies` copies of the batch).

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> run = view.record([[0, 2, 3, 2]])
            >>> logits, _ = run.run(1, positions=[3])          # block 1 and the unembedding of position 3 only
            >>> logits.shape, bool((logits[:, 0] - run.logits[:, 3]).abs().max() < 1e-5)
            (torch.Size([1, 1, 64]), True)
        """
        support = self.supports("resume")
        if not support:
            raise ValueError(support.reason)
        runs = self._hooked("restarting runs at a layer (fast sweeps, path patching)")
        return runs.record(self.check_tokens(tokens), keep, copies)

    def gradients(
        self, tokens: Any, sites: Sequence[Any], objective: Callable[[torch.Tensor], torch.Tensor], drop: Sequence[int] = ()
    ) -> dict[str, Any]:
        """The activations at `sites` and the gradients there of ``objective(logits)`` (``[batch]``, summed), from one
        run with gradients; with `drop` (block indices), also each block's gradients with the backward pass through
        that block's ``attn_out`` and ``mlp_out`` set to zero (`circuitwidgets.backends.resume.gradient_run`).
        Raises ValueError saying why where the backend cannot (`supports("gradients")`).

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> out = view.gradients([[0, 2, 3]], [("z", 1)], lambda logits: logits[:, -1, 5])
            >>> out["acts"][("z", 1)].shape == out["grads"][("z", 1)].shape, out["value"].shape
            (True, torch.Size([1]))
        """
        support = self.supports("gradients")
        if not support:
            raise ValueError(support.reason)
        runs = self._hooked("running the model with gradients (attribution patching)")
        return runs.gradients(self.check_tokens(tokens), sites, objective, [self.check_layer_block(b) for b in drop])

    def check_layer_block(self, block: Any) -> int:
        """`block` checked as a block index (``0 <= block < n_layers``)."""
        if isinstance(block, bool) or not isinstance(block, int) or not 0 <= block < self.n_layers:
            raise ValueError(f"block must be an int in [0, {self.n_layers}); got {block!r}")
        return block

    def ablation_hooks(self, heads: Any, method: str = "zero", reference: Any = None, *, shifted: bool = False) -> list:
        """The ``fwd_hooks`` that ablate `heads` (``(layer, head)`` pairs) by `method` (see
        `circuitwidgets.backends.ablated`); `reference` tokens feed ``"mean"`` and ``"resample"``."""
        runs = self._hooked("ablating heads")
        ref = None if reference is None else self.check_tokens(reference)
        return ablation_hooks(runs, check_heads(heads, self.facts), method, ref, shifted=shifted)

    def ablation_sources(
        self, layers: Any, method: str, reference: Any = None, *, shifted: bool = False
    ) -> dict[int, torch.Tensor | None]:
        """What ablated heads of each of `layers` take (`circuitwidgets.ablation.ablation_sources`), from one run of
        `reference` tokens: None (``"zero"``) or every head's replacement ``z``."""
        runs = self._hooked("ablating heads")
        ref = None if reference is None else self.check_tokens(reference)
        return ablation_sources(runs, self.check_layers(sorted(set(layers))), method, ref, shifted=shifted)

    def residual_terms(self, tokens: Any, patterns: Sequence[int] = ()) -> dict[str, Any]:
        """The pieces of the residual stream reaching the final norm, from one run of one sequence (float32).

        Returns ``embed`` ``[seq, d_model]``; ``pos_embed`` (learned positions) or None; ``z``
        ``[n_attn_layers, seq, n_heads, d_head]`` (head h of layer l writes ``z[l, :, h] @ W_O[l, h]``);
        ``mlp_out`` ``{block: [seq, d_model]}``; ``scale`` ``[seq]`` the final norm's scale or None;
        ``resid`` the residual entering the final norm; ``logits`` ``[seq, d_vocab]``. With `patterns`
        (block indices of attention layers) also ``patterns``: those layers' attention patterns from
        the same run, a list of ``[n_heads, query, key]``.

        Example:
            >>> import circuitwidgets as cw
            >>> parts = cw.ModelView(cw.demo_model()).residual_terms([[0, 2, 3]])
            >>> parts["z"].shape, parts["scale"] is None, sorted(parts["mlp_out"])
            (torch.Size([2, 3, 4, 16]), True, [])
        """
        tokens = self._one_sequence(tokens)
        runs = self._hooked("logit attribution (every head's output)")
        learned = self.weights_missing("W_pos") is None and self.W_pos is not None
        learned = learned and self.positional_embedding_type in ("standard", "unknown")
        layers = self.check_layers(list(patterns)) if patterns else []
        return runs.residual_terms(tokens, self.final_norm, learned, patterns=layers)


class HFView(ModelView):
    """A `ModelView` of an nnsight or Hugging Face model whose patterns come from nnsight traces.

    Args:
        model: an nnsight ``LanguageModel`` / ``TransformersModel``, or a Hugging Face causal LM
            (then pass `tokenizer`, or set ``model.tokenizer``; it is wrapped in nnsight, locally).
        remote: passed to every ``model.trace(...)`` unchanged (True: NDIF; "local": nnsight's
            serialising dry run of the remote path, here).
        tokenizer: the tokenizer of a plain Hugging Face model.
        **trace_options: further keyword arguments of ``model.trace`` (e.g. ``backend=``), unchanged.

    Example:
        >>> import circuitwidgets as cw
        >>> from circuitwidgets.demo import tiny_hf_model
        >>> model, tokenizer = tiny_hf_model("llama")
        >>> view = HFView(model, tokenizer=tokenizer)
        >>> view.patterns(view.to_tokens("abcabc"), layers=[1]).shape   # [batch, layers, heads, query, key]
        torch.Size([1, 1, 4, 7, 7])
    """

    backend: HuggingFaceBackend

    def __init__(
        self, model: Any, *, remote: Any = False, tokenizer: Any = None, weak: bool = False, backend: Any = None,
        **trace_options: Any,
    ):
        if isinstance(model, ModelView):
            raise TypeError("model is already a ModelView")
        if backend is None:
            backend = HuggingFaceBackend(model, remote=remote, tokenizer=tokenizer, weak=weak, **trace_options)
        super().__init__(model, weak=weak, backend=backend)

    @property
    def remote(self) -> Any:
        return self.backend.remote

    @property
    def trace_options(self) -> dict[str, Any]:
        return self.backend.trace_options

    @property
    def bytes_received(self) -> int:
        """Bytes of the tensors this view's traces saved (what a remote request downloads)."""
        return self.backend.bytes_received

    @property
    def traces(self) -> int:
        """Traces this view has run (for a remote model: requests sent, each a queue, a run and a download)."""
        return self.backend.traces

    @property
    def nnsight_model(self) -> Any:
        """The nnsight wrapper this view traces."""
        return self.backend.model()

    @property
    def hf_model(self) -> Any:
        return self.backend.hf_model


# ----- choosing and checking views -----------------------------------------------------------------
# model -> {options: view}; each view holds its model weakly, so no value holds its key
_VIEWS: weakref.WeakKeyDictionary[Any, dict[tuple, ModelView]] = weakref.WeakKeyDictionary()


def _build(model: Any, options: tuple) -> ModelView:
    backend = _backend_for(model, True, options)
    if isinstance(backend, HuggingFaceBackend):  # (its view has the trace's counters and options)
        return HFView(model, weak=True, backend=backend)
    return ModelView(model, weak=True, backend=backend)


def view_of(model: Any, options: tuple = ()) -> ModelView:
    """The checked view of `model` built with `options` (a backend's ``options``), cached until the model changes."""
    with _model_lock(model):
        try:
            hash(options)
            with _GUARD:
                views = _VIEWS.setdefault(model, {})
        except TypeError:  # an unhashable option, or a model not weakly referenceable: built every time
            return _build(model, options)
        view = views.get(options)
        if view is None or view.is_stale():
            view = views[options] = _build(model, options)
    return view


# Views checked at the start of work that runs no user code until it ends (one widget refresh).
_CHECKED_NOW: contextvars.ContextVar[tuple[ModelView, ...]] = contextvars.ContextVar("checked_views", default=())


@contextlib.contextmanager
def checked(view: ModelView) -> Iterator[ModelView]:
    """Inside, `as_view(view)` returns `view` without reading the weights again.

    For work in which no user code can run, such as one widget refresh: the check at its start
    holds to its end, and the analysis calls it makes (each an `as_view`) do not repeat it
    (27 ms each on GPT-2 small).

    Example:
        >>> import circuitwidgets as cw
        >>> view = cw.ModelView(cw.demo_model())
        >>> with checked(view):
        ...     cw.as_view(view) is view
        True
    """
    token = _CHECKED_NOW.set((*_CHECKED_NOW.get(), view))
    try:
        yield view
    finally:
        _CHECKED_NOW.reset(token)


def as_view(model: Any) -> ModelView:
    """The current `ModelView` of `model` — or of the model behind a view passed in, rebuilt if it is stale.

    Checks the view with `ModelView.is_stale` on every call and builds a new one when the model
    changed, under the model's lock, so threads asking at once share one view.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> cw.as_view(model) is cw.as_view(model)
        True
    """
    if isinstance(model, ModelView):
        if any(model is view for view in _CHECKED_NOW.get()) or not model.is_stale():
            return model
        return view_of(model.user_model, model.backend.options)
    return view_of(model, _default_options(model))


def _default_options(model: Any) -> tuple:
    return _backend_type(model).DEFAULT_OPTIONS


def view_for(model: Any, *, remote: Any = False, tokenizer: Any = None, **trace_options: Any) -> HFView:
    """The `HFView` of `model` with these trace options, shared by every widget that asks for the same (rebuilt
    when the model changed); what ``remote=`` and ``trace_options=`` of a widget make.

    Example:
        >>> from circuitwidgets.demo import tiny_hf_model
        >>> model, tokenizer = tiny_hf_model("gpt2")
        >>> view_for(model, remote="local", tokenizer=tokenizer) is view_for(model, remote="local", tokenizer=tokenizer)
        True
    """
    if isinstance(model, ModelView) or not is_hugging_face_model(model):
        raise TypeError(
            "remote= and trace_options= take an nnsight or Hugging Face model (an HFView takes them itself: "
            f"HFView(model, remote=...)); got {describe(model)}"
        )
    view = view_of(model, (remote, tuple(sorted(trace_options.items())), tokenizer))
    assert isinstance(view, HFView)
    return view


def with_trace_options(model: Any, remote: Any, trace_options: dict[str, Any] | None) -> Any:
    """`model` itself, or with ``remote=`` / ``trace_options=`` (a widget's arguments) its shared `view_for`.

    Example:
        >>> import circuitwidgets as cw
        >>> with_trace_options(cw.demo_model(), False, ["backend"])
        Traceback (most recent call last):
        ...
        TypeError: trace_options must be a dict of model.trace keyword arguments (e.g. {"backend": ...}); got list
    """
    if trace_options is not None and not isinstance(trace_options, dict):
        raise TypeError(
            'trace_options must be a dict of model.trace keyword arguments (e.g. {"backend": ...}); '
            f"got {type(trace_options).__name__}"
        )
    if trace_options and not all(isinstance(key, str) and key.isidentifier() for key in trace_options):
        raise TypeError(f"trace_options' keys must be keyword names; got {sorted(map(repr, trace_options))}")
    if not remote and not trace_options:
        return model
    return view_for(model, remote=remote or False, **dict(trace_options or {}))


def has_local_weights(model: Any) -> bool:
    """False for a model (or view) whose weights are not on this machine (an nnsight model for NDIF: on meta).

    Example:
        >>> import circuitwidgets as cw
        >>> has_local_weights(cw.demo_model())
        True
    """
    return as_view(model).weights_local


# ----- one check per kernel message (widgets) ------------------------------------------------------
# model -> (message id, options, weak reference to the view checked while handling it)
_CHECKED: weakref.WeakKeyDictionary[Any, tuple[str, tuple, weakref.ref]] = weakref.WeakKeyDictionary()


def _message_id() -> str | None:
    """The id of the kernel message being handled (or last handled), None outside a kernel."""
    kernelbase = sys.modules.get("ipykernel.kernelbase")
    if kernelbase is None or not kernelbase.Kernel.initialized():
        return None
    header = kernelbase.Kernel.instance().get_parent("shell").get("header") or {}
    return header.get("msg_id")


def current_view(model: Any) -> ModelView:
    """`as_view(model)`, reusing the view already checked while handling the current kernel message.

    The check reads every weight (27 ms on GPT-2 small); one user action (a layer picked in a
    Dashboard refreshes five widgets) pays it once. In a kernel a model changes only while user code
    runs, inside an execute request, a new message. Outside a kernel every call checks. The cache
    holds models weakly and views by weak reference: it never keeps either alive.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> current_view(model) is cw.as_view(model)  # no kernel here: checked on every call
        True
    """
    message = _message_id()
    if not message:
        return as_view(model)
    if isinstance(model, ModelView):
        given, options = model.user_model, model.backend.options
    else:
        given, options = model, _default_options(model)
    with contextlib.suppress(TypeError):  # not weakly referenceable, or unhashable options
        seen = _CHECKED.get(given)
        if seen is not None and seen[0] == message and seen[1] == options:
            view = seen[2]()
            if view is not None:
                return view
    view = as_view(model)
    with contextlib.suppress(TypeError):
        _CHECKED[given] = (message, options, weakref.ref(view))
    return view
