"""A marimo app of a diffuse 2 000-token head on the GPT-2-small shape, for `test_scales_browser.py`.

Random weights (every head ~uniform): near-blank on the linear colour scale, drawn on log or relative.
"""

import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo
    import torch
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    import circuitwidgets as cw

    cfg = TransformerBridgeConfig(d_model=768, d_head=64, n_heads=12, n_layers=1, n_ctx=2048, d_vocab=1000,
                                  attn_only=False, normalization_type="LN", d_mlp=3072, act_fn="gelu", seed=0)
    model = TransformerBridge.boot_native(cfg).eval()
    ids = torch.randint(0, 1000, (1, 2000), generator=torch.Generator().manual_seed(0))
    attention = mo.ui.anywidget(cw.AttentionPattern(model, tokens=ids, layer=0, head=3))
    attention  # noqa: B018 (a cell shows its last expression)
    return


if __name__ == "__main__":
    app.run()
