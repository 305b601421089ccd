"""scan_heads (issue 20, HeadAtlas) against a plain batched forward pass of the same texts, and its memory.

Rows, side by side in one run:

- throughput, TransformerLens 4 bridge: `_models.gpt2_small_shaped` (12 layers x 12 heads, d_model 768,
  d_vocab 50 257, random weights), ``--texts`` texts of ``--tokens`` random ids (BOS, a random block,
  then the block again: every metric, induction included, is defined). ``scan_heads(model, texts,
  progress=False)`` (every metric, `ov_copying` included) against ``model(tokens)`` under
  ``torch.no_grad`` over the very batches the scan makes (its default batch size, or ``--batch-size``);
  ``--rounds`` timed passes of each, alternating scan and forward, so that a load that comes and goes on
  a shared machine weighs on both; tokens/s from the median pass, and the ratio scan / forward (issue
  target: at least 0.7x).
- throughput, Hugging Face: a GPT-2-shaped ``GPT2LMHeadModel`` from a config (the same 12 x 12 x 768, the
  demo tokenizer's 64-token vocabulary, sdpa attention) through ``cw.HFView(model, tokenizer=...)``
  (patterns rebuilt in float32 inside the nnsight trace, from the attention call's queries and keys) against
  its own forward, ``--hf-texts`` texts, ``--hf-rounds`` rounds.
- memory: peak memory of scanning ``--memory-texts`` (default 100 and 2 000) texts of ``--memory-tokens``
  tokens on a small model (2 layers x 12 heads, d_model 192), each in a fresh subprocess so that peaks
  do not mix, in MB above the model (CPU: psutil RSS sampled every 2 ms above the RSS before the
  scan, and ``ru_maxrss`` for the record; CUDA: ``max_memory_allocated`` above the allocated memory
  before it); with the default batch size, with one fixed batch size for every count (which isolates the
  growth with the number of texts from the batch size), and on CPU that again under glibc's
  ``MALLOC_MMAP_THRESHOLD_=65536`` (large blocks returned to the system when freed: what the scan holds,
  without the heap glibc keeps from earlier batches). ``result_mb`` is the HeadScan's own tensors, which
  grow by design with texts x heads (a few numbers per text and head).

Every row runs on ``--device`` (the models and their tokens there).

    python benchmarks/bench_head_scan.py [--texts 1000] [--tokens 256] [--rounds 2] [--hf-texts 16] [--hf-rounds 3] [--quick]
        [--memory-texts 100 2000] [--memory-repeats 3] [--device cpu] [--skip-hf] [--skip-memory]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from _models import check_device, gpt2_small_shaped, sync
from bench_analysis import PeakMemory

import circuitwidgets as cw
from circuitwidgets.analysis import head_scan

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "head_scan.json"
QUICK = {"texts": 16, "rounds": 1, "hf_texts": 4, "hf_rounds": 1, "memory_texts": [100, 400], "memory_repeats": 1}
MB = 2**20


def random_texts(n: int, n_tokens: int, vocab: int, bos: int, seed: int = 0) -> torch.Tensor:
    """``[n, n_tokens]`` ids: BOS, a random block of ids in ``[2, vocab)``, then the block again (cut to `n_tokens`)."""
    block = n_tokens // 2
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(2, vocab, (n, block), generator=generator)
    return torch.cat([torch.full((n, 1), bos), first, first], dim=1)[:, :n_tokens]


def batches_of(view, tokens: torch.Tensor, batch_size: int | None) -> list[list[int]]:
    """The batches (text indices) `scan_heads` makes of `tokens`, so that the forward runs the same ones."""
    lengths = [tokens.shape[1]] * tokens.shape[0]
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return head_scan._batches(lengths, order, view.n_heads, batch_size)


def timed(fn, device: str) -> tuple[float, float]:
    """(seconds, peak MB above the start) of one call."""
    with PeakMemory(device) as memory:
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        seconds = time.perf_counter() - start
    return seconds, memory.peak_mb


def scan_vs_forward(work: str, model, view, tokens: torch.Tensor, device: str, rounds: int, batch_size: int | None) -> dict:
    """Time `scan_heads` and a plain forward over the same batches, alternating, `rounds` times each."""
    batches = batches_of(view, tokens, batch_size)

    def scan() -> None:
        cw.analysis.scan_heads(view, tokens, progress=False, batch_size=batch_size)

    def forward() -> None:
        with torch.no_grad():
            for batch in batches:
                model(tokens[batch].to(device))

    sides = {"scan": scan, "forward": forward}
    with torch.no_grad():  # warm-up of both paths on two texts
        model(tokens[:2].to(device))
    cw.analysis.scan_heads(view, tokens[:2], progress=False)
    times: dict[str, list[float]] = {side: [] for side in sides}
    peaks: dict[str, list[float]] = {side: [] for side in sides}
    for i in range(rounds):
        for side, fn in sides.items():
            seconds, peak = timed(fn, device)
            times[side].append(seconds)
            peaks[side].append(peak)
            print(f"{work}: {side} {i + 1}/{rounds}: {seconds:.1f} s, peak {peak:.0f} MB", flush=True)
    n_tokens = tokens.numel()
    row = {
        "work": work, "device": device, "texts": tokens.shape[0], "tokens_per_text": tokens.shape[1],
        "batch_size": len(batches[0]), "batches": len(batches), "rounds": rounds, "sides": list(sides),
    }
    for side in sides:
        median = statistics.median(times[side])
        row.update({
            f"{side}_s": median, f"{side}_tokens_per_s": n_tokens / median, f"{side}_peak_mb": max(peaks[side]),
            f"{side}_all_s": times[side],
        })
    for side in [side for side in sides if side != "forward"]:
        row[f"{side}_over_forward_throughput"] = row["forward_s"] / row[f"{side}_s"]
    return row


def hf_model(device: str):
    """A GPT-2-shaped Hugging Face model (random weights, demo tokenizer) and its `HFView`."""
    from circuitwidgets.demo import tiny_hf_model

    model, tokenizer = tiny_hf_model("gpt2", layers=12, heads=12, d_head=64, n_ctx=1024)
    model = model.to(device)
    return model, tokenizer, cw.HFView(model, tokenizer=tokenizer)


def small_model(device: str):
    """2 layers x 12 heads, d_model 192 (d_head 16), d_vocab 50 257: the memory rows' model."""
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    cfg = TransformerBridgeConfig(
        d_model=192, d_head=16, n_heads=12, n_layers=2, n_ctx=1024, d_vocab=50257, d_mlp=768,
        act_fn="gelu_new", normalization_type="LN", seed=0, device=device,
    )
    return TransformerBridge.boot_native(cfg).to(device).eval()


