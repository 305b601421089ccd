"""Browser-test helpers shared by every widget: Debian's Chromium through Playwright, a real
JupyterLab server, notebooks opened and run in it, exported pages opened from disk offline.

Never `playwright install`: the tests drive /usr/bin/chromium (`make chromium` installs it).
The fixtures in `conftest.py` wrap these: ``lab`` (one JupyterLab server per session, on a free
port, serving a temporary copy of ``example_notebooks/``), ``browser`` (one Chromium per
session) and ``page`` (a fresh tab per test).

A widget view marks its root element (``.cw-root``) with ``data-cw-draws`` (incremented on every
draw) and ``data-cw-kind``, so a test can wait for "drawn again" without sleeping.

Example (inside a test)::

    def test_drawn(lab, page):
        nb = open_notebook(page, lab, "01_attention_patterns.ipynb")
        run_all(page)
        root = page.locator(".cw-root[data-cw-kind=attention]").first
        wait_drawn(root)
        assert canvas_stats(root.locator(".cw-heatmap-canvas"))["colours"] > 10
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: URL schemes an exported page may load: itself, and what it makes from its own bytes.
OFFLINE_SCHEMES = ("file:", "data:", "blob:")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def chromium_context(playwright, **options):
    """A fresh Chromium profile (its own user-data-dir), closed on exit."""
    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"{CHROMIUM} is missing: run `make chromium` (apt-get install chromium)")
    options.setdefault("viewport", {"width": 1280, "height": 900})
    with tempfile.TemporaryDirectory(prefix="cw-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, accept_downloads=True, **options
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class Lab:
    """A running JupyterLab server: its URL, token and the folder it serves."""

    base: str
    token: str
    root: Path
    log: Path

    def url(self, path: str = "") -> str:
        return f"{self.base}/lab/tree/{path}?token={self.token}&reset"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@contextmanager
def jupyter_lab(root_dir: Path, timeout: float = 90.0):
    """Start `jupyter lab` from this environment on a free port, serving `root_dir`; yields a `Lab`.

    Its config, runtime, settings and workspaces live in a temporary folder, so the user's own
    Jupyter set-up plays no part, and the server is stopped (and that folder removed) on exit.
    """
    port = free_port()
    token = secrets.token_hex(16)
    runtime = Path(tempfile.mkdtemp(prefix="cw-jupyter-"))
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(runtime / "runtime"),
        JUPYTER_CONFIG_DIR=str(runtime / "config"),
        JUPYTER_DATA_DIR=str(runtime / "data"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.pop("JUPYTER_PATH", None)
    # The kernel runs this interpreter, with the repository importable.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
        f"--ServerApp.token={token}", f"--ServerApp.root_dir={root_dir}",
        f"--LabApp.workspaces_dir={runtime / 'workspaces'}", f"--LabApp.user_settings_dir={runtime / 'settings'}",
        "--ServerApp.open_browser=False", "--allow-root", "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--MappingKernelManager.cull_idle_timeout=0",
    ]
    # No "get notified about Jupyter news?" toast over the page.
    labconfig = runtime / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with serve(cmd, f"{base}/api/status?token={token}", runtime / "server.log", env=env, cwd=root_dir, timeout=timeout):
            yield Lab(base, token, Path(root_dir), runtime / "server.log")
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


@contextmanager
def serve(cmd: list[str], ready_url: str, log_path: Path, *, env: dict, cwd: Path, timeout: float):
    """Run server command `cmd` (output to `log_path`) until `ready_url` answers 200; stop it on exit.

    Raises RuntimeError, with the log's tail, when the server exits early or does not answer
    within `timeout` seconds. The server is terminated (killed if it lingers) however the block ends.
    """
    name = cmd[2] if cmd[1:2] == ["-m"] else cmd[0]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited early:\n{log_path.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(ready_url, timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not answer within {timeout}s:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.2)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a notebook of code cells (Python 3 kernel) to `path`; returns the path."""
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src} for src in cells],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


