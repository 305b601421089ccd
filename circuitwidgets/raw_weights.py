"""A Hugging Face model's raw weights, read where they are (inside an nnsight trace, locally or on NDIF) and folded.

Like `circuitwidgets.in_trace`, this module imports nothing but ``torch`` and the shipped
`circuitwidgets.numerics` (a test checks it) and is shipped by value with each request
(``nnsight.register``). `TraceSource` reads the raw attention, norm, embedding and unembedding
parameters from a model's envoys and folds the norms as `circuitwidgets.backends.weights.Weights`
does (``diag(w_ln1)`` into ``W_Q, W_K, W_V``, the final norm's weight into ``W_U``; with LayerNorm,
every weight that writes or reads the residual stream centred along ``d_model``): it is the weight
source of `circuitwidgets.weight_views` for a model whose weights stay where it runs, as
`circuitwidgets.backends.weights.LocalSource` is for weights on this machine.

Shapes follow TransformerLens (``x @ W``): per layer ``W_Q, W_K, W_V`` ``[heads, d_model, d_head]``
(grouped K/V heads repeated), ``W_O`` ``[heads, d_head, d_model]``, in the working dtype (float32 for
half-precision weights).

Example:
    >>> import torch
    >>> q, o = torch.randn(4, 8), torch.randn(8, 4)     # nn.Linear q_proj and o_proj weights [out, in], d_model 8
    >>> spec = {"layout": "linear", "n_heads": 2, "n_kv_heads": 1, "d_head": 2, "norm": "RMS"}
    >>> W_Q, W_K, W_V, W_O = split_heads(spec, {"q": q, "k": q[:2], "v": q[:2], "o": o})
    >>> tuple(W_Q.shape), tuple(W_K.shape), tuple(W_O.shape)
    ((2, 8, 2), (2, 8, 2), (2, 2, 8))
    >>> bool(torch.equal(W_K[0], W_K[1]))               # one K head serves both query heads
    True
"""

import torch

from .numerics import work_dtype


def _f32(tensor):
    """`tensor` detached, in the working dtype (float32 for half precision)."""
    return tensor.detach().to(work_dtype(tensor.dtype))


def _heads_in(weight, n, d_head):
    """``[d_model, n * d_head]`` (columns grouped by head) -> ``[n, d_model, d_head]``."""
    return weight.reshape(weight.shape[0], n, d_head).permute(1, 0, 2)


