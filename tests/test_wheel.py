"""The wheel a stranger installs: built from this tree, installed into a clean venv (no editable
install, no Node on PATH, no repository on sys.path), it imports, carries its version, the built
frontend bundle and the demo weights, and a widget exported from it draws in Chromium.

The venv is made once per module (the `installed` fixture) in a temporary folder. torch==2.13.0
is installed into it first; the wheel is then installed by the example notebooks' install cell (run
from a folder holding the wheel, as a Colab user would before the first release), which keeps the
torch it finds (the test checks it: an unpinned one would be a multi-GB CUDA download). pip's wheel
cache makes a second run quicker. The wheel is dist/'s (`make dist`) when it is newer than every
file it is built from, else one built here with `pip wheel`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
from _harness import canvas_stats, chromium_context, network_urls, open_offline, wait_drawn  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from install_cell import install_cell  # noqa: E402

TORCH_PIN = "torch==2.13.0"
TUTORIAL = "09_tutorial_induction_heads.ipynb"
VERSION = re.search(r'^__version__ = "([^"]+)"', (REPO / "circuitwidgets" / "__init__.py").read_text(), re.M).group(1)

# Run by the venv's interpreter, from a folder outside the repository: what the installed package is.
PROBE = r"""
import json, sys
from importlib import metadata
from pathlib import Path

import torch

import circuitwidgets as cw

pkg = Path(cw.__file__).parent
out = Path(sys.argv[1])
page = cw.AttentionPattern(cw.demo_model(), prompt="abcabc").save_html(out / "attention.html")
print(json.dumps({
    "file": str(pkg),
    "version": cw.__version__,
    "torch": torch.__version__,
    "metadata_version": metadata.version("circuitwidgets"),
    "files": sorted(str(p.relative_to(pkg)) for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts),
    "direct_url": metadata.distribution("circuitwidgets").read_text("direct_url.json"),
    "page": str(page),
}))
"""


def _sources() -> list[Path]:
    """The files a wheel is built from."""
    files = [REPO / "pyproject.toml", REPO / "README.md"]
    files += [p for p in (REPO / "circuitwidgets").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return files


def _wheel(tmp: Path) -> Path:
    """dist/'s wheel of this version when it is newer than its sources; else one built into `tmp`."""
    built = REPO / "dist" / f"circuitwidgets-{VERSION}-py3-none-any.whl"
    if built.exists() and built.stat().st_mtime > max(p.stat().st_mtime for p in _sources()):
        return built
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp), str(REPO)],
        check=True, timeout=600,
    )
    (wheel,) = tmp.glob("circuitwidgets-*.whl")
    return wheel


def _run(cmd: list, env: dict, cwd: Path, timeout: float = 900) -> str:
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    what = " ".join(map(str, cmd))
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(wheel, probe)``: the wheel, installed into a fresh venv, and what `PROBE` saw there."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = _wheel(tmp / "build")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    # Only the venv on PATH (no Node, no other Python); nothing of the repository or this venv.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PATH=str(venv / "bin"), VIRTUAL_ENV=str(venv), PYTHONNOUSERSITE="1")
    _run([py, "-m", "pip", "install", "-q", TORCH_PIN], env, tmp)
    # the wheel goes in as a notebook's install cell puts it (Colab before the first release): from beside the notebook
    content = tmp / "content"
    content.mkdir()
    (content / wheel.name).write_bytes(wheel.read_bytes())
    _run([py, "-c", install_cell(TUTORIAL)], env, content)
    out = tmp / "out"
    out.mkdir()
    probe = json.loads(_run([py, "-c", PROBE, out], env, out, timeout=300).strip().splitlines()[-1])
    return wheel, probe, venv


def test_the_notebooks_install_cell_installed_the_wheel_beside_it(installed):
    """What a Colab user does before the first release (the `installed` fixture did it): a runtime with
    torch and no circuitwidgets, the wheel put beside the notebook, the tutorial's first cell run; the
    package imports, the torch it had is kept, and the cell run again is a no-op."""
    _, probe, venv = installed
    assert probe["version"] == VERSION
    assert probe["torch"].split("+")[0] == TORCH_PIN.split("==")[1]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PATH=str(venv / "bin"), VIRTUAL_ENV=str(venv), PYTHONNOUSERSITE="1")
    content = venv.parent / "content"
    said = _run([venv / "bin" / "python", "-c", install_cell(TUTORIAL) + "\nprint('ran')"], env, content, timeout=120)
    assert said.strip() == "ran"


def test_installed_from_the_wheel_not_the_tree(installed):
    _, probe, venv = installed
    assert Path(probe["file"]).is_relative_to(venv), probe["file"]
    assert probe["direct_url"] is None or '"editable": true' not in probe["direct_url"]


def test_version_lives_in_one_place(installed):
    wheel, probe, _ = installed
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        wheel_version = re.search(r"^Version: (.+)$", zf.read(meta).decode(), re.M).group(1).strip()
    import circuitwidgets

    assert probe["version"] == probe["metadata_version"] == wheel_version == circuitwidgets.__version__ == VERSION


def test_wheel_carries_bundle_and_demo_weights(installed):
    _, probe, _ = installed
    files = set(probe["files"])
    for name in ("widgets/static/widgets.js", "widgets/static/widgets.css", "demo/weights.safetensors", "demo/model_card.json"):
        assert name in files, f"{name} missing from the installed package: {sorted(files)}"
    assert any(f.startswith("demo/tokenizer/") for f in files)
    pkg = Path(probe["file"])
    for name in ("widgets/static/widgets.js", "widgets/static/widgets.css"):
        assert (pkg / name).read_bytes() == (REPO / "circuitwidgets" / name).read_bytes(), f"{name} differs from the tree's"


def test_exported_widget_draws_in_chromium(installed):
    from playwright.sync_api import sync_playwright

    _, probe, _ = installed
    with sync_playwright() as p, chromium_context(p) as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        requested = open_offline(page, Path(probe["page"]))
        root = page.locator(".cw-root[data-cw-draws]").first
        assert wait_drawn(root) > 0
        stats = canvas_stats(root.locator(".cw-heatmap-canvas").first)
        assert stats["painted"] > 0 and stats["colours"] > 1, stats
        assert errors == []
        assert network_urls(requested) == []
