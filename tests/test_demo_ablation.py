"""The demo card's mean-ablation table (circuitwidgets/demo/README.md, "Mean ablation on repeated random
tokens"): every number recomputed with the recipe the card states, and the claims made of them."""

from __future__ import annotations

import re

import pytest
import torch

import circuitwidgets as cw
from circuitwidgets.analysis.interventions import bootstrap_interval, next_token_loss, sign_flip_p_value
from circuitwidgets.demo import tables

FIRST, SECOND = range(1, 20), range(21, 40)  # logit positions predicting the first / second copy
ROWS = {  # the table's rows: their heads
    "none (the model)": [],
    "induction heads 1.0, 1.1, 1.2, 1.3": [(1, 0), (1, 1), (1, 2), (1, 3)],
    "previous-token heads 0.1, 0.3": [(0, 1), (0, 3)],
    "other layer-0 heads 0.0, 0.2 (control)": [(0, 0), (0, 2)],
}
TOL = 1.5e-3  # the table rounds to 3 decimals; recomputed in float32 on another machine: float noise on top


@pytest.fixture(scope="module")
def model():
    return cw.demo_model()


@pytest.fixture(scope="module")
def tokens(model):
    return cw.analysis.repeated_random_tokens(model, seq_len=20, batch=16, seed=3)


def card_table() -> dict[str, list[str]]:
    """The table as written in the README: row label -> its other cells."""
    text = tables.README.read_text()
    block = re.search(r"<!-- ablation-table:start -->\n(.*?)<!-- ablation-table:end -->", text, re.S)
    assert block, "the README has no ablation table"
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in block.group(1).splitlines()[2:]]
    return {row[0]: row[1:] for row in rows}


def test_the_recipe_is_the_one_stated(model, tokens):
    assert tokens.shape == (16, 41) and (tokens[:, 0] == 0).all()
    assert torch.equal(tokens[:, 1:21], tokens[:, 21:])  # [BOS, r, r]


def test_the_card_table_is_what_the_recipe_measures(model, tokens):
    table = card_table()
    assert list(table) == list(ROWS)
    for label, heads in ROWS.items():
        losses = next_token_loss(cw.analysis.run_with_ablation(model, tokens, heads, "mean"), tokens)
        first, second = losses[:, FIRST].mean().item(), losses[:, SECOND].mean().item()
        cells = table[label]
        assert float(cells[0]) == pytest.approx(first, abs=TOL), label
        assert float(cells[1]) == pytest.approx(second, abs=TOL), label
        if not heads:
            assert cells[2:] == ["", ""]
            continue
        change = cw.analysis.joint_ablation_effect(model, tokens, heads, positions=SECOND)
        low, high = bootstrap_interval(change, 1000, 0)
        p, how = sign_flip_p_value(change, 1000, 0)
        mean, lo, hi = re.fullmatch(r"\+([\d.]+) \[([\d.]+), ([\d.]+)\]", cells[2]).groups()
        assert [float(mean), float(lo), float(hi)] == pytest.approx([change.mean().item(), low.item(), high.item()], abs=TOL)
        assert how.startswith("exact") and cells[3] == f"{p.item():.1e}"
        assert p.item() == 2 / 2**16 and (change > 0).all()  # the smallest p there is: every prompt's loss rose


def test_the_claims_made_of_the_table(model, tokens):
    second = {label: float(cells[1]) for label, cells in card_table().items()}
    clean, induction, previous, control = second.values()
    uniform = cw.demo.model_card()["loss"]["uniform"]
    assert clean < 0.5 and induction > uniform - 0.3 and previous > uniform - 0.4  # both layers are needed
    assert 1.0 < control - clean < (previous - clean) / 2  # the control heads matter, less than half as much
    for heads in list(ROWS.values())[1:]:  # the first copy: a small fall in every row
        change = cw.analysis.joint_ablation_effect(model, tokens, heads, positions=FIRST)
        low, high = bootstrap_interval(change, 1000, 0)
        assert -0.035 < change.mean().item() < -0.025 and high.item() < 0
