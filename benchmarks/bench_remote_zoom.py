"""Remote zoom without round trips (issue 22): traces and bytes of zooming, panning and hovering a remote head.

The random Llama of `bench_long_hf.py` (rotary, 8 heads in 2 K/V groups of d_head 64) through
``nnsight.TransformersModel`` with ``remote="local"`` (each request serialised and run as NDIF runs it),
layer 1 shown. The first picture's trace also brings back the shown head's queries and keys; then 20
actions on that head: 10 tiles (zoom in and pan: the whole prompt pooled to 1 024 cells, then 4 096, 1 024
and 256-token windows, moving down the diagonal) and 10 hovers (the exact row of a destination). Counted:
``HFView.traces`` (requests) and ``HFView.bytes_received`` (what they downloaded), and the time of each
action here; then one head switch (one request).

    python benchmarks/bench_remote_zoom.py [--tokens 32768]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results" / "remote_zoom.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32768)
    args = parser.parse_args()
    import torch
    from bench_long_hf import build
    from nnsight import TransformersModel

    import circuitwidgets as cw

    hf, tokenizer = build()
    n = args.tokens
    ids = torch.randint(3, len(tokenizer), (n,), generator=torch.Generator().manual_seed(0))
    view = cw.HFView(TransformersModel(hf, tokenizer=tokenizer), remote="local")
    t0 = time.perf_counter()
    w = cw.AttentionPattern(view, tokens=ids, layer=1, head=1)
    first_s = time.perf_counter() - t0
    assert w.error == "", w.error
    first_traces, first_bytes = view.traces, view.bytes_received
    inputs = w._parts["inputs"][1]
    head_bytes = sum(t.numel() * t.element_size() for t in (inputs["q"], inputs["k"]))
    actions = []
    windows = []  # (row0, col0, size, step): the whole prompt, then zoomed windows moving down the diagonal
    for k, size in enumerate((n, 4096, 1024, 256, 256, 1024, 4096, 1024, 1024, 256)):
        size = min(size, n)
        row0 = (n - size) * k // 9
        windows.append((row0, max(0, row0 - size // 2), size, -(-size // 1024)))
    for k, (row0, col0, size, step) in enumerate(windows):
        t0 = time.perf_counter()
        w.tile_request = {"id": k + 1, "layer": 1, "head": 1, "row0": row0, "col0": col0, "rows": size, "cols": size,
                          "step": step, "revision": w.patterns["revision"]}
        actions.append(("tile", time.perf_counter() - t0))
        assert w.tile.get("id") == k + 1, w.error
    for k in range(10):
        t0 = time.perf_counter()
        w.selection = {"query": n // 11 * (k + 1), "key": 0, "locked": False}
        actions.append(("hover", time.perf_counter() - t0))
    zoom_traces, zoom_bytes = view.traces - first_traces, view.bytes_received - first_bytes
    t0 = time.perf_counter()
    w.head = 5
    w.selection = {"query": n - 1, "key": 0, "locked": True}
    switch_s = time.perf_counter() - t0
    result = {
        "tokens": n, "machine": platform.machine(), "torch": torch.__version__, "first_picture_s": round(first_s, 2),
        "first_traces": first_traces, "first_download_mb": round(first_bytes / 2**20, 2),
        "head_inputs_mb": round(head_bytes / 2**20, 2), "actions": len(actions), "action_traces": zoom_traces,
        "action_download_bytes": zoom_bytes,
        "tile_s_median": round(sorted(s for a, s in actions if a == "tile")[5], 3),
        "hover_s_median": round(sorted(s for a, s in actions if a == "hover")[5], 3),
        "head_switch_traces": view.traces - first_traces - zoom_traces, "head_switch_s": round(switch_s, 2),
        "remote_note": w.remote_note,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
