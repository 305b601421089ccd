"""Ablation effects and activation patching on a GPT-2-small-shaped model, beside the same work in TransformerLens.

The model is `_models.gpt2_small_shaped` (12 layers x 12 heads, d_model 768, d_vocab 50 257, LN,
MLPs, random weights). The prompts: ``--prompts`` sequences of ``--tokens`` tokens, BOS then a
random block repeated once (`circuitwidgets.analysis.repeated_random_tokens`); the metric is the
next-token loss over the second copy. Side by side, in one process, one call each:

- ``ablation_effects``: every one of the 144 heads mean-ablated alone (``method="mean"``,
  ``metric="loss"``, ``n_boot=1000``: per-prompt effects, bootstrap intervals, permutation p-values),
  against what one writes with TransformerLens: a ``run_with_cache`` of the ``hook_z`` means, then a
  loop of ``model.run_with_hooks`` with a mean-ablation hook, per-prompt losses (no statistics);
- ``patching(site="out")`` (corrupted prompts: the second copy replaced by other random tokens)
  against ``transformer_lens.patching.get_act_patch_attn_head_out_all_pos`` fed the full clean
  ``run_with_cache`` a TransformerLens user makes.

Each row: seconds (median of ``--runs``, ours and TransformerLens alternating, so that a load
that comes and goes on a shared machine weighs on both), the largest peak memory above the start
(CPU: psutil RSS sampled every 2 ms; CUDA: ``max_memory_allocated``), the ratio TransformerLens /
ours, and the largest difference between the two answers. Both sides run the model once per head,
plus one or two runs: the times measure the overhead around those runs.

    python benchmarks/bench_interventions.py [--prompts 64] [--tokens 128] [--quick] [--runs 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
import transformer_lens.patching as tl_patching
from _models import check_device, gpt2_small_shaped, sync
from bench_analysis import PeakMemory

import circuitwidgets as cw
from circuitwidgets.analysis.activation_patching import patching

RESULTS = Path(__file__).parent / "results" / "interventions.json"
QUICK = {"prompts": 4, "tokens": 16}


def timed(fn, device: str) -> tuple[float, float, object]:
    """(seconds, peak MB above the start, result) of one call."""
    with PeakMemory(device) as memory:
        sync(device)
        start = time.perf_counter()
        out = fn()
        sync(device)
        seconds = time.perf_counter() - start
    return seconds, memory.peak_mb, out


def side_by_side(task: str, ours, theirs, device: str, runs: int) -> tuple[dict, object, object]:
    """Run `ours` and `theirs` alternately `runs` times each: the row (median seconds, largest peak) and both answers."""
    times: dict[str, list[float]] = {"ours": [], "tl": []}
    peaks: dict[str, list[float]] = {"ours": [], "tl": []}
    answers = {}
    for i in range(runs):
        for side, fn in (("ours", ours), ("tl", theirs)):
            print(f"{task}: {'ours' if side == 'ours' else 'TransformerLens'} ({i + 1}/{runs}) ...", flush=True)
            seconds, peak, answers[side] = timed(fn, device)
            times[side].append(seconds)
            peaks[side].append(peak)
    row = {"task": task}
    for side in ("ours", "tl"):
        row.update(
            {f"{side}_s": statistics.median(times[side]), f"{side}_peak_mb": max(peaks[side]), f"{side}_all_s": times[side]}
        )
    row["tl_over_ours"] = row["tl_s"] / row["ours_s"]
    return row, answers["ours"], answers["tl"]


def losses(logits: torch.Tensor, tokens: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """Per prompt: the mean next-token loss at `positions` (logits[:, p] predicts tokens[:, p + 1])."""
    logprobs = torch.log_softmax(logits[:, positions].float(), dim=-1)
    return -logprobs.gather(-1, tokens[:, [p + 1 for p in positions], None]).squeeze(-1).mean(-1)


def tl_ablation_effects(model, tokens: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """Per-prompt loss change ``[layer, head, prompt]`` of mean-ablating each head, TransformerLens style."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    names = [f"blocks.{layer}.attn.hook_z" for layer in range(n_layers)]
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
        means = [cache[name].mean(0) for name in names]  # [pos, head, d_head]
        clean = losses(logits, tokens, positions)
        effects = torch.empty(n_layers, n_heads, tokens.shape[0])
        for layer in range(n_layers):
            for head in range(n_heads):

                def hook(z, hook, layer=layer, head=head):
                    z[:, :, head] = means[layer][:, head]
                    return z

                ablated = model.run_with_hooks(tokens, fwd_hooks=[(names[layer], hook)])
                effects[layer, head] = (losses(ablated, tokens, positions) - clean).cpu()
    return effects


