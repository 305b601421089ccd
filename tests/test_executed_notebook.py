"""A notebook executed for no one (nbclient, as nbconvert --execute and papermill run it) saves finished widgets.

The widgets defer work to just after the cell (a Dashboard's children, a HeadAtlas scan on the worker
thread, a Training scan of the checkpoints); in a kernel no one watches, every widget finishes its
pending work at the end of the cell (`CircuitWidget.finish`), so the widget state stored with the
notebook holds the pictures, never "computing". An interactive kernel (JupyterLab, which asks with allow_stdin) still defers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
CELLS = [
    "import circuitwidgets as cw\nmodel = cw.demo_model()\n"
    "dash = cw.Dashboard(model, prompt='the cat sat on the mat. the cat sat')\ndash",
    "texts = [cw.analysis.repeated_random_tokens(model, seq_len=12, batch=1, seed=s)[0].tolist() for s in range(6)]\n"
    "atlas = cw.HeadAtlas(model, texts=texts)\natlas",
    "training = cw.Training(cw.demo_checkpoints(), metrics=['induction'])\ntraining",
    "print(json.dumps({'busy': [w.busy for w in (dash.head_scores, dash.attention, dash.composition, atlas)], "
    "'scanned': atlas.scan['done'], 'texts': atlas.scan['total'], 'training': training.scan_state}))",
]


def test_an_executed_notebook_stores_finished_widgets_with_no_busy_text(tmp_path, monkeypatch):
    cells = [nbformat.v4.new_code_cell(c) for c in ["import json", *CELLS]]
    nb = nbformat.v4.new_notebook(cells=cells)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    client = NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    printed = json.loads(nb.cells[-1].outputs[0]["text"])
    # (before the print: the cells' ends finished them)
    assert printed == {"busy": [False] * 4, "scanned": 6, "texts": 6, "training": "done"}
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    ours = [entry["state"] for entry in state.values() if entry["state"].get("_cw_view")]
    assert len(ours) >= 6
    for widget in ours:
        assert widget.get("busy") is not True, widget["_cw_view"]
        progress = widget.get("progress") or {}
        assert not (progress.get("running") if isinstance(progress, dict) else progress), widget["_cw_view"]
        said = {k: v for k, v in widget.items() if isinstance(v, (str, dict)) and not k.startswith("_")}  # (not the bundle)
        assert "computing" not in json.dumps(said), widget["_cw_view"]
