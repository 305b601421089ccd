"""The layers of design.md hold: widgets hold no maths, analysis knows no hook names, views stand alone."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "circuitwidgets"
VIEWS = PACKAGE.parent / "js" / "views"


def sources(folder: Path, pattern: str = "*.py") -> list[Path]:
    return sorted(folder.glob(pattern))


def code_only(path: Path) -> str:
    """The Python source without strings and comments (docstrings may name weights)."""
    skip = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return " ".join(t.string for t in tokens if t.type not in skip)


@pytest.mark.parametrize("path", sources(PACKAGE / "widgets"), ids=lambda p: p.name)
def test_widgets_never_touch_weights(path):
    code = code_only(path)
    assert not re.findall(r"\bW_(?:E|U|Q|K|V|O|pos)\b|\bb_(?:Q|K|V|O|U)\b|\bcfg\b|run_with_cache|\bmodel\.to_tokens\b", code)


@pytest.mark.parametrize("path", sources(PACKAGE / "analysis"), ids=lambda p: p.name)
def test_analysis_builds_no_hook_name(path):
    # which layer may import which is checked by `make lint` (lint-imports, pyproject [tool.importlinter])
    assert not re.findall(r"hook_\w+|run_with_cache|\bcfg\b", code_only(path))


@pytest.mark.parametrize("path", sources(VIEWS, "*.js"), ids=lambda p: p.name)
def test_no_view_imports_another_view(path):
    imports = re.findall(r"""^\s*import\b[^'"]*['"]([^'"]+)['"]""", path.read_text(encoding="utf-8"), re.M)
    assert imports, "a view imports the shared lib"
    assert not [i for i in imports if i.startswith("./") and i.endswith(".js")], imports
