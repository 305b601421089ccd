"""Time every circuitwidgets widget on a GPT-2-small-shaped model in JupyterLab + Chromium.

The model is a randomly initialised TransformerLens 4 bridge (``boot_native``) of GPT-2 small's
shape (12 layers x 12 heads, d_model 768, d_head 64, d_vocab 50 257, n_ctx 1 024, LN, MLPs),
without a tokenizer: widgets get token ids. A real JupyterLab server runs the kernel; Debian's
Chromium shows the notebook. For each widget that exists (OVCircuit, QKCircuit, and, when
importable, AttentionPattern, CompositionDiagram, HeadScores, Dashboard):

- first picture: from the start of the widget's construction in the kernel (``time.time()``) to
  the view's first ``cw-drawn`` event in the page (``Date.now()``; same machine, same clock);
- bytes: the widget's synced state as sent (Bytes traits + JSON of the other traits);
- head switch: choosing the next head in the widget's own Head control until the view has
  drawn that head (median of 5), in the page.

    python benchmarks/bench_widgets.py            # prints a table, writes results/widgets.json
"""

from __future__ import annotations

import json
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
from _harness import chromium_context, jupyter_lab, open_notebook, run_all, run_code, write_notebook  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "widgets.json"
TOKENS = list(range(1000, 1040))  # 40 token ids for the OV / QK subsets
PROMPT_IDS = list(range(2000, 2064))  # 64 token ids for the pattern widgets

SETUP = f"""
import json, time, torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
import circuitwidgets as cw
cfg = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=1024, d_vocab=50257,
    d_mlp=3072, act_fn="gelu_new", normalization_type="LN", seed=0)
model = TransformerBridge.boot_native(cfg).eval()
cw.as_view(model)  # the ModelView is built once per model, outside the timings
TOKENS = {TOKENS!r}
PROMPT_IDS = torch.tensor({PROMPT_IDS!r})

def sent_bytes(w):
    state = w.get_state()
    raw = sum(len(v) for v in state.values() if isinstance(v, (bytes, bytearray, memoryview)))
    rest = {{k: v for k, v in state.items() if not isinstance(v, (bytes, bytearray, memoryview))}}
    return raw + len(json.dumps(rest, default=str))

def report(name, t0, w):
    print("CWBENCH " + json.dumps({{"widget": name, "t0_ms": t0 * 1000, "construct_s": time.time() - t0, "bytes": sent_bytes(w)}}))
"""

# name -> (view kind, construction expression)
WIDGETS = {
    "OVCircuit": ("ov", "cw.OVCircuit(model, 0, 0, tokens=TOKENS)"),
    "QKCircuit": ("qk", "cw.QKCircuit(model, 0, 0, tokens=TOKENS)"),
    "AttentionPattern": ("attention", "cw.AttentionPattern(model, tokens=PROMPT_IDS, layer=0, head=0)"),
    "CompositionDiagram": ("composition", 'cw.CompositionDiagram(model, kind="K")'),
    "HeadScores": ("headscores", "cw.HeadScores(model)"),
    "Dashboard": ("dashboard", "cw.Dashboard(model, tokens=PROMPT_IDS)"),
}

LISTEN = """() => {
  window.cwFirst = window.cwFirst || {};
  if (!window.cwListening) {
    window.cwListening = true;
    document.addEventListener("cw-drawn", (e) => {
      const root = e.target.closest ? e.target.closest(".cw-root") : null;
      const kind = root ? root.dataset.cwKind : "?";
      if (!(kind in window.cwFirst)) window.cwFirst[kind] = Date.now();
    }, true);
  }
}"""

SWITCH = """async ([kind, runs]) => {
  const roots = [...document.querySelectorAll(`.cw-root[data-cw-kind=${kind}]`)];
  const root = roots[roots.length - 1];
  const select = root && root.querySelector("select[aria-label=Head]");
  if (!select) return null;
  const times = [];
  for (let r = 0; r < runs; r++) {
    const next = (Number(select.value) + 1) % select.options.length;
    const t0 = performance.now();
    const drawn = new Promise((resolve) => {
      const check = () => (root.dataset.cwHead === String(next) ? resolve() : setTimeout(check, 1));
      check();
    });
    select.value = String(next);
    select.dispatchEvent(new Event("change", { bubbles: true }));
    await drawn;
    times.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 50));
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}"""


def available() -> dict[str, tuple[str, str]]:
    import circuitwidgets as cw

    out = {}
    for name, spec in WIDGETS.items():
        try:
            getattr(cw, name)
        except Exception as exc:  # not built yet in this checkout
            print(f"skip {name}: {type(exc).__name__}: {exc}")
            continue
        out[name] = spec
    return out


def main() -> None:
    from playwright.sync_api import sync_playwright

    widgets = available()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cw-bench-") as tmp, jupyter_lab(Path(tmp), timeout=120) as lab, sync_playwright() as p, chromium_context(p) as browser:
        write_notebook(Path(tmp) / "bench.ipynb", [SETUP])
        page = browser.new_page()
        open_notebook(page, lab, "bench.ipynb")
        t = time.time()
        run_all(page, timeout=300_000)
        print(f"model booted in the kernel in {time.time() - t:.1f} s")
        page.evaluate(LISTEN)
        for name, (kind, expr) in widgets.items():
            code = f"t0 = time.time()\nw_{name} = {expr}\nreport({name!r}, t0, w_{name})\nw_{name}"
            row = {"widget": name}
            try:
                out = run_code(page, code, timeout=300_000)
                text = out.inner_text()
                match = re.search(r"CWBENCH (\{.*\})", text)
                if not match:
                    raise RuntimeError(f"no report in the cell output: {text[-400:]}")
                info = json.loads(match.group(1))
                page.wait_for_function(f"() => window.cwFirst && {json.dumps(kind)} in window.cwFirst", timeout=120_000)
                first = page.evaluate(f"() => window.cwFirst[{json.dumps(kind)}]")
                row.update(first_picture_s=(first - info["t0_ms"]) / 1000, construct_s=info["construct_s"], bytes=info["bytes"])
                row["head_switch_ms"] = page.evaluate(SWITCH, [kind, 5])
                # let background work (OV top-k) finish so it does not slow the next widget
                run_code(page, "from circuitwidgets.widgets.ov import _WORKER\n_WORKER.submit(lambda: None).result()", timeout=300_000)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(row)
        page.close()
    result = {
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs), no tokenizer",
        "browser": "Debian Chromium (headless) via Playwright, JupyterLab kernel on the same machine",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "tokens": {"OV/QK subset": len(TOKENS), "pattern widgets": len(PROMPT_IDS)},
        "first_picture": "kernel time.time() at construction start -> first cw-drawn event in the page",
        "head_switch": "median of 5: the widget's Head <select> changed -> view drew that head",
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(f"{'widget':<20} {'first picture s':>16} {'construct s':>12} {'bytes':>12} {'head switch ms':>15}")
    for r in rows:
        if "error" in r:
            print(f"{r['widget']:<20} error: {r['error'][:90]}")
            continue
        hs = "n/a" if r.get("head_switch_ms") is None else f"{r['head_switch_ms']:.1f}"
        print(f"{r['widget']:<20} {r['first_picture_s']:>16.2f} {r['construct_s']:>12.2f} {r['bytes']:>12,} {hs:>15}")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
