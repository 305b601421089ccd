"""AttentionPattern against CircuitsVis' ``attention_heads`` on one 12-head layer, in Chromium.

Model: a randomly initialised TransformerLens 4 bridge (boot_native) with GPT-2 small's shape
(12 layers x 12 heads, d_model 768, n_ctx 1 024, no tokenizer, so prompts are token ids), and
circuitwidgets' demo model for the prompt-edit round trip. Prompts: random token ids at 64, 256
and 1 024 tokens; the layer shown is 5.

Measured, per length:
- bytes to the browser. Ours: the widget's whole synced state as the comm message carries it
  (JSON of the non-binary traits + the binary buffers) without the bundle, which anywidget sends
  along with each widget's state (reported apart, ``ours_bundle_bytes``). Theirs: the HTML
  ``attention_heads`` returns in its CDN form (the data; their bundle, loaded from unpkg, is
  reported apart as ``theirs_bundle_bytes``).
- first picture. Ours in JupyterLab: from Shift+Enter on a cell that displays an already-built
  widget to the first animation frame after the widget drew heatmap, thumbnails and tokens
  (kernel round trip, comm open, state transfer, decode, draw). Both from disk: an exported page
  (ours, ``save_html``) and CircuitsVis' self-contained HTML (their bundle inlined), from
  navigation start to the first frame after the picture is in the page.
- head switch (ours, in JupyterLab): an ArrowRight key event on the widget to the end of the
  synchronous redraw, and to the next animation frame; median over 11 switches.
- prompt edit round trip (ours, in JupyterLab): Enter in the widget's prompt box to the first
  frame showing the new patterns (browser -> kernel: run the model, encode -> browser: draw), for
  the demo model and for the GPT-2 shape at 256 tokens; median of 3. Also the kernel-side part
  alone (setting the trait from Python).

    python benchmarks/bench_attention.py [--lengths 64,256,1024] [--no-circuitsvis] [--screenshots] [--device cpu]

``--device`` (default cuda where there is one, else cpu) puts both models and the prompts on
that device, in this process and in the notebook's kernel; the widgets run where the model is.

``--screenshots`` also saves docs/screenshots/attention.png and attention-dark.png: the example
notebook's induction-head widget in JupyterLab (light and dark theme).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "browser"))

from _harness import chromium_context, jupyter_lab, open_notebook, run_all, run_code, write_notebook  # noqa: E402
from _models import check_device  # noqa: E402

LAYER = 5
RESULTS = HERE / "results" / "attention.json"
SCREENSHOTS = REPO / "docs" / "screenshots"

SETUP = """
import time, torch, circuitwidgets as cw
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge
cfg = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=1024, d_vocab=50257,
                              d_mlp=3072, act_fn="gelu_new", normalization_type="LN", seed=0)
gpt = TransformerBridge.boot_native(cfg).to(DEVICE).eval()
g = torch.Generator().manual_seed(0)
toks = {n: torch.randint(0, 50257, (n,), generator=g).to(DEVICE) for n in LENGTHS}
try:
    demo = cw.demo_model(); demo_name = "demo_model()"
except FileNotFoundError:  # weights not trained yet: a same-shape stand-in with the demo tokenizer
    sys.path.insert(0, REPO + "/tests"); from planted import planted_model
    from circuitwidgets.demo import load_tokenizer
    demo, _ = planted_model(); demo.tokenizer = load_tokenizer(); demo_name = "planted (demo weights missing)"
