"""Every widget on the bigger models researchers load on one machine: construction, memory, drawing.

Two shapes with random weights (TransformerLens 4 ``boot_native``, no download):

- ``gpt2-medium``: 24 layers x 16 heads, d_model 1 024, d_head 64, MLP 4 096, vocabulary 50 257,
  LayerNorm, learned positions, float32;
- ``llama-1b``: 16 layers x 32 heads (8 K/V heads: grouped-query), d_model 2 048, d_head 64, gated
  MLP 8 192, vocabulary 32 000, RMSNorm, rotary, bfloat16 (about 1.2 B parameters).

Each shape runs in its own process. For each widget: construction time (background work waited
for), peak resident memory above the loaded model (psutil, sampled every 5 ms), the payload bytes,
and whether its exported page draws in Chromium (offline); the composition heatmap of every
head pair is saved as a PNG to ``benchmarks/results/`` to look at.

    python benchmarks/bench_big_models.py [--shapes gpt2-medium,llama-1b] [--device cuda] [--tokens 256]
"""

from __future__ import annotations

import argparse
import gc
import json
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
DTYPES = {"gpt2-medium": "float32", "llama-1b": "bfloat16"}


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


def run_shape(shape: str, device: str, n_tokens: int) -> dict:
    import torch
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    sys.path.insert(0, str(REPO / "tests" / "browser"))
    import psutil
    from _harness import chromium_context, open_offline, wait_drawn
    from playwright.sync_api import sync_playwright

    dtype = getattr(torch, DTYPES[shape])
    start = time.perf_counter()
    cfg = TransformerBridgeConfig(**SHAPES[shape], seed=0, device=device, dtype=dtype)
    model = TransformerBridge.boot_native(cfg, dtype=dtype).to(device).eval()
    params = sum(p.numel() for p in model.parameters())
    model_rss = psutil.Process().memory_info().rss
    result = {"shape": shape, "device": device, "dtype": DTYPES[shape], "parameters": params,
              "build_s": round(time.perf_counter() - start, 1), "model_rss_gb": round(model_rss / 2**30, 2), "widgets": {}}
    tokens = torch.randint(1, cfg.d_vocab, (n_tokens,), generator=torch.Generator().manual_seed(0)).tolist()
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
    return result


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
    results = []
    for shape in args.shapes.split(","):
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
        print(f"--- {shape} ---", flush=True)
        out = subprocess.run(
            [sys.executable, __file__, "--one", shape, "--device", args.device, "--tokens", str(args.tokens)],
            capture_output=True, text=True,
        )
        sys.stdout.write("".join(line + "\n" for line in out.stdout.splitlines() if line.startswith("  ")))
        if out.returncode != 0:
            print(out.stderr[-2000:])
            return 1
        results.append(json.loads(out.stdout.splitlines()[-1]))
    print("\n| shape | widget | construct s | peak above model GB | of it, this widget | payload MB | drawn |")
    print("|---|---|---|---|---|---|---|")
    for result in results:
        for name, row in result["widgets"].items():
            keys = ("construct_s", "peak_above_model_gb", "peak_of_this_widget_gb", "payload_mb", "drawn")
            cells = [row.get(k, row.get("failed", "")) for k in keys]
            print(f"| {result['shape']} ({result['parameters'] / 1e9:.2f} B, {result['dtype']}) | {name} | " + " | ".join(map(str, cells)) + " |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "big_models.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {(RESULTS / 'big_models.json').relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
