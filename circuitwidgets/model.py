"""One uniform view of a TransformerLens model: weights, tokenisation, attention patterns.

`ModelView` resolves everything model-specific once, so the analysis layer never has to ask
which TransformerLens version or architecture it is looking at. It accepts a TransformerLens 4
`TransformerBridge` or a TransformerLens 2.x `HookedTransformer` by what they offer (duck typing).
Outside the demo model's own code, only this module reads ``model.cfg``, names hook points or runs
the model: analysis and widgets ask a `ModelView`.

What is picked up when
----------------------
Every analysis function and every widget event starts with `as_view(model)`, which checks the
model against its cached view (`ModelView.is_stale`) and builds a new view when the weights changed.
So these changes show at the next call, with no refresh needed:

- **Weights edited in place, by any route**: optimiser steps, ``with torch.no_grad(): p.mul_(0)``,
  ``p.data.mul_(0)`` and ``p.detach().numpy()[:] = ...`` (neither bumps the tensor's version
  counter), ``load_state_dict`` (copying, or ``assign=True``), ``p.data = t``. The check compares,
  per parameter, its storage address, version counter, dtype, device and a *content
  fingerprint*: the parameter's entries summed with fixed pseudo-random weights in [1, 2), in
  float32 within rows of 4 096 entries and in float64 across rows. Any edit that goes through the
  version counter is seen whatever its size. An edit behind its back (``.data``, numpy) is seen
  unless it leaves that weighted sum unchanged: a change lost in the float32 rounding of its
  row's sum, or an exact cancellation between changed entries, which real edits (ablations,
  scaling, noise, copied weights, NaN) do not produce. Measured on GPT-2-sized random weights, one
  entry changed by 1e-4 of a typical entry's size was always seen, by 1e-5 in about 90 % of
  trials, by 1e-6 in about 20 %. A false alarm (e.g. after ``torch.set_num_threads`` changes the
  summation order) only costs a rebuild.
- **Parameters or modules replaced** (``block.attn.v = new``, ``linear.weight = Parameter(...)``,
  ``load_state_dict(assign=True)``): seen through this module's registration counter (below).
- **dtype and device moves** (``model.half()``, ``model.to("cuda")``): new storage, dtype, device.
- **NaN or Inf in any parameter** (embeddings, attention, LayerNorm, MLP), written before or after
  the first call, through ``.data`` too: a ValueError naming the parameter at the next call
  (its state-dict name: ``blocks.0.ln1.weight`` on a TransformerBridge, ``blocks.0.ln1.w`` on a
  HookedTransformer). NaN/Inf *activations* (float16 overflow; a hook writing NaN) make each run
  raise a ValueError naming the layer instead of returning NaN patterns.
- **Hooks** change forward passes, not weights: every run (patterns, detector scores, path
  expansion) runs the model as it is at that moment, hooks included. `ModelView.hook_state` tells,
  in about 0.1 ms on GPT-2 small, which hooks are present (``()`` when none), so that caches of
  run results can be keyed on it; weight-only results (circuits, composition, copying) ignore hooks.
- **Training mode**: each run happens in eval mode (no dropout), every module's own mode restored.
- **Threads**: runs of one model are serialised (`ModelView.lock`, one per model): the caching
  hooks of one run never record another's activations. Views are built under the same lock.

Not seen: edits to buffers (no weight the analysis reads lives there) and changes to
``model.cfg`` after a view was built; build a new `ModelView` after those.

Cost per `as_view` call (the check runs once per user action): the fingerprint reads every weight
once. Measured on a GPT-2-small-shaped model (163 M parameters, CPU, 2 threads): about 26 ms for an
unchanged model, next to 85 ms for a 50-token forward pass (11 ms when it stops after layer 1); a
rebuild after an edit about half a second. ``as_view(view)`` costs nothing: code that makes several
analysis calls for one user action can check once and pass the view. ``make bench`` re-measures
it (benchmarks/bench_staleness.py, benchmarks/results/staleness.json).

The views `as_view` caches hold their models by weak reference: deleting the last reference to a
model frees it (and its cached view); such a view's `ModelView.model` then raises ReferenceError.

Importing this module installs two process-wide torch hooks,
``torch.nn.modules.module.register_module_parameter_registration_hook`` and
``register_module_module_registration_hook``. They run whenever any module in the process
registers a parameter or a submodule (building a model, ``load_state_dict(assign=True)``,
``block.attn = new_attn``) and do nothing but add one to a counter. While the counter stands
still, `ModelView.is_stale` knows that no parameter was replaced and skips walking the model's
modules. Cost: one Python call per registration (778 registrations, under 0.1 ms, to build GPT-2
small), nothing during forward or backward passes. They stay installed for the life of the process.

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
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.nn.modules import module as _torch_module

from .token_text import token_label

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


# ----- exact power-of-two scaling (scale-invariant scores with tiny or huge weights) --------------
def times_pow2(tensor: torch.Tensor, exponent: Any) -> torch.Tensor:
    """``tensor * 2**exponent``, exactly (`exponent`: ints broadcastable to `tensor`).

    Multiplying by a power of two only moves the binary exponent, so nothing is rounded unless
    the result under- or overflows; exponents beyond the dtype's range of powers of two (e.g.
    ``2**-200`` in float32) are applied in two steps.

    Example:
        >>> times_pow2(torch.tensor([3.0, 1.5]), torch.tensor([-200, 1])).tolist()
        [0.0, 3.0]
        >>> times_pow2(torch.tensor([3e-30], dtype=torch.float64), 100).item() == 3e-30 * 2**100
        True
    """
    exponent = torch.as_tensor(exponent).cpu()
    reach = 1000 if tensor.dtype in (torch.float64, torch.complex128) else 120  # 2**k is a normal number
    half = torch.div(exponent, 2, rounding_mode="floor")
    parts = [exponent] if bool((exponent.abs() <= reach).all()) else [half, exponent - half]
    out = tensor
    for part in parts:
        factors = [math.ldexp(1.0, int(k)) for k in part.flatten().tolist()]
        out = out * torch.tensor(factors, dtype=torch.float64).reshape(part.shape).to(tensor.device, tensor.dtype)
    return out


def unit_scaled(
    tensor: torch.Tensor, dim: int | tuple[int, ...] | None = None, *, slack: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """`tensor` divided by a power of two that brings its largest magnitude into [0.5, 1), and that power.

    Returns ``(scaled, exponent)`` with ``tensor == times_pow2(scaled, exponent)`` exactly; the
    largest magnitude is taken over `dim` (kept as size-1 dimensions of `exponent`), or over the
    whole tensor for None. All-zero slices keep exponent 0, as do slices whose exponent is within
    ``+-slack`` (then, when every slice is, `tensor` itself comes back, not copied). Scale-invariant
    scores (composition, copying, top-k) scale their factors this way before any product, so that
    weights of 1e-30 or 1e30 neither underflow nor overflow.

    Example:
        >>> scaled, exponent = unit_scaled(torch.tensor([[3 * 2.0**-100, -(2.0**-100)], [0.0, 0.0]]), dim=1)
        >>> scaled.tolist(), exponent.flatten().tolist()
        ([[0.75, -0.25], [0.0, 0.0]], [-98, 0])
    """
    if dim is None:  # one pass, no copy: a vocabulary-sized tensor is 154 MB on GPT-2 small
        values = tensor.detach()
        if not values.is_contiguous() and values.ndim >= 2 and values.mT.is_contiguous():
            values = values.mT  # e.g. W_U, a transposed weight: the same entries, read in memory order
        low, high = torch.aminmax(values)
        largest = torch.maximum(-low, high)
    else:  # no |tensor| copy either
        values = tensor.detach()
        largest = torch.maximum(-values.amin(dim=dim, keepdim=True), values.amax(dim=dim, keepdim=True))
    exponent = torch.frexp(largest.float() if largest.dtype in _LOW_PRECISION else largest).exponent.long()
    if slack:
        exponent = exponent.masked_fill(exponent.abs() <= slack, 0)
    if not bool(exponent.any()):
        return tensor, exponent.cpu()
    return times_pow2(tensor, -exponent), exponent.cpu()


# ----- content fingerprints of parameters -------------------------------------------------------
_FINGERPRINT_ROW = 4096  # entries summed in float32 before float64 takes over
_ENTRY_WEIGHTS: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}
_ROW_WEIGHTS: list[torch.Tensor] = []


def _entry_weights(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Fixed weights in [1, 2) for the entries of one row, on `device` in `dtype`."""
    weights = _ENTRY_WEIGHTS.get((device, dtype))
    if weights is None:
        base = torch.rand(_FINGERPRINT_ROW, generator=torch.Generator().manual_seed(12), dtype=torch.float64) + 1
        weights = _ENTRY_WEIGHTS[(device, dtype)] = base.to(device, dtype)
    return weights


