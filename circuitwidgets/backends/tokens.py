"""One tokenizer adapter for every backend: prompts to ids, ids to strings, validation and token subsets.

TransformerLens models tokenise with ``model.to_tokens`` (which knows the model's BOS rule), Hugging
Face models with their tokenizer; a backend hands `TokenAdapter` the two functions that differ and
everything else (validation, messages, strings of byte-level tokens, subsets) is written once here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..token_text import token_label

#: A vocabulary this small is shown whole when no tokens are given (`TokenAdapter.token_subset`).
WHOLE_VOCAB = 64
#: Tokens drawn at random (fixed seed) from a larger vocabulary when no tokens are given.
DEFAULT_COUNT = 40
DEFAULT_SEED = 0
#: Most tokens a subset may hold (a 256 x 256 block per head is 64 K values).
MAX_TOKENS = 256
#: How a token subset the caller gave was chosen (`TokenAdapter.token_subset`'s criterion).
CHOSEN = "tokens chosen by the caller"


def check_text(text: str, what: str) -> None:
    """Refuse a string holding a lone surrogate (not valid Unicode), naming `what`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} holds a lone surrogate {text[exc.start]!r} at index {exc.start}, which is not valid Unicode "
            "text (it often comes from decoding bytes with errors='surrogateescape'); remove or replace it"
        ) from None


