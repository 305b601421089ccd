"""Where the demo's files are: this folder, and the character tokenizer saved in it."""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
TOKENIZER_DIR = DEMO_DIR / "tokenizer"