demo = demo.to(DEVICE)
print("ready")
"""

FIRST_FRAME = """async ([sel, index, timeout]) => {
  const t0 = performance.now();
  while (performance.now() - t0 < timeout) {
    const root = document.querySelectorAll(sel)[index];
    if (root && root.dataset.cwFrameAt) return Number(root.dataset.cwFrameAt);
    await new Promise((r) => setTimeout(r, 5));
  }
  return null;
}"""

HEAD_SWITCH = """async (root) => {
  const sync = [], frame = [];
  for (let i = 0; i < 11; i++) {
    const t = performance.now();
    root.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowRight", bubbles: true}));
    sync.push(performance.now() - t);
    await new Promise(requestAnimationFrame);
    frame.push(performance.now() - t);
  }
  const med = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1];
  return {sync: med(sync), frame: med(frame), head: root.dataset.cwHead};
}"""

PROMPT_EDIT = """async (root, [text, timeout]) => {
  const box = root.querySelector("textarea.cw-prompt");
  const before = root.dataset.cwFrameRevision;
  box.value = text;
  const t0 = performance.now();
  box.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
  while (performance.now() - t0 < timeout) {
    if (root.dataset.cwFrameRevision !== before) return Number(root.dataset.cwFrameAt) - t0;
    await new Promise((r) => setTimeout(r, 2));
  }
  return null;
}"""

CV_FIRST = """() => {
  window.__cvFirst = null;
  new MutationObserver((_, obs) => {
    const root = document.querySelector("[id^=circuits-vis-]");
    if (root && root.querySelector("canvas, svg, table, div")) {
      obs.disconnect();
      requestAnimationFrame(() => { window.__cvFirst = performance.now(); });
    }
  }).observe(document, {subtree: true, childList: true});
}"""


def comm_bytes(widget) -> tuple[int, int]:
    """``(data, bundle)``: bytes of the widget's state as the comm open message carries it (JSON
    + binary buffers) without the bundle, and the bundle (``_esm`` + ``_css``) it also carries."""
    from ipywidgets.widgets.widget import _remove_buffers

    state = widget.get_state()
    bundle = len(state.pop("_esm", "").encode()) + len(state.pop("_css", "").encode())
    state, _, buffers = _remove_buffers(state)
    return len(json.dumps(state, separators=(",", ":")).encode()) + sum(len(b) for b in buffers), bundle


def circuitsvis_html(patterns: torch.Tensor, labels: list[str]):
    """CircuitsVis' attention_heads on `patterns` [heads, q, k]; (cdn html, inline html)."""
    if "importlib_metadata" not in sys.modules:  # circuitsvis imports the backport; the stdlib has it
        shim = types.ModuleType("importlib_metadata")
        shim.version = importlib.metadata.version
        sys.modules["importlib_metadata"] = shim
    from circuitsvis.attention import attention_heads

    html = attention_heads(attention=patterns, tokens=labels)
    return html.cdn_src, html.local_src


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, unit="", digits=1):
    if v is None:
        return "n/a"
    return f"{v:.{digits}f}{unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="64,256,1024")
    parser.add_argument("--no-circuitsvis", action="store_true")
    parser.add_argument("--screenshots", action="store_true", help="also save docs/screenshots/attention*.png")
    parser.add_argument("--screenshots-only", action="store_true", help="only save the screenshots")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cpu or cuda: where the models (and so the widgets' work) run, here and in the kernel")
    args = parser.parse_args()
    check_device(args.device)
    if args.screenshots_only:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p, chromium_context(p) as browser:
            take_screenshots(browser, Path(tempfile.mkdtemp(prefix="cw-shots-")))
        return 0
    lengths = [int(n) for n in args.lengths.split(",")]
    from playwright.sync_api import sync_playwright
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    from circuitwidgets.widgets.attention import AttentionPattern

    # ----- bytes, and the pages opened from disk ------------------------------------------------
    cfg = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=12, n_ctx=1024, d_vocab=50257,
                                  d_mlp=3072, act_fn="gelu_new", normalization_type="LN", seed=0)
    gpt = TransformerBridge.boot_native(cfg).to(args.device).eval()
    g = torch.Generator().manual_seed(0)
    work = Path(tempfile.mkdtemp(prefix="cw-bench-"))
    rows: dict[int, dict] = {}
    for n in lengths:
        tokens = torch.randint(0, 50257, (n,), generator=g).to(args.device)
        t = time.perf_counter()
        w = AttentionPattern(gpt, tokens=tokens, layer=LAYER)
        data, bundle = comm_bytes(w)
        row = {"tokens": n, "kernel_build_s": time.perf_counter() - t, "ours_bytes": data, "ours_bundle_bytes": bundle}
        w.save_html(work / f"ours_{n}.html")
        if not args.no_circuitsvis:
            cdn, local = circuitsvis_html(w.current_patterns().cpu(), list(w.str_tokens))
            row["theirs_bytes"] = len(cdn.encode())
            row["theirs_bundle_bytes"] = len(local.encode()) - len(cdn.encode())
            row["ratio"] = row["ours_bytes"] / row["theirs_bytes"]
            (work / f"theirs_{n}.html").write_text(f"<!doctype html><html><body>{local}</body></html>", encoding="utf-8")
            del cdn, local
        rows[n] = row
        del w
        print(f"{n} tokens: ours {row['ours_bytes'] / 1e6:.2f} MB, theirs {row.get('theirs_bytes', 0) / 1e6:.1f} MB", flush=True)
    del gpt

    lab_dir = work / "lab"
    lab_dir.mkdir()
    setup = SETUP.replace("LENGTHS", repr(lengths)).replace("REPO", repr(str(REPO))).replace("DEVICE", repr(args.device))
    write_notebook(lab_dir / "bench.ipynb", ["import sys\n" + setup])
    with sync_playwright() as p, chromium_context(p) as browser:
        page = browser.new_page()
        for n in lengths:
            page.goto((work / f"ours_{n}.html").as_uri())
            rows[n]["ours_file_first_ms"] = page.evaluate(FIRST_FRAME, [".cw-root", 0, 60_000])
            if not args.no_circuitsvis:
                cv = browser.new_page()
                cv.add_init_script(f"({CV_FIRST})()")
                try:
                    cv.goto((work / f"theirs_{n}.html").as_uri(), timeout=90_000)
                    cv.wait_for_function("() => window.__cvFirst !== null", timeout=60_000)
                    rows[n]["theirs_file_first_ms"] = cv.evaluate("() => window.__cvFirst")
                except Exception as exc:  # their page can be too big for the browser
                    rows[n]["theirs_file_first_ms"] = None
                    rows[n]["theirs_note"] = f"did not render: {type(exc).__name__}"
                cv.close()
        page.close()

        # ----- JupyterLab: display, head switch, prompt edit ---------------------------------------
        with jupyter_lab(lab_dir) as lab:
            page = browser.new_page()
            open_notebook(page, lab, "bench.ipynb")
            run_all(page, timeout=300_000)
            page.evaluate(
                """() => document.addEventListener("keydown", (e) => {
                     if (e.key === "Enter" && e.shiftKey) window.__cwT0 = performance.now(); }, true)"""
            )
            demo_name = run_code(page, "print(demo_name)").text_content().strip()
            for n in lengths:
                run_code(page, f"w{n} = cw.AttentionPattern(gpt, tokens=toks[{n}], layer={LAYER})", timeout=300_000)
                index = page.locator(".cw-root").count()
                run_code(page, f"w{n}", timeout=120_000)
                frame = page.evaluate(FIRST_FRAME, [".cw-root", index, 120_000])
                t0 = page.evaluate("() => window.__cwT0")
                rows[n]["ours_lab_first_ms"] = None if frame is None else frame - t0
                root = page.locator(".cw-root").nth(index)
                root.scroll_into_view_if_needed()
                switch = root.evaluate(HEAD_SWITCH)
                rows[n]["head_switch_ms"] = switch["sync"]
                rows[n]["head_switch_frame_ms"] = switch["frame"]
                print(n, "tokens in JupyterLab:", {k: v for k, v in rows[n].items() if k.endswith("_ms")}, flush=True)
                if n == 256:
                    edits = []
                    for k in range(3):
                        ids = " ".join(str((i * 7919 + k * 104729) % 50257) for i in range(256))
                        edits.append(root.evaluate(PROMPT_EDIT, [ids, 120_000]))
                    rows[n]["prompt_edit_ms"] = median(edits)
                    out = run_code(page, f"t=time.perf_counter(); w{n}.tokens = toks[{n}].flip(0).tolist(); print((time.perf_counter()-t)*1000)")
                    rows[n]["prompt_edit_kernel_ms"] = float(out.text_content().strip())
                run_code(page, f"w{n}.close(); del w{n}")
            # the demo model, a text prompt
            run_code(page, "wd = cw.AttentionPattern(demo, prompt='the cat sat on the mat. the cat sat on the mat.', layer=1)")
            index = page.locator(".cw-root").count()
            run_code(page, "wd")
            page.evaluate(FIRST_FRAME, [".cw-root", index, 60_000])
            root = page.locator(".cw-root").nth(index)
            texts = ["a quick brown fox. a quick brown fox.", "one two three, one two three.", "abcdefgh abcdefgh abcdefgh"]
            demo_edits = [root.evaluate(PROMPT_EDIT, [t, 60_000]) for t in texts]
            out = run_code(page, "t=time.perf_counter(); wd.prompt = 'hello world, hello world'; print((time.perf_counter()-t)*1000)")
            demo_kernel = float(out.text_content().strip())
            page.close()
        if args.screenshots:
            take_screenshots(browser, work)

    result = {
        "benchmark": "attention",
        "model": "GPT-2-small shape, boot_native, random weights; layer 5 (12 heads)",
        "demo_model": demo_name,
        "device": args.device,
        "machine": {"platform": platform.platform(), "cpus": torch.get_num_threads(), "python": platform.python_version(),
                    "torch": torch.__version__, "chromium": "/usr/bin/chromium (headless)"},
        "rows": [rows[n] for n in lengths],
        "demo_prompt_edit_ms": median(demo_edits),
        "demo_prompt_edit_kernel_ms": demo_kernel,
        "targets": {"bytes_ratio": "<= 1/20", "first_picture_ms_at_1024": 300, "head_switch_ms": 16},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(f"{'tokens':>6} {'ours MB':>8} {'theirs MB':>9} {'ratio':>7} {'first/Lab':>9} {'first/file':>10} {'theirs/file':>11} {'switch':>7} {'->frame':>8}")
    for r in result["rows"]:
        ratio = f"1/{1 / r['ratio']:.0f}" if r.get("ratio") else "n/a"
        print(f"{r['tokens']:>6} {r['ours_bytes'] / 1e6:>8.2f} {r.get('theirs_bytes', 0) / 1e6:>9.1f} {ratio:>7} "
              f"{fmt(r.get('ours_lab_first_ms'), ' ms'):>9} {fmt(r.get('ours_file_first_ms'), ' ms'):>10} "
              f"{fmt(r.get('theirs_file_first_ms'), ' ms'):>11} {fmt(r.get('head_switch_ms'), ' ms', 2):>7} {fmt(r.get('head_switch_frame_ms'), ' ms'):>8}")
    r256 = next((r for r in result["rows"] if r["tokens"] == 256), {})
    print(f"prompt edit round trip: demo model ({demo_name}) {fmt(result['demo_prompt_edit_ms'], ' ms')} "
          f"(kernel {fmt(demo_kernel, ' ms')}); GPT-2 shape, 256 tokens {fmt(r256.get('prompt_edit_ms'), ' ms')} "
          f"(kernel {fmt(r256.get('prompt_edit_kernel_ms'), ' ms')})")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def take_screenshots(browser, work: Path) -> None:
    """The example notebook's induction-head widget in JupyterLab, light and dark."""
    from _harness import wait_attr, wait_drawn

    root_dir = work / "shots"
    root_dir.mkdir()
    shutil.copy(REPO / "example_notebooks" / "01_attention_patterns.ipynb", root_dir)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with jupyter_lab(root_dir) as lab:
        page = browser.new_page()
        page.set_viewport_size({"width": 1100, "height": 1000})
        open_notebook(page, lab, "01_attention_patterns.ipynb")
        run_all(page)
        run_code(page, "ind_view.head = induction_head; ind_view.selection = {'query': 40, 'key': None, 'locked': True}")
        root = page.locator(".jp-CodeCell", has_text="ind_view = cw.AttentionPattern").locator(".cw-root")
        wait_drawn(root)
        root.scroll_into_view_if_needed()
        page.mouse.move(0, 0)
        page.wait_for_timeout(300)
        root.screenshot(path=str(SCREENSHOTS / "attention.png"))
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).hover()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Dark$")).click()
        wait_attr(root, "data-cw-theme", "dark")
        page.wait_for_timeout(300)
        root.screenshot(path=str(SCREENSHOTS / "attention-dark.png"))
        page.close()
    print(f"wrote {SCREENSHOTS.relative_to(REPO)}/attention.png and attention-dark.png")


if __name__ == "__main__":
    sys.exit(main())
