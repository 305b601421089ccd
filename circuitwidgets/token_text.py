"""How a token is written on screen: its text, or its bytes where it holds part of a character.

Byte-level tokenizers (GPT-2's BPE, and the byte fallback of SentencePiece models such as Llama)
split a character of several UTF-8 bytes (an emoji, a CJK character) across tokens. Decoded alone,
such a token is "�", the same for every one of them. `token_label` writes the bytes that are not a
whole character in hex instead, ``<F0 9F>``, and keeps every whole character as text (whitespace
stays whitespace: the views draw their own marks for it).

Example:
    >>> format_bytes("🙂".encode()[:2] + b"!")
    '<F0 9F>!'
    >>> format_bytes("naïve".encode())
    'naïve'
"""

from __future__ import annotations

import functools
import re
from typing import Any

REPLACEMENT = "\ufffd"
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@functools.cache
def _byte_level_alphabet() -> dict[str, int]:
    """Character -> byte of the byte-level BPE alphabet (GPT-2, RoBERTa, Llama 3, Qwen, ...).

    That alphabet writes each of the 256 bytes as one printable character: bytes that are
    printable Latin-1 characters stand for themselves, the others are given the code points
    256, 257, ... in byte order.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet = {chr(b): b for b in printable}
    extra = 256
    for b in range(256):
        if b not in printable:
            alphabet[chr(extra)] = b
            extra += 1
    return alphabet


def piece_bytes(piece: str) -> bytes | None:
    """The raw bytes behind a tokenizer's piece string, or None when it is not a byte-level piece.

    Example:
        >>> piece_bytes("ĠðŁ"), piece_bytes("<0xF0>"), piece_bytes("▁the")
        (b' \\xf0\\x9f', b'\\xf0', None)
    """
    fallback = _BYTE_FALLBACK.fullmatch(piece)
    if fallback:
        return bytes([int(fallback.group(1), 16)])
    alphabet = _byte_level_alphabet()
    if piece and all(char in alphabet for char in piece):
        return bytes(alphabet[char] for char in piece)
    return None


def format_bytes(raw: bytes) -> str:
    """`raw` as text, each run of bytes that is not valid UTF-8 written as ``<XX XX>``."""
    parts = []
    while raw:
        try:
            parts.append(raw.decode("utf-8"))
            break
        except UnicodeDecodeError as error:
            parts.append(raw[: error.start].decode("utf-8"))
            parts.append("<" + " ".join(f"{b:02X}" for b in raw[error.start : error.end]) + ">")
            raw = raw[error.end :]
    return "".join(parts)


def token_label(tokenizer: Any, token_id: int) -> str:
    """What the widgets show for `token_id`: ``tokenizer.decode``, or its bytes where that gives "�".

    A token whose own text holds U+FFFD (its bytes are ``EF BF BD``) keeps it.
    """
    text = tokenizer.decode([token_id])
    if REPLACEMENT not in text:
        return text
    try:
        piece = tokenizer.convert_ids_to_tokens(token_id)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        return text
    raw = piece_bytes(piece) if isinstance(piece, str) else None
    return text if raw is None else format_bytes(raw)