# ----- notebooks in JupyterLab --------------------------------------------------------------

def open_notebook(page, lab: Lab, path: str, timeout: float = 60_000):
    """Open notebook `path` (relative to the served folder) and wait for its kernel to be idle."""
    page.goto(lab.url(path))
    page.locator(".jp-Notebook").first.wait_for(timeout=timeout)
    # A notebook saved without kernel metadata asks which kernel to start: take the default.
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    try:
        dialog.wait_for(timeout=1500)
        dialog.get_by_role("button", name="Select").click()
    except Exception:  # no dialog: the notebook names its kernel
        pass
    page.locator(".jp-Notebook-ExecutionIndicator[data-status=idle]").first.wait_for(state="attached", timeout=timeout)
    wait_kernel_idle(page, timeout)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first


def wait_kernel_idle(page, timeout: float = 60_000) -> None:
    """Wait until the open notebook's kernel reports idle and no cell shows ``[*]``."""
    page.wait_for_function(
        """() => {
          const panel = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden)");
          if (!panel) return false;
          const prompts = [...panel.querySelectorAll(".jp-InputArea-prompt")];
          if (prompts.some((p) => p.textContent.includes("*"))) return false;
          const ind = panel.querySelector(".jp-Notebook-ExecutionIndicator");
          return !ind || ind.dataset.status === "idle";
        }""",
        timeout=timeout,
    )


def _menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).first.click()


def run_all(page, timeout: float = 180_000) -> None:
    """Run every cell of the open notebook (Run > Run All Cells) and wait until it stops.

    It stops when every code cell has run, or at the first cell that raised (JupyterLab runs
    no further): check the outputs for errors (`error_outputs`).
    """
    _menu(page, "Run", "Run All Cells")
    page.wait_for_function(
        """() => {
          const panel = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden)");
          const prompts = [...panel.querySelectorAll(".jp-CodeCell .jp-InputArea-prompt")].map((p) => p.textContent);
          if (!prompts.length || prompts.some((p) => p.includes("*"))) return false;
          const errored = panel.querySelector(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']");
          return errored || prompts.every((p) => /\\[\\d+\\]/.test(p));
        }""",
        timeout=timeout,
    )
    wait_kernel_idle(page, timeout)


