"""Stacked, norm-folded weights in TransformerLens shapes, read from a TransformerLens model (or bridge).

Every weight-based view (QK and OV circuits, copying, composition, skip-trigrams, attribution) reads
`Weights`. The Hugging Face backend builds one over a TransformerLens bridge that shares the model's
parameters, so there is one reading and one folding of weights for every backend.
"""

from __future__ import annotations

from typing import Any

import torch

from .numerics import times_pow2, unit_scaled, work_dtype
from .protocol import Facts

HEAD_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")
KV_WEIGHTS = ("W_K", "W_V", "b_K", "b_V")
#: Every weight name a view can be asked for.
WEIGHT_NAMES = frozenset((*HEAD_WEIGHTS, "b_O", "W_E", "W_U", "b_U", "W_pos", "ln_final_w", "ln_final_b", "norm_note"))


def norm_weights(norm: Any) -> tuple[torch.Tensor | None, torch.Tensor | None]:
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


def expand_kv(tensor: torch.Tensor, n_heads: int, name: str, dim: int = 1) -> torch.Tensor:
    """Grouped-query models hold fewer K/V heads: give each query head its own copy."""
    n_kv = tensor.shape[dim]
    if n_kv == n_heads:
        return tensor
    if n_heads % n_kv:
        raise ValueError(f"{name} has {n_kv} heads, which does not divide n_heads={n_heads}")
    return tensor.repeat_interleave(n_heads // n_kv, dim=dim)


class Weights:
    """The weights of `model` (a TransformerLens bridge or HookedTransformer), stacked over the attention layers.

    Attributes (detached, on the model's device and dtype): ``W_Q, W_K, W_V`` ``[layers, heads,
    d_model, d_head]`` (grouped K/V heads expanded), ``W_O`` ``[layers, heads, d_head, d_model]``,
    ``b_Q, b_K, b_V`` ``[layers, heads, d_head]``, ``b_O`` ``[layers, d_model]``, ``W_E``, ``W_U``,
    ``b_U``, ``W_pos`` (None without learned positions), ``ln_final_w``/``ln_final_b`` (None once
    folded), ``norm_note`` (what folding did). Refuses NaN/Inf weights (ValueError naming one).
    """

    def __init__(self, model: Any, facts: Facts):
        self._model = model  # only while building: a Weights never keeps its model alive
        self.facts = facts
        try:
            self._load()
        finally:
            del self._model
        self._unembed_embed_unit: tuple[torch.Tensor, int] | None = None
        self._unembed_embed: torch.Tensor | None = None

    def _load(self) -> None:
        model = self._model
        with torch.no_grad():
            stacked = {name: self._stack(name) for name in HEAD_WEIGHTS}
            for name in KV_WEIGHTS:
                stacked[name] = expand_kv(stacked[name], self.facts.n_heads, name)
            for name, tensor in stacked.items():
                setattr(self, name, tensor)
            self.b_O = self._stack("b_O")
            self.W_E = model.W_E.detach()
            self.W_U = model.W_U.detach()
            b_U = getattr(model, "b_U", None)
            self.b_U = b_U.detach() if b_U is not None else self.W_U.new_zeros(self.facts.d_vocab)
            try:
                self.W_pos = model.W_pos.detach()
            except (AttributeError, NotImplementedError):
                self.W_pos = None
            self.ln_final_w, self.ln_final_b = norm_weights(getattr(model, "ln_final", None))
            self.norm_note = self._fold_norms()
        for name in (*HEAD_WEIGHTS, "b_O", "W_E", "W_U", "b_U", "W_pos"):
            tensor = getattr(self, name)
            # a sum holding NaN or Inf is not finite: one cheap pass (10x faster than isfinite), exact check after
            if tensor is not None and not torch.isfinite(tensor.sum()) and not torch.isfinite(tensor).all():
                bad = int((~torch.isfinite(tensor)).sum())
                raise ValueError(f"model weight {name} contains {bad} NaN/Inf values; scores would be meaningless")

    def _stack(self, name: str) -> torch.Tensor:
        """Stack a per-layer attention weight over the attention layers only."""
        whole = None
        if len(self.facts.attn_layers) == self.facts.n_layers:
            try:
                whole = getattr(self._model, name)
            except (AttributeError, NotImplementedError, RuntimeError):
                whole = None
        if whole is None:
            whole = torch.stack([self._block_weight(i, name) for i in self.facts.attn_layers])
        return whole.detach()

    def _block_weight(self, block: int, name: str) -> torch.Tensor:
        """One attention layer's weight `name`; a bias the architecture lacks (Llama's) is zeros."""
        attn = self._model.blocks[block].attn
        value = getattr(attn, name)
        if value is None and name.startswith("b_"):
            weight = getattr(attn, "W" + name[1:])  # b_Q: [heads, d_head] from W_Q [heads, d_model, d_head]
            shape = weight.shape[-1:] if name == "b_O" else (weight.shape[0], weight.shape[-1])
            value = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        return value

    def _fold_norms(self) -> str:
        """Fold the norms into the weights the circuits read, as TransformerLens' ``fold_ln`` does; say what was done.

        A head reads ``LN(x) W = ((x - mean) / scale) * w + b`` through ``W``: its weight goes into
        the rows of ``W_Q``, ``W_K``, ``W_V`` (``diag(w) W``) and its bias into ``b_Q``, ``b_K``,
        ``b_V`` (``b W``); the final norm's into ``W_U`` and ``b_U``. With LayerNorm every reader of
        the residual stream removes its mean, so the writers (``W_E``, ``W_pos``, ``W_O``, ``b_O``)
        and the readers (``W_Q``, ``W_K``, ``W_V``, ``W_U``) are centred too, as
        ``center_writing_weights`` and ``fold_ln`` do. The per-position scale cannot be folded:
        circuits leave it out. Returns "" for a model without norms.
        """
        kind = (self.facts.normalization_type or "").upper()
        if not kind.startswith(("LN", "RMS")):
            return ""
        folded, copies = [], set()  # ids of the tensors made here (safe to change in place)
        inputs = [norm_weights(getattr(self._model.blocks[block], "ln1", None)) for block in self.facts.attn_layers]
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

    def unembed_embed_scaled(self) -> tuple[torch.Tensor, int]:
        """``(M, e)`` with ``W_U W_E == M * 2**e`` and ``M`` free of under- and overflow, formed once.

        ``W_U`` and ``W_E`` whose largest magnitude lies within ``2**-16 .. 2**16`` are used as
        they are (``e == 0``); others are first scaled by a power of two (`unit_scaled`).
        """
        value = self._unembed_embed_unit
        if value is None:
            dtype = work_dtype(self.W_E.dtype)
            W_U, e_U = unit_scaled(self.W_U.to(dtype), slack=16)
            W_E, e_E = unit_scaled(self.W_E.to(dtype), slack=16)
            value = (W_U @ W_E, int(e_U + e_E))
            self._unembed_embed_unit = value
        return value

    def unembed_embed(self) -> torch.Tensor:
        """``W_U W_E`` (``[d_model, d_model]``, float32 for half-precision models), formed once.

        The one pass over the vocabulary behind every head's token-basis OV eigenvalues.
        """
        value = self._unembed_embed
        if value is None:
            unit, exponent = self.unembed_embed_scaled()
            value = times_pow2(unit, exponent) if exponent else unit
            # Two threads may both compute it; each stores a whole tensor, so none reads half of one.
            self._unembed_embed = value
        return value