def _row_weights(rows: int) -> torch.Tensor:
    """Weights in [1, 2) for `rows` row sums (float64, CPU): ``1 + frac(i * golden ratio)``, the same prefix for any length."""
    if not _ROW_WEIGHTS or _ROW_WEIGHTS[0].numel() < rows:
        n = max(rows, 1 << 14)
        _ROW_WEIGHTS[:] = [(torch.arange(n, dtype=torch.float64) * 0.6180339887498949).frac() + 1]
    return _ROW_WEIGHTS[0][:rows]


def _row_sums(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Weighted sums of each row of `_FINGERPRINT_ROW` entries of `tensor`, flattened, on its device."""
    flat = tensor.detach().reshape(-1)
    if flat.dtype.is_complex:
        flat = torch.view_as_real(flat).reshape(-1)
    if dtype is None:
        dtype = flat.dtype if flat.dtype in (torch.float32, torch.float64) else torch.float32
    flat = flat.to(dtype)
    n = flat.numel()
    full = n - n % _FINGERPRINT_ROW
    weights = _entry_weights(flat.device, dtype)
    parts = []
    if full:
        parts.append(flat[:full].view(-1, _FINGERPRINT_ROW) @ weights)
    if n > full:
        parts.append((flat[full:] @ weights[: n - full]).reshape(1))
    return torch.cat(parts) if parts else flat.new_zeros(0)


def _fingerprints(parameters: Sequence[torch.Tensor]) -> list[float]:
    """One float per parameter: its entries weighted by fixed pseudo-random weights and summed.

    Rows of `_FINGERPRINT_ROW` entries are summed in float32 (float64 for float64 parameters) on
    the parameter's device, by one matrix-vector product per parameter; the row sums then cross to
    the CPU in one transfer per device and are summed there in float64 with row weights. NaN or
    Inf entries make the value NaN or Inf (and so may overflow of a float32 row sum).
    """
    rows = [_row_sums(p) for p in parameters]
    on_cpu: list[torch.Tensor] = [torch.empty(0)] * len(rows)
    by_device: dict[torch.device, list[int]] = {}
    for i, r in enumerate(rows):
        by_device.setdefault(r.device, []).append(i)
    for indices in by_device.values():
        joined = torch.cat([rows[i].to(torch.float64 if rows[i].device.type != "mps" else torch.float32) for i in indices])
        pieces = joined.cpu().double().split([rows[i].numel() for i in indices])
        for i, piece in zip(indices, pieces, strict=True):
            on_cpu[i] = piece
    return [float(r @ _row_weights(r.numel())) for r in on_cpu]


# ----- one lock per model -------------------------------------------------------------------------
_GUARD = threading.Lock()
_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.RLock()  # for objects that cannot be weakly referenced


def _model_lock(model: Any) -> threading.RLock:
    """The re-entrant lock that serialises runs (and view building) of `model`."""
    with _GUARD:
        try:
            lock = _LOCKS.get(model)
            if lock is None:
                lock = _LOCKS[model] = threading.RLock()
        except TypeError:
            return _SHARED_LOCK
    return lock


def _weak(model: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(model)
    except TypeError:  # not weakly referenceable: held strongly
        return lambda: model


class _Enough(Exception):
    """Raised by `ModelView._run_until`'s last hook: the run has computed all it needs."""


def _is_bridge_wiring(hook: Any) -> bool:
    """TransformerBridge wires its own forward hooks (capture of residuals) on its first run."""
    return str(getattr(hook, "__module__", "") or "").startswith("transformer_lens.model_bridge")


def _norm_weights(norm: Any) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """A norm module's weight and bias (TransformerLens ``w``/``b`` or torch ``weight``/``bias``), None where absent."""
    found: list[torch.Tensor | None] = []
    for names in (("weight", "w"), ("bias", "b")):
        tensor = None
        for name in names:
            try:
                value = getattr(norm, name, None)
            except (AttributeError, NotImplementedError, RuntimeError):
                value = None
            if isinstance(value, torch.Tensor):
                tensor = value.detach()
                break
        found.append(tensor)
    return found[0], found[1]


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} holds a lone surrogate {text[exc.start]!r} at index {exc.start}, which is not valid Unicode "
            "text (it often comes from decoding bytes with errors='surrogateescape'); remove or replace it"
        ) from None


