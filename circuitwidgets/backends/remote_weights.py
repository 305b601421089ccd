"""Weight views of a Hugging Face / nnsight model computed where its weights are (NDIF), reduced there.

An nnsight model for NDIF holds only the shapes of its weights here (on ``meta``), so `Weights`
cannot be built. Each function below runs one nnsight trace (``model.trace(one token,
remote=backend.remote)``, stopped before the model runs further than it needs) in which
`circuitwidgets.in_trace_weights` (torch only, shipped by value) reads the raw parameters from the
model's envoys, folds the norms as `Weights` does and computes the view; only the reduced result is
saved and downloaded: a token-subset block, ``d_head``-sized eigenvalues, per-head or per-pair
scores, top lists. The answers equal the local analysis functions (`circuitwidgets.analysis`) on
the same weights; each adds its download to ``backend.bytes_received`` and one to ``backend.traces``.

`source` in every function: an `HFView` (or any object with a Hugging Face ``.backend``), a
`HuggingFaceBackend`, or an nnsight / Hugging Face model (then ``remote`` and ``tokenizer`` build one).
`layer` is a block index, tokens are ids or one-token strings. Architectures: Llama-like
(Llama, Mistral, Qwen2), GPT-2 and GPT-NeoX (`architecture`).

Example:
    >>> import circuitwidgets as cw
    >>> model, tokenizer = cw.demo.tiny_hf_model("gpt2")
    >>> view = cw.HFView(model, tokenizer=tokenizer, remote="local")
    >>> remote_ov_block(view, 1, [5, 6, 7]).shape          # [heads, source token, out token]
    torch.Size([4, 3, 3])
    >>> remote_copying_scores(view).shape                  # [layers, heads]
    torch.Size([2, 4])
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from .. import in_trace_attribution, in_trace_weights
from .hugging_face import HuggingFaceBackend, nnsight_module, saved_bytes

_REGISTERING = threading.Lock()

#: model_type -> (layout, layers path, attention path in a layer, {projection: path in the attention}, input norm,
#: final norm); the embedding and unembedding are the model's ``get_input_embeddings()`` / ``get_output_embeddings()``
ARCHITECTURES: dict[str, tuple[str, str, str, dict[str, str], str, str]] = {
    "llama": ("linear", "model.layers", "self_attn", {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"},
              "input_layernorm", "model.norm"),
    "gpt2": ("conv1d", "transformer.h", "attn", {"qkv": "c_attn", "o": "c_proj"}, "ln_1", "transformer.ln_f"),
    "gpt_neox": ("neox", "gpt_neox.layers", "attention", {"qkv": "query_key_value", "o": "dense"}, "input_layernorm",
                 "gpt_neox.final_layer_norm"),
}
ARCHITECTURES["mistral"] = ARCHITECTURES["qwen2"] = ARCHITECTURES["llama"]
#: model_type -> (MLP path in a layer, learned positional embedding path or None): the residual stream's other writers
WRITERS: dict[str, tuple[str, str | None]] = {
    "llama": ("mlp", None), "gpt2": ("mlp", "transformer.wpe"), "gpt_neox": ("mlp", None),
}
WRITERS["mistral"] = WRITERS["qwen2"] = WRITERS["llama"]


def norm_note(normalization_type: str | None) -> str:
    """What the trace folds (as `Weights.norm_note` says it for weights on this machine).

    Example:
        >>> norm_note("RMS")[:50]
        'RMSNorm weights folded into W_Q, W_K, W_V and W_U '
    """
    kind = (normalization_type or "").upper()
    if not kind.startswith(("LN", "RMS")):
        return ""
    name = "LayerNorm" if kind.startswith("LN") else "RMSNorm"
    centred = ", its centring into every weight that writes or reads the residual stream" if name == "LayerNorm" else ""
    folded = f"{name} weights folded into W_Q, W_K, W_V and W_U (as fold_ln), where the weights are{centred}"
    return f"{folded}; its per-position scale is left out."


def backend_of(source: Any, *, remote: Any = None, tokenizer: Any = None) -> HuggingFaceBackend:
    """The `HuggingFaceBackend` of `source` (a view holding one, the backend, or a model wrapped with `remote`)."""
    found = getattr(source, "backend", source)
    if isinstance(found, HuggingFaceBackend):
        return found
    return HuggingFaceBackend(source, remote=remote, tokenizer=tokenizer)


def _config(backend: HuggingFaceBackend) -> Any:
    config = backend.hf_model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def architecture(backend: HuggingFaceBackend) -> dict[str, Any]:
    """The spec `in_trace_weights` reads the weights by: layout, norm kind and head counts; ValueError for others."""
    kind = getattr(_config(backend), "model_type", None)
    if kind not in ARCHITECTURES:
        raise ValueError(
            f"remote weight views know the architectures {sorted(ARCHITECTURES)}; this model is {kind!r}: "
            "load it locally for weight-based views"
        )
    facts = backend.facts
    return {
        "layout": ARCHITECTURES[kind][0],
        "norm": facts.normalization_type,
        "n_heads": facts.n_heads,
        "n_kv_heads": facts.n_kv_heads,
        "d_head": facts.d_head,
    }


def _envoy(root: Any, path: str) -> Any:
    envoy = root
    for part in path.split("."):
        envoy = envoy[int(part)] if part.isdigit() else getattr(envoy, part)
    return envoy


def _parts(backend: HuggingFaceBackend) -> dict[str, Any]:
    """The envoys the trace reads: per layer its projections and input norm; the embedding, final norm, unembedding."""
    hf = backend.hf_model
    _, layers, attn, projections, ln1, final = ARCHITECTURES[_config(backend).model_type]
    positions = WRITERS[_config(backend).model_type][1]
    names = {id(module): name for name, module in hf.named_modules()}
    embed, unembed = names[id(hf.get_input_embeddings())], names[id(hf.get_output_embeddings())]
    root = backend.model()
    blocks = _envoy(root, layers)
    return {
        "layers": [
            {
                "proj": {name: _envoy(blocks[i], f"{attn}.{path}") for name, path in projections.items()},
                "ln1": _envoy(blocks[i], ln1),
            }
            for i in range(backend.facts.n_layers)
        ],
        "embed": _envoy(root, embed),
        "pos": None if positions is None else _envoy(root, positions),
        "final": _envoy(root, final),
        "unembed": _envoy(root, unembed),
    }


def _writers(backend: HuggingFaceBackend) -> dict[str, Any]:
    """The envoys a logit attribution reads: per layer its output projection and MLP; embeddings, final norm, unembedding."""
    parts = _parts(backend)
    kind = _config(backend).model_type
    mlp = WRITERS[kind][0]
    blocks = _envoy(backend.model(), ARCHITECTURES[kind][1])
    for index, layer in enumerate(parts["layers"]):
        layer.update(o=layer["proj"]["o"], mlp=_envoy(blocks[index], mlp))
    return parts


def _final_eps(backend: HuggingFaceBackend) -> float:
    final = ARCHITECTURES[_config(backend).model_type][5]
    module = backend.hf_model.get_submodule(final)
    return float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-5)))


def remote_weight_views(source: Any, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answer `requests` (``in_trace_weights.VIEWS``) in one trace next to the weights; counts the download.

    The lower-level entry of every function here: several views in one request (e.g. the OV block
    and the eigenvalues a widget shows together) cost one round trip.
    """
    backend = backend_of(source)
    spec = architecture(backend)
    nnsight = nnsight_module()
    parts = _parts(backend)
    tok = backend.tokens.tokenizer
    first = getattr(tok, "bos_token_id", None) if tok is not None else None
    ids = torch.tensor([[0 if first is None else int(first)]])
    with backend._running() as model:
        with _REGISTERING:  # cloudpickle's registry is not thread-safe
            nnsight.register(in_trace_weights)  # shipped by value: the server has no circuitwidgets
        with model.trace(ids, remote=backend.remote, **backend.trace_options) as tracer:
            results = nnsight.save(in_trace_weights.weight_views(spec, parts, requests))
            tracer.stop()
    backend.bytes_received += saved_bytes(results)
    backend.traces += 1
    return list(results)


