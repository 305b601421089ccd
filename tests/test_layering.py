"""The layers of design.md hold: widgets hold no maths, analysis knows no hook names, views stand alone."""

from __future__ import annotations

import ast
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
    # nor in a string it builds one from: sites are protocol words ("z", "q", ...) that the backends map
    assert not [s for s in strings_in(path) if re.search(r"hook_\w+|blocks\.|\.attn\.", s)]


def strings_in(path: Path) -> list[str]:
    """The string constants of `path`'s code (docstrings left out: they may show a hook point's name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def imported_modules(path: Path, package: str) -> set[str]:
    """The absolute names of the modules `path` (a module of `package`) imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = f"{base}.{node.module}" if base and node.module else (node.module or base)
            names |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return names


ABOVE_THE_MODEL = sources(PACKAGE / "analysis") + sources(PACKAGE / "widgets")


@pytest.mark.parametrize("path", ABOVE_THE_MODEL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_analysis_and_widgets_reach_the_backends_only_through_the_model_view(path):
    package = f"circuitwidgets.{path.parent.name}"
    backends = [m for m in imported_modules(path, package) if m.startswith("circuitwidgets.backends")]
    assert not backends, f"{path.name} imports {backends}: ask the ModelView (circuitwidgets.model)"


@pytest.mark.parametrize("path", sources(VIEWS, "*.js"), ids=lambda p: p.name)
def test_no_view_imports_another_view(path):
    imports = re.findall(r"""^\s*import\b[^'"]*['"]([^'"]+)['"]""", path.read_text(encoding="utf-8"), re.M)
    assert imports, "a view imports the shared lib"
    assert not [i for i in imports if i.startswith("./") and i.endswith(".js")], imports


# ----- the README's module table and layer figure tell the truth ---------------------------------------------------
README = PACKAGE.parent / "README.md"


def _package_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## What is in the package", 1)[1].split("### Analysis API", 1)[0]


def test_the_readme_names_every_module_of_the_package_and_every_backend_module():
    section = _package_section()
    top = {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__")}
    top |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    missing = [name for name in sorted(top) if f"`circuitwidgets.{name}`" not in section]
    assert not missing, f"the README's module table lacks {missing}"
    backends_row = next(line for line in section.splitlines() if line.startswith("| `circuitwidgets.backends`"))
    files = [p.name for p in (PACKAGE / "backends").glob("*.py") if p.name != "__init__.py"]
    assert not [f for f in files if f"`{f}`" not in backends_row], "the README's backends row lacks some of " + str(files)


def test_the_readme_layer_figure_is_the_import_contract():
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    layers = [" | ".join(m.strip().removeprefix("circuitwidgets.") for m in layer.split("|")) for layer in contract["layers"]]
    figure = _package_section().split("```", 2)[1].splitlines()[2:]  # (after the header line)
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in figure if line.strip()]
    assert drawn == layers
