"""Feature-level attention (`circuitwidgets.feature_terms`) answered where the model runs: here, or in a trace.

`answer_here` gathers what the split reads from one hook-point run of the prompt (a TransformerLens model, or
the bridge over a local Hugging Face model's parameters): the head's input residual and the norm's scale up to
the destination, what each dictionary reads, the head's queries, keys and values (after the model's own
rotation, with the rotary tables it used), its output, and for logits the final norm's scale. The run stops
after the layer (or at the end, for logits), and on a long prompt attends memory-efficiently where the model
can (`circuitwidgets.backends.efficient`). `answer_in_trace` gathers the same inside one nnsight trace next to a
remote model's weights (`circuitwidgets.backends.remote_weights`' envoys), where `feature_terms.answer` runs too:
only the terms, top pairs and marginals come back. Either way the answer is refused, with the reason, when the
terms do not sum to the model's own score (or output): something this split does not know (a norm on the
queries, soft-capping, an attention sink) is then at work.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from .. import feature_terms
from ..numerics import all_finite
from . import remote_weights
from .efficient import efficient_reason, memory_efficient
from .hooked import HookedRuns, _Enough, hook_point, past_eager
from .protocol import Missing
from .traces import nnsight_module, saved_bytes, ship
from .weights import Weights, expand_kv

#: Largest gap `feature_terms.answer` reports (relative), by the model's dtype; half precision rounds every step.
GAP_TOLERANCE = {torch.float32: feature_terms.TOLERANCE, torch.float64: 1e-8}
LOW_PRECISION_GAP = 3e-2


def checked(answer: dict[str, Any], dtype: torch.dtype, what: str) -> dict[str, Any]:
    """`answer`, once its terms are known to sum to the model's own value (``gap``); ValueError saying why not."""
    allowed = GAP_TOLERANCE.get(dtype, LOW_PRECISION_GAP)
    if answer.get("pattern_gap", 0.0) > allowed:
        raise ValueError(
            f"the pattern rebuilt from this head's queries and keys does not give its output (relative gap "
            f"{answer['pattern_gap']:.2g}): its attention has a term the split does not know (soft-capping, a sliding "
            "window, ALiBi, a sink); feature-level OV cannot be computed for it"
        )
    if not answer["gap"] <= allowed:
        raise ValueError(
            f"the {what} split does not sum to the model's own value (relative gap {answer['gap']:.2g}, allowed "
            f"{allowed:.2g}): this model computes its attention with something the split does not know (a norm on "
            "the queries and keys, an unknown rotation, soft-capping)"
        )
    return answer


def _roles(request: dict[str, Any]) -> dict[str, Any]:
    """``{role: site}`` of what each dictionary of `request` reads."""
    return dict(request["sites"])


def _tables(runs: HookedRuns, block: int, seen: dict[str, torch.Tensor], n: int) -> tuple[Any, Any, str]:
    """``(cos, sin, pairs)`` ``[n, rotary_dim]`` of the rotation block `block` applied in this run, or Nones."""
    if "cos" in seen:  # a bridge over a Hugging Face model: the tables it was handed (rotate_half)
        return seen["cos"][:n].float(), seen["sin"][:n].float(), "half"
    attn = runs._model().blocks[block].attn
    if isinstance(getattr(attn, "rotary_cos", None), torch.Tensor):  # TransformerLens 2.x
        adjacent = bool(getattr(runs._model().cfg, "rotary_adjacent_pairs", False))
        return attn.rotary_cos[:n].float(), attn.rotary_sin[:n].float(), "adjacent" if adjacent else "half"
    rotary = getattr(getattr(attn, "original_component", None), "rotary", None)
    if rotary is not None and isinstance(getattr(rotary, "cos_cached", None), torch.Tensor):  # the native bridge
        return rotary.cos_cached[:n].float(), rotary.sin_cached[:n].float(), "adjacent"
    return None, None, "half"


