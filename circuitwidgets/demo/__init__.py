"""The demo models shipped with circuitwidgets: trained attention-only transformers.

Two models, both trained by this project on generated data and loaded from the package folder
(no download, no network):

- ``"2l"`` (the default): two layers, previous-token heads in layer 0 and induction heads in
  layer 1, trained by ``python -m circuitwidgets.demo.train`` on random characters with one
  segment copied later on; ``model_card.json`` records its config, data recipe, seed, versions,
  which heads are which and their scores.
- ``"1l"``: one layer of 8 heads, trained by ``python -m circuitwidgets.demo.train_1l`` on
  random characters in which planted skip-trigrams ("[source] ... [destination] -> [out]") and
  copying hold; ``model_card_1l.json`` lists the planted trigrams and which heads recover them.

Both use one tokenizer, on characters: ``<bos>`` (id 0), ``<unk>`` (id 1) and the 62 characters
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
    >>> one = cw.demo_model("1l")
    >>> one.cfg.n_layers, one.cfg.n_heads, one.cfg.d_model, one.cfg.n_ctx
    (1, 8, 128, 64)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ._files import DEMO_DIR, TOKENIZER_DIR
from .hf_models import tiny_hf_model

WEIGHTS_FILE = DEMO_DIR / "weights.safetensors"
CARD_FILE = DEMO_DIR / "model_card.json"
WEIGHTS_FILE_1L = DEMO_DIR / "weights_1l.safetensors"
CARD_FILE_1L = DEMO_DIR / "model_card_1l.json"

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
# The one-layer model: enough heads that "how many heads copy" is a count worth reading.
CONFIG_1L: dict[str, Any] = {**CONFIG, "d_model": 128, "n_heads": 8, "n_layers": 1}

# name -> (config, weights file, card file, training module)
MODELS: dict[str, tuple[dict[str, Any], Path, Path, str]] = {
    "2l": (CONFIG, WEIGHTS_FILE, CARD_FILE, "circuitwidgets.demo.train"),
    "1l": (CONFIG_1L, WEIGHTS_FILE_1L, CARD_FILE_1L, "circuitwidgets.demo.train_1l"),
}
DEFAULT = "2l"

# safetensors tensors of the shipped weights, read once per process and model (they are never
# handed out: every demo_model() call copies them into a model of its own).
_STATES: dict[str, dict[str, torch.Tensor]] = {}


def _spec(name: Any) -> tuple[dict[str, Any], Path, Path, str]:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {', '.join(map(repr, sorted(MODELS)))}; got {name!r}")
    if name not in MODELS:
        raise ValueError(f"name={name!r} is not a demo model; choose one of {', '.join(map(repr, sorted(MODELS)))}")
    return MODELS[name]


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


def boot(seed: int = 0, tokenizer: Any = None, name: str = DEFAULT):
    """A freshly initialised (untrained) bridge with demo model `name`'s config and the tokenizer.

    Example:
        >>> boot(seed=1).cfg.d_vocab
        64
        >>> boot(seed=1, name="1l").cfg.n_heads
        8
    """
    config = _spec(name)[0]
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {seed!r}")
    cfg = TransformerBridgeConfig(**config, seed=seed)
    return TransformerBridge.boot_native(cfg, tokenizer=load_tokenizer() if tokenizer is None else tokenizer)


def _state(name: str = DEFAULT) -> dict[str, torch.Tensor]:
    if name not in _STATES:
        from safetensors.torch import load_file

        weights, module = _spec(name)[1], _spec(name)[3]
        if not weights.is_file():
            raise FileNotFoundError(f"{weights} is missing; run python -m {module}")
        _STATES[name] = load_file(str(weights))
    return _STATES[name]


def model_card(name: str = DEFAULT) -> dict[str, Any]:
    """Demo model `name`'s card (``model_card.json``, ``model_card_1l.json``): config, data, metrics.

    Example:
        >>> sorted(model_card()["heads"])
        ['induction', 'previous_token']
        >>> model_card("1l")["planted_trigrams"][0]["source"] in CHARS
        True
    """
    return json.loads(_spec(name)[2].read_text())


def demo_model(name: str = DEFAULT):
    """A trained demo model, loaded offline, as the installed TransformerLens builds models.

    `name`: ``"2l"`` (default; two layers, previous-token and induction heads) or ``"1l"`` (one
    layer of 8 heads; planted skip-trigrams and copying). Anything else is a ValueError.

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
        >>> cw.demo_model("1l").cfg.n_layers
        1
        >>> cw.demo_model("3l")
        Traceback (most recent call last):
        ...
        ValueError: name='3l' is not a demo model; choose one of '1l', '2l'
    """
    _spec(name)
    return model_from_state(_state(name), name)


def model_from_state(state: dict[str, torch.Tensor], name: str = DEFAULT):
    """Demo model `name` with the weights `state` (bridge ``state_dict`` layout), as `demo_model` builds it: a
    `TransformerBridge` (TransformerLens >= 3) or a `HookedTransformer` (2.x), in eval mode.

    Example:
        >>> model_from_state(boot(seed=3).state_dict()).cfg.n_layers
        2
    """
    try:
        import transformer_lens.model_bridge  # noqa: F401  (TransformerLens >= 3)
    except ImportError:
        return hooked_transformer(name, state)
    model = boot(seed=0, name=name)
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    model.eval()
    return model


def hooked_state(state: dict[str, torch.Tensor] | None = None, name: str = DEFAULT) -> dict[str, torch.Tensor]:
    """Demo model `name`'s weights (bridge ``nn.Linear`` layout) in `HookedTransformer` names and shapes.

    ``q/k/v.weight`` ``[n_heads*d_head, d_model]`` become ``W_Q/W_K/W_V`` ``[n_heads, d_model,
    d_head]``; ``o.weight`` ``[d_model, n_heads*d_head]`` becomes ``W_O`` ``[n_heads, d_head,
    d_model]``; ``unembed.weight`` ``[d_vocab, d_model]`` becomes ``W_U`` ``[d_model, d_vocab]``.

    Example:
        >>> hooked_state()["blocks.0.attn.W_Q"].shape
        torch.Size([4, 64, 16])
        >>> hooked_state(name="1l")["blocks.0.attn.W_Q"].shape
        torch.Size([8, 128, 16])
    """
    config = _spec(name)[0]
    src = _state(name) if state is None else state
    n_heads, d_head, d_model = config["n_heads"], config["d_head"], config["d_model"]
    out = {"embed.W_E": src["embed.weight"], "pos_embed.W_pos": src["pos_embed.weight"]}
    for layer in range(config["n_layers"]):
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


def hooked_transformer(name: str = DEFAULT, state: dict[str, torch.Tensor] | None = None):
    """Demo model `name` as a TransformerLens 2.x `HookedTransformer` (needs TransformerLens 2.x).

    Same config, tokenizer and weights as the bridge `demo_model` returns under
    TransformerLens 4, so every score in the model card holds for it too. `state`: other weights
    in the bridge layout (default: the shipped ones).
    """
    config = _spec(name)[0]
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as exc:
        raise ImportError(f"hooked_transformer() needs TransformerLens 2.x (HookedTransformer): {exc}") from None
    cfg = HookedTransformerConfig(**config, act_fn="gelu", seed=0, default_prepend_bos=True)
    model = HookedTransformer(cfg, tokenizer=load_tokenizer())
    state = hooked_state(state, name=name)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # what remains is HookedTransformer's fixed buffers (causal masks), not weights
    weights = [key for key in missing if not key.endswith((".mask", ".IGNORE"))]
    if weights or unexpected:
        raise RuntimeError(f"demo weights do not fit this HookedTransformer: missing {weights}, unexpected {unexpected}")
    model.eval()
    return model


__all__ = [
    "CHARS", "CONFIG", "CONFIG_1L", "MODELS", "boot", "demo_model", "hooked_state", "hooked_transformer",
    "load_tokenizer", "model_card", "model_from_state", "tiny_hf_model",
]
