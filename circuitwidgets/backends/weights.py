"""Stacked, norm-folded weights in TransformerLens shapes, read from a TransformerLens model (or bridge).

Every weight-based view (QK and OV circuits, copying, composition, skip-trigrams, attribution) reads
`Weights`. The Hugging Face backend builds one over a TransformerLens bridge that shares the model's
parameters, so there is one reading and one folding of weights for every backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from .. import weight_views
from ..numerics import times_pow2
from .protocol import Facts, Missing

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

    The vocabulary-sized ``W_E``, ``W_U`` and ``b_U`` are folded on first use (``W_E`` apart from
    ``W_U`` and ``b_U``), from the tensors read when the `Weights` was built: views that never read
    them (composition, patterns) do not pay for two fresh 154 MB copies on GPT-2 small (most of the
    time of building the weights, in page faults).
    """

    def __init__(self, model: Any, facts: Facts):
        self._model = model  # only while building: a Weights never keeps its model alive
        self.facts = facts
        self._folding = threading.Lock()
        self._W_E: torch.Tensor | None = None
        self._W_U: torch.Tensor | None = None
        self._b_U: torch.Tensor | None = None
        try:
            self._load()
        finally:
            del self._model
        self._unembed_embed: torch.Tensor | None = None
        self._derived: dict[str, Any] = {}

    def _load(self) -> None:
        model = self._model
        with torch.no_grad():
            stacked = {name: self._stack(name) for name in HEAD_WEIGHTS}
            for name in KV_WEIGHTS:
                stacked[name] = expand_kv(stacked[name], self.facts.n_heads, name)
            for name, tensor in stacked.items():
                setattr(self, name, tensor)
            self.b_O = self._stack("b_O")
            b_U = getattr(model, "b_U", None)
            # read now, folded on first use (`_embedding`, `_unembedding`)
            self._raw_E: torch.Tensor | None = model.W_E.detach()
            self._raw_U: torch.Tensor | None = model.W_U.detach()
            self._raw_b_U = b_U.detach() if b_U is not None else None
            try:
                self.W_pos = model.W_pos.detach()
            except (AttributeError, NotImplementedError):
                self.W_pos = None
            self.ln_final_w, self.ln_final_b = norm_weights(getattr(model, "ln_final", None))
            self._final: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)
            self.norm_note = self._fold_norms()
        for name in (*HEAD_WEIGHTS, "b_O", "W_pos"):
            self._check_finite(name, getattr(self, name))

    @staticmethod
    def _check_finite(name: str, tensor: torch.Tensor | None) -> None:
        # a sum holding NaN or Inf is not finite: one cheap pass (10x faster than isfinite), exact check after
        if tensor is not None and not torch.isfinite(tensor.sum()) and not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(f"model weight {name} contains {bad} NaN/Inf values; scores would be meaningless")

    # ----- the vocabulary-sized weights, folded on first use ----------------------------------
    @property
    def W_E(self) -> torch.Tensor:
        value = self._W_E
        if value is None:
            with self._folding:
                if self._W_E is None:
                    self._W_E = self._embedding()
                    self._raw_E = None  # the folded copy (or the same tensor) is all that is kept
                value = self._W_E
        return value

    @property
    def W_U(self) -> torch.Tensor:
        return self._unembedding()[0]

    @property
    def b_U(self) -> torch.Tensor:
        return self._unembedding()[1]

    def _embedding(self) -> torch.Tensor:
        """``W_E``, centred along ``d_model`` for LayerNorm models."""
        W_E = self._raw_E
        assert W_E is not None
        if self._centre:
            with torch.no_grad():
                W_E = W_E - W_E.mean(-1, keepdim=True)
        self._check_finite("W_E", W_E)
        return W_E

    def _unembedding(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W_U, b_U)`` with the final norm folded in and, for LayerNorm models, ``W_U`` centred along ``d_model``."""
        if self._W_U is not None and self._b_U is not None:  # (folded already: no lock)
            return self._W_U, self._b_U
        with self._folding:
            if self._W_U is None or self._b_U is None:
                W_U, b_U = self._raw_U, self._raw_b_U
                assert W_U is not None
                w, b = self._final
                copied = False
                with torch.no_grad():
                    b_U = b_U if b_U is not None else W_U.new_zeros(self.facts.d_vocab)
                    if b is not None:
                        b_U = b_U + b.to(W_U.dtype) @ W_U
                    if w is not None:
                        W_U, copied = W_U * w.to(W_U.dtype)[:, None], True
                    if self._centre:  # a copy made here is centred in place (W_U is vocabulary-sized)
                        mean = W_U.mean(0, keepdim=True)
                        W_U = W_U.sub_(mean) if copied else W_U - mean
                self._check_finite("W_U", W_U)
                self._check_finite("b_U", b_U)
                self._W_U, self._b_U = W_U, b_U
                self._raw_U = self._raw_b_U = None
                self._final = (None, None)
            return self._W_U, self._b_U

    # ----- reading and folding -------------------------------------------------------------------
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
        circuits leave it out. Returns "" for a model without norms. ``W_E``, ``W_U`` and ``b_U``
        are folded on first use (`_embedding`, `_unembedding`).
        """
        kind = (self.facts.normalization_type or "").upper()
        self._centre = kind.startswith("LN")
        if not kind.startswith(("LN", "RMS")):
            return ""
        folded = []
        inputs = [norm_weights(getattr(self._model.blocks[block], "ln1", None)) for block in self.facts.attn_layers]
        if any(w is not None or b is not None for w, b in inputs):
            folded.append("ln1")
            ones, zeros = torch.ones_like(self.b_O[0]), torch.zeros_like(self.b_O[0])
            w = torch.stack([ones if w is None else w.to(ones.dtype) for w, _ in inputs])  # [layers, d_model]
            b = torch.stack([zeros if b is None else b.to(ones.dtype) for _, b in inputs])
            # one pass over each weight for its bias term and (LayerNorm) the mean of its scaled rows
            rows = torch.stack([b, w / w.shape[-1]], dim=1) if self._centre else b[:, None]
            for name in ("Q", "K", "V"):  # new tensors: the stacked weights may share the model's storage
                weight = getattr(self, f"W_{name}")
                terms = torch.matmul(rows[:, None], weight)  # [layers, heads, 1 or 2, d_head]
                setattr(self, f"b_{name}", getattr(self, f"b_{name}") + terms[:, :, 0])
                if self._centre:  # diag(w) W minus its mean over d_model, in one pass
                    weight = torch.addcmul(-terms[:, :, 1:], weight, w[:, None, :, None])
                else:
                    weight = weight * w[:, None, :, None]
                setattr(self, f"W_{name}", weight)
        elif self._centre:
            for name in ("Q", "K", "V"):
                weight = getattr(self, f"W_{name}")
                setattr(self, f"W_{name}", weight - weight.mean(-2, keepdim=True))
        self._final = (self.ln_final_w, self.ln_final_b)  # folded into W_U and b_U on first use
        if self.ln_final_w is not None or self.ln_final_b is not None:
            folded.append("ln_final")
        self.ln_final_w = self.ln_final_b = None
        name = "LayerNorm" if self._centre else "RMSNorm"
        done = f"{name} weights folded into W_Q, W_K, W_V and W_U (as fold_ln)" if folded else f"{name} weights already folded"
        if self._centre:  # centred inputs: the part of any weight along (1, ..., 1) does nothing
            for attr in ("W_pos", "W_O", "b_O"):  # writers (W_E on first use)
                tensor = getattr(self, attr)
                if tensor is not None:
                    setattr(self, attr, tensor - tensor.mean(-1, keepdim=True))
            done += ", its centring into every weight that writes or reads the residual stream"
        return f"{done}; its per-position scale is left out."

    def unembed_embed_scaled(self) -> tuple[torch.Tensor, int]:
        """``(M, e)`` with ``W_U W_E == M * 2**e`` and ``M`` free of under- and overflow, formed once
        (`circuitwidgets.weight_views.unembed_embed_scaled`)."""
        return weight_views.unembed_embed_scaled(self)

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

    # ----- the weight source of `circuitwidgets.weight_views` ------------------------------------
    #: Products may use worker threads here; the weights are held stacked (``stacked`` costs nothing).
    parallel = True
    holds_stacked = True

    @property
    def n_layers(self) -> int:
        """Attention layers stacked."""
        return int(self.stacked("W_Q").shape[0])

    def layer(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W_Q, W_K, W_V, W_O)`` of stacked layer `index` (every head)."""
        return tuple(self.stacked(name)[index] for name in ("W_Q", "W_K", "W_V", "W_O"))  # type: ignore[return-value]

    def stacked(self, name: str) -> torch.Tensor:
        """Weight `name` ("W_Q", "W_K", "W_V" or "W_O") of every attention layer."""
        return getattr(self, name)  # (set by `_load`)

    def derived(self, key: str, form: Callable[[], Any]) -> Any:
        """``form()``, formed once per weight state and kept under `key`: a product of these weights that several
        calls share (composition's writer factors serve its Q, K and V scores).

        A `Weights` is read anew whenever the model's weights change (its view is rebuilt), so what is kept
        here never outlives the weights it was formed from. Keep only what is small next to the weights.

        Example:
            >>> import circuitwidgets as cw
            >>> weights = cw.ModelView(cw.demo_model()).backend.weights()
            >>> norm = weights.derived("W_O norm", lambda: weights.W_O.norm())
            >>> weights.derived("W_O norm", lambda: None) is norm
            True
        """
        value = self._derived.get(key)
        if value is None:
            value = form()
            # Two threads may both form it; each stores a whole value, so none reads half of one.
            self._derived[key] = value
        return value


def views_here(weights: Weights | Missing, requests: list[dict[str, Any]], report: Any = None) -> list[dict[str, Any]]:
    """Answers to weight-view `requests` (`circuitwidgets.weight_views`) from weights on this machine; ValueError
    saying why where a backend has none."""
    if isinstance(weights, Missing):
        raise ValueError(weights.reason.replace("{what}", "this weight-based view"))
    return weight_views.answer(weights, requests, report)