def _gather(runs: HookedRuns, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]:
    """One run of `tokens` ``[1, seq]`` keeping what `feature_terms.answer` reads (see the module docstring)."""
    facts = runs.facts
    kind, d = request["kind"], int(request["destination"])
    n = d + 1
    roles = _roles(request)
    whole = bool(request.get("cards"))  # hover cards: a feature's top positions in the whole prompt
    roles_at: dict[str, list[tuple[str, int | None]]] = {}  # hook point -> [(role, rows kept)]
    required: set[str] = set()

    def keep(role: str, where: Any, rows: int | None, needed: bool = True) -> None:
        name = hook_point(where)
        roles_at.setdefault(name, []).append((role, rows))
        if needed:
            required.add(name)

    for role, site in roles.items():
        keep(role, site, None if whole or kind == "heads" else n)
    last = max(int(site[1]) for site in roles.values()) if roles else 0
    if kind != "heads":
        block = int(request["layer"])
        last = max(last, block)
        attn = f"blocks.{block}.attn"
        for role, word in (("x", "resid_pre"), ("q", "q"), ("k", "k"), ("v", "v"), ("z", "z")):
            keep(role, (word, block), n)
        for role, name in (("sigma", f"blocks.{block}.ln1.hook_scale"), ("rot_q", f"{attn}.hook_rot_q"),
                           ("rot_k", f"{attn}.hook_rot_k"), ("cos", f"{attn}.hook_cos"), ("sin", f"{attn}.hook_sin")):
            keep(role, name, n, needed=False)
        if request.get("read") == "unembed":
            last = facts.n_layers - 1
            if facts.normalization_type:  # the final norm's scale, frozen at the destination
                keep("final", "ln_final.hook_scale", None)
            else:
                keep("end", ("resid_post", last), n)
    seen: dict[str, Any] = {}

    def keeper(name: str) -> Any:
        def hook(tensor: torch.Tensor, hook: Any = None) -> None:
            value = tensor.detach()[0]
            for role, rows in roles_at[name]:
                seen[role] = value if rows is None else value[:rows]
            if all(roles_at[w][0][0] in seen for w in required):
                raise _Enough

        return hook

    with runs.running() as model:
        present = set(model.hook_dict)
        hooks = [(name, keeper(name)) for name in roles_at if name in present or name in required]
        efficient = past_eager(facts.n_heads, tokens.shape[1]) and not efficient_reason(model, last)
        with memory_efficient(model, last, {}) if efficient else contextlib.nullcontext(), contextlib.suppress(_Enough):
            model.run_with_hooks(tokens, fwd_hooks=hooks, return_type=None)
    missing = [name for name in required if roles_at[name][0][0] not in seen]
    if missing:
        raise ValueError(f"the model never reached hook point(s) {missing}")
    for role, value in seen.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not all_finite(value):
            raise ValueError(f"activation {role} of this run contains NaN/Inf values")
    return seen


