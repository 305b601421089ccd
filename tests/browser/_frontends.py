"""Notebook 7 and Voila servers for the browser tests (see `_harness.py` for the rest).

Both run this interpreter with the repository importable, on a free localhost port, with no
token or password, their Jupyter config, data and runtime folders in a temporary folder (the
user's own Jupyter set-up plays no part), and are stopped however the block ends; a server that
exits early or does not answer in time raises with its log's tail.

Example::

    with jupyter_notebook(folder) as nb:
        page.goto(nb.url("demo.ipynb"))
    with voila(folder / "demo.ipynb") as app:
        page.goto(app.url())
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _harness import free_port, serve

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    """A running server: its base URL, the path of a notebook under it, and its log."""

    base: str
    prefix: str
    log: Path

    def url(self, path: str = "") -> str:
        return f"{self.base}{self.prefix}{path}"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _jupyter_env(home: Path) -> dict:
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.pop("JUPYTER_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    # No "get notified about Jupyter news?" toast over the page.
    labconfig = home / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    return env


@contextmanager
def jupyter_notebook(root_dir: Path, timeout: float = 90.0):
    """Start Notebook 7 (``jupyter notebook``) serving `root_dir`; yields a `Server` whose
    ``url(path)`` opens notebook `path` (relative to `root_dir`)."""
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="cw-notebook-"))
    env = _jupyter_env(home)
    cmd = [
        sys.executable, "-m", "notebook", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
        "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.open_browser=False", "--allow-root",
        "--MappingKernelManager.cull_idle_timeout=0",
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        with serve(cmd, f"{base}/api/status", home / "server.log", env=env, cwd=root_dir, timeout=timeout):
            yield Server(base, "/notebooks/", home / "server.log")
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def voila(notebook: Path, timeout: float = 90.0):
    """Start ``voila <notebook>`` (it runs the notebook for each page load); yields a `Server`
    whose ``url()`` is the rendered page."""
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="cw-voila-"))
    env = _jupyter_env(home)
    cmd = [
        sys.executable, "-m", "voila", str(notebook), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
        "--VoilaConfiguration.show_tracebacks=True",  # a cell that raises shows why
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        # A static file: asking for the page itself would start a kernel and run the notebook.
        ready = f"{base}/voila/labextensions/@voila-dashboards/widgets-manager8/package.json"
        with serve(cmd, ready, home / "server.log", env=env, cwd=notebook.parent, timeout=timeout):
            yield Server(base, "/", home / "server.log")
    finally:
        shutil.rmtree(home, ignore_errors=True)
