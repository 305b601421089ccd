"""TransformerLens 2.x: the demo training run loads as `HookedTransformer` models, and its scan gives the card's curves
(recorded from TransformerLens 4 bridges) and the same phase change."""

from __future__ import annotations

import torch
from transformer_lens import HookedTransformer

import circuitwidgets as cw
from circuitwidgets.analysis import scan_checkpoints


def test_the_demo_run_scans_the_same_under_transformer_lens_2():
    ck = cw.demo_checkpoints()[19:]  # steps 838 .. 6000: the phase change and both sides of it
    assert isinstance(ck.at(6000), HookedTransformer)
    assert all(torch.equal(p, q) for p, q in zip(ck.at(6000).parameters(), cw.demo_model().parameters(), strict=True))
    scan = scan_checkpoints(ck, metrics=["induction", "loss"], progress=False)
    card = cw.demo.model_card()["training_run"]
    first = card["steps"].index(ck.steps[0])
    induction = scan.curve("induction", [(1, h) for h in range(4)])
    second_copy = scan.curve("loss", positions=range(26, 50))
    assert torch.allclose(induction, torch.tensor(card["curves"]["induction"][first:]), atol=2e-4)
    assert torch.allclose(second_copy, torch.tensor(card["curves"]["second_copy_loss"][first:]), atol=2e-4)
    assert list(scan.phase_change("induction", [(1, h) for h in range(4)])) == card["phase_change"]["induction"]
