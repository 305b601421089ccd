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
    for layer, head in card["heads"]["previous_token"]:
        assert prev[layer, head] > 0.7
    for layer, head in card["heads"]["induction"]:
        assert induction[layer, head] > 0.3
    assert copying_scores(demo)[1].min() > 0.95


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
