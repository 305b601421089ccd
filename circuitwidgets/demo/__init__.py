"""The demo model shipped with circuitwidgets: a trained two-layer attention-only transformer.

It was trained by ``python -m circuitwidgets.demo.train`` on generated data (random characters
with one segment copied later on), so it has previous-token heads in layer 0 and induction
heads in layer 1; ``model_card.json`` beside this file records the exact config, data recipe,
seed, versions, which heads are which and their scores. Everything loads from the package
folder: no download, no network.

The tokenizer works on characters: ``<bos>`` (id 0), ``<unk>`` (id 1) and the 62 characters
of `CHARS` (ids 2..63). Uppercase letters are lowercased; any other character (accents,
tabs, emoji, ``<``, ``>``, ...) becomes ``<unk>``, one ``<unk>`` per character, so token
positions line up with characters. ``to_tokens`` prepends ``<bos>``.

Example:
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> model.to_str_tokens("Hi é")
    ['<bos>', 'h', 'i', ' ', '<unk>']
    >>> model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_model, model.cfg.n_ctx
    (2, 4, 64, 64)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

DEMO_DIR = Path(__file__).resolve().parent
TOKENIZER_DIR = DEMO_DIR / "tokenizer"
WEIGHTS_FILE = DEMO_DIR / "weights.safetensors"
CARD_FILE = DEMO_DIR / "model_card.json"

BOS, UNK = "<bos>", "<unk>"
BOS_ID, UNK_ID = 0, 1
# 26 letters, 10 digits, space, newline and 24 punctuation marks: 62 characters, ids 2..63.
CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 \n" + ".,!?;:'\"-()[]{}/\\+=*&%#_"

# Keyword arguments of transformer_lens.config.TransformerBridgeConfig (seed added at boot).
CONFIG: dict[str, Any] = {
    "d_model": 64,
    "d_head": 16,
    "n_heads": 4,
    "n_layers": 2,
    "n_ctx": 64,
    "d_vocab": 2 + len(CHARS),
    "attn_only": True,
    "normalization_type": None,
}

# safetensors tensors of the shipped weights, read once per process (they are never handed
# out: every demo_model() call copies them into a model of its own).
_STATE: dict[str, torch.Tensor] | None = None


def load_tokenizer(folder: str | Path = TOKENIZER_DIR):
    """The character tokenizer saved in `folder` (a `transformers.PreTrainedTokenizerFast`).

    Loaded with ``add_bos_token=True`` so TransformerLens uses it as is (BOS prepended).

    Example:
        >>> load_tokenizer()("Ab!")["input_ids"]
        [0, 2, 3, 42]
    """
    from transformers import PreTrainedTokenizerFast

    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(f"folder={str(folder)!r} holds no tokenizer.json; run python -m circuitwidgets.demo.train")
    return PreTrainedTokenizerFast.from_pretrained(str(folder), add_bos_token=True, local_files_only=True)


def boot(seed: int = 0, tokenizer: Any = None):
    """A freshly initialised (untrained) bridge with the demo config and tokenizer.

    Example:
        >>> boot(seed=1).cfg.d_vocab
        64
    """
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {seed!r}")
    cfg = TransformerBridgeConfig(**CONFIG, seed=seed)
    return TransformerBridge.boot_native(cfg, tokenizer=load_tokenizer() if tokenizer is None else tokenizer)


def _state() -> dict[str, torch.Tensor]:
    global _STATE
    if _STATE is None:
        from safetensors.torch import load_file

        if not WEIGHTS_FILE.is_file():
            raise FileNotFoundError(f"{WEIGHTS_FILE} is missing; run python -m circuitwidgets.demo.train")
        _STATE = load_file(str(WEIGHTS_FILE))
    return _STATE


def model_card() -> dict[str, Any]:
    """The contents of ``model_card.json``: config, data recipe, seed, versions, metrics, heads.

    Example:
        >>> sorted(model_card()["heads"])
        ['induction', 'previous_token']
    """
    return json.loads(CARD_FILE.read_text())


def demo_model():
    """The trained demo model: a `TransformerBridge` in eval mode, loaded offline.

    Every call returns a new model (booting it and copying in the weights, which are read
    from disk once per process, took 0.16 s per call on a busy 2-core machine), so changing
    one model's weights or tokenizer never affects another caller.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> model.to_tokens("abc").tolist()
        [[0, 2, 3, 4]]
        >>> scores = cw.analysis.head_scores(model, "induction")
        >>> scores.shape
        torch.Size([2, 4])
        >>> [list(head) for head in cw.demo.model_card()["heads"]["induction"]] == [
        ...     [1, h] for h in range(4) if scores[1, h] > 0.3]
        True
    """
    model = boot(seed=0)
    with torch.no_grad():
        model.load_state_dict(_state(), strict=True)
    model.eval()
    return model


__all__ = ["CHARS", "CONFIG", "boot", "demo_model", "load_tokenizer", "model_card"]
