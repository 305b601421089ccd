"""A hand-built two-layer attention-only model with a planted previous-token and induction head.

`planted_model()` returns ``(model, heads)`` where ``model`` is a TransformerLens 4
`TransformerBridge` (boot_native, no LayerNorm, learned positions) and ``heads`` maps a head
kind to its ``(layer, head)``. Weights are written by hand; building it takes milliseconds.

Residual stream layout (d_model 128, four 32-dimensional subspaces):

- ``TOK``  (0:32)   token identity. Token t is ``+basis[t]`` for t < 32 and ``-basis[t - 32]``
  otherwise, so two tokens' codes have inner product 1 (same), -1 (antipodal) or 0. A single
  32-dimensional head can therefore match and copy every one of the 64 tokens exactly; with
  ``d_head`` 16 a 64-token code is necessarily non-orthogonal and copying would leak.
- ``POS``  (32:64)  position i as 16 (cos, sin) pairs at frequencies ``pi * 0.9**k``.
- ``PREV`` (64:96)  written by the previous-token head: the token code of position i-1.
- ``OUT``  (96:128) written by the induction head; the unembedding reads only this subspace.

Planted heads (the other heads have small random weights and attend almost uniformly):

- previous-token head (layer 0): queries rotate the position code back by one step, so the
  score ``sum_k cos(w_k (i - 1 - j))`` peaks at key j = i-1 (margin 12 of 16 before scaling);
  its OV copies ``TOK`` of the attended position into ``PREV``.
- induction head (layer 1): queries read ``TOK`` of the current token, keys read ``PREV``
  (K-composition with the previous-token head), so position j scores high when token j-1
  equals the current token; its OV copies ``TOK`` of the attended position into ``OUT``, and
  ``W_U`` maps ``OUT`` back to that token's logit. The model predicts the second copy of a
  repeated sequence almost perfectly.

Example:
    >>> model, heads = planted_model()
    >>> heads
    {'previous_token': (0, 2), 'induction': (1, 1)}
"""

from __future__ import annotations

import math

import torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

D_VOCAB, N_CTX, D_MODEL, N_HEADS, D_HEAD, N_LAYERS = 64, 64, 128, 4, 32, 2
TOK, POS, PREV, OUT = (slice(32 * k, 32 * (k + 1)) for k in range(4))
PREV_HEAD, INDUCTION_HEAD = (0, 2), (1, 1)
# Scores are divided by sqrt(d_head) = 5.66: these margins make the planted patterns sharp.
POS_SCALE = 10.0  # previous-token margin 12 * 10 / 5.66 = 21 nats
MATCH_SCALE = 120.0  # induction margin 120 / 5.66 = 21 nats
UNEMBED_SCALE = 10.0  # logit of the copied token over the others
NOISE = 0.01  # std of the random heads' weights


def token_codes() -> torch.Tensor:
    """``[d_vocab, 32]``: +-one-hot codes, token t and t+32 antipodal."""
    eye = torch.eye(32)
    return torch.cat([eye, -eye])


def position_codes() -> tuple[torch.Tensor, torch.Tensor]:
    """``([n_ctx, 32] codes, [16] frequencies)``: (cos, sin) of ``w_k * i`` interleaved."""
    freqs = math.pi * 0.9 ** torch.arange(16, dtype=torch.float64)
    angles = torch.arange(N_CTX, dtype=torch.float64)[:, None] * freqs[None]
    codes = torch.stack([angles.cos(), angles.sin()], dim=-1).reshape(N_CTX, 32)
    return codes.float(), freqs


