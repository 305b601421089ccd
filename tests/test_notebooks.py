"""Every example notebook executes top to bottom (nbclient, a fresh kernel of this interpreter).

The notebooks run in a temporary copy of example_notebooks/, so the files they write (exported
HTML pages) stay out of the repository. A notebook added to the folder is tested automatically.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from install_cell import install_cell
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "example_notebooks").glob("*.ipynb"))


def test_there_are_example_notebooks():
    assert any(nb.name.startswith("01_attention") for nb in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_opens_with_the_install_cell(path):
    """Each notebook installs what it needs where it is missing (Colab), with the one cell that
    tests/test_wheel.py runs in a clean venv (`python tests/install_cell.py` writes it)."""
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == install_cell(path.name)
    compile(first.source, path.name, "exec")  # plain Python: no magics


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    for item in path.parent.iterdir():
        if item.is_file():
            shutil.copy(item, tmp_path / item.name)
    nb = nbformat.read(tmp_path / path.name, as_version=4)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    # The "python" of the stock kernel spec is started as this interpreter (jupyter_client does that).
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    # Each notebook shows something: at least one cell has a widget or text output.
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{path.name} produced no output"
