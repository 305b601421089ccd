"""Time every circuitwidgets widget on a GPT-2-small-shaped model in JupyterLab + Chromium.

The model is a randomly initialised TransformerLens 4 bridge (``boot_native``) of GPT-2 small's
shape (12 layers x 12 heads, d_model 768, d_head 64, d_vocab 50 257, n_ctx 1 024, LN, MLPs),
without a tokenizer: widgets get token ids. A real JupyterLab server runs the kernel; Debian's
Chromium shows the notebook. For each widget that exists (OVCircuit, QKCircuit, and, when
importable, AttentionPattern, CompositionDiagram, HeadScores, Dashboard):

- first picture: from the start of the widget's construction in the kernel (``time.time()``) to
  the view's first draw with data in the page (``Date.now()``; same machine, same clock): a
  5 ms poll sees the root's ``data-cw-draws`` change; head scores and composition count
  once ``data-cw-computed`` names a kind (before that they show a progress note);
- bytes: the widget's synced state as sent (Bytes traits + JSON of the other traits);
- head switch: choosing the next head in the widget's own Head control until the view has
  drawn that head (median and max of 5), in the page.
- every widget starts cold: the per-model result cache is cleared before it is built;
- Dashboard: first picture = its first child drawn, "all drawn" = its last child drawn with
  scores; head switch = the attention pattern's Head control changed until *every* child shows
  the new head, 1.5 s apart so that OV's background top-k pass is running at each switch (the
  worst case a user meets); layer switch (re-runs the model) the same way.

    python benchmarks/bench_widgets.py            # prints a table, writes results/widgets.json
    python benchmarks/bench_widgets.py Dashboard  # only the widgets named
    python benchmarks/bench_widgets.py --device cuda  # the model (so every analysis) on the GPU

``--device`` defaults to cuda where there is one, else cpu; the kernel puts the model there.
"""

from __future__ import annotations

import argparse
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
from _models import check_device  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "widgets.json"
TOKENS = list(range(1000, 1040))  # 40 token ids for the OV / QK subsets
PROMPT_IDS = list(range(2000, 2064))  # 64 token ids for the pattern widgets
DASHBOARD_CHILDREN = 6  # head scores, composition, attention, logit attribution, OV, QK

