"""Every view against the work it must do: one table of work, time, bound and ratio (`make bench`).

Each row's bound is measured in the same run, on the same machine, just before or after it:

- weight views (skip-trigram sources, OV top-k): the multiply-adds they need (the vocabulary-sized
  passes over the factored circuit and the factors themselves, e.g. ``W_E·W_V``) at the FLOP rate of
  a 2048³ float32 matmul (best of 3);
- forward-bound rows (logit attribution, a layer switch, direct copying's patterns): the model's own
  forward pass over the same tokens (to the layer needed), best of ``--repeats``;
- composition: TransformerLens 4's ``all_composition_scores`` for Q, K and V on a 6-layer model of
  GPT-2 small's widths (the row is the speed-up, target >= 15x);
- the Dashboard: the issue's absolute targets (first picture <= 3 s, everything <= 10 s), its time in a
  running event loop as in a notebook kernel (deferred children and background passes awaited).

Times are the best of ``--repeats`` runs, each cold (the widgets' result cache cleared). The model is
GPT-2 small's shape with random weights (``boot_native``, no download), prompts of 256 random tokens.

    python benchmarks/bench_limits.py [--device cpu|cuda] [--repeats 3] [--skip-tl]

Writes ``benchmarks/results/limits.json`` (``limits_cuda.json`` on a GPU), printed as one table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _models import check_device, gpt2_small_shaped, sync
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

import circuitwidgets as cw
from circuitwidgets import weight_views
from circuitwidgets.row_maxima import default_rows, diagonal_ranks
from circuitwidgets.widgets import _background, _cache

RESULTS = Path(__file__).parent / "results"
PROMPT_LEN = 256
SWITCH_LAYER = 5


class _Stop(Exception):
    pass


def best(fn: Callable[[], Any], device: str, repeats: int, before: Callable[[], None] = lambda: None) -> float:
    """Seconds of the fastest of `repeats` calls of `fn` (`before` runs untimed ahead of each)."""
    times = []
    for _ in range(repeats):
        before()
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_rate(device: str, repeats: int = 10) -> float:
    """FLOP/s of a 2048³ float32 matmul (best of `repeats`: one slow sample on a shared machine would lower every bound)."""
    a, b = (torch.randn(2048, 2048, device=device) for _ in range(2))
    a @ b
    return 2 * 2048**3 / best(lambda: a @ b, device, repeats)


def forward_to(model: Any, tokens: torch.Tensor, layer: int | None) -> None:
    """The model's own forward (no_grad), stopped once layer `layer`'s attention pattern exists (None: all of it)."""
    def stop(tensor: torch.Tensor, hook: Any = None) -> None:
        raise _Stop

    with torch.no_grad():
        if layer is None:
            model(tokens)
            return
        with contextlib.suppress(_Stop):
            model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_pattern", stop)], return_type=None)


def dashboard_times(model: Any, tokens: torch.Tensor) -> tuple[float, float]:
    """(first picture, everything drawn) of a Dashboard built inside a running event loop, as in a kernel."""
    async def build() -> tuple[float, float]:
        start = time.perf_counter()
        dash = cw.Dashboard(model, tokens=tokens)
        first = time.perf_counter() - start
        while any(child._start_pending or child.busy for child in dash.widgets):  # deferred children still to draw
            await asyncio.sleep(0.005)
        await asyncio.get_running_loop().run_in_executor(None, _background.wait)
        for _ in range(3):  # background results land on the loop
            await asyncio.sleep(0.01)
        everything = time.perf_counter() - start
        dash.close()
        return first, everything

    return asyncio.run(build())


def six_layer_model(device: str) -> TransformerBridge:
    cfg = TransformerBridgeConfig(
        d_model=768, d_head=64, n_heads=12, n_layers=6, n_ctx=1024, d_vocab=50257, d_mlp=3072,
        act_fn="gelu_new", normalization_type="LN", seed=0, device=device,
    )
    return TransformerBridge.boot_native(cfg).to(device).eval()


def row(work: str, seconds: float, bound: float, how: str, target: float) -> dict[str, Any]:
    return {"work": work, "time_s": seconds, "bound_s": bound, "ratio": seconds / bound, "target": target, "bound": how}


def gpt2_rows(device: str, rate: float, repeats: int, target: float) -> tuple[list[dict[str, Any]], float, float]:
    """The rows measured on the GPT-2-small-shaped model, its forward time on the prompt and the matmul rate used."""
    model = gpt2_small_shaped(device)
    view = cw.as_view(model)
    _ = view.W_E  # the view and its weights are built once, outside the timings
    vocab, d_head = view.d_vocab, view.d_head
    prompt = torch.randint(0, vocab, (1, PROMPT_LEN), generator=torch.Generator().manual_seed(0)).to(device)
    forward = best(lambda: forward_to(model, prompt, None), device, repeats)
    rows = []

    seconds = best(lambda: cw.LogitAttribution(model, tokens=prompt).close(), device, repeats, _cache.clear)
    rows.append(row(f"LogitAttribution widget, {PROMPT_LEN} tokens", seconds, forward, "forward pass", target))

    widget = cw.AttentionPattern(model, tokens=prompt, layer=0)
    to_layer = best(lambda: forward_to(model, prompt, SWITCH_LAYER), device, repeats)

    def back_to_layer_0() -> None:  # untimed: the timed switch finds nothing of layer 5 cached
        widget.layer = 0
        _cache.clear()

    def switch() -> None:
        widget.layer = SWITCH_LAYER

    seconds = best(switch, device, repeats, back_to_layer_0)
    widget.close()
    rows.append(row(f"AttentionPattern layer switch, cold (layer 0 to {SWITCH_LAYER})", seconds, to_layer,
                    f"forward to layer {SWITCH_LAYER}", target))

    rate = max(rate, matmul_rate(device))  # measured again beside the weight rows: the faster of the two
    pass_s = 2 * vocab * vocab * d_head / rate
    factor_s = 2 * vocab * view.d_model * d_head / rate  # one factor of a full circuit, e.g. W_E·W_V
    seconds = best(lambda: cw.analysis.skip_trigram_sources(model, 0, 0), device, repeats)
    rows.append(row(f"skip_trigram_sources (all {vocab} sources)", seconds, 2 * pass_s + 4 * factor_s,
                    "2 passes of 2·V²·d_head and 4 factors of 2·V·d_model·d_head at the matmul rate", target))
    seconds = best(lambda: cw.analysis.ov_top_k_accuracy(model, 0, 0, k=(1, 5)), device, repeats)
    rows.append(row(f"ov_top_k_accuracy k=(1, 5), {vocab} rows", seconds, pass_s + 2 * factor_s,
                    "2·V²·d_head and 2 factors of 2·V·d_model·d_head at the matmul rate", target))
    # its worst case: a head whose own logit tops every row (a PSD circuit), so that no row stops early
    factor = torch.randn(vocab, d_head, generator=torch.Generator().manual_seed(1)).to(device)
    rows_per_block = default_rows(weight_views.TOP_K_ENTRIES, vocab, factor.device)
    seconds = best(lambda: diagonal_ranks(factor, factor.T.contiguous(), rows_per_block, 5), device, repeats)
    rows.append(row("ov_top_k_accuracy's count, a head copying every token (no row stops early)", seconds, pass_s,
                    "2·V²·d_head at the matmul rate", target))

    tokens = cw.analysis.repeated_random_tokens(model)
    positions = tokens.numel()
    heads = len(view.attn_layers) * view.n_heads
    flops = heads * (2 * d_head * view.d_model * vocab + 2 * positions * d_head * vocab)
    bound = best(lambda: forward_to(model, tokens, None), device, repeats) + flops / rate
    seconds = best(lambda: cw.analysis.head_scores(model, "direct_copying"), device, repeats, _cache.clear)
    rows.append(row(f'head_scores("direct_copying"), {positions} positions', seconds, bound,
                    "forward + per head W_O·W_U and [positions, V] logits at the matmul rate", target))

    first, everything = min((dashboard_times(model, prompt) for _ in range(repeats)), key=lambda t: t[1])
    rows.append(row(f"Dashboard first picture, {PROMPT_LEN} tokens", first, 3.0, "the issue's 3 s", 1.0))
    rows.append(row(f"Dashboard everything drawn, {PROMPT_LEN} tokens", everything, 10.0, "the issue's 10 s", 1.0))
    return rows, forward, rate


def composition_row(device: str, repeats: int) -> dict[str, Any]:
    """Our composition scores (Q, K and V) against TransformerLens' on a 6-layer model."""
    small = six_layer_model(device)
    start = time.perf_counter()
    _ = cw.as_view(small).W_E
    view_s = time.perf_counter() - start
    ours = best(lambda: [cw.analysis.composition_scores(small, kind) for kind in "QKV"], device, repeats)
    with torch.no_grad():
        theirs = best(lambda: [small.all_composition_scores(kind) for kind in "QKV"], device, 1)
    return {"work": "composition Q+K+V, 6 layers x 12 heads: TransformerLens / ours", "time_s": ours,
            "bound_s": theirs, "ratio": theirs / ours, "target": 15.0, "bound": "speed-up (higher is better)",
            "view_build_s": view_s}


