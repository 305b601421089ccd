"""AttentionPattern on long prompts: level of detail (overview + exact tiles) against the full-matrix path.

Model for the lengths: a random TransformerLens 4 bridge (boot_native), 2 layers x 12 heads,
d_model 192 (d_head 16), n_ctx 8 192, attention only, its W_Q scaled by 8 so that heads attend
sharply as trained heads do (random weights attend almost uniformly, which quantises to zeros
and would flatter compression); token ids drawn at random; layer 1 shown.
Each (length, path) runs in its own Python process, so that its peak memory is its own.

Per length, for the LOD path (the default) and the full-matrix path (``lod=False``: every cell
of the layer as uint8, the code path before level of detail):
- ``first_message_bytes``: the widget's state as the comm open message carries it (JSON +
  binary buffers, the bundle left out);
- ``construct_s``: ``AttentionPattern(...)`` in the kernel until its payload is ready;
- ``forward_s``: the model's own forward pass up to the layer (``stop_at_layer=2`` with no hook,
  the least a picture of the layer can cost), timed after the widget;
- ``tile_ms``: the kernel answering a zoom tile (median of 5): 512 x 512 exact cells, and a
  2 048-token window pooled 4 x 4 (LOD path only); ``tile_ms_1_thread`` the same with
  ``torch.set_num_threads(1)`` (on a loaded 2-core machine, torch's two-thread ops on small
  blocks spend most of their time waiting for each other);
- ``peak_rss_mb``: the process's peak resident memory during construction, above what it held after
  building the model (the model's own forward pass at that length included: TransformerLens
  materialises every head's scores and pattern of a layer);
- ``export_bytes``: ``save_html``'s file;
- ``browser_first_picture_ms``: Chromium opening that exported page (same state as the comm
  message) from disk, navigation start to the frame after the first picture (decode, inflate,
  draw): the browser's share of construction -> first picture. ``browser_heap_mb``: its JS heap.
The full-matrix path at 8 192 tokens is not run: its message would be 12 x 8 192² / 2 bytes = 403 MB.

GPT-2-small shape (12 layers x 12 heads, d_model 768, vocabulary 50 257) at 1 024 tokens, layer
5: construction -> payload (LOD and full path; as a script sees it, every access to the model's
view checking the weights, and under one simulated kernel message, one check, as a notebook cell
does) next to the forward pass up to the layer and the whole forward pass (with the
unembedding); and prompt edits (the widget re-runs up to the layer;
one check of the weights, as for one kernel message) next to the forward pass up to the layer
(target <= 1.2x), interleaved.

    python benchmarks/bench_long_prompts.py [--lengths 1024,2048,4096,8192] [--no-browser] [--device cpu]
    python benchmarks/bench_long_prompts.py --gpt2-only  # only the GPT-2-shape part; the file's other rows stay
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import comm_bytes

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "long_prompts.json"
LAYER = 1
FULL_MAX = 4096  # longest prompt run on the full-matrix path


#: where the models run (--device; the per-length processes inherit it through the environment)
DEVICE = os.environ.get("CW_BENCH_DEVICE", "cpu")

def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(n: int, lod: bool, out: Path) -> dict:
    """One length on one path, in this process (called through --one)."""
    import torch
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    import circuitwidgets as cw

    cfg = TransformerBridgeConfig(d_model=192, d_head=16, n_heads=12, n_layers=2, n_ctx=8192, d_vocab=512,
                                  attn_only=True, normalization_type=None, seed=0)
    model = TransformerBridge.boot_native(cfg).to(DEVICE).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("q._original_component.weight"):
                p.mul_(8.0)
    ids = torch.randint(0, 512, (n,), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    cw.AttentionPattern(model, tokens=ids[:64], layer=LAYER, head=3, lod=lod)  # warm up (imports, first run)
    base = rss_mb()
    t = time.perf_counter()
    w = cw.AttentionPattern(model, tokens=ids, layer=LAYER, head=3, lod=lod)
    construct = time.perf_counter() - t
    peak = rss_mb() - base
    with torch.no_grad():
        t = time.perf_counter()
        model(ids[None], stop_at_layer=LAYER + 1)
        if DEVICE.startswith("cuda"):
            torch.cuda.synchronize()  # queued GPU work counts
        forward = time.perf_counter() - t
    row = {"tokens": n, "path": "lod" if lod else "full", "construct_s": construct, "forward_s": forward,
           "first_message_bytes": comm_bytes(w), "patterns_bytes": len(w.patterns["data"]),
           "patterns_raw_bytes": w.patterns.get("raw_bytes", len(w.patterns["data"])), "peak_rss_mb": peak}
    if lod:
        asked = 0
        for threads in ("tile_ms", "tile_ms_1_thread"):
            if threads == "tile_ms_1_thread":
                torch.set_num_threads(1)
            tiles = {}
            for name, size, step in (("exact_512", 512, 1), ("window_2048_step4", min(n, 2048), 4)):
                times = []
                for i in range(5):
                    asked += 1
                    r0 = (n // 2 - size // 2 + 16 * i) // step * step
                    t = time.perf_counter()
                    w.tile_request = {"id": asked, "layer": LAYER, "head": 3, "row0": r0, "col0": max(0, r0 - size // 2) // step * step,
                                      "rows": size, "cols": size, "step": step, "revision": w.patterns["revision"]}
                    times.append(time.perf_counter() - t)
                    assert w.tile.get("id") == asked, w.error
                tiles[name] = statistics.median(times) * 1000
            row[threads] = tiles
        row["held_parts_mb"] = sum(w._parts[k].numel() * 4 for k in ("q", "k", "lse")) / 2**20
    path = w.save_html(out / f"long_{n}_{row['path']}.html")
    row["export_bytes"] = path.stat().st_size
    row["export_path"] = str(path)
    return row


def gpt2(out: Path) -> dict:
    """GPT-2-small shape: construction at 1 024 tokens, prompt edit at 256, next to the forward passes."""
    import torch

    sys.path.insert(0, str(HERE))
    from _models import gpt2_small_shaped, kernel_message

    import circuitwidgets as cw

    model = gpt2_small_shaped(DEVICE)
    layer = 5
    g = torch.Generator().manual_seed(0)
    result: dict = {"layer": layer}
    for n in (1024, 256):
        ids = torch.randint(0, 50257, (n,), generator=g).to(DEVICE)
        with torch.no_grad():
            model(ids[None, :16])

            def timed(**kwargs) -> float:  # median of 3 (a shared machine's load comes and goes)
                times = []
                for _ in range(3):
                    t = time.perf_counter()
                    model(ids[None], **kwargs)
                    if DEVICE.startswith("cuda"):
                        torch.cuda.synchronize()
                    times.append(time.perf_counter() - t)
                return statistics.median(times)

            to_layer, whole = timed(stop_at_layer=layer + 1), timed()
        result[n] = {"forward_to_layer_s": to_layer, "forward_whole_s": whole}
        cw.widgets._cache.clear()
        # construct_*_s: as a script sees it (no kernel: every access to the model's view checks the
        # weights); construct_*_one_message_s: as a notebook cell does (one kernel message, one check)
        for lod in (False, True):  # the edits below go to the default (LOD) widget
            key = "lod" if lod else "full"
            for message in (None, f"construct-{n}-{key}"):
                with kernel_message(message):
                    t = time.perf_counter()
                    w = cw.AttentionPattern(model, tokens=ids, layer=layer, lod=lod)
                    took = time.perf_counter() - t
                result[n][f"construct_{key}_one_message_s" if message else f"construct_{key}_s"] = took
                result[n][f"bytes_{key}"] = comm_bytes(w)
                cw.widgets._cache.clear()
        # A prompt edit next to a forward pass up to the layer on the same new tokens, interleaved
        # (the load of a shared machine changes between them less than over a run); medians of 5.
        # Each edit is one kernel message: the weights are checked once (widgets/_views.py), as
        # when the edit comes from the browser.
        edits, forwards = [], []
        for i in range(5):
            new = torch.randint(0, 50257, (n,), generator=g).to(DEVICE)
            with torch.no_grad():
                t = time.perf_counter()
                model(new[None], stop_at_layer=layer + 1)
                if DEVICE.startswith("cuda"):
                    torch.cuda.synchronize()
                forwards.append(time.perf_counter() - t)
            with kernel_message(f"edit-{n}-{i}"):
                t = time.perf_counter()
                w.tokens = new.tolist()
                edits.append(time.perf_counter() - t)
            assert w.tokens == new.tolist() and w.error == "", w.error
        result[n]["prompt_edit_s"] = statistics.median(edits)
        result[n]["forward_to_layer_interleaved_s"] = statistics.median(forwards)
        result[n]["edit_over_forward"] = statistics.median(e / f for e, f in zip(edits, forwards, strict=True))
    return result


FIRST_FRAME = """async (timeout) => {
  const t0 = performance.now();
  while (performance.now() - t0 < timeout) {
    const root = document.querySelector(".cw-root");
    if (root && root.dataset.cwFrameAt && root.dataset.cwTokens) {
      return {at: Number(root.dataset.cwFrameAt), heap: performance.memory ? performance.memory.usedJSHeapSize : null};
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  return null;
}"""


def browser_times(rows: list[dict]) -> None:
    sys.path.insert(0, str(REPO / "tests" / "browser"))
    from _harness import chromium_context
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, chromium_context(p) as browser:
        for row in rows:
            if row["export_bytes"] > 60_000_000:
                continue
            page = browser.new_page()
            page.goto(Path(row["export_path"]).as_uri())
            found = page.evaluate(FIRST_FRAME, 120_000)
            if found:
                row["browser_first_picture_ms"] = found["at"]
                row["browser_heap_mb"] = found["heap"] / 2**20 if found["heap"] else None
            page.close()


def print_gpt2(gpt: dict) -> None:
    for n in (1024, 256):
        g = gpt[n]
        print(f"GPT-2 shape, {n} tokens, layer {gpt['layer']}: construct LOD {g['construct_lod_s']:.2f} s "
              f"(one kernel message {g['construct_lod_one_message_s']:.2f} s, {g['bytes_lod'] / 1e6:.2f} MB), "
              f"full {g['construct_full_s']:.2f} s (one message {g['construct_full_one_message_s']:.2f} s, "
              f"{g['bytes_full'] / 1e6:.2f} MB); "
              f"forward to the layer {g['forward_to_layer_s']:.2f} s, whole {g['forward_whole_s']:.2f} s; "
              f"prompt edit {g['prompt_edit_s']:.2f} s = {g['edit_over_forward']:.2f} x the forward to the layer "
              f"({g['forward_to_layer_interleaved_s']:.2f} s, interleaved)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="1024,2048,4096,8192")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--no-gpt2", action="store_true")
    parser.add_argument("--gpt2-only", action="store_true",
                        help="only the GPT-2-shape measurements: replaces the 'gpt2' key of the results file, keeps its rows")
    parser.add_argument("--device", default=DEVICE, help="cpu or cuda: the same measurements on the model's device")
    parser.add_argument("--one", nargs=3, metavar=("N", "PATH", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from _models import check_device

    check_device(args.device)
    os.environ["CW_BENCH_DEVICE"] = args.device  # the per-length processes read it
    globals()["DEVICE"] = args.device
    if args.one:
        n, path, out = args.one
        print(json.dumps(one(int(n), path == "lod", Path(out))))
        return 0
    if args.gpt2_only:
        gpt = gpt2(Path("."))
        print_gpt2(gpt)
        previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"rows": []}
        previous.update(gpt2=gpt, gpt2_machine=platform.platform(), gpt2_device=args.device)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(previous, indent=2) + "\n")
        print(f"wrote the gpt2 part of {RESULTS.relative_to(REPO)}")
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="cw-long-") as tmp:
        for n in (int(x) for x in args.lengths.split(",")):
            for path in ("lod", "full"):
                if path == "full" and n > FULL_MAX:
                    rows.append({"tokens": n, "path": "full", "skipped": f"would send {12 * n * (n + 1) // 2 / 1e6:.0f} MB"})
                    continue
                done = subprocess.run([sys.executable, __file__, "--one", str(n), path, tmp], capture_output=True, text=True)
                if done.returncode:
                    rows.append({"tokens": n, "path": path, "failed": done.stderr[-400:]})
                    print(f"{n} {path}: failed\n{done.stderr[-800:]}", flush=True)
                    continue
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"{n:5d} {path:4s} construct {rows[-1]['construct_s']:.2f} s (forward {rows[-1]['forward_s']:.2f} s), "
                      f"message {rows[-1]['first_message_bytes'] / 1e6:.2f} MB, peak +{rows[-1]['peak_rss_mb']:.0f} MB, "
                      f"tiles {rows[-1].get('tile_ms')}", flush=True)
        measured = [r for r in rows if "export_path" in r]
        if not args.no_browser:
            browser_times(measured)
    gpt = None if args.no_gpt2 else gpt2(Path("."))
    for r in rows:
        r.pop("export_path", None)
    print(f"\n{'tokens':>6} {'path':>4} {'message MB (raw)':>16} {'construct s':>11} {'forward s':>9} {'browser ms':>10} "
          f"{'tile ms 512 exact / 2048@4 (1 thread)':>30} {'peak MB':>8} {'export MB':>9}")
    for r in rows:
        if "construct_s" not in r:
            print(f"{r['tokens']:>6} {r['path']:>4}  {r.get('skipped') or 'failed'}")
            continue
        tiles, single = r.get("tile_ms"), r.get("tile_ms_1_thread")
        tile = "—"
        if tiles:
            tile = f"{tiles['exact_512']:.0f} / {tiles['window_2048_step4']:.0f}"
            tile += f" ({single['exact_512']:.0f} / {single['window_2048_step4']:.0f})"
        browser = r.get("browser_first_picture_ms")
        message = f"{r['first_message_bytes'] / 1e6:.2f} ({r['patterns_raw_bytes'] / 1e6:.1f})"
        print(f"{r['tokens']:>6} {r['path']:>4} {message:>16} {r['construct_s']:>11.2f} {r['forward_s']:>9.2f} "
              f"{'—' if browser is None else round(browser):>10} {tile:>30} {r['peak_rss_mb']:>8.0f} {r['export_bytes'] / 1e6:>9.2f}")
    if gpt:
        print_gpt2(gpt)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": platform.platform(), "device": args.device, "rows": rows, "gpt2": gpt}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