def remote_logit_attribution(
    source: Any, tokens: torch.Tensor, targets: Sequence[int], baseline: int | None = None
) -> dict[str, Any]:
    """The terms of `analysis.logit_attribution_by_position` for one sequence `tokens` ``[1, seq]``, from one trace of
    it, reduced where the model runs (`in_trace_attribution`): ``{"heads": [seq, layers, heads], "others": {name:
    [seq]}, "logits": [seq], "scale": [seq] or None}`` float32; ``seq · (layers · heads + layers + 5)`` floats come back.

    `targets`: one token id per position (any id where there is none; the caller drops those); `baseline`: an id or None.
    """
    backend = backend_of(source)
    spec = {**architecture(backend), "eps": _final_eps(backend)}
    parts = _writers(backend)
    nnsight = nnsight_module()
    request = {"targets": [int(t) for t in targets], "baseline": None if baseline is None else int(baseline)}
    with backend._running() as model:
        with _REGISTERING:  # cloudpickle's registry is not thread-safe
            nnsight.register(in_trace_weights)  # shipped by value: the server has no circuitwidgets
            nnsight.register(in_trace_attribution)
        with model.trace(tokens.cpu(), remote=backend.remote, **backend.trace_options) as tracer:
            result = nnsight.save(in_trace_attribution.logit_attribution(spec, parts, request))
            tracer.stop()
    backend.bytes_received += saved_bytes(result)
    backend.traces += 1
    return dict(result)


