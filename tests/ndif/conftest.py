"""tests/ndif runs against a real NDIF server on this machine (`make test-ndif`), never in the main suite.

A plain ``pytest`` (or ``pytest tests``) leaves this folder out, as tests/conftest.py leaves out
tests/tl2 where TransformerLens 2.x is missing; ``pytest tests/ndif`` (or a file or test in it) runs it.
The server: ndif_local/start.sh, started by the `ndif` fixture (tests/ndif/test_ndif_server.py) unless
NDIF_URL names one already running.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path, config):
    asked = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    if not any(path == HERE or HERE in path.parents for path in asked):
        return True
    return None
