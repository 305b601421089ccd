"""Fixtures of the browser tests (see `_harness.py` for the helpers they stand on).

- ``lab`` (session): one JupyterLab server on a free localhost port, serving a temporary folder
  that holds a copy of every ``example_notebooks/*.ipynb`` (so running them writes nothing into
  the repository). Tests may add their own notebooks there with `_harness.write_notebook`.
- ``browser`` (module): one headless Debian Chromium (a Playwright persistent context) per test
  module. Playwright's sync API keeps its event loop marked as running in the main thread while
  it is started; it is stopped after each browser module, so no loop is left running for the
  tests that come after (kernel-side tests that own an asyncio loop may run in any order).
- ``page`` (function): a fresh tab in it, closed after the test; page errors are collected in
  ``page.cw_errors`` so a test can assert the page threw nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import chromium_context, jupyter_lab, watched_page  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "example_notebooks"


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lab")
    for nb in sorted(EXAMPLES.glob("*.ipynb")):
        shutil.copy(nb, root / nb.name)
    shutil.copy(REPO / "tests" / "planted.py", root / "planted.py")
    return root


@pytest.fixture(scope="session")
def lab(lab_root):
    with jupyter_lab(lab_root) as server:
        yield server


@pytest.fixture(scope="module")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"Playwright stopped but left {loop!r} running in the main thread")


@pytest.fixture(scope="module")
def browser(playwright_instance):
    with chromium_context(playwright_instance) as context:
        yield context


@pytest.fixture
def page(browser):
    tab = watched_page(browser)
    yield tab
    tab.close()