# ----- checks ------------------------------------------------------------------------------------


def _layer(backend: HuggingFaceBackend, layer: Any) -> int:
    n = backend.facts.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise TypeError(f"layer must be an int; got {layer!r}")
    if not -n <= layer < n:
        raise ValueError(f"layer={layer} is out of range: 0..{n - 1}")
    return layer % n


def _head(backend: HuggingFaceBackend, head: Any) -> int:
    n = backend.facts.n_heads
    if isinstance(head, bool) or not isinstance(head, int):
        raise TypeError(f"head must be an int; got {head!r}")
    if not -n <= head < n:
        raise ValueError(f"head={head} is out of range: 0..{n - 1}")
    return head % n


def _ids(backend: HuggingFaceBackend, tokens: Any) -> list[int]:
    return backend.tokens.token_ids(tokens)


def _one(source: Any, request: dict[str, Any]) -> dict[str, Any]:
    return remote_weight_views(source, [request])[0]


# ----- the views ----------------------------------------------------------------------------------


def remote_ov_block(source: Any, layer: int, sources: Any, outputs: Any = None, head: int | None = None) -> torch.Tensor:
    """``(W_E W_V W_O W_U)[sources][:, outputs]`` float32: ``[n_heads, ns, no]``, or ``[ns, no]`` for one `head`.

    `outputs` None: the `sources` (then equal to `analysis.full_ov_block(view, layer, sources)`;
    one head: ``analysis.full_ov_circuit(view, layer, head).block(sources, outputs)``).
    Downloads ``heads · ns · no`` floats.
    """
    backend = backend_of(source)
    rows = _ids(backend, sources)
    cols = rows if outputs is None else _ids(backend, outputs)
    request = {"view": "ov_block", "layer": _layer(backend, layer), "sources": rows, "outputs": cols}
    if head is not None:
        request["head"] = _head(backend, head)
    return _one(backend, request)["block"].float()


