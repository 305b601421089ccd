"""The conformance matrix: every analysis function × every backend, one table.

A backend is one line of `BACKENDS`: how a user holds a model (what analysis functions take) and the
reference it must agree with, the same weights run here through a TransformerLens bridge (itself
checked against products of the module weights and Hugging Face's eager attention in
tests/test_conformance.py). An analysis is one line of `ANALYSES`: the protocol feature it needs
(`circuitwidgets.backends.protocol.FEATURES`) and the call. For each pair, where the backend's view
`supports` the feature the answer equals the reference's (float32 tolerances, ids exactly, NaN where
the reference has NaN); where it does not, the call raises ValueError with the backend's own reason,
the same the widgets grey their controls with. A refusal of the model itself (a path expansion of a
model with MLPs) must be the reference's refusal.

Adding a backend: its module under ``circuitwidgets/backends/`` and its line here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

nnsight = pytest.importorskip("nnsight")
pytestmark = pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")

from test_conformance import hf_model, wrap  # noqa: E402
from test_remote_weights import remote_pair  # noqa: E402

import circuitwidgets as cw  # noqa: E402
from circuitwidgets import analysis as A  # noqa: E402
from circuitwidgets.backends.protocol import FEATURES  # noqa: E402

RTOL = 1e-4  # float32, relative to the largest magnitude of the reference's answer
BLOCK = list(range(3, 30))
TOKENS = torch.tensor([[1, *BLOCK[:10], *BLOCK[:10]]])  # a repeated block after a first token
SHORT = TOKENS[:, :9]


def _hf(how: str, kind: str) -> tuple[Any, ...]:
    """`how` wrapping a tiny `kind` model, and the reference: the same model's local view (a TransformerLens bridge)."""
    b = wrap(how, *hf_model(kind))
    target = cw.model.view_for(b.model, **b.opts) if b.opts else b.model
    hf = b.twin if b.twin is not None else b.hf  # (a bridge rewires its model: its twin is the copy made before)
    return target, cw.HFView(hf, tokenizer=cw.as_view(target).tokenizer), b  # (b holds the model a cached view holds weakly)


def _remote_weights(kind: str) -> tuple[Any, ...]:
    local, remote, model = remote_pair(kind)
    return remote, local, model


def _demo() -> tuple[Any, ...]:
    model = cw.demo_model()
    return model, model


def _ablated(model: Any) -> tuple[Any, ...]:
    return A.ablated(model, []), model  # (an ablation of no head runs under its hooks, and changes nothing)


#: name -> maker of ``(what the user passes, the reference, anything to keep alive)``. One line a backend.
BACKENDS: dict[str, Callable[[], tuple[Any, ...]]] = {
    "transformer-lens-demo": _demo,
    "transformer-lens-bridge-gpt2": lambda: _hf("tl-bridge", "gpt2"),
    "hugging-face-gpt2": lambda: _hf("hf", "gpt2"),
    "hugging-face-llama": lambda: _hf("hf", "llama"),
    "nnsight-llama": lambda: _hf("nnsight", "llama"),
    "nnsight-remote-trace-llama": lambda: _hf("nnsight-remote", "llama"),
    "hfview-gpt2": lambda: _hf("hfview", "gpt2"),
    "remote-weights-llama": lambda: _remote_weights("llama"),
    "remote-weights-gpt2": lambda: _remote_weights("gpt2"),
    "remote-weights-neox": lambda: _remote_weights("neox"),
    "ablated-no-head-demo": lambda: _ablated(cw.demo_model()),
}


def _positional_feature(view: Any) -> str:
    return "weight_views" if view.has_learned_positions else "patterns"  # (rotary: the model's own runs)


def _dictionary(hook: str, seed: int, **activation: Any) -> Any:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(64, 96, generator=g) / 8
    b_enc, b_dec = torch.randn(96, generator=g) / 10, torch.randn(64, generator=g) / 10
    return cw.Dictionary(W, b_enc, W.T.clone() / 2, b_dec, hook, **activation)


SAE = _dictionary("blocks.1.hook_resid_pre", 0, k=10)  # (every model of the matrix has d_model 64, 4 heads of 16)
Z_SAE = _dictionary("blocks.1.attn.hook_z", 1)


