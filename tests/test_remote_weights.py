"""Weight views of a model whose weights stay on the server (issue 22), computed in the trace, reduced there.

Run through nnsight's ``remote="local"`` (the request serialised as for NDIF, deserialised with
circuitwidgets hidden, run here) on a view told its weights are not on this machine (as an nnsight
model for NDIF), and compared with the local analysis on the same weights. Both run the same maths
(`circuitwidgets.weight_views`); what differs, and is tested here, is the source: the trace reads the
raw parameters and folds the norms (`circuitwidgets.raw_weights.TraceSource`), the local view reads
`Weights` built from a TransformerLens bridge. The tiny models' weights
are redrawn at a scale where the views are of order 1 (at initialisation they are ~1e-6, where any
tolerance passes), with norm weights away from 1 and biases away from 0, so that the folding counts.
Tolerance: 1e-5 times the largest magnitude of the local answer (at least 1).
"""

from __future__ import annotations

import ast
import math
import sys
from functools import partial
from pathlib import Path

import pytest
import torch

import circuitwidgets as cw
from circuitwidgets import analysis
from circuitwidgets.backends.traces import SHIPPED

KINDS = ("llama", "gpt2", "neox")
IDS = [3, 5, 7, 11, 60]


def redraw(model: torch.nn.Module, seed: int = 1) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if p.ndim == 1 and "norm" in name or "ln" in name:
                p.copy_(1 + 0.5 * noise if name.endswith("weight") else 0.2 * noise)
            else:
                p.copy_(noise * (0.3 if p.ndim > 1 else 0.1))


@pytest.fixture(scope="module", params=KINDS)
def views(request):
    local, remote, _ = remote_pair(request.param)
    return local, remote


def close(remote: torch.Tensor, local: torch.Tensor) -> None:
    assert remote.shape == local.shape
    assert torch.equal(remote.isnan(), local.isnan())
    scale = max(1.0, float(local.nan_to_num().abs().max()))
    assert float((remote - local).nan_to_num().abs().max()) <= 1e-5 * scale


def downloaded(view: cw.HFView, call) -> tuple[object, int]:
    before, traces = view.backend.bytes_received, view.backend.traces
    result = call()
    assert view.backend.traces == traces + 1  # one request per view
    return result, view.backend.bytes_received - before


def test_the_norms_are_not_trivial_so_the_folding_is_tested(views):
    local, _ = views
    norms = [p for name, p in local.backend.hf_model.named_parameters() if "norm" in name or "ln_" in name]
    assert norms and all(float((p.detach() - 1).abs().max()) > 0.1 for p in norms if p.ndim == 1 and p.shape[0] > 0)
    assert "folded" in local.norm_note


def test_the_remote_view_has_no_weights_here_and_says_what_it_supports(views):
    _, remote = views
    assert not remote.supports("weights_here") and "not on this machine" in remote.supports("weights_here").reason
    assert remote.supports("weight_views") and remote.supports("logit_attribution") and remote.supports("patterns")
    assert not remote.supports("hooks")
    with pytest.raises(ValueError, match="not on this machine"):
        remote.W_Q  # noqa: B018 - the weights themselves are not here


def test_ov_blocks_equal_the_local_circuit_and_download_only_the_block(views):
    local, remote = views
    block, size = downloaded(remote, lambda: analysis.full_ov_block(remote, 1, IDS))
    close(block, analysis.full_ov_block(local, 1, IDS))
    assert size == 4 * len(IDS) ** 2 * 4  # heads x sources x outs float32
    request = {"view": "ov_block", "layer": 0, "sources": IDS, "outputs": [1, 2, 63], "head": 2}
    close(remote.weight_views([request])[0]["block"], analysis.full_ov_circuit(local, 0, 2).block(IDS, [1, 2, 63]))