def memory_child(n_texts: int, n_tokens: int, batch_size: int | None, device: str) -> dict:
    """In a fresh process: the peak memory of one scan of `n_texts` texts, above the model and the texts."""
    model = small_model(device)
    view = cw.as_view(model)
    tokens = random_texts(n_texts, n_tokens, view.d_vocab, 0, seed=1)
    cw.analysis.scan_heads(view, tokens[:2], progress=False)  # warm-up: lazy imports and first allocations
    gc.collect()
    start = time.perf_counter()
    with PeakMemory(device) as memory:
        scan = cw.analysis.scan_heads(view, tokens, progress=False, batch_size=batch_size)
        sync(device)
    seconds = time.perf_counter() - start
    tensors = [*scan.values.values(), *scan.peak_positions.values(), *scan.peak_values.values(), scan.token_ids]
    tensors += [t for parts in scan.best.values() for t in parts]
    return {
        "texts": n_texts, "tokens_per_text": n_tokens, "batch_size": batch_size, "device": device,
        "batches": len(batches_of(view, tokens, batch_size)), "seconds": seconds, "peak_mb": memory.peak_mb,
        "result_mb": sum(t.numel() * t.element_size() for t in tensors) / MB,
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KB; the process's whole life
    }


def memory_rows(counts: list[int], n_tokens: int, device: str, repeats: int) -> list[dict]:
    """Fresh subprocesses, `repeats` per (mode, count), the counts alternating. Modes: the default batch size; one
    batch size for every count (the fewest texts); on CPU the same with glibc's ``MALLOC_MMAP_THRESHOLD_=65536``
    (every block over 64 KB its own mapping, returned when freed: what the scan holds, without the heap that glibc
    keeps after a batch). Each row: the median, least and largest peak."""
    modes = [("default", None, {}), ("fixed", min(counts), {})]
    if not device.startswith("cuda"):
        modes.append(("fixed, MALLOC_MMAP_THRESHOLD_=65536", min(counts), {"MALLOC_MMAP_THRESHOLD_": "65536"}))
    rows = []
    for mode, batch_size, env in modes:
        runs: dict[int, list[dict]] = {n: [] for n in counts}
        for _ in range(repeats):
            for n in counts:
                command = [sys.executable, __file__, "--memory-child", str(n), "--memory-tokens", str(n_tokens), "--device", device]
                if batch_size is not None:
                    command += ["--batch-size", str(batch_size)]
                out = subprocess.run(command, cwd=HERE, capture_output=True, text=True, check=True, env={**os.environ, **env})
                runs[n].append(json.loads(out.stdout.strip().splitlines()[-1]))
                one = runs[n][-1]
                print(
                    f"memory ({mode}): {n} texts x {n_tokens} tokens, batch size {batch_size or 'default'} ({one['batches']} "
                    f"batches): peak {one['peak_mb']:.1f} MB above the model, result {one['result_mb']:.2f} MB, {one['seconds']:.1f} s",
                    flush=True,
                )
        for n in counts:
            peaks = [run["peak_mb"] for run in runs[n]]
            rows.append({
                "mode": mode,
                **{key: runs[n][0][key] for key in ("texts", "tokens_per_text", "batch_size", "device", "batches", "result_mb")},
                "seconds": statistics.median(run["seconds"] for run in runs[n]),
                "peak_mb": statistics.median(peaks), "peak_min_mb": min(peaks), "peak_max_mb": max(peaks), "peak_all_mb": peaks,
                "ru_maxrss_all_mb": [run["ru_maxrss_mb"] for run in runs[n]],
            })
    return rows