def _feature_qk(model: Any) -> Any:
    cell, row = A.feature_qk(model, TOKENS, 1, 2, 16, 5, SAE, k=6), A.feature_qk(model, TOKENS, 1, 2, 16, None, SAE, k=6)
    marginals = {side: dict(sorted(getattr(cell, side).items())) for side in ("query_features", "key_features")}
    return [cell.score, cell.terms, cell.pairs, marginals, row.scores, row.terms, row.pairs]


def _feature_ov(model: Any) -> Any:
    ov = A.feature_ov(model, TOKENS, 1, 1, 16, SAE, unembed=True, k=4)
    z = A.feature_ov(model, TOKENS, 1, 1, 16, SAE, output=Z_SAE, k=4)
    return [ov.outputs, ov.totals, ov.scores, ov.pairs, ov.pattern, z.totals, z.pairs]


def _scan(model: Any) -> Any:
    scan = A.scan_heads(model, [TOKENS[0].tolist(), TOKENS[0, :15].tolist()], progress=False)
    return {metric: scan.values[metric] for metric in scan.metrics}


#: name -> (feature, or a function of the view giving it; the call). One line an analysis function.
ANALYSES: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    "attention_patterns": ("patterns", lambda m: A.attention_patterns(m, TOKENS)),
    "head_scores": ("patterns", lambda m: [A.head_scores(m, k, tokens=TOKENS) for k in ("previous_token", "induction")]),
    "head_scores direct_copying": ("hooks", lambda m: A.head_scores(m, "direct_copying", tokens=TOKENS)),
    "scan_heads": ("patterns", _scan),
    "full_ov_block": ("weight_views", lambda m: A.full_ov_block(m, 1, BLOCK[:6])),
    "full_qk_block": ("weight_views", lambda m: A.full_qk_block(m, 0, BLOCK[:6])),
    "positional_qk": (_positional_feature, lambda m: A.positional_qk(m, 1, positions=12)),
    "copying_scores": ("weight_views", lambda m: A.copying_scores(m)),
    "ov_eigenvalues": ("weight_views", lambda m: [A.ov_eigenvalues(m, 1), A.ov_eigenvalues(m, 0, 2)]),
    "ov_top_k_accuracy": ("weight_views", lambda m: A.ov_top_k_accuracy(m, 1, 2, k=(1, 5))),
    "composition_scores": ("weight_views", lambda m: [A.composition_scores(m, kind) for kind in "QKV"]),
    "composition_term_view": ("weight_views", lambda m: A.composition_term_view(m, "K", (0, 1), (1, 2), BLOCK[:5])),
    "composition_term_positivity": ("weight_views", lambda m: A.composition_term_positivity(m, "V", (0, 0), (1, 3))),
    "skip_trigrams": ("weight_views", lambda m: A.skip_trigrams(m, 1, 2, BLOCK[0], k=4)),
    "skip_trigram_sources": ("weight_views", lambda m: A.skip_trigram_sources(m, 1, 2, k=6)),
    "full_ov_circuit": ("weights_here", lambda m: A.full_ov_circuit(m, 1, 0).block(BLOCK[:4], BLOCK[:4])),
    "qk_circuit": ("weights_here", lambda m: A.qk_circuit(m, 0, 1).dense()),
    "composition_term": ("weights_here", lambda m: A.composition_term(m, "Q", (0, 0), (1, 1)).block(BLOCK[:3], BLOCK[:3])),
    "logit_attribution_by_position": ("logit_attribution", lambda m: A.logit_attribution_by_position(m, TOKENS, None, 5)),
    "logit_attribution": ("logit_attribution", lambda m: dict(A.logit_attribution(m, TOKENS, 4))),
    "run_with_ablation": ("hooks", lambda m: A.run_with_ablation(m, TOKENS, [(1, 0), (1, 2)])),
    "ablation_effects": ("hooks", lambda m: A.ablation_effects(m, TOKENS.repeat(3, 1), method="zero", n_boot=20, progress=False)),
    "patching": ("hooks", lambda m: A.patching(m, TOKENS, TOKENS.flip(1), "loss", site="v", progress=False)),
    "path_expansion": ("hooks", lambda m: A.path_expansion(m, TOKENS).total()),
    "restarted run (ModelView.record)": ("resume", lambda m: cw.as_view(m).record(TOKENS).run(1, positions=[3, 20])[0]),
    "path_patching": ("resume", lambda m: A.path_patching(m, TOKENS, TOKENS.flip(1), "loss", [(0, 1), (0, 2)],
                                                          [(1, 0, "k"), (1, 3, "q"), "logits"]).per_prompt),
    "composition_paths": ("resume", lambda m: A.composition_paths(m, SHORT, SHORT.flip(1), "loss", "V", 0, 1)),
    "attribution_patching": ("gradients", lambda m: [
        A.attribution_patching(m, SHORT, SHORT.flip(1), "loss", site, method=method).values
        for site, method in (("out", "atp"), ("k", "atp*"))
    ]),
    "feature_qk": ("feature_attention", _feature_qk),
    "feature_ov": ("feature_attention", _feature_ov),
    "feature_heads": ("feature_attention", lambda m: A.feature_heads(m, Z_SAE, TOKENS, 12).by_head),
}


