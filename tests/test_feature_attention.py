"""Issue 31, attention at feature level: a head's score and output split over dictionary features.

Checked against what the model itself computes: the terms sum to its own score (and a destination row's scores,
softmaxed, are its own pattern: the score is scaled and rotated as the model does it), on the demo model, a
LayerNorm + MLP GPT-2 shape and a rotary RMSNorm grouped-query Llama shape; the ranked pairs against a dense brute
force over every feature pair built from the model's raw module weights (not the folded ones the split uses); the
identity dictionary against the residual-basis bilinear form; the OV read-outs against logit attribution and the
raw products; the demo dictionary's induction head (the issue's example). Remote (NDIF) answers are held to these
in tests/test_backend_matrix.py (feature_qk, feature_ov, feature_heads lines).
"""

from __future__ import annotations

import gzip
import json

import pytest
import torch
from factories import small_bridge

import circuitwidgets as cw
from circuitwidgets import analysis as A
from circuitwidgets import feature_terms
from circuitwidgets.dictionary import Dictionary, read_labels
from circuitwidgets.feature_terms import TERMS

PROMPT = [[1, 5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 11]]


def random_dictionary(d: int, features: int, hook: str, seed: int = 0, **activation) -> Dictionary:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(d, features, generator=g) / d**0.5
    return Dictionary(W, torch.randn(features, generator=g) * 0.1, W.T.clone() * 0.5, torch.randn(d, generator=g) * 0.1,
                      hook, **activation)


def shapes() -> dict:
    return {
        "demo": cw.demo_model(),
        "gpt2-ln-mlp": small_bridge(normalization_type="LN", attn_only=False, d_mlp=128, act_fn="gelu", d_vocab=64),
        "llama-rotary-rms-gqa": small_bridge(
            positional_embedding_type="rotary", normalization_type="RMS", n_key_value_heads=2, attn_only=False, d_mlp=128,
            act_fn="silu", gated_mlp=True,
        ),
    }


@pytest.fixture(scope="module")
def models():
    return shapes()


ACTIVATIONS = {"relu": {}, "jumprelu": {"threshold": torch.full((192,), 0.05)}, "topk": {"k": 12}}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("name", ["demo", "gpt2-ln-mlp", "llama-rotary-rms-gqa"])
def test_the_terms_sum_to_the_models_own_score_scaled_and_rotated_as_it_does(models, name, activation):
    model = models[name]
    sae = random_dictionary(64, 192, "blocks.1.hook_resid_pre", **ACTIVATIONS[activation])
    row = A.feature_qk(model, PROMPT, 1, 3, 10, None, sae, k=5)
    view = cw.as_view(model)
    pattern = view.patterns(PROMPT, [1])[0, 0, 3, 10, :11].double()
    assert float((torch.softmax(row.scores.double(), 0) - pattern).abs().max()) < 1e-5  # the model's own scores
    assert float(((row.total() - row.scores).abs() / row.scores.abs().clamp_min(1)).max()) < 1e-4
    cell = A.feature_qk(model, PROMPT, 1, 3, 10, 6, sae, k=5)
    assert abs(cell.total() - cell.score) <= 1e-4 * max(1.0, abs(cell.score))
    assert list(cell.terms) == list(TERMS) and abs(cell.score - float(row.scores[6])) < 1e-6
    assert abs(row.at(6).terms["error × error"] - cell.terms["error × error"]) < 1e-6
    # the marginals are the rows and columns of the whole matrix: they sum with the error and bias rows to the score
    q_rows = sum(cell.query_features.values()) + cell.terms["query error × features"] + cell.terms["error × error"]
    q_rows += cell.terms["query error × key bias"] + sum(v for n, v in cell.terms.items() if n.startswith("query bias"))
    assert abs(q_rows - cell.score) < 1e-4 * max(1.0, abs(cell.score))
    assert all(abs(v) > 0 for v in cell.terms.values())  # (every term counts here: the sum means something)


