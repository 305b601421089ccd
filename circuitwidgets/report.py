"""A plain-text report of every head of a model: detector scores, OV copying, composition."""

from __future__ import annotations

import math
from typing import Any

import torch

from . import analysis
from .model import as_view

SCORE_COLUMNS = (
    ("previous_token", "prev"),
    ("duplicate_token", "dup"),
    ("induction", "induct"),
    ("prefix_matching", "prefix"),
    ("direct_copying", "dcopy"),
)


def head_table(model: Any, *, seed: int = 0) -> dict[str, torch.Tensor]:
    """Every per-head score, each ``[n_attn_layers, n_heads]``, keyed by column name."""
    table = {name: analysis.head_scores(model, kind, seed=seed) for kind, name in SCORE_COLUMNS}
    table["ov_copy"] = analysis.copying_scores(model)
    return table


def top_composition_pairs(model: Any, kind: str, top: int) -> list[tuple[tuple[int, int], tuple[int, int], float, float]]:
    """The `top` strongest (h1, h2, raw, baseline-corrected) pairs of one composition kind."""
    view = as_view(model)
    raw = analysis.composition_scores(model, kind)
    baseline = float(analysis.composition_baseline(model, kind=kind))
    flat = torch.nan_to_num(raw, nan=-math.inf).flatten()
    order = torch.argsort(flat, descending=True)[:top]
    pairs = []
    for index in order.tolist():
        if flat[index] == -math.inf:
            break
        l1, h1, l2, h2 = torch.unravel_index(torch.tensor(index), raw.shape)
        score = float(flat[index])
        pairs.append(((view.attn_layers[int(l1)], int(h1)), (view.attn_layers[int(l2)], int(h2)), score, score - baseline))
    return pairs


def _cell(value: float) -> str:
    # NaN means undefined (e.g. an OV circuit that is exactly zero), not a score of 0.
    return f"{'-':>8}" if math.isnan(value) else f"{value:8.3f}"


def format_report(model: Any, *, top: int = 5, seed: int = 0) -> str:
    """The report as text: one row per head, then the strongest Q/K/V composition pairs."""
    view = as_view(model)
    table = head_table(model, seed=seed)
    columns = list(table)
    lines = [
        f"model: {view.n_layers} layers x {view.n_heads} heads, d_model {view.d_model}, "
        f"d_head {view.d_head}, vocab {view.d_vocab}, n_ctx {view.n_ctx}",
        f"scores in [0, 1] on repeated random tokens (seed {seed}); ov_copy in [-1, 1] (1 = pure copying); - = undefined",
        "",
        "head   " + "".join(f"{name:>8}" for name in columns),
    ]
    for position, layer in enumerate(view.attn_layers):
        for head in range(view.n_heads):
            values = "".join(_cell(float(table[name][position, head])) for name in columns)
            lines.append(f"{layer:>2}.{head:<3} {values}")
    for kind in ("Q", "K", "V"):
        lines += ["", f"strongest {kind}-composition pairs (raw, minus random baseline):"]
        pairs = top_composition_pairs(model, kind, top)
        if not pairs:
            lines.append("  (none: composition needs at least two attention layers)")
        for (l1, h1), (l2, h2), raw, corrected in pairs:
            lines.append(f"  {l1}.{h1} -> {l2}.{h2}   {raw:.3f}   {corrected:+.3f}")
    return "\n".join(lines)