def split_heads(spec, raw):
    """``(W_Q, W_K, W_V, W_O)`` (working dtype) of one layer from its raw projection weights `raw` (a dict), unfolded.

    ``spec["layout"]``: ``"linear"`` (Llama, Qwen2, Mistral: ``nn.Linear`` weights ``q, k, v, o`` stored
    ``[out, in]``), ``"conv1d"`` (GPT-2: ``Conv1D`` ``qkv`` ``[d_model, 3 d_model]`` and ``o``, stored
    ``[in, out]``) or ``"neox"`` (GPT-NeoX: one ``nn.Linear`` ``qkv`` whose outputs are ``[heads, 3, d_head]``).
    K/V heads are repeated to one per query head (``spec["n_kv_heads"]``).
    """
    layout, n, d_head = spec["layout"], spec["n_heads"], spec["d_head"]
    n_kv = spec.get("n_kv_heads") or n
    if layout == "linear":
        W_Q = _heads_in(_f32(raw["q"]).T, n, d_head)
        W_K = _heads_in(_f32(raw["k"]).T, n_kv, d_head)
        W_V = _heads_in(_f32(raw["v"]).T, n_kv, d_head)
    elif layout == "conv1d":
        qkv = _f32(raw["qkv"])
        width = n * d_head
        W_Q = _heads_in(qkv[:, :width], n, d_head)
        W_K = _heads_in(qkv[:, width : 2 * width], n, d_head)
        W_V = _heads_in(qkv[:, 2 * width :], n, d_head)
    elif layout == "neox":
        qkv = _f32(raw["qkv"]).reshape(n, 3, d_head, -1)  # [heads, (q, k, v), d_head, d_model]
        W_Q, W_K, W_V = (qkv[:, i].transpose(1, 2) for i in range(3))
    else:
        raise ValueError(f"unknown weight layout {layout!r}")
    W_O = output_heads(spec, raw["o"])
    if n_kv != n:
        W_K = W_K.repeat_interleave(n // n_kv, dim=0)
        W_V = W_V.repeat_interleave(n // n_kv, dim=0)
    return W_Q, W_K, W_V, W_O


def output_heads(spec, weight):
    """``W_O`` ``[heads, d_head, d_model]`` (working dtype) from the output projection's raw weight (``[out, in]`` for
    ``nn.Linear``, ``[in, out]`` for GPT-2's ``Conv1D``): head h writes ``z_h @ W_O[h]``."""
    weight = _f32(weight) if spec["layout"] == "conv1d" else _f32(weight).T
    return weight.reshape(spec["n_heads"], spec["d_head"], -1)


def fold_layer(spec, W_Q, W_K, W_V, W_O, ln_weight):
    """The layer's weights with its input norm folded in, as `Weights` folds them (biases are not used by any view).

    ``diag(w) W`` for ``W_Q, W_K, W_V``; with LayerNorm (``spec["norm"] == "LN"``) their rows are
    then centred (minus their mean over ``d_model``) and ``W_O`` is centred along ``d_model``.
    """
    centre = spec.get("norm") == "LN"
    folded = []
    for weight in (W_Q, W_K, W_V):
        if ln_weight is not None:
            weight = weight * _f32(ln_weight)[None, :, None]
        if centre:
            weight = weight - weight.mean(-2, keepdim=True)
        folded.append(weight)
    if centre:
        W_O = W_O - W_O.mean(-1, keepdim=True)
    return folded[0], folded[1], folded[2], W_O




class TraceSource:
    """The weight source (`circuitwidgets.weight_views`) of a model read through its envoys inside a trace.

    `spec`: the layout (`split_heads`), ``norm`` ("LN", "RMS" or None) and head counts; `parts`: the
    model's envoys, ``{"layers": [{"proj": {name: envoy}, "ln1": envoy or None}], "embed", "unembed",
    "final", "pos"}``. Each weight is read and folded once, on first use, however many requests read it.
    """

    #: Products run on the caller's thread only (the server's executor owns its threads); layers are folded one at a
    #: time on first use, so a stack of every layer is built, not held.
    parallel = False
    holds_stacked = False

    def __init__(self, spec, parts):
        self.spec, self.parts = spec, parts
        self.n_layers = len(parts["layers"])
        self._layers = {}
        self._kept = {}
        self.dtype = work_dtype(parts["embed"].weight.dtype)

    def layer(self, index):
        """``(W_Q, W_K, W_V, W_O)`` of stacked layer `index`, folded (on the embedding's device)."""
        if index not in self._layers:
            part = self.parts["layers"][index]
            raw = {name: envoy.weight for name, envoy in part["proj"].items()}
            norm = part.get("ln1")
            ln_weight = None if norm is None else getattr(norm, "weight", None)
            W_Q, W_K, W_V, W_O = split_heads(self.spec, raw)
            folded = fold_layer(self.spec, W_Q, W_K, W_V, W_O, ln_weight)
            # one device for every layer (a model split over GPUs): products across layers need it
            self._layers[index] = tuple(w.to(self.device) for w in folded)
        return self._layers[index]

    def stacked(self, name):
        """Weight `name` ("W_Q", "W_K", "W_V" or "W_O") of every layer, ``[layers, heads, ...]``."""
        index = ("W_Q", "W_K", "W_V", "W_O").index(name)
        return torch.stack([self.layer(i)[index] for i in range(self.n_layers)])

    @property
    def device(self):
        return self.parts["embed"].weight.device

    @property
    def W_E(self):
        """The folded ``W_E`` ``[d_vocab, d_model]`` (centred with LayerNorm)."""
        return self.derived("W_E", lambda: _centred_rows(self.spec, _f32(self.parts["embed"].weight)))

    @property
    def W_U(self):
        """The folded ``W_U`` ``[d_model, d_vocab]``: the final norm's weight in, centred along ``d_model`` with LayerNorm."""

        def fold():
            columns = _f32(self.parts["unembed"].weight).T
            norm = self.parts.get("final")
            weight = None if norm is None else getattr(norm, "weight", None)
            if weight is not None:
                columns = columns * _f32(weight).to(columns.device)[:, None]
            return columns - columns.mean(0, keepdim=True) if self.spec.get("norm") == "LN" else columns

        return self.derived("W_U", fold)

    @property
    def W_pos(self):
        """The folded learned position embeddings ``[n_ctx, d_model]``, or None."""
        pos = self.parts.get("pos")
        return None if pos is None else self.derived("W_pos", lambda: _centred_rows(self.spec, _f32(pos.weight)))

    def derived(self, key, form):
        """``form()``, formed once for this request."""
        if key not in self._kept:
            self._kept[key] = form()
        return self._kept[key]


def _centred_rows(spec, rows):
    return rows - rows.mean(-1, keepdim=True) if spec.get("norm") == "LN" else rows
