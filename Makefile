# circuitwidgets — set-up, tests, demo and benchmarks. Every target sets up what it needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch must be installed before anything can pull a CUDA build.
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install lint test test-py test-js test-tl2 chromium demo report pages test-pages bench bundle screenshots train-demo train-demo-sae dist clean

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
# SAELens (tests/tl2/test_sae_lens_tl2.py) needs transformer-lens < 4 too; torch stays pinned on the same line.
VENV_TL2 ?= .venv-tl2
PY_TL2 := $(VENV_TL2)/bin/python
TL2_PINS := 'transformer-lens>=2,<3' 'datasets<4' 'pyarrow<19' 'sae-lens==6.54.12'

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

# ruff (Python style and bugs), mypy (types of the backends, views, analysis, transport and widgets),
# lint-imports (the layers of design.md: pyproject.toml [tool.importlinter]), biome (js/).
lint: install node_modules/.package-lock.json
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	npm run --silent lint

test: lint test-js test-py test-tl2

report: install
	$(PY) -m circuitwidgets report

# JupyterLab on the example notebooks (Ctrl-C to stop); the report is printed first, then the URL
# to open. `make demo PORT=9999 HOST=0.0.0.0 ARGS='--ServerApp.base_url=/cw/'`: ARGS go to jupyter lab.
# As root (containers) it passes --allow-root, which JupyterLab requires there.
# The demo has a venv of its own with only what the notebooks need: the CPU torch, the package with
# its nnsight extra (notebook 7) and JupyterLab; the test extra (linters, browsers' drivers, marimo,
# voila...) stays with `make install` / `make test`.
PORT ?= 8888
HOST ?= 127.0.0.1
ARGS ?=
VENV_DEMO ?= .venv-demo
PY_DEMO := $(VENV_DEMO)/bin/python

$(VENV_DEMO)/.installed: pyproject.toml
	python3 -m venv $(VENV_DEMO)
	$(PY_DEMO) -m pip install -q --upgrade pip
	$(PY_DEMO) -m pip install -q $(TORCH_PIN)
	$(PY_DEMO) -m pip install -q $(TORCH_PIN) -e '.[nnsight]' 'jupyterlab>=4.2'
	touch $@

# JupyterLab runs its bundled yarn.js with Node at start-up; Node takes the module type from the
# nearest package.json, which is this repository's ("type": "module"), so it fails and prints 10 kB
# of minified JavaScript. A package.json in the venv says the venv's JavaScript is CommonJS.
# A server extension (voila) turns on traitlets' DeprecationWarnings, and jupyter-server itself reads
# its deprecated ServerApp.token: two lines of noise at start-up that DEMO_QUIET drops from stderr.
DEMO_QUIET := grep --line-buffered -v -e 'ServerApp.token config is deprecated' -e 'self._get_trait_default_generator(names'

$(VENV_DEMO)/package.json: $(VENV_DEMO)/.installed
	@echo '{"type": "commonjs"}' > $@

demo: $(VENV_DEMO)/.installed $(VENV_DEMO)/package.json
	$(PY_DEMO) -m circuitwidgets report
	@token=$$($(PY_DEMO) -c 'import secrets; print(secrets.token_hex(16))'); \
	if [ "$$(id -u)" = 0 ]; then root=--allow-root; else root=; fi; \
	echo; echo "JupyterLab on example_notebooks/ (Ctrl-C to stop). Open: http://$(HOST):$(PORT)/lab?token=$$token"; echo; \
	exec $(VENV_DEMO)/bin/jupyter lab --no-browser --ip=$(HOST) --port=$(PORT) --ServerApp.port_retries=0 \
		--IdentityProvider.token=$$token --ServerApp.log_level=WARN --LabApp.log_level=WARN \
		--notebook-dir=example_notebooks $$root $(ARGS) 2> >(trap '' INT; $(DEMO_QUIET) >&2)

# Every example notebook as one self-contained page (python -m circuitwidgets page --execute) in
# PAGES_DIR (default docs/pages): run in a copy of example_notebooks/, so the files they write stay out.
PAGES_DIR ?= docs/pages

pages: install
	@mkdir -p $(PAGES_DIR); tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp example_notebooks/*.ipynb "$$tmp"/; \
	for nb in "$$tmp"/*.ipynb; do \
		$(PY) -m circuitwidgets page "$$nb" --execute -o $(PAGES_DIR)/$$(basename "$$nb" .ipynb).html || exit 1; \
	done

# The page browser tests on every example notebook (the default run checks one): about 4 minutes.
test-pages: install chromium node_modules/.package-lock.json
	CW_PAGE_NOTEBOOKS=all $(PY) -m pytest tests/browser/test_page_browser.py -k 'works_offline or dashboard'

# The wheel and sdist into dist/ (what a release uploads), built from a copy of the tree in an
# isolated environment, as the release workflow does.
dist: $(PY)
	$(PY) -m pip install -q build
	rm -rf dist
	$(PY) -m build -q --outdir dist .
	@ls -1 dist/*

bench: install chromium node_modules/.package-lock.json
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m pip install -q circuitsvis --no-deps
	$(PY) benchmarks/run_all.py
	$(MAKE) test-ndif  # the real NDIF server on localhost (about 4 min from scratch): not in `make test`

# The README gallery: every widget in JupyterLab in Chromium (docs/screenshots/*.png).
screenshots: install chromium
	$(PY) docs/screenshots.py

# Retrain both shipped demo models (two-layer, then one-layer) and rewrite their cards and README tables.
train-demo: install
	$(PY) -m circuitwidgets.demo.train
	$(PY) -m circuitwidgets.demo.train_1l

# Retrain the demo dictionary (a top-k SAE on the two-layer demo model's blocks.1.hook_resid_pre) and its card.
train-demo-sae: install
	$(PY) -m circuitwidgets.demo.train_sae

clean:
	rm -rf $(VENV) $(VENV_TL2) $(VENV_DEMO) .pytest_cache

# A real NDIF server (PyPI ndif 0.1.2) on localhost, CPU only, serving a tiny random Llama (ndif_local/README.md),
# and circuitwidgets' tests against it (tests/ndif; not part of `make test`). Installs what is missing, as root:
# apt redis-server and the venv .venv-ndif (~1.7 GB); the server holds ~3.5 GB of memory while it runs.
# test-ndif starts it and stops it after (with NDIF_URL set: uses that server and leaves it running).
.PHONY: test-ndif ndif-start ndif-stop

ndif-start:
	bash ndif_local/start.sh

ndif-stop:
	bash ndif_local/stop.sh

test-ndif: install
	$(PY) -m pytest tests/ndif
