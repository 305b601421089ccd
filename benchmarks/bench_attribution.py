"""LogitAttribution on a 256-token prompt of a GPT-2-small-shaped model, beside AttentionPattern.

The model is `_models.gpt2_small_shaped` (12 layers x 12 heads, d_model 768, d_vocab 50 257, LN,
MLPs, random weights, no tokenizer: widgets get token ids). Measured, each widget built cold
(the per-model result cache cleared, fresh random tokens each run):

- construction -> payload ready: the widget's constructor, which runs the model once and builds
  its payload (``LogitAttribution``: every term at every position; ``AttentionPattern``: the
  first layer's patterns), median of ``--runs``;
- bytes sent: the payload traits' bytes plus the JSON of the other synced traits (the shared JS
  bundle included), and the binary payload alone;
- target switch: typing another out token (new payload from the residual terms kept from the
  first run: no model run), median;
- position switch: a click on a token in the page until the view has redrawn at that position,
  median and max of 5, in Chromium on the widget's exported page (every position is in the
  payload, so the kernel is not involved);
- ``analysis.logit_attribution`` alone for one position.

    python benchmarks/bench_attribution.py [--runs 3] [--tokens 256] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _models import gpt2_small_shaped, sync

import circuitwidgets as cw
from circuitwidgets.widgets import _cache

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "attribution.json"

SWITCH = """async ([n]) => {
  const root = document.querySelector('.cw-root[data-cw-kind=attribution]');
  const times = [];
  for (let i = 0; i < n; i++) {
    const seq = root.querySelectorAll('.cw-token').length;
    const target = (Number(root.dataset.cwPosition) + 37 * (i + 1)) % seq;
    const drawn = new Promise((resolve) => root.addEventListener('cw-drawn', resolve, { once: true }));
    const t0 = performance.now();
    root.querySelector(`.cw-token[data-index='${target}']`).click();
    await drawn;
    await new Promise((r) => requestAnimationFrame(() => r()));
    if (root.dataset.cwPosition !== String(target)) throw new Error(`drew position ${root.dataset.cwPosition}, not ${target}`);
    times.push(performance.now() - t0);
  }
  return times;
}"""


def sent_bytes(widget) -> int:
    """Bytes of the synced state: binary payloads as they are, the other traits as JSON."""
    from ipywidgets.widgets.widget import _remove_buffers

    state, _, buffers = _remove_buffers(widget.get_state())
    return sum(len(memoryview(b).cast("B")) for b in buffers) + len(json.dumps(state))


def timed_cold(build, runs: int, device: str, seq: int, vocab: int) -> tuple[float, object]:
    """Median seconds of `build(ids)` with the cache cleared and fresh random ids each run (after one warm-up)."""
    times, widget = [], None
    for i in range(runs + 1):
        ids = torch.randint(0, vocab, (seq,), generator=torch.Generator().manual_seed(i)).tolist()
        _cache.clear()
        sync(device)
        start = time.perf_counter()
        widget = build(ids)
        sync(device)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times), widget


def position_switch(widget, runs: int = 5) -> dict:
    """Median and max ms of a token click to the redraw, in Chromium on the exported page."""
    sys.path.insert(0, str(REPO / "tests" / "browser"))
    from _harness import chromium_context, open_offline
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p, chromium_context(p) as context:
        path = widget.save_html(Path(tmp) / "attribution.html")
        page = context.new_page()
        open_offline(page, path, timeout=120_000)
        page.wait_for_selector(".cw-root[data-cw-kind=attribution][data-cw-draws]", timeout=120_000)
        times = page.evaluate(SWITCH, [runs])
    return {"median_ms": statistics.median(times), "max_ms": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed constructions (median)")
    parser.add_argument("--tokens", type=int, default=256, help="prompt length")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-browser", action="store_true", help="skip the position switch in Chromium")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    model = gpt2_small_shaped(args.device)
    view = cw.as_view(model)
    seq, vocab = args.tokens, view.d_vocab

    la_s, la = timed_cold(lambda ids: cw.LogitAttribution(model, tokens=ids), args.runs, args.device, seq, vocab)
    att_s, att = timed_cold(lambda ids: cw.AttentionPattern(model, tokens=ids), args.runs, args.device, seq, vocab)

    targets = []
    for i in range(args.runs):
        start = time.perf_counter()
        la.target = 100 + i
        targets.append(time.perf_counter() - start)
    la.target = None

    start = time.perf_counter()
    cw.analysis.logit_attribution(view, [la.tokens], position=seq // 2)
    one_position_s = time.perf_counter() - start

    result = {
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs), no tokenizer",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
        "tokens": seq,
        "LogitAttribution": {
            "construction_to_payload_s": la_s,
            "bytes": sent_bytes(la),
            "payload_bytes": len(la.attribution["data"]),
            "payload_shape": la.attribution["shape"],
            "target_switch_s": statistics.median(targets),
        },
        "AttentionPattern": {
            "construction_to_payload_s": att_s,
            "bytes": sent_bytes(att),
            "payload_bytes": len(att.patterns["data"]),
        },
        "bytes": "the synced state as sent (the JS bundle, ~150 kB, included); payload_bytes: the binary payload alone",
        "analysis_logit_attribution_one_position_s": one_position_s,
    }
    if not args.no_browser:
        result["LogitAttribution"]["position_switch_in_page"] = position_switch(la)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
