"""No import circle among the modules of circuitwidgets: module-level imports and those inside functions alike.

Each module's imports are read from its source (an ast walk: every ``import`` and ``from ... import``
anywhere in the file, relative ones resolved). ``from package import name`` points at the submodule
``package.name`` when there is one, else at the package itself. A package is not counted as
imported by its own submodules (Python runs its ``__init__`` first, but that is no circle of ours).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "circuitwidgets"
ROOT = PACKAGE.name


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "static" not in p.parts}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of the package that `path` (module `name`) imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    paths = modules()
    known = set(paths)
    return {name: imports_of(name, path, known) for name, path in paths.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_reader_sees_module_level_and_function_local_imports():
    edges = graph()
    assert "circuitwidgets.widgets._contract" in edges["circuitwidgets.widgets.base"]  # module level, relative
    assert "circuitwidgets.demo._files" in edges["circuitwidgets.demo.hf_models"]  # inside a function
    assert "circuitwidgets.analysis" in edges["circuitwidgets.widgets._cache"]  # a name the package hands on
    assert "circuitwidgets.transport" in edges["circuitwidgets.widgets.base"]  # `from .. import transport`


def test_a_circle_is_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_circuitwidgets_imports_itself_through_others():
    found = circles(graph())
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)