def test_qk_blocks_equal_the_local_circuit_scaled_or_not(views):
    local, remote = views
    close(analysis.full_qk_block(remote, 1, IDS), analysis.full_qk_block(local, 1, IDS))
    close(analysis.full_qk_block(remote, 0, IDS, scaled=False), analysis.full_qk_block(local, 0, IDS, scaled=False))
    request = {"view": "qk_block", "layer": 1, "queries": IDS, "keys": [4, 9], "head": 3, "scale": remote.scale_of(1)}
    close(remote.weight_views([request])[0]["block"], analysis.full_qk_circuit(local, 1, 3, scaled=True).block(IDS, [4, 9]))


def same_spectrum(remote: torch.Tensor, local: torch.Tensor) -> None:
    """Equal multisets (conjugate pairs of equal magnitude may come in either order)."""
    assert remote.shape == local.shape and remote.dtype == torch.complex128
    scale = max(1.0, float(local.abs().max()))
    for r, loc in zip(remote.reshape(-1, remote.shape[-1]), local.reshape(-1, local.shape[-1]), strict=True):
        distance = (r[:, None] - loc[None, :]).abs()
        assert float(distance.min(1).values.max()) <= 1e-5 * scale and float(distance.min(0).values.max()) <= 1e-5 * scale
        close(r.abs(), loc.abs())  # the order: largest magnitude first


def test_ov_eigenvalues_and_copying_scores_equal_the_local_ones(views):
    local, remote = views
    values, size = downloaded(remote, lambda: analysis.ov_eigenvalues(remote, 1))
    same_spectrum(values, analysis.ov_eigenvalues(local, 1))
    assert size == 4 * 16 * 16 + 4 * 4  # the layer's eigenvalues (complex128) and copying scores
    same_spectrum(analysis.ov_eigenvalues(remote, 0, 3), analysis.ov_eigenvalues(local, 0, 3))
    scores, size = downloaded(remote, lambda: analysis.copying_scores(remote))
    close(scores, analysis.copying_scores(local))
    assert size == 2 * 4 * 4  # the scores alone
    assert scores.shape == (2, 4) and scores.dtype == torch.float32


def test_composition_scores_of_every_kind_equal_the_local_ones_from_one_trace(views):
    local, remote = views
    request = {"view": "composition", "kinds": ["Q", "K", "V"]}
    (scores,), size = downloaded(remote, lambda: remote.weight_views([request]))
    for kind in "QKV":
        close(scores[kind], analysis.composition_scores(local, kind))
        assert bool(scores[kind][1].isnan().all()) and not bool(scores[kind][0, :, 1].isnan().any())
    assert size == 3 * (2 * 4) ** 2 * 4
    close(analysis.composition_scores(remote, "K"), analysis.composition_scores(local, "K"))


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_a_pairs_composition_term_equals_the_local_term(views, kind):
    local, remote = views
    scaled = kind != "V"
    block, eigenvalues, positivity = analysis.composition_term_view(remote, kind, (0, 1), (1, 2), IDS, scaled=scaled)
    expected = analysis.composition_term(local, kind, (0, 1), (1, 2), scaled=scaled)
    close(block, expected.block(IDS, IDS))
    same_spectrum(eigenvalues, expected.eigenvalues())
    assert math.isclose(positivity, analysis.composition_term_positivity(local, kind, (0, 1), (1, 2)), abs_tol=1e-5)
    with pytest.raises(ValueError, match="earlier layer"):
        analysis.composition_term_view(remote, kind, (1, 0), (1, 2), IDS)
    with pytest.raises(ValueError, match="not on this machine"):  # the factored term itself needs the weights here
        analysis.composition_term(remote, kind, (0, 1), (1, 2))


def test_skip_trigrams_and_their_sources_equal_the_local_lists(views):
    local, remote = views
    lists = analysis.skip_trigrams(remote, 1, 2, 5, k=6)
    expected = analysis.skip_trigrams(local, 1, 2, 5, k=6)
    assert lists.source == 5
    for field in ("destinations", "outs"):
        assert getattr(lists, field).tolist() == getattr(expected, field).tolist()
    for field in ("destination_values", "out_values"):
        close(getattr(lists, field), getattr(expected, field))
    ranked, size = downloaded(remote, lambda: analysis.skip_trigram_sources(remote, 1, 2, k=10, chunk_size=7))
    reference = analysis.skip_trigram_sources(local, 1, 2, k=10)
    for field in ("sources", "destinations", "outs"):
        assert getattr(ranked, field).tolist() == getattr(reference, field).tolist()
    for field in ("strengths", "top_qk", "top_ov"):
        close(getattr(ranked, field), getattr(reference, field))
    assert size == 10 * (3 * 8 + 3 * 4)  # three id lists (int64), three value lists (float32)


