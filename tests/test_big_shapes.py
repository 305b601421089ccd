"""Issue 22: the composition scores of every head pair report progress, and the Llama 3.2 shapes of
benchmarks/bench_big_models.py are what they claim (built on the meta device or at a tiny width: no
big allocation)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets import weight_views
from circuitwidgets.analysis.composition import composition_scores, pair_count

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_big_models.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_big_models", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_composition_progress_reports_every_pair_and_changes_nothing(monkeypatch):
    model = small_bridge(n_layers=3)
    plain = composition_scores(model, "K")
    monkeypatch.setattr(weight_views, "PAIR_BLOCK_ENTRIES", 1)  # one reader head per chunk: many reports
    reports: list[tuple[int, int]] = []
    chunked = composition_scores(model, "K", progress=lambda done, total: reports.append((done, total)))
    total = pair_count(3, 4)
    assert total == 16 * 3 and len(reports) > 3
    assert all(t == total for _, t in reports)
    dones = [d for d, _ in reports]
    assert dones == sorted(set(dones)) and dones[-1] == total
    torch.testing.assert_close(chunked, plain, equal_nan=True)
    assert int(torch.isfinite(plain).sum()) == total
    with pytest.raises(TypeError, match="progress"):
        composition_scores(model, "K", progress="yes")


def test_composition_progress_bar_and_one_layer(capsys):
    scores = composition_scores(cw.demo_model(), "V", progress=True)  # a tqdm bar (stderr), the same scores
    torch.testing.assert_close(scores, composition_scores(cw.demo_model(), "V"), equal_nan=True)
    reports: list[tuple[int, int]] = []
    composition_scores(small_bridge(n_layers=1), "Q", progress=lambda *r: reports.append(r))
    assert reports == [(0, 0)]  # no pair, still one report that it is done


@pytest.mark.parametrize("shape, llama_parameters", [("llama-3.2-1b", 1_235_814_400), ("llama-3.2-3b", 3_212_749_824)])
def test_llama_3_2_shapes_have_llamas_parameter_count(bench, shape, llama_parameters):
    model = bench.build(shape, "meta")  # no values, no memory
    params = sum(p.numel() for p in model.parameters())
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model.cfg.rotary_base == 500000 and model.cfg.n_key_value_heads == 8 and model.cfg.d_vocab == 128256
    # Llama has no attention biases; boot_native's q, k, v, o have them: n_layers x (2 d_model + 2 x 8 x d_head) more
    cfg = model.cfg
    biases = cfg.n_layers * (2 * cfg.n_heads * cfg.d_head + 2 * 8 * cfg.d_head)
    assert params - biases == llama_parameters  # tied embeddings, gated MLP, RMSNorm weights


def test_bench_build_is_boot_native_in_bfloat16_tied(bench):
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    tiny = dict(d_model=64, d_head=16, n_heads=4, n_key_value_heads=2, n_layers=2, d_mlp=96, d_vocab=100, n_ctx=32)
    untied = bench.build("llama-3.2-1b", tie_word_embeddings=False, **tiny)
    fields = {**bench.SHAPES["llama-3.2-1b"], **tiny, "tie_word_embeddings": False}
    stock = TransformerBridge.boot_native(TransformerBridgeConfig(**fields, seed=0, dtype=torch.bfloat16), dtype=torch.bfloat16)
    assert torch.get_default_dtype() == torch.float32  # restored
    for (name, ours), theirs in zip(untied.named_parameters(), stock.parameters(), strict=True):
        assert ours.dtype == torch.bfloat16 and torch.equal(ours, theirs), name  # float32 draws rounded the same
    model = bench.build("llama-3.2-1b", **tiny)  # (held: a view holds its model weakly)
    tied = cw.as_view(model)
    assert torch.equal(tied.W_U, tied.W_E.T)
    assert tied.W_Q.shape == (2, 4, 64, 16) and tied.W_K.shape == (2, 4, 64, 16)  # 2 K/V heads, each read by 2
    masks = [m.causal_mask for m in untied.modules() if "causal_mask" in m._buffers]
    assert len(masks) == 2 and masks[0] is masks[1]  # one mask for every layer
