"""Exact sweeps at speed: one intervention per run (a head ablated, a head's activation patched), each run
restarted at the intervention's own layer.

The prompts run once, recorded (`circuitwidgets.model.ModelView.record`: the residual stream entering every
block and each block's call). Each intervention at layer ``l`` then runs blocks ``l, l+1, ...`` only, from the
recorded residual stream, with its hook, and unembeds only the logit positions the metric reads (a next-token
loss at chosen positions, a logit difference at one position; a callable metric gets every position, since
which it reads cannot be known). The answers are those of running the whole model once per intervention (the
tests hold them to 1e-5): blocks before ``l`` compute the same thing in every such run, and positions the metric
does not read do not change it. On a GPU several interventions of one layer share a run (`per_run`: copies of
the batch stacked, each copy with its own intervention); on a CPU one run each (its matrix products are
compute-bound already, so batching gains nothing there).

Where a backend cannot restart runs (`supports("resume")`, or a model whose restarted blocks do not reproduce its
logits: `circuitwidgets.backends.resume.ResumeError`), `record` gives a `WholeRuns`, whose runs run the model
whole, once per intervention, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..model import ModelView

#: At most this many interventions share one run on a GPU.
MAX_PER_RUN = 64


def per_run(view: ModelView, tokens: torch.Tensor, n_read: int | None, requested: Any = None) -> int:
    """How many interventions share one run: `requested` (a positive int) if given; else 1 on a CPU, and on a GPU
    as many copies of the batch as half the free memory holds (a generous estimate of one copy's activations:
    residual streams and MLP activations, every head's scores, the logits read), at most `MAX_PER_RUN`.

    Example:
        >>> import circuitwidgets as cw
        >>> per_run(cw.as_view(cw.demo_model()), torch.zeros(8, 41, dtype=torch.long), 19)
        1
    """
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"per_run must be a positive int (interventions sharing one run) or None; got {requested!r}")
        return requested
    if view.device.type != "cuda":
        return 1
    free, _ = torch.cuda.mem_get_info(view.device)
    batch, seq = tokens.shape
    itemsize = torch.empty((), dtype=view.dtype).element_size()
    read = seq if n_read is None else n_read
    one = itemsize * batch * (seq * view.d_model * 16 + 3 * view.n_heads * seq * seq + 2 * read * view.d_vocab)
    return max(1, min(MAX_PER_RUN, int(free * 0.5 // max(one, 1))))


def record(view: ModelView, tokens: torch.Tensor, keep: Sequence[Any] = (), copies: int = 1) -> Any:
    """`view.record(tokens, keep, copies)` (`circuitwidgets.backends.resume.Resumable`); where this backend or model
    cannot restart runs, a `WholeRuns` with the same calls, each of which runs the whole model."""
    if view.supports("resume"):
        try:
            return view.record(tokens, keep, copies)
        except ValueError as exc:  # ResumeError: restarting does not reproduce this model's logits
            if type(exc).__name__ != "ResumeError":
                raise
    return WholeRuns(view, tokens, keep)


class WholeRuns:
    """`Resumable`'s calls answered by running the whole model each time (a backend or model that cannot restart
    runs): a run "restarted" at block ``l`` on a residual stream runs every block with the stream entering block
    ``l`` replaced (the same answers, none of the speed)."""

    def __init__(self, view: ModelView, tokens: torch.Tensor, keep: Sequence[Any] = ()):
        self._view = view
        self.tokens = tokens
        places = [("resid_pre", block) for block in range(view.n_layers)]
        self.logits, kept = view.run_with_hooks(tokens, [], keep=[*places, *keep])
        self.residual = {block: kept[("resid_pre", block)] for block in range(view.n_layers)}
        self.kept = {where: kept[where] for where in keep}

    @property
    def batch(self) -> int:
        return int(self.tokens.shape[0])

    def run(
        self, start: int, hooks: Sequence[tuple[Any, Callable[..., Any]]] = (), *, positions: Sequence[int] | None = None,
        residual: torch.Tensor | None = None, copies: int = 1, keep: Sequence[Any] = (), stop: bool = False,
    ) -> tuple[torch.Tensor | None, dict[Any, torch.Tensor]]:
        tokens = self.tokens.repeat(copies, 1) if copies > 1 else self.tokens
        hooks = list(hooks)
        if residual is not None:
            stream = residual.repeat(copies, 1, 1) if residual.shape[0] != tokens.shape[0] else residual
            hooks.append((("resid_pre", start), lambda x, hook=None: stream.to(x.dtype)))
        logits, kept = self._view.run_with_hooks(tokens, hooks, keep=keep)
        if stop:
            return None, kept
        return (logits if positions is None else logits[:, list(positions)]), kept


def sweep(
    recorded: Any,
    jobs: dict[int, list[Any]],
    hooks_of: Callable[[int, list[Any]], list],
    measure: Any,
    copies: int,
    step: Callable[[int], None],
) -> list[torch.Tensor]:
    """The metric of every job's run, in the order of `jobs` (``{start layer: [job, ...]}``): jobs of one layer in
    runs of `copies` copies of the batch, each restarted at that layer under ``hooks_of(layer, chunk)`` (hooks that
    change copy ``c`` of the batch, rows ``c * batch ...``, as job ``chunk[c]`` says), unembedding only
    ``measure.reads`` (None: every position); ``measure.on_read(logits)`` of each copy. `step(done)` after each run."""
    batch = recorded.batch
    values: list[torch.Tensor] = []
    for layer, todo in jobs.items():
        for first in range(0, len(todo), copies):
            chunk = todo[first : first + copies]
            logits, _ = recorded.run(layer, hooks_of(layer, chunk), positions=measure.reads, copies=len(chunk))
            for c in range(len(chunk)):
                values.append(measure.on_read(logits[c * batch : (c + 1) * batch]))
            step(len(values))
    return values


def copy_rows(copy: int, batch: int) -> slice:
    """The rows of copy `copy` of a batch of `batch` prompts stacked copy-major."""
    return slice(copy * batch, (copy + 1) * batch)
