"""The demo README's metric tables, rendered from the model cards (never typed by hand).

``python -m circuitwidgets.demo.tables`` rewrites every block of ``README.md`` between
``<!-- card:NAME:start -->`` and ``<!-- card:NAME:end -->`` from card NAME; the training
commands call `update_readme` after writing a card. ``tests/test_demo.py`` checks the README
is current.

Example:
    >>> from circuitwidgets import demo
    >>> print(render("1l", demo.model_card("1l")).splitlines()[0])
    | head | planted trigrams found | copying score | copies |
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent / "README.md"


def _f(x: Any, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _heads_2l(card: dict[str, Any]) -> list[str]:
    scores, copying = card["head_scores"], card["copying_scores"]
    previous = {tuple(h) for h in card["heads"]["previous_token"]}
    induction = {tuple(h) for h in card["heads"]["induction"]}
    kinds = ["previous_token", "duplicate_token", "induction", "prefix_matching", "direct_copying"]
    lines = [
        "| head | role | previous-token | duplicate | induction | prefix-matching | direct copying | OV copying |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layer, row in enumerate(copying):
        for head in range(len(row)):
            role = "previous-token" if (layer, head) in previous else "induction" if (layer, head) in induction else "-"
            cells = " | ".join(_f(scores[kind][layer][head]) for kind in kinds)
            lines.append(f"| {layer}.{head} | {role} | {cells} | {_f(row[head])} |")
    return lines


def _composition_2l(card: dict[str, Any]) -> list[str]:
    into = card["k_composition_into_induction_heads"]
    sources = sorted(next(iter(into.values()))) if into else []
    lines = [
        f"K-composition (raw `composition_scores(model, \"K\")`; random baseline {card['k_composition_baseline']:.3f}):",
        "",
        "| K-composition into | " + " | ".join(f"from {s}" for s in sources) + " |",
        "|---|" + "---|" * len(sources),
    ]
    lines += [f"| {head} | " + " | ".join(_f(row[s]) for s in sources) + " |" for head, row in into.items()]
    return lines


def _losses_2l(card: dict[str, Any]) -> list[str]:
    def row(label: str, losses: dict[str, float]) -> str:
        return f"| {label} | {_f(losses['first_copy'])} | {_f(losses['second_copy'])} | {_f(losses['all'])} |"

    previous = ", ".join(f"{layer}.{head}" for layer, head in card["heads"]["previous_token"])
    return [
        "| | first copy | second copy | all positions |",
        "|---|---|---|---|",
        row("model", card["loss"]),
        row(f"previous-token heads {previous} zeroed", card["ablation"]["previous_token_heads"]),
        row("other layer-0 heads zeroed (control)", card["ablation"]["other_layer0_heads"]),
        row("induction heads zeroed", card["ablation"]["induction_heads"]),
    ]


def _bucket_header(title: str, buckets: list[list[int]], label: str = "query positions") -> list[str]:
    header = f"| {label} | " + " | ".join(f"{a}–{b}" for a, b in buckets) + " |"
    return [title, "", header, "|---|" + "---|" * len(buckets)]


def _by_position(title: str, metrics: dict[str, Any]) -> list[str]:
    lines = _bucket_header(title, metrics["buckets"])
    for head, values in metrics["previous_token_attention"].items():
        lines.append(f"| attention of {head} on the previous token | " + " | ".join(_f(v, 2) for v in values) + " |")
    lines.append("| second-copy loss | " + " | ".join(_f(row["loss"], 2) for row in metrics["second_copy_loss"]) + " |")
    lines.append("| (second-copy targets) | " + " | ".join(str(row["count"]) for row in metrics["second_copy_loss"]) + " |")
    return lines


def _training_run(run: dict[str, Any]) -> list[str]:
    curves, windows = run["curves"], run["phase_change"]
    columns = [
        ("previous_token", "previous-token"), ("induction", "induction"), ("k_composition", "K-comp. prev. → ind."),
        ("k_composition_other", "K-comp. other → ind."), ("second_copy_loss", "second-copy loss"),
        ("in_context_loss", "in-context loss"),
    ]
    columns = [(key, label) for key, label in columns if key in curves]
    spans = "; ".join(f"{label} {windows[key][0]}–{windows[key][1]}" for key, label in columns if key in windows)
    lines = [
        f"**Along training** (`cw.demo_checkpoints()`: {len(run['steps'])} checkpoints of this run, "
        f"{run['file']['bytes'] / 1e6:.2f} MB; maxima over the heads of each role, losses on `[BOS, r, r]`). "
        f"Phase change (`CheckpointScan.phase_change`) of each column: {spans}.",
        "",
        "| step | " + " | ".join(label for _, label in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for i, step in enumerate(run["steps"]):
        lines.append(f"| {step} | " + " | ".join(_f(curves[key][i]) for key, _ in columns) + " |")
    return lines


def _names(heads: list[list[int]]) -> str:
    return ", ".join(f"{layer}.{head}" for layer, head in heads) or "none"


def _render_2l(card: dict[str, Any]) -> list[str]:
    heads = card["heads"]
    lines = [
        f"- **Previous-token heads: {_names(heads['previous_token'])}** (layer 0).",
        f"- **Induction heads: {_names(heads['induction'])}** (layer 1).",
        "",
        *_heads_2l(card), "", *_composition_2l(card), "", *_losses_2l(card), ""]
    lines += _by_position("**By position, this model:**", card["by_position"])
    run = card.get("training_run")
    if run:
        lines += ["", *_training_run(run)]
    before = card.get("before_this_recipe")
    if before:
        lines += ["", *_by_position(f"**By position, the model shipped before ({before['recipe']}):**", before["by_position"])]
    return lines


def _render_1l(card: dict[str, Any]) -> list[str]:
    metrics = card["metrics"]
    per_head, scores = metrics["trigrams_found_per_head"], metrics["copying_scores"]
    copying = set(metrics["copying_heads"])
    lines = [
        "| head | planted trigrams found | copying score | copies |",
        "|---|---|---|---|",
    ]
    for index, (head, fraction) in enumerate(per_head.items()):
        lines.append(f"| {head} | {fraction:.0%} | {_f(scores[index])} | {'yes' if head in copying else 'no'} |")
    lines.append(
        f"| any head | {metrics['trigrams_found_by_any_head']:.0%} | | {len(copying)} of {len(per_head)} heads |"
    )
    lines += ["", "| planted trigram (source … destination → out) | found by |", "|---|---|"]
    for name, heads in metrics["trigram_heads"].items():
        source, rest = name.split("...", 1)
        destination, out = rest.split("->", 1)
        lines.append(f"| `{source}` … `{destination}` → `{out}` | {', '.join(heads) or '-'} |")
    loss = metrics["loss"]
    lines += [
        "",
        "| held-out | value |",
        "|---|---|",
        f"| loss where a planted trigram applies | {_f(loss['rule_applies'])} |",
        f"| p(out) after a destination, its source earlier | {_f(loss['p_out_with_source'])} |",
        f"| p(out) after a destination, no source earlier | {_f(loss['p_out_without_source'])} |",
        f"| loss over all positions | {_f(loss['all'])} |",
    ]
    if "by_position" in metrics:
        lines += ["", *_by_position_1l(metrics["by_position"])]
    return lines


def _by_position_1l(metrics: dict[str, Any]) -> list[str]:
    title = (
        f"**By position** (held-out, every query position of the {metrics['buckets'][-1][1] + 1}-token context; "
        "the position of the destination, whose next token is the out):"
    )
    lines = _bucket_header(title, metrics["buckets"], "destination positions")
    for label, key in (("its source earlier", "with_source"), ("no source earlier (control)", "without_source")):
        lines.append(f"| p(out), {label} | " + " | ".join(_f(v) for v in metrics[f"p_out_{key}"]) + " |")
        lines.append(f"| (destinations, {label.removesuffix(' (control)')}) | " + " | ".join(str(n) for n in metrics[key]) + " |")
    return lines


def render(name: str, card: dict[str, Any]) -> str:
    """The markdown tables of demo model `name` (``"2l"`` or ``"1l"``) from its card."""
    if name == "2l":
        return "\n".join(_render_2l(card))
    if name == "1l":
        return "\n".join(_render_1l(card))
    raise ValueError(f"name={name!r} has no tables; choose '1l' or '2l'")


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- card:{name}:start -->\n)(.*?)(<!-- card:{name}:end -->)", re.S)


def current(name: str, readme: str) -> str | None:
    """The text of `readme` between model `name`'s markers (None when the markers are missing)."""
    match = _block(name).search(readme)
    return None if match is None else match.group(2).removesuffix("\n")


def update_readme(name: str, card: dict[str, Any], path: Path = README) -> bool:
    """Rewrite `path`'s block for model `name` from `card`; False when the file or markers are missing."""
    if not path.is_file():
        return False
    text = path.read_text()
    if current(name, text) is None:
        return False
    path.write_text(_block(name).sub(lambda m: m.group(1) + render(name, card) + "\n" + m.group(3), text))
    return True


if __name__ == "__main__":
    from . import model_card

    for model in ("2l", "1l"):
        print(model, "updated" if update_readme(model, model_card(model)) else "no markers")
