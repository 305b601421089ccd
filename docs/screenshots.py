"""Take the README gallery's screenshots: every widget in a real JupyterLab, in Chromium.

    python docs/screenshots.py [--only ov,qk]      # or: make screenshots

Writes one notebook with a cell per widget (the code below is what the caption describes), runs
it in JupyterLab, and saves each widget's picture to docs/screenshots/<name>.png in the light theme
and <name>-dark.png in JupyterLab Dark. The Dashboard's
picture is its first glance (what a 1 400 x 900 screen shows, its circuits folded under it).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))

from _harness import (  # noqa: E402
    chromium_context,
    error_outputs,
    jupyter_lab,
    open_notebook,
    run_all,
    wait_attr,
    wait_drawn,
    write_notebook,
)

OUT = REPO / "docs" / "screenshots"
SETUP = """import circuitwidgets as cw
model, one_layer = cw.demo_model(), cw.demo_model("1l")
card = cw.demo.model_card()
prev, ind = card["heads"]["previous_token"][0], card["heads"]["induction"][0]
prompt = "a cat sat on a mat; 4 dogs ran. a cat sat on a mat; 4 dogs ran."  # 64 tokens with BOS: n_ctx
"""
#: picture name -> the cell that shows it (its last expression is the widget)
CELLS = {
    "attention": "w = cw.AttentionPattern(model, prompt=prompt, layer=ind[0], head=ind[1])\n"
    "w.selection = {'query': 60, 'key': None, 'locked': True}\nw",
    "attention_long_log": "import torch\n"
    "from transformer_lens.config import TransformerBridgeConfig\n"
    "from transformer_lens.model_bridge import TransformerBridge\n"
    "gpt2_shape = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=1, n_ctx=2048, d_vocab=1000,\n"
    "    attn_only=False, normalization_type='LN', d_mlp=3072, act_fn='gelu', seed=0)  # random weights: diffuse heads\n"
    "ids = torch.randint(0, 1000, (1, 2000), generator=torch.Generator().manual_seed(0))\n"
    "cw.AttentionPattern(TransformerBridge.boot_native(gpt2_shape).eval(), tokens=ids, head=3, color_scale='log')",
    "ov": "cw.OVCircuit(model, ind[0], ind[1])",
    "qk": "cw.QKCircuit(model, prev[0], prev[1])",
    "composition": "cw.CompositionDiagram(model, kind='K', prompt=prompt, selected_pair=(tuple(prev), tuple(ind)))",
    "headscores": "cw.HeadScores(model)",
    "skip_trigrams": "cw.SkipTrigrams(one_layer, head=0)",
    "logit_attribution": "cw.LogitAttribution(model, prompt=prompt)",
    "dashboard": "cw.Dashboard(model, prompt=prompt, layer=ind[0], head=ind[1])",
    "head_atlas": "texts = cw.analysis.repeated_random_tokens(model, seq_len=20, batch=60, seed=1).tolist() + [prompt]\n"
    "cw.HeadAtlas(model, texts=texts, layer=ind[0], head=ind[1], defer=False)",
    "training": "cw.Training(cw.demo_checkpoints(), step=2243, defer=False)",
}


def target(cell, name: str):
    """What the picture `name` shows of its cell: the widget, or the Dashboard's first glance (once all of it drew)."""
    if name != "dashboard":
        return cell.locator(".cw-root").first
    for root in cell.locator(".cw-dashboard-first .cw-root").all():
        wait_drawn(root)
    cell.locator("svg.cw-comp-graph").wait_for()
    return cell.locator(".cw-dashboard-first").first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated picture names (default: all)")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(CELLS)
    unknown = sorted(set(names) - set(CELLS))
    if unknown:
        parser.error(f"unknown picture {unknown[0]!r}; choose from {', '.join(CELLS)}")
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cw-shots-"))
    write_notebook(work / "gallery.ipynb", [SETUP, *(CELLS[n] for n in names)])
    from playwright.sync_api import sync_playwright

    viewport = {"width": 1400, "height": 3600}  # tall: an element screenshot outside the viewport comes out grey
    with sync_playwright() as pw, chromium_context(pw, viewport=viewport) as context, jupyter_lab(work) as lab:
        page = context.new_page()
        open_notebook(page, lab, "gallery.ipynb")
        run_all(page, timeout=600_000)
        errors = error_outputs(page)
        if errors:
            raise SystemExit("a gallery cell failed:\n" + errors[0])
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")
        for index, name in enumerate(names, start=1):
            root = cells.nth(index).locator(".cw-root").first
            wait_drawn(root)
            root.scroll_into_view_if_needed()
            page.mouse.move(0, 0)
            page.wait_for_timeout(400)
            target(cells.nth(index), name).screenshot(path=str(OUT / f"{name}.png"))
            print(f"wrote docs/screenshots/{name}.png")
        dark = names  # every picture in JupyterLab Dark too
        if dark:
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$")).hover()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Dark$")).click()
        for name in dark:
            cell = cells.nth(1 + names.index(name))
            root = cell.locator(".cw-root").first
            wait_attr(root, "data-cw-theme", "dark")
            root.scroll_into_view_if_needed()
            page.mouse.move(0, 0)
            page.wait_for_timeout(400)
            target(cell, name).screenshot(path=str(OUT / f"{name}-dark.png"))
            print(f"wrote docs/screenshots/{name}-dark.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
