"""A remote (NDIF) attention picture: what one request downloads, reduced where the model runs vs the full patterns.

With an nnsight model, `HFView` rebuilds a layer's patterns inside the trace and saves only what is
drawn: the uint8 codes of the layer's overview (``reduced(tokens, {layer: {"factor", "pool"}})``).
The alternative is to save the layer's float32 patterns whole (``{"block": (None, 0, n, 0, n, 1)}``,
what `HFView.patterns` does) and reduce them here. Both run with ``remote="local"``, nnsight's
serialising dry run of the remote path (the request is serialised and deserialised with the local
modules hidden, then run here), so the request really is a remote one; only the network is missing.

Model: a random Hugging Face Llama (rotary, grouped-query attention) built from a `LlamaConfig`, no
download: 2 layers, 32 heads (8 key/value heads) of d_head 16 (d_model 512), 4 096 positions, the demo
model's tokenizer; its q_proj weights scaled by 8 so that heads attend sharply as trained heads do
(random weights attend almost uniformly). Token ids at random; layer 1 shown.
Each (length, path) runs in its own Python process, so that its peak memory is its own.

Per length (1 024 and 4 096 tokens), side by side:
- ``reduced``: one trace saving the layer's overview codes, ``factor = ceil(n / 512)`` pooled with max
  (``[32, n/f, n/f]`` uint8);
- ``full``: one trace saving the layer's float32 patterns ``[32, n, n]`` (2.1 GB at 4 096 tokens),
  then pooled and quantised here to the same overview, as a client holding the full patterns must;
- ``widget``: ``cw.AttentionPattern(view, tokens=..., layer=1)`` on an `HFView` with
  ``remote="local"`` (the reduced path; level of detail above 4 MB of codes), construction until its
  payload is ready: the kernel's share of construction -> first picture. Also the short form
  ``cw.AttentionPattern(nn, tokens=..., layer=1, remote="local")`` (``first_picture_remote_keyword_s``),
  where the widget makes its own `HFView`: with the weights here that includes building its
  TransformerLens bridge (``hfview_s``), which a model whose weights are on NDIF skips.

Fields: ``download_bytes`` (`HFView.bytes_received`: ``torch.save`` of what the trace saved, i.e.
what a remote request downloads), ``upload_bytes`` (the serialised request nnsight would send, from
its verbose output), ``trace_s`` (`HFView.reduced`: serialising the request, the run, counting the
result; median of 3, 1 for the full path at 4 096 tokens), ``local_reduce_s`` (here, from the answer
to the widget's deflated overview payload: for the full path pooling and quantising the patterns
first), ``first_picture_s`` (trace + local reduction; for the widget its construction),
``payload_bytes`` (that overview payload, what the browser gets), ``peak_rss_mb`` (above the
process's memory after the model was built and warmed up), and ``forward_s``: the model's own forward
pass at that length (no trace, no patterns), for scale. A real remote request adds the network: the
download at the link's speed (8.4 MB vs 2.1 GB per 4 096-token layer) and NDIF's queueing.

    python benchmarks/bench_remote.py [--lengths 1024,4096]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _shared import random_llama

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "remote.json"
LAYER = 1
HEADS, KV_HEADS, D_HEAD, LAYERS, N_CTX = 32, 8, 16, 2, 4096
OVERVIEW_CELLS = 512  # circuitwidgets.widgets.attention.OVERVIEW_CELLS
PATHS = ("reduced", "full", "widget")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build():
    """(nnsight model, Hugging Face model, vocabulary size): the random Llama described above."""
    from nnsight import TransformersModel

    hf, tokenizer = random_llama(heads=HEADS, kv_heads=KV_HEADS, d_head=D_HEAD, layers=LAYERS, n_ctx=N_CTX)
    return TransformersModel(hf, tokenizer=tokenizer), hf, len(tokenizer)

def tokens_for(n: int, vocab: int, seed: int):
    import torch

    return torch.randint(1, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


def upload_bytes(printed: str) -> int | None:
    """The serialised request's size, from nnsight's verbose ``[local] payload: N bytes`` line."""
    found = re.findall(r"\[local\] payload: ([\d,]+) bytes", printed)
    return int(found[-1].replace(",", "")) if found else None


def one(n: int, path: str) -> dict:
    """One length on one path, in this process (called through --one)."""
    import torch

    import circuitwidgets as cw
    from circuitwidgets import HFView, in_trace, transport

    nn, hf, vocab = build()
    t = time.perf_counter()
    view = HFView(nn, remote="local", verbose=True)  # verbose: nnsight prints the request's size
    view_s = time.perf_counter() - t
    factor = math.ceil(n / OVERVIEW_CELLS)
    overview = {"factor": factor, "pool": "max"}
    ids = tokens_for(n, vocab, seed=0)
    with contextlib.redirect_stdout(io.StringIO()):  # warm up: imports, the first serialisation, the first run
        view.reduced(tokens_for(64, vocab, seed=99), {LAYER: {"factor": 1, "pool": "max"}})
        cw.AttentionPattern(view, tokens=tokens_for(64, vocab, seed=98)[0], layer=LAYER)
    with torch.no_grad():
        t = time.perf_counter()
        hf(ids)
        forward = time.perf_counter() - t
    base = rss_mb()
    row: dict = {"tokens": n, "path": path, "heads": HEADS, "kv_heads": KV_HEADS, "layer": LAYER, "factor": factor,
                 "forward_s": forward, "hfview_s": view_s,
                 "full_float32_bytes": HEADS * n * n * 4, "overview_codes_bytes": HEADS * math.ceil(n / factor) ** 2}
    repeats = 1 if path == "full" and n > 2048 else 3
    times, printed = [], io.StringIO()
    if path == "widget":
        keyword = []
        for i in range(repeats):  # new tokens each time: the widget's trace cache would answer a repeat
            tokens = tokens_for(n, vocab, seed=i + 1)[0]
            before = view.bytes_received
            with contextlib.redirect_stdout(printed):
                t = time.perf_counter()
                w = cw.AttentionPattern(view, tokens=tokens, layer=LAYER, head=3)
                times.append(time.perf_counter() - t)
            assert w.error == "", w.error
            # the short form: the widget makes its own HFView of the nnsight model (remote= keyword)
            with contextlib.redirect_stdout(io.StringIO()):
                t = time.perf_counter()
                short = cw.AttentionPattern(nn, tokens=tokens_for(n, vocab, seed=i + 11)[0], layer=LAYER, head=3, remote="local")
                keyword.append(time.perf_counter() - t)
            assert short.error == "", short.error
            del short
        row.update(download_bytes=view.bytes_received - before, payload_bytes=len(w.patterns["data"]),
                   lod=w.patterns.get("lod"), first_picture_s=statistics.median(times),
                   first_picture_remote_keyword_s=statistics.median(keyword))
    else:
        request = overview if path == "reduced" else {"block": (None, 0, n, 0, n, 1)}
        local = []
        for _ in range(repeats):
            before = view.bytes_received
            with contextlib.redirect_stdout(printed):
                t = time.perf_counter()
                result = view.reduced(ids, {LAYER: request})[LAYER]
                times.append(time.perf_counter() - t)
            t = time.perf_counter()  # what the client does with the answer to have the widget's overview payload
            codes = result["codes"] if path == "reduced" else in_trace.quantize(in_trace.pool(result["block"][0], factor, "max"))
            payload = transport.uint8_payload(codes.float() / in_trace.CODE_MAX, compress=True)
            local.append(time.perf_counter() - t)
            shape = tuple(result["codes" if path == "reduced" else "block"].shape)
            del result, codes
        row.update(download_bytes=view.bytes_received - before, payload_bytes=len(payload["data"]), saved_shape=shape,
                   local_reduce_s=statistics.median(local),
                   first_picture_s=statistics.median(times) + statistics.median(local))
    row.update(trace_s=None if path == "widget" else statistics.median(times), repeats=repeats, upload_bytes=upload_bytes(printed.getvalue()),
               peak_rss_mb=rss_mb() - base)
    return row


def mb(value: float) -> str:
    return f"{value / 1e6:,.1f}" if value >= 1e5 else f"{value / 1e6:.3f}"


def table(rows: list[dict]) -> str:
    head = ("| tokens | path | downloaded MB | uploaded kB | trace s | local reduce s | construction -> payload s "
            "| browser payload MB | peak RSS MB | forward s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['tokens']} | {r['path']} | failed: {r['failed'][-120:]!r} |")
            continue
        up = "—" if r.get("upload_bytes") is None else f"{r['upload_bytes'] / 1e3:.0f}"
        reduce = f"{r['local_reduce_s']:.2f}" if "local_reduce_s" in r else "—"
        trace = "—" if r["trace_s"] is None else f"{r['trace_s']:.2f}"
        construct = f"{r['first_picture_s']:.2f}"
        if "first_picture_remote_keyword_s" in r:
            construct += f" ({r['first_picture_remote_keyword_s']:.2f} with remote=)"
        lines.append(
            f"| {r['tokens']} | {r['path']} | {mb(r['download_bytes'])} | {up} | {trace} | {reduce} "
            f"| {construct} | {mb(r['payload_bytes'])} | {r['peak_rss_mb']:,.0f} | {r['forward_s']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="1024,4096")
    parser.add_argument("--one", nargs=2, metavar=("N", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1])))
        return 0
    rows = []
    started = time.perf_counter()
    for n in (int(x) for x in args.lengths.split(",")):
        for path in PATHS:
            done = subprocess.run([sys.executable, __file__, "--one", str(n), path], capture_output=True, text=True)
            if done.returncode:
                rows.append({"tokens": n, "path": path, "failed": done.stderr[-400:]})
                print(f"{n} {path}: failed\n{done.stderr[-800:]}", flush=True)
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"{n:5d} {path:7s} download {mb(r['download_bytes'])} MB, first picture {r['first_picture_s']:.2f} s, "
                  f"peak +{r['peak_rss_mb']:.0f} MB", flush=True)
    print()
    print(table(rows))
    for n in sorted({r["tokens"] for r in rows}):
        by = {r["path"]: r for r in rows if r["tokens"] == n and "failed" not in r}
        if "reduced" in by and "full" in by:
            print(f"{n} tokens: the full patterns download {by['full']['download_bytes'] / by['reduced']['download_bytes']:.0f} x "
                  f"the reduced request's bytes; first picture {by['full']['first_picture_s'] / by['reduced']['first_picture_s']:.1f} x "
                  "slower before any network time; at 1 Gbit/s the download alone takes "
                  f"{by['reduced']['download_bytes'] * 8 / 1e9:.2f} s vs {by['full']['download_bytes'] * 8 / 1e9:.1f} s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": platform.platform(), "model": {
        "architecture": "LlamaForCausalLM (random, q_proj x 8)", "layers": LAYERS, "heads": HEADS, "kv_heads": KV_HEADS,
        "d_head": D_HEAD, "n_ctx": N_CTX}, "remote": "local", "rows": rows,
        "wall_s": time.perf_counter() - started}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
