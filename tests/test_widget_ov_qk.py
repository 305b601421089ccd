"""OVCircuit and QKCircuit without a browser: payloads decode to what circuitwidgets.analysis computes,
token subsets, traits, bad input, caching, rotary models, export."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import torch
import traitlets
from ipywidgets.widgets.widget import _remove_buffers
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

import circuitwidgets as cw
from circuitwidgets import transport
from circuitwidgets.analysis import (
    copying_scores,
    full_ov_circuit,
    full_qk_circuit,
    ov_eigenvalues,
    ov_top_k_accuracy,
    positional_qk,
)
from circuitwidgets.model import DEFAULT_COUNT, MAX_TOKENS
from circuitwidgets.widgets import _cache
from circuitwidgets.widgets.ov import OVCircuit
from circuitwidgets.widgets.qk import QKCircuit


@pytest.fixture(scope="module")
def big_vocab():
    """No tokenizer, a vocabulary too large to show whole (1 000 tokens), learned positions."""
    cfg = TransformerBridgeConfig(
        d_model=32, d_head=8, n_heads=3, n_layers=2, n_ctx=200, d_vocab=1000, attn_only=True,
        normalization_type=None, seed=1,
    )
    return TransformerBridge.boot_native(cfg).eval()


@pytest.fixture(scope="module")
def rotary():
    cfg = TransformerBridgeConfig(
        d_model=32, d_head=8, n_heads=2, n_layers=1, n_ctx=16, d_vocab=50, attn_only=True,
        normalization_type=None, positional_embedding_type="rotary", seed=0,
    )
    return TransformerBridge.boot_native(cfg).eval()


def eig_pairs(w) -> torch.Tensor:
    return transport.decode(w.eigenvalues)


# ----- OV -------------------------------------------------------------------------------------


def test_ov_payload_matches_analysis_for_every_head(planted_words):
    model, heads = planted_words
    layer, head = heads["induction"]
    w = OVCircuit(model, layer, head)
    assert w.error == ""
    assert w.token_criterion == "the whole vocabulary (64 tokens)" and w.tokens == list(range(64))
    assert w.str_tokens[:3] == ["<bos>", "t1", "t2"]
    assert w.ov["shape"] == [4, 64, 64] and len(w.ov["data"]) == 4 * 64 * 64
    exact = transport.decode(w.values)
    codes = transport.decode(w.ov)
    for h in range(4):
        ref = full_ov_circuit(model, layer, h).block(w.tokens, w.tokens)
        assert torch.allclose(exact[h], ref, atol=1e-5), h
        lo, hi = w.ov["ranges"][h]
        assert hi == -lo and hi >= ref.abs().max() - 1e-6
        assert (codes[h] - ref).abs().max() <= (hi - lo) / 254 / 2 + 1e-5
    # the planted_words induction head copies: its full OV circuit is diagonal (10 on it, 0 elsewhere)
    block = w.current_block()
    assert torch.equal(block.argmax(dim=1)[1:], torch.arange(1, 64))


def test_ov_eigenvalues_copying_and_top_k(planted_words):
    model, heads = planted_words
    layer, head = heads["induction"]
    w = OVCircuit(model, layer, head)
    pairs = eig_pairs(w)
    assert w.eigenvalues["shape"] == [4, 32, 2]
    scores = copying_scores(model)
    for h in range(4):
        ref = ov_eigenvalues(model, layer, h)
        got = torch.complex(pairs[h, :, 0].double(), pairs[h, :, 1].double())
        # the same multiset of values: compare sorted by (real, imaginary)
        key = lambda z: sorted(zip(z.real.tolist(), z.imag.tolist(), strict=True))  # noqa: E731
        assert torch.allclose(torch.tensor(key(got)), torch.tensor(key(ref)), atol=1e-4 * max(1.0, float(ref.abs().max())))
        assert w.stats[h]["copying"] == pytest.approx(float(scores[layer, h]), abs=1e-5)
    assert w.stats[head]["copying"] == pytest.approx(1.0, abs=1e-5)
    # no event loop here, so top-k of the shown head is computed at once
    assert w.stats[head]["top1"] == pytest.approx(ov_top_k_accuracy(model, layer, head, k=1))
    assert w.stats[head]["top5"] == pytest.approx(ov_top_k_accuracy(model, layer, head, k=5))
    assert w.stats[head]["top1"] == 1.0 and w.progress == ""
    w.head = 0
    assert w.stats[0]["top1"] == pytest.approx(ov_top_k_accuracy(model, layer, 0, k=1))


def test_token_subsets(planted_words, big_vocab):
    model, _ = planted_words
    w = OVCircuit(model, 1, 1, prompt="t5 t3 t5 t9")
    assert w.tokens == [5, 3, 9] and w.str_tokens == ["t5", "t3", "t9"]
    assert "distinct tokens of the prompt" in w.token_criterion
    w = OVCircuit(model, 1, 1, tokens=["t7", 2, 7, torch.tensor(4).item()])
    assert w.tokens == [7, 2, 4] and w.token_criterion == "tokens chosen by the caller"
    w = OVCircuit(model, 1, 1, tokens=torch.tensor([3, 1]))
    assert w.tokens == [3, 1]
    # large vocabulary, no tokenizer: a seeded random sample, ids as labels, never the whole matrix
    a, b = OVCircuit(big_vocab, 0, 0, accuracy=False), QKCircuit(big_vocab, 1, 2)
    assert len(a.tokens) == DEFAULT_COUNT and a.tokens == sorted(a.tokens) and a.tokens == b.tokens
    assert "random" in a.token_criterion and "seed 0" in a.token_criterion
    assert a.str_tokens == [str(i) for i in a.tokens]
    assert a.stats[0]["top1"] is None  # accuracy=False


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"tokens": "t1 t2"}, TypeError, "prompt="),
        ({"tokens": [1, 99]}, ValueError, "99 is out of range: 0..63"),
        ({"tokens": ["t1 t2"]}, ValueError, "2 tokens, not one"),
        ({"tokens": [1.5]}, TypeError, "ints or strings"),
        ({"tokens": []}, ValueError, "empty"),
        ({"tokens": [1], "prompt": "t1"}, ValueError, "either tokens or prompt"),
        ({"prompt": ""}, ValueError, "prompt is empty"),
        ({"layer": 2}, traitlets.TraitError, "layer=2 is out of range: this model has layers 0..1"),
        ({"head": 4}, traitlets.TraitError, "head=4 is out of range"),
    ],
)
def test_bad_arguments(planted_words, kwargs, error, match):
    model, _ = planted_words
    args = {"layer": 0, "head": 0, **kwargs}
    for cls in (OVCircuit, QKCircuit):
        with pytest.raises(error, match=re.escape(match)):
            cls(model, **args)


def test_too_many_tokens_and_strings_without_tokenizer(big_vocab):
    with pytest.raises(ValueError, match=f"at most {MAX_TOKENS}"):
        OVCircuit(big_vocab, 0, 0, tokens=list(range(MAX_TOKENS + 1)))
    with pytest.raises(TypeError, match="no tokenizer"):
        QKCircuit(big_vocab, 0, 0, tokens=["a"])


def test_out_of_range_from_python_shows_in_widget_and_keeps_picture(planted_words):
    model, _ = planted_words
    for w in (OVCircuit(model, 1, 1), QKCircuit(model, 1, 1)):
        before = (w.layer, w.head, w.values)
        with pytest.raises(traitlets.TraitError, match="head=7 is out of range"):
            w.head = 7
        assert "head=7 is out of range: this model has heads 0..3" in w.error
        assert (w.layer, w.head, w.values) == before
        with pytest.raises(traitlets.TraitError):
            w.tokens = [1, 500]
        assert "500 is out of range" in w.error
        w.head = 2  # a good value clears the control error
        assert w.error == "" or "500" in w.error
        w.tokens = [1, 2]
        assert w.error == "" and w.str_tokens == ["t1", "t2"]


def test_layer_change_recomputes_and_switching_back_is_cached(planted_words, monkeypatch):
    model, _ = planted_words
    _cache.clear(model)
    w = OVCircuit(model, 0, 0, tokens=[1, 2, 3])
    calls = []
    real = cw.analysis.full_ov_block
    monkeypatch.setattr(cw.analysis, "full_ov_block", lambda *a: (calls.append(a[1]), real(*a))[1])
    w.layer = 1
    assert calls == [1] and w.ov["layer"] == 1  # every head of the layer in one call
    assert torch.allclose(w.current_block(), full_ov_circuit(model, 1, 0).block([1, 2, 3], [1, 2, 3]), atol=1e-5)
    w.layer = 0
    w.layer = 1
    assert calls == [1]  # both layers came from the per-model cache
    runs = w.refresh_count
    w.head = 3  # head switch: nothing recomputed, the browser has the layer
    assert w.refresh_count == runs


def test_accuracy_runs_in_background_with_an_event_loop(planted_words):
    model, _ = planted_words

    async def scenario():
        _cache.clear(model)
        w = OVCircuit(model, 1, 2, tokens=[1, 2])
        assert w.stats[2]["top1"] is None and "computing top-1/top-5" in w.progress
        for _ in range(400):
            await asyncio.sleep(0.01)
            if w.stats[2]["top1"] is not None:
                break
        return w

    w = asyncio.run(scenario())
    assert w.progress == ""
    assert w.stats[2]["top1"] == pytest.approx(ov_top_k_accuracy(model, 1, 2, k=1))
    assert w.stats[2]["top5"] == pytest.approx(ov_top_k_accuracy(model, 1, 2, k=5))


def test_background_accuracy_runs_only_for_the_head_that_stays(planted_words):
    model, _ = planted_words

    async def scenario():
        _cache.clear(model)
        w = OVCircuit(model, 1, 0, tokens=[1, 2])
        for head in (1, 2, 3):  # stepping through heads faster than the settle delay
            w.head = head
        assert "L1H3" in w.progress
        for _ in range(400):
            await asyncio.sleep(0.01)
            if w.stats[3]["top1"] is not None and w.progress == "":
                break
        return w

    w = asyncio.run(scenario())
    assert w.stats[3]["top1"] == pytest.approx(ov_top_k_accuracy(model, 1, 3, k=1))
    assert [_cache.is_cached(model, ("ov_top_k", 1, h)) for h in range(4)] == [False, False, False, True]
    assert [row["top1"] for row in w.stats[:3]] == [None, None, None]


# ----- QK -------------------------------------------------------------------------------------


def test_qk_payload_matches_analysis(planted_words):
    model, heads = planted_words
    layer, head = heads["induction"]
    w = QKCircuit(model, layer, head, tokens=list(range(1, 20)))
    assert w.error == "" and w.positional_note == ""
    exact = transport.decode(w.values)
    codes = transport.decode(w.qk)
    for h in range(4):
        ref = full_qk_circuit(model, layer, h, scaled=True).block(w.tokens, w.tokens)
        assert torch.allclose(exact[h], ref, atol=1e-4), h
        lo, hi = w.qk["ranges"][h]
        assert (codes[h] - ref).abs().max() <= (hi - lo) / 254 / 2 + 1e-4
    assert w.positions == 64 and w.positional["shape"] == [4, 64, 64] and w.positional["layout"] == "tril"
    pos = transport.decode(w.positional)
    for h in range(4):
        assert (pos[h] - positional_qk(model, layer, h)).abs().max() <= transport.quantisation_step(w.positional) + 1e-6


def test_previous_token_head_shows_its_stripe(planted_words):
    model, heads = planted_words
    layer, head = heads["previous_token"]
    w = QKCircuit(model, layer, head, positions=40)
    pos = transport.decode(w.positional)[head]
    assert pos.shape == (40, 40)
    assert torch.equal(pos[1:].argmax(dim=1), torch.arange(0, 39))  # query i attends to i - 1
    assert float(pos.diagonal(-1).min()) > 0.9  # the stripe just below the diagonal
    with pytest.raises(traitlets.TraitError, match=re.escape("positions=65 is out of range: 1..64")):
        w.positions = 65


def test_rotary_model_gets_its_own_positional_view_and_captions(rotary):
    w = QKCircuit(rotary, 0, 1)
    assert w.error == "" and w.positional_note == "" and w.positional["shape"] == [2, 16, 16]
    expected = positional_qk(rotary, 0, positions=16)
    torch.testing.assert_close(transport.decode(w.positional), expected, atol=1 / 255, rtol=0)
    assert w.positional["caption"].startswith("Rotary positions: the head's attention on one token repeated")
    assert "rotation of queries and keys by position is left out" in w.qk["caption"]
    assert w.qk["shape"] == [2, 50, 50]
    with w.model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", lambda x, hook: torch.full_like(x, 0.5))]):
        w.refresh()  # a run with hooks is never served from (or stored in) the cache
        assert float(transport.decode(w.positional)[0, 3, 0]) == pytest.approx(0.5, abs=1 / 255)
    w.refresh()
    torch.testing.assert_close(transport.decode(w.positional), expected, atol=1 / 255, rtol=0)
    ov = OVCircuit(rotary, 0, 1)
    assert ov.error == "" and ov.ov["shape"] == [2, 50, 50]


def test_learned_positions_caption(demo):
    w = QKCircuit(demo, 0, 0, tokens=[2, 3])
    assert w.positional["caption"].startswith("softmax over sources of mask(W_pos W_Q W_Kᵀ W_posᵀ")
    assert w.qk["caption"] == "Token embeddings only: positions and biases left out."  # no norm in the demo model
    assert OVCircuit(demo, 0, 0, tokens=[2, 3]).ov["caption"] == w.qk["caption"]


# ----- both -----------------------------------------------------------------------------------


def test_traits_are_synced_and_documented():
    for cls, names in (
        (OVCircuit, ("ov", "values", "eigenvalues", "stats", "progress")),
        (QKCircuit, ("qk", "values", "positions", "positional", "positional_note")),
    ):
        for name in ("layer", "head", "tokens", "str_tokens", "token_criterion", "info", "error", "busy", *names):
            trait = cls.class_traits()[name]
            assert trait.metadata.get("sync") is True, (cls, name)
            assert trait.help, f"{cls.__name__}.{name} has no help text"
            documented = " ".join(c.__doc__ or "" for c in cls.__mro__ if c.__module__.startswith("circuitwidgets"))
            assert name in documented, f"{name} not in the docstrings of {cls.__name__} or its bases"
        w = cls(cw.demo_model(), 1, 0, tokens=[2, 3])
        _, paths, _ = _remove_buffers(w.get_state(["values"]))
        assert paths == [["values", "data"]]  # exact values travel as one binary buffer


def test_save_html_carries_every_head(planted_words, tmp_path):
    model, _ = planted_words
    for cls, name in ((OVCircuit, "ov"), (QKCircuit, "qk")):
        w = cls(model, 1, 1, tokens=[1, 2, 3])
        path = w.save_html(tmp_path / f"{name}.html")
        page = path.read_text()
        assert "cdn" not in page.lower() and "https://" not in page
        state = json.loads(re.search(r'<script type="application/json" id="cw-state">(.*?)</script>', page, re.S).group(1))
        saved = state["widgets"][0]
        assert saved["_cw_view"] == name and saved["head"] == 1
        assert saved[name]["shape"] == [4, 3, 3] and "$bytes" in saved[name]["data"]
