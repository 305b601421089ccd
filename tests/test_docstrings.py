"""Every docstring example in the package runs and prints what it shows (doctest)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import circuitwidgets

# circuitwidgets.demo.train runs training when executed as a script, not on import: safe.
MODULES = ["circuitwidgets"] + sorted(m.name for m in pkgutil.walk_packages(circuitwidgets.__path__, "circuitwidgets."))


def test_modules_found():
    assert "circuitwidgets.analysis.copying" in MODULES and len(MODULES) > 20


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see the output above)"