def remote_qk_block(
    source: Any, layer: int, queries: Any, keys: Any = None, head: int | None = None, *, scaled: bool = True
) -> torch.Tensor:
    """``(W_E W_Q W_K^T W_E^T / scale)[queries][:, keys]`` float32 ``[n_heads, nq, nk]`` (``[nq, nk]`` for one `head`).

    Equals `analysis.full_qk_block(view, layer, tokens, scaled=...)` with ``keys`` None (the
    `queries`); ``scaled=False`` leaves out the layer's attention scale.
    """
    backend = backend_of(source)
    index = _layer(backend, layer)
    rows = _ids(backend, queries)
    request = {
        "view": "qk_block", "layer": index, "queries": rows, "keys": rows if keys is None else _ids(backend, keys),
        "scale": backend.facts.attn_scales[index] if scaled else 1.0,
    }
    if head is not None:
        request["head"] = _head(backend, head)
    return _one(backend, request)["block"].float()


def remote_positional_qk(
    source: Any, layer: int, head: int | None = None, *, positions: int, softmax: bool = True
) -> torch.Tensor:
    """A learned-position model's position-only attention ``[n_heads, positions, positions]`` float32 (``[positions,
    positions]`` for one `head`), as `analysis.positional_qk`: masked entries 0 (``softmax=False``: scaled scores,
    masked entries NaN). Downloads the lower triangles, ``heads · n (n + 1) / 2`` floats."""
    backend = backend_of(source)
    index = _layer(backend, layer)
    if WRITERS[_config(backend).model_type][1] is None:
        raise ValueError("remote_positional_qk needs learned absolute position embeddings (W_pos); this model has none")
    request: dict[str, Any] = {"view": "positional_qk", "layer": index, "positions": positions, "softmax": softmax,
                               "scale": backend.facts.attn_scales[index]}
    if head is not None:
        request["head"] = _head(backend, head)
    tril = _one(backend, request)["tril"].float()
    out = torch.full((*tril.shape[:-1], positions, positions), 0.0 if softmax else float("nan"))
    rows, cols = torch.tril_indices(positions, positions)
    out[..., rows, cols] = tril
    return out


def remote_ov_eigenvalues(source: Any, layer: int, head: int | None = None) -> torch.Tensor:
    """Token-basis OV eigenvalues complex128, largest magnitude first: ``[n_heads, d_head]`` (``[d_head]`` for one `head`),
    as `analysis.ov_eigenvalues`. Downloads ``heads · d_head`` complex numbers (and the layer's copying scores)."""
    backend = backend_of(source)
    values = _one(backend, {"view": "ov_eigenvalues", "layers": [_layer(backend, layer)]})["eigenvalues"][0]
    return values if head is None else values[_head(backend, head)]


def remote_copying_scores(source: Any) -> torch.Tensor:
    """Copying score of every head ``[n_layers, n_heads]`` float32, as `analysis.copying_scores`; downloads only them
    (the eigenvalues stay there: `remote_ov_eigenvalues` brings a layer's)."""
    backend = backend_of(source)
    layers = list(range(backend.facts.n_layers))
    return _one(backend, {"view": "ov_eigenvalues", "layers": layers, "eigenvalues": False})["copying"].float()


def remote_composition_scores(source: Any, kind: str | Sequence[str] = "K") -> Any:
    """Raw composition scores ``[n_layers, n_heads, n_layers, n_heads]`` float32 (NaN where undefined), as
    ``analysis.composition_scores(view, kind)``; several kinds (e.g. ``"QKV"``) give ``{kind: scores}`` from one trace.
    The baseline (``baseline=True`` locally) needs no weights: subtract ``analysis.composition_baseline(view)``.
    """
    kinds = [kind] if kind in ("Q", "K", "V") else list(kind)
    if not kinds or any(k not in ("Q", "K", "V") for k in kinds):
        raise ValueError(f"kind must be 'Q', 'K', 'V' or several of them; got {kind!r}")
    result = _one(source, {"view": "composition", "kinds": kinds})
    return result[kinds[0]] if kind in ("Q", "K", "V") else result


