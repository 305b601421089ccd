"""What `Ablation` and `Patching` share: token batches from prompts or ids, default prompts, progress.

Example:
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()            # held: a view holds its model weakly
    >>> view = cw.as_view(model)
    >>> token_batch(view, ["abc", "xyz"], "tokens").shape
    torch.Size([2, 4])
    >>> block_length(view), list(second_copy(view))[:2]
    (20, [21, 22])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..model import ModelView

#: Default length of the random block repeated in the default prompts (shorter when n_ctx asks).
BLOCK = 20
#: Default number of prompts in a batch.
BATCH = 8


def token_batch(mv: ModelView, value: Any, name: str) -> torch.Tensor:
    """`value` as ``[batch, seq]`` token ids: prompts (a str or a list of str, each tokenised with BOS
    through the view; they must give one length) or token ids (``[seq]`` or ``[batch, seq]``)."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)) and value and any(isinstance(p, str) for p in value):
        if not all(isinstance(p, str) for p in value):
            raise TypeError(f"{name} must be prompts (every item a str) or token ids; got a mix of both")
        rows = [mv.to_tokens(p)[0] for p in value]
        lengths = [len(r) for r in rows]
        if len(set(lengths)) > 1:
            longest = max(range(len(rows)), key=lengths.__getitem__)
            shortest = min(range(len(rows)), key=lengths.__getitem__)
            raise ValueError(
                f"{name}: the prompts must give one number of tokens to run as a batch; prompt {longest} gives "
                f"{lengths[longest]} tokens (with BOS) and prompt {shortest} {lengths[shortest]} (lengths {lengths}). "
                "Make them the same length in tokens, or pass token ids"
            )
        return torch.stack(rows)
    return mv.check_tokens(value)


def block_length(mv: ModelView) -> int:
    """Length of the random block of the default prompts ``[BOS, r, r]`` (`BLOCK`, or less to fit n_ctx)."""
    return min(BLOCK, (mv.n_ctx - 1) // 2)


def second_copy(mv: ModelView) -> range:
    """The logit positions that predict tokens 2.. of the second copy of the default prompts' block."""
    n = block_length(mv)
    return range(n + 1, 2 * n)


def progress_reporter(widget: Any, what: str) -> Callable[[int, int], None]:
    """``report(done, total)`` showing "`what`: N %" in the widget's ``progress`` trait, sent at once.

    A refresh holds the widget's messages until it ends (``hold_sync``); the progress line is sent
    on its own as it changes, so the browser sees it while the kernel computes.
    """
    shown = [-1]

    def report(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if percent != shown[0]:
            shown[0] = percent
            widget._set(progress=f"{what}: {percent} %")
            if widget.comm is not None:
                widget.send_state("progress")

    return report
