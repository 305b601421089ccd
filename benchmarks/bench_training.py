"""scan_checkpoints (issue 32, heads across training): time per checkpoint against loading it and one forward pass.

Rows, each measured side by side in one run (the same tokens, the same loader):

- the demo run: ``scan_checkpoints(cw.demo_checkpoints())`` with its default metrics (previous-token, induction,
  K-composition, loss, in-context loss) on its default tokens (8 x 51 repeated random tokens); per checkpoint,
  against ``load(step)`` (the demo loader: boot a bridge, add the float16 difference to the final weights) plus
  one forward pass of those tokens under ``torch.no_grad`` on the loaded model;
- a GPT-2-small shape (12 layers x 12 heads, d_model 768, vocabulary 50 257, random weights): ``--gpt2`` checkpoints
  saved as state dicts in a temporary folder (`Checkpoints.state_dicts`, each loaded into a freshly booted bridge),
  the same metrics, against that load plus one forward pass.

Each is timed ``--rounds`` times, alternating scan and baseline (a load and a forward per checkpoint), so that a
load coming and going on a shared machine weighs on both; the medians are reported and their ratio.

    python benchmarks/bench_training.py [--rounds 3] [--gpt2 4] [--device cpu] [--threads N] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _models import check_device, gpt2_small_shaped, sync

import circuitwidgets as cw
from circuitwidgets.analysis.checkpoints import DEFAULT_METRICS, Checkpoints, scan_checkpoints

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "training.json"


def timed_scan(ck: Checkpoints, device: str) -> float:
    ck.clear()
    gc.collect()
    sync(device)
    start = time.perf_counter()
    scan_checkpoints(ck, metrics=DEFAULT_METRICS, progress=False)
    sync(device)
    return (time.perf_counter() - start) / len(ck)


def timed_baseline(load, steps: list[int], tokens: torch.Tensor, device: str) -> tuple[float, float]:
    """Seconds per checkpoint of loading it, and of one forward pass of `tokens` on it."""
    loads, forwards = [], []
    for step in steps:
        gc.collect()
        sync(device)
        start = time.perf_counter()
        model = load(step)
        sync(device)
        loads.append(time.perf_counter() - start)
        with torch.no_grad():
            start = time.perf_counter()
            model(tokens.to(device))
            sync(device)
            forwards.append(time.perf_counter() - start)
        del model
    return sum(loads) / len(steps), sum(forwards) / len(steps)


def measure(name: str, ck: Checkpoints, load, rounds: int, device: str) -> dict:
    tokens = scan_checkpoints(ck[:1], metrics=["loss"], progress=False).tokens  # (the scan's default tokens)
    scans, loads, forwards = [], [], []
    for _ in range(rounds):
        scans.append(timed_scan(ck, device))
        load_s, forward_s = timed_baseline(load, list(ck.steps), tokens, device)
        loads.append(load_s)
        forwards.append(forward_s)
    row = {
        "name": name,
        "checkpoints": len(ck),
        "tokens": list(tokens.shape),
        "metrics": list(DEFAULT_METRICS),
        "scan_s_per_checkpoint": statistics.median(scans),
        "load_s": statistics.median(loads),
        "forward_s": statistics.median(forwards),
    }
    row["ratio"] = row["scan_s_per_checkpoint"] / (row["load_s"] + row["forward_s"])
    print(
        f"{name}: {row['scan_s_per_checkpoint']:.3f} s per checkpoint ({len(ck)} checkpoints) against load "
        f"{row['load_s']:.3f} s + forward {row['forward_s']:.3f} s = {row['load_s'] + row['forward_s']:.3f} s: "
        f"ratio {row['ratio']:.2f}",
        flush=True,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpt2", type=int, default=4, help="GPT-2-small-shaped checkpoints (0: skip)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="one round, 2 GPT-2-shaped checkpoints")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    device = check_device(args.device)
    if args.threads:  # (on a shared machine, one thread: two OpenMP threads stall each other under load)
        torch.set_num_threads(args.threads)
    if args.quick:
        args.rounds, args.gpt2 = 1, min(args.gpt2, 2)
    rows = []
    from circuitwidgets.demo import model_from_state
    from circuitwidgets.demo.checkpoints import checkpoint_state

    def demo_load(step: int):
        return model_from_state(checkpoint_state(step)).to(device)

    demo = cw.demo_checkpoints()
    rows.append(measure("demo run (2 layers x 4 heads, d_model 64)", Checkpoints(load=demo_load, steps=demo.steps), demo_load,
                        args.rounds, device))
    if args.gpt2:
        with tempfile.TemporaryDirectory() as folder:
            base = gpt2_small_shaped("cpu").state_dict()
            generator = torch.Generator().manual_seed(0)
            for i in range(args.gpt2):  # the same shape, other weights: each a step of some run
                state = {k: v + 0.01 * i * torch.randn(v.shape, generator=generator) if v.is_floating_point() else v
                         for k, v in base.items()}
                torch.save(state, Path(folder) / f"step_{1000 * i}.pt")
            del base, state

            def gpt2_load(step: int):  # what Checkpoints.state_dicts does for a step
                model = gpt2_small_shaped(device)
                model.load_state_dict(torch.load(Path(folder) / f"step_{step}.pt", map_location=device, weights_only=True))
                return model.eval()

            ck = Checkpoints.state_dicts(folder, lambda: gpt2_small_shaped(device))
            rows.append(measure("GPT-2-small shape (12 x 12 heads, d_model 768, vocabulary 50 257)", ck, gpt2_load,
                                args.rounds, device))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({
        "rows": rows, "device": device, "rounds": args.rounds, "torch": torch.__version__, "python": platform.python_version(),
        "threads": torch.get_num_threads(),
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
