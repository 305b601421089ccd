"""What running the example notebooks writes stays out of git: every file they save is ignored."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def saved_names() -> set[str]:
    """The relative file names the example notebooks write (``save_html("x.html")``, ``.save("x.pt")``, ``open(..., "w")``)."""
    names = set()
    for notebook in (ROOT / "example_notebooks").glob("*.ipynb"):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            names |= set(re.findall(r"""(?:save_html|\.save|export_html)\(\s*["']([^"'/]+)["']""", source))
    return names


def test_every_file_the_notebooks_save_is_ignored_by_git():
    names = saved_names()
    assert "head_scan.pt" in names and any(n.endswith(".html") for n in names)
    for name in sorted(names):
        path = f"example_notebooks/{name}"
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0
        assert ignored, f"{path}, which a notebook writes, is not ignored by git"