def test_top_k_accuracy_equals_the_local_pass(views):
    local, remote = views
    (top1, top5), size = downloaded(remote, lambda: analysis.ov_top_k_accuracy(remote, 1, 2, k=(1, 5), chunk_size=9))
    assert (top1, top5) == analysis.ov_top_k_accuracy(local, 1, 2, k=(1, 5))
    assert size == 2 * 8  # one count per k
    pair = [(1, 0), (1, 2)]
    assert analysis.ov_top_k_accuracy(remote, heads=pair) == analysis.ov_top_k_accuracy(local, heads=pair)


def test_several_views_share_one_trace():
    _, view, _ = remote_pair("llama")
    requests = [
        {"view": "ov_block", "layer": 1, "sources": IDS, "outputs": IDS},
        {"view": "ov_eigenvalues", "layers": [1]},
    ]
    block, spectrum = view.weight_views(requests)
    assert view.backend.traces == 1
    assert block["block"].shape == (4, 5, 5) and spectrum["eigenvalues"].shape == (1, 4, 16)


def test_an_architecture_it_does_not_know_is_refused_by_name():
    model, tokenizer = cw.demo.tiny_hf_model("gemma2")
    view = cw.HFView(model, tokenizer=tokenizer, remote="local")
    view.backend.weights_local = False
    with pytest.raises(ValueError, match="gemma2"):
        analysis.full_ov_block(view, 0, IDS)


def test_positional_qk_equals_the_local_view_and_downloads_the_lower_triangles(views):
    local, remote = views
    if not local.has_learned_positions:  # rotary: the view is the model's own attention, averaged in one trace
        pattern, _ = downloaded(remote, lambda: analysis.positional_qk(remote, 0, positions=8))
        close(pattern, analysis.positional_qk(local, 0, positions=8))
        return
    for head, softmax in ((None, True), (1, True), (None, False)):
        call = partial(analysis.positional_qk, remote, 1, head, positions=30, softmax=softmax)
        pattern, size = downloaded(remote, call)
        close(pattern, analysis.positional_qk(local, 1, head, positions=30, softmax=softmax))
        assert size == (4 if head is None else 1) * (30 * 31 // 2) * 4  # the lower triangles only
    assert float(pattern.nan_to_num().abs().max()) > 0.5  # scores of order 1: the tolerance means something


def imports_of(module) -> set[str]:
    """The top-level modules `module`'s source imports (relative ones with their dots, e.g. ``".numerics"``)."""
    imported = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or "") if node.level else node.module.split(".")[0])
    return imported


def remote_pair(kind: str) -> tuple[cw.HFView, cw.HFView, torch.nn.Module]:
    """``(local view, remote view, model)``: a tiny `kind` model redrawn to order 1; the remote view (``remote="local"``)
    told its weights are not on this machine (``weights_local = False``, as an nnsight model for NDIF: only the shapes
    are here), so that every weight view and logit attribution of it runs in a trace."""
    model, tokenizer = cw.demo.tiny_hf_model(kind)
    redraw(model)
    remote = cw.HFView(model, tokenizer=tokenizer, remote="local")
    remote.backend.weights_local = False
    return cw.HFView(model, tokenizer=tokenizer), remote, model


@pytest.mark.parametrize("module", SHIPPED, ids=lambda m: m.__name__)
def test_the_code_shipped_into_traces_imports_only_torch_the_standard_library_and_each_other(module):
    imported = imports_of(module) - set(sys.stdlib_module_names)
    shipped = {"." + m.__name__.rsplit(".", 1)[1] for m in SHIPPED}
    assert imported <= {"torch"} | shipped and "torch" in imported
