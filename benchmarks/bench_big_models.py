"""Every widget on the bigger models researchers load on one machine: construction, memory, drawing.

Shapes with random weights (TransformerLens 4 ``boot_native``, no download):

- ``gpt2-medium``: 24 layers x 16 heads, d_model 1 024, d_head 64, MLP 4 096, vocabulary 50 257,
  LayerNorm, learned positions, float32;
- ``llama-1b``: 16 layers x 32 heads (8 K/V heads: grouped-query), d_model 2 048, d_head 64, gated
  MLP 8 192, vocabulary 32 000, RMSNorm, rotary, bfloat16 (about 1.2 B parameters);
- ``llama-3.2-1b`` and ``llama-3.2-3b``: Llama 3.2's shapes (16 x 32 heads of 64, d_model 2 048; and
  28 x 24 heads of 128, d_model 3 072; both 8 K/V heads, gated MLP 8 192, vocabulary 128 256, tied
  embeddings, RMSNorm, rotary base 500 000, n_ctx 8 192), bfloat16: 1.24 B and 3.21 B parameters.

`build` makes the bfloat16 shapes in bfloat16 from the start (``boot_native`` alone builds float32
and then casts: 13 GB for the 3B shape), ties the embeddings (``boot_native`` leaves
``tie_word_embeddings`` unused) and lets every layer share one causal mask (it makes one
``n_ctx x n_ctx`` mask per layer: 1.8 GB at the 3B shape's 28 layers of 8 192).

Each shape runs in its own process. First the composition scores of every head pair (Q; the
CompositionDiagram then computes K), timed with their peak memory and progress reports; then, for
each widget: construction time (background work waited for), peak resident memory above the loaded
model (psutil, sampled every 5 ms), the payload bytes, and whether its exported page draws in
Chromium (offline); the composition heatmap of every head pair is saved as a PNG to
``benchmarks/results/`` to look at. Results are merged by shape into ``results/big_models.json``
and tabled in ``results/big_models.md``.

    python benchmarks/bench_big_models.py [--shapes llama-3.2-1b,llama-3.2-3b] [--device cuda] [--tokens 256]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SHAPES = {
    "gpt2-medium": dict(
        d_model=1024, d_head=64, n_heads=16, n_layers=24, d_mlp=4096, d_vocab=50257, n_ctx=1024,
        act_fn="gelu_new", normalization_type="LN",
    ),
    "llama-1b": dict(
        d_model=2048, d_head=64, n_heads=32, n_key_value_heads=8, n_layers=16, d_mlp=8192, d_vocab=32000,
        n_ctx=2048, act_fn="silu", gated_mlp=True, normalization_type="RMS", positional_embedding_type="rotary",
    ),
}
LLAMA_3_2 = dict(
    n_key_value_heads=8, d_mlp=8192, d_vocab=128256, n_ctx=8192, act_fn="silu", gated_mlp=True, normalization_type="RMS",
    positional_embedding_type="rotary", rotary_base=500000, tie_word_embeddings=True,
)
SHAPES["llama-3.2-1b"] = dict(d_model=2048, d_head=64, n_heads=32, n_layers=16, **LLAMA_3_2)
SHAPES["llama-3.2-3b"] = dict(d_model=3072, d_head=128, n_heads=24, n_layers=28, **LLAMA_3_2)
DTYPES = {"gpt2-medium": "float32", "llama-1b": "bfloat16", "llama-3.2-1b": "bfloat16", "llama-3.2-3b": "bfloat16"}
PAIRS_KIND = "Q"  # the all-pairs measurement; the CompositionDiagram computes K (the same cost) itself


def build(shape: str, device: str = "cpu", **overrides):
    """The random-weight `TransformerBridge` of `shape` (`overrides`: config fields), in eval mode.

    Made in its dtype from the start: ``boot_native`` creates float32 modules and casts them after
    (13 GB at the 3B shape); with the default dtype set, its modules are created in bfloat16 and
    its float32 initialisation is staged one tensor at a time (the same weights: it rounds each
    float32 draw to bfloat16 either way). ``device="meta"`` builds without memory (no values:
    shapes and parameter counts only). Tied embeddings (``tie_word_embeddings``, which
    ``boot_native`` does not read) share one matrix; every layer shares one causal mask.
    """
    import torch
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    dtype = getattr(torch, DTYPES[shape])
    fields = {**SHAPES[shape], **overrides}
    cfg = TransformerBridgeConfig(**fields, seed=0, device=device, init_weights=device != "meta", dtype=dtype)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta") if device == "meta" else contextlib.nullcontext():
            model = TransformerBridge.boot_native(cfg, dtype=dtype)
    finally:
        torch.set_default_dtype(previous)
    native = model.original_model
    if fields.get("tie_word_embeddings"):
        native.head._original_component.weight = native.tok_embed._original_component.weight
    holders = [m for m in model.modules() if "causal_mask" in m._buffers]
    for module in holders[1:]:
        if module.causal_mask.shape == holders[0].causal_mask.shape:
            module.causal_mask = holders[0].causal_mask
    return model.eval() if device == "meta" else model.to(device).eval()


class PeakRSS:
    """Highest resident set size of this process while the block runs, sampled every 5 ms."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.peak = 0

    def __enter__(self) -> PeakRSS:
        self.peak = self.process.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc) -> None:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def payload_bytes(widget) -> int:
    """Bytes of the widget's synced state: binary buffers plus the JSON of everything else."""
    from ipywidgets.widgets.widget import _remove_buffers

    state, _, buffers = _remove_buffers(widget.get_state())
    return sum(len(b) for b in buffers) + len(json.dumps(state, default=str))


