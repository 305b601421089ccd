"""A marimo app showing every circuitwidgets widget through ``mo.ui.anywidget`` on the demo model.

Driven by ``test_marimo_browser.py`` (``marimo run``, Playwright); also runnable by hand:
``marimo run tests/browser/marimo_app.py``. The constants below are the test's starting state.
"""

import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo

    import circuitwidgets as cw

    PROMPT = "abcdefgh abcdefgh"
    TOKENS = list(range(2, 22))  # the demo tokenizer's ids of "a" .. "t"
    model = cw.demo_model()
    return PROMPT, TOKENS, cw, mo, model


@app.cell
def _(PROMPT, cw, mo, model):
    attention = mo.ui.anywidget(cw.AttentionPattern(model, prompt=PROMPT, layer=1, head=3))
    attention  # noqa: B018 (a cell shows its last expression)
    return


@app.cell
def _(TOKENS, cw, mo, model):
    ov = mo.ui.anywidget(cw.OVCircuit(model, 1, 1, tokens=TOKENS))
    ov  # noqa: B018 (a cell shows its last expression)
    return


@app.cell
def _(TOKENS, cw, mo, model):
    qk = mo.ui.anywidget(cw.QKCircuit(model, 1, 1, tokens=TOKENS))
    qk  # noqa: B018 (a cell shows its last expression)
    return


@app.cell
def _(PROMPT, cw, mo, model):
    composition = mo.ui.anywidget(cw.CompositionDiagram(model, prompt=PROMPT, defer=True))
    composition  # noqa: B018 (a cell shows its last expression)
    return


@app.cell
def _(cw, mo, model):
    head_scores = mo.ui.anywidget(cw.HeadScores(model, defer=True))
    head_scores  # noqa: B018 (a cell shows its last expression)
    return


@app.cell
def _(PROMPT, cw, model):
    # every child shown at once (compact=False): test_dashboard_layout_browser.py checks the compact first glance
    dashboard = cw.Dashboard(model, prompt=PROMPT, layer=0, head=0, compact=False)
    dashboard  # noqa: B018 (shown through Dashboard._display_: its rows of mo.ui.anywidget)
    return


if __name__ == "__main__":
    app.run()
