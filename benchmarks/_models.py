"""The model every benchmark measures on: GPT-2 small's shape with random weights, no download."""

from __future__ import annotations

import contextlib

import torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge


def gpt2_small_shaped(device: str) -> TransformerBridge:
    """12 layers x 12 heads, d_model 768, d_head 64, d_vocab 50 257, n_ctx 1 024, LN, MLPs (eval mode)."""
    cfg = TransformerBridgeConfig(
        d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=1024, d_vocab=50257, d_mlp=3072,
        act_fn="gelu_new", normalization_type="LN", seed=0, device=device,
    )
    return TransformerBridge.boot_native(cfg).to(device).eval()


def check_device(device: str) -> str:
    """`device` if torch can place tensors there; otherwise exit with a one-line reason (no traceback)."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {device}: CUDA is not available here (torch {torch.__version__}, "
                         f"CUDA build: {torch.version.cuda or 'none'}); use --device cpu")
    try:
        torch.empty(1, device=device)
    except (RuntimeError, ValueError) as exc:
        raise SystemExit(f"--device {device}: {str(exc).splitlines()[0]}") from None
    return device


@contextlib.contextmanager
def kernel_message(name: str | None):
    """Inside, the widgets see one kernel message `name` (None: none), as a notebook cell or a browser event is:
    `circuitwidgets.model.current_view` checks the weights once per message, outside a kernel at every access."""
    from circuitwidgets import model

    original = model._message_id
    model._message_id = lambda: name
    try:
        yield
    finally:
        model._message_id = original


def sync(device: str) -> None:
    """Wait for queued GPU work, so that a timer measures it."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
