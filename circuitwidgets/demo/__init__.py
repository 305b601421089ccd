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
    """The trained demo model, loaded offline, as the installed TransformerLens builds models.

    TransformerLens 4 (or 3): a `TransformerBridge` (``boot_native``). TransformerLens 2.x: a
    `HookedTransformer` with the same weights (see `hooked_transformer`). Eval mode either way.

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
    try:
        import transformer_lens.model_bridge  # noqa: F401  (TransformerLens >= 3)
    except ImportError:
        return hooked_transformer()
    model = boot(seed=0)
    with torch.no_grad():
        model.load_state_dict(_state(), strict=True)
    model.eval()
    return model


def hooked_state(state: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The shipped weights (bridge ``nn.Linear`` layout) in `HookedTransformer` names and shapes.

    ``q/k/v.weight`` ``[n_heads*d_head, d_model]`` become ``W_Q/W_K/W_V`` ``[n_heads, d_model,
    d_head]``; ``o.weight`` ``[d_model, n_heads*d_head]`` becomes ``W_O`` ``[n_heads, d_head,
    d_model]``; ``unembed.weight`` ``[d_vocab, d_model]`` becomes ``W_U`` ``[d_model, d_vocab]``.

    Example:
        >>> hooked_state()["blocks.0.attn.W_Q"].shape
        torch.Size([4, 64, 16])
    """
    src = _state() if state is None else state
    n_heads, d_head, d_model = CONFIG["n_heads"], CONFIG["d_head"], CONFIG["d_model"]
    out = {"embed.W_E": src["embed.weight"], "pos_embed.W_pos": src["pos_embed.weight"]}
    for layer in range(CONFIG["n_layers"]):
        pre, to = f"blocks.{layer}.attn.", f"blocks.{layer}.attn."
        for name in ("q", "k", "v"):
            weight = src[f"{pre}{name}.weight"]
            out[f"{to}W_{name.upper()}"] = weight.reshape(n_heads, d_head, d_model).transpose(1, 2).contiguous()
            out[f"{to}b_{name.upper()}"] = src[f"{pre}{name}.bias"].reshape(n_heads, d_head)
        out[f"{to}W_O"] = src[f"{pre}o.weight"].T.reshape(n_heads, d_head, d_model).contiguous()
        out[f"{to}b_O"] = src[f"{pre}o.bias"]
    out["unembed.W_U"] = src["unembed.weight"].T.contiguous()
    out["unembed.b_U"] = src["unembed.bias"]
    return out


def hooked_transformer():
    """The demo model as a TransformerLens 2.x `HookedTransformer` (needs TransformerLens 2.x).

    Same config, tokenizer and weights as the bridge `demo_model` returns under
    TransformerLens 4, so every score in the model card holds for it too.
    """
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as exc:
        raise ImportError(f"hooked_transformer() needs TransformerLens 2.x (HookedTransformer): {exc}") from None
    cfg = HookedTransformerConfig(**CONFIG, act_fn="gelu", seed=0, default_prepend_bos=True)
    model = HookedTransformer(cfg, tokenizer=load_tokenizer())
    state = hooked_state()
    missing, unexpected = model.load_state_dict(state, strict=False)
    # what remains is HookedTransformer's fixed buffers (causal masks), not weights
    weights = [key for key in missing if not key.endswith((".mask", ".IGNORE"))]
    if weights or unexpected:
        raise RuntimeError(f"demo weights do not fit this HookedTransformer: missing {weights}, unexpected {unexpected}")
    model.eval()
    return model


__all__ = ["CHARS", "CONFIG", "boot", "demo_model", "hooked_state", "hooked_transformer", "load_tokenizer", "model_card"]