def print_table(result: dict[str, Any]) -> None:
    """The table of a `limits.json`: work, time, bound, ratio and target, rows off target marked."""
    print(f"\n{result['device']}, {result['threads']} threads, matmul {result['matmul_gflops']:.0f} GFLOP/s, "
          f"forward {result['forward_s']:.3f} s ({PROMPT_LEN} tokens)")
    print(f"{'work':<66} {'time':>9} {'bound':>9} {'ratio':>7} {'target':>7}")
    for r in result["rows"]:
        speedup = r["target"] > 2
        ok = r["ratio"] >= r["target"] if speedup else r["ratio"] <= r["target"]
        mark = "" if ok else "  <- below target" if speedup else "  <- above target"
        ratio = f"{r['ratio']:.1f}x" if speedup else f"{r['ratio']:.2f}"
        print(f"{r['work']:<66} {r['time_s']:>7.3f} s {r['bound_s']:>7.3f} s {ratio:>7} {r['target']:>7}{mark}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-tl", action="store_true", help="leave out TransformerLens' composition (minutes)")
    args = parser.parse_args()
    device = check_device(args.device)
    target = 2.0 if device.startswith("cuda") else 1.5
    rate = matmul_rate(device)
    rows, forward, rate = gpt2_rows(device, rate, args.repeats, target)
    if not args.skip_tl:
        rows.append(composition_row(device, args.repeats))

    result = {
        "device": device, "torch": torch.__version__, "machine": platform.machine(), "threads": torch.get_num_threads(),
        "matmul_gflops": rate / 1e9, "forward_s": forward, "repeats": args.repeats, "rows": rows,
    }
    print_table(result)
    out = RESULTS / ("limits_cuda.json" if device.startswith("cuda") else "limits.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