def _rotate_back(freqs: torch.Tensor) -> torch.Tensor:
    """``[32, 32]`` block-diagonal map taking the code of position i to that of i-1 (row vectors)."""
    rot = torch.zeros(32, 32, dtype=torch.float64)
    for k, w in enumerate(freqs.tolist()):
        c, s = math.cos(w), math.sin(w)
        # [cos a, sin a] @ [[c, -s], [s, c]] = [cos(a - w), sin(a - w)]
        rot[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = torch.tensor([[c, -s], [s, c]])
    return rot.float()


def _weights(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)

    def noise(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * NOISE

    shape_in = (N_LAYERS, N_HEADS, D_MODEL, D_HEAD)
    w = {name: noise(*shape_in) for name in ("W_Q", "W_K", "W_V")}
    w["W_O"] = noise(N_LAYERS, N_HEADS, D_HEAD, D_MODEL)
    eye = torch.eye(32)
    pos_codes, freqs = position_codes()

    for name in ("W_Q", "W_K", "W_V"):
        w[name][PREV_HEAD] = 0.0
        w[name][INDUCTION_HEAD] = 0.0
    w["W_O"][PREV_HEAD] = 0.0
    w["W_O"][INDUCTION_HEAD] = 0.0

    w["W_Q"][PREV_HEAD][POS] = POS_SCALE * _rotate_back(freqs)
    w["W_K"][PREV_HEAD][POS] = eye
    w["W_V"][PREV_HEAD][TOK] = eye
    w["W_O"][PREV_HEAD][:, PREV] = eye

    w["W_Q"][INDUCTION_HEAD][TOK] = MATCH_SCALE * eye
    w["W_K"][INDUCTION_HEAD][PREV] = eye
    w["W_V"][INDUCTION_HEAD][TOK] = eye
    w["W_O"][INDUCTION_HEAD][:, OUT] = eye

    w["W_E"] = torch.zeros(D_VOCAB, D_MODEL)
    w["W_E"][:, TOK] = token_codes()
    w["W_pos"] = torch.zeros(N_CTX, D_MODEL)
    w["W_pos"][:, POS] = pos_codes
    w["W_U"] = torch.zeros(D_MODEL, D_VOCAB)
    w["W_U"][OUT] = UNEMBED_SCALE * token_codes().T
    return w


def _load(model: TransformerBridge, w: dict[str, torch.Tensor]) -> None:
    """Write TL-shaped weights into the bridge's nn.Linear / nn.Embedding parameters."""
    params = dict(model.named_parameters())

    def param(suffix: str) -> torch.nn.Parameter:
        (name,) = [n for n in params if n.endswith(suffix)]
        return params[name]

    with torch.no_grad():
        param("tok_embed._original_component.weight").copy_(w["W_E"])
        param("pos._original_component.weight").copy_(w["W_pos"])
        param("head._original_component.weight").copy_(w["W_U"].T)
        for layer in range(N_LAYERS):
            attn = f"layers.{layer}._original_component.attn._original_component."
            for short, name in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V")):
                # nn.Linear weight is [n_heads * d_head, d_model]; W_X[l] is [n_heads, d_model, d_head]
                param(f"{attn}{short}._original_component.weight").copy_(
                    w[name][layer].permute(0, 2, 1).reshape(N_HEADS * D_HEAD, D_MODEL)
                )
                param(f"{attn}{short}._original_component.bias").zero_()
            param(f"{attn}o._original_component.weight").copy_(
                w["W_O"][layer].reshape(N_HEADS * D_HEAD, D_MODEL).T
            )
            param(f"{attn}o._original_component.bias").zero_()


def planted_model(seed: int = 0) -> tuple[TransformerBridge, dict[str, tuple[int, int]]]:
    """``(model, heads)``: the planted model and ``{"previous_token": (0, 2), "induction": (1, 1)}``.

    `seed` only changes the small random weights of the six unplanted heads.
    """
    cfg = TransformerBridgeConfig(
        d_model=D_MODEL, d_head=D_HEAD, n_heads=N_HEADS, n_layers=N_LAYERS, n_ctx=N_CTX,
        d_vocab=D_VOCAB, attn_only=True, normalization_type=None, seed=seed,
    )
    model = TransformerBridge.boot_native(cfg)
    w = _weights(seed)
    _load(model, w)
    # Guard against a change in how the bridge maps its Linear weights to TL's W_Q etc.
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        if not torch.equal(getattr(model, name).detach(), w[name]):
            raise RuntimeError(f"planted {name} did not land where TransformerLens reads it")
    model.eval()
    return model, {"previous_token": PREV_HEAD, "induction": INDUCTION_HEAD}


def word_tokenizer(d_vocab: int = D_VOCAB):
    """An in-memory word-level tokenizer: ``"<bos>"`` is id 0, ``"t{i}"`` is id i; prepends BOS.

    TransformerLens' string APIs (`to_tokens`, `head_detector.detect_head`) need one; assign it
    with ``model.tokenizer = word_tokenizer()`` on a freshly booted bridge (the first
    assignment skips TransformerLens' tokenizer re-configuration, which fails for in-memory
    tokenizers).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, **{f"t{i}": i for i in range(1, d_vocab)}}
    inner = Tokenizer(models.WordLevel(vocab, unk_token="<bos>"))
    inner.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    inner.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=inner, bos_token="<bos>", unk_token="<bos>", pad_token="<bos>")


def words(tokens) -> str:
    """The `word_tokenizer` string of token ids (BOS, id 0, is left out: the tokenizer adds it)."""
    return " ".join(f"t{int(t)}" for t in tokens if int(t) != 0)