def _first_huge_int(value: Any) -> int | None:
    """The first int outside int64 in a nested list, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if not -(2**63) <= value < 2**63 else None
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_huge_int(item)
            if found is not None:
                return found
    return None


def hook_state_of(modules: Sequence[torch.nn.Module], named_modules: Callable[[], Iterator[tuple[str, Any]]]) -> tuple:
    """`ModelView.hook_state` of `modules` (and the process-wide hooks): ``(module name, kind, hook ids)``
    tuples, the names from ``named_modules()``, which is only walked when some hook is found."""
    found: list[tuple[Any, str, tuple[int, ...]]] = []
    for module in modules:
        for kind, hooks in (("forward_pre", module._forward_pre_hooks), ("forward", module._forward_hooks)):
            if hooks:
                ids = tuple(key for key, hook in list(hooks.items()) if not _is_bridge_wiring(hook))
                if ids:
                    found.append((module, kind, ids))
    for kind, hooks in (
        ("forward_pre", _torch_module._global_forward_pre_hooks),
        ("forward", _torch_module._global_forward_hooks),
    ):
        if hooks:
            found.append(("*", kind, tuple(hooks)))
    if not found:
        return ()
    names = {id(m): name.replace("._original_component", "") for name, m in named_modules()}
    return tuple(
        (where if isinstance(where, str) else names.get(id(where), type(where).__name__), kind, ids)
        for where, kind, ids in found
    )


class ModelView:
    """Model-specific facts resolved once: stacked weights, layers, tokenisation, patterns.

    Attributes (all detached, on the model's device and dtype):
        W_Q, W_K, W_V: ``[n_attn_layers, n_heads, d_model, d_head]`` (grouped K/V heads expanded)
        W_O: ``[n_attn_layers, n_heads, d_head, d_model]``
        b_Q, b_K, b_V: ``[n_attn_layers, n_heads, d_head]``; b_O: ``[n_attn_layers, d_model]``
        W_E: ``[d_vocab, d_model]``; W_U: ``[d_model, d_vocab]``; b_U: ``[d_vocab]``
        W_pos: ``[n_ctx, d_model]``, or ``None`` for models without learned positions (rotary)
        ln_final_w, ln_final_b: the final norm's weight and bias ``[d_model]``, each ``None`` where absent
        attn_layers: original block index of each attention layer (hybrid models skip some)
        attn_scale: what attention scores are divided by (``cfg.attn_scale``, else ``sqrt(d_head)``)
        positional_embedding_type: ``cfg.positional_embedding_type`` ("standard", "rotary", ...;
            "unknown" when the config does not say)

    Layer arguments everywhere in circuitwidgets are original block indices; results are
    stacked over ``attn_layers`` in that order (for ordinary models, simply every layer).

    A view built here holds its model; ``weak=True`` (how `as_view` builds the views it caches)
    holds it by weak reference instead, so that a cache of views never keeps a model alive:
    `model` then raises ReferenceError once the model is gone. Every view of a model shares one
    re-entrant `lock`: each run of the model holds it. Building a view refuses a model with NaN
    or Inf in any parameter (ValueError naming the parameter). See the module docstring for what
    `is_stale` notices, and at what cost.

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

    def __init__(self, model: Any, *, weak: bool = False):
        if isinstance(model, ModelView):
            raise TypeError("model is already a ModelView; use circuitwidgets.model.as_view(model)")
        missing = [name for name in _REQUIRED if not hasattr(model, name)]
        if missing:
            raise TypeError(
                f"model must be a TransformerLens TransformerBridge or HookedTransformer; got "
                f"{_describe(model)}, which lacks {', '.join(missing)}"
            )
        self._model_ref = _weak(model) if weak else (lambda: model)
        #: Serialises runs of this model (shared by every view of it; re-entrant).
        self.lock: threading.RLock = _model_lock(model)
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
        self._registrations = _registrations
        self._parameters = list(model.parameters())
        self._fingerprint = self._parameter_state()  # before reading the weights: an edit in between is seen next time
        self._load_weights()
        self._unembed_embed_unit: tuple[torch.Tensor, int] | None = None
        self._module_refs: tuple[int, list[weakref.ref[torch.nn.Module]]] | None = None
        self._unembed_embed: torch.Tensor | None = None

    @property
    def model(self) -> Any:
        """The model this view reads (ReferenceError when the view holds it weakly and it was deleted)."""
        model = self._model_ref()
        if model is None:
            raise ReferenceError(
                "the model of this ModelView was deleted (a view holds its model weakly); make a view of a live model"
            )
        return model

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
            self.ln_final_w, self.ln_final_b = self._final_norm_weights()
            self.norm_note = self._fold_norms()
        self.device = self.W_E.device
        self.dtype = self.W_E.dtype
        for name in (*_HEAD_WEIGHTS, "b_O", "W_E", "W_U", "b_U", "W_pos"):
            tensor = getattr(self, name)
            # a sum holding NaN or Inf is not finite: one cheap pass (10x faster than isfinite), exact check after
            if tensor is not None and not torch.isfinite(tensor.sum()) and not torch.isfinite(tensor).all():
                bad = int((~torch.isfinite(tensor)).sum())
                raise ValueError(f"model weight {name} contains {bad} NaN/Inf values; scores would be meaningless")

    def _final_norm_weights(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The final norm's weight and bias (``ln_final``), each None where it has none (folded or no norm)."""
        return _norm_weights(getattr(self.model, "ln_final", None))

    def _fold_norms(self) -> str:
        """Fold the norms into the weights the circuits read, as TransformerLens' ``fold_ln`` does; say what was done.

        A head reads ``LN(x) W = ((x - mean) / scale) * w + b`` through ``W``: its weight goes into
        the rows of ``W_Q``, ``W_K``, ``W_V`` (``diag(w) W``) and its bias into ``b_Q``, ``b_K``,
        ``b_V`` (``b W``); the final norm's into ``W_U`` and ``b_U`` (then ``ln_final_w`` and
        ``ln_final_b`` are None: nothing is left to apply). With LayerNorm every reader of the
        residual stream removes its mean, so the writers (``W_E``, ``W_pos``, ``W_O``, ``b_O``:
        ``center_writing_weights``) and the readers (``W_Q``, ``W_K``, ``W_V``, ``W_U`` along
        d_model, as ``fold_ln`` does) are centred too: circuits are unchanged, norms (composition
        scores) lose a part that never acts. The per-position scale cannot be folded: circuits
        leave it out. Returns "" for a model without norms.
        """
        kind = (self.normalization_type or "").upper()
        if not kind.startswith(("LN", "RMS")):
            return ""
        folded, copies = [], set()  # ids of the tensors made here (safe to change in place)
        inputs = [_norm_weights(getattr(self.model.blocks[block], "ln1", None)) for block in self.attn_layers]
        if any(w is not None or b is not None for w, b in inputs):
            folded.append("ln1")
            ones, zeros = torch.ones_like(self.b_O[0]), torch.zeros_like(self.b_O[0])
            w = torch.stack([ones if w is None else w.to(ones.dtype) for w, _ in inputs])  # [layers, d_model]
            b = torch.stack([zeros if b is None else b.to(ones.dtype) for _, b in inputs])
            for name in ("Q", "K", "V"):  # new tensors: the stacked weights may share the model's storage
                weight = getattr(self, f"W_{name}")
                setattr(self, f"b_{name}", getattr(self, f"b_{name}") + torch.einsum("lm,lhmd->lhd", b, weight))
                setattr(self, f"W_{name}", weight * w[:, None, :, None])
                copies.add(id(getattr(self, f"W_{name}")))
        if self.ln_final_b is not None:
            self.b_U = self.b_U + self.ln_final_b.to(self.W_U.dtype) @ self.W_U
        if self.ln_final_w is not None:
            self.W_U = self.W_U * self.ln_final_w.to(self.W_U.dtype)[:, None]
            copies.add(id(self.W_U))
        if self.ln_final_w is not None or self.ln_final_b is not None:
            folded.append("ln_final")
        self.ln_final_w = self.ln_final_b = None
        name = "LayerNorm" if kind.startswith("LN") else "RMSNorm"
        done = f"{name} weights folded into W_Q, W_K, W_V and W_U (as fold_ln)" if folded else f"{name} weights already folded"
        if kind.startswith("LN"):  # centred inputs: the part of any weight along (1, ..., 1) does nothing
            writers = (("W_E", -1), ("W_pos", -1), ("W_O", -1), ("b_O", -1))
            readers = (("W_Q", -2), ("W_K", -2), ("W_V", -2), ("W_U", 0))
            for attr, dim in writers + readers:
                tensor = getattr(self, attr)
                if tensor is None:
                    continue
                if id(tensor) in copies:  # a copy this fold made: centre it in place (W_U is vocabulary-sized)
                    tensor.sub_(tensor.mean(dim, keepdim=True))
                else:
                    setattr(self, attr, tensor - tensor.mean(dim, keepdim=True))
            done += ", its centring into every weight that writes or reads the residual stream"
        return f"{done}; its per-position scale is left out."

    def _stack(self, name: str) -> torch.Tensor:
        """Stack a per-layer attention weight over the attention layers only."""
        whole = None
        if len(self.attn_layers) == self.n_layers:
            try:
                whole = getattr(self.model, name)
            except (AttributeError, NotImplementedError, RuntimeError):
                whole = None
        if whole is None:
            whole = torch.stack([self._block_weight(i, name) for i in self.attn_layers])
        return whole.detach()

    def _block_weight(self, block: int, name: str) -> torch.Tensor:
        """One attention layer's weight `name`; a bias the architecture lacks (Llama's) is zeros."""
        attn = self.model.blocks[block].attn
        value = getattr(attn, name)
        if value is None and name.startswith("b_"):
            weight = getattr(attn, "W" + name[1:])  # b_Q: [heads, d_head] from W_Q [heads, d_model, d_head]
            shape = weight.shape[-1:] if name == "b_O" else (weight.shape[0], weight.shape[-1])
            value = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        return value

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
        Formed from `unembed_embed_scaled` (the same pass), scaled back exactly.

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> view.unembed_embed().shape, view.unembed_embed() is view.unembed_embed()
            (torch.Size([64, 64]), True)
        """
        value = self._unembed_embed
        if value is None:
            unit, exponent = self.unembed_embed_scaled()
            value = times_pow2(unit, exponent) if exponent else unit
            # Two threads may both compute it; each stores a whole tensor, so none reads half of one.
            self._unembed_embed = value
        return value

    def unembed_embed_scaled(self) -> tuple[torch.Tensor, int]:
        """``(M, e)`` with ``W_U W_E == M * 2**e`` and ``M`` free of under- and overflow, formed once per view.

        ``W_U`` and ``W_E`` whose largest magnitude lies within ``2**-16 .. 2**16`` are used as
        they are (``e == 0``: no copy); others are first scaled by a power of two (`unit_scaled`),
        so that scale-invariant scores stay defined for weights of 1e-30 or 1e30.

        Example:
            >>> import circuitwidgets as cw
            >>> view = cw.ModelView(cw.demo_model())
            >>> unit, exponent = view.unembed_embed_scaled()
            >>> exponent, unit is view.unembed_embed()
            (0, True)
        """
        value = self._unembed_embed_unit
        if value is None:
            dtype = work_dtype(self.dtype)
            W_U, e_U = unit_scaled(self.W_U.to(dtype), slack=16)
            W_E, e_E = unit_scaled(self.W_E.to(dtype), slack=16)
            value = (W_U @ W_E, int(e_U + e_E))
            self._unembed_embed_unit = value
        return value

    def _parameter_state(self) -> tuple:
        """Per parameter: storage address, version counter, dtype, device and content fingerprint.

        Raises ValueError naming a parameter that holds NaN or Inf.
        """
        parameters = self._parameters
        values = _fingerprints(parameters)
        for i, value in enumerate(values):
            if not math.isfinite(value):
                bad = int((~torch.isfinite(parameters[i].detach())).sum())
                if bad:
                    raise ValueError(
                        f"model parameter {self._parameter_name(parameters[i])} contains {bad} NaN/Inf "
                        f"value{'s' if bad > 1 else ''}; every score would be meaningless: repair or reload the weights"
                    )
                # finite entries whose float32 row sums overflowed (weights near 1e34): sum in float64
                rows = _row_sums(parameters[i], torch.float64).cpu()
                values[i] = float(rows @ _row_weights(rows.numel()))
        return tuple(
            (p.data_ptr(), p._version, p.dtype, p.device, value) for p, value in zip(parameters, values, strict=True)
        )

    def _parameter_name(self, parameter: torch.Tensor) -> str:
        """The state-dict name of `parameter` (e.g. ``blocks.0.ln1.weight``), for messages."""
        model = self.model
        with contextlib.suppress(Exception):
            for name, tensor in model.state_dict(keep_vars=True).items():
                if tensor is parameter:
                    return str(name)
        for name, tensor in model.named_parameters():
            if tensor is parameter:
                return name.replace("._original_component", "")
        return f"of shape {tuple(parameter.shape)}"

    def is_stale(self) -> bool:
        """True when the model's parameters changed since this view read them.

        Sees parameters replaced, moved (dtype, device) or edited in place by any route, ``.data``
        included (see the module docstring for the guarantee and the cost: 26 ms on GPT-2
        small, CPU). Raises ValueError naming a parameter that now holds NaN or Inf.

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
        with self.lock:
            if self._registrations != _registrations:  # some module somewhere gained a parameter
                parameters = list(self.model.parameters())
                if len(parameters) != len(self._parameters):
                    return True
                if any(a is not b for a, b in zip(parameters, self._parameters, strict=True)):
                    return True
                self._registrations = _registrations
            return self._parameter_state() != self._fingerprint

    # ----- hooks and modes -----------------------------------------------------------------
    def _modules(self) -> list[torch.nn.Module]:
        """Every module of the model; a TransformerBridge's wrapped model sits outside its module tree.

        Walking GPT-2 small's 705 modules takes about 1 ms: the list is kept (by weak references,
        so that it never keeps the model alive) until some module registers a submodule.
        """
        kept = self._module_refs
        if kept is not None and kept[0] == _registrations:
            alive = [module for ref in kept[1] if (module := ref()) is not None]
            if len(alive) == len(kept[1]):
                return alive
        model = self.model
        counted = _registrations
        modules = list(model.modules()) if isinstance(model, torch.nn.Module) else []
        original = getattr(model, "original_model", None)
        if isinstance(original, torch.nn.Module):
            seen = {id(m) for m in modules}
            modules += [m for m in original.modules() if id(m) not in seen]
        self._module_refs = (counted, [weakref.ref(m) for m in modules])
        return modules

    def hook_state(self) -> tuple:
        """The hooks that can change a forward pass of the model now: ``()`` when there are none.

        A hashable tuple of ``(module name, "forward" | "forward_pre", hook ids)``: forward and
        forward-pre hooks on any module (TransformerLens hook points, whether added by
        ``add_hook``, ``model.hooks(...)`` or ``run_with_hooks``, and plain torch hooks), then
        process-wide module hooks (module name ``"*"``). Hook ids are never reused, so hooks
        removed and added again give a new state. Left out: the bridge's own wiring hooks and
        the temporary caching hooks of this view's runs (it waits for a run of another thread to
        end). Key caches of model-run results (patterns, detector scores) on it, or skip caching
        when it is not ``()``; weight-only results do not depend on hooks. Looks at every module's
        hook dictionaries: about 0.1 ms on GPT-2 small (1 ms when the module list must be walked
        again, after a module was registered anywhere).

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> view = cw.as_view(model)
            >>> view.hook_state()
            ()
            >>> with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", lambda x, hook: x)]):
            ...     [(name, kind) for name, kind, _ in view.hook_state()]
            [('blocks.0.attn.hook_pattern', 'forward')]
            >>> view.hook_state()
            ()
        """
        with self.lock:
            return hook_state_of(self._modules(), lambda: self.model.named_modules())

    @contextlib.contextmanager
    def _running(self) -> Iterator[Any]:
        """Hold the model's lock, in eval mode and under ``no_grad``, for one run; restore every module's mode after."""
        with self.lock:
            model = self.model
            modules = self._modules()
            modes = [m.training for m in modules]
            training = any(modes)
            if training:
                model.eval()
            try:
                with torch.no_grad():
                    yield model
            finally:
                if training:
                    for module, mode in zip(modules, modes, strict=True):
                        module.training = mode

    @property
    def has_learned_positions(self) -> bool:
        return self.W_pos is not None

    @property
    def has_layernorm(self) -> bool:
        return self.normalization_type is not None

    def _positions_kind(self) -> str:
        kind = self.positional_embedding_type
        return "rotary or no learned" if kind == "unknown" else kind

    @property
    def has_rotary(self) -> bool:
        """Rotary positions (no W_pos): position enters as a rotation of each head's queries and keys."""
        return self.W_pos is None and self.positional_embedding_type == "rotary"

    def no_positions_note(self) -> str:
        """Why there is no positional view, or "" when there is one (learned absolute or rotary positions).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).no_positions_note()
            ''
        """
        if self.has_learned_positions or self.has_rotary:
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
        """A prompt must be a non-empty str of valid Unicode, and the model must have a tokenizer for it."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        if not prompt:
            raise ValueError(f"prompt is empty: {if_empty}")
        _check_text(prompt, "prompt")
        if self.tokenizer is None:
            raise TypeError(f"this model has no tokenizer: pass {instead} instead of a prompt")

    def to_tokens(self, prompt: str, *, prepend_bos: bool = True, truncate: bool = False) -> torch.Tensor:
        """Tokenise `prompt` to ``[1, seq]``; raises on empty or over-long prompts unless `truncate`.

        A prompt longer than ``n_ctx`` tokens raises ValueError; ``truncate=True`` keeps its first
        ``n_ctx`` tokens. (The analysis functions and widgets take no `truncate`: cut a prompt
        here and pass them the token ids.) A prompt holding a lone surrogate (not valid Unicode)
        raises ValueError before reaching the tokenizer.
        """
        self._check_prompt(prompt, "type some text to see its attention patterns", "token ids (tokens=...)")
        tokens = self.model.to_tokens(prompt, prepend_bos=prepend_bos, truncate=False)
        if tokens.shape[-1] > self.n_ctx:
            if not truncate:
                raise ValueError(
                    f"prompt is {tokens.shape[-1]} tokens long, longer than the model's n_ctx={self.n_ctx}: shorten "
                    f"the prompt to at most {self.n_ctx} tokens, or cut it with "
                    "ModelView.to_tokens(prompt, truncate=True) and pass the token ids"
                )
            tokens = tokens[..., : self.n_ctx]
        return tokens.to(self.device)

    def _check_tensor_device(self, tokens: torch.Tensor) -> None:
        if tokens.device.type == "meta":
            raise ValueError(
                f"tokens are on the meta device, which holds no values; pass token ids on the CPU or on the "
                f"model's device (the model is on {self.device})"
            )

    def check_tokens(self, tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        """Validate token ids and return them as a ``[batch, seq]`` long tensor on the model's device.

        `tokens`: a tensor, or a rectangular nested list, of integer ids, ``[seq]`` or ``[batch,
        seq]``. A tensor on another device is copied to the model's; one on the ``meta`` device
        (no values) raises ValueError, as do 0-d tensors, ids outside the vocabulary and more
        than ``n_ctx`` positions (unless `truncate`, which keeps the first ``n_ctx``).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).check_tokens([2, 3]).tolist()
            [[2, 3]]
        """
        if not isinstance(tokens, torch.Tensor):
            try:
                tokens = torch.as_tensor(tokens)
            except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
                huge = _first_huge_int(tokens)
                if huge is not None:
                    raise ValueError(f"tokens contains id {huge}, outside the vocabulary 0..{self.d_vocab - 1}") from None
                raise TypeError(
                    "tokens must be a tensor or a rectangular nested list of integer token ids ([seq] or "
                    f"[batch, seq]); got {type(tokens).__name__} ({exc})"
                ) from None
        self._check_tensor_device(tokens)
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must hold integer ids; got dtype {tokens.dtype}")
        if tokens.ndim == 0:
            raise ValueError(f"tokens is a 0-d tensor (one number); pass [{int(tokens)}] for a one-token sequence")
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [seq] or [batch, seq]; got shape {tuple(tokens.shape)}")
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(f"tokens is empty (shape {tuple(tokens.shape)})")
        if tokens.shape[1] > self.n_ctx:
            if not truncate:
                raise ValueError(
                    f"tokens has {tokens.shape[1]} positions, longer than the model's n_ctx={self.n_ctx}: pass at "
                    f"most {self.n_ctx} (ModelView.check_tokens(tokens, truncate=True) keeps the first {self.n_ctx})"
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

        A byte-level token holding part of a character shows its bytes, ``<F0 9F>``, not "�"
        (`circuitwidgets.token_text.token_label`).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).token_strings([2, 3])
            ['a', 'b']
        """
        if self.tokenizer is None:
            return [str(i) for i in ids]
        return [token_label(self.tokenizer, i) for i in ids]

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
        _check_text(text, "token text")
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
            self._check_tensor_device(tokens)
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
        """One run caching only the chosen layers' patterns and the hook points `extra`, stopped once it has them.

        Returns the patterns ``[batch, len(layers), n_heads, query, key]`` (float32) and the
        activations at `extra`. A full cache of GPT-2-small at 1 024 tokens is 3.3 GB; its
        attention patterns alone 576 MB. The run holds the model's `lock`, in eval mode and
        under ``no_grad`` (see `_running`); NaN/Inf in the results raise ValueError naming the
        layer or activation.
        """
        tokens = self.check_tokens(tokens)
        chosen = self.check_layers(layers)
        names = [f"blocks.{layer}.attn.hook_pattern" for layer in chosen] + extra
        cache = self._run_until(tokens, {name: None for name in names})
        patterns = torch.stack([cache[name] for name in names[: len(chosen)]], dim=1).float()
        finite = torch.isfinite(patterns.sum(-1)).flatten(2).all(-1).all(0).tolist()  # a NaN/Inf row's sum is not finite
        bad = [layer for layer, ok in zip(chosen, finite, strict=True) if not ok]
        if bad:
            more = f" (and so do those of layers {bad[1:]})" if len(bad) > 1 else ""
            raise self._non_finite_error(f"attention patterns of layer {bad[0]} contain NaN/Inf values{more}")
        activations = [cache[name] for name in extra]
        for name, tensor in zip(extra, activations, strict=True):
            if not bool(torch.isfinite(tensor).all()):
                raise self._non_finite_error(f"activation {name} contains NaN/Inf values")
        return patterns, activations

    def _run_until(
        self,
        tokens: torch.Tensor,
        wanted: Mapping[str, Callable[[torch.Tensor], Any] | None],
        optional: Mapping[str, Callable[[torch.Tensor], Any] | None] | None = None,
    ) -> dict[str, Any]:
        """Run the model until every hook point in `wanted` has fired, then stop (only the work needed).

        ``wanted`` maps a hook name to a function of its activation (None: keep the activation
        itself); returns ``{name: result}``, with those of the `optional` hook points that fired
        before the run stopped (some models list hook points that never fire). The run stops by raising inside the last hook, so
        nothing after it is computed: neither later blocks nor the unembedding (``stop_at_layer``
        cannot skip the unembedding after the last block of a TransformerBridge). Holds the
        model's lock, in eval mode and under ``no_grad`` (`_running`).
        """
        results: dict[str, Any] = {}

        every = {**(optional or {}), **wanted}

        def keeper(name: str) -> Callable[..., None]:
            def hook(tensor: torch.Tensor, hook: Any = None) -> None:
                reduce = every[name]
                results[name] = tensor.detach() if reduce is None else reduce(tensor.detach())
                if all(n in results for n in wanted):
                    raise _Enough

            return hook

        with self._running() as model, contextlib.suppress(_Enough):
            model.run_with_hooks(tokens, fwd_hooks=[(name, keeper(name)) for name in every], return_type=None)
        missing = [name for name in wanted if name not in results]
        if missing:
            raise ValueError(f"the model never reached hook point(s) {missing}")
        return results

    def attention_parts(
        self, tokens: Any, layer: int, on_pattern: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any]
    ) -> Any:
        """``on_pattern(pattern, q, k)`` of one attention layer, inside one run that stops there.

        For one sequence: ``pattern`` ``[n_heads, query, key]`` float32 is the layer's pattern,
        handed over inside the run and not kept (at 8 192 tokens one layer of 12 heads is 3.2 GB);
        ``q`` and ``k`` ``[n_heads, seq, d_head]`` float32 are its queries and keys, after position
        rotation for rotary models (from the rotation hook points where they fire, TransformerLens
        2.x; else through the attention module's own ``apply_rope``: a TransformerLens 4.3 native
        bridge lists ``hook_rot_q`` but never fires it), with grouped K/V heads expanded, so that the layer's scores
        are ``q @ k.T / attn_scale`` plus whatever else the model adds. Nothing after the pattern
        is computed. Returns what `on_pattern` returns; ValueError when the pattern holds NaN/Inf.

        Example:
            >>> import circuitwidgets as cw
            >>> shapes = lambda p, q, k: (tuple(p.shape), tuple(q.shape), tuple(k.shape))
            >>> cw.ModelView(cw.demo_model()).attention_parts([[0, 2, 3]], 1, shapes)
            ((4, 3, 3), (4, 3, 16), (4, 3, 16))
        """
        tokens = self.check_tokens(tokens)
        if tokens.shape[0] != 1:
            raise ValueError(f"tokens must be one sequence; got a batch of {tokens.shape[0]}")
        block = self.check_layers([layer])[0]
        attn = f"blocks.{block}.attn"
        rotary = f"{attn}.hook_rot_q" in self.model.hook_dict
        seen: dict[str, torch.Tensor] = {}

        def keep(name: str, expand: bool) -> Callable[[torch.Tensor], None]:
            def store(tensor: torch.Tensor) -> None:
                x = tensor[0].float()  # [seq, heads, d_head]
                seen[name] = (self._expand_kv(x, "keys", dim=1) if expand else x).transpose(0, 1).contiguous()

            return store

        def reduce(pattern: torch.Tensor) -> Any:
            pattern = pattern[0].float()
            if not bool(torch.isfinite(pattern.sum(-1)).all()):  # a sum of NaN or Inf is not finite; 10x faster
                raise self._non_finite_error(f"attention patterns of layer {block} contain NaN/Inf values")
            if "rot_k" in seen:
                q, k = seen["rot_q"], seen["rot_k"]
            else:
                q, k = self._own_rotation(block, seen["q"], seen["k"]) if rotary else (seen["q"], seen["k"])
            return on_pattern(pattern, q, k)

        wanted = {f"{attn}.hook_q": keep("q", False), f"{attn}.hook_k": keep("k", True), f"{attn}.hook_pattern": reduce}
        rotation = {f"{attn}.hook_rot_q": keep("rot_q", False), f"{attn}.hook_rot_k": keep("rot_k", True)} if rotary else {}
        found = self._run_until(tokens, wanted, rotation)
        return found[f"{attn}.hook_pattern"]

    def _own_rotation(self, block: int, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``q``, ``k`` ``[heads, seq, d_head]`` rotated by the attention module's own rotary code, where it has
        an ``apply_rope(q, k)`` (TransformerLens 4's native attention, whose rotation hooks never fire); else unchanged.
        """
        for module in self.model.blocks[block].attn.modules():
            apply = getattr(module, "apply_rope", None)
            if callable(apply):
                rotated_q, rotated_k = apply(q[None], k[None])
                return rotated_q[0], rotated_k[0]
        return q, k

    def _non_finite_error(self, what: str) -> ValueError:
        if self.dtype in _LOW_PRECISION:
            why = (
                f"the model runs in {self.dtype}, whose range its activations overflowed (float16 ends at 65 504): "
                "run it in float32 (model.float()), or look for huge weights or a hook writing NaN/Inf"
            )
        else:
            why = f"the model runs in {self.dtype}; look for a hook writing NaN/Inf or for huge weights or inputs"
        return ValueError(f"{what}: {why}")

    def patterns(self, tokens: Any, layers: Sequence[int] | None = None) -> torch.Tensor:
        """Attention patterns ``[batch, len(layers), n_heads, query, key]`` (float32).

        Runs the model once under ``no_grad``, caching only the requested layers' patterns, and
        stops after the last of them (no later block, no unembedding; `_run_until`).
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
        """Model logits ``[batch, seq, d_vocab]``, from a run in eval mode under ``no_grad`` holding `lock`.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).logits([[0, 2, 3]]).shape
            torch.Size([1, 3, 64])
        """
        tokens = self.check_tokens(tokens)
        with self._running() as model:
            logits = model(tokens)
        if not bool(torch.isfinite(logits).all()):
            raise self._non_finite_error("logits contain NaN/Inf values")
        return logits


    @property
    def final_norm(self) -> str | None:
        """How the residual stream is normalised before the unembedding: "LN" (centred and scaled, folded
        or not), "RMS" (scaled only) or None (no final norm).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.ModelView(cw.demo_model()).final_norm is None
            True
        """
        kind = (self.normalization_type or "").upper()
        if kind.startswith("LN"):
            return "LN"
        if kind.startswith("RMS"):
            return "RMS"
        return None

    def residual_terms(self, tokens: Any) -> dict[str, Any]:
        """The pieces of the residual stream that reaches the final norm, from one run of one sequence (float32).

        Returns a dict:

        - ``embed``: ``[seq, d_model]`` token embedding; ``pos_embed``: the learned positional
          embedding added to the residual stream, or None (rotary, shortformer or no learned positions);
        - ``z``: ``[n_attn_layers, seq, n_heads, d_head]`` each head's mixed values before ``W_O``
          (one per query head, grouped K/V heads included), so head h of layer l writes ``z[l, :, h] @ W_O[l, h]``;
        - ``mlp_out``: ``{block index: [seq, d_model]}`` each MLP's output, its biases included (empty without MLPs);
        - ``scale``: ``[seq]`` the final norm's scale at each position (what the centred or raw
          residual is divided by), or None without a final norm;
        - ``resid``: ``[seq, d_model]`` the residual stream entering the final norm;
        - ``logits``: ``[seq, d_vocab]`` the model's logits on this run.

        The residual is ``embed + pos_embed + sum over layers of (sum_h z_h W_O^h + b_O) + sum of mlp_out``.

        Example:
            >>> import circuitwidgets as cw
            >>> parts = cw.ModelView(cw.demo_model()).residual_terms([[0, 2, 3]])
            >>> parts["z"].shape, parts["scale"] is None, sorted(parts["mlp_out"])
            (torch.Size([2, 3, 4, 16]), True, [])
        """
        tokens = self.check_tokens(tokens)
        if tokens.shape[0] != 1:
            raise ValueError(f"tokens must be one sequence; got a batch of {tokens.shape[0]}")
        learned = self.W_pos is not None and self.positional_embedding_type in ("standard", "unknown")
        last = f"blocks.{self.n_layers - 1}.hook_resid_post"
        names = ["hook_embed", last] + (["hook_pos_embed"] if learned else [])
        names += [f"blocks.{layer}.attn.hook_z" for layer in self.attn_layers]
        if not self.attn_only:
            names += [f"blocks.{layer}.hook_mlp_out" for layer in range(self.n_layers)]
        if self.final_norm is not None:
            names.append("ln_final.hook_scale")
        wanted = set(names)
        with self._running() as model:
            logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
        if not bool(torch.isfinite(logits).all()):
            raise self._non_finite_error("logits contain NaN/Inf values")
        for name in names:
            if name in cache and not bool(torch.isfinite(cache[name]).all()):
                raise self._non_finite_error(f"activation {name} contains NaN/Inf values")
        if last not in cache:
            raise ValueError(f"{_describe(model)} exposes no {last}: cannot read the final residual stream")
        z = [cache[f"blocks.{layer}.attn.hook_z"][0] for layer in self.attn_layers]
        scale = cache["ln_final.hook_scale"][0].reshape(-1).float() if "ln_final.hook_scale" in cache else None
        if self.final_norm is not None and scale is None:
            raise ValueError(f"{_describe(model)} has a final {self.final_norm} but exposes no ln_final.hook_scale")
        return {
            "embed": cache["hook_embed"][0].float(),
            "pos_embed": cache["hook_pos_embed"][0].float() if "hook_pos_embed" in cache else None,
            "z": self._expand_kv(torch.stack(z), "z", dim=2).float(),
            "mlp_out": {
                layer: cache[f"blocks.{layer}.hook_mlp_out"][0].float()
                for layer in range(self.n_layers)
                if f"blocks.{layer}.hook_mlp_out" in cache
            },
            "scale": scale,
            "resid": cache[last][0].float(),
            "logits": logits[0].float(),
        }


_VIEWS: weakref.WeakKeyDictionary[Any, ModelView] = weakref.WeakKeyDictionary()


def as_view(model: Any) -> ModelView:
    """The `ModelView` of `model` (itself if already a view), cached until its weights change.

    Checks the cached view with `ModelView.is_stale` on every call (see the module docstring:
    what is picked up, at what cost) and builds a new one when the model changed, under the
    model's `ModelView.lock`, so threads asking at once share one view. The cache holds models
    weakly: a deleted model is freed together with its view.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> cw.as_view(model) is cw.as_view(model)
        True
    """
    if isinstance(model, ModelView):
        return model
    from .hf_view import HFView, is_hf_backend_model  # the second backend (nnsight, plain Hugging Face)

    build = (lambda: HFView(model, weak=True)) if is_hf_backend_model(model) else (lambda: ModelView(model, weak=True))
    with _model_lock(model):
        try:
            with _GUARD:
                view = _VIEWS.get(model)
        except TypeError:
            view = None
        if view is None or view.is_stale():
            view = build()
            with contextlib.suppress(TypeError), _GUARD:  # not weakly referenceable: rebuilt on every call
                _VIEWS[model] = view
    return view
