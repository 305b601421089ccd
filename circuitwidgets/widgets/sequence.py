"""`SequenceWidget`: what `AttentionPattern` and `LogitAttribution` share, one sequence run as a prompt or as ids."""

from __future__ import annotations

from typing import ClassVar

import traitlets

from .base import CircuitWidget


class SequenceWidget(CircuitWidget):
    """A widget that runs one sequence: `prompt` (text, tokenised with BOS) or `tokens` (ids).

    The picture comes from the one set last (`source`); both are checked when set, so a prompt
    the tokenizer cannot take or an id outside the vocabulary is refused with the last picture kept.
    """

    controls: ClassVar[tuple[str, ...]] = ("prompt", "tokens", "source")
    inputs: ClassVar[tuple[str, ...]] = ("prompt", "tokens", "source")

    prompt = traitlets.Unicode("", help="the text run; editing it in the widget re-runs the model").tag(sync=True)
    tokens = traitlets.List(traitlets.Int(), help="ids of the tokens run; set it to run token ids directly").tag(sync=True)
    source = traitlets.Enum(("prompt", "tokens"), "prompt", help="which of the two the picture comes from").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings (ids without a tokenizer)").tag(sync=True)

    def _check_prompt(self, value: str) -> str:
        self.mv.to_tokens(value)
        return value

    def _check_tokens(self, value: list[int]) -> list[int]:
        return self._sequence(value)

    def _check_source(self, value: str) -> str:
        if not getattr(self, value):
            raise ValueError(f"source={value!r}, but {value} is empty: set {value} instead")
        return value

    def _input_changed(self, name: str) -> None:
        if name in ("prompt", "tokens"):  # the picture now comes from the one set last
            self._set(source=name)
        if name == "tokens":  # the prompt box says what runs: the text of the ids, or nothing when none writes them
            self._set(prompt=self._prompt_text(list(self.tokens)))

    def _prompt_text(self, ids: list[int]) -> str:
        """The text whose tokens (BOS first) are exactly `ids`, or '' when there is none (ids no text gives back)."""
        mv = self.mv
        if mv.tokenizer is None or not ids:
            return ""
        bos = mv.bos_token_id
        body = ids[1:] if bos is not None and ids[0] == bos else ids
        try:
            text = mv.tokenizer.decode(body)
            again = mv.to_tokens(text)[0].tolist()
        except Exception:  # noqa: BLE001 - any tokenizer that cannot: no text
            return ""
        return text if again == ids else ""
