"""The demo dictionary: a sparse autoencoder trained by this project on the two-layer demo model, shipped with it.

A top-k autoencoder on ``blocks.1.hook_resid_pre`` (what the induction heads read), trained by
``python -m circuitwidgets.demo.train_sae`` (`circuitwidgets.demo.train_sae`; ``make train-demo-sae``). Its card
(``dictionary_card.json``: recipe, variance explained, L0, what its features are) is `dictionary_card`; its
features are labelled ("current token = 'a'", "previous token = 'a'", "position 3-7").

Example:
    >>> import circuitwidgets as cw
    >>> sae = cw.demo_dictionary()
    >>> sae.hook_name, sae.activation, sae.d_in
    ('blocks.1.hook_resid_pre', 'topk', 64)
    >>> dictionary_card()["metrics"]["variance_explained"] > 0.9
    True
"""

from __future__ import annotations

import json
from typing import Any

from ..dictionary import Dictionary
from ._files import DEMO_DIR

DICTIONARY_FILE = DEMO_DIR / "dictionary.safetensors"
CARD_FILE = DEMO_DIR / "dictionary_card.json"


def demo_dictionary() -> Dictionary:
    """The demo dictionary, loaded offline (a new `Dictionary` each call: editing one never changes another's)."""
    if not DICTIONARY_FILE.is_file():
        raise FileNotFoundError(f"{DICTIONARY_FILE} is missing; run python -m circuitwidgets.demo.train_sae")
    return Dictionary.load(DICTIONARY_FILE)


def dictionary_card() -> dict[str, Any]:
    """The demo dictionary's card (``dictionary_card.json``)."""
    return json.loads(CARD_FILE.read_text())
