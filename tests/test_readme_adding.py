"""The README's "Adding a backend" and "Adding a head metric" examples run as written, and do what they say.

A backend added as the README shows is picked by the dispatch for the models it accepts and answers
every analysis of the conformance matrix as the reference does (one line there); a head metric added
as one row of the table is offered by `head_scores`, `scan_heads`, `HeadScores` and `HeadAtlas`, and
computed where the model runs (also in a trace).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from test_backend_matrix import ANALYSES, same

import circuitwidgets as cw
from circuitwidgets import head_metrics, model
from circuitwidgets import transport as tp

README = Path(__file__).resolve().parents[1] / "README.md"


def example(heading: str) -> str:
    section = README.read_text(encoding="utf-8").split(f"### {heading}", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def harness_backend():
    namespace: dict = {}
    exec(compile(example("Adding a backend"), "README.md", "exec"), namespace)  # the README's own code
    cls = namespace["HarnessBackend"]
    try:
        yield namespace
    finally:
        model._BACKEND_TYPES.remove(cls)  # (registered by the example)


def test_the_adding_a_backend_example_runs_and_answers_every_analysis_as_the_reference(harness_backend):
    demo = cw.demo_model()
    harness = harness_backend["Harness"](demo)
    view = cw.as_view(harness)
    assert type(view.backend).__name__ == "HarnessBackend" and view.user_model is harness
    assert [cls.__name__ for cls in model.backend_types()][-2:] == ["HarnessBackend", "TransformerLensBackend"]
    for name, (feature, call) in ANALYSES.items():
        if isinstance(feature, str) and not view.supports(feature):
            continue
        same(call(harness), call(demo), name)
    w, reference = (cw.AttentionPattern(m, prompt="abcabc", layer=1) for m in (harness, demo))
    assert w.error == "" and torch.equal(tp.decode(w.patterns), tp.decode(reference.patterns))


@pytest.fixture
def first_two(tmp_path):
    namespace: dict = {"torch": torch}
    code = tmp_path / "readme_head_metric.py"  # (as a notebook cell's: its source can be read, by nnsight too)
    code.write_text(example("Adding a head metric"), encoding="utf-8")
    exec(compile(code.read_text(encoding="utf-8"), str(code), "exec"), namespace)
    try:
        yield head_metrics.METRICS["first_two"]
    finally:
        head_metrics.METRICS.pop("first_two")


def test_the_adding_a_head_metric_example_adds_it_everywhere(first_two):
    demo = cw.demo_model()
    tokens = cw.analysis.repeated_random_tokens(demo, seq_len=10, batch=3)
    patterns = cw.analysis.attention_patterns(demo, tokens) if tokens.shape[0] == 1 else cw.as_view(demo).patterns(tokens)
    expected = patterns[:, :, :, 2:, :2].sum(-1).mean(-1).mean(0)  # mean over d >= 2 of A[d, 0] + A[d, 1]
    assert torch.allclose(cw.analysis.head_scores(demo, "first_two", tokens), expected, atol=1e-5)
    scan = cw.analysis.scan_heads(demo, [tokens[0].tolist(), tokens[1, :15].tolist()], progress=False)
    assert "first_two" in scan.metrics  # offered by default
    one = cw.as_view(demo).patterns(tokens[:1])[0]
    assert torch.allclose(scan.values["first_two"][0], one[:, :, 2:, :2].sum(-1).mean(-1), atol=1e-5)
    w = cw.HeadScores(demo, kinds=["induction", "first_two"], kind="first_two")
    assert w.error == "" and w.info["labels"]["first_two"] == "first two tokens"
    assert torch.allclose(w.scores_of("first_two"), cw.analysis.head_scores(demo, "first_two"), atol=1e-6)
    atlas = cw.HeadAtlas(demo, scan=scan, x_metric="first_two", y_metric="induction")
    assert atlas.error == "" and "first_two" in atlas.scan["metrics"] and atlas.scan["labels"]["first_two"] == "first two tokens"


def test_an_added_head_metric_is_computed_where_the_model_runs(first_two):
    pytest.importorskip("nnsight")
    hf, tokenizer = cw.demo.tiny_hf_model("llama")
    local, traced = cw.HFView(hf, tokenizer=tokenizer), cw.HFView(hf, tokenizer=tokenizer, remote="local")
    tokens = torch.tensor([[1, *range(3, 13), *range(3, 13)]])
    there, here = (cw.analysis.head_scores(view, "first_two", tokens) for view in (traced, local))
    assert traced.traces == 1 and torch.allclose(there, here, atol=1e-5)