def test_every_feature_is_exercised():
    named = {feature for feature, _ in ANALYSES.values() if isinstance(feature, str)}
    assert named == set(FEATURES)


def same(got: Any, expected: Any, where: str = "") -> None:
    """Equal answers: tensors to `RTOL` of the reference's largest magnitude (ids and ints exactly, NaN where it is
    NaN), floats likewise, and containers (lists, dicts, named tuples, dataclasses) field by field."""
    if dataclasses.is_dataclass(expected):
        assert type(got) is type(expected), where
        for f in dataclasses.fields(expected):
            same(getattr(got, f.name), getattr(expected, f.name), f"{where}.{f.name}")
    elif isinstance(expected, tuple) and hasattr(expected, "_fields"):
        for name in expected._fields:
            same(getattr(got, name), getattr(expected, name), f"{where}.{name}")
    elif isinstance(expected, dict):
        assert list(got) == list(expected), where
        for key in expected:
            same(got[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            same(g, e, f"{where}[{i}]")
    elif isinstance(expected, torch.Tensor):
        got = torch.as_tensor(got)
        assert got.shape == expected.shape, (where, got.shape, expected.shape)
        if not (expected.is_floating_point() or expected.is_complex()):
            assert torch.equal(got.cpu(), expected.cpu()), where
            return
        assert torch.equal(got.isnan().cpu(), expected.isnan().cpu()), f"{where}: NaN where the reference has none"
        scale = max(1e-6, float(expected.nan_to_num().abs().max()))
        error = float((got.cpu() - expected.cpu()).nan_to_num().abs().max())
        assert error <= RTOL * scale, f"{where}: error {error:.3g}, largest entry {scale:.3g}"
    elif isinstance(expected, float):
        assert math.isnan(got) == math.isnan(expected), where
        assert math.isnan(got) or abs(got - expected) <= RTOL * max(1.0, abs(expected)), where
    else:
        assert got == expected, where


@pytest.fixture(scope="module", params=list(BACKENDS))
def pair(request: Any) -> tuple[Any, ...]:
    return BACKENDS[request.param]()


def _outcome(call: Callable[[Any], Any], model: Any) -> tuple[str, Any]:
    try:
        return "answer", call(model)
    except ValueError as exc:
        return "refusal", str(exc)


@pytest.mark.parametrize("name", list(ANALYSES))
def test_every_backend_gives_the_reference_answer_or_says_why_not(pair, name):
    target, reference = pair[:2]
    feature, call = ANALYSES[name]
    view = cw.as_view(target)
    feature = feature if isinstance(feature, str) else feature(view)
    support = view.supports(feature)
    kind, got = _outcome(call, target)
    expected_kind, expected = _outcome(call, reference)
    if expected_kind == "refusal":  # the model itself is refused (e.g. a path expansion of a model with a norm)
        assert kind == "refusal" and (got == expected or got in support.reason or support.reason in got), (got, expected)
    elif not support:
        assert kind == "refusal", f"{name}: the view says it cannot ({support.reason!r}) but it answered"
        assert support.reason == got or support.reason.split(":")[0] in got, (got, support.reason)
    else:
        assert kind == "answer", f"{name}: the view supports {feature} but refused: {got}"
        same(got, expected, name)
