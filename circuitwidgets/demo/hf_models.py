"""Small random Hugging Face causal LMs with the demo tokenizer, built offline: for examples, tests and benchmarks."""

from __future__ import annotations

from typing import Any

import torch


def tiny_hf_model(
    kind: str = "llama", *, seed: int = 0, layers: int = 2, heads: int = 4, kv_heads: int = 2, d_head: int = 16, n_ctx: int = 256
) -> tuple[Any, Any]:
    """A small random Hugging Face causal LM of architecture `kind` and the demo model's tokenizer (no download).

    `kind`: "gpt2", "neox", "llama" (rotary, grouped-query attention), "qwen2", "gemma2"
    (soft-capping and a sliding window of 8, eager attention). `heads` of `d_head`; Llama, Qwen2 and
    Gemma 2 have `kv_heads` key/value heads; `n_ctx` positions. For examples, tests and benchmarks.

    Example:
        >>> model, tokenizer = tiny_hf_model("gpt2")
        >>> type(model).__name__, model.config.n_layer
        ('GPT2LMHeadModel', 2)
    """
    import transformers

    from ._files import TOKENIZER_DIR

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    vocab, width = len(tokenizer), d_head * heads
    common = {"vocab_size": vocab, "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    configs = {
        "gpt2": lambda: transformers.GPT2Config(n_embd=width, n_layer=layers, n_head=heads, n_positions=n_ctx, **common),
        "neox": lambda: transformers.GPTNeoXConfig(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            max_position_embeddings=n_ctx, **common,
        ),
        "llama": lambda: transformers.LlamaConfig(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=kv_heads, max_position_embeddings=n_ctx, **common,
        ),
        "qwen2": lambda: transformers.Qwen2Config(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=kv_heads, max_position_embeddings=n_ctx, **common,
        ),
        "gemma2": lambda: transformers.Gemma2Config(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=kv_heads, head_dim=d_head, max_position_embeddings=n_ctx, sliding_window=8,
            attn_logit_softcapping=5.0, query_pre_attn_scalar=d_head, **common,
        ),
    }
    if kind not in configs:
        raise ValueError(f"kind must be one of {sorted(configs)}; got {kind!r}")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(configs[kind]())
    return model.eval(), tokenizer
