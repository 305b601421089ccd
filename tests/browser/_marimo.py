"""A marimo app served by ``marimo run`` for the browser tests (see `_harness.py` for the rest).

Example::

    with marimo_run(Path("tests/browser/marimo_app.py")) as app:
        page.goto(app.url)
"""

from __future__ import annotations

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
class MarimoApp:
    """A running ``marimo run`` server: its URL and its log."""

    url: str
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@contextmanager
def marimo_run(app: Path, timeout: float = 60.0):
    """Serve a copy of the marimo app file `app` with ``marimo run`` on a free localhost port.

    The copy, marimo's config, cache and state live in a temporary folder (the user's own marimo
    set-up plays no part, nothing is written into the repository); the server runs this
    interpreter with the repository importable and is stopped (the folder removed) on exit.
    Yields a `MarimoApp` once ``/health`` answers.
    """
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="cw-marimo-"))
    shutil.copy(app, home / "app.py")
    env = dict(os.environ, MARIMO_SKIP_UPDATE_CHECK="1")
    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        env[name] = str(home / name.lower())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable, "-m", "marimo", "run", "app.py", "--headless", "--host", "127.0.0.1",
        "--port", str(port), "--no-token", "--no-sandbox", "--no-check",
    ]
    url = f"http://127.0.0.1:{port}"
    try:
        with serve(cmd, f"{url}/health", home / "server.log", env=env, cwd=home, timeout=timeout):
            yield MarimoApp(f"{url}/", home / "server.log")
    finally:
        shutil.rmtree(home, ignore_errors=True)
