"""What every nnsight trace of the Hugging Face backend shares: nnsight itself, the modules shipped by value, bytes.

A trace runs code where the model is (here, or on NDIF's servers, which have no circuitwidgets): the
torch-only modules it calls are registered with nnsight to travel by value (`ship`), and what the
trace saves is what a remote request downloads (`saved_bytes`).
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from .. import feature_terms, head_metrics, in_trace, logit_terms, numerics, raw_weights, row_maxima, weight_views
from ..numerics import tensors_in

#: The modules a trace may run, shipped by value.
SHIPPED: tuple[ModuleType, ...] = (
    head_metrics, in_trace, numerics, row_maxima, raw_weights, weight_views, logit_terms, feature_terms,
)
_REGISTERING = threading.Lock()


def nnsight_module() -> Any:
    try:
        import nnsight
    except ImportError:
        raise ImportError(
            "circuitwidgets runs Hugging Face and nnsight models through nnsight: "
            "pip install nnsight (or circuitwidgets[nnsight])"
        ) from None
    return nnsight


def ship(nnsight: Any) -> None:
    """Register `SHIPPED` with nnsight (cloudpickle by value), once per trace: the server imports none of them."""
    with _REGISTERING:  # cloudpickle's registry is not thread-safe
        for module in SHIPPED:
            nnsight.register(module)


def saved_bytes(value: Any) -> int:
    """Bytes of the tensors in `value`: what a remote request's result weighs (less a few hundred bytes of framing)."""
    return sum(t.numel() * t.element_size() for t in tensors_in(value))
