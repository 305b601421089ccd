"""Save a tiny random-weight Llama and its tokenizer to a folder, offline (no hub), deterministic.

2 layers, 4 heads (2 K/V groups), d_model 64, a byte-level BPE of 400 tokens trained on two
sentences. The weights are redrawn at a scale where the views are of order 1 (at initialisation
they are ~1e-6, where any tolerance passes), norm weights away from 1, as tests/test_remote_weights.py
does, so that comparisons with a tolerance and the norm folding mean something.

Usage: python make_model.py OUT_DIR
"""

import sys

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

TEXT = ["The Eiffel Tower is in the city of Paris.", "When Mary and John went to the store, John gave a drink to Mary."]


def build(out: str) -> None:
    raw = Tokenizer(models.BPE(unk_token=None))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|bos|>"], initial_alphabet=alphabet)
    raw.train_from_iterator(TEXT * 10, trainer)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<|bos|>", eos_token="<|bos|>")
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.5 * noise if "norm" in name else noise * 0.3)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(out, sum(p.numel() for p in model.parameters()), "parameters")


if __name__ == "__main__":
    build(sys.argv[1])
