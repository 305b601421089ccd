"""`HFView`: the second model backend, for nnsight models (local or run by NDIF) and plain Hugging Face models.

The widgets ask a backend the same questions whatever runs the model: tokens and their strings,
and per layer the heads' patterns *reduced to what is drawn*. `HFView` answers them inside one
nnsight trace per request (`circuitwidgets.in_trace`, which imports only torch): the patterns are
rebuilt there from the inputs of the model's own attention call, reduced (uint8 codes of the layer
or its pooled overview, an exact block or row, per-head scores) and only that is saved. With
``remote=True`` the trace runs on NDIF and only the reduced result crosses the network (a 32-head
layer at 4 096 tokens: 8.4 MB of overview codes instead of 2.1 GB of float32 patterns).

Weight-based views (OV and QK circuits, copying, composition) need the weights. Where they are on
this machine, `HFView` builds the same stacked weights as `ModelView`, through TransformerLens 4's
adapter for the architecture (``TransformerBridge.boot_transformers(hf_model=...)``, sharing the
model's parameters: GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Gemma 2, ...), and leaves the model's
attention implementation as it was. A model whose weights are not here (an nnsight model built for
NDIF holds only their shapes) has none, and those views say so. What the trace does not collect
(every head's output, for logit attribution; the value vectors of the direct-copying score) comes,
where the weights are here, from a run of that bridge.

Example:
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.hf_view import HFView, tiny_hf_model
    >>> model, tokenizer = tiny_hf_model("llama")
    >>> view = HFView(model, tokenizer=tokenizer)
    >>> view.patterns(view.to_tokens("abcabc"), layers=[1]).shape   # [batch, layers, heads, query, key]
    torch.Size([1, 1, 4, 7, 7])
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import math
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from . import in_trace
from .model import ModelView, _describe, _model_lock, hook_state_of

#: What a weight-based view says on a model whose weights are not on this machine.
NO_WEIGHTS = (
    "this model's weights are not on this machine (an nnsight model for remote execution holds only their "
    "shapes): {what} needs them. The attention views (AttentionPattern, pattern-based HeadScores) work remotely; "
    "for weight-based views load the model locally (e.g. nnsight's TransformersModel(repo_id, task='text-generation', "
    "dispatch=True), or a TransformerLens model)"
)
_WEIGHT_NAMES = frozenset(
    ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_U", "b_U", "W_pos", "ln_final_w", "ln_final_b")
)
_SOURCE_CALLS: dict[type, bool] = {}
_WRAPPER = "_circuitwidgets_nnsight"  # where a plain Hugging Face model keeps its nnsight wrapper


def is_hf_backend_model(model: Any) -> bool:
    """True for an nnsight model wrapper or a plain Hugging Face ``PreTrainedModel`` (what `HFView` takes)."""
    if type(model).__module__.startswith("nnsight."):
        return True
    return type(model).__module__.startswith("transformers.") and hasattr(model, "config")


def has_local_weights(model: Any) -> bool:
    """False for a model (or view) whose weights are not on this machine (an nnsight model for NDIF: on meta).

    Example:
        >>> import circuitwidgets as cw
        >>> has_local_weights(cw.demo_model())
        True
    """
    if isinstance(model, HFView):
        return model.weights_local
    if isinstance(model, ModelView) or not is_hf_backend_model(model):
        return True
    module = model._module if type(model).__module__.startswith("nnsight.") else model
    return not any(p.is_meta for p in module.parameters())


def _calls_attention_interface(module: torch.nn.Module) -> bool:
    kind = type(module)
    if kind not in _SOURCE_CALLS:
        try:
            _SOURCE_CALLS[kind] = "attention_interface(" in inspect.getsource(kind.forward)
        except (OSError, TypeError):
            _SOURCE_CALLS[kind] = False
    return _SOURCE_CALLS[kind]


def _nnsight() -> Any:
    try:
        import nnsight
    except ImportError:
        raise ImportError(
            "circuitwidgets runs Hugging Face and nnsight models through nnsight: "
            "pip install nnsight (or circuitwidgets[nnsight])"
        ) from None
    return nnsight


def _wrap(model: Any, tokenizer: Any) -> Any:
    """The nnsight wrapper of `model` (itself if it is one), with `tokenizer` for a plain Hugging Face model."""
    if type(model).__module__.startswith("nnsight."):
        return model
    nnsight = _nnsight()
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise TypeError("a plain Hugging Face model needs its tokenizer: HFView(model, tokenizer=tokenizer)")
    wrapper = model.__dict__.get(_WRAPPER)
    if wrapper is None or wrapper.tokenizer is not tokenizer:
        wrapper = (getattr(nnsight, "TransformersModel", None) or nnsight.LanguageModel)(model, tokenizer=tokenizer)
        model.__dict__[_WRAPPER] = wrapper  # the model keeps its wrapper (not as a submodule): views hold both weakly
    return wrapper


class HFView(ModelView):
    """A `ModelView` whose patterns come from nnsight traces, reduced where the model runs.

    Args:
        model: an nnsight ``LanguageModel`` / ``TransformersModel``, or a Hugging Face causal LM
            (then pass `tokenizer`; it is wrapped in nnsight, locally).
        remote: passed to every ``model.trace(...)`` unchanged (True: NDIF; "local": nnsight's
            serialising dry run of the remote path, here).
        tokenizer: the tokenizer of a plain Hugging Face model.
        **trace_options: further keyword arguments of ``model.trace`` (e.g. ``backend=``, ``blocking=``), unchanged.

    Layers are the indices of the model's attention modules in order (every decoder layer of
    the architectures above). The answers that run the model (`patterns`, `reduced`,
    `pattern_scores`) each make one trace; `bytes_received` counts the bytes of the tensors they
    saved (what a remote request downloads).
    """

    def __init__(self, model: Any, *, remote: Any = False, tokenizer: Any = None, weak: bool = False, **trace_options: Any):
        if isinstance(model, ModelView):
            raise TypeError("model is already a ModelView")
        if not is_hf_backend_model(model):
            raise TypeError(f"HFView takes an nnsight model or a Hugging Face model; got {_describe(model)}")
        wrapper = _wrap(model, tokenizer)
        self._user_ref = weakref.ref(model) if weak else (lambda: model)
        self._wrapper_ref = weakref.ref(wrapper) if weak else (lambda: wrapper)
        self.remote = remote
        self.trace_options = dict(trace_options)
        self.bytes_received = 0
        self._bridge_runs = False  # True inside `_on_bridge`: runs go through the TransformerLens bridge
        hf = wrapper._module
        self._attention_paths = [name for name, module in hf.named_modules() if _calls_attention_interface(module)]
        if not self._attention_paths:
            raise ValueError(
                f"found no attention module calling transformers' attention interface in {_describe(hf)}: "
                "its patterns cannot be rebuilt inside a trace"
            )
        self.weights_local = not any(p.is_meta for p in hf.parameters())
        self._hf_parameters = list(hf.parameters())
        if self.weights_local:
            self._bridge = _bridge_of(hf, wrapper.tokenizer)
            ModelView.__init__(self, self._bridge)
        else:
            self._bridge = None
            self._model_ref = self._wrapper_ref
            self._config_facts(hf)
        self.lock: threading.RLock = _model_lock(hf)
        self.n_layers = len(self._attention_paths)
        self.attn_layers = list(range(self.n_layers))
        self.attn_scale = 1.0 / float(getattr(self._attention_module(0), "scaling", 1.0 / math.sqrt(self.d_head)))

    def _config_facts(self, hf: Any) -> None:
        """Sizes from the Hugging Face config, for a model whose weights are not here."""
        cfg = hf.config.get_text_config() if hasattr(hf.config, "get_text_config") else hf.config
        self.n_heads = int(cfg.num_attention_heads)
        self.d_model = int(cfg.hidden_size)
        self.d_head = int(getattr(cfg, "head_dim", None) or self.d_model // self.n_heads)
        self.d_vocab = int(cfg.vocab_size)
        self.n_ctx = int(getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 2048)
        self.normalization_type = "RMS" if "rms" in str(getattr(cfg, "model_type", "")).lower() else None
        self.attn_only = False
        rotary = getattr(cfg, "rope_theta", None) or hasattr(cfg, "rope_scaling")
        self.positional_embedding_type = "rotary" if rotary else "unknown"
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.norm_note = ""
        self.W_pos = None
        self._unembed_embed_unit = self._unembed_embed = self._module_refs = None

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes never set: the weights of a model whose weights are elsewhere
        if name in _WEIGHT_NAMES:
            raise ValueError(NO_WEIGHTS.format(what=f"the weight {name}"))
        raise AttributeError(name)

    # ----- the model ---------------------------------------------------------------------------
    @property
    def nnsight_model(self) -> Any:
        """The nnsight wrapper this view traces (ReferenceError once a weakly held model is gone).

        (`model` is what the weights are read from: the TransformerLens bridge over the same modules
        where the weights are here, else this wrapper.)
        """
        wrapper = self._wrapper_ref()
        if wrapper is None or self._user_ref() is None:
            raise ReferenceError("the model of this HFView was deleted; make a view of a live model")
        return wrapper

    @property
    def hf_model(self) -> Any:
        return self.nnsight_model._module

    def _attention_module(self, index: int) -> torch.nn.Module:
        return self.hf_model.get_submodule(self._attention_paths[index])

    def _envoy(self, index: int) -> Any:
        envoy = self.nnsight_model
        for part in self._attention_paths[index].split("."):
            envoy = envoy[int(part)] if part.isdigit() else getattr(envoy, part)
        return envoy

    def require_weights(self, what: str) -> None:
        """Raise the `NO_WEIGHTS` message for `what` when the weights are not on this machine."""
        if not self.weights_local:
            raise ValueError(NO_WEIGHTS.format(what=what))

    def is_stale(self) -> bool:
        """`ModelView.is_stale` of the shared parameters, and whether the model now holds other parameter
        tensors (a module or parameter replaced in it: the bridge's twin tree would not see it)."""
        if not self.weights_local:
            return False
        current = list(self.hf_model.parameters())
        if len(current) != len(self._hf_parameters) or any(a is not b for a, b in zip(current, self._hf_parameters, strict=True)):
            return True
        return ModelView.is_stale(self)

    def hook_state(self) -> tuple:
        """`ModelView.hook_state` of the model's own modules (a trace's hooks come and go with it)."""
        if not self.weights_local:
            return ()
        hf = self.hf_model
        return hook_state_of(list(hf.modules()), hf.named_modules)

    # ----- tokens ------------------------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        return getattr(self.nnsight_model, "tokenizer", None)

    def _encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def to_tokens(self, prompt: str, *, prepend_bos: bool = True, truncate: bool = False) -> torch.Tensor:
        """Tokenise `prompt` to ``[1, seq]``, BOS first (where the tokenizer has one) as TransformerLens does."""
        self._check_prompt(prompt, "type some text to see its attention patterns", "token ids (tokens=...)")
        ids = self._encode(prompt)
        bos = self.bos_token_id
        if prepend_bos and bos is not None and (not ids or ids[0] != bos):
            ids = [int(bos), *ids]
        return self.check_tokens(torch.tensor([ids]), truncate=truncate)

    # ----- runs --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _on_bridge(self, what: str) -> Iterator[None]:
        """Runs inside this block go through the TransformerLens bridge (same parameters), whose hooks
        give what the trace does not collect: every head's output, the values, the residual stream."""
        self.require_weights(what)
        with self.lock:
            self._bridge_runs = True
            try:
                yield
            finally:
                self._bridge_runs = False

    @contextlib.contextmanager
    def _running(self) -> Iterator[Any]:
        """One run at a time, a local model in eval mode (every module's mode restored after)."""
        if self._bridge_runs:
            with ModelView._running(self) as bridge:
                yield bridge
            return
        with self.lock:
            hf = self.hf_model
            modes = [(m, m.training) for m in hf.modules()] if self.weights_local else []
            if modes:
                hf.eval()
            try:
                yield self.nnsight_model
            finally:
                for module, mode in modes:
                    module.training = mode

    def reduced(self, tokens: Any, requests: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """``{layer: in_trace.layer_reduction(...)}`` for each layer's request, from one trace of `tokens`.

        The trace stops after the last requested layer; only the reduced results are saved.
        """
        tokens = self.check_tokens(tokens)
        layers = sorted(self.check_layers(list(requests)))
        nnsight = _nnsight()
        nnsight.register(in_trace)  # shipped by value: the server has no circuitwidgets
        envoys = [self._envoy(layer) for layer in layers]
        asked = [requests[layer] for layer in layers]
        ids = tokens.cpu()
        with self._running() as model, model.trace(ids, remote=self.remote, **self.trace_options) as tracer:
            results = nnsight.save(in_trace.reduce_layers(envoys, asked, ids))
            tracer.stop()
        self.bytes_received += _saved_bytes(results)
        for layer, result in zip(layers, results, strict=True):
            error, tolerance = result.pop("mismatch")
            if not float(error) <= tolerance:
                raise ValueError(
                    f"the attention weights rebuilt for layer {layer} do not reproduce the model's own attention output "
                    f"(relative difference {float(error):.2g}, tolerance {tolerance:g}): this attention has a term the "
                    "rebuild does not know (e.g. attention sinks or ALiBi), so its patterns cannot be shown"
                )
            for value in _tensors(result):
                if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                    raise self._non_finite_error(f"attention patterns of layer {layer} contain NaN/Inf values")
        return {layer: result for layer, result in zip(layers, results, strict=True)}

    def patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> torch.Tensor:
        """Exact float32 patterns ``[batch, len(layers), n_heads, query, key]`` (downloads them whole)."""
        tokens = self.check_tokens(tokens)
        chosen = self.check_layers(layers)
        n = tokens.shape[1]
        results = self.reduced(tokens, {layer: {"block": (None, 0, n, 0, n, 1)} for layer in chosen})
        return torch.stack([results[layer]["block"] for layer in chosen], dim=1).float()

    def pattern_scores(self, tokens: torch.Tensor, kind: str) -> torch.Tensor:
        """``[n_layers, n_heads]`` attention mass on `kind`'s targets (`analysis.head_scores`), reduced in the trace."""
        tokens = self.check_tokens(tokens)
        results = self.reduced(tokens, {layer: {"kinds": [kind]} for layer in self.attn_layers})
        scores = []
        for layer in self.attn_layers:
            per_seq, used = results[layer]["mass"][kind]
            if not bool(used.any()):
                raise ValueError("no query in tokens has a target for this kind (e.g. no repeated token); use other tokens")
            scores.append(per_seq[used].mean(0))
        return torch.stack(scores).float().cpu()

    def attention_parts(self, tokens: Any, layer: int, on_pattern: Any) -> Any:
        raise ValueError("HFView draws long prompts from reduced traces (AttentionPattern does), not from q, k and lse")

    def _run(self, tokens: Any, layers: Sequence[int] | None, extra: list[str]) -> Any:
        if not extra:
            return self.patterns(tokens, layers), []
        with self._on_bridge(f"reading {', '.join(extra)}"):
            return ModelView._run(self, tokens, layers, extra)

    def logits(self, tokens: Any) -> torch.Tensor:
        tokens = self.check_tokens(tokens)
        with self._running() as model, model.trace(tokens.cpu(), remote=self.remote, **self.trace_options):
            logits = model.output.logits.save()
        return logits.float()

    def residual_terms(self, tokens: Any) -> dict[str, Any]:
        """`ModelView.residual_terms`, from a run of the TransformerLens bridge over the same parameters."""
        with self._on_bridge("logit attribution (every head's output)"):
            return ModelView.residual_terms(self, tokens)


_REMOTE_VIEWS: weakref.WeakKeyDictionary[Any, dict[Any, HFView]] = weakref.WeakKeyDictionary()


def view_for(model: Any, *, remote: Any = False, **trace_options: Any) -> HFView:
    """The `HFView` of `model` with these trace options, shared by every widget that asks for the same (rebuilt
    when its local weights changed); what ``remote=`` and ``trace_options=`` of a widget make.

    Example:
        >>> model, tokenizer = tiny_hf_model("gpt2")
        >>> view_for(model, remote="local", tokenizer=tokenizer) is view_for(model, remote="local", tokenizer=tokenizer)
        True
    """
    if isinstance(model, ModelView) or not is_hf_backend_model(model):
        raise TypeError(
            "remote= and trace_options= take an nnsight or Hugging Face model (an HFView takes them itself: "
            f"HFView(model, remote=...)); got {_describe(model)}"
        )
    key: Any = (remote, tuple(sorted(trace_options.items())))
    try:
        hash(key)
        views = _REMOTE_VIEWS.setdefault(model, {})
    except TypeError:  # an unhashable option, or a model not weakly referenceable: a view of its own
        return HFView(model, remote=remote, **trace_options)
    view = views.get(key)
    if view is None or view.is_stale():
        view = views[key] = HFView(model, remote=remote, weak=True, **trace_options)
    return view


def with_trace_options(model: Any, remote: Any, trace_options: dict[str, Any] | None) -> Any:
    """`model` itself, or with ``remote=`` / ``trace_options=`` (a widget's arguments) its shared `view_for`."""
    if not remote and not trace_options:
        return model
    return view_for(model, remote=remote or False, **dict(trace_options or {}))


def _bridge_of(hf: Any, tokenizer: Any) -> Any:
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
        return TransformerBridge.boot_transformers(name, hf_model=twin, tokenizer=tokenizer)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def _saved_bytes(value: Any) -> int:
    """Bytes of the tensors in `value`: what a remote request's result weighs (less a few hundred bytes of framing)."""
    return sum(t.numel() * t.element_size() for t in _tensors(value))


def tiny_hf_model(
    kind: str = "llama", *, seed: int = 0, layers: int = 2, heads: int = 4, kv_heads: int = 2, d_head: int = 16, n_ctx: int = 256
) -> tuple[Any, Any]:
    """A small random Hugging Face causal LM of architecture `kind` and the demo model's tokenizer (no download).

    `kind`: "gpt2", "neox", "llama" (rotary, grouped-query attention), "qwen2", "gemma2"
    (soft-capping and a sliding window of 8, eager attention). `heads` of `d_head`; Llama, Qwen2 and
    Gemma 2 have `kv_heads` key/value heads; `n_ctx` positions. For examples, tests and benchmarks.

    Example:
        >>> model, tokenizer = tiny_hf_model("gpt2")
        >>> type(model).__name__, model.config.n_layer
        ('GPT2LMHeadModel', 2)
    """
    import transformers

    from .demo import TOKENIZER_DIR

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    vocab, width = len(tokenizer), d_head * heads
    common = {"vocab_size": vocab, "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    configs = {
        "gpt2": lambda: transformers.GPT2Config(n_embd=width, n_layer=layers, n_head=heads, n_positions=n_ctx, **common),
        "neox": lambda: transformers.GPTNeoXConfig(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            max_position_embeddings=n_ctx, **common,
        ),
        "llama": lambda: transformers.LlamaConfig(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=kv_heads, max_position_embeddings=n_ctx, **common,
        ),
        "qwen2": lambda: transformers.Qwen2Config(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=kv_heads, max_position_embeddings=n_ctx, **common,
        ),
        "gemma2": lambda: transformers.Gemma2Config(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=kv_heads, head_dim=d_head, max_position_embeddings=n_ctx, sliding_window=8,
            attn_logit_softcapping=5.0, query_pre_attn_scalar=d_head, **common,
        ),
    }
    if kind not in configs:
        raise ValueError(f"kind must be one of {sorted(configs)}; got {kind!r}")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(configs[kind]())
    return model.eval(), tokenizer
