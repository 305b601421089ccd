"""Change detection shared by every backend: parameter fingerprints, hook state, one lock per model.

What a view notices, and when (every analysis call and every widget action asks `as_view`, which
asks the view's `ParameterWatch` whether the model changed since the view read it):

- **Weights edited in place, by any route**: optimiser steps, ``with torch.no_grad(): p.mul_(0)``,
  ``p.data.mul_(0)`` and ``p.detach().numpy()[:] = ...`` (neither bumps the tensor's version
  counter), ``load_state_dict`` (copying, or ``assign=True``), ``p.data = t``. Per parameter the
  watch compares its storage address, version counter, dtype, device and a *content
  fingerprint*: the entries summed with fixed pseudo-random weights in [1, 2), in float32 within
  rows of 4 096 entries and in float64 across rows. An edit behind autograd's back is seen unless
  it leaves that weighted sum unchanged (a change lost in float32 rounding of its row's sum, or an
  exact cancellation), which real edits (ablations, scaling, noise, copied weights, NaN) do not
  produce. Measured on GPT-2-sized random weights: one entry changed by 1e-4 of a typical entry
  was always seen, by 1e-5 in about 90 % of trials, by 1e-6 in about 20 %.
- **Parameters or modules replaced** (``block.attn.v = new``, ``load_state_dict(assign=True)``):
  seen through the process-wide registration counter below.
- **dtype and device moves**: new storage, dtype, device.
- **NaN or Inf in any parameter**: a ValueError naming the parameter.
- **Hooks** change runs, not weights: `hook_state_of` lists them so that caches of run results can
  be keyed on it.

Importing this module installs two process-wide torch hooks,
``register_module_parameter_registration_hook`` and ``register_module_module_registration_hook``,
which only add one to a counter: while it stands still no parameter was replaced anywhere, and a
staleness check need not walk the model's modules. Cost: one Python call per registration, nothing
during forward or backward passes. The fingerprint reads every weight once: about 26 ms on a
GPT-2-small-shaped model (CPU, 2 threads); ``benchmarks/bench_staleness.py`` re-measures it.
"""

from __future__ import annotations

import hashlib
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.nn.modules import module as _torch_module

# Counts every parameter or submodule (re)registered on any torch module.
_registrations = 0


def _count_registration(*_: Any) -> None:
    global _registrations
    _registrations += 1


def registrations() -> int:
    """How many parameters and submodules have been registered on any module in this process."""
    return _registrations


_torch_module.register_module_parameter_registration_hook(_count_registration)
_torch_module.register_module_module_registration_hook(_count_registration)


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
    if tensor.is_meta:  # no values to read (weights elsewhere): address, dtype and shape tell its state
        return torch.zeros(0, dtype=torch.float64)
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


def fingerprints(parameters: Sequence[torch.Tensor]) -> list[float]:
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


def model_lock(model: Any) -> threading.RLock:
    """The re-entrant lock that serialises runs (and view building) of `model`."""
    with _GUARD:
        try:
            lock = _LOCKS.get(model)
            if lock is None:
                lock = _LOCKS[model] = threading.RLock()
        except TypeError:
            return _SHARED_LOCK
    return lock


