"""The Hugging Face backend: plain transformers causal LMs and nnsight models, local or run by NDIF.

Patterns come from one nnsight trace per request (`circuitwidgets.in_trace`, torch only): rebuilt
inside the trace from the inputs of the model's own attention call, reduced there (uint8 codes of
the layer or its pooled overview, an exact block or row, head-score masses), and only that is
saved. With ``remote=True`` the trace runs on NDIF and only the reduced result crosses the network.
The model keeps its own attention implementation (sdpa, flash): nothing here changes it.

Patterns never need TransformerLens. Weights (and the hook-point runs of logit attribution and
direct copying) come, where they are on this machine, from a TransformerLens 4 bridge
(``TransformerBridge.boot_transformers(hf_model=...)``) built on first use over a twin of the
model's module tree that shares every parameter. An architecture TransformerLens cannot bridge, or
a model whose weights are elsewhere (an nnsight model for NDIF holds only their shapes, on
``meta``), gets a `Missing` saying so, which the weight views show.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import math
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import torch

from .. import in_trace, progress
from . import change, features, remote_weights
from .hooked import HookedRuns, checked_reduction, describe, facts_of, terms_here
from .protocol import Facts, Missing, Support, check_feature
from .tokens import TokenAdapter
from .traces import nnsight_module, saved_bytes, ship
from .weights import Weights, views_here

#: What a weight-based view says on a model whose weights are not on this machine.
NO_WEIGHTS = (
    "this model's weights are not on this machine (an nnsight model for remote execution holds only their "
    "shapes): {what} needs them. The attention views (AttentionPattern, pattern-based HeadScores) work remotely; "
    "for weight-based views load the model locally (e.g. nnsight's TransformersModel(repo_id, task='text-generation', "
    "dispatch=True), or a TransformerLens model)"
)
_SOURCE_CALLS: dict[type, bool] = {}
_WRAPPER = "_circuitwidgets_nnsight"  # where a plain Hugging Face model keeps its nnsight wrapper


def is_hugging_face_model(model: Any) -> bool:
    """True for an nnsight model wrapper or a plain Hugging Face ``PreTrainedModel``."""
    if type(model).__module__.startswith("nnsight."):
        return True
    return type(model).__module__.startswith("transformers.") and hasattr(model, "config")


def _calls_attention_interface(module: torch.nn.Module) -> bool:
    kind = type(module)
    if kind not in _SOURCE_CALLS:
        try:
            _SOURCE_CALLS[kind] = "attention_interface(" in inspect.getsource(kind.forward)
        except (OSError, TypeError):
            _SOURCE_CALLS[kind] = False
    return _SOURCE_CALLS[kind]


def wrap(model: Any, tokenizer: Any) -> Any:
    """The nnsight wrapper of `model` (itself if it is one), with `tokenizer` for a plain Hugging Face model."""
    if type(model).__module__.startswith("nnsight."):
        return model
    nnsight = nnsight_module()
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise TypeError("a plain Hugging Face model needs its tokenizer: HFView(model, tokenizer=tokenizer)")
    wrapper = model.__dict__.get(_WRAPPER)
    if wrapper is None or wrapper.tokenizer is not tokenizer:
        if any(p.is_meta for p in model.parameters()):  # nothing can run it here (nnsight cannot even wrap it)
            raise ValueError(
                "this Hugging Face model's weights are on the meta device, not on this machine: no view can run or read "
                "it here. Load its weights, or wrap it in nnsight for a remote engine (nnsight.LanguageModel(repo_id), "
                "remote=True)"
            )
        wrapper = (getattr(nnsight, "TransformersModel", None) or nnsight.LanguageModel)(model, tokenizer=tokenizer)
        model.__dict__[_WRAPPER] = wrapper  # the model keeps its wrapper (not as a submodule): views hold both weakly
    return wrapper


def _config(hf: Any) -> Any:
    return hf.config.get_text_config() if hasattr(hf.config, "get_text_config") else hf.config


def _facts(hf: Any, attention: list[torch.nn.Module]) -> Facts:
    """`Facts` from the Hugging Face config and the attention modules (each layer's own ``scaling``)."""
    cfg = _config(hf)
    n_heads = int(cfg.num_attention_heads)
    d_model = int(cfg.hidden_size)
    d_head = int(getattr(cfg, "head_dim", None) or d_model // n_heads)
    keys = " ".join(cfg.to_dict())
    if "rope" in keys or "rotary" in keys:
        positions = "rotary"
    elif any(name.endswith(("wpe", "embed_positions")) for name, _ in hf.named_modules()):
        positions = "standard"
    else:
        positions = "unknown"
    norms = [type(m).__name__.lower() for m in hf.modules() if "norm" in type(m).__name__.lower()]
    norm = "RMS" if any("rms" in n for n in norms) else ("LN" if norms else None)
    first = next(iter(hf.parameters()))
    return Facts(
        n_layers=len(attention),
        n_heads=n_heads,
        n_kv_heads=int(getattr(cfg, "num_key_value_heads", None) or n_heads),
        d_model=d_model,
        d_head=d_head,
        d_vocab=int(cfg.vocab_size),
        n_ctx=int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 2048),
        attn_layers=tuple(range(len(attention))),
        attn_scales=tuple(1.0 / float(getattr(m, "scaling", None) or 1.0 / math.sqrt(d_head)) for m in attention),
        positional_embedding_type=positions,
        normalization_type=norm,
        attn_only=False,
        device=torch.device("cpu") if first.is_meta else first.device,
        dtype=first.dtype,
    )


# an in-memory tokenizer -> its saved and reloaded copy (which holds nothing of the original)
_RELOADED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _loadable(tokenizer: Any) -> Any:
    """`tokenizer` as TransformerLens can take it: one built in memory is saved and reloaded (it lacks a
    ``name_or_path`` until then, and TransformerLens 4.3 raises ``KeyError: 'name_or_path'``)."""
    if getattr(tokenizer, "name_or_path", ""):
        return tokenizer
    loaded = _RELOADED.get(tokenizer)  # once per tokenizer, not at every rebuild after an edit
    if loaded is None:
        import transformers

        folder = tempfile.mkdtemp(prefix="circuitwidgets-tokenizer-")  # TransformerLens reads it again later, by path
        tokenizer.save_pretrained(folder)
        loaded = _RELOADED[tokenizer] = transformers.AutoTokenizer.from_pretrained(folder)
        weakref.finalize(loaded, shutil.rmtree, folder, True)
    return loaded


def bridge_of(hf: Any, tokenizer: Any) -> Any:
    """A TransformerLens 4 bridge that reads `hf`'s own parameters (shared, not copied).

    The bridge rebuilds the module tree it wraps (and makes its attention eager), so it wraps a
    copy of `hf`'s modules and config holding the very same parameter and buffer tensors: `hf`
    itself is left as it was, and an edit to its weights is an edit to the bridge's.
    """
    from transformer_lens.model_bridge import TransformerBridge

    shared = {id(t): t for t in (*hf.parameters(), *hf.buffers())}
    twin = copy.deepcopy(hf, shared)
    name = (hf.config.architectures or [type(hf).__name__])[0]
    with contextlib.redirect_stdout(io.StringIO()):
        return TransformerBridge.boot_transformers(name, hf_model=twin, tokenizer=_loadable(tokenizer))


def _name_in(module: torch.nn.Module, parameter: torch.Tensor) -> str:
    for name, tensor in module.named_parameters():
        if tensor is parameter:
            return name
    return f"of shape {tuple(parameter.shape)}"


class HuggingFaceBackend:
    """The backend of an nnsight or plain Hugging Face model; ``remote`` and `trace_options` go to every trace."""

    reduces_in_trace = True
    ORDER = 10
    #: ``(remote, trace options as sorted pairs, tokenizer)``: what `circuitwidgets.model.view_for` asks with.
    DEFAULT_OPTIONS: tuple = (False, (), None)

    @classmethod
    def accepts(cls, model: Any) -> bool:
        return is_hugging_face_model(model)

    @classmethod
    def build(cls, model: Any, *, weak: bool, options: tuple, dispatch: Any) -> HuggingFaceBackend:
        remote, trace_options, tokenizer = options or cls.DEFAULT_OPTIONS
        return cls(model, remote=remote, tokenizer=tokenizer, weak=weak, **dict(trace_options))

    def __init__(self, model: Any, *, remote: Any = False, tokenizer: Any = None, weak: bool = False, **trace_options: Any):
        if not is_hugging_face_model(model):
            raise TypeError(f"HFView takes an nnsight model or a Hugging Face model; got {describe(model)}")
        wrapper = wrap(model, tokenizer)
        get = self.model = change.ModelRef(wrapper, weak, also=change.weak_ref(model) if weak else None)
        self.remote = remote
        self.trace_options = dict(trace_options)
        self.options = (remote, tuple(sorted(trace_options.items())), tokenizer)
        self.bytes_received = 0
        self.traces = 0  # traces run (on NDIF: requests queued, run and downloaded)
        hf = wrapper._module
        self._attention_paths = [name for name, module in hf.named_modules() if _calls_attention_interface(module)]
        if not self._attention_paths:
            raise ValueError(
                f"found no attention module calling transformers' attention interface in {describe(hf)}: "
                "its patterns cannot be rebuilt inside a trace"
            )
        self.lock: threading.RLock = change.model_lock(hf)
        self.weights_local = not any(p.is_meta for p in hf.parameters())
        self.facts = _facts(hf, [hf.get_submodule(path) for path in self._attention_paths])
        self._watch = change.ParameterWatch(lambda: list(get()._module.parameters()), lambda p: _name_in(get()._module, p))
        self.modules = change.ModuleList(lambda: [get()._module])
        tok = wrapper.tokenizer

        def encode(text: str) -> list[int]:
            return [int(i) for i in tok(text, add_special_tokens=False)["input_ids"]]

        def with_bos(text: str) -> list[int]:  # BOS first where the tokenizer has one, as TransformerLens does
            ids, bos = encode(text), getattr(tok, "bos_token_id", None)
            return [int(bos), *ids] if bos is not None and (not ids or ids[0] != bos) else ids

        self.tokens = TokenAdapter(
            tok, d_vocab=self.facts.d_vocab, n_ctx=self.facts.n_ctx, device=self.facts.device, encode=encode, with_bos=with_bos
        )
        self._bridge_parts: tuple[Weights, HookedRuns] | Missing | None = None

    # ----- the model -------------------------------------------------------------------------
    @property
    def hf_model(self) -> Any:
        return self.model()._module

    def _envoy(self, index: int) -> Any:
        envoy = self.model()
        for part in self._attention_paths[index].split("."):
            envoy = envoy[int(part)] if part.isdigit() else getattr(envoy, part)
        return envoy

    # ----- parts -----------------------------------------------------------------------------
    def _bridge(self) -> tuple[Weights, HookedRuns] | Missing:
        """Weights and hook-point runs from a TransformerLens bridge over the same parameters, built on first use."""
        if self._bridge_parts is None:
            if not self.weights_local:
                self._bridge_parts = Missing(NO_WEIGHTS)
            else:
                hf = self.hf_model
                name = (hf.config.architectures or [type(hf).__name__])[0]
                try:
                    bridge = bridge_of(hf, self.model().tokenizer)
                except Exception as exc:  # noqa: BLE001 - any failure of TransformerLens to adapt this architecture
                    said = str(exc).split("Available architectures")[0].strip().rstrip(".")  # not the list of 300 names
                    first = said.splitlines()[0][:120] if said else type(exc).__name__
                    self._bridge_parts = Missing(
                        f"TransformerLens cannot bridge the architecture {name} ({first}): {{what}} needs the weights in "
                        "TransformerLens form. Attention patterns and pattern-based head scores still work"
                    )
                else:
                    runs = HookedRuns(lambda: bridge, facts_of(bridge), self.lock, change.ModuleList(lambda: [bridge]))
                    self._bridge_parts = (Weights(bridge, facts_of(bridge)), runs)
        return self._bridge_parts

    def weights(self) -> Weights | Missing:
        parts = self._bridge()
        return parts if isinstance(parts, Missing) else parts[0]

    def hooked(self, what: str) -> HookedRuns | Missing:
        parts = self._bridge()
        return Missing(parts.reason.format(what=what)) if isinstance(parts, Missing) else parts[1]

    @property
    def weights_in_trace(self) -> bool:
        """True when the weights stay where the model runs (``remote=``, on ``meta`` here): weight views and logit
        attribution are computed there, in a trace, and only their reduced answers come back."""
        return not self.weights_local and bool(self.remote)

    def supports(self, feature: str) -> Support:
        """Patterns always (in traces); weight views and logit attribution here or in the trace; the rest needs a
        TransformerLens bridge over weights on this machine (its `Missing` says why not)."""
        check_feature(feature)
        if feature == "patterns" or (feature in ("weight_views", "logit_attribution") and self.weights_in_trace):
            return Support()
        if feature == "feature_attention" and self.weights_in_trace:  # (in the trace, for the architectures it knows)
            return Support(features.trace_reason(self))
        parts = self._bridge()
        if isinstance(parts, Missing):
            what = {"weights_here": "this view", "weight_views": "this weight-based view", "hooks": "running the model "
                    "with hooks (ablation, patching)", "logit_attribution": "logit attribution",
                    "resume": "restarting runs at a layer (fast sweeps, path patching)",
                    "gradients": "running the model with gradients (attribution patching)",
                    "feature_attention": "feature-level attention"}[feature]
            return Support(parts.reason.replace("{what}", what))
        return Support()

    def weight_views(self, requests: list[dict[str, Any]], report: Any = None) -> list[dict[str, Any]]:
        if self.weights_in_trace:  # (the server shows no progress here)
            return remote_weights.trace_weight_views(self, requests)
        return views_here(self.weights(), requests, report)

    def logit_terms(self, tokens: torch.Tensor, request: dict[str, Any], residual: Any = None) -> dict[str, Any]:
        if self.weights_in_trace:  # one trace of the prompt: its activations never come here
            return remote_weights.trace_logit_terms(self, tokens, request)
        return terms_here(self.hooked("logit attribution"), self.weights(), tokens, request, residual)

    def feature_terms(self, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]:
        if self.weights_in_trace:  # one trace of the prompt: only the terms, top pairs and marginals come back
            return features.answer_in_trace(self, tokens, request)
        return features.answer_here(self.hooked("feature-level attention"), self.weights(), tokens, request)

    def changed(self) -> bool:
        with self.lock:
            return self._watch.changed()

    def weights_digest(self) -> str:
        return self._watch.digest()

    def hook_state(self) -> tuple:
        """The hooks on the model's own modules (a trace's hooks come and go with it)."""
        with self.lock:
            hf = self.hf_model
            return change.hook_state_of(self.modules(), hf.named_modules)

    # ----- runs ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _running(self) -> Iterator[Any]:
        """One run at a time, a local model in eval mode (every module's mode restored after), under ``no_grad``
        (a local trace would otherwise keep every activation for a backward pass: 5x the memory)."""
        with self.lock:
            modes = [(m, m.training) for m in self.modules()] if self.weights_local else []
            if any(mode for _, mode in modes):
                self.hf_model.eval()
            try:
                with torch.no_grad():
                    yield self.model()
            finally:
                for module, mode in modes:
                    module.training = mode

    def reduced(self, tokens: torch.Tensor, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """``{layer: in_trace.layer_reduction(...)}`` for each layer's request, from one trace of `tokens`."""
        layers = sorted(requests)
        nnsight = nnsight_module()
        envoys = [self._envoy(layer) for layer in layers]
        asked = [requests[layer] for layer in layers]
        ids = tokens.cpu()
        with self._running() as model:
            ship(nnsight)
            tick = None if self.remote else progress.current()  # (a remote trace sends its code, not this process's)
            with model.trace(ids, remote=self.remote, **self.trace_options) as tracer:
                results = nnsight.save(in_trace.reduce_layers(envoys, asked, ids, tick))
                tracer.stop()
        self.bytes_received += saved_bytes(results)
        self.traces += 1
        return {layer: checked_reduction(layer, result, self.facts.dtype) for layer, result in zip(layers, results, strict=True)}

    def patterns(self, tokens: torch.Tensor, layers: list[int]) -> torch.Tensor:
        """Exact float32 patterns ``[batch, len(layers), n_heads, query, key]`` (downloads them whole)."""
        n = tokens.shape[1]
        results = self.reduced(tokens, {layer: {"block": (None, 0, n, 0, n, 1)} for layer in layers})
        return torch.stack([results[layer]["block"] for layer in layers], dim=1).float()

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        with self._running() as model, model.trace(tokens.cpu(), remote=self.remote, **self.trace_options):
            logits = model.output.logits.save()
        return logits.float()


BACKEND = HuggingFaceBackend
