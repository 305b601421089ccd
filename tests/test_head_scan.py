"""`analysis.scan_heads` / `HeadScan`: dataset-wide head metrics equal a brute force over each text's patterns.

The reference computes every metric from `analysis.attention_patterns` of one text at a time, with plain loops
over destinations written from the spec's definitions (circuits-spec.md, "Dataset-wide head metrics"), on every
local backend: TransformerLens 4 bridges (no norm, LayerNorm with MLPs, rotary with grouped K/V), an ablated
model, Hugging Face models through nnsight (locally and through the remote path, ``remote="local"``).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets.analysis.head_scan import PATTERN_METRICS, SCAN_METRICS, HeadScan, scan_heads


def repeating_texts(d_vocab: int, n: int = 12, seed: int = 0, longest: int = 24) -> list[list[int]]:
    """Texts of different lengths with repeats (a block copied later, tokens reused), BOS 0 first."""
    gen = torch.Generator().manual_seed(seed)
    texts = []
    for i in range(n):
        length = int(torch.randint(4, longest + 1, (1,), generator=gen))
        body = torch.randint(2, d_vocab, (length - 1,), generator=gen)
        if length > 8 and i % 3:
            block = int(torch.randint(2, (length - 1) // 2, (1,), generator=gen))
            body[-block:] = body[:block]  # an induction-friendly repeat
        texts.append([0, *body.tolist()])
    texts.append([0, 5, 5, 5, 5])  # duplicates everywhere
    texts.append([0, 7])  # a text too short for most targets
    return texts


def destination_value(row: torch.Tensor, ids: list[int], d: int, metric: str) -> torch.Tensor | None:
    """`metric` at destination `d` from its attention row ``[..., n]``, or None where the metric is undefined there."""
    if metric == "previous_token":
        return row[..., d - 1] if d >= 1 else None
    if metric == "first_token":
        return row[..., 0] if d >= 1 else None
    if metric == "duplicate_token":
        copies = [j for j in range(d) if ids[j] == ids[d]]
        return row[..., copies].sum(-1) if copies else None
    if metric == "induction":
        after = sorted({j + 1 for j in range(d - 1) if ids[j] == ids[d]})
        return row[..., after].sum(-1) if after else None
    if metric == "entropy":
        return -(row * torch.where(row > 0, row.log(), torch.zeros_like(row))).sum(-1)  # 0 log 0 = 0
    if metric == "distance":
        return sum(row[..., s] * (d - s) for s in range(d + 1))
    return row[..., d]  # self


def brute_force(pattern: torch.Tensor, ids: list[int]) -> dict[str, torch.Tensor]:
    """Every pattern metric of one text, ``[L, H]``, from its patterns ``[L, H, n, n]``: a loop over destinations."""
    result = {}
    for metric in PATTERN_METRICS:
        values = [destination_value(pattern[..., d, :].double(), ids, d, metric) for d in range(len(ids))]
        values = [v for v in values if v is not None]
        result[metric] = torch.stack(values).mean(0).float() if values else torch.full(pattern.shape[:2], float("nan"))
    return result


def check_against_brute_force(model, texts, scan: HeadScan, tolerance: float = 1e-5) -> None:
    for i, ids in enumerate(texts):
        assert scan.tokens_of(i) == ids
        expected = brute_force(cw.analysis.attention_patterns(model, torch.tensor([ids])), ids)
        for metric in scan.metrics:
            got = scan.values[metric][i]
            assert torch.equal(torch.isnan(got), torch.isnan(expected[metric])), (metric, i)
            difference = (got - expected[metric]).nan_to_num().abs().max()
            assert float(difference) <= tolerance, (metric, i, float(difference))


@pytest.fixture(scope="module")
def demo():
    return cw.demo_model()


@pytest.fixture(scope="module")
def demo_scan(demo):
    texts = repeating_texts(demo.cfg.d_vocab, longest=60)
    return texts, scan_heads(demo, texts, progress=False, batch_size=5)


def test_per_text_values_equal_brute_force_on_the_demo_model(demo, demo_scan):
    texts, scan = demo_scan
    assert scan.complete and scan.n_texts == len(texts)
    check_against_brute_force(demo, texts, scan)
    # undefined where the definition has no destination: no repeat in the last text
    assert bool(scan.values["induction"][-1].isnan().all())
    assert not bool(scan.values["previous_token"][-1].isnan().any())


@pytest.mark.parametrize(
    "overrides",
    [
        dict(normalization_type="LN", attn_only=False, d_mlp=64, act_fn="gelu"),
        dict(positional_embedding_type="rotary", n_key_value_heads=2, normalization_type="RMS", attn_only=False, d_mlp=64,
             act_fn="silu"),
    ],
    ids=["layernorm-mlp", "rotary-gqa"],
)
def test_per_text_values_equal_brute_force_on_other_bridges(overrides):
    model = small_bridge(**overrides)
    texts = repeating_texts(model.cfg.d_vocab, n=6, seed=1)
    check_against_brute_force(model, texts, scan_heads(model, texts, progress=False))


def test_an_ablated_model_is_scanned_ablated(demo):
    ablated = cw.analysis.ablated(demo, [(0, 1), (0, 3)])  # the previous-token heads: induction breaks
    texts = repeating_texts(demo.cfg.d_vocab, n=5, seed=2, longest=40)
    scan = scan_heads(ablated, texts, progress=False)
    check_against_brute_force(ablated, texts, scan)
    plain = scan_heads(demo, texts, progress=False)
    assert float(scan.mean("induction")[1].mean()) < float(plain.mean("induction")[1].mean()) - 0.05


@pytest.mark.parametrize("remote", [False, "local"])
def test_hugging_face_models_through_nnsight_reduce_in_the_trace(remote):
    nnsight = pytest.importorskip("nnsight")  # a test extra: always installed by `make test`
    hf, tokenizer = cw.demo.tiny_hf_model("llama")
    model = cw.HFView(nnsight.TransformersModel(hf, tokenizer=tokenizer), remote=remote)
    texts = repeating_texts(len(tokenizer), n=5, seed=3)
    scan = scan_heads(model, texts, progress=False)
    check_against_brute_force(model, texts, scan)
    if remote:  # only per-destination values came back, never a pattern
        assert 0 < model.bytes_received < 5 * len(texts) * len(scan.layers) * scan.n_heads * 30 * 4 * len(scan.metrics)


def test_the_demo_heads_top_their_metrics(demo):
    texts = cw.analysis.repeated_random_tokens(demo, seq_len=20, batch=32, seed=5)
    scan = scan_heads(demo, texts, progress=False)
    card = cw.demo.model_card()["heads"]
    previous = scan.mean("previous_token")
    for layer, head in card["previous_token"]:
        assert float(previous[layer, head]) == pytest.approx(float(previous.max()), abs=0.1)
        assert float(previous[layer, head]) > 0.8
    others = [float(previous[ly, hd]) for ly in range(2) for hd in range(4) if [ly, hd] not in card["previous_token"]]
    assert max(others) < 0.4
    induction = scan.mean("induction")
    assert float(induction[1].min()) > 0.3 > float(induction[0].max())
    assert float(scan.mean("first_token")[1].mean()) > float(scan.mean("first_token")[0].mean())  # layer 1 parks on BOS


def test_top_lists_the_strongest_destinations_of_every_text(demo, demo_scan):
    texts, scan = demo_scan
    layer, head = 1, 2
    rows = [cw.analysis.attention_patterns(demo, torch.tensor([ids]))[layer, head].double() for ids in texts]
    for metric in PATTERN_METRICS:
        candidates = []
        for i, ids in enumerate(texts):
            for d in range(len(ids)):
                value = destination_value(rows[i][d], ids, d, metric)
                if value is not None:
                    candidates.append((float(value), i, d))
        candidates.sort(key=lambda c: -c[0])
        top = scan.top(layer, head, metric, k=6)
        assert [v for _, _, v in top] == pytest.approx([v for v, _, _ in candidates[:6]], abs=1e-5, rel=1e-6), metric
        for text, destination, value in top:  # (ties may list either of two equal destinations)
            close = [(i, d) for v, i, d in candidates if abs(v - value) < 1e-5 * max(1.0, abs(v))]
            assert (text, destination) in close, metric


def test_deciles_pick_the_middle_text_of_each_tenth(demo):
    texts = cw.analysis.repeated_random_tokens(demo, seq_len=12, batch=40, seed=7)
    scan = scan_heads(demo, texts, metrics=["induction"], progress=False)
    picks = scan.deciles(1, 0, "induction")
    per_text = scan.values["induction"][:, 1, 0]
    ranked = per_text.argsort(stable=True).tolist()
    assert [p[0] for p in picks] == list(range(9, -1, -1))
    for decile, text, destination, value in picks:
        assert ranked.index(text) // 4 == decile  # 40 texts: 4 a decile
        assert value == pytest.approx(float(per_text[text]))
        assert destination == int(scan.peak_positions["induction"][text, 1, 0]) and destination > 12
    values = [p[3] for p in picks]
    assert values == sorted(values, reverse=True)


def test_batches_and_order_do_not_change_the_values(demo, demo_scan):
    texts, scan = demo_scan
    one_by_one = scan_heads(demo, texts, progress=False, batch_size=1)
    for metric in scan.metrics:
        assert torch.allclose(one_by_one.values[metric], scan.values[metric], atol=1e-6, equal_nan=True), metric
        assert torch.equal(one_by_one.peak_positions[metric], scan.peak_positions[metric]), metric
    reordered = scan_heads(demo, texts[::-1], progress=False)
    assert torch.allclose(reordered.values["self"].flip(0), scan.values["self"], atol=1e-6)


def test_a_stopped_scan_resumes_to_the_full_scan(demo, demo_scan):
    texts, full = demo_scan
    seen = []

    def stop() -> bool:
        return len(seen) >= 2

    partial = scan_heads(demo, texts, progress=lambda done, total: seen.append(done), batch_size=5, stop=stop)
    assert not partial.complete and 0 < partial.n_done < len(texts)
    assert bool(partial.values["self"][~partial.done].isnan().all())
    assert "scanned" in repr(partial)
    again = scan_heads(demo, texts, batch_size=5, progress=False, resume=partial)
    assert again is partial and again.complete
    for metric in full.metrics:
        assert torch.allclose(again.values[metric], full.values[metric], atol=1e-6, equal_nan=True)
        assert [v for _, _, v in again.top(1, 1, metric, k=8)] == pytest.approx([v for _, _, v in full.top(1, 1, metric, k=8)])


def test_an_interrupt_keeps_the_partial_scan(demo, demo_scan):
    texts, full = demo_scan

    def interrupt(done: int, total: int) -> None:
        if 0 < done < total:
            raise KeyboardInterrupt

    with pytest.warns(UserWarning, match="resume=scan"):
        partial = scan_heads(demo, texts, progress=interrupt, batch_size=4)
    assert 0 < partial.n_done < len(texts)
    scan_heads(demo, texts, progress=False, batch_size=4, resume=partial)
    assert torch.allclose(partial.values["induction"], full.values["induction"], atol=1e-6, equal_nan=True)
    # a batch done twice (interrupted after its record) is never listed twice
    top = partial.top(0, 1, "previous_token", k=20)
    assert len({(t, d) for t, d, _ in top}) == len(top)


def test_save_and_load_keep_everything(demo, demo_scan, tmp_path):
    _, scan = demo_scan
    again = HeadScan.load(scan.save(tmp_path / "scan.pt"))
    assert again.metrics == scan.metrics and again.layers == scan.layers and again.weight_metrics == ("ov_copying",)
    for metric in scan.metrics:
        assert torch.allclose(again.values[metric], scan.values[metric], atol=0, rtol=0, equal_nan=True)
        assert again.top(1, 3, metric) == scan.top(1, 3, metric)
        assert again.deciles(0, 2, metric) == scan.deciles(0, 2, metric)
    assert torch.equal(again.mean("ov_copying"), cw.analysis.copying_scores(demo))
    assert again.tokens_of(3) == scan.tokens_of(3)
    torch.save({"something": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a HeadScan file"):
        HeadScan.load(tmp_path / "other.pt")


def test_texts_as_strings_are_tokenised_with_bos_and_cut(demo):
    scan = scan_heads(demo, ["hello hello", "abc " * 40], max_tokens=16, progress=False)
    assert scan.tokens_of(0) == cw.as_view(demo).to_tokens("hello hello")[0].tolist()
    assert len(scan.tokens_of(1)) == 16 and scan.max_tokens == 16
    check_against_brute_force(demo, [scan.tokens_of(0), scan.tokens_of(1)], scan)


def test_weight_metric_only_and_metric_subsets(demo):
    scan = scan_heads(demo, [[0, 3, 4]], metrics=["ov_copying"], progress=False)
    assert scan.complete and scan.metrics == () and torch.equal(scan.mean("ov_copying"), cw.analysis.copying_scores(demo))
    with pytest.raises(ValueError, match="weight metric"):
        scan.top(0, 0, "ov_copying")
    assert set(SCAN_METRICS) == set(PATTERN_METRICS) | {"ov_copying"}


@pytest.mark.parametrize(
    ("texts", "options", "error", "match"),
    [
        ("abc", {}, TypeError, "wrap it in a list"),
        ([], {}, ValueError, "empty"),
        ([[]], {}, ValueError, r"texts\[0\] has no tokens"),
        ([[0, 999]], {}, ValueError, r"texts\[0\].*999"),
        ([[0, 2], 5], {}, TypeError, r"texts\[1\]"),
        ([[0, 2]], {"metrics": ["nope"]}, ValueError, "each metric must be one of"),
        ([[0, 2]], {"metrics": []}, ValueError, "at least one"),
        ([[0, 2]], {"max_tokens": 0}, ValueError, "max_tokens"),
        ([[0, 2]], {"batch_size": True}, ValueError, "batch_size"),
        ([[0, 2]], {"resume": "scan"}, TypeError, "resume must be a HeadScan"),
    ],
)
def test_bad_input_is_refused_with_its_reason(demo, texts, options, error, match):
    with pytest.raises(error, match=match):
        scan_heads(demo, texts, progress=False, **options)


def test_resume_refuses_a_scan_of_other_texts(demo, demo_scan):
    _, scan = demo_scan
    with pytest.raises(ValueError, match="other texts"):
        scan_heads(demo, [[0, 2, 3]] * scan.n_texts, progress=False, resume=scan)


def test_reading_a_scan_checks_its_arguments(demo_scan):
    _, scan = demo_scan
    with pytest.raises(ValueError, match="not an attention layer"):
        scan.top(5, 0, "induction")
    with pytest.raises(ValueError, match="out of range"):
        scan.top(1, 9, "induction")
    with pytest.raises(ValueError, match="was not scanned"):
        scan.deciles(1, 0, "nope")
    with pytest.raises(ValueError, match="kept the strongest"):
        scan.top(1, 0, "induction", k=1000)
    assert math.isnan(float(scan.values["induction"][-1, 0, 0]))
    warnings.simplefilter("error")  # nothing above warned