def remote_composition_term(
    source: Any, kind: str, first: Sequence[int], second: Sequence[int], rows: Any, columns: Any = None, *, scaled: bool = False
) -> dict[str, Any]:
    """The term `first` (h1) composing into `second` (h2) builds (`analysis.composition_term`), reduced:
    ``{"block": float32 [rows, columns], "eigenvalues": complex128 [d_head], "positivity": float}``.

    ``block`` equals ``composition_term(view, kind, first, second, scaled=scaled).block(rows, columns)``,
    ``eigenvalues`` its ``.eigenvalues()`` and ``positivity`` `analysis.composition_term_positivity`.
    """
    backend = backend_of(source)
    if kind not in ("Q", "K", "V"):
        raise ValueError(f"kind must be one of 'Q', 'K', 'V'; got {kind!r}")
    if scaled and kind == "V":
        raise ValueError("scaled=True divides Q and K terms by the attention scale; the V term is in logits")
    (l1, h1), (l2, h2) = first, second
    l1, l2, h1, h2 = _layer(backend, l1), _layer(backend, l2), _head(backend, h1), _head(backend, h2)
    if l1 >= l2:
        raise ValueError(f"composition needs the first head (h1) in an earlier layer than the second; got {first}, {second}")
    ids = _ids(backend, rows)
    request = {
        "view": "composition_term", "kind": kind, "first": (l1, h1), "second": (l2, h2), "rows": ids,
        "columns": ids if columns is None else _ids(backend, columns), "scale": backend.facts.attn_scales[l2] if scaled else 1.0,
    }
    result = _one(backend, request)
    result["block"] = result["block"].float()
    result["positivity"] = float(result["positivity"])
    return result


def remote_skip_trigrams(source: Any, layer: int, head: int, token: Any, k: int = 10) -> dict[str, Any]:
    """The fields of `analysis.skip_trigrams` (``source``, ``destinations``, ``destination_values``, ``outs``,
    ``out_values``) for one source `token`: two vector passes over the vocabulary there, ``4k`` numbers here."""
    backend = backend_of(source)
    index = _layer(backend, layer)
    s = _ids(backend, [token])[0]
    k = _k(backend, k)
    request = {"view": "skip_trigrams", "layer": index, "head": _head(backend, head), "source": s, "k": k,
               "scale": backend.facts.attn_scales[index]}
    return {"source": s, **_one(backend, request)}


def remote_skip_trigram_sources(source: Any, layer: int, head: int, k: int = 20, *, rows: int = 256) -> dict[str, Any]:
    """The fields of `analysis.skip_trigram_sources` (``sources``, ``strengths``, ``top_qk``, ``destinations``, ``top_ov``,
    ``outs``, each ``[k]``): two passes of ``d_vocab² · d_head`` there, `rows` rows at a time; ``6k`` numbers here."""
    backend = backend_of(source)
    index = _layer(backend, layer)
    request = {"view": "skip_trigram_sources", "layer": index, "head": _head(backend, head), "k": _k(backend, k),
               "rows": rows, "scale": backend.facts.attn_scales[index]}
    return _one(backend, request)


def remote_ov_top_k_accuracy(
    source: Any, layer: int | None = None, head: int | None = None, k: int | Sequence[int] = 1, *,
    heads: Sequence[tuple[int, int]] | None = None, rows: int = 256,
) -> float | tuple[float, ...]:
    """`analysis.ov_top_k_accuracy` there: the fraction of source tokens whose own logit is strictly above all but
    fewer than `k` entries of their full-OV row (of the sum over `heads`). Downloads one count (int64) per `k`."""
    backend = backend_of(source)
    pairs = [(layer, head)] if heads is None else list(heads)
    pairs = [(_layer(backend, a), _head(backend, b)) for a, b in pairs]
    ks = [k] if isinstance(k, int) else list(k)
    ks = [_k(backend, kk) for kk in ks]
    hits = _one(backend, {"view": "ov_top_k", "heads": pairs, "ks": ks, "rows": rows})["hits"]
    scores = tuple(int(h) / backend.facts.d_vocab for h in hits)
    return scores[0] if isinstance(k, int) else scores


def _k(backend: HuggingFaceBackend, k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int; got {k!r}")
    if not 1 <= k <= backend.facts.d_vocab:
        raise ValueError(f"k={k} is out of range: 1..{backend.facts.d_vocab} (d_vocab)")
    return k