SETUP = f"""
import json, time, torch
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
import circuitwidgets as cw
cfg = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=1024, d_vocab=50257,
    d_mlp=3072, act_fn="gelu_new", normalization_type="LN", seed=0)
model = TransformerBridge.boot_native(cfg).to(DEVICE).eval()
cw.as_view(model).W_E  # the ModelView and its weights are built once per model, outside the timings
TOKENS = {TOKENS!r}
PROMPT_IDS = torch.tensor({PROMPT_IDS!r}).to(DEVICE)

def cold():  # forget every cached result, so each widget is timed from scratch (the ModelView stays)
    from circuitwidgets.widgets import _cache
    _cache.clear()

def sent_bytes(w):
    if isinstance(w, cw.Dashboard):
        return sum(sent_bytes(child) for child in w.widgets)
    from ipywidgets.widgets.widget import _remove_buffers
    state, _, buffers = _remove_buffers(w.get_state())  # binary buffers as the comm sends them
    return sum(len(b) for b in buffers) + len(json.dumps(state, default=str))

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

# Polls every 5 ms (a MutationObserver misses draws made before the view is attached).
OBSERVE = """() => {
  if (window.cwDraws) return;
  window.cwDraws = [];
  const ready = (r) => !["headscores", "composition"].includes(r.dataset.cwKind) || !!r.dataset.cwComputed;
  const seen = new WeakMap();
  setInterval(() => {
    const t = Date.now();
    for (const r of document.querySelectorAll(".cw-root[data-cw-draws]")) {
      if (!r.cwId) r.cwId = "r" + Math.random();
      const key = r.dataset.cwDraws + "/" + (r.dataset.cwComputed || "");
      if (seen.get(r) === key) continue;
      seen.set(r, key);
      window.cwDraws.push({ id: r.cwId, kind: r.dataset.cwKind, t, ready: ready(r) });
    }
  }, 5);
}"""

MARK = "() => { window.cwOld = new Set([...document.querySelectorAll('.cw-root')].map(r => r.cwId || (r.cwId = 'old' + Math.random()))); window.cwDraws.length = 0; }"

# Per new root, the time of its first draw with data: {id: [kind, t]}.
FIRSTS = """() => {
  const out = {};
  for (const d of window.cwDraws) if (d.ready && !window.cwOld.has(d.id) && !(d.id in out)) out[d.id] = [d.kind, d.t];
  return Object.values(out);
}"""

SWITCH = """async ([kind, runs, pause, control]) => {
  const scope = kind === "dashboard" ? [...document.querySelectorAll(".cw-dashboard")].pop() : document;
  const roots = [...scope.querySelectorAll(kind === "dashboard" ? ".cw-root" : `.cw-root[data-cw-kind=${kind}]`)];
  const driver = kind === "dashboard" ? roots.find((r) => r.dataset.cwKind === "attention") : roots[roots.length - 1];
  const select = driver && driver.querySelector(`select[aria-label=${control}]`);
  if (!select) return null;
  const attr = control === "Head" ? "cwHead" : "cwLayer";
  const followers = roots.filter((r) => attr in r.dataset);
  const times = [];
  for (let r = 0; r < runs; r++) {
    const next = select.options[(select.selectedIndex + 1) % select.options.length].value;
    const t0 = performance.now();
    const drawn = new Promise((resolve) => {
      const check = () => (followers.every((f) => f.dataset[attr] === String(next)) ? resolve() : setTimeout(check, 1));
      check();
    });
    select.value = String(next);
    select.dispatchEvent(new Event("change", { bubbles: true }));
    await drawn;
    times.push(performance.now() - t0);
    await new Promise((res) => setTimeout(res, pause));
  }
  const sorted = [...times].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1], all: times };
}"""


def _num(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _switch(result) -> str:
    """'median (max)' in ms, 'n/a' for widgets without a Head control."""
    if not result:
        return "n/a" if result is None else ""
    return f"{result['median']:.0f} (max {result['max']:.0f})"


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
    import torch
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("widgets", nargs="*", help=f"only these (of {', '.join(WIDGETS)})")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cpu or cuda: where the kernel puts the model (and so every analysis)")
    args = parser.parse_args()
    check_device(args.device)
    only = set(args.widgets)  # e.g. `python benchmarks/bench_widgets.py Dashboard`
    widgets = {k: v for k, v in available().items() if not only or k in only}
    rows = []
    with tempfile.TemporaryDirectory(prefix="cw-bench-") as tmp, jupyter_lab(Path(tmp), timeout=120) as lab, sync_playwright() as p, chromium_context(p) as browser:
        write_notebook(Path(tmp) / "bench.ipynb", [f"DEVICE = {args.device!r}\n" + SETUP])
        page = browser.new_page()
        open_notebook(page, lab, "bench.ipynb")
        t = time.time()
        run_all(page, timeout=300_000)
        print(f"model booted in the kernel in {time.time() - t:.1f} s")
        page.evaluate(OBSERVE)
        for name, (kind, expr) in widgets.items():
            code = f"cold()\nt0 = time.time()\nw_{name} = {expr}\nreport({name!r}, t0, w_{name})\nw_{name}"
            row = {"widget": name}
            try:
                page.evaluate(MARK)
                out = run_code(page, code, timeout=300_000)
                text = out.inner_text()
                match = re.search(r"CWBENCH (\{.*\})", text)
                if not match:
                    raise RuntimeError(f"no report in the cell output: {text[-400:]}")
                info = json.loads(match.group(1))
                children = DASHBOARD_CHILDREN if kind == "dashboard" else 1
                page.wait_for_function(f"() => ({FIRSTS})().length >= {children}", timeout=180_000)
                times = sorted(t for _, t in page.evaluate(FIRSTS))
                row.update(first_picture_s=(times[0] - info["t0_ms"]) / 1000, construct_s=info["construct_s"], bytes=info["bytes"])
                if kind == "dashboard":
                    row["all_drawn_s"] = (times[-1] - info["t0_ms"]) / 1000
                    row["head_switch"] = page.evaluate(SWITCH, [kind, 5, 1500, "Head"])
                    row["layer_switch"] = page.evaluate(SWITCH, [kind, 3, 1500, "Layer"])
                else:
                    row["head_switch"] = page.evaluate(SWITCH, [kind, 5, 50, "Head"])
                # let background work (OV top-k) finish so it does not slow the next widget
                run_code(page, "from circuitwidgets.widgets import _background\n_background.wait()", timeout=300_000)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(row, flush=True)
        page.close()
    result = {
        "model": "GPT-2-small-shaped TransformerBridge.boot_native (random weights, LN, MLPs), no tokenizer",
        "browser": "Debian Chromium (headless) via Playwright, JupyterLab kernel on the same machine",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "device": args.device,
        "tokens": {"OV/QK subset": len(TOKENS), "pattern widgets": len(PROMPT_IDS)},
        "first_picture": "kernel time.time() at construction start -> first cw-drawn event in the page",
        "head_switch": "median/max of 5: the widget's Head <select> changed -> view drew that head "
        "(Dashboard: the attention pattern's Head changed -> every child drew it, 1.5 s apart)",
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(f"{'widget':<20} {'first picture s':>16} {'all drawn s':>12} {'bytes':>12} {'head switch ms':>20} {'layer switch ms':>20}")
    for r in rows:
        if "error" in r:
            print(f"{r['widget']:<20} error: {r['error'][:90]}")
            continue
        print(f"{r['widget']:<20} {r['first_picture_s']:>16.2f} {_num(r.get('all_drawn_s'), '.2f'):>12} {r['bytes']:>12,} "
              f"{_switch(r.get('head_switch')):>20} {_switch(r.get('layer_switch')):>20}")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
