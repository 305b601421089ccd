"""Feature-level attention on GPT-2 small's shape with a 24 576-feature dictionary, against the model's forward pass.

The model is `_models.gpt2_small_shaped` (random weights); the dictionary reads and reconstructs
``blocks.6.hook_resid_pre`` (768 -> 24 576 -> 768, ReLU, its encoder bias set so that about 64 features fire at
a position, as trained SAEs of this size do). On a prompt of ``--tokens`` random ids, measured side by side in one
process, alternating, median of ``--runs`` after a warm-up:

- the model's forward pass (``model(tokens)``, no_grad);
- one cell: ``feature_qk(model, tokens, 6, 3, destination, source, dictionary)``, the score split into its terms
  and top pairs (one run of the prompt up to layer 6, two positions encoded);
- one whole row: the same with ``source=None`` (every source up to the last position encoded and split);
- the cell as the widget asks for it (``cards=True``: each shown feature's top positions and logit effect);
- memory: the resident set's peak above what the process held before the call (sampled every 2 ms), each call
  measured alone in a fresh process that has built the model and the dictionary and run one forward pass: its
  first call (which builds the model view's folded weights, once per model) and the next (what a click costs).

Targets (issue 31): a cell at most 2x the forward pass, a row at most 5x.

    python benchmarks/bench_feature_attention.py [--runs 5] [--tokens 256] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
from _models import check_device, gpt2_small_shaped, sync

import circuitwidgets as cw
from circuitwidgets import analysis as A

RESULTS = Path(__file__).parent / "results"
FEATURES, LAYER, HEAD, L0 = 24_576, 6, 3, 64


def dictionary(model, device: str, tokens: torch.Tensor) -> cw.Dictionary:
    """A random 24 576-feature ReLU dictionary at ``blocks.6.hook_resid_pre`` firing about `L0` features a position."""
    g = torch.Generator().manual_seed(0)
    W_dec = torch.randn(FEATURES, 768, generator=g)
    W_dec /= W_dec.norm(dim=1, keepdim=True)
    W_enc = W_dec.T.contiguous()
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == f"blocks.{LAYER}.hook_resid_pre")
    x = cache[f"blocks.{LAYER}.hook_resid_pre"][0].float().cpu()
    pre = x @ W_enc
    cut = torch.quantile(pre[:64].flatten(), 1 - L0 / FEATURES)  # the bias that leaves about L0 features above 0
    return cw.Dictionary(W_enc.to(device), torch.full((FEATURES,), -float(cut)).to(device), W_dec.to(device),
                         torch.zeros(768, device=device), f"blocks.{LAYER}.hook_resid_pre")


def peak_above(fn) -> tuple[float, float]:
    """``(seconds, peak resident MB above the start)`` of one call of `fn`."""
    import psutil

    process = psutil.Process()
    start = process.memory_info().rss
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    done.set()
    thread.join()
    return seconds, (max(peak[0], process.memory_info().rss) - start) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--memory-of", default=None, help=argparse.SUPPRESS)  # (one call's peak, in a fresh process)
    args = parser.parse_args()
    device = check_device(args.device)
    model = gpt2_small_shaped(device)
    tokens = torch.randint(0, 50257, (1, args.tokens), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        sae = dictionary(model, device, tokens)
    d, s = args.tokens - 1, args.tokens // 2
    view = cw.as_view(model)

    def forward() -> None:
        with torch.no_grad():
            model(tokens)
        sync(device)

    calls = {
        "forward": forward,
        "cell": lambda: (A.feature_qk(view, tokens, LAYER, HEAD, d, s, sae, k=20), sync(device)),
        "row": lambda: (A.feature_qk(view, tokens, LAYER, HEAD, d, None, sae, k=20), sync(device)),
        "cell_with_cards": lambda: (A.feature_qk(view, tokens, LAYER, HEAD, d, s, sae, k=20, cards=True), sync(device)),
    }
    if args.memory_of:  # the first call builds the view's folded weights (once per model); the second is a click's cost
        forward()
        first, again = peak_above(calls[args.memory_of])[1], peak_above(calls[args.memory_of])[1]
        print(json.dumps({"first_call": round(first, 1), "next_call": round(again, 1)}))
        return 0
    for fn in calls.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.runs):  # alternating, so that the machine's load moves every column alike
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    medians = {name: statistics.median(values) for name, values in times.items()}
    memory = {}
    if device == "cpu":
        import subprocess

        for name in calls:
            # glibc told to return large blocks when freed: each call's peak is its own, not the heap kept from before
            env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
            out = subprocess.run([sys.executable, __file__, "--tokens", str(args.tokens), "--memory-of", name],
                                 capture_output=True, text=True, check=True, env=env).stdout
            memory[name] = json.loads(out.strip().splitlines()[-1])
    if device.startswith("cuda"):
        for name, fn in calls.items():
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            memory[name] = round((torch.cuda.max_memory_allocated() - base) / 1e6, 1)
    cell = A.feature_qk(view, tokens, LAYER, HEAD, d, s, sae, k=20)
    result = {
        "device": device, "torch": torch.__version__, "python": platform.python_version(), "tokens": args.tokens,
        "features": FEATURES, "active_at_destination": len(cell.query_activations), "active_at_source": len(cell.key_activations),
        "seconds": {name: round(value, 4) for name, value in medians.items()},
        "ratio_to_forward": {name: round(value / medians["forward"], 3) for name, value in medians.items() if name != "forward"},
        "targets": {"cell": 2.0, "row": 5.0},
        "peak_mb_above_start": memory,
        "terms_sum_error": abs(cell.total() - cell.score) / max(1.0, abs(cell.score)),
        "dictionary_mb": round(sum(t.numel() * 4 for t in (sae.W_enc, sae.W_dec)) / 1e6, 1),
    }
    RESULTS.mkdir(exist_ok=True)
    name = "feature_attention.json" if device == "cpu" else f"feature_attention_{device.split(':')[0]}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
