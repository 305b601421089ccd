"""Runs of a TransformerLens bridge whose attention layers never hold an ``n x n`` matrix.

A bridge computes attention eagerly (scores, then the pattern its ``hook_pattern`` sees): 12 heads
at 8 192 tokens are 3.2 GB a matrix, several matrices a layer. During `memory_efficient` the
attention of each layer whose pattern nobody hooks runs through ``torch``'s
``scaled_dot_product_attention`` instead (a flash kernel: memory linear in the length), with the
same projections and hook points on the way (``hook_q``, ``hook_k``, ``hook_v``, ``hook_z``,
``hook_out``); only ``hook_attn_scores`` and ``hook_pattern`` do not fire. A layer given a
function hands it its queries, keys, values and output instead, from which `circuitwidgets.in_trace`
reduces the pattern a block of rows at a time, as it does inside a remote trace.

Known attention modules: the bridge's native attention (``TransformerBridge.boot_native``) and
its joint-QKV attention over a Hugging Face GPT-2 (``boot_transformers``). `efficient_reason`
says why a model's runs cannot be made memory-efficient (another module, a hook on a pattern,
soft-capped scores), and then nothing is patched.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from ..progress import tick

#: ``on_layer(q, k, v, out, scaling)``: ``q`` ``[batch, heads, seq, d_head]`` (after rotation), ``k``, ``v``
#: ``[batch, kv_heads, seq, d_head]``, ``out`` ``[batch, heads, seq, d_head]`` (the heads' outputs before W_O),
#: ``scaling`` what the scores ``q·k`` were multiplied by.
OnLayer = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], None]

_PATTERN_HOOKS = ("hook_attn_scores", "hook_pattern")


def _kind(attn: Any) -> str | None:
    """"native" or "joint_qkv" for the attention bridges this module knows, else None."""
    inner = getattr(attn, "original_component", None)
    if type(inner).__name__ == "NativeAttention" and all(hasattr(inner, a) for a in ("q", "k", "v", "o", "scale", "causal")):
        return "native"
    joint = type(attn).__name__ == "JointQKVAttentionBridge" and hasattr(attn, "_reconstruct_attention")
    if joint and not getattr(attn, "requires_relative_position_bias", False):
        return "joint_qkv"
    return None


def _hooked(attn: Any) -> bool:
    """True when a hook sits on the layer's scores or pattern (they must then exist)."""
    return any(bool(getattr(getattr(attn, name, None), "_forward_hooks", None)) for name in _PATTERN_HOOKS)


def efficient_reason(model: Any, last: int) -> str:
    """Why the attention of blocks ``0..last`` cannot run memory-efficiently ('' when it can)."""
    for index, block in enumerate(model.blocks):
        if index > last:
            break
        attn = getattr(block, "attn", None)
        if attn is None:
            continue
        kind = _kind(attn)
        if kind is None:
            return f"its attention ({type(attn).__name__}, block {index}) is computed only eagerly"
        inner = attn.original_component
        if kind == "native" and float(getattr(inner, "attn_scores_soft_cap", -1.0) or -1.0) > 0:
            return f"block {index} soft-caps its attention scores"
        if kind == "native" and not inner.causal:
            return f"block {index} is not causal"
        if _hooked(attn):
            return f"a hook sits on the attention scores or pattern of block {index}"
    return ""


def _native_forward(inner: Any, on_layer: OnLayer | None, step: Callable[[], None]) -> Callable[..., Any]:
    original = inner.forward

    def forward(hidden_states: torch.Tensor, attention_mask: Any = None, position_ids: Any = None, **kwargs: Any) -> Any:
        step()
        if attention_mask is not None:  # padding: the module's own masking
            return original(hidden_states, attention_mask=attention_mask, position_ids=position_ids, **kwargs)
        batch, seq, _ = hidden_states.shape
        q = inner.q(hidden_states).view(batch, seq, inner.n_heads, inner.d_head).transpose(1, 2)
        k = inner.k(hidden_states).view(batch, seq, inner.n_kv_heads, inner.d_head).transpose(1, 2)
        v = inner.v(hidden_states).view(batch, seq, inner.n_kv_heads, inner.d_head).transpose(1, 2)
        if inner.rotary is not None:
            q, k = inner.rotary.apply_rope(q, k, position_ids=position_ids)
        out = _attend(q, k, v, 1.0 / inner.scale, on_layer)
        return inner.o(out.transpose(1, 2).reshape(batch, seq, -1)), None

    return forward