def widget_makers(tokens):
    """name -> function(model) building the widget, for each widget this package has."""
    import circuitwidgets as cw

    makers = {
        "AttentionPattern": lambda m: cw.AttentionPattern(m, tokens=tokens, layer=0, head=0),
        "OVCircuit": lambda m: cw.OVCircuit(m, 0, 0),
        "QKCircuit": lambda m: cw.QKCircuit(m, 0, 0),
        "CompositionDiagram": lambda m: cw.CompositionDiagram(m, kind="K", view="matrix"),
        "HeadScores": lambda m: cw.HeadScores(m, kinds=("previous_token", "induction")),
        "LogitAttribution": lambda m: cw.LogitAttribution(m, tokens=tokens),
        "SkipTrigrams": lambda m: cw.SkipTrigrams(m, layer=0, head=0),
    }
    return {name: make for name, make in makers.items() if hasattr(cw, name)}


def machine() -> dict:
    """What the times depend on: CPU model and count, load average, float32 and bfloat16 matmul speed (GFLOP/s)."""
    import os

    import torch

    names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
    speed = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(256, 2048).to(dtype), torch.randn(2048, 4096).to(dtype)
        a @ b
        t0 = time.perf_counter()
        a @ b
        speed[str(dtype).removeprefix("torch.")] = round(2 * 256 * 2048 * 4096 / (time.perf_counter() - t0) / 1e9, 1)
    return {"cpu": names[0] if names else "", "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "load_average_1min": round(os.getloadavg()[0], 1), "matmul_gflops": speed}


def all_pairs(model, model_rss: int) -> dict:
    """Composition scores of every head pair (`PAIRS_KIND`), with progress: time, peak memory, the reports."""
    import torch

    from circuitwidgets.analysis.composition import composition_scores, pair_count

    reports: list[tuple[int, int]] = []
    last = [0.0]

    def progress(done: int, total: int) -> None:
        reports.append((done, total))
        if time.perf_counter() - last[0] > 30 or done == total:  # a line every 30 s
            last[0] = time.perf_counter()
            print(f"  composition {PAIRS_KIND}: {done}/{total} pairs, {last[0] - t0:.0f} s", flush=True)

    gc.collect()
    with PeakRSS() as peak:
        t0 = time.perf_counter()
        scores = composition_scores(model, PAIRS_KIND, progress=progress)
        seconds = time.perf_counter() - t0
    n_layers, n_heads = scores.shape[:2]
    dones = [done for done, _ in reports]
    return {
        "kind": PAIRS_KIND, "heads": n_layers * n_heads, "pairs": pair_count(n_layers, n_heads), "s": round(seconds, 1),
        "peak_above_model_gb": round((peak.peak - model_rss) / 2**30, 2), "progress_reports": len(reports),
        "progress_monotone_to_total": dones == sorted(dones) and reports[-1] == (pair_count(n_layers, n_heads),) * 2,
        "finite_pairs": int(torch.isfinite(scores).sum()), "max_score": round(float(scores.nan_to_num(0).max()), 4),
    }


def run_shape(shape: str, device: str, n_tokens: int) -> dict:
    import torch

    sys.path.insert(0, str(REPO / "tests" / "browser"))
    import psutil
    from _harness import chromium_context, open_offline, wait_drawn
    from playwright.sync_api import sync_playwright

    start = time.perf_counter()
    with PeakRSS() as build_peak:
        model = build(shape, device)
    gc.collect()
    params = sum(p.numel() for p in model.parameters())
    model_rss = psutil.Process().memory_info().rss
    result = {"shape": shape, "device": device, "dtype": DTYPES[shape], "parameters": params,
              "build_s": round(time.perf_counter() - start, 1), "build_peak_gb": round(build_peak.peak / 2**30, 2),
              "model_rss_gb": round(model_rss / 2**30, 2), "widgets": {}}
    print(f"  {shape}: built, {result}", flush=True)
    result["composition_all_pairs"] = all_pairs(model, model_rss)
    print(f"  {shape} composition all pairs: {result['composition_all_pairs']}", flush=True)
    tokens = torch.randint(1, SHAPES[shape]["d_vocab"], (n_tokens,), generator=torch.Generator().manual_seed(0)).tolist()
    work = Path(tempfile.mkdtemp(prefix="cw-big-"))
    with sync_playwright() as pw, chromium_context(pw) as context:
        page = context.new_page()
        for name, make in widget_makers(tokens).items():
            row: dict = {}
            try:
                gc.collect()
                before = psutil.Process().memory_info().rss
                with PeakRSS() as peak:
                    t0 = time.perf_counter()
                    widget = make(model)
                    widget.finish_start()  # a start deferred to the event loop (Playwright runs one) runs now
                    if hasattr(widget, "wait"):
                        widget.wait()
                    row["construct_s"] = round(time.perf_counter() - t0, 2)
                row["peak_above_model_gb"] = round((peak.peak - model_rss) / 2**30, 2)  # what earlier widgets kept counts too
                row["peak_of_this_widget_gb"] = round((peak.peak - before) / 2**30, 2)
                row["error"] = widget.error
                row["payload_mb"] = round(payload_bytes(widget) / 1e6, 2)
                path = widget.save_html(work / f"{name}.html")
                open_offline(page, path)
                root = page.locator(".cw-root").first
                wait_drawn(root, timeout=60_000)
                row["drawn"] = True
                if name == "CompositionDiagram":
                    shot = RESULTS / f"big_composition_{shape}.png"
                    root.screenshot(path=str(shot))
                    row["picture"] = str(shot.relative_to(REPO))
                widget.close()
            except Exception as exc:  # a row that failed says why, the others still run
                row["failed"] = f"{type(exc).__name__}: {exc}"[:300]
            result["widgets"][name] = row
            print(f"  {shape} {name}: {row}", flush=True)
    result["machine"] = machine()
    result["process_peak_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)  # KiB on Linux
    return result


def merge(results: list[dict]) -> list[dict]:
    """`results` merged by shape into results/big_models.json (a shape measured again replaces its entry)."""
    path = RESULTS / "big_models.json"
    merged = {r["shape"]: r for r in (json.loads(path.read_text()) if path.exists() else [])}
    merged.update({r["shape"]: r for r in results})
    return [merged[name] for name in SHAPES if name in merged] + [r for name, r in merged.items() if name not in SHAPES]


def table(results: list[dict]) -> str:
    """big_models.md: per shape, the build and the model's memory, each widget, and the composition of all pairs."""
    lines = [
        "# Every widget on big model shapes (random weights, CPU)",
        "",
        "`python benchmarks/bench_big_models.py --shapes ...` (one process per shape; `big_models.json` holds every",
        "figure). Build: `build` in the script (s, process peak while building); model RSS: resident memory with",
        "the model loaded. Per widget: construction time with its background work, peak resident memory above the",
        "loaded model (psutil every 5 ms; what earlier widgets kept counts too), payload, drawn offline in Chromium.",
        "Times depend on the machine far more than on the widget: bfloat16 matmuls on a CPU without AVX-512",
        "(BF16) run several times slower than float32, and the shapes were not all measured on the same machine",
        "(each shape's `machine` line, where recorded, says on what).",
        "",
    ]
    for r in results:
        lines += [
            f"## {r['shape']}: {r['parameters'] / 1e9:.2f} B parameters, {r['dtype']}, {r['device']}",
            "",
            *([f"Machine: {r['machine']}.", ""] if "machine" in r else []),
            f"Build {r['build_s']} s" + (f" (peak {r['build_peak_gb']} GB)" if "build_peak_gb" in r else "")
            + f"; model RSS {r['model_rss_gb']} GB" + (f"; process peak {r['process_peak_gb']} GB." if "process_peak_gb" in r else "."),
            "",
        ]
        pairs = r.get("composition_all_pairs")
        if pairs:
            lines += [
                f"Composition of all head pairs ({pairs['kind']}, {pairs['heads']} heads, {pairs['pairs']:,} pairs): "
                f"{pairs['s']} s, peak {pairs['peak_above_model_gb']} GB above the model, {pairs['progress_reports']} progress "
                f"reports ({'monotone, ending at the total' if pairs['progress_monotone_to_total'] else 'NOT monotone to the total'}).",
                "",
            ]
        lines += ["| widget | construct s | peak above model GB | payload MB | drawn |", "|---|---|---|---|---|"]
        for name, row in r["widgets"].items():
            if "failed" in row:
                lines.append(f"| {name} | failed: {row['failed'][:120]} | | | |")
            else:
                cells = (row.get("construct_s"), row.get("peak_above_model_gb"), row.get("payload_mb"), row.get("drawn", False))
                lines.append(f"| {name} | " + " | ".join(map(str, cells)) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: " + ", ".join(SHAPES))
    parser.add_argument("--device", default="cpu", help="cpu or cuda (every analysis runs on the model's device)")
    parser.add_argument("--tokens", type=int, default=256, help="prompt length for the prompt-based widgets")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one shape in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_shape(args.one, args.device, args.tokens)))
        return 0
    shapes = args.shapes.split(",")
    for shape in shapes:
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    RESULTS.mkdir(exist_ok=True)
    for shape in shapes:
        print(f"--- {shape} ---", flush=True)
        with tempfile.TemporaryFile("w+") as errors:
            child = subprocess.Popen(
                [sys.executable, __file__, "--one", shape, "--device", args.device, "--tokens", str(args.tokens)],
                stdout=subprocess.PIPE, stderr=errors, text=True,
            )
            last = ""
            for line in child.stdout:  # progress as it comes
                if line.startswith("  "):
                    sys.stdout.write(line)
                    sys.stdout.flush()
                last = line or last
            if child.wait() != 0:
                errors.seek(0)
                print(errors.read()[-2000:])
                return 1
        results = merge([json.loads(last)])  # written after each shape: a later failure keeps it
        (RESULTS / "big_models.json").write_text(json.dumps(results, indent=1))
        (RESULTS / "big_models.md").write_text(table(results))
    print(f"wrote {(RESULTS / 'big_models.json').relative_to(REPO)} and big_models.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
