"""The demo card's path-patching table (circuitwidgets/demo/README.md, "Which path carries it"): every number
recomputed with the recipe the card states, and the claims made of them."""

from __future__ import annotations

import re

import pytest

import circuitwidgets as cw
from circuitwidgets.demo import tables

SECOND = range(21, 40)
PREVIOUS, CONTROL = [(0, 1), (0, 3)], [(0, 0), (0, 2)]
EVERY = [(1, h, c) for h in range(4) for c in "qkv"] + ["logits"]
RECEIVERS = {
    "every path": EVERY,
    "the induction heads' keys (K-composition)": [(1, h, "k") for h in range(4)],
    "the induction heads' queries": [(1, h, "q") for h in range(4)],
    "the induction heads' values": [(1, h, "v") for h in range(4)],
    "the logits directly": ["logits"],
}
SENDERS = {"previous-token heads 0.1, 0.3": PREVIOUS, "other layer-0 heads 0.0, 0.2 (control)": CONTROL}
TOL = 1.5e-3  # the table rounds to 3 decimals; recomputed in float32 on another machine: float noise on top


@pytest.fixture(scope="module")
def runs():
    model = cw.demo_model()
    tokens = cw.analysis.repeated_random_tokens(model, seq_len=20, batch=16, seed=3)
    other = cw.analysis.repeated_random_tokens(model, seq_len=20, batch=16, seed=4)
    return model, tokens, other


def card_rows() -> list[list[str]]:
    text = tables.README.read_text()
    block = re.search(r"<!-- paths-table:start -->\n(.*?)<!-- paths-table:end -->", text, re.S)
    assert block, "the demo card has no path-patching table"
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in block.group(1).splitlines()[2:]]


def test_the_card_table_is_what_the_recipe_measures(runs):
    model, tokens, other = runs
    rows = card_rows()
    assert rows[0][0] == "none (the model)"
    every: dict[str, float] = {}
    for senders, receivers, loss, change, share in rows[1:]:
        got = cw.analysis.path_patching(model, tokens, other, "loss", SENDERS[senders], RECEIVERS[receivers], "noising",
                                        positions=SECOND)
        assert float(rows[0][2]) == pytest.approx(got.clean, abs=TOL)
        assert float(loss) == pytest.approx(got.value, abs=TOL), (senders, receivers)
        assert float(change) == pytest.approx(got.value - got.clean, abs=TOL), (senders, receivers)
        if receivers == "every path":
            every[senders] = got.value - got.clean
        assert share == f"{100 * (got.value - got.clean) / every[senders]:.0f} %", (senders, receivers)
    assert len(rows) == 1 + 5 + 4


def test_every_path_is_resample_ablation_with_the_other_prompts(runs):
    model, tokens, other = runs
    for heads in (PREVIOUS, CONTROL):
        everywhere = cw.analysis.path_patching(model, tokens, other, "loss", heads, EVERY, "noising", positions=SECOND)
        resampled = cw.analysis.joint_ablation_effect(model, tokens, heads, method="resample", reference=other, positions=SECOND)
        assert (everywhere.per_prompt - everywhere.clean_per_prompt - resampled).abs().max() < 1e-4


def test_the_claims_made_of_the_table(runs):
    rows = {(r[0], r[1]): float(r[3]) for r in card_rows()[1:]}
    previous = {receivers: change for (senders, receivers), change in rows.items() if senders.startswith("previous")}
    keys = previous["the induction heads' keys (K-composition)"]
    assert keys >= 0.95 * previous["every path"]  # the keys carry (nearly) all of it
    assert max(v for r, v in previous.items() if r not in ("every path", "the induction heads' keys (K-composition)")) < 0.02
    control = {receivers: change for (senders, receivers), change in rows.items() if senders.startswith("other")}
    assert control["the induction heads' values"] > control["the induction heads' keys (K-composition)"]