def _joint_forward(attn: Any, on_layer: OnLayer | None, step: Callable[[], None]) -> Callable[..., Any]:
    original = attn._reconstruct_attention

    def reconstruct(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any) -> Any:
        step()
        cfg = attn.config
        heads = cfg.n_heads
        if not _only_causal(kwargs.get("attention_mask")) or _cached(kwargs):  # padding, or generation: as the model does
            return original(q, k, v, **kwargs)
        q, k, v, batch, seq, d_head = attn._reshape_qkv_to_heads(q, k, v, heads, getattr(cfg, "n_key_value_heads", None) or heads)
        scale = d_head**-0.5
        if getattr(cfg, "scale_attn_by_inverse_layer_idx", False) and attn._layer_idx is not None:
            scale /= float(attn._layer_idx + 1)
        if getattr(attn, "_reorder_and_upcast_attn", False):
            out = _attend(q.float(), k.float(), v.float(), scale, on_layer).to(v.dtype)
        else:
            out = _attend(q, k, v, scale, on_layer)
        out = attn._reshape_attn_output(out, batch, seq, heads, d_head)
        if bool(getattr(cfg, "use_attn_result", False)) and attn.o.original_component is not None:  # per-head results
            z = attn.o.hook_in(out).view(batch, seq, heads, d_head)
            return attn._compute_per_head_result(z, heads, d_head), None
        return attn._apply_output_projection(out), None

    return reconstruct


def _only_causal(mask: torch.Tensor | None) -> bool:
    """True for no mask or Hugging Face's additive causal mask of one unpadded sequence ``[batch, 1, q, k]``: its
    last row hides nothing (padding would hide columns there) and its first row hides every later key."""
    if mask is None:
        return True
    if mask.ndim != 4 or mask.shape[-1] != mask.shape[-2] or mask.dtype == torch.bool:
        return False
    return bool((mask[..., -1, :] == 0).all()) and bool((mask[..., 0, 1:] < -1e4).all()) and bool((mask[..., 0, 0] == 0).all())


def _cached(kwargs: dict[str, Any]) -> bool:
    """True when a key/value cache already holds positions (generation): the keys are then more than these."""
    for name in ("cache", "past_key_values", "past_key_value", "layer_past"):
        cache = kwargs.get(name)
        if cache is not None and hasattr(cache, "get_seq_length") and cache.get_seq_length() > 0:
            return True
    return False


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, on_layer: OnLayer | None) -> torch.Tensor:
    """Causal attention of `q` over `k`, `v` (grouped K/V heads shared) without the weights; `on_layer` sees it all."""
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=k.shape[1] != q.shape[1])
    if on_layer is not None:
        on_layer(q, k, v, out, scale)
    return out


@contextlib.contextmanager
def memory_efficient(model: Any, last: int, on_layer: dict[int, OnLayer]) -> Iterator[None]:
    """Inside, blocks ``0..last`` attend memory-efficiently and `on_layer` ``{block: function}`` see theirs.

    Check `efficient_reason` first: this raises ValueError with it when the model cannot. The
    modules get their own methods back on leaving, however the run ended. Each layer's attention
    calls `progress.tick` with ``("layer", index, n_layers)`` as it starts (a reporter may stop the run there).
    """
    reason = efficient_reason(model, last)
    if reason:
        raise ValueError(reason)
    patched: list[tuple[Any, str]] = []
    try:
        for index, block in enumerate(model.blocks):
            attn = getattr(block, "attn", None)
            if index > last or attn is None:
                continue
            step = functools.partial(tick, "layer", index, len(model.blocks))
            if _kind(attn) == "native":
                inner = attn.original_component
                inner.forward = _native_forward(inner, on_layer.get(index), step)
                patched.append((inner, "forward"))
            else:
                attn._reconstruct_attention = _joint_forward(attn, on_layer.get(index), step)
                patched.append((attn, "_reconstruct_attention"))
        yield
    finally:
        for module, name in patched:
            module.__dict__.pop(name, None)
