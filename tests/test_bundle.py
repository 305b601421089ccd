"""The committed bundle (circuitwidgets/widgets/static/) must be current with js/.

`node js/build.mjs` writes a SHA-256 of every bundled js/ source into the first line of
widgets.js and widgets.css. The hash is recomputed here the same way, so a stale bundle fails
even without Node; with Node and esbuild installed (`npm ci`), a fresh build must also be
byte-identical to the committed one.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
JS = REPO / "js"
STATIC = REPO / "circuitwidgets" / "widgets" / "static"
BANNER = re.compile(r"sources-sha256: ([0-9a-f]{64})")


def bundled_sources() -> list[Path]:
    """The files build.mjs hashes: js/**/*.{js,mjs,css} outside js/tests and node_modules."""
    out = []
    for path in JS.rglob("*"):
        rel = path.relative_to(JS)
        if path.is_file() and re.search(r"\.(m?js|css)$", path.name) and not {"tests", "node_modules"} & set(rel.parts[:-1]):
            out.append(path)
    return sorted(out, key=lambda p: p.relative_to(JS).as_posix())


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in bundled_sources():
        digest.update(path.relative_to(JS).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@pytest.mark.parametrize("name", ["widgets.js", "widgets.css"])
def test_banner_matches_sources(name):
    first_line = (STATIC / name).read_text(encoding="utf-8").split("\n", 1)[0]
    match = BANNER.search(first_line)
    assert match, f"{name} has no sources-sha256 banner: rebuild with `make bundle`"
    assert match.group(1) == source_hash(), f"{name} is stale against js/: run `make bundle` and commit the result"


def test_hash_sees_every_view_and_lib_module():
    rels = {p.relative_to(JS).as_posix() for p in bundled_sources()}
    assert {"index.js", "style.css", "lib/decode.js", "views/attention.js"} <= rels
    assert not any(r.startswith("tests/") for r in rels)


def test_fresh_build_is_identical(tmp_path):
    node = shutil.which("node")
    if node is None or not (REPO / "node_modules" / "esbuild").exists():
        pytest.skip("node and node_modules/esbuild are needed for a fresh build (make bundle installs them)")
    subprocess.run([node, str(JS / "build.mjs"), "--out", str(tmp_path)], check=True, cwd=REPO, capture_output=True)
    for name in ("widgets.js", "widgets.css"):
        fresh, committed = (tmp_path / name).read_bytes(), (STATIC / name).read_bytes()
        assert fresh == committed, f"{name} differs from a fresh build: run `make bundle`"


def test_bundle_loads_nothing_from_the_network():
    js = (STATIC / "widgets.js").read_text(encoding="utf-8")
    urls = set(re.findall(r"https?://[^\s\"'`)]+", js))
    # The only URL allowed is the SVG namespace, which is an identifier, never fetched.
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert "import(" not in js.replace("await import(url)", ""), "the bundle must not import modules at run time"