def _head_run(runs: HookedRuns, seen: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """`feature_terms.answer`'s ``run`` from the activations `seen` of one head."""
    facts = runs.facts
    block, head, d = int(request["layer"]), int(request["head"]), int(request["destination"])
    n = d + 1
    group = facts.n_heads // facts.n_kv_heads
    q = seen["q"][:, head].float()
    k = seen["k"][:, head // group].float()
    v = seen["v"][:, head // group].float()
    cos, sin, pairs = _tables(runs, block, seen, n)
    if "rot_q" in seen and "rot_k" in seen:
        q_post, k_post = seen["rot_q"][:, head].float(), seen["rot_k"][:, head // group].float()
    elif cos is not None:
        q_all = seen["q"].float().transpose(0, 1)
        k_all = expand_kv(seen["k"].float(), facts.n_heads, "keys", dim=1).transpose(0, 1)
        rotated = runs._own_rotation(block, q_all, k_all)
        if rotated[0] is q_all:  # no rotation of its own to call: the tables, with the convention they came with
            q_post, k_post = feature_terms.rope(q, cos, sin, pairs), feature_terms.rope(k, cos, sin, pairs)
        else:
            q_post, k_post = rotated[0][head], rotated[1][head]
    else:
        if facts.positional_embedding_type == "rotary":
            raise ValueError("this rotary model's position rotation could not be read from its run (no rotary tables "
                             "found): the feature split needs the queries and keys as the model rotates them")
        q_post, k_post = q, k
    if cos is not None and not torch.allclose(feature_terms.rope(q[d], cos[d], sin[d], pairs), q_post[d], rtol=1e-3, atol=1e-4):
        raise ValueError("this model rotates its queries in a way the split does not know (its rotary tables do not give "
                         "its rotated queries)")
    sigma = seen.get("sigma")
    if sigma is None and facts.normalization_type:
        raise ValueError(f"the {facts.normalization_type} norm before block {block}'s attention exposes no scale "
                         "(ln1.hook_scale): the split freezes it at this run's value")
    run = {
        "x": seen["x"].float(),
        "inputs": {role: seen[role].float().reshape(seen[role].shape[0], -1) for role in request["sites"]},
        "sigma": None if sigma is None else sigma.reshape(-1).float(), "cos": cos, "sin": sin, "pairs": pairs,
        "q": q_post[d], "k": k_post, "v": v, "z": seen["z"][d].float(),
    }
    if "final" in seen:
        run["final_scale"] = float(seen["final"].reshape(-1)[d])
    return run


def _head_weights(runs: HookedRuns, weights: Weights, request: dict[str, Any]) -> dict[str, Any]:
    facts = runs.facts
    block, head = int(request["layer"]), int(request["head"])
    li = facts.attn_layers.index(block)
    found = {name: getattr(weights, name)[li, head] for name in ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O")}
    if request.get("read") == "resid":  # an output dictionary reads the residual stream as the model writes it
        found["W_O_raw"] = runs._model().blocks[block].attn.W_O.detach()[head]
    if request.get("read") == "unembed" or request.get("cards"):
        found["W_U"] = weights.W_U
    return found


def answer_here(
    runs: HookedRuns | Missing, weights: Weights | Missing, tokens: torch.Tensor, request: dict[str, Any]
) -> dict[str, Any]:
    """`feature_terms.answer` to `request` from one run of `tokens` here; ValueError saying why where it cannot be."""
    for part in (runs, weights):
        if isinstance(part, Missing):
            raise ValueError(part.reason.replace("{what}", "feature-level attention"))
    assert isinstance(runs, HookedRuns) and isinstance(weights, Weights)
    seen = _gather(runs, tokens, request)
    if request["kind"] == "heads":
        z = seen["heads"][int(request["destination"])]
        run = {"z": z.float().reshape(runs.facts.n_heads, -1)}
        return feature_terms.answer(request, run, {})
    run = _head_run(runs, seen, request)
    head_weights = _head_weights(runs, weights, request)
    what = "score's" if request["kind"] == "qk" else "output's"
    return checked(feature_terms.answer(request, run, head_weights), runs.facts.dtype, what)



#: Sites a trace reads (block inputs and outputs, the output projection's input and output): `feature_terms.in_trace`.
TRACE_SITES = ("resid_pre", "resid_post", "z", "attn_out")


def trace_reason(backend: Any) -> str:
    """Why feature-level attention cannot be computed in a trace of `backend`'s model ('' when it can)."""
    try:
        remote_weights.architecture(backend)
    except ValueError as exc:
        return str(exc).replace("remote weight views", "feature-level attention in a trace")
    return ""


def _eps(module: Any) -> float:
    return float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-5)))


def answer_in_trace(backend: Any, tokens: torch.Tensor, request: dict[str, Any]) -> dict[str, Any]:
    """`feature_terms.answer` to `request` from one trace of `tokens` next to the weights (`feature_terms.in_trace`):
    the dictionaries travel with the request, the terms, top pairs and marginals come back."""
    spec = remote_weights.architecture(backend)
    for role, (word, layer) in request["sites"].items():
        if word not in TRACE_SITES:
            raise ValueError(f"a trace reads {', '.join(TRACE_SITES)}; the {role} dictionary reads {word} of block {layer}: "
                             "load the model here for that site")
    kind = remote_weights._config(backend).model_type
    _, layers_path, attn_path, _, ln1_path, _ = remote_weights.ARCHITECTURES[kind]
    parts = remote_weights._parts(backend)
    root = backend.model()
    blocks = remote_weights._envoy(root, layers_path)
    for index, layer in enumerate(parts["layers"]):
        layer.update(block=blocks[index], attention=remote_weights._envoy(blocks[index], attn_path))
    hf = backend.hf_model
    first = hf.get_submodule(f"{layers_path}.0.{ln1_path}")
    spec = {**spec, "eps": _eps(first), "final_eps": remote_weights._final_eps(backend)}
    nnsight = nnsight_module()
    to_end = request.get("read") == "unembed"
    with backend._running() as model:
        ship(nnsight)
        with model.trace(tokens.cpu(), remote=backend.remote, **backend.trace_options) as tracer:
            result = nnsight.save(feature_terms.in_trace(spec, parts, request))
            if not to_end:
                tracer.stop()
    backend.bytes_received += saved_bytes(result)
    backend.traces += 1
    result = dict(result)
    if request["kind"] == "heads":
        return result
    return checked(result, backend.facts.dtype, "score's" if request["kind"] == "qk" else "output's")