def _first_huge_int(value: Any) -> int | None:
    """The first int outside int64 in a nested list, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if not -(2**63) <= value < 2**63 else None
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_huge_int(item)
            if found is not None:
                return found
    return None


def _is_empty(value: Any) -> bool:
    """True for an empty list or a nested list holding only empty lists."""
    return isinstance(value, (list, tuple)) and all(_is_empty(item) for item in value)


class TokenAdapter:
    """Tokens of one model: `encode(text)` gives ids without BOS, `with_bos(text)` with the model's BOS rule.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()            # held: a view holds its model weakly
        >>> tokens = cw.as_view(model).tokens
        >>> tokens.check_tokens([2, 3]).tolist(), tokens.token_strings([2, 3])
        ([[2, 3]], ['a', 'b'])
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        d_vocab: int,
        n_ctx: int,
        device: torch.device,
        encode: Callable[[str], list[int]],
        with_bos: Callable[[str], list[int]],
    ):
        self.tokenizer = tokenizer
        self.d_vocab = d_vocab
        self.n_ctx = n_ctx
        self.device = device
        self._encode = encode
        self._with_bos = with_bos

    @property
    def bos_token_id(self) -> int | None:
        return None if self.tokenizer is None else getattr(self.tokenizer, "bos_token_id", None)

    @property
    def special_token_ids(self) -> list[int]:
        """Token ids never drawn as random tokens (BOS, EOS, PAD, UNK, ...)."""
        if self.tokenizer is None:
            return []
        ids = getattr(self.tokenizer, "all_special_ids", None) or []
        return sorted({int(i) for i in ids if i is not None and 0 <= int(i) < self.d_vocab})

    def check_prompt(self, prompt: Any, if_empty: str, instead: str) -> None:
        """A prompt must be a non-empty str of valid Unicode, and the model must have a tokenizer for it."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__} {prompt!r:.60}")
        if not prompt:
            raise ValueError(f"prompt is empty: {if_empty}")
        check_text(prompt, "prompt")
        if self.tokenizer is None:
            raise TypeError(f"this model has no tokenizer: pass {instead} instead of a prompt")

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without BOS and without truncation."""
        return [int(i) for i in self._encode(text)]

    def to_tokens(self, prompt: str, *, prepend_bos: bool = True, truncate: bool = False) -> torch.Tensor:
        """Tokenise `prompt` to ``[1, seq]``; raises on empty or over-long prompts unless `truncate`.

        A prompt longer than ``n_ctx`` tokens raises ValueError; ``truncate=True`` keeps its first
        ``n_ctx`` tokens (cut a prompt here and pass the ids to analysis and widgets).
        """
        self.check_prompt(prompt, "type some text to see its attention patterns", "token ids (tokens=...)")
        ids = [int(i) for i in (self._with_bos(prompt) if prepend_bos else self._encode(prompt))]
        if len(ids) > self.n_ctx:
            if not truncate:
                raise ValueError(
                    f"prompt is {len(ids)} tokens long, longer than the model's n_ctx={self.n_ctx}: shorten "
                    f"the prompt to at most {self.n_ctx} tokens, or cut it with "
                    "ModelView.to_tokens(prompt, truncate=True) and pass the token ids"
                )
            ids = ids[: self.n_ctx]
        if not ids:
            raise ValueError(f"prompt {prompt!r:.60} gives no tokens")
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def _check_device(self, tokens: torch.Tensor) -> None:
        if tokens.device.type == "meta":
            raise ValueError(
                f"tokens are on the meta device, which holds no values; pass token ids on the CPU or on the "
                f"model's device (the model is on {self.device})"
            )

    def check_tokens(self, tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        """Validate token ids and return them as a ``[batch, seq]`` long tensor on the model's device.

        `tokens`: a tensor, or a rectangular nested list, of integer ids, ``[seq]`` or ``[batch,
        seq]``. A tensor on another device is copied to the model's; one on the ``meta`` device
        (no values) raises ValueError, as do empty and 0-d tensors, ids outside the vocabulary and
        more than ``n_ctx`` positions (unless `truncate`, which keeps the first ``n_ctx``).
        """
        if isinstance(tokens, str):
            raise TypeError(f"tokens must be token ids, not a str ({tokens!r:.40}); pass a text as prompt=")
        if hasattr(tokens, "keys") and "input_ids" in tokens:  # a tokenizer's output (BatchEncoding)
            mask = tokens.get("attention_mask")
            if mask is not None and not bool(torch.as_tensor(mask).bool().all()):
                raise ValueError(
                    "tokens are padded (their attention_mask holds zeros): the views run each sequence unpadded, as "
                    "the model sees one prompt; pass each prompt's own ids (or the prompt itself) without padding"
                )
            tokens = tokens["input_ids"]
        if not isinstance(tokens, torch.Tensor):
            if _is_empty(tokens):
                raise ValueError(f"tokens is empty ({tokens!r}): give at least one token id")
            try:
                tokens = torch.as_tensor(tokens)
            except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
                huge = _first_huge_int(tokens)
                if huge is not None:
                    raise ValueError(f"tokens contains id {huge}, outside the vocabulary 0..{self.d_vocab - 1}") from None
                raise TypeError(
                    "tokens must be a tensor or a rectangular nested list of integer token ids ([seq] or "
                    f"[batch, seq]); got {type(tokens).__name__} ({exc})"
                ) from None
        self._check_device(tokens)
        if tokens.numel() == 0:
            raise ValueError(f"tokens is empty (shape {tuple(tokens.shape)}): give at least one token id")
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            shown = str(tokens.flatten()[:6].tolist())[:80]
            raise TypeError(f"tokens must hold integer ids; got {shown} (dtype {tokens.dtype})")
        if tokens.ndim == 0:
            raise ValueError(f"tokens is a 0-d tensor (one number); pass [{int(tokens)}] for a one-token sequence")
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [seq] or [batch, seq]; got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.n_ctx:
            if not truncate:
                raise ValueError(
                    f"tokens has {tokens.shape[1]} positions, longer than the model's n_ctx={self.n_ctx}: pass at "
                    f"most {self.n_ctx} (ModelView.check_tokens(tokens, truncate=True) keeps the first {self.n_ctx})"
                )
            tokens = tokens[:, : self.n_ctx]
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.d_vocab:
            bad = low if low < 0 else high
            raise ValueError(f"tokens contains id {bad}, outside the vocabulary 0..{self.d_vocab - 1}")
        return tokens.long().to(self.device)

    def tokens_of(self, prompt_or_tokens: Any, *, truncate: bool = False) -> torch.Tensor:
        """A prompt string or token ids, as a validated ``[batch, seq]`` tensor."""
        if isinstance(prompt_or_tokens, str):
            return self.to_tokens(prompt_or_tokens, truncate=truncate)
        return self.check_tokens(prompt_or_tokens, truncate=truncate)

    def to_str_tokens(self, tokens: Any) -> list[str]:
        """Strings of a ``[seq]`` (or ``[1, seq]``) token tensor; token ids without a tokenizer."""
        tokens = self.check_tokens(tokens)
        if tokens.shape[0] != 1:
            raise ValueError(f"to_str_tokens takes one sequence; got a batch of {tokens.shape[0]}")
        return self.token_strings(tokens[0].tolist())

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """Each id's string (the id itself, as a string, without a tokenizer); partial UTF-8 as ``<F0 9F>``."""
        if self.tokenizer is None:
            return [str(i) for i in ids]
        return [token_label(self.tokenizer, i) for i in ids]

    def token_id(self, text: str) -> int:
        """The id of `text`, which must be exactly one token."""
        if not isinstance(text, str):
            raise TypeError(f"token text must be a str; got {type(text).__name__}")
        check_text(text, "token text")
        if self.tokenizer is None:
            raise TypeError(f"token {text!r} is a string but this model has no tokenizer; pass token ids")
        ids = self.encode(text)
        if len(ids) != 1:
            raise ValueError(f"token string {text!r} is {len(ids)} tokens, not one; pass token ids or single tokens")
        return ids[0]

    def token_ids(self, tokens: Any) -> list[int]:
        """Validated ids of a list of token ids or token strings (or a 1-D integer tensor), order and repeats kept."""
        if isinstance(tokens, str):
            raise TypeError("tokens takes a list of token ids or token strings; for the tokens of a text use prompt=")
        if isinstance(tokens, torch.Tensor):
            self._check_device(tokens)
            if tokens.numel() == 0:
                raise ValueError("tokens is empty: give at least one token")
            if tokens.ndim != 1 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
                raise TypeError(f"tokens must be a 1-D integer tensor; got shape {tuple(tokens.shape)}, dtype {tokens.dtype}")
            tokens = tokens.tolist()
        if not isinstance(tokens, Sequence):
            raise TypeError(f"tokens must be a list of token ids or strings; got {type(tokens).__name__}")
        ids = []
        for item in tokens:
            if isinstance(item, str):
                ids.append(self.token_id(item))
            elif isinstance(item, int) and not isinstance(item, bool):
                if not 0 <= item < self.d_vocab:
                    raise ValueError(f"token id {item} is out of range: 0..{self.d_vocab - 1}")
                ids.append(item)
            else:
                raise TypeError(f"tokens must hold ints or strings; got {item!r}")
        if not ids:
            raise ValueError("tokens is empty: give at least one token")
        return ids

    def token_subset(self, tokens: Any = None, prompt: str | None = None) -> tuple[list[int], str]:
        """The token ids to show and the sentence that says how they were chosen.

        - `prompt`: its distinct tokens in order of first appearance (special tokens such as BOS left out).
        - `tokens`: ids (ints, a 1-D tensor) or token strings (each must be exactly one token); repeats dropped.
        - neither: the whole vocabulary when it has at most `WHOLE_VOCAB` tokens, else `DEFAULT_COUNT`
          non-special tokens drawn uniformly at random with seed `DEFAULT_SEED`.

        At most `MAX_TOKENS` tokens (ValueError beyond).
        """
        if tokens is not None and prompt is not None:
            raise ValueError("pass either tokens or prompt, not both")
        specials = set(self.special_token_ids)
        if prompt is not None:
            self.check_prompt(prompt, "give some text whose tokens to show", "tokens=[ids]")
            ids = self.encode(prompt)
            distinct = list(dict.fromkeys(i for i in ids if i not in specials)) or list(dict.fromkeys(ids))
            chosen, criterion = distinct, f"the {len(distinct)} distinct tokens of the prompt, in order of first appearance"
        elif tokens is not None:
            chosen, criterion = list(dict.fromkeys(self.token_ids(tokens))), CHOSEN
        elif self.d_vocab <= WHOLE_VOCAB:
            chosen, criterion = list(range(self.d_vocab)), f"the whole vocabulary ({self.d_vocab} tokens)"
        else:
            pool = torch.tensor([i for i in range(self.d_vocab) if i not in specials])
            gen = torch.Generator().manual_seed(DEFAULT_SEED)
            picked = pool[torch.randperm(len(pool), generator=gen)[:DEFAULT_COUNT]].sort().values
            chosen = [int(i) for i in picked]
            criterion = (
                f"{len(chosen)} tokens drawn uniformly at random (seed {DEFAULT_SEED}) from the "
                f"{self.d_vocab:,}-token vocabulary; pass tokens= or prompt= to choose"
            )
        if not chosen:
            raise ValueError("the prompt gives no tokens to show")
        if len(chosen) > MAX_TOKENS:
            raise ValueError(f"{len(chosen)} tokens is too many to draw: at most {MAX_TOKENS}")
        return chosen, criterion
