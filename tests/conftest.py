"""Suite-wide set-up: shared fixtures; the TransformerLens 2.x tests only where it is.

Fixtures: `planted` is tests/planted.py's ``(model, heads)``, `planted_words` the same with a word
tokenizer, `demo` the trained demo model, each built once per test module (tests that change a
model's weights build their own); `tiling` runs a test under each tiling of the vocabulary-sized
passes (`circuitwidgets.row_maxima`). Small random models come from tests/factories.py. Browser tests
may run in any order among the others: their Playwright loop lives for one module at a time
(tests/browser/conftest.py).

tests/tl2 needs TransformerLens 2.x's `HookedTransformer`, which TransformerLens 4 removed; it
runs in its own environment (`make test-tl2`, part of `make test`).
"""

from __future__ import annotations

import contextlib

import pytest

try:
    from transformer_lens import HookedTransformer  # noqa: F401
except ImportError:
    collect_ignore = ["tl2"]

# Importing nnsight (tests/test_hf_backend.py) mounts a `save` attribute on every Python object,
# which breaks the dataclasses marimo defines on import (its config has a field named `save`).
# In a marimo notebook marimo is always imported first; here, make it so too.
with contextlib.suppress(ImportError):  # (not in the TransformerLens 2.x environment, which has no nnsight either)
    import marimo  # noqa: F401


@pytest.fixture(scope="module")
def planted():
    """``(model, heads)``: the hand-built model with a planted previous-token and induction head."""
    from planted import planted_model

    return planted_model()


@pytest.fixture(scope="module")
def planted_words():
    """`planted`'s model with a word tokenizer (token i is the word "t{i}"), for prompts."""
    from planted import planted_model, word_tokenizer

    model, heads = planted_model()
    model.tokenizer = word_tokenizer()
    return model, heads


@pytest.fixture(scope="module")
def demo():
    """The trained two-layer demo model (`circuitwidgets.demo_model()`)."""
    import circuitwidgets as cw

    return cw.demo_model()


# The tilings the row-maximum passes can take: the default; tiny tiles, segments and units in worker threads
# (as GPT-2's vocabulary is cut, on a vocabulary of ~1 500); one product per block over every column (the CUDA path).
TILINGS = {
    "default": {},
    "tiny_tiles_in_threads": dict(TILE_ENTRIES=3000, TILE_ROWS=24, SEGMENT=16, PARALLEL_ENTRIES=0),
    "small_tiles_in_threads": dict(TILE_ENTRIES=2**16, TILE_ROWS=128, PARALLEL_ENTRIES=0),
    "device_path": dict(_tiled=lambda device: False),
}


@pytest.fixture(params=sorted(TILINGS))
def tiling(request, monkeypatch):
    from circuitwidgets import row_maxima

    for name, value in TILINGS[request.param].items():
        monkeypatch.setattr(row_maxima, name, value)
    return request.param