def _brute_force_pairs(model, sae, tokens, layer, head, d, s):
    """Every (query feature, key feature) value from the model's raw modules: norm weight, raw projections, its rotation."""
    _, cache = model.run_with_cache(torch.tensor(tokens))
    x = cache[f"blocks.{layer}.hook_resid_pre"][0]
    sigma = cache[f"blocks.{layer}.ln1.hook_scale"][0, :, 0]
    acts = sae.encode(x)
    block = model.blocks[layer]
    w = block.ln1.original_component.weight.detach() if hasattr(block.ln1, "original_component") else block.ln1.weight
    inner = block.attn.original_component
    group = inner.n_heads // inner.n_kv_heads

    def side(pos, linear, index):
        ids = torch.nonzero(acts[pos]).flatten()
        parts = (acts[pos, ids, None] * sae.W_dec[ids]) / sigma[pos] * w  # RMSNorm's linear part, frozen
        out = torch.nn.functional.linear(parts, linear.weight).reshape(len(ids), -1, inner.d_head)[:, index]
        position = torch.full((1, len(ids)), pos)
        rotated, _ = inner.rotary.apply_rope(out[None, None], out[None, None], position_ids=position)
        return ids, rotated[0, 0]

    qi, q = side(d, inner.q, head)
    ki, k = side(s, inner.k, head // group)
    return qi, ki, (q @ k.T) / inner.scale


def test_the_ranked_pairs_equal_a_dense_brute_force_over_every_pair(models, monkeypatch):
    model = models["llama-rotary-rms-gqa"]
    sae = random_dictionary(64, 192, "blocks.1.hook_resid_pre", seed=3)
    cell = A.feature_qk(model, PROMPT, 1, 3, 10, 6, sae, k=15)
    monkeypatch.setattr(feature_terms, "ENCODE_CELLS", 192 * 2)  # blocks of 2 positions and of 3 decoder rows: the same
    monkeypatch.setattr(feature_terms, "DECODE_CELLS", 64 * 3)
    row = A.feature_qk(model, PROMPT, 1, 3, 10, None, sae, k=15)
    blocked = row.at(6)
    assert [p[:2] for p in blocked.pairs] == [p[:2] for p in cell.pairs] and blocked.terms == pytest.approx(cell.terms)
    with torch.no_grad():
        qi, ki, dense = _brute_force_pairs(model, sae, PROMPT, 1, 3, 10, 6)
    flat = dense.flatten()
    order = flat.abs().argsort(descending=True)[:15]
    expected = [(int(qi[i // len(ki)]), int(ki[i % len(ki)]), float(flat[i])) for i in order]
    assert [(q, k) for q, k, _ in cell.pairs] == [(q, k) for q, k, _ in expected]
    assert max(abs(a[2] - b[2]) for a, b in zip(cell.pairs, expected, strict=True)) < 1e-5
    assert abs(float(dense.sum()) - cell.terms["features × features"]) < 1e-5 * (1 + float(dense.abs().sum()))
    assert sorted(cell.query_activations) == sorted(qi.tolist()) and sorted(cell.key_activations) == sorted(ki.tolist())


def test_the_identity_dictionary_gives_the_residual_basis_bilinear_form(demo):
    sae = Dictionary.identity(64, "blocks.1.hook_resid_pre")
    cell = A.feature_qk(demo, PROMPT, 1, 0, 10, 6, sae, k=64 * 64)
    _, cache = demo.run_with_cache(torch.tensor(PROMPT))
    x = cache["blocks.1.hook_resid_pre"][0].double()
    view = cw.as_view(demo)
    W_Q, W_K = view.W_Q[1, 0].double(), view.W_K[1, 0].double()
    form = (x[10, :, None] * (W_Q @ W_K.T) * x[6, None, :]) / 4  # x_d W_Q W_Kᵀ x_sᵀ / √16, coordinate by coordinate
    got = torch.zeros(64, 64, dtype=torch.float64)
    for q, k, value in cell.pairs:  # feature 2i is +e_i, 2i+1 is -e_i: whichever is active carries the sign of x_i
        got[q // 2, k // 2] += value
    assert float((got - form).abs().max()) < 1e-5
    assert all(abs(cell.terms[n]) < 1e-6 for n in TERMS if "error" in n)  # nothing is left out
    assert abs(cell.terms["features × features"] - float(form.sum())) < 1e-5


def test_what_the_head_moves_reads_out_as_the_logit_attribution_and_the_raw_products(models):
    for name, model in models.items():
        sae = random_dictionary(64, 192, "blocks.1.hook_resid_pre", seed=1, k=12)
        ov = A.feature_ov(model, PROMPT, 1, 2, 9, sae, unembed=True, k=4, cards=True)
        for token in ov.outputs[:2]:
            attribution = A.logit_attribution(model, PROMPT, position=9, target=token)
            assert abs(ov.totals[token] - float(attribution.heads[1, 2])) < 1e-4, name
            assert abs(sum(ov.terms[t][token] for t in ov.terms) - ov.scores[token]) < 1e-4, name
        assert abs(float(ov.pattern.sum()) - 1) < 1e-6 and ov.pairs and ov.source_features and ov.cards["source"]
        _, cache = model.run_with_cache(torch.tensor(PROMPT))
        z = cache["blocks.1.attn.hook_z"][0, 9]
        resid = random_dictionary(64, 96, "blocks.1.hook_resid_post", 5)
        heads = random_dictionary(64, 96, "blocks.1.attn.hook_z", 6)
        written = A.feature_ov(model, PROMPT, 1, 2, 9, sae, output=resid, k=3)
        raw = z[2] @ model.blocks[1].attn.W_O[2].detach() @ resid.W_enc  # W_O as the model writes (not centred)
        assert max(abs(written.totals[o] - float(raw[o])) for o in written.outputs) < 1e-4, name
        own = A.feature_ov(model, PROMPT, 1, 2, 9, sae, output=heads, k=3)
        assert max(abs(own.totals[o] - float(z[2] @ heads.W_enc[32:48, o])) for o in own.outputs) < 1e-4, name
        split = A.feature_heads(model, heads, PROMPT, 9)
        pre = z.reshape(-1) @ heads.W_enc + heads.b_enc
        assert float((split.by_head.sum(0) + heads.b_enc - pre).abs().max()) < 1e-4
        assert split.top_heads(0)[0][0] in range(4) and A.feature_heads(model, heads).by_head.shape == (4, 96)


def test_what_does_not_fit_is_refused_with_the_reason(demo):
    sae = random_dictionary(64, 32, "blocks.1.hook_resid_pre")
    with pytest.raises(ValueError, match="not what layer 0's attention reads"):
        A.feature_qk(demo, PROMPT, 0, 0, 5, 2, sae)
    with pytest.raises(ValueError, match="causal head cannot attend"):
        A.feature_qk(demo, PROMPT, 1, 0, 5, 7, sae)
    with pytest.raises(ValueError, match="out of range"):
        A.feature_qk(demo, PROMPT, 1, 0, 50, 2, sae)
    with pytest.raises(ValueError, match="one read-out"):
        A.feature_ov(demo, PROMPT, 1, 0, 5, sae)
    with pytest.raises(ValueError, match="does not reach directly"):
        A.feature_ov(demo, PROMPT, 1, 0, 5, sae, output=random_dictionary(64, 8, "blocks.0.hook_resid_post"))
    with pytest.raises(ValueError, match="MLP transcoder's output is only part"):
        A.feature_qk(demo, PROMPT, 1, 0, 5, 2, random_dictionary(64, 8, "blocks.0.hook_resid_mid").__class__(
            torch.eye(64), torch.zeros(64), torch.eye(64), torch.zeros(64), "blocks.0.hook_resid_mid",
            hook_name_out="blocks.0.hook_mlp_out"))
    with pytest.raises(TypeError, match="Dictionary or a SAELens SAE"):
        A.feature_qk(demo, PROMPT, 1, 0, 5, 2, "not a dictionary")
    with pytest.raises(ValueError, match="hook_name 'blocks.1.ln1.hook_normalized' is not one"):
        random_dictionary(64, 8, "blocks.1.ln1.hook_normalized")


def test_a_transcoder_into_the_heads_input_splits_its_score(demo):
    # reads layer 0's attention output, writes the residual stream entering layer 1 (a "skip"-free toy transcoder)
    g = torch.Generator().manual_seed(4)
    tc = Dictionary(torch.randn(64, 128, generator=g) / 8, torch.zeros(128), torch.randn(128, 64, generator=g) / 8,
                    torch.zeros(64), "blocks.0.hook_attn_out", hook_name_out="blocks.1.hook_resid_pre")
    cell = A.feature_qk(demo, PROMPT, 1, 1, 10, 6, tc)
    assert tc.is_transcoder and abs(cell.total() - cell.score) <= 1e-4 * max(1.0, abs(cell.score))
    sae = random_dictionary(64, 96, "blocks.1.hook_resid_pre", k=8)  # one dictionary a side: the same score split anew
    mixed = A.feature_qk(demo, PROMPT, 1, 1, 10, 6, sae, key_dictionary=tc)
    assert abs(mixed.score - cell.score) < 1e-6 and abs(mixed.total() - mixed.score) <= 1e-4 * max(1.0, abs(mixed.score))
    assert set(mixed.query_activations) <= set(range(96)) and mixed.key_activations == cell.key_activations


def test_the_demo_dictionary_explains_the_induction_head_by_current_and_previous_token_features(demo):
    sae = cw.demo_dictionary()
    card = cw.demo.dictionary.dictionary_card()
    assert card["metrics"]["variance_explained"] > 0.95 and card["metrics"]["l0"] <= sae.k
    assert card["metrics"]["features"]["current token"] >= 40 and card["metrics"]["features"]["previous token"] >= 40
    text = "the cat sat on the mat. the cat sat"
    labels = demo.to_str_tokens(text)
    first, second = [i for i, t in enumerate(labels) if t == "c"]
    for head in range(4):  # every induction head: its query 'c' (the second cat) against the key after the first 'c'
        cell = A.feature_qk(demo, demo.to_tokens(text), 1, head, second, first + 1, sae, k=3)
        q, k, value = cell.pairs[0]
        assert sae.label(q) == "current token = 'c'" and sae.label(k) == "previous token = 'c'", (sae.label(q), sae.label(k))
        assert value > 0.5 * cell.score and cell.error_share() < 0.1


def test_labels_from_a_neuronpedia_export_and_saving(tmp_path):
    path = tmp_path / "export.jsonl.gz"
    records = [{"modelId": "demo", "layer": "1-res", "index": "2", "description": "letters"},
               {"modelId": "demo", "layer": "0-res", "index": "3", "description": "other source"},
               {"modelId": "demo", "layer": "1-res", "index": "4", "explanations": [{"description": "digits"}]}]
    with gzip.open(path, "wt") as handle:
        handle.write("\n".join(json.dumps(r) for r in records))
    assert read_labels(path, "demo/1-res") == {2: "letters", 4: "digits"}
    sae = random_dictionary(64, 8, "blocks.1.hook_resid_pre", k=2).set_labels(read_labels(path, "demo/1-res"))
    again = Dictionary.load(sae.save(tmp_path / "d.safetensors"))
    x = torch.randn(3, 64)
    assert torch.equal(again.encode(x), sae.encode(x)) and again.labels == {2: "letters", 4: "digits"} and again.k == 2
    before = again.fingerprint()
    again.W_dec.data[0, 0] += 1e-3
    assert again.fingerprint() != before
