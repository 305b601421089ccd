"""Time and measure composition scores, copying scores and full-OV top-k on a GPT-2-small-shaped model.

The model is a randomly initialised TransformerLens 4 bridge (boot_native) with GPT-2 small's
shape: 12 layers x 12 heads, d_model 768, d_head 64, d_vocab 50 257, n_ctx 1 024, LayerNorm
("LN") and MLPs. LayerNorm plays no part in these weight-only scores. Our composition scores
run next to TransformerLens' ``model.all_composition_scores(kind)`` in the same process, and the
raw scores are compared where both are defined (layer1 < layer2).

Peak memory: on CPU, the process's resident set size (psutil RSS) sampled every 2 ms in a
background thread, minus the RSS just before the call (tracemalloc does not see torch's
allocations), after glibc's ``malloc_trim(0)`` so that memory freed by earlier calls and kept
by the allocator does not hide new allocations; on CUDA, ``torch.cuda.max_memory_allocated``
minus the allocation before the call.
Our timings are the median of ``--runs`` calls with the ModelView already built (it is cached per
model; building it is timed once, separately); TransformerLens' are one call each, as its K and
V runs take minutes and ~18 GB.

    python benchmarks/bench_analysis.py [--skip-tl] [--kinds Q,K,V] [--runs 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import platform
import statistics
import threading
import time
from pathlib import Path

import psutil
import torch
from _models import gpt2_small_shaped, sync

from circuitwidgets.analysis import composition_scores, copying_scores, ov_top_k_accuracy
from circuitwidgets.model import as_view

RESULTS = Path(__file__).parent / "results" / "analysis.json"
MB = 2**20
try:  # glibc keeps freed memory for reuse; hand it back so each baseline RSS is honest
    _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):
    _malloc_trim = None




class PeakMemory:
    """Peak memory above the starting level during a `with` block, in MB (see module docstring)."""

    def __init__(self, device: str):
        self.device = device
        self.peak_mb = 0.0

    def __enter__(self) -> PeakMemory:
        gc.collect()
        if _malloc_trim is not None:
            _malloc_trim(0)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._start = torch.cuda.memory_allocated()
            return self
        self._process = psutil.Process()
        self._start = self._process.memory_info().rss
        self._peak = self._start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, self._process.memory_info().rss)
            self._stop.wait(0.002)

    def __exit__(self, *exc) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            self.peak_mb = (torch.cuda.max_memory_allocated() - self._start) / MB
            return
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, self._process.memory_info().rss)
        self.peak_mb = (self._peak - self._start) / MB


def measure(fn, device: str, runs: int) -> tuple[float, float, object]:
    """(median seconds, largest peak MB, last result) over `runs` calls."""
    times, peaks, out = [], [], None
    for _ in range(runs):
        with PeakMemory(device) as memory:
            sync(device)
            start = time.perf_counter()
            out = fn()
            sync(device)
            times.append(time.perf_counter() - start)
        peaks.append(memory.peak_mb)
    return statistics.median(times), max(peaks), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tl", action="store_true", help="do not run TransformerLens' all_composition_scores")
    parser.add_argument("--kinds", default="Q,K,V", help="composition kinds to run TransformerLens on (ours runs all)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of ours per measurement (median)")
    parser.add_argument("--top-k-head", default="0,0", help="layer,head for the full-vocabulary top-k run")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    tl_kinds = [] if args.skip_tl else [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in tl_kinds if k not in ("Q", "K", "V")]
    if bad:
        parser.error(f"--kinds takes Q, K and/or V; got {bad}")
    layer, head = (int(x) for x in args.top_k_head.split(","))

    start = time.perf_counter()
    model = gpt2_small_shaped(args.device)
    boot_s = time.perf_counter() - start
    model_rss_mb = psutil.Process().memory_info().rss / MB
    view_s, view_mb, _ = measure(lambda: as_view(model), args.device, 1)

    rows = []
    for kind in ("Q", "K", "V"):
        composition_scores(model, kind)  # warm-up
        ours_s, ours_mb, ours = measure(lambda: composition_scores(model, kind), args.device, args.runs)
        rows.append({"task": f"composition {kind}", "ours_s": ours_s, "ours_peak_mb": ours_mb,
                     "tl_s": None, "tl_peak_mb": None, "max_diff": None, "_scores": ours})
    copy_s, copy_mb, _ = measure(lambda: copying_scores(model), args.device, args.runs)
    rows.append({"task": "copying_scores (144 heads)", "ours_s": copy_s, "ours_peak_mb": copy_mb})
    for k in (1, 5, (1, 5)):  # (1, 5): both in one pass, as OVCircuit asks
        top_s, top_mb, acc = measure(lambda: ov_top_k_accuracy(model, layer, head, k=k), args.device, 1)
        label = "k=1,5 one pass" if isinstance(k, tuple) else f"k={k}"
        rows.append({"task": f"ov_top_k_accuracy {label} (L{layer}H{head}, 50 257 rows)", "ours_s": top_s,
                     "ours_peak_mb": top_mb, "value": acc})

    for row in rows[:3]:
        kind = row["task"][-1]
        ours = row.pop("_scores")
        if kind not in tl_kinds:
            continue
        print(f"running TransformerLens all_composition_scores({kind!r}) ...", flush=True)
        tl_s, tl_mb, theirs = measure(lambda: model.all_composition_scores(kind).scores.detach(), args.device, 1)
        mask = ~ours.isnan()
        row.update(tl_s=tl_s, tl_peak_mb=tl_mb, max_diff=float((ours[mask] - theirs.cpu()[mask]).abs().max()))
        del theirs
        gc.collect()
    for row in rows[:3]:
        row.pop("_scores", None)

    print(f"\nGPT-2-small-shaped bridge (LN, MLPs, random weights) on {args.device}, {torch.get_num_threads()} "
          f"threads: boot {boot_s:.1f} s, model RSS {model_rss_mb:.0f} MB, ModelView {view_s:.2f} s; "
          f"ours = median of {args.runs}")
    print(f"{'task':<44} {'ours':>9} {'peak':>9} {'TL':>9} {'TL peak':>10} {'speed-up':>9} {'max |diff|':>11}")
    for row in rows:
        tl = row.get("tl_s")
        cells = ["-"] * 4
        if tl:
            cells = [f"{tl:.1f} s", f"{row['tl_peak_mb']:.0f} MB", f"{tl / row['ours_s']:.0f}x", f"{row['max_diff']:.1e}"]
        print(f"{row['task']:<44} {row['ours_s']:>7.3f} s {row['ours_peak_mb']:>6.0f} MB "
              f"{cells[0]:>9} {cells[1]:>10} {cells[2]:>9} {cells[3]:>11}")
    total = sum(r["ours_s"] for r in rows[:3])
    print(f"composition, all three kinds (ours): {total:.2f} s")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs)",
        "device": args.device, "torch": torch.__version__, "machine": platform.machine(),
        "threads": torch.get_num_threads(), "runs": args.runs, "boot_s": boot_s,
        "model_rss_mb": model_rss_mb, "view_s": view_s, "view_peak_mb": view_mb,
        "memory": "CPU: psutil RSS sampled every 2 ms minus RSS before the call; CUDA: max_memory_allocated delta",
        "tl_kinds": tl_kinds, "composition_total_s": total, "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
