"""The first code cell of every example notebook: installs circuitwidgets where it is missing.

Plain Python (no ``%pip``), so that it runs in any kernel and in a test (`tests/test_wheel.py` runs it
in a clean venv). `python tests/install_cell.py` writes it into every notebook of example_notebooks/.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The extra a notebook needs beyond the package (its file name's start -> the extra).
EXTRAS = {"07_": "[nnsight]"}

TEMPLATE = '''# Install circuitwidgets where it is missing (Colab, a fresh environment); a no-op where it is installed.
# Before its first release on PyPI, build the wheel (`make dist`: dist/circuitwidgets-*.whl) and put it
# beside this notebook (in Colab: the Files panel, /content): this cell installs that wheel.
import importlib.util
import subprocess
import sys
from pathlib import Path

if importlib.util.find_spec("circuitwidgets") is None:

    def pip_install(*args):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], check=True)

    if importlib.util.find_spec("torch") is None:  # the CPU build (pip's default on Linux is a CUDA build of several GB)
        pip_install("torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu")
    wheels = sorted(Path.cwd().glob("circuitwidgets-*.whl"))
    try:
        pip_install(f"{wheels[-1]}EXTRA" if wheels else "circuitwidgetsEXTRA")
    except subprocess.CalledProcessError:
        raise RuntimeError(
            "circuitwidgets could not be installed: before its first release on PyPI, put the wheel that "
            "`make dist` builds (dist/circuitwidgets-*.whl) beside this notebook and run this cell again"
        ) from None
    importlib.invalidate_caches()

try:  # in Colab, enable third-party widgets (circuitwidgets is one)
    from google.colab import output
except ImportError:
    pass  # not in Colab
else:
    output.enable_custom_widget_manager()'''


def install_cell(notebook: str) -> str:
    """The install cell of notebook file `notebook` (its extra filled in)."""
    extra = next((e for start, e in EXTRAS.items() if notebook.startswith(start)), "")
    return TEMPLATE.replace("EXTRA", extra)


def write(folder: Path) -> None:
    import nbformat

    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        first.source = install_cell(path.name)
        first.outputs, first.execution_count = [], None
        nbformat.write(nb, path)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "example_notebooks")
