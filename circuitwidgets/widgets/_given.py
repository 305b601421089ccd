"""What widgets drawn from data the user gives (no model) share: arrays read and checked, `ModelFree`.

A torch tensor of any floating dtype (bfloat16 included) on any device, a NumPy array, or anything
`numpy.asarray` takes (a JAX array, nested lists) becomes a float32 tensor on the CPU; a list of
torch tensors of one shape is stacked.

Example:
    >>> import numpy as np, torch
    >>> as_float32(np.array([[0.5, 0.25]]), "values")
    tensor([[0.5000, 0.2500]])
    >>> as_float32(torch.tensor([1.0], dtype=torch.bfloat16), "values").dtype
    torch.float32
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .base import CircuitWidget, short

#: Float32 tensors given up to this many bytes are copied (the widget's own: a later edit of the caller's changes
#: nothing drawn); a larger one is kept by reference, and its widget checks it was not edited (`edited`).
COPY_BYTES = 1 << 30


def edited(tensor: torch.Tensor, version: int) -> bool:
    """True when `tensor` (kept by reference) was changed in place since its version counter read `version`."""
    return tensor._version != version


def as_float32(value: Any, name: str) -> torch.Tensor:
    """`value` as a float32 tensor on the CPU, a copy of its own (an edit of the caller's tensor later changes
    nothing the widget checked and drew) up to `COPY_BYTES`, the very tensor beyond; TypeError/ValueError naming `name`."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        try:
            value = torch.stack([v.detach().to("cpu") for v in value])
        except RuntimeError as exc:
            raise ValueError(f"{name} is a list of tensors of different shapes: {exc}") from None
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold real numbers; got a tensor of dtype {value.dtype}")
        try:
            out = value.detach().to("cpu", torch.float32)
            shared = out.data_ptr() == value.data_ptr()  # (.to returns the very tensor when it can)
            return out.clone() if shared and out.numel() * 4 <= COPY_BYTES else out
        except (RuntimeError, NotImplementedError) as exc:  # e.g. a tensor on meta: no values to read
            raise ValueError(f"{name} cannot be read on this machine ({value.device}): {exc}") from None
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be a tensor or an array of numbers; got {type(value).__name__} {short(value)}")
    try:
        array = np.asarray(value)
    except Exception as exc:  # ragged nested lists, objects numpy cannot read
        raise ValueError(f"{name} cannot be read as an array: {exc}") from None
    if array.dtype.kind in "cbUSMm":
        raise TypeError(f"{name} must hold real numbers; got {type(value).__name__} of dtype {array.dtype}")
    try:
        return torch.from_numpy(np.ascontiguousarray(array.astype(np.float32)))
    except (TypeError, ValueError):
        raise TypeError(f"{name} must hold numbers; got {type(value).__name__} {short(value)}") from None


def itemsize(value: Any) -> int:
    """Bytes per value of `value` as given (2 for a bfloat16 or float16 tensor), 4 when unknown."""
    if isinstance(value, torch.Tensor):
        return value.element_size()
    return int(getattr(getattr(value, "dtype", None), "itemsize", 4) or 4)


def token_strings(tokens: Any, name: str = "tokens") -> list[str]:
    """`tokens` as a list of str (a list, tuple or 1-D array of strings); TypeError/ValueError naming `name`."""
    if isinstance(tokens, np.ndarray) and tokens.ndim == 1:
        tokens = tokens.tolist()
    if isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a list of token strings; got a tensor (token ids?): pass model.to_str_tokens(ids)")
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of token strings; got {type(tokens).__name__} {short(tokens)}")
    strings = list(tokens)
    for i, token in enumerate(strings):
        if not isinstance(token, str):
            raise TypeError(f"{name}[{i}] must be a str (a token string); got {type(token).__name__} {short(token)}")
    if not strings:
        raise ValueError(f"{name} is empty: give at least one token string")
    return strings


class ModelFree:
    """Mixin (first base) of a widget drawn from data given to it: no model, no view, nothing outside changes it.

    Its `mv` raises ValueError with `no_model` (what the widget says instead of its model
    controls); `use_model` is refused.
    """

    needs_model = False
    #: The message of anything that needs a model.
    no_model = "no model: this widget draws the data it was given"

    @property
    def mv(self) -> Any:
        raise ValueError(self.no_model)

    def use_model(self, model: Any, *, note: str | None = None) -> CircuitWidget:
        raise TypeError(f"{type(self).__name__} draws the data it was given and has no model to change")

    def _model_state(self) -> tuple:
        return ()  # nothing outside the widget changes its picture