SIDE_NAMES = {"scan": "scan_heads", "forward": "forward (no_grad)"}


def markdown(report: dict) -> str:
    lines = [
        f"scan_heads vs a plain batched forward pass ({report['device']}, {report['threads']} threads, torch {report['torch']}; "
        "time: median of the rounds)",
        "",
        "| work | time | tokens/s | / forward | peak MB |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in report["throughput"]:
        size = f"{row['texts']} x {row['tokens_per_text']} tokens, batches of {row['batch_size']}"
        for side in row["sides"]:
            ratio = f"{row[f'{side}_over_forward_throughput']:.2f}x" if side != "forward" else ""
            lines.append(
                f"| {row['work']}: {SIDE_NAMES[side]}, {size} | {row[f'{side}_s']:.1f} s | {row[f'{side}_tokens_per_s']:.0f} "
                f"| {ratio} | {row[f'{side}_peak_mb']:.0f} |"
            )
    memory = report.get("memory", [])
    if memory:
        fewest = min(row["texts"] for row in memory)
        lines += [
            "",
            "Memory of one scan, a fresh process each (2 layers x 12 heads, d_model 192), above the model: "
            f"median (least-largest) of {report['memory_repeats']} processes",
            "",
            "| texts x tokens | mode: batch size | batches | time | peak MB | HeadScan MB | peak / peak of the fewest texts |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in memory:
            base = next(r for r in memory if r["mode"] == row["mode"] and r["texts"] == fewest)
            lines.append(
                f"| {row['texts']} x {row['tokens_per_text']} | {row['mode']}: {row['batch_size'] or 'default'} | {row['batches']} "
                f"| {row['seconds']:.1f} s | {row['peak_mb']:.0f} ({row['peak_min_mb']:.0f}-{row['peak_max_mb']:.0f}) "
                f"| {row['result_mb']:.2f} | {row['peak_mb'] / max(base['peak_mb'], 1e-9):.2f}x |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1000, help="texts of the TransformerLens throughput row")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per text (throughput rows)")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes of scan and of forward (median), alternating")
    parser.add_argument("--hf-texts", type=int, default=16, help="texts of the Hugging Face throughput row")
    parser.add_argument("--hf-rounds", type=int, default=3, help="timed passes of each side of the Hugging Face row")
    parser.add_argument("--batch-size", type=int, default=None, help="texts per batch (default: scan_heads' own choice)")
    parser.add_argument("--memory-texts", type=int, nargs="+", default=[100, 2000], help="text counts of the memory rows")
    parser.add_argument("--memory-tokens", type=int, default=64, help="tokens per text of the memory rows")
    parser.add_argument("--memory-repeats", type=int, default=3, help="fresh processes per memory row (median)")
    parser.add_argument(
        "--quick", action="store_true",
        help=f"a small run: {QUICK['texts']} texts, {QUICK['rounds']} round, {QUICK['hf_texts']} HF texts (1 round), "
        f"memory of {QUICK['memory_texts']} texts, {QUICK['memory_repeats']} process each",
    )
    parser.add_argument("--skip-hf", action="store_true", help="no Hugging Face row")
    parser.add_argument("--skip-memory", action="store_true", help="no memory rows")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = check_device(args.device)
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.memory_tokens, args.batch_size, device)))
        return
    if args.quick:
        args.texts, args.rounds, args.hf_texts, args.hf_rounds = QUICK["texts"], QUICK["rounds"], QUICK["hf_texts"], QUICK["hf_rounds"]
        args.memory_texts, args.memory_repeats = QUICK["memory_texts"], QUICK["memory_repeats"]
    if args.texts < 2 or args.tokens < 4 or min(args.rounds, args.hf_rounds) < 1 or args.hf_texts < 2 or min(args.memory_texts) < 2 or args.memory_repeats < 1:
        parser.error("--texts, --hf-texts and --memory-texts must be at least 2, --tokens at least 4, --rounds at least 1")
    started = time.perf_counter()

    model = gpt2_small_shaped(device)
    view = cw.as_view(model)
    tokens = random_texts(args.texts, args.tokens, view.d_vocab, 0)
    print(f"GPT-2-small-shaped bridge on {device}, {torch.get_num_threads()} threads: {args.texts} texts x {args.tokens} tokens",
          flush=True)
    rows = [scan_vs_forward("TL4 bridge, GPT-2-small shape", model, view, tokens, device, args.rounds, args.batch_size)]
    del model, view
    gc.collect()
    if not args.skip_hf:
        hf, tokenizer, hf_view = hf_model(device)
        hf_tokens = random_texts(args.hf_texts, args.tokens, len(tokenizer), tokenizer.bos_token_id)
        rows.append(scan_vs_forward(
            f"HF GPT2LMHeadModel ({hf.config._attn_implementation}), GPT-2-small shape, vocab {len(tokenizer)}",
            hf, hf_view, hf_tokens, device, args.hf_rounds, args.batch_size,
        ))
        del hf, hf_view
        gc.collect()
    memory = [] if args.skip_memory else memory_rows(sorted(args.memory_texts), args.memory_tokens, device, args.memory_repeats)

    report = {
        "device": device,
        "torch": torch.__version__,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "quick": args.quick,
        "texts": "BOS, a random block, the block again (token ids)",
        "memory_measure": "CPU: psutil RSS sampled every 2 ms minus RSS before the scan (fresh process per row); "
        "CUDA: max_memory_allocated minus memory_allocated before it",
        "memory_repeats": args.memory_repeats,
        "wall_s": time.perf_counter() - started,
        "throughput": rows,
        "memory": memory,
    }
    table = markdown(report)
    print("\n" + table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
