"""Circuits of a model whose LayerNorm is not folded equal those of the same model with its norms folded.

`ModelView` folds each attention layer's input norm into ``W_Q/W_K/W_V`` and the final norm
into ``W_U`` (TransformerLens' ``fold_ln``) and, for LayerNorm, centres the writing weights
(``center_writing_weights``). The reference is the same bridge folded here by hand, parameter by
parameter, and checked to compute the same logits. (TransformerLens 4.3's own
``process_weights(fold_ln=True)`` on a ``boot_native`` bridge folds ``ln1`` into ``W_Q/K/V`` but
leaves ``ln1``'s weights in place, so its logits move by about 0.1: not a usable reference.
tests/tl2 compares with TransformerLens 2.x's ``fold_ln`` as well.)
"""

from __future__ import annotations

import copy

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets import analysis
from circuitwidgets.model import ModelView

TOKENS = [1, 5, 9, 20, 33, 47, 60]


def with_random_norms(normalization_type: str):
    model = small_bridge(normalization_type=normalization_type, attn_only=False, d_mlp=128)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for name, param in model.state_dict().items():
            if ".ln" in name or name.startswith("ln_final"):  # weights around 1, biases around 0
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.4 * torch.randn(param.shape, generator=gen))
    return model


def folded_by_hand(model, centre: bool):
    """The same function with every norm's weight and bias folded into the next linear map (bridge layout)."""
    folded = copy.deepcopy(model)
    state = folded.state_dict()
    with torch.no_grad():
        def fold(norm: str, readers: list[str]) -> None:
            w, b = state[f"{norm}.weight"], state.get(f"{norm}.bias")
            for reader in readers:  # nn.Linear: y = x W^T + c, W [out, d_model]
                if b is not None:
                    state[f"{reader}.bias"] += state[f"{reader}.weight"] @ b
                state[f"{reader}.weight"] *= w[None, :]
            w.fill_(1.0)
            if b is not None:
                b.zero_()

        for layer in range(model.cfg.n_layers):
            fold(f"blocks.{layer}.ln1", [f"blocks.{layer}.attn.{x}" for x in "qkv"])
            fold(f"blocks.{layer}.ln2", [f"blocks.{layer}.mlp.in"])
        fold("ln_final", ["unembed"])
        if centre:  # LayerNorm removes the mean of the residual: writers can do it for it
            writers = ["embed.weight", "pos_embed.weight"]
            for layer in range(model.cfg.n_layers):
                writers += [f"blocks.{layer}.attn.o.weight", f"blocks.{layer}.attn.o.bias"]
                writers += [f"blocks.{layer}.mlp.out.weight", f"blocks.{layer}.mlp.out.bias"]
            for name in writers:  # d_model is the last dim of embeddings, the first of out-projections
                dim = -1 if "embed" in name or name.endswith("bias") else 0
                state[name] -= state[name].mean(dim, keepdim=True)
    tokens = torch.tensor([TOKENS * 3])
    torch.testing.assert_close(folded(tokens), model(tokens), atol=1e-4, rtol=1e-4)  # the same function
    return folded


@pytest.mark.parametrize("kind", ["LN", "RMS"])
def test_unfolded_model_gives_the_circuits_of_the_folded_model(kind):
    model = with_random_norms(kind)
    folded = folded_by_hand(model, centre=kind == "LN")
    assert not torch.allclose(ModelView(model).W_Q, model.W_Q)  # the view did fold something
    for layer in (0, 1):
        for ours, theirs in (
            (analysis.full_qk_block(model, layer, TOKENS), analysis.full_qk_block(folded, layer, TOKENS)),
            (analysis.full_ov_block(model, layer, TOKENS), analysis.full_ov_block(folded, layer, TOKENS)),
            (analysis.qk_circuit(model, layer).dense(), analysis.qk_circuit(folded, layer).dense()),
            (analysis.ov_circuit(model, layer).dense(), analysis.ov_circuit(folded, layer).dense()),
            (analysis.positional_qk(model, layer), analysis.positional_qk(folded, layer)),
        ):
            torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(analysis.copying_scores(model), analysis.copying_scores(folded), atol=1e-4, rtol=0)
    for composition in ("Q", "K", "V"):
        ours, theirs = analysis.composition_scores(model, composition), analysis.composition_scores(folded, composition)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4, equal_nan=True)


def test_the_views_say_what_was_folded():
    assert ModelView(with_random_norms("LN")).norm_note == (
        "LayerNorm weights folded into W_Q, W_K, W_V and W_U (as fold_ln), its centring into every weight that writes or "
        "reads the residual stream; "
        "its per-position scale is left out."
    )
    assert ModelView(with_random_norms("RMS")).norm_note.startswith("RMSNorm weights folded into W_Q, W_K, W_V and W_U")
    assert ModelView(small_bridge()).norm_note == ""  # no norm: nothing to say
    model = with_random_norms("LN")
    for caption in (
        cw.OVCircuit(model, 0, 0, tokens=TOKENS).ov["caption"],
        cw.QKCircuit(model, 0, 0, tokens=TOKENS).qk["caption"],
        cw.CompositionDiagram(model, selected_pair=((0, 1), (1, 2)), term_tokens=TOKENS).term["caption"],
    ):
        assert ModelView(model).norm_note in caption


def test_folding_leaves_the_model_alone():
    model = with_random_norms("LN")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ModelView(model)
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name
