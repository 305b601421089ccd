"""Runs through TransformerLens hook points: patterns, values, residual terms and long-prompt parts.

`HookedRuns` serves the TransformerLens backend directly and the Hugging Face backend through a
TransformerLens bridge over the same parameters. Each run holds the model's lock, runs in eval mode
under ``no_grad`` (every module's mode restored after) and stops as soon as it has what it needs.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from .. import logit_terms
from ..numerics import all_finite, non_finite_error, tensors_in
from ..sites import is_site
from .efficient import OnLayer, efficient_reason, memory_efficient
from .protocol import Facts, Missing
from .resume import Resumable, gradient_run, record
from .weights import Weights, expand_kv

REQUIRED = ("cfg", "blocks", "W_E", "W_U", "run_with_cache")
_CFG_FIELDS = ("n_layers", "n_heads", "d_model", "d_head", "d_vocab", "n_ctx")


#: A site's word (`circuitwidgets.sites`) -> its TransformerLens hook point, ``{layer}`` its block index.
HOOK_POINTS = {
    "z": "blocks.{layer}.attn.hook_z",
    "q": "blocks.{layer}.attn.hook_q",
    "k": "blocks.{layer}.attn.hook_k",
    "v": "blocks.{layer}.attn.hook_v",
    "pattern": "blocks.{layer}.attn.hook_pattern",
    "resid_pre": "blocks.{layer}.hook_resid_pre",
    "resid_mid": "blocks.{layer}.hook_resid_mid",
    "resid_post": "blocks.{layer}.hook_resid_post",
    "attn_out": "blocks.{layer}.hook_attn_out",
    "mlp_out": "blocks.{layer}.hook_mlp_out",
}


def hook_point(where: Any) -> str:
    """The TransformerLens hook point of `where`: a site ``(word, layer)``, or a hook point's own name (kept).

    Example:
        >>> hook_point(("z", 1)), hook_point("hook_embed")
        ('blocks.1.attn.hook_z', 'hook_embed')
    """
    if is_site(where):
        return HOOK_POINTS[where[0]].format(layer=where[1])
    if not isinstance(where, str):
        raise TypeError(f"a hook point is a site (word, layer) or a hook point's name; got {where!r}")
    return where


def final_norm_of(normalization_type: str | None) -> str | None:
    """How the residual stream is normalised before the unembedding: "LN", "RMS" or None.

    Example:
        >>> final_norm_of("LNPre"), final_norm_of("RMS"), final_norm_of(None)
        ('LN', 'RMS', None)
    """
    kind = (normalization_type or "").upper()
    return "LN" if kind.startswith("LN") else "RMS" if kind.startswith("RMS") else None


def terms_here(
    runs: HookedRuns | Missing, weights: Weights | Missing, tokens: torch.Tensor, request: dict[str, Any], residual: Any
) -> dict[str, Any]:
    """A logit attribution (`circuitwidgets.logit_terms`) from a run here: of `residual` (`HookedRuns.residual_terms`
    of `tokens`) when given, else of one run of `tokens`."""
    for part in (runs, weights):
        if isinstance(part, Missing):
            raise ValueError(part.reason.replace("{what}", "logit attribution"))
    assert isinstance(runs, HookedRuns) and isinstance(weights, Weights)
    norm = final_norm_of(runs.facts.normalization_type)
    if residual is None:
        learned = weights.W_pos is not None and runs.facts.positional_embedding_type in ("standard", "unknown")
        residual = runs.residual_terms(tokens, norm, learned)
    return logit_terms.from_residual(weights, residual, request, norm)


def describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def is_transformer_lens_model(model: Any) -> bool:
    return all(hasattr(model, name) for name in REQUIRED)


def facts_of(model: Any) -> Facts:
    """`Facts` from a TransformerLens config (per-layer scale from ``scale_attn_by_inverse_layer_idx``)."""
    cfg = model.cfg
    for field in _CFG_FIELDS:
        if not isinstance(getattr(cfg, field, None), int):
            raise TypeError(f"model.cfg.{field} must be an int; got {getattr(cfg, field, None)!r}")
    attn_layers = tuple(i for i, block in enumerate(model.blocks) if getattr(block, "attn", None) is not None)
    if not attn_layers:
        raise ValueError(f"model {describe(model)} has no attention layers to analyse")
    scale = getattr(cfg, "attn_scale", -1.0)
    use_scale = getattr(cfg, "use_attn_scale", True) and isinstance(scale, (int, float)) and scale > 0
    base = float(scale) if use_scale else math.sqrt(cfg.d_head)
    by_layer = bool(getattr(cfg, "scale_attn_by_inverse_layer_idx", False))
    embed = model.W_E
    return Facts(
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        n_kv_heads=int(getattr(cfg, "n_key_value_heads", None) or cfg.n_heads),
        d_model=cfg.d_model,
        d_head=cfg.d_head,
        d_vocab=cfg.d_vocab,
        n_ctx=cfg.n_ctx,
        attn_layers=attn_layers,
        attn_scales=tuple(base * (layer + 1) if by_layer else base for layer in attn_layers),
        positional_embedding_type=str(getattr(cfg, "positional_embedding_type", None) or "unknown"),
        normalization_type=getattr(cfg, "normalization_type", None),
        attn_only=bool(getattr(cfg, "attn_only", False)),
        device=embed.device,
        dtype=embed.dtype,
    )


#: One layer's float32 patterns above which `HookedRuns.residual_terms` runs memory-efficiently (where it can): 64 MB,
#: e.g. 12 heads from about 1 200 tokens. Shorter prompts keep the model's own eager attention (bit for bit).
EAGER_BYTES = 1 << 26


def past_eager(n_heads: int, n: int) -> bool:
    """True when one layer's float32 patterns of `n` tokens exceed `EAGER_BYTES` (the run then goes memory-efficiently)."""
    return n_heads * n * n * 4 > EAGER_BYTES


