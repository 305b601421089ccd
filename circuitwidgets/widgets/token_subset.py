"""`TokenSubsetWidget`: what `OVCircuit` and `QKCircuit` share, a layer's circuit on a token subset."""

from __future__ import annotations

from typing import Any, ClassVar

import traitlets

from ..model import CHOSEN
from .base import CircuitWidget, selector_facts


def subset_of(widget: CircuitWidget, name: str, value: list[int]) -> list[int]:
    """The validated token subset `value` of trait `name` (distinct ids in order; empty refused)."""
    if not value:
        raise ValueError(f"{name} is empty: give at least one token id")
    return widget.mv.token_subset(list(value))[0]


class TokenSubsetWidget(CircuitWidget):
    """A head's vocabulary-sized circuit drawn on a subset of tokens (rows and columns).

    The token subset comes from `ModelView.token_subset` (ids, token strings, or the distinct
    tokens of a prompt; by default the whole small vocabulary or 40 tokens at random, seed 0).
    Every head of the layer is sent at once, so a head switch happens in the browser.

    """

    controls: ClassVar[tuple[str, ...]] = ("tokens",)
    inputs: ClassVar[tuple[str, ...]] = ("layer", "tokens")  # a head switch happens in the browser
    weights_only = True  # OV and QK circuits: the weights alone

    tokens = traitlets.List(traitlets.Int(), help="token ids of the rows and columns").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings (ids without a tokenizer)").tag(sync=True)
    token_criterion = traitlets.Unicode("", help="how the tokens were chosen, shown in the widget").tag(sync=True)
    info = traitlets.Dict(help="model facts for the controls").tag(sync=True)

    def __init__(self, model: Any, layer: int, head: int, tokens: Any, prompt: str | None, **kwargs: Any) -> None:
        super().__init__(model, layer=layer, head=head, **kwargs)
        mv = self.mv
        ids, criterion = mv.token_subset(tokens, prompt)
        self.info = {**selector_facts(mv), "d_head": mv.d_head, "d_vocab": mv.d_vocab, "n_ctx": mv.n_ctx}
        self._set(tokens=ids, token_criterion=criterion)

    def _check_tokens(self, value: list[int]) -> list[int]:
        return subset_of(self, "tokens", value)

    def _input_changed(self, name: str) -> None:
        if name == "tokens":
            self._set(token_criterion=CHOSEN)

    def _labels(self) -> list[str]:
        """Token strings of the subset, set on the widget and returned for the payload."""
        self._set(str_tokens=self.mv.token_strings(list(self.tokens)))
        return self.str_tokens

    def _caption(self, *notes: str) -> str:
        """What the circuit leaves out or folds in, shown under the heatmap."""
        parts = ["Token embeddings only: positions and biases left out.", *notes, self.mv.norm_note]
        return " ".join(part for part in parts if part)
