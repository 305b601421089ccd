"""Composition terms on edge click (`CompositionDiagram`), on a GPT-2-small-shaped model.

Measured in the kernel, beside the composition scores the diagram computes anyway:

- composition scores of one kind (all 144 x 144 pairs; the diagram's first picture waits for it);
- an edge click: ``w.selected_pair = pair`` until the term payloads are set (the selected pair's term
  of the kind shown, its block on the 40 default tokens and its eigenvalues, encoded), per kind,
  median over ``--clicks`` different pairs, and the bytes those payloads send;
- a kind switch with a pair selected (the other two kinds' scores already computed);
- the analysis alone: `composition_term` + ``.block`` on the tokens + ``.eigenvalues()``, and the
  model's staleness check (`as_view`) that a click pays on top (its pair is validated, then refreshed).

The browser side of a click is a 40 x 40 heatmap and a 64-point plane (a few ms, like OVCircuit's
head switch in bench_widgets.py); not measured here.

    python benchmarks/bench_composition_terms.py [--clicks 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from _models import gpt2_small_shaped, sync

import circuitwidgets as cw
from circuitwidgets import analysis

RESULTS = Path(__file__).parent / "results" / "composition_terms.json"


def payload_bytes(*payloads: dict) -> int:
    return sum(len(p.get("data", b"")) for p in payloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=5, help="edge clicks timed per kind (median)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    model = gpt2_small_shaped(args.device)
    view = cw.as_view(model)
    rows: list[dict] = []

    def row(task: str, seconds: float, nbytes: int | None = None) -> None:
        rows.append({"task": task, "seconds": seconds, "bytes": nbytes})

    for kind in "KQV":
        sync(args.device)
        start = time.perf_counter()
        analysis.composition_scores(view, kind)
        sync(args.device)
        row(f"composition_scores, {kind}, all pairs", time.perf_counter() - start)

    w = cw.CompositionDiagram(model, kind="K")
    w.compute()  # every kind's scores: what follows is the term alone
    pairs = [[[layer, head], [layer + 1 + head % 3, (head * 5) % 12]] for layer in range(8) for head in range(12)]
    step = 0
    for kind in "KQV":
        w.kind = kind
        times, sent = [], 0
        for _ in range(args.clicks + 1):  # the first click warms up
            pair = pairs[step % len(pairs)]
            step += 1
            sync(args.device)
            start = time.perf_counter()
            w.selected_pair = pair
            sync(args.device)
            times.append(time.perf_counter() - start)
            assert w.term["kind"] == kind and w.term["pair"] == pair and w.error == "", w.error
            sent = payload_bytes(w.term, w.term_values, w.term_eigenvalues)
        row(f"edge click -> {kind} term payloads ({len(w.term_tokens)} tokens)", statistics.median(times[1:]), sent)
    times = []
    for kind in ["K", "Q", "V"] * 2:
        sync(args.device)
        start = time.perf_counter()
        w.kind = kind
        sync(args.device)
        times.append(time.perf_counter() - start)
        assert w.term["kind"] == kind
    row("kind switch with a pair selected -> new term payloads", statistics.median(times))
    times = []
    for _ in range(args.clicks):
        start = time.perf_counter()
        cw.as_view(model)
        times.append(time.perf_counter() - start)
    row("as_view(model): the staleness check every user action pays", statistics.median(times))
    ids = list(w.term_tokens)
    for kind in "KQV":
        times = []
        for i in range(args.clicks):
            first, second = pairs[i]
            sync(args.device)
            start = time.perf_counter()
            term = analysis.composition_term(view, kind, tuple(first), tuple(second), scaled=kind != "V")
            term.block(ids, ids)
            term.eigenvalues()
            sync(args.device)
            times.append(time.perf_counter() - start)
        row(f"analysis: composition_term {kind} + block + eigenvalues", statistics.median(times))

    print(f"\nGPT-2-small-shaped bridge on {args.device}, {torch.get_num_threads()} threads")
    print(f"{'what':<64} {'median':>10} {'bytes':>10}")
    for r in rows:
        s = r["seconds"]
        shown = f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"
        print(f"{r['task']:<64} {shown:>10} {'' if r['bytes'] is None else format(r['bytes'], ','):>10}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs)",
        "device": args.device, "torch": torch.__version__, "machine": platform.machine(),
        "threads": torch.get_num_threads(), "clicks": args.clicks, "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
