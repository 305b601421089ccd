"""Cost of the staleness check that every widget event pays (`as_view(model)`), on a GPT-2-small-shaped model.

The model is a randomly initialised TransformerLens 4 bridge (boot_native) with GPT-2 small's shape
(12 layers x 12 heads, d_model 768, d_vocab 50 257, LayerNorm and MLPs: 163 M parameters). Measured:

- ``as_view(model)`` on an unchanged model: the check alone (median of ``--calls`` calls), and its
  parts: the content fingerprint of every parameter, and `ModelView.hook_state` (without hooks and
  with one hook);
- the rebuild after an edit through ``.data`` (check, see the change, build a new view);
- next to them, what a user action costs anyway: a forward pass that stops after layer 1
  (``stop_at_layer=2``), a layer switch in AttentionPattern (`ModelView.patterns` of one layer: one
  run with a patterns-only cache) and a full forward pass, on ``--tokens`` random tokens.

    python benchmarks/bench_staleness.py [--calls 50] [--tokens 50] [--device cpu]
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

from circuitwidgets.model import _fingerprints, as_view

RESULTS = Path(__file__).parent / "results" / "staleness.json"




def timed(fn, runs: int, device: str) -> float:
    """Median seconds of `runs` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(runs):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50, help="timed calls of the check (median)")
    parser.add_argument("--runs", type=int, default=10, help="timed forward passes (median)")
    parser.add_argument("--rebuilds", type=int, default=3, help="timed edits and rebuilds (median)")
    parser.add_argument("--tokens", type=int, default=50, help="prompt length of the forward passes")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    start = time.perf_counter()
    model = gpt2_small_shaped(args.device)
    boot_s = time.perf_counter() - start
    parameters = list(model.parameters())
    n_parameters = sum(p.numel() for p in parameters)
    view = as_view(model)
    tokens = torch.randint(0, 50257, (1, args.tokens), generator=torch.Generator().manual_seed(0)).to(args.device)

    rows: list[dict] = []  # {"task", "seconds", "part": True for the parts of the check}

    def row(task: str, seconds: float, part: bool = False) -> None:
        rows.append({"task": task, "seconds": seconds, "part": part})

    row("as_view, unchanged model (the check)", timed(lambda: as_view(model), args.calls, args.device))
    assert as_view(model) is view, "the view was rebuilt without a change"
    row("content fingerprint of every parameter", timed(lambda: _fingerprints(parameters), args.calls, args.device), True)
    row("hook_state(), no hooks", timed(view.hook_state, args.calls, args.device), True)
    with model.hooks(fwd_hooks=[("blocks.3.attn.hook_pattern", lambda x, hook: x)]):
        row("hook_state(), one hook", timed(view.hook_state, args.calls, args.device), True)

    weight = model.blocks[5].attn.v._original_component.weight

    def edit_and_rebuild() -> None:
        weight.data[0, 0] += 1.0  # through .data: no version bump, seen by the content fingerprint
        assert as_view(model) is not view

    times = []
    for _ in range(args.rebuilds):
        sync(args.device)
        begin = time.perf_counter()
        edit_and_rebuild()
        sync(args.device)
        times.append(time.perf_counter() - begin)
        view = as_view(model)
    row("as_view after an edit through .data (rebuild)", statistics.median(times))

    with torch.no_grad():
        row(f"forward pass to layer 1 ({args.tokens} tokens)",
            timed(lambda: model(tokens, stop_at_layer=2), args.runs, args.device))
        row(f"layer switch: patterns of layer 1 ({args.tokens} tokens)",
            timed(lambda: view.patterns(tokens, layers=[1]), args.runs, args.device))
        row(f"full forward pass ({args.tokens} tokens)", timed(lambda: model(tokens), args.runs, args.device))

    print(f"\nGPT-2-small-shaped bridge ({n_parameters / 1e6:.0f} M parameters, LN, MLPs, random weights) on "
          f"{args.device}, {torch.get_num_threads()} threads; boot {boot_s:.1f} s")
    print(f"{'what':<52} {'median':>10}")
    for r in rows:
        seconds = r["seconds"]
        shown = f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
        name = ("  " if r["part"] else "") + r["task"]
        print(f"{name:<52} {shown:>10}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs)",
        "parameters": n_parameters, "device": args.device, "torch": torch.__version__,
        "machine": platform.machine(), "threads": torch.get_num_threads(), "calls": args.calls,
        "runs": args.runs, "rebuilds": args.rebuilds, "tokens": args.tokens, "boot_s": boot_s,
        "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