def error_outputs(page) -> list[str]:
    """Text of every error output (a traceback) in the open notebook."""
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    return [o.inner_text() for o in panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']").all()]


def start_code(page, code: str):
    """Add a code cell at the end of the open notebook and start running `code`; returns the cell.

    Does not wait: the kernel may still be busy with it when this returns.
    """
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
    count = cells.count()
    cells.last.locator(".jp-InputArea-prompt").click()  # select the last cell (command mode)
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # insert a cell below and select it
    cell = cells.nth(count)  # Shift+Enter on it adds another empty cell after it
    cell.locator(".cm-content").click()
    page.keyboard.insert_text(code)
    page.keyboard.press("Shift+Enter")
    return cell


def run_code(page, code: str, timeout: float = 60_000):
    """Add a code cell at the end of the open notebook, run `code` in it, return its output area.

    The kernel is the notebook's own, so `code` sees the notebook's variables, and a widget it
    leaves as the cell's value is displayed in that output area.
    """
    cell = start_code(page, code)
    cell.locator(".jp-InputArea-prompt", has_text=re.compile(r"\[\d+\]")).wait_for(timeout=timeout)
    wait_kernel_idle(page, timeout)
    return cell.locator(".jp-OutputArea")


# ----- exported pages -------------------------------------------------------------------------

def open_offline(page, path: Path, timeout: float = 30_000) -> list[str]:
    """Open an exported HTML file from disk with every non-file request aborted.

    Returns the list (updated as the page runs) of every URL the page asked for; the caller can
    assert that none is http(s). Aborted requests are in it too.
    """
    requested: list[str] = []

    def route(r):
        url = r.request.url
        requested.append(url)
        if url.startswith(OFFLINE_SCHEMES):
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.goto(Path(path).resolve().as_uri())
    page.locator(".cw-root").first.wait_for(timeout=timeout)
    return requested


def network_urls(requested: list[str]) -> list[str]:
    """The URLs in `requested` that would have gone to the network."""
    return [u for u in requested if not u.startswith(OFFLINE_SCHEMES)]


# ----- pixels and draws -------------------------------------------------------------------------

CANVAS_STATS = """(canvas) => {
  const ctx = canvas.getContext("2d");
  const {width, height} = canvas;
  const data = ctx.getImageData(0, 0, width, height).data;
  let painted = 0, hash = 0;
  const colours = new Set();
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] > 0) {
      painted++;
      colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    }
    hash = (hash * 31 + data[i] + 7 * data[i + 1] + 13 * data[i + 2] + 17 * data[i + 3]) >>> 0;
  }
  return {painted, total: width * height, colours: colours.size, hash, width, height};
}"""


def canvas_stats(locator) -> dict:
    """Pixel facts of a canvas: ``painted`` (non-transparent pixels), ``colours`` (distinct RGB
    values among them), ``hash`` (changes when the picture does), ``width``, ``height``."""
    return locator.evaluate(CANVAS_STATS)


def draws(root) -> int:
    """How many times the widget at `root` (a ``.cw-root`` locator) has drawn."""
    return int(root.get_attribute("data-cw-draws") or 0)


def wait_drawn(root, above: int = 0, timeout: float = 30_000) -> int:
    """Wait until the widget at `root` has drawn more than `above` times; returns the count."""
    root.wait_for(timeout=timeout)
    handle = root.element_handle()
    handle.wait_for_element_state("visible", timeout=timeout)
    root.page.wait_for_function("([el, n]) => Number(el.dataset.cwDraws || 0) > n", arg=[handle, above], timeout=timeout)
    return draws(root)


def wait_attr(root, name: str, value: str, timeout: float = 30_000) -> None:
    """Wait until attribute `name` of `root` equals `value`."""
    handle = root.element_handle()
    root.page.wait_for_function(
        "([el, name, v]) => el.getAttribute(name) === v", arg=[handle, name, value], timeout=timeout
    )


def cell_centre(heatmap, row: int, col: int) -> tuple[float, float]:
    """Page coordinates of the centre of cell (row, col) of a ``.cw-heatmap`` locator, scrolled into view."""
    canvas = heatmap.locator(".cw-heatmap-canvas")
    canvas.scroll_into_view_if_needed()
    layout = canvas.evaluate("(c) => c.cwScene.layout")
    box = heatmap.locator(".cw-heatmap-overlay").bounding_box()
    return box["x"] + layout["left"] + (col + 0.5) * layout["cell"], box["y"] + layout["top"] + (row + 0.5) * layout["cell"]


def watched_page(browser):
    """A new tab whose page errors and dialogs (dismissed) are collected in ``page.cw_errors``."""
    page = browser.new_page()
    page.cw_errors = []
    page.on("pageerror", lambda exc: page.cw_errors.append(str(exc)))
    page.on("dialog", lambda d: (page.cw_errors.append(f"dialog: {d.message}"), d.dismiss()))
    return page


PIXEL = """(canvas, [row, col]) => {
  const {left, top, cell} = canvas.cwScene.layout;
  const k = canvas.width / canvas.getBoundingClientRect().width;
  const x = Math.floor((left + (col + 0.5) * cell) * k), y = Math.floor((top + (row + 0.5) * cell) * k);
  const d = canvas.getContext("2d").getImageData(x, y, 1, 1).data;
  return [d[0], d[1], d[2], d[3]];
}"""


def cell_pixel(root, row: int, col: int) -> tuple:
    """RGBA at the centre of heatmap cell (row, col) of the widget at `root`, read from its canvas."""
    return tuple(root.locator(".cw-heatmap-canvas").element_handle().evaluate(PIXEL, [row, col]))
