"""What several benchmarks share, with no TransformerLens (the GPU machine has torch and transformers only)."""

from __future__ import annotations

import json


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
