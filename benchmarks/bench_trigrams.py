"""Time `SkipTrigrams` and its analysis on a GPT-2-small-shaped model (50 257 source tokens).

The model is a randomly initialised TransformerLens 4 bridge (boot_native) of GPT-2 small's shape
(12 layers x 12 heads, d_model 768, d_head 64, d_vocab 50 257, LN, MLPs), without a tokenizer.
Measured, in the kernel (this process):

- ``skip_trigram_sources`` of one head (every column maximum of the full QK circuit and row
  maximum of the full OV circuit, in chunks from the factors: 2 x 50 257² x 64 multiply-adds);
- ``skip_trigrams`` of one source (two matrix-vector products with the factors), median;
- the widget: construction to payloads (cold: the per-model cache cleared first, so the ranking
  is computed), a source switch (``w.source = id`` to new payloads, median), a head switch
  (a new ranking), and the bytes its synced state sends. Each of these is one kernel message in
  a notebook, where the weights are checked once per message (widgets/_views.py); outside a
  kernel every ``self.mv`` re-checks them, so each runs under a simulated message id of its own,
  as bench_long_prompts.py does for prompt edits;

and, unless ``--no-browser``, in JupyterLab + Chromium: construction in the kernel to the
first picture in the page, and a click on a token in the lists to the lists of the new source
drawn (median and max of 5).

    python benchmarks/bench_trigrams.py [--no-browser] [--runs 20] [--device cpu]

``--device`` (default cuda where there is one, else cpu) puts the model on that device, in this
process and in the notebook's kernel; every analysis runs where the model's weights are.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _models import check_device, gpt2_small_shaped, kernel_message, sync

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
RESULTS = Path(__file__).parent / "results" / "trigrams.json"
LAYER, HEAD = 0, 0

SETUP = """
import json, time
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
import circuitwidgets as cw
from circuitwidgets.widgets import _cache
cfg = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=1024, d_vocab=50257,
    d_mlp=3072, act_fn="gelu_new", normalization_type="LN", seed=0)
model = TransformerBridge.boot_native(cfg).to(DEVICE).eval()
cw.as_view(model)  # the ModelView is built once per model, outside the timings
"""

WIDGET = """
_cache.clear()
t0 = time.time()
w = cw.SkipTrigrams(model, head=0, layer=0)
print("CWBENCH " + json.dumps({"t0_ms": t0 * 1000}))
w
"""

# The time (Date.now(), the kernel's clock on this machine) of the first draw with data, polled every 5 ms.
WATCH = """() => {
  window.cwFirstDraw = null;
  const timer = setInterval(() => {
    const root = document.querySelector(".cw-root[data-cw-kind=trigrams]");
    if (root && root.dataset.cwSource) {
      window.cwFirstDraw = Date.now();
      clearInterval(timer);
    }
  }, 5);
}"""

# Click the n-th destination token (a new source each time) until the page shows it; ms each.
CLICKS = """async ([runs]) => {
  const root = [...document.querySelectorAll(".cw-root[data-cw-kind=trigrams]")].pop();
  const times = [];
  for (let r = 0; r < runs; r++) {
    const rows = [...root.querySelectorAll("section[data-list=destinations] li")];
    const token = rows[(r % (rows.length - 1)) + 1].querySelector(".cw-tg-token");
    const next = token.dataset.id;
    const t0 = performance.now();
    const drawn = new Promise((resolve) => {
      const check = () => (root.dataset.cwSource === next ? resolve() : setTimeout(check, 1));
      check();
    });
    token.click();
    await drawn;
    times.push(performance.now() - t0);
    await new Promise((res) => setTimeout(res, 100));
  }
  const sorted = [...times].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1], all: times };
}"""


def seconds(fn, device: str = "cpu") -> float:
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def sent_bytes(w) -> int:
    from ipywidgets.widgets.widget import _remove_buffers

    state, _, buffers = _remove_buffers(w.get_state())
    return sum(len(b) for b in buffers) + len(json.dumps(state, default=str))


def kernel_side(runs: int, device: str) -> dict:
    import circuitwidgets as cw
    from circuitwidgets.analysis import skip_trigram_sources, skip_trigrams
    from circuitwidgets.widgets import _cache

    model = gpt2_small_shaped(device)
    cw.as_view(model)
    out: dict = {"kernel_messages": "simulated: one message id per construction / switch (weights checked once each)"}
    with torch.no_grad():
        out["skip_trigram_sources_s"] = seconds(lambda: skip_trigram_sources(model, LAYER, HEAD, k=20), device)
        skip_trigrams(model, LAYER, HEAD, 0)
        out["skip_trigrams_s"] = statistics.median(
            seconds(lambda s=s: skip_trigrams(model, LAYER, HEAD, s), device) for s in range(100, 100 + runs))
    _cache.clear()
    with kernel_message("construct"):
        t0 = time.perf_counter()
        w = cw.SkipTrigrams(model, head=HEAD, layer=LAYER)
        out["widget_construction_to_payload_s"] = time.perf_counter() - t0
    assert w.trigrams.get("data") is not None, w.error
    sources = w.trigrams["destinations"] + w.trigrams["outs"]
    switches = []
    for i, s in enumerate(sources[:runs]):
        with kernel_message(f"source-{i}"):
            t0 = time.perf_counter()
            w.source = s
            switches.append(time.perf_counter() - t0)
        assert w.shown_source == s, w.error
    out["source_switch_s"] = {"median": statistics.median(switches), "max": max(switches)}
    with kernel_message("head"):
        out["head_switch_s"] = seconds(lambda: setattr(w, "head", HEAD + 1))  # a new ranking
    out["bytes"] = sent_bytes(w)
    return out


def in_browser(runs: int, device: str) -> dict:
    from _harness import chromium_context, jupyter_lab, open_notebook, run_all, run_code, write_notebook
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="cw-bench-") as tmp, jupyter_lab(Path(tmp), timeout=120) as lab, sync_playwright() as p, chromium_context(p) as browser:
        write_notebook(Path(tmp) / "bench.ipynb", [f"DEVICE = {device!r}\n" + SETUP])
        page = browser.new_page()
        open_notebook(page, lab, "bench.ipynb")
        run_all(page, timeout=300_000)
        page.evaluate(WATCH)
        output = run_code(page, WIDGET, timeout=300_000)
        t0_ms = json.loads(re.search(r"CWBENCH (\{.*\})", output.inner_text()).group(1))["t0_ms"]
        page.wait_for_function("() => window.cwFirstDraw != null", timeout=300_000)
        first = (page.evaluate("() => window.cwFirstDraw") - t0_ms) / 1000
        clicks = page.evaluate(CLICKS, [runs])
        page.close()
    return {"first_picture_s": first, "source_click_ms": clicks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="source switches timed (median)")
    parser.add_argument("--no-browser", action="store_true", help="kernel-side timings only")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cpu or cuda: where the model (and so every analysis) runs, here and in the kernel")
    args = parser.parse_args()
    check_device(args.device)
    result = {
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs), no tokenizer",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
        "head": [LAYER, HEAD],
        "kernel": kernel_side(args.runs, args.device),
    }
    print(json.dumps(result["kernel"], indent=2), flush=True)
    if not args.no_browser:
        result["browser"] = in_browser(min(args.runs, 5), args.device)
        print(json.dumps(result["browser"], indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