def weak_ref(model: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(model)
    except TypeError:  # not weakly referenceable: held strongly
        return lambda: model


class ModelRef:
    """Calling it gives the model (held weakly with `weak`); ReferenceError once it is gone.

    Backends hand this, never a bound method of themselves, to their parts: a part that held its
    backend would make a reference cycle, and a view released by a cache would then wait for a
    second garbage collection before freeing its copies of the weights.
    """

    def __init__(self, model: Any, weak: bool, also: Callable[[], Any] | None = None):
        self._ref = weak_ref(model) if weak else (lambda: model)
        self._also = also  # another object that must still be alive (a Hugging Face model behind its wrapper)

    def __call__(self) -> Any:
        model = self._ref()
        if model is None or (self._also is not None and self._also() is None):
            raise ReferenceError("the model of this view was deleted (a cached view holds its model weakly); use a live model")
        return model


def is_bridge_wiring(hook: Any) -> bool:
    """TransformerBridge wires its own forward hooks (capture of residuals) on its first run."""
    return str(getattr(hook, "__module__", "") or "").startswith("transformer_lens.model_bridge")



def hook_state_of(modules: Sequence[torch.nn.Module], named_modules: Callable[[], Iterator[tuple[str, Any]]]) -> tuple:
    """The hook state of `modules` (and the process-wide hooks): ``(module name, kind, hook ids)``
    tuples, the names from ``named_modules()``, which is only walked when some hook is found."""
    found: list[tuple[Any, str, tuple[int, ...]]] = []
    for module in modules:
        for kind, hooks in (("forward_pre", module._forward_pre_hooks), ("forward", module._forward_hooks)):
            if hooks:
                ids = tuple(key for key, hook in list(hooks.items()) if not is_bridge_wiring(hook))
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


class ParameterWatch:
    """The parameters of a model as a view read them, and whether they changed since (`changed`).

    `parameters()` lists the model's parameters now; `name_of(p)` names one for messages. Building
    a watch refuses NaN or Inf in any parameter (ValueError naming it), as does `changed`.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> watch = ParameterWatch(lambda: list(model.parameters()))
        >>> watch.changed()
        False
        >>> _ = next(model.parameters()).data.mul_(2)   # behind autograd's back: no version bump
        >>> watch.changed()
        True
    """

    def __init__(self, parameters: Callable[[], list[torch.Tensor]], name_of: Callable[[torch.Tensor], str] | None = None):
        self._list = parameters
        self._name_of = name_of or (lambda p: f"of shape {tuple(p.shape)}")
        self._registrations = _registrations
        self._parameters = parameters()
        self._state = self._read()

    def _read(self) -> tuple:
        """Per parameter: storage address, version counter, dtype, device and content fingerprint."""
        parameters = self._parameters
        values = fingerprints(parameters)
        for i, value in enumerate(values):
            if not math.isfinite(value):
                bad = int((~torch.isfinite(parameters[i].detach())).sum())
                if bad:
                    raise ValueError(
                        f"model parameter {self._name_of(parameters[i])} contains {bad} NaN/Inf "
                        f"value{'s' if bad > 1 else ''}; every score would be meaningless: repair or reload the weights"
                    )
                # finite entries whose float32 row sums overflowed (weights near 1e34): sum in float64
                rows = _row_sums(parameters[i], torch.float64).cpu()
                values[i] = float(rows @ _row_weights(rows.numel()))
        return tuple(
            (p.data_ptr(), p._version, p.dtype, p.device, value) for p, value in zip(parameters, values, strict=True)
        )

    def digest(self) -> str:
        """A short digest of the parameters' contents as read (names, shapes, dtypes and fingerprints, not addresses):
        equal for the same weights in another session, different after an edit."""
        read = zip(self._parameters, self._state, strict=True)
        parts = [(tuple(p.shape), str(dtype), round(value, 9)) for p, (_, _, dtype, _, value) in read]
        return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]

    def changed(self) -> bool:
        """True when a parameter was replaced, moved or edited in place (by any route) since the watch read them."""
        if self._registrations != _registrations:  # some module somewhere gained a parameter
            current = self._list()
            if len(current) != len(self._parameters) or any(a is not b for a, b in zip(current, self._parameters, strict=True)):
                return True
            self._registrations = _registrations
        return self._read() != self._state


class ModuleList:
    """The modules of one or more roots, kept (weakly) until some module anywhere registers a submodule.

    Walking GPT-2 small's 705 modules takes about 1 ms; hook checks run on every widget event.
    """

    def __init__(self, roots: Callable[[], list[torch.nn.Module]]):
        self._roots = roots
        self._kept: tuple[int, list[weakref.ref[torch.nn.Module]]] | None = None

    def __call__(self) -> list[torch.nn.Module]:
        kept = self._kept
        if kept is not None and kept[0] == _registrations:
            alive = [module for ref in kept[1] if (module := ref()) is not None]
            if len(alive) == len(kept[1]):
                return alive
        counted, modules, seen = _registrations, [], set()
        for root in self._roots():
            for module in root.modules():
                if id(module) not in seen:
                    seen.add(id(module))
                    modules.append(module)
        self._kept = (counted, [weakref.ref(m) for m in modules])
        return modules
