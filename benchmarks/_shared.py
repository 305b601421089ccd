"""What several benchmarks share, with no TransformerLens (the GPU machine has torch and transformers only)."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import threading

MB = 2**20


def random_llama(*, heads: int, kv_heads: int, d_head: int, layers: int, n_ctx: int, device: str = "cpu"):
    """(Hugging Face model, tokenizer): a random Llama (rotary, `kv_heads` K/V groups), no download.

    The demo tokenizer's vocabulary; MLP twice the width; q_proj weights scaled by 8 so that heads
    attend sharply, as trained heads do.
    """
    import torch
    import transformers

    from circuitwidgets.demo import TOKENIZER_DIR

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    width = heads * d_head
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=n_ctx,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config).to(device).eval()
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.q_proj.weight.mul_(8.0)
    return hf, tokenizer


def comm_bytes(widget) -> int:
    """Bytes of the widget's state as the comm open message carries it (JSON + buffers), no bundle."""
    from ipywidgets.widgets.widget import _remove_buffers

    state = widget.get_state()
    state.pop("_esm", None)
    state.pop("_css", None)
    state, _, buffers = _remove_buffers(state)
    return len(json.dumps(state, separators=(",", ":")).encode()) + sum(len(b) for b in buffers)


class PeakRSS:
    """Peak resident memory above the level at entry, in MB (CUDA: the allocator's peak above its level), as ``.mb``."""

    def __init__(self, device: str = "cpu"):
        self.device = device

    def __enter__(self) -> PeakRSS:
        import psutil
        import torch

        gc.collect()
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed memory back to the system: an honest baseline
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        self.process = psutil.Process()
        self.start = self.peak = self.process.memory_info().rss
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self.done.wait(0.002)

    def __exit__(self, *exc) -> None:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            self.mb = (torch.cuda.max_memory_allocated() - self.start) / MB
            return
        self.done.set()
        self.thread.join()
        self.mb = (max(self.peak, self.process.memory_info().rss) - self.start) / MB
