"""The text report and its command line."""

from __future__ import annotations

import subprocess
import sys

from planted import planted_model

from circuitwidgets.__main__ import main
from circuitwidgets.report import format_report, top_composition_pairs


def test_report_rows_and_strongest_k_pair():
    model, heads = planted_model()
    text = format_report(model, top=2)
    prev_layer, prev_head = heads["previous_token"]
    ind_layer, ind_head = heads["induction"]
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line[:2].strip().isdigit()}
    assert len(rows) == model.cfg.n_layers * model.cfg.n_heads
    assert float(rows[f"{prev_layer}.{prev_head}"][0]) > 0.9  # prev column
    assert float(rows[f"{ind_layer}.{ind_head}"][2]) > 0.9  # induct column
    k_section = text.split("strongest K-composition")[1]
    assert k_section.splitlines()[1].split()[:3] == [f"{prev_layer}.{prev_head}", "->", f"{ind_layer}.{ind_head}"]


def test_top_pairs_are_sorted_and_respect_top():
    model, _ = planted_model()
    pairs = top_composition_pairs(model, "V", 4)
    assert len(pairs) == 4
    raws = [raw for _, _, raw, _ in pairs]
    assert raws == sorted(raws, reverse=True)
    assert all(first[0] < second[0] for first, second, _, _ in pairs)


def test_cli_help_documents_options():
    out = subprocess.run(
        [sys.executable, "-m", "circuitwidgets", "report", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--top" in out and "--seed" in out and "induction" in out


def test_cli_rejects_bad_top(capsys):
    try:
        main(["report", "--top", "0"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "--top must be at least 1; got 0" in capsys.readouterr().err
