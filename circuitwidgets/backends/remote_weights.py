"""Weight views and logit attribution of a Hugging Face / nnsight model computed where its weights are (NDIF).

An nnsight model for NDIF holds only the shapes of its weights here (on ``meta``), so `Weights`
cannot be built. Its backend answers the protocol's weight-view requests in one nnsight trace
(``model.trace(one token, remote=backend.remote)``, stopped before the model runs further than it
needs) in which `circuitwidgets.raw_weights.TraceSource` reads the raw parameters from the model's
envoys and folds the norms as `Weights` does, and `circuitwidgets.weight_views.answer` (the same
code the local path runs, shipped by value) computes the views: only the reduced results are saved
and downloaded. Logit attribution runs `circuitwidgets.logit_terms.in_trace` in one trace of the
prompt. Each request adds its download to ``backend.bytes_received`` and one to ``backend.traces``.

Architectures: Llama-like (Llama, Mistral, Qwen2), GPT-2 and GPT-NeoX (`architecture`).

Example:
    >>> import circuitwidgets as cw
    >>> model, tokenizer = cw.demo.tiny_hf_model("gpt2")
    >>> view = cw.HFView(model, tokenizer=tokenizer, remote="local")
    >>> answers = trace_weight_views(view.backend, [{"view": "ov_block", "layer": 1, "sources": [5, 6], "outputs": [7]}])
    >>> answers[0]["block"].shape                         # [heads, source token, out token]
    torch.Size([4, 2, 1])
"""

from __future__ import annotations

from typing import Any

import torch

from .. import logit_terms, numerics, raw_weights, weight_views
from .traces import nnsight_module, saved_bytes, ship

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


def _config(backend: Any) -> Any:
    config = backend.hf_model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def architecture(backend: Any) -> dict[str, Any]:
    """The spec `raw_weights` reads the weights by: layout, norm kind and head counts; ValueError for others."""
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


def _parts(backend: Any) -> dict[str, Any]:
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


def _writers(backend: Any) -> dict[str, Any]:
    """The envoys a logit attribution reads: per layer its output projection and MLP; embeddings, final norm, unembedding."""
    parts = _parts(backend)
    kind = _config(backend).model_type
    mlp = WRITERS[kind][0]
    blocks = _envoy(backend.model(), ARCHITECTURES[kind][1])
    for index, layer in enumerate(parts["layers"]):
        layer.update(o=layer["proj"]["o"], mlp=_envoy(blocks[index], mlp))
    return parts


def _final_eps(backend: Any) -> float:
    final = ARCHITECTURES[_config(backend).model_type][5]
    module = backend.hf_model.get_submodule(final)
    return float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-5)))




def trace_weight_views(backend: Any, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answers to `requests` (`circuitwidgets.weight_views.VIEWS`) from one trace next to the weights; counts the
    download. Several views in one request (e.g. the OV block and the eigenvalues a widget shows together) cost
    one round trip."""
    spec = architecture(backend)
    nnsight = nnsight_module()
    parts = _parts(backend)
    tok = backend.tokens.tokenizer
    first = getattr(tok, "bos_token_id", None) if tok is not None else None
    ids = torch.tensor([[0 if first is None else int(first)]])
    with backend._running() as model:
        ship(nnsight)
        with model.trace(ids, remote=backend.remote, **backend.trace_options) as tracer:
            results = nnsight.save(weight_views.answer(raw_weights.TraceSource(spec, parts), requests))
            tracer.stop()
    backend.bytes_received += saved_bytes(results)
    backend.traces += 1
    return list(results)


#: Largest ``|sum of terms - logit|`` accepted from a trace, relative to ``1 + sum |terms|``: the terms of an
#: architecture that writes to the residual stream where the trace does not read would leave a gap far above it.
SUM_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8}


def trace_logit_terms(backend: Any, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]:
    """`circuitwidgets.logit_terms.in_trace` for one sequence `tokens` ``[1, seq]``, from one trace of it, reduced
    where the model runs; ValueError when the terms do not sum to the model's own logit (something writes to the
    residual stream where the trace does not read) or hold NaN/Inf."""
    spec = {**architecture(backend), "eps": _final_eps(backend)}
    parts = _writers(backend)
    nnsight = nnsight_module()
    with backend._running() as model:
        ship(nnsight)
        with model.trace(tokens.cpu(), remote=backend.remote, **backend.trace_options) as tracer:
            result = nnsight.save(logit_terms.in_trace(spec, parts, request))
            tracer.stop()
    backend.bytes_received += saved_bytes(result)
    backend.traces += 1
    _check_sum(dict(result), request, backend.facts.dtype)
    return dict(result)


def _check_sum(found: dict[str, Any], request: dict[str, Any], dtype: torch.dtype) -> None:
    known = torch.tensor([t is not None for t in request.get("known", [True] * len(request["targets"]))])
    heads, logits, others = found["heads"], found["logits"], list(found["others"].values())
    values = [heads.flatten(1), logits[:, None], *(v[:, None] for v in others)]
    if not bool(torch.isfinite(torch.cat(values, dim=1)[known]).all()):
        raise numerics.non_finite_error("the remote run's logit attribution", dtype)
    total = heads.sum((1, 2)) + sum(others, torch.zeros_like(logits))
    size = 1 + heads.abs().sum((1, 2)) + sum((v.abs() for v in others), torch.zeros_like(logits))
    gap = float(((total - logits).abs() / size)[known].max()) if bool(known.any()) else 0.0
    if gap > SUM_TOLERANCE.get(dtype, 3e-2):
        raise ValueError(
            f"the terms of this model's logit attribution do not sum to its logit (relative gap {gap:.2g}): it writes to "
            "the residual stream somewhere the remote attribution does not read; load the model here to attribute it"
        )
