"""Long prompts on the Hugging Face / nnsight path (issue 22): the widget's first picture beside the model's own forward.

Model: a random Llama built from a `LlamaConfig` with ``AutoModelForCausalLM.from_config`` (no download):
rotary, 2 layers, 8 heads in 2 K/V groups of d_head 64 (d_model 512, MLP 1 024), 32 768 positions, the
demo tokenizer's vocabulary (64 ids), Hugging Face's default attention (sdpa, which never materialises
the weights); its q_proj weights scaled by 8 so that heads attend sharply as trained heads do. Token ids
at random; layer 1 shown.

Per length (4 096, 16 384 and 32 768 tokens), each row in its own Python process (its peak is its own):
- ``forward``: ``hf(ids)`` under ``no_grad`` — the model's own sdpa forward pass, every position's logits;
- ``hf``: ``cw.AttentionPattern(cw.HFView(hf, tokenizer=tok), tokens=ids, layer=1)``, construction until its
  payload is ready: one trace to layer 1, whose weights `circuitwidgets.in_trace` rebuilds a block of rows
  at a time (`in_trace.BLOCK_CELLS`) and pools to the overview the widget draws;
- ``nnsight_local``: the same through ``nnsight.TransformersModel`` with ``remote="local"`` (the request
  serialised and run as NDIF would run it).
Each widget process also runs the forward pass, each construction followed by a forward (``forward_s``:
the same process, interleaved), so ``time_ratio``, the median of construct / forward, is measured side by
side; 3 runs of each (2 from 16 384 tokens), medians, the largest peak. ``peak_mb``: the process's resident memory
(psutil, sampled every 2 ms in a thread) above its level just before the call (after building the model
and a 512-token warm-up, glibc's free memory handed back first); ``peak_above_forward_mb``: the widget's
peak less the forward row's at that length. ``first_message_bytes``: the widget's state as the comm
open message carries it (JSON + binary buffers, the bundle left out). ``export_bytes``: the page ``save_html``
writes after the last construction (the overview and the shown head's finer levels; the bundle included).

    python benchmarks/bench_long_hf.py [--lengths 4096,16384,32768] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import PeakRSS as _PeakRSS
from _shared import comm_bytes, random_llama

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "long_hf.json"
LAYER = 1
HEADS, KV_HEADS, D_HEAD, LAYERS, N_CTX = 8, 2, 64, 2, 32768
PATHS = ("forward", "hf", "nnsight_local")
MB = 2**20
DEVICE = os.environ.get("CW_BENCH_DEVICE", "cpu")


def build():
    """(Hugging Face model, tokenizer): the random Llama described above."""
    return random_llama(heads=HEADS, kv_heads=KV_HEADS, d_head=D_HEAD, layers=LAYERS, n_ctx=N_CTX, device=DEVICE)

def one(n: int, path: str) -> dict:
    """One length on one path, in this process (called through --one)."""
    import torch

    import circuitwidgets as cw
    from circuitwidgets import in_trace
    from circuitwidgets.widgets import _cache

    hf, tokenizer = build()
    ids = torch.randint(1, len(tokenizer), (n,), generator=torch.Generator().manual_seed(0))

    def forward(tokens):
        with torch.no_grad():
            hf(tokens[None].to(DEVICE))
        if DEVICE.startswith("cuda"):
            torch.cuda.synchronize()

    if path == "forward":
        forward(ids[:512])  # warm-up
        times, peaks = [], []
        for _ in range(repeats(n)):
            with _PeakRSS(DEVICE) as peak:
                start = time.perf_counter()
                forward(ids)
                times.append(time.perf_counter() - start)
            peaks.append(peak.mb)
        return {"tokens": n, "path": path, "forward_s": statistics.median(times), "peak_mb": max(peaks), "runs": len(times)}

    def widget(tokens):
        _cache.clear()  # each construction runs the model (no result kept from the last one)
        if path == "hf":
            view = cw.HFView(hf, tokenizer=tokenizer)
        else:
            from nnsight import TransformersModel

            view = cw.HFView(TransformersModel(hf, tokenizer=tokenizer), remote="local")
        return cw.AttentionPattern(view, tokens=tokens, layer=LAYER)

    widget(ids[:512])  # warm-up: imports, the first trace
    times, forwards, peaks = [], [], []
    for _ in range(repeats(n)):  # interleaved with the forward pass, side by side
        with _PeakRSS(DEVICE) as peak:
            start = time.perf_counter()
            w = widget(ids)
            times.append(time.perf_counter() - start)
        peaks.append(peak.mb)
        if w.error:
            raise RuntimeError(w.error)
        start = time.perf_counter()
        forward(ids)
        forwards.append(time.perf_counter() - start)
    lod = w.patterns.get("lod") or {}
    first_message = comm_bytes(w)  # (before the export: it adds the finer levels the page holds to the widget)
    with tempfile.TemporaryDirectory() as folder:  # the page a user exports: the overview and finer levels of the head
        page = Path(folder) / "page.html"
        w.save_html(page)
        export_bytes = page.stat().st_size
    ratios = [t / f for t, f in zip(times, forwards, strict=True)]
    return {"tokens": n, "path": path, "construct_s": statistics.median(times), "forward_s": statistics.median(forwards),
            "time_ratio": statistics.median(ratios), "time_ratios": ratios, "peak_mb": max(peaks), "runs": len(times),
            "first_message_bytes": first_message, "export_bytes": export_bytes, "factor": lod.get("factor", 1),
            "block_cells": in_trace.BLOCK_CELLS}


def repeats(n: int) -> int:
    """Runs of each measurement (medians reported): 3, 2 from 16 384 tokens."""
    return 3 if n < 16384 else 2


def table(rows: list[dict]) -> str:
    lines = [
        "| tokens | path | time | forward (same process) | time / forward | peak MB | peak above the forward's | first message "
        "| exported page |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["path"] == "forward":
            lines.append(f"| {r['tokens']} | forward (sdpa) | {r['forward_s']:.2f} s | | | {r['peak_mb']:.0f} | | | |")
            continue
        above = r.get("peak_above_forward_mb")
        exported = f"{r['export_bytes'] / 1e3:.0f} kB" if "export_bytes" in r else ""
        lines.append(
            f"| {r['tokens']} | {r['path']} | {r['construct_s']:.2f} s | {r['forward_s']:.2f} s | {r['time_ratio']:.2f}x | "
            f"{r['peak_mb']:.0f} | {'' if above is None else f'{above:+.0f}'} | {r['first_message_bytes'] / 1e3:.0f} kB | "
            f"{exported} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="4096,16384,32768")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--device", default=DEVICE)
    parser.add_argument("--one", nargs=2, metavar=("TOKENS", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1])))
        return 0
    env = {**os.environ, "CW_BENCH_DEVICE": args.device}
    rows = []
    for n in (int(x) for x in args.lengths.split(",")):
        for path in args.paths.split(","):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, __file__, "--one", str(n), path], capture_output=True, text=True,
                                  cwd=REPO, env=env)
            if done.returncode:
                print(done.stderr[-3000:])
                rows.append({"tokens": n, "path": path, "error": done.stderr.strip().splitlines()[-1:]})
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{n:>6} {path:<14} {json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})}"
                  f"  ({time.perf_counter() - started:.0f} s)", flush=True)
    if RESULTS.exists():  # rows of the lengths and paths not measured now stay
        measured = {(r["tokens"], r["path"]) for r in rows}
        rows = [r for r in json.loads(RESULTS.read_text())["rows"] if (r["tokens"], r["path"]) not in measured] + rows
        rows.sort(key=lambda r: (r["tokens"], PATHS.index(r["path"]) if r["path"] in PATHS else 9))
    for row in rows:
        forward = next((r for r in rows if r["tokens"] == row["tokens"] and r["path"] == "forward" and "peak_mb" in r), None)
        if row["path"] != "forward" and "peak_mb" in row and forward:
            row["peak_above_forward_mb"] = row["peak_mb"] - forward["peak_mb"]
    import torch

    result = {
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "device": args.device},
        "model": f"Llama (random, sdpa): {LAYERS} layers, {HEADS} heads / {KV_HEADS} K/V groups, d_head {D_HEAD}, layer {LAYER} shown",
        "rows": [r for r in rows if "error" not in r],
        "errors": [r for r in rows if "error" in r],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1))
    head = (f"AttentionPattern on a Hugging Face / nnsight Llama (rotary, {HEADS} heads in {KV_HEADS} K/V groups) beside the "
            f"model's own sdpa forward ({args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}); each row "
            "its own process\n\n")
    RESULTS.with_suffix(".md").write_text(head + table(result["rows"]) + "\n")
    print(table(result["rows"]))
    print(f"wrote {RESULTS} and {RESULTS.with_suffix('.md')}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
