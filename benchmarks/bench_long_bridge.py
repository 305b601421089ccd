"""A long prompt on a TransformerLens bridge: the first picture against a memory-efficient forward pass.

Model: GPT-2 small's shape (12 layers x 12 heads, d_model 768, d_head 64, MLP 3 072, vocabulary
50 257, LayerNorm, learned positions), random weights, TransformerLens 4 ``boot_native`` with
n_ctx 8 192; random token ids; layer 5 shown. Each path runs in its own process, its peak the
process's resident memory (psutil, every 2 ms; CUDA: the allocator's peak) above the level after
building the model:

- ``forward``: the model's forward pass up to layer 5's attention with every layer's attention
  through ``scaled_dot_product_attention`` (`circuitwidgets.backends.efficient.memory_efficient`,
  the run stopping there): what a picture of the layer cannot cost less than;
- ``widget``: ``AttentionPattern(model, tokens=ids, layer=5)`` from construction to its first
  picture (the overview payload), interleaved with ``forward`` in the same process;
- ``eager``: the model's own eager forward pass up to layer 5 (``stop_at_layer=6``), which holds
  every head's scores and pattern of a layer (what the widget cost before; ``--eager``, slow).

    python benchmarks/bench_long_bridge.py [--tokens 8192] [--eager] [--device cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _shared import PeakRSS, comm_bytes

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "long_bridge.json"
LAYER = 5


def build(n_ctx: int, device: str):
    import torch
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    cfg = TransformerBridgeConfig(
        d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=n_ctx, d_vocab=50257, d_mlp=3072,
        act_fn="gelu_new", normalization_type="LN", seed=0, device=device,
    )
    model = TransformerBridge.boot_native(cfg).to(device).eval()
    with torch.no_grad():  # sharper heads, as trained ones are (random weights attend almost uniformly)
        for block in model.blocks:
            block.attn.original_component.q.weight.mul_(8.0)
    return model


def one(n: int, path: str, device: str) -> dict:
    import torch

    import circuitwidgets as cw
    from circuitwidgets.backends.efficient import memory_efficient
    from circuitwidgets.widgets import _cache

    model = build(n, device)
    ids = torch.randint(1, 50257, (n,), generator=torch.Generator().manual_seed(0))

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop

    def forward():
        with torch.no_grad(), memory_efficient(model, LAYER, {LAYER: stop}), contextlib.suppress(Stop):
            model(ids[None].to(device))
        sync()

    def eager():
        with torch.no_grad():
            model(ids[None].to(device), stop_at_layer=LAYER + 1)
        sync()

    def widget():
        _cache.clear()
        w = cw.AttentionPattern(model, tokens=ids.tolist(), layer=LAYER)
        sync()
        return w

    def measure(run):
        with PeakRSS(device) as peak:
            start = time.perf_counter()
            result = run()
            seconds = time.perf_counter() - start
        return seconds, peak.mb, result

    row: dict = {"tokens": n, "path": path, "device": device}
    if path == "eager":
        row["seconds"], row["peak_mb"], _ = measure(eager)
        return row
    forward()  # warm-up
    times, peaks, forwards, forward_peaks = [], [], [], []
    for _ in range(2):
        seconds, mb, _ = measure(forward)
        forwards.append(seconds)
        forward_peaks.append(mb)
        if path == "widget":
            seconds, mb, w = measure(widget)
            times.append(seconds)
            peaks.append(mb)
            row["first_message_bytes"] = comm_bytes(w)
            row["memory_note"] = w.memory_note
            row["error"] = w.error
            w.close()
    row["forward_s"], row["forward_peak_mb"] = statistics.median(forwards), max(forward_peaks)
    if times:
        row["seconds"], row["peak_mb"] = statistics.median(times), max(peaks)
        row["time_over_forward"] = row["seconds"] / row["forward_s"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--one", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[1]), args.one[0], args.device)))
        return 0
    rows = []
    for path in ("widget", *(("eager",) if args.eager else ())):
        cmd = [sys.executable, __file__, "--one", path, str(args.tokens), "--device", args.device]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            rows.append({"tokens": args.tokens, "path": path, "failed": done.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    RESULTS.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=1) + "\n")
    RESULTS.with_suffix(".md").write_text(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """The README table of `rows`: the widget against the memory-efficient forward measured beside it."""
    lines = [
        "| tokens | path | device | time | forward to the layer (same process) | time / forward | peak above the model | "
        "forward's peak | first message |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['tokens']} | {r['path']} | | failed: {r['failed']} | | | | | |")
            continue
        forward = f"{r['forward_s']:.1f} s" if "forward_s" in r else ""
        ratio = f"{r['time_over_forward']:.2f}x" if "time_over_forward" in r else ""
        first = f"{r['first_message_bytes'] / 1e6:.2f} MB" if "first_message_bytes" in r else ""
        forward_peak = f"{r['forward_peak_mb']:.0f} MB" if "forward_peak_mb" in r else ""
        lines.append(f"| {r['tokens']} | {r['path']} | {r['device']} | {r['seconds']:.1f} s | {forward} | {ratio} | "
                     f"{r['peak_mb']:.0f} MB | {forward_peak} | {first} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