def tl_patching_out(model, clean: torch.Tensor, corrupted: torch.Tensor, metric) -> torch.Tensor:
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)  # everything, as a TransformerLens user caches it
        return tl_patching.get_act_patch_attn_head_out_all_pos(model, corrupted, cache, metric)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64, help="prompts in the batch")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per prompt (BOS + a block repeated once)")
    parser.add_argument(
        "--quick", action="store_true", help=f"a small run: {QUICK['prompts']} prompts x {QUICK['tokens']} tokens"
    )
    parser.add_argument("--runs", type=int, default=1, help="timed calls of each side (median), alternating")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.prompts, args.tokens = QUICK["prompts"], QUICK["tokens"]
    if args.tokens < 5 or args.prompts < 2 or args.runs < 1:
        parser.error("--tokens must be at least 5, --prompts at least 2 and --runs at least 1")
    device = check_device(args.device)

    model = gpt2_small_shaped(device)
    view = cw.as_view(model)
    block = args.tokens // 2  # BOS, a block, its repeat (cut to --tokens)
    clean = cw.analysis.repeated_random_tokens(view, seq_len=block, batch=args.prompts, seed=0)[:, : args.tokens].to(device)
    seq = clean.shape[1]
    corrupted = clean.clone()
    other = torch.randint(1, view.d_vocab, (args.prompts, seq - block - 1), generator=torch.Generator().manual_seed(1))
    corrupted[:, block + 1 :] = other.to(device)
    second = list(range(block + 1, seq - 1))  # logit positions predicting tokens 2.. of the second copy
    n_heads = len(view.attn_layers) * view.n_heads
    print(
        f"GPT-2-small-shaped bridge on {device}, {torch.get_num_threads()} threads: {args.prompts} prompts x {seq} tokens, "
        f"{n_heads} heads",
        flush=True,
    )
    with torch.no_grad():
        model(clean[:1])  # warm-up

    ablation, fx, theirs = side_by_side(
        f"ablation_effects, {n_heads} heads (mean, loss)",
        lambda: cw.analysis.ablation_effects(model, clean, "loss", method="mean", positions=second, n_boot=1000, progress=False),
        lambda: tl_ablation_effects(model, clean, second),
        device,
        args.runs,
    )
    ablation.update(
        runs_of_the_model={"ours": n_heads + 2, "tl": n_heads + 1},  # ours: clean, z means (a run that stops there), heads
        tl_what="run_with_cache of hook_z means + run_with_hooks loop (per-prompt effects, no statistics)",
        max_diff=float((fx.per_prompt - theirs).abs().max()),
    )

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return losses(logits, clean, second).mean()

    patched, result, theirs = side_by_side(
        f"patching out, {n_heads} heads",
        lambda: patching(model, clean, corrupted, metric, "out", progress=False),
        lambda: tl_patching_out(model, clean, corrupted, metric),
        device,
        args.runs,
    )
    patched.update(
        runs_of_the_model={"ours": n_heads + 2, "tl": n_heads + 1},  # ours: clean, corrupted, heads
        tl_what="full run_with_cache(clean) + get_act_patch_attn_head_out_all_pos",
        max_diff=float((result.values - theirs.float().cpu()).abs().max()),
    )
    rows = [ablation, patched]

    print(f"\n{'task':<44} {'ours':>9} {'peak':>9} {'TL':>9} {'TL peak':>10} {'TL/ours':>8} {'max |diff|':>11}")
    for row in rows:
        print(
            f"{row['task']:<44} {row['ours_s']:>7.2f} s {row['ours_peak_mb']:>6.0f} MB {row['tl_s']:>7.2f} s "
            f"{row['tl_peak_mb']:>7.0f} MB {row['tl_over_ours']:>7.2f}x {row['max_diff']:>11.1e}"
        )
    print(
        f"second-copy loss, clean: {float(fx.clean.mean()):.3f}; largest single-head effect {float(fx.effect.max()):.3f} "
        f"({fx.p_method})"
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs)",
                "device": device,
                "torch": torch.__version__,
                "machine": platform.machine(),
                "python": platform.python_version(),
                "threads": torch.get_num_threads(),
                "prompts": args.prompts,
                "tokens": seq,
                "quick": args.quick,
                "metric": f"next-token loss over the second copy (logit positions {second[0]}..{second[-1]})",
                "memory": "CPU: psutil RSS sampled every 2 ms minus RSS before the call; CUDA: max_memory_allocated delta",
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
