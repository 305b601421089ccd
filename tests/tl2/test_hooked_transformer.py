"""TransformerLens 2.x: the adapter, the analysis and the widgets on a real `HookedTransformer`.

Runs in its own environment (`make test-tl2`: .venv-tl2 with transformer-lens 2.x, which cannot
share a venv with TransformerLens 4); the main suite leaves this folder out when
`HookedTransformer` cannot be imported.
"""

from __future__ import annotations

import pytest
import torch
from reference_forward import reference_logits
from transformer_lens import HookedTransformer, HookedTransformerConfig

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import composition_scores, copying_scores, head_scores, positional_qk

PROMPT = "the cat sat on the mat. the cat sat on the mat."


@pytest.fixture(scope="module")
def demo():
    return cw.demo_model()


@pytest.fixture(scope="module")
def card():
    return cw.demo.model_card()


def test_demo_model_is_a_hooked_transformer_computing_the_shipped_model(demo):
    assert isinstance(demo, HookedTransformer)
    tokens = demo.to_tokens(PROMPT)
    assert tokens[0, 0].item() == 0  # <bos>
    with torch.no_grad():
        torch.testing.assert_close(demo(tokens), reference_logits(tokens), atol=1e-4, rtol=1e-4)


def test_view_reads_hooked_transformer_weights(demo):
    view = cw.as_view(demo)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q"):
        assert torch.equal(getattr(view, name), getattr(demo, name).detach()), name
    assert torch.equal(view.W_pos, demo.W_pos.detach()) and view.attn_layers == [0, 1]
    tokens = demo.to_tokens(PROMPT)
    _, cache = demo.run_with_cache(tokens)
    ours = view.patterns(tokens)
    for layer in range(2):
        torch.testing.assert_close(ours[0, layer], cache["pattern", layer][0])


def test_card_heads_and_scores_hold(demo, card):
    prev = head_scores(demo, "previous_token")
    induction = head_scores(demo, "induction")
    # the same numbers as the bridge under TransformerLens 4 recorded in the card
    for layer, head in card["heads"]["previous_token"]:
        assert prev[layer, head] >= 0.3
        assert float(prev[layer, head]) == pytest.approx(card["head_scores"]["previous_token"][layer][head], abs=0.01)
    for layer, head in card["heads"]["induction"]:
        assert induction[layer, head] >= 0.3
        assert float(induction[layer, head]) == pytest.approx(card["head_scores"]["induction"][layer][head], abs=0.01)
    for layer, head in card["heads"]["induction"]:
        assert copying_scores(demo)[layer, head] > 0.9


def test_composition_matches_transformer_lens_2(demo):
    for kind in "QKV":
        ours = composition_scores(demo, kind)
        theirs = demo.all_composition_scores(kind).detach()
        layer_ok = torch.isfinite(ours)
        torch.testing.assert_close(ours[layer_ok], theirs[layer_ok].float(), atol=1e-5, rtol=1e-4)


