"""The shipped demo model: offline loading, config, tokenizer, documented heads, losses, training."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import circuitwidgets as cw
from circuitwidgets import demo
from circuitwidgets.demo import train as demo_train

TOL = 0.01  # recomputed scores vs the card (same code, same seed: differences are float noise)


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


@pytest.fixture(scope="module")
def card():
    return demo.model_card()


def test_loads_offline_with_network_blocked():
    # A fresh interpreter with the hub switched off and every socket connection refused.
    code = (
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('network disabled in test')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import circuitwidgets as cw\n"
        "m = cw.demo_model()\n"
        "print(m.to_tokens('ab').tolist(), m.cfg.n_ctx)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[[0, 2, 3]] 64"


def test_config_matches_documentation(model, card):
    cfg = model.cfg
    for key, value in demo.CONFIG.items():
        assert getattr(cfg, key) == value, key
        assert card["config"][key] == value, key
    assert (cfg.d_model, cfg.d_head, cfg.n_heads, cfg.n_layers, cfg.n_ctx, cfg.d_vocab) == (64, 16, 4, 2, 64, 64)
    assert cfg.attn_only and cfg.normalization_type is None
    assert not model.training
    assert cw.ModelView(model).W_pos.shape == (64, 64)


def test_tokenizer_bos_lowercase_and_unknown(model):
    assert model.to_tokens("abc").tolist() == [[0, 2, 3, 4]]
    assert model.to_str_tokens("abc") == ["<bos>", "a", "b", "c"]
    assert model.to_str_tokens("Hi é\t") == ["<bos>", "h", "i", " ", "<unk>", "<unk>"]
    assert torch.equal(model.to_tokens("The Cat."), model.to_tokens("the cat."))
    assert model.to_tokens("<>~é").tolist() == [[0, 1, 1, 1, 1]]  # one <unk> per character
    # every documented character is exactly one token of its own
    tokens = model.to_tokens(demo.CHARS)[0]
    assert tokens.tolist() == [0, *range(2, 64)]
    assert model.tokenizer.bos_token_id == 0 and model.tokenizer.unk_token_id == 1
    assert len(model.tokenizer) == model.cfg.d_vocab
    assert sorted(cw.ModelView(model).special_token_ids) == [0, 1]
    # one token per character after BOS, so a repeated sentence fits
    prompt = "The cat sat on the mat. The cat sat on the mat."
    assert model.to_tokens(prompt).shape == (1, len(prompt) + 1)


def test_tokenizer_folder_loads_with_transformers():
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(demo.TOKENIZER_DIR), local_files_only=True)
    assert tok.bos_token == "<bos>" and tok.unk_token == "<unk>"
    assert tok("Ab")["input_ids"] == [0, 2, 3]


def test_each_call_returns_an_independent_model(model):
    other = cw.demo_model()
    assert other is not model
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    fresh = cw.demo_model()
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)


def test_documented_heads_are_the_top_scorers(model, card):
    previous = [tuple(h) for h in card["heads"]["previous_token"]]
    induction = [tuple(h) for h in card["heads"]["induction"]]
    assert previous and induction
    assert all(layer == 0 for layer, _ in previous) and all(layer == 1 for layer, _ in induction)
    prev_scores = cw.analysis.head_scores(model, "previous_token")
    ind_scores = cw.analysis.head_scores(model, "induction")
    # the documented heads are the highest scorers of their layer, and all the heads above threshold
    assert (0, int(prev_scores[0].argmax())) in previous
    assert (1, int(ind_scores[1].argmax())) in induction
    others0 = [h for h in range(4) if (0, h) not in previous]
    others1 = [h for h in range(4) if (1, h) not in induction]
    assert all(prev_scores[0, h] < min(prev_scores[0, j] for _, j in previous) for h in others0)
    assert all(ind_scores[1, h] < min(ind_scores[1, j] for _, j in induction) for h in others1)
    for layer, head in induction:
        assert ind_scores[layer, head] >= demo_train.HEAD_THRESHOLD
        assert ind_scores[layer, head] > 10 * ind_scores[0].max()  # layer 0 cannot do induction
    for layer, head in previous:
        assert prev_scores[layer, head] > 10 * prev_scores[1].max()
    # and the card's numbers are what the analysis library computes now
    for kind, scores in (("previous_token", prev_scores), ("induction", ind_scores)):
        assert torch.allclose(scores, torch.tensor(card["head_scores"][kind]), atol=TOL), kind


def test_card_scores_match_recomputed(model, card):
    for kind in cw.analysis.HEAD_SCORE_KINDS:
        recomputed = cw.analysis.head_scores(model, kind)
        assert torch.allclose(recomputed, torch.tensor(card["head_scores"][kind]), atol=TOL), kind
    assert torch.allclose(cw.analysis.copying_scores(model), torch.tensor(card["copying_scores"]), atol=TOL)


def test_induction_heads_k_compose_with_previous_token_heads(model, card):
    k_comp = cw.analysis.composition_scores(model, "K")
    baseline = cw.analysis.composition_baseline(model, kind="K")
    previous = {h for _, h in card["heads"]["previous_token"]}
    for _, head in card["heads"]["induction"]:
        column = k_comp[0, :, 1, head]
        assert int(column.argmax()) in previous
        assert float(column.max()) > baseline
        recorded = card["k_composition_into_induction_heads"][f"1.{head}"]
        assert torch.allclose(column, torch.tensor([recorded[f"0.{h}"] for h in range(4)]), atol=TOL)


def test_second_copy_loss_far_below_first(model, card):
    losses = demo_train.copy_losses(model)
    assert losses["second_copy"] < losses["first_copy"] / 3
    # the first copy is unpredictable: near the uniform loss over the 62 characters
    assert abs(losses["first_copy"] - card["loss"]["uniform"]) < 0.2
    assert losses == pytest.approx({k: card["loss"][k] for k in losses}, abs=TOL)


def test_ablating_previous_token_heads_breaks_induction(model, card):
    previous = [tuple(h) for h in card["heads"]["previous_token"]]
    clean = demo_train.copy_losses(model)["second_copy"]
    ablated = demo_train.copy_losses(model, previous)["second_copy"]
    assert ablated > clean + 1.0
    assert ablated == pytest.approx(card["ablation"]["previous_token_heads"]["second_copy"], abs=TOL)


def test_evaluate_recomputes_the_card(model, card):
    metrics = demo_train.evaluate(model)
    assert metrics["heads"] == card["heads"]
    assert metrics["loss"] == pytest.approx(card["loss"], abs=TOL)
    for kind, rows in metrics["head_scores"].items():
        assert torch.allclose(torch.tensor(rows), torch.tensor(card["head_scores"][kind]), atol=TOL)
    json.dumps(metrics)  # JSON-ready


def test_make_batch_recipe():
    tokens, first, second = demo_train.make_batch(256, torch.Generator().manual_seed(1))
    assert tokens.shape == (256, 64)
    assert (tokens[:, 0] == 0).all() and (tokens[:, 1:] >= 2).all() and (tokens < 64).all()
    lengths = first.sum(1) + 1  # targets 2..L of each copy
    assert lengths.min() >= demo_train.MIN_SEGMENT and lengths.max() <= demo_train.MAX_SEGMENT
    assert torch.equal(first.sum(1), second.sum(1))
    assert torch.equal(tokens[:, 1:][first], tokens[:, 1:][second])
    # the second copy starts after the first one ends
    first_end = first.float().argmax(1) + lengths - 1
    second_start = second.float().argmax(1)
    assert (second_start >= first_end).all()


def test_training_loop_lowers_the_loss():
    untrained = demo.boot(seed=3)
    before = demo_train.copy_losses(untrained, batch=64)["all"]
    # a large learning rate so that 40 small steps visibly learn the token statistics
    # (no <bos>/<unk> after position 0: the untrained loss ~ln 64 falls toward ln 62)
    model, history = demo_train.train(seed=3, steps=40, batch=16, lr=1e-2, progress=False)
    after = demo_train.copy_losses(model, batch=64)["all"]
    assert len(history) == 40 and not model.training
    assert after < before - 0.01  # same held-out batch before and after: no sampling noise
    assert sum(history[-5:]) / 5 < history[0]


def test_train_command_writes_loadable_files(tmp_path):
    assert demo_train.main(["--steps", "3", "--seed", "5", "--out", str(tmp_path), "--no-progress"]) == 0
    card = json.loads((tmp_path / "model_card.json").read_text())
    assert card["config"]["seed"] == 5 and card["training"]["steps"] == 3
    assert card["versions"]["torch"] == torch.__version__
    from safetensors.torch import load_file

    model = demo.boot(seed=0, tokenizer=demo.load_tokenizer(tmp_path / "tokenizer"))
    model.load_state_dict(load_file(str(tmp_path / "weights.safetensors")), strict=True)
    assert model.to_tokens("ab").tolist() == [[0, 2, 3]]


def test_bad_arguments():
    with pytest.raises(TypeError, match="seed"):
        demo.boot(seed="0")
    with pytest.raises(ValueError, match="steps"):
        demo_train.train(steps=0, progress=False)
    with pytest.raises(ValueError, match="reserved"):
        demo_train.train(seed=demo_train.EVAL_SEED, steps=1, progress=False)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        demo.load_tokenizer("/nonexistent-folder")


def test_bridge_computes_the_written_out_forward_pass(model):
    from reference_forward import reference_logits

    tokens = model.to_tokens("the cat sat on the mat. the cat sat on the mat.")
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), reference_logits(tokens), atol=1e-4, rtol=1e-4)


def test_hooked_state_is_the_bridge_weights_in_hooked_transformer_layout(model):
    view = cw.as_view(model)
    state = demo.hooked_state()
    for layer in range(2):
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
            torch.testing.assert_close(state[f"blocks.{layer}.attn.{name}"], getattr(view, name)[layer])
        torch.testing.assert_close(state[f"blocks.{layer}.attn.b_O"], view.b_O[layer])
    torch.testing.assert_close(state["unembed.W_U"], view.W_U)
    torch.testing.assert_close(state["embed.W_E"], view.W_E)
    torch.testing.assert_close(state["pos_embed.W_pos"], view.W_pos)
    with pytest.raises(ImportError, match="TransformerLens 2.x"):
        demo.hooked_transformer()  # TransformerLens 4 has no HookedTransformer