class _Enough(Exception):
    """Raised by `HookedRuns.run_until`'s last hook: the run has computed all it needs."""


def checked_reduction(layer: int, answer: dict[str, Any], dtype: torch.dtype) -> dict[str, Any]:
    """`answer` (an `in_trace.reduce_call` result) without its ``"mismatch"``, once that and its values pass:
    ValueError when the rebuilt weights do not reproduce the attention's own output (a term the rebuild does
    not know) or hold NaN/Inf."""
    error, tolerance = answer.pop("mismatch")
    if not float(error) <= float(tolerance):
        raise ValueError(
            f"the attention weights rebuilt for layer {layer} do not reproduce the model's own attention output "
            f"(relative difference {float(error):.2g}, allowed {float(tolerance):.2g} in {dtype}): this "
            "attention has a term the rebuild does not know (e.g. attention sinks or ALiBi): its patterns cannot be shown"
        )
    for value in tensors_in(answer):
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise non_finite_error(f"attention patterns of layer {layer} contain NaN/Inf values", dtype)
    return answer


class HookedRuns:
    """Hook-point runs of a TransformerLens model (a bridge or a HookedTransformer) read through `model()`.

    `modules()` lists every module whose training mode a run sets to eval (and restores after).
    Tokens are ``[batch, seq]`` ids already validated on the model's device.
    """

    def __init__(
        self,
        model: Callable[[], Any],
        facts: Facts,
        lock: threading.RLock,
        modules: Callable[[], list],
        hooks: Sequence[tuple[str, Callable[..., Any]]] = (),
    ):
        self._model = model
        self.facts = facts
        self.lock = lock
        self._modules = modules
        #: ``(hook point, function)`` pairs active during every run of these runs (an ablation).
        self.hooks = tuple((hook_point(where), fn) for where, fn in hooks)

    def with_hooks(self, hooks: Sequence[tuple[Any, Callable[..., Any]]]) -> HookedRuns:
        """The same runs with `hooks` (``(site or hook point, function)``) added to every run (removed after each;
        the model keeps none)."""
        return HookedRuns(self._model, self.facts, self.lock, self._modules, (*self.hooks, *hooks))

    def _error(self, what: str) -> ValueError:
        return non_finite_error(what, self.facts.dtype)

    def error(self, what: str) -> ValueError:
        """The error of a run whose `what` (activations, logits) holds NaN/Inf, with the likely cause."""
        return self._error(what)

    @staticmethod
    def hook_name(where: Any) -> str:
        """The hook point of a site ``(word, layer)`` (or a hook point's own name, kept): `hook_point`."""
        return hook_point(where)

    @contextlib.contextmanager
    def running(self, grad: bool = False) -> Iterator[Any]:
        """Hold the model's lock, in eval mode and under ``no_grad`` (with `grad`, gradients on), for one run; restore
        every module's mode after."""
        with self.lock:
            model = self._model()
            modules = self._modules()
            modes = [m.training for m in modules]
            training = any(modes)
            if training:
                model.eval()
            try:
                hooked = model.hooks(fwd_hooks=list(self.hooks)) if self.hooks else contextlib.nullcontext()
                with torch.set_grad_enabled(grad), hooked:
                    yield model
            finally:
                if training:
                    for module, mode in zip(modules, modes, strict=True):
                        module.training = mode

    def run_until(
        self,
        tokens: torch.Tensor,
        wanted: Mapping[Any, Callable[[torch.Tensor], Any] | None],
        optional: Mapping[Any, Callable[[torch.Tensor], Any] | None] | None = None,
    ) -> dict[Any, Any]:
        """Run the model until every hook point in `wanted` has fired, then stop (only the work needed).

        ``wanted`` maps a site ``(word, layer)`` or a hook name to a function of its activation (None:
        keep the activation); returns ``{key: result}`` under the keys given, with those of the `optional`
        hook points that fired before the run stopped. The run stops by raising inside the last hook:
        neither later blocks nor the unembedding are computed.
        """
        names = {hook_point(key): key for key in [*(optional or {}), *wanted]}
        results = self._run_until(tokens, {hook_point(k): f for k, f in wanted.items()},
                                  {hook_point(k): f for k, f in (optional or {}).items()})
        return {names[name]: value for name, value in results.items()}

    def _run_until(
        self,
        tokens: torch.Tensor,
        wanted: Mapping[str, Callable[[torch.Tensor], Any] | None],
        optional: Mapping[str, Callable[[torch.Tensor], Any] | None],
    ) -> dict[str, Any]:
        results: dict[str, Any] = {}
        every = {**optional, **wanted}

        def keeper(name: str) -> Callable[..., None]:
            def hook(tensor: torch.Tensor, hook: Any = None) -> None:
                reduce = every[name]
                results[name] = tensor.detach() if reduce is None else reduce(tensor.detach())
                if all(n in results for n in wanted):
                    raise _Enough

            return hook

        with self.running() as model, contextlib.suppress(_Enough):
            model.run_with_hooks(tokens, fwd_hooks=[(name, keeper(name)) for name in every], return_type=None)
        missing = [name for name in wanted if name not in results]
        if missing:
            raise ValueError(f"the model never reached hook point(s) {missing}")
        return results

    def _check_patterns(self, layers: Sequence[int], patterns: Sequence[torch.Tensor]) -> None:
        """Raise ValueError naming the layers whose `patterns` hold NaN/Inf (a NaN/Inf row's sum is not finite)."""
        bad = [layer for layer, p in zip(layers, patterns, strict=True) if not bool(torch.isfinite(p.sum(-1)).all())]
        if bad:
            more = f" (and so do those of layers {bad[1:]})" if len(bad) > 1 else ""
            raise self._error(f"attention patterns of layer {bad[0]} contain NaN/Inf values{more}")

    def patterns_with(
        self, tokens: torch.Tensor, layers: Sequence[int], extra: list[str]
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The chosen layers' patterns ``[batch, len(layers), n_heads, query, key]`` (float32) and the activations at `extra`,
        from one run that caches only those; NaN/Inf raise ValueError naming the layer or activation."""
        names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers] + extra
        cache = self.run_until(tokens, {name: None for name in names})
        patterns = torch.stack([cache[name] for name in names[: len(layers)]], dim=1).float()
        self._check_patterns(layers, patterns.unbind(1))
        activations = [cache[name] for name in extra]
        for name, tensor in zip(extra, activations, strict=True):
            if not all_finite(tensor):
                raise self._error(f"activation {name} contains NaN/Inf values")
        return patterns, activations

    def patterns_and_values(self, tokens: torch.Tensor, layers: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Patterns and value vectors ``[batch, len(layers), seq, n_heads, d_head]`` (K/V groups expanded) from one run."""
        values_at = [f"blocks.{layer}.attn.hook_v" for layer in layers]
        patterns, values = self.patterns_with(tokens, layers, values_at)
        expanded = [expand_kv(v, self.facts.n_heads, "values", dim=2) for v in values]
        return patterns, torch.stack(expanded, dim=1).float()

    def embedding_and_patterns(self, tokens: torch.Tensor, layers: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The residual stream entering block 0 ``[batch, seq, d_model]`` and the patterns, from one run."""
        patterns, (x0,) = self.patterns_with(tokens, layers, ["blocks.0.hook_resid_pre"])
        return x0.float(), patterns

    def memory_reason(self, last: int) -> str:
        """Why a run up to block `last` must hold each layer's ``n x n`` patterns ('' when it need not:
        `circuitwidgets.backends.efficient`)."""
        with self.running() as model:  # (with this run's own hooks on)
            return efficient_reason(model, last)

    def run_efficient(self, tokens: torch.Tensor, on_layer: Mapping[int, OnLayer]) -> bool:
        """One run whose attention never holds an ``n x n`` matrix, handing each block of `on_layer` its queries,
        keys, values and output (`circuitwidgets.backends.efficient.OnLayer`); it stops after the last of them.
        False, with nothing run, when the model cannot (`memory_reason`)."""
        last = max(on_layer)

        def stop_after(block: int) -> OnLayer:
            def on(*inputs: Any) -> None:
                on_layer[block](*inputs)
                if block == last:
                    raise _Enough

            return on

        with self.running() as model:
            if efficient_reason(model, last):
                return False
            with memory_efficient(model, last, {block: stop_after(block) for block in on_layer}), contextlib.suppress(_Enough):
                model.run_with_hooks(tokens, fwd_hooks=[], return_type=None)
        return True

    def attention_inputs(self, tokens: torch.Tensor, block: int, on_inputs: Callable[..., Any]) -> Any:
        """``on_inputs(q, k, v, out, scaling)`` of one layer of one sequence (``[n_heads, seq, d_head]`` float32, K/V
        groups expanded), from a memory-efficient run that stops there (`run_efficient`); None when the model's
        attention cannot run so (`memory_reason`: call `attention_parts` instead)."""
        heads, kept = self.facts.n_heads, []

        def grab(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, scaling: float) -> None:
            k, v = (expand_kv(x[0].float(), heads, "keys", dim=0) for x in (k, v))
            kept.append(on_inputs(q[0].float(), k, v, out[0].float(), scaling))

        return kept[0] if self.run_efficient(tokens, {block: grab}) else None

    def attention_parts(
        self, tokens: torch.Tensor, block: int, on_pattern: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any]
    ) -> Any:
        """``on_pattern(pattern, q, k)`` of one layer of one sequence, inside one run that stops there.

        ``pattern`` ``[n_heads, query, key]`` float32 is handed over inside the run and not kept;
        ``q`` and ``k`` ``[n_heads, seq, d_head]`` float32 are the layer's queries and keys after
        position rotation (from the rotation hook points where they fire, TransformerLens 2.x; else
        through the attention module's own ``apply_rope``: a TransformerLens 4.3 native bridge lists
        ``hook_rot_q`` but never fires it), grouped K/V heads expanded.
        """
        attn = f"blocks.{block}.attn"
        rotary = f"{attn}.hook_rot_q" in self._model().hook_dict
        seen: dict[str, torch.Tensor] = {}

        def keep(name: str, expand: bool) -> Callable[[torch.Tensor], None]:
            def store(tensor: torch.Tensor) -> None:
                x = tensor[0].float()  # [seq, heads, d_head]
                seen[name] = (expand_kv(x, self.facts.n_heads, "keys", dim=1) if expand else x).transpose(0, 1).contiguous()

            return store

        def reduce(pattern: torch.Tensor) -> Any:
            pattern = pattern[0].float()
            if not bool(torch.isfinite(pattern.sum(-1)).all()):  # a sum of NaN or Inf is not finite; 10x faster
                raise self._error(f"attention patterns of layer {block} contain NaN/Inf values")
            if "rot_k" in seen:
                q, k = seen["rot_q"], seen["rot_k"]
            else:
                q, k = self._own_rotation(block, seen["q"], seen["k"]) if rotary else (seen["q"], seen["k"])
            return on_pattern(pattern, q, k)

        wanted = {f"{attn}.hook_q": keep("q", False), f"{attn}.hook_k": keep("k", True), f"{attn}.hook_pattern": reduce}
        rotation = {f"{attn}.hook_rot_q": keep("rot_q", False), f"{attn}.hook_rot_k": keep("rot_k", True)} if rotary else {}
        return self.run_until(tokens, wanted, rotation)[f"{attn}.hook_pattern"]

    def _own_rotation(self, block: int, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``q``, ``k`` ``[heads, seq, d_head]`` rotated by the attention module's own ``apply_rope(q, k)`` where it has one."""
        for module in self._model().blocks[block].attn.modules():
            apply = getattr(module, "apply_rope", None)
            if callable(apply):
                rotated_q, rotated_k = apply(q[None], k[None])
                return rotated_q[0], rotated_k[0]
        return q, k

    def run_with(
        self, tokens: torch.Tensor, hooks: Sequence[tuple[Any, Callable[..., Any]]], keep: Sequence[Any] = ()
    ) -> tuple[torch.Tensor, dict[Any, torch.Tensor]]:
        """Logits ``[batch, seq, d_vocab]`` (float32) of one run with `hooks` (``(site or hook point, function)``,
        as TransformerLens ``fwd_hooks``: a function may return a replacement activation) and the activations at
        the sites or hook points in `keep` (keyed as given), as they leave those hooks; the hooks are removed
        after the run."""
        names = {hook_point(where): where for where in keep}
        logits, kept = self._run_with(tokens, [(hook_point(where), fn) for where, fn in hooks], list(names))
        return logits, {names[name]: value for name, value in kept.items()}

    def _run_with(
        self, tokens: torch.Tensor, hooks: Sequence[tuple[str, Callable[..., Any]]], keep: Sequence[str]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        kept: dict[str, torch.Tensor] = {}

        def keeper(name: str) -> Callable[..., None]:
            def hook(tensor: torch.Tensor, hook: Any = None) -> None:
                kept[name] = tensor.detach()

            return hook

        with self.running() as model:
            logits = model.run_with_hooks(tokens, fwd_hooks=[*hooks, *((name, keeper(name)) for name in keep)])
        if not bool(torch.isfinite(logits.sum(-1, dtype=torch.float32)).all()):  # a NaN/Inf row's sum is not finite
            raise self._error("logits contain NaN/Inf values")
        missing = [name for name in keep if name not in kept]
        if missing:
            raise ValueError(f"the model never reached hook point(s) {missing}")
        return logits.float(), kept

    def record(self, tokens: torch.Tensor, keep: Sequence[Any] = (), copies: int = 1) -> Resumable:
        """One run of `tokens` recorded so that later runs restart at any block (`circuitwidgets.backends.resume`),
        keeping the activations at `keep`; ResumeError when restarting does not reproduce the model's logits."""
        return record(self, tokens, keep, copies)

    def gradients(
        self, tokens: torch.Tensor, sites: Sequence[Any], objective: Callable[[torch.Tensor], torch.Tensor],
        drop: Sequence[int] = (),
    ) -> dict[str, Any]:
        """Activations at `sites` and the gradients of ``objective(logits).sum()`` there, from one run with gradients
        (`circuitwidgets.backends.resume.gradient_run`; `drop`: blocks whose writes' backward pass is dropped)."""
        return gradient_run(self, tokens, sites, objective, drop)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Model logits ``[batch, seq, d_vocab]``."""
        with self.running() as model:
            logits = model(tokens)
        if not all_finite(logits):
            raise self._error("logits contain NaN/Inf values")
        return logits

    def residual_terms(
        self, tokens: torch.Tensor, final_norm: str | None, learned_positions: bool, patterns: Sequence[int] = ()
    ) -> dict[str, Any]:
        """The pieces of the residual stream reaching the final norm, from one run of one sequence (float32);
        see `circuitwidgets.model.ModelView.residual_terms`. With `patterns` (block indices of attention
        layers) the same run also returns those layers' attention patterns, ``"patterns"``: a list of
        ``[n_heads, query, key]`` float32, one per layer, as `patterns_with` computes them."""
        facts = self.facts
        last = f"blocks.{facts.n_layers - 1}.hook_resid_post"
        names = ["hook_embed", last] + (["hook_pos_embed"] if learned_positions else [])
        names += [f"blocks.{layer}.attn.hook_z" for layer in facts.attn_layers]
        if not facts.attn_only:
            names += [f"blocks.{layer}.hook_mlp_out" for layer in range(facts.n_layers)]
        if final_norm is not None:
            names.append("ln_final.hook_scale")
        pattern_names = [f"blocks.{layer}.attn.hook_pattern" for layer in patterns]
        wanted = set(names) | set(pattern_names)
        with self.running() as model:
            # no pattern asked for, on a long prompt: no layer need hold its n x n scores (where the model can)
            last_block, n = facts.n_layers - 1, tokens.shape[-1]
            efficient = not pattern_names and past_eager(facts.n_heads, n) and not efficient_reason(model, last_block)
            with memory_efficient(model, last_block, {}) if efficient else contextlib.nullcontext():
                logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in wanted)
        if not all_finite(logits):
            raise self._error("logits contain NaN/Inf values")
        for name in names:
            if name in cache and not all_finite(cache[name]):
                raise self._error(f"activation {name} contains NaN/Inf values")
        kind = f"{type(model).__module__}.{type(model).__qualname__}"
        if last not in cache:
            raise ValueError(f"{kind} exposes no {last}: cannot read the final residual stream")
        z = [cache[f"blocks.{layer}.attn.hook_z"][0] for layer in facts.attn_layers]
        scale = cache["ln_final.hook_scale"][0].reshape(-1).float() if "ln_final.hook_scale" in cache else None
        if final_norm is not None and scale is None:
            raise ValueError(f"{kind} has a final {final_norm} but exposes no ln_final.hook_scale")
        result: dict[str, Any] = {}
        if pattern_names:
            missing = [name for name in pattern_names if name not in cache]
            if missing:
                raise ValueError(f"the model never reached hook point(s) {missing}")
            layers = [cache[name][0].float() for name in pattern_names]  # (not stacked: no copy of every layer)
            self._check_patterns(patterns, layers)
            result["patterns"] = layers
        return {
            **result,
            "embed": cache["hook_embed"][0].float(),
            "pos_embed": cache["hook_pos_embed"][0].float() if "hook_pos_embed" in cache else None,
            "z": expand_kv(torch.stack(z), facts.n_heads, "z", dim=2).float(),
            "mlp_out": {
                layer: cache[f"blocks.{layer}.hook_mlp_out"][0].float()
                for layer in range(facts.n_layers)
                if f"blocks.{layer}.hook_mlp_out" in cache
            },
            "scale": scale,
            "resid": cache[last][0].float(),
            "logits": logits[0].float(),
        }
