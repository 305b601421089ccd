# circuitwidgets — set-up, tests, demo and benchmarks. Every target sets up what it needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch must be installed before anything can pull a CUDA build.
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install lint test test-py test-js test-tl2 chromium demo report bench bundle train-demo clean

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# TransformerLens 2.x (HookedTransformer) cannot share a venv with TransformerLens 4: tests/tl2
# run in their own. transformer-lens 2.x pins numpy<2, and datasets>=4 / pyarrow>=19 need numpy 2.
VENV_TL2 ?= .venv-tl2
PY_TL2 := $(VENV_TL2)/bin/python
TL2_PINS := 'transformer-lens>=2,<3' 'datasets<4' 'pyarrow<19'

$(VENV_TL2)/.installed: pyproject.toml
	python3 -m venv $(VENV_TL2)
	$(PY_TL2) -m pip install -q --upgrade pip
	$(PY_TL2) -m pip install -q $(TORCH_PIN)
	$(PY_TL2) -m pip install -q $(TORCH_PIN) $(TL2_PINS) -e . 'pytest>=8' 'hypothesis>=6.100'
	touch $@

test-tl2: $(VENV_TL2)/.installed
	$(PY_TL2) -m pytest tests/tl2

chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# esbuild, for rebuilding the bundle (tests/test_bundle.py checks the committed one is current).
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

bundle: node_modules/.package-lock.json
	node js/build.mjs

test-js: node_modules/.package-lock.json
	node --test js/tests/

test-py: install chromium node_modules/.package-lock.json
	$(PY) -m pytest

# ruff (Python style and bugs), mypy (types of the model adapter, analysis and transport), biome (js/).
lint: install node_modules/.package-lock.json
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	npm run --silent lint

test: lint test-js test-py test-tl2

report: install
	$(PY) -m circuitwidgets report

# JupyterLab on the example notebooks (Ctrl-C to stop); the report is printed first.
demo: report
	$(VENV)/bin/jupyter lab --notebook-dir=example_notebooks

bench: install chromium node_modules/.package-lock.json
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m pip install -q circuitsvis --no-deps
	$(PY) benchmarks/run_all.py

train-demo: install
	$(PY) -m circuitwidgets.demo.train

clean:
	rm -rf $(VENV) $(VENV_TL2) .pytest_cache
