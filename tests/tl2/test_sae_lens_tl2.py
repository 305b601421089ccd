"""Issue 31 with SAELens (which needs TransformerLens < 4) and TransformerLens 2.x's HookedTransformer.

SAELens SAEs are built from their configs with random weights (nothing downloaded): relu ("standard"), JumpReLU,
top-k (with its decoder-norm rescaling), a ``hook_z`` SAE (every head's z flattened) and a transcoder. Each loads
as a `Dictionary` that encodes and decodes as SAELens does, and gives the same split as the same weights given
to `Dictionary` directly (an SAE is taken wherever a dictionary is; older SAELens' ``(sae, cfg, sparsity)`` too).
On HookedTransformers (the demo model, and a rotary RMSNorm grouped-query one, whose rotation fires
``hook_rot_q``) the terms sum to the model's own score and a row's scores softmax to its own pattern.
"""

from __future__ import annotations

import pytest
import torch

sae_lens = pytest.importorskip("sae_lens")
from sae_lens import (  # noqa: E402
    JumpReLUSAE,
    JumpReLUSAEConfig,
    StandardSAE,
    StandardSAEConfig,
    TopKSAE,
    TopKSAEConfig,
    Transcoder,
    TranscoderConfig,
)
from sae_lens.saes.sae import SAEMetadata  # noqa: E402
from transformer_lens import HookedTransformer, HookedTransformerConfig  # noqa: E402

import circuitwidgets as cw  # noqa: E402
from circuitwidgets import analysis as A  # noqa: E402
from circuitwidgets.dictionary import Dictionary  # noqa: E402

PROMPT = [[0, 5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 11]]


def randomised(sae):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in sae.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.ndim > 1 else 0.05))
            if name == "threshold":
                p.abs_()
    return sae


def build(kind: str):
    meta = SAEMetadata(hook_name="blocks.1.hook_resid_pre", neuronpedia_id="demo/1-res-test")
    if kind == "standard":
        return randomised(StandardSAE(StandardSAEConfig(d_in=64, d_sae=128, metadata=meta)))
    if kind == "jumprelu":
        return randomised(JumpReLUSAE(JumpReLUSAEConfig(d_in=64, d_sae=128, metadata=meta)))
    if kind == "topk":
        return randomised(TopKSAE(TopKSAEConfig(d_in=64, d_sae=128, k=9, rescale_acts_by_decoder_norm=True, metadata=meta)))
    if kind == "hook_z":
        meta = SAEMetadata(hook_name="blocks.1.attn.hook_z")
        return randomised(StandardSAE(StandardSAEConfig(d_in=64, d_sae=96, reshape_activations="hook_z", metadata=meta)))
    if kind == "transcoder":
        meta = SAEMetadata(hook_name="blocks.0.hook_attn_out", hook_name_out="blocks.1.hook_resid_pre")
        return randomised(Transcoder(TranscoderConfig(d_in=64, d_sae=96, d_out=64, apply_b_dec_to_input=False, metadata=meta)))
    raise ValueError(kind)


@pytest.fixture(scope="module")
def demo():
    return cw.demo_model()  # (a HookedTransformer under TransformerLens 2.x)


@pytest.mark.parametrize("kind", ["standard", "jumprelu", "topk", "hook_z", "transcoder"])
def test_a_sae_lens_sae_encodes_and_decodes_as_sae_lens_does(kind):
    sae = build(kind)
    dictionary = Dictionary.from_sae_lens(sae)
    x = torch.randn(20, 4, 16) if kind == "hook_z" else torch.randn(20, 64)
    with torch.no_grad():
        theirs = sae.decode(sae.encode(x))
    ours = dictionary.reconstruct(x.reshape(20, -1)).reshape(theirs.shape)
    assert float((ours - theirs).abs().max()) < 1e-5
    active = (sae.encode(x) > 0).reshape(20, -1) if kind != "topk" else None
    if active is not None:
        assert torch.equal(dictionary.encode(x.reshape(20, -1)) > 0, active)
    assert dictionary.site == cw.sites.from_hook_name(sae.cfg.metadata.hook_name)


@pytest.mark.parametrize("kind", ["standard", "jumprelu", "topk"])
def test_a_sae_lens_sae_gives_the_split_of_the_same_weights_as_a_dictionary(demo, kind):
    assert isinstance(demo, HookedTransformer)
    sae = build(kind)
    mine = Dictionary.from_sae_lens(sae)
    same = Dictionary(mine.W_enc.clone(), mine.b_enc.clone(), mine.W_dec.clone(), mine.b_dec.clone(), "blocks.1.hook_resid_pre",
                      mine.activation, mine.threshold, mine.k)
    theirs = A.feature_qk(demo, PROMPT, 1, 0, 10, 6, sae, k=8)
    older = A.feature_qk(demo, PROMPT, 1, 0, 10, 6, (sae, {}, None), k=8)  # SAELens < 6: a tuple
    ours = A.feature_qk(demo, PROMPT, 1, 0, 10, 6, same, k=8)
    for got in (theirs, older):
        assert got.pairs == ours.pairs and got.terms == ours.terms
    assert abs(ours.total() - ours.score) <= 1e-4 * max(1.0, abs(ours.score))
    assert mine.neuronpedia_id == "demo/1-res-test"


def test_hook_z_and_transcoder_sae_lens_dictionaries_read_what_they_name(demo):
    heads = A.feature_heads(demo, build("hook_z"), PROMPT, 9)
    z = demo.run_with_cache(torch.tensor(PROMPT))[1]["blocks.1.attn.hook_z"][0, 9]
    sae = build("hook_z")
    with torch.no_grad():
        pre = (sae.reshape_fn_in(z[None]) - sae.b_dec) @ sae.W_enc + sae.b_enc
    assert float((heads.by_head.sum(0) + Dictionary.from_sae_lens(sae).b_enc - pre[0]).abs().max()) < 1e-4
    cell = A.feature_qk(demo, PROMPT, 1, 1, 10, 6, build("transcoder"))
    assert abs(cell.total() - cell.score) <= 1e-4 * max(1.0, abs(cell.score))


def test_on_a_rotary_rms_grouped_query_hooked_transformer_the_terms_sum_to_its_own_score():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=64, d_head=16, n_heads=4, n_key_value_heads=2, d_mlp=128, n_ctx=32, d_vocab=50,
        act_fn="silu", normalization_type="RMS", positional_embedding_type="rotary", gated_mlp=True, seed=0,
    )
    model = HookedTransformer(cfg).eval()
    sae = Dictionary.from_sae_lens(build("standard"))
    row = A.feature_qk(model, PROMPT, 1, 3, 10, None, sae, k=5)
    _, cache = model.run_with_cache(torch.tensor(PROMPT))
    pattern = cache["blocks.1.attn.hook_pattern"][0, 3, 10, :11].double()
    assert float((torch.softmax(row.scores.double(), 0) - pattern).abs().max()) < 1e-5
    assert float(((row.total() - row.scores).abs() / row.scores.abs().clamp_min(1)).max()) < 1e-4
    ov = A.feature_ov(model, PROMPT, 1, 3, 10, sae, unembed=True, k=3)
    token = ov.outputs[0]
    assert abs(ov.totals[token] - float(A.logit_attribution(model, PROMPT, position=10, target=token).heads[1, 3])) < 1e-4
