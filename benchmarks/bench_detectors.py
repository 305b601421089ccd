"""Time head_scores for every kind on a GPT-2-small-shaped model, next to TransformerLens' detect_head.

The model is a randomly initialised TransformerLens 4 bridge (boot_native) with GPT-2 small's
shape: 12 layers x 12 heads, d_model 768, d_vocab 50 257, LayerNorm and MLPs. `detect_head` only
takes strings, so the model gets an in-memory word-level tokenizer ("<bos>" is id 0, "t{i}" is
id i) and both sides score the same token ids. detect_head runs the model once per string and
per call with a full cache; head_scores runs it once per call for the whole batch, caching only
the patterns (and values, for copying). Scores are compared after converting detect_head's
normalisation (it divides by every query row; we divide by the queries that have a target).

    python benchmarks/bench_detectors.py [--batch 8] [--seq-len 25] [--runs 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from _models import gpt2_small_shaped as gpt2_small
from transformer_lens.head_detector import detect_head
from transformer_lens.model_bridge import TransformerBridge

from circuitwidgets.analysis.detectors import HEAD_SCORE_KINDS, _target_mask, head_scores, repeated_random_tokens
from circuitwidgets.model import as_view

RESULTS = Path(__file__).parent / "results" / "detectors.json"
TL_KINDS = {"previous_token": "previous_token_head", "duplicate_token": "duplicate_token_head", "induction": "induction_head"}


def word_tokenizer(d_vocab: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, **{f"t{i}": i for i in range(1, d_vocab)}}
    inner = Tokenizer(models.WordLevel(vocab, unk_token="<bos>"))
    inner.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    inner.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=inner, bos_token="<bos>", unk_token="<bos>", pad_token="<bos>")


def gpt2_small_shaped(device: str) -> TransformerBridge:
    model = gpt2_small(device)
    model.tokenizer = word_tokenizer(model.cfg.d_vocab)
    return model


def timed(fn, runs: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(runs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=25)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per measurement (median)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    start = time.perf_counter()
    model = gpt2_small_shaped(args.device)
    boot_s = time.perf_counter() - start
    view_s, _ = timed(lambda: as_view(model), 1)
    rows = []
    for kind in HEAD_SCORE_KINDS:
        repeats = 4 if kind == "prefix_matching" else 2
        tokens = repeated_random_tokens(model, seq_len=args.seq_len, batch=args.batch, repeats=repeats, seed=0)
        head_scores(model, kind, tokens)  # warm-up
        ours_s, ours = timed(lambda: head_scores(model, kind, tokens), args.runs)
        row = {"kind": kind, "tokens": list(tokens.shape), "ours_s": ours_s, "tl_s": None, "max_diff": None}
        if kind in TL_KINDS:
            texts = [" ".join(f"t{int(t)}" for t in seq[1:]) for seq in tokens.cpu()]
            assert torch.equal(model.to_tokens(texts[0])[0].cpu(), tokens[0].cpu())
            tl_s, theirs = timed(lambda: detect_head(model, texts, TL_KINDS[kind]), max(1, args.runs - 2))
            # detect_head averages per-string scores whose denominator is N rows; ours is |Q| queries
            n_queries = _target_mask(tokens, kind).any(-1).sum(-1).float()  # [batch], equal per row here
            converted = theirs.cpu().float() * tokens.shape[1] / n_queries[0].cpu()
            row.update(tl_s=tl_s, max_diff=float((converted - ours).abs().max()))
        rows.append(row)

    print(f"GPT-2-small-shaped bridge on {args.device}: boot {boot_s:.1f} s, ModelView {view_s:.2f} s; "
          f"batch {args.batch}, block {args.seq_len}; median of {args.runs} runs")
    print(f"{'kind':<16} {'tokens':>9} {'head_scores':>12} {'detect_head':>12} {'speed-up':>9} {'max |diff|':>11}")
    for row in rows:
        tl = f"{row['tl_s']:.3f} s" if row["tl_s"] is not None else "-"
        speed = f"{row['tl_s'] / row['ours_s']:.1f}x" if row["tl_s"] is not None else "-"
        diff = f"{row['max_diff']:.1e}" if row["max_diff"] is not None else "-"
        shape = "x".join(map(str, row["tokens"]))
        print(f"{row['kind']:<16} {shape:>9} {row['ours_s']:>10.3f} s {tl:>12} {speed:>9} {diff:>11}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs)",
        "device": args.device, "torch": torch.__version__, "machine": platform.machine(),
        "threads": torch.get_num_threads(), "batch": args.batch, "seq_len": args.seq_len,
        "runs": args.runs, "boot_s": boot_s, "view_s": view_s, "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