def test_positional_view_reads_hooked_transformer_weights(demo, card):
    layer, head = card["heads"]["previous_token"][0]
    pos = demo.W_pos.detach()
    scores = pos @ demo.W_Q[layer, head].detach() @ demo.W_K[layer, head].detach().T @ pos.T / demo.cfg.d_head**0.5
    expected = scores.masked_fill(~torch.ones(64, 64, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    torch.testing.assert_close(positional_qk(demo, layer, head), expected, atol=1e-5, rtol=1e-4)


def test_widgets_on_a_hooked_transformer(demo, tmp_path):
    attention = cw.AttentionPattern(demo, prompt=PROMPT, layer=1, head=0)
    assert attention.error == ""
    _, cache = demo.run_with_cache(demo.to_tokens(PROMPT))
    shown = transport.decode(attention.patterns)
    assert (shown - cache["pattern", 1][0]).abs().max() <= transport.quantisation_step(attention.patterns)
    ov = cw.OVCircuit(demo, 1, 0, prompt=PROMPT)
    assert ov.error == "" and ov.stats[0]["copying"] == pytest.approx(float(copying_scores(demo)[1, 0]), abs=1e-5)
    qk = cw.QKCircuit(demo, 0, 0)
    assert qk.error == "" and qk.positional_note == ""
    dash = cw.Dashboard(demo, prompt=PROMPT)
    dash.head_scores.head = 2
    assert [w.error for w in dash.widgets] == [""] * len(dash.widgets)
    assert (dash.attention.head, dash.ov.head) == (2, 2)
    assert dash.save_html(tmp_path / "dash.html").stat().st_size > 10_000


def test_one_layer_demo_model_is_a_hooked_transformer_computing_the_shipped_model():
    one = cw.demo_model("1l")
    assert isinstance(one, HookedTransformer) and (one.cfg.n_layers, one.cfg.n_heads, one.cfg.d_model) == (1, 8, 128)
    tokens = one.to_tokens(PROMPT)
    with torch.no_grad():
        torch.testing.assert_close(one(tokens), reference_logits(tokens, "1l"), atol=1e-4, rtol=1e-4)
    card = cw.demo.model_card("1l")
    copying = copying_scores(one)[0]
    assert [f"0.{h}" for h in range(8) if copying[h] > 0.5] == card["metrics"]["copying_heads"]
    from circuitwidgets.demo import train_1l

    found = train_1l.trigram_recovery(one)
    assert float(found.any(0).float().mean()) == pytest.approx(card["metrics"]["trigrams_found_by_any_head"])
    with pytest.raises(ValueError, match="'1l', '2l'"):
        cw.demo_model("3l")


def test_grouped_query_model_with_layernorm_and_mlps():
    cfg = HookedTransformerConfig(n_layers=2, d_model=32, d_head=8, n_heads=4, n_key_value_heads=2, n_ctx=16,
                                  d_vocab=40, d_mlp=64, act_fn="gelu", normalization_type="LN", seed=1)
    model = HookedTransformer(cfg)
    view = cw.as_view(model)
    assert view.W_K.shape == (2, 4, 32, 8)
    assert torch.equal(view.W_K[:, 1], view.W_K[:, 0]) and torch.equal(view.W_V[:, 3], view.W_V[:, 2])
    tokens = torch.tensor([[1, 5, 7, 1, 5, 7]])
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(view.patterns(tokens)[0, 1], cache["pattern", 1][0])
    scores = composition_scores(model, "K")
    assert scores.shape == (2, 4, 2, 4) and torch.isfinite(scores[0, :, 1]).all()
    heads = cw.HeadScores(model, layer=0, head=0)
    assert heads.error == ""


def test_unfolded_layernorm_gives_the_circuits_of_transformer_lens_fold_ln():
    """TransformerLens 2.x's own fold_ln + center_writing_weights is the reference for the view's folding."""
    cfg = HookedTransformerConfig(
        d_model=32, d_head=8, n_heads=4, n_layers=2, n_ctx=16, d_vocab=40, d_mlp=64, act_fn="gelu",
        normalization_type="LN", seed=0,
    )
    model = HookedTransformer(cfg)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for name, param in model.named_parameters():
            if "ln" in name:
                param.copy_((1.0 if name.endswith(".w") else 0.0) + 0.4 * torch.randn(param.shape, generator=gen))
    folded = HookedTransformer(cfg)
    folded.load_state_dict(model.state_dict())
    folded.process_weights_(fold_ln=True, center_writing_weights=True, center_unembed=False)
    assert folded.cfg.normalization_type == "LNPre"
    tokens = [1, 4, 9, 17, 30]
    for layer in (0, 1):
        for fn in (cw.analysis.full_qk_block, cw.analysis.full_ov_block):
            torch.testing.assert_close(fn(model, layer, tokens), fn(folded, layer, tokens), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(copying_scores(model), copying_scores(folded), atol=1e-4, rtol=0)
    torch.testing.assert_close(composition_scores(model, "K"), composition_scores(folded, "K"), equal_nan=True)
    assert cw.ModelView(model).norm_note.startswith("LayerNorm weights folded into W_Q, W_K, W_V and W_U")
    assert cw.ModelView(folded).norm_note.startswith("LayerNorm weights already folded")


def test_long_prompts_say_that_a_hooked_transformer_holds_each_layer(demo, monkeypatch):
    """A HookedTransformer's attention is eager only: the long-prompt view says so and keeps to one layer a run."""
    monkeypatch.setattr("circuitwidgets.widgets.attention.LOD_BYTES", 100)
    ids = demo.to_tokens(PROMPT)[0].tolist()
    reason = cw.ModelView(demo).memory_reason(1)
    assert "computed only eagerly" in reason and "block 0" in reason
    widget = cw.AttentionPattern(demo, tokens=ids, layer=1)
    n = len(ids)
    assert widget.patterns["lod"] and widget.memory_note.endswith(reason) and f"{n} x {n}" in widget.memory_note
    widget.close()
