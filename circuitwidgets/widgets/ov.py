"""`OVCircuit`: a head's full OV circuit on a token subset, its eigenvalues, copying and top-k accuracy."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import traitlets

from .. import analysis, transport
from ..model import as_view
from . import _background, _cache
from .base import running_loop
from .token_subset import TokenSubsetWidget

#: Rows x vocabulary entries per chunk of the background top-k pass (32 MB of float32): on GPT-2
#: small's shape one chunk takes ~30 ms, the longest a head switch waits for the CPU.
_CHUNK_ENTRIES = 2**23


def _top_k_pair(model: Any, layer: int, head: int, progress: Any = None) -> tuple[float, float]:
    """``(top-1, top-5)`` accuracy of the full OV circuit over the whole vocabulary, one pass, cached."""

    def compute() -> tuple[float, float]:
        d_vocab = as_view(model).d_vocab
        chunk = max(1, _CHUNK_ENTRIES // d_vocab)
        return analysis.ov_top_k_accuracy(model, layer, head, k=(1, min(5, d_vocab)), chunk_size=chunk, progress=progress)

    return _cache.cached(model, ("ov_top_k", layer, head), compute)


class OVCircuit(TokenSubsetWidget, view="ov"):
    """The full OV circuit ``W_E W_V W_O W_U`` of a head on a token subset, and whether it copies.

    Left: heatmap of source token (row: the token attended to) × out token (column: the logit it moves), the
    diagonal outlined, hover read-out of the exact value. Right: the eigenvalues of the full OV
    circuit on the complex plane (from the ``d_head × d_head`` form, scaled by the largest
    ``|λ|``, unit circle and axes drawn), the copying score ``Σλ / Σ|λ|``, and top-1 / top-5
    accuracy over the whole vocabulary (the share of tokens whose own logit is among the k
    largest of their row; computed after the first picture, in the background, and cached).
    The vocabulary-sized matrix is never built: blocks come from the factors.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        layer, head: the head shown first.
        tokens: token ids or token strings for rows and columns. Default: the whole vocabulary
            when it has at most 64 tokens, else 40 tokens drawn at random with seed 0 (the
            criterion is shown in the widget and in `token_criterion`).
        prompt: alternatively, show the distinct tokens of this text.
        accuracy: compute top-1/top-5 accuracy (a pass over the vocabulary per head; see the
            README's benchmark table for its time on GPT-2 small's shape).
        defer: inside a running event loop (a notebook kernel), show the widget at once with its
            progress note and compute just after the cell returns (as a `Dashboard` does).


    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.OVCircuit(cw.demo_model(), 1, 0, tokens=["a", "b", "c"])
        >>> w.ov["shape"], round(w.stats[0]["copying"], 2) > 0
        ([4, 3, 3], True)
    """

    ov = traitlets.Dict(
        help="payload (circuitwidgets.transport) of the layer's blocks [n_heads, n, n] as uint8, each head on its "
        "own symmetric range ov['ranges'][h], with the labels and ids of the tokens"
    ).tag(sync=True)
    values = traitlets.Dict(help="payload of the same blocks as exact float32, for read-outs").tag(sync=True)
    eigenvalues = traitlets.Dict(
        help="payload of float32 [n_heads, d_head, 2] (real, imaginary), with 'copying': each head's copying score"
    ).tag(sync=True)
    stats = traitlets.List(
        traitlets.Dict(), help="per head of the layer {'copying', 'top1', 'top5', 'layer'}; top-k is None until computed"
    ).tag(sync=True)
    progress = traitlets.Unicode("", help="what the background is computing, '' when idle").tag(sync=True)

    def __init__(
        self, model: Any, layer: int = 0, head: int = 0, tokens: Any = None, *,
        prompt: str | None = None, accuracy: bool = True, defer: bool = False, **kwargs: Any,
    ) -> None:
        if not isinstance(accuracy, bool):
            raise TypeError(f"accuracy must be a bool; got {accuracy!r}")
        self._accuracy = accuracy
        self._queued: set[tuple] = set()  # (layer, head) of passes on the worker
        self._unsent: dict[tuple, tuple] = {}  # (layer, head) -> (handle, submit) of passes still to submit
        super().__init__(model, layer, head, tokens, prompt, **kwargs)
        self._start(defer)

    @traitlets.observe("head")
    def _on_head(self, change: dict) -> None:
        if self._ready:
            self._schedule_accuracy()

    def _refresh(self) -> None:
        layer, ids = self.layer, list(self.tokens)
        compute = partial(analysis.full_ov_block, self.mv, layer, ids)
        blocks = _cache.cached(self.mv, ("ov_block", layer, tuple(ids)), compute)
        eigs = _cache.cached(self.mv, ("ov_eigenvalues", layer), lambda: analysis.ov_eigenvalues(self.mv, layer))
        copying = [None if c != c else c for c in analysis.copying_score_of(eigs).tolist()]
        labels = self._labels()
        self.stats = [self._stats_row(layer, h, c) for h, c in enumerate(copying)]
        self.values = self.payload_float32(blocks, layer=layer)
        self.eigenvalues = self.payload_float32(torch.stack([eigs.real, eigs.imag], dim=-1), layer=layer, copying=copying)
        self.ov = self.payload_heads(blocks, layer=layer, labels=labels, ids=ids, caption=self._caption())
        self._schedule_accuracy()

    def _stats_row(self, layer: int, head: int, copying: float | None) -> dict:
        top1 = top5 = None
        if _cache.is_cached(self.mv, ("ov_top_k", layer, head)):
            top1, top5 = _top_k_pair(self.mv, layer, head)
        return {"copying": copying, "top1": top1, "top5": top5, "layer": layer}

    # ----- top-k in the background -------------------------------------------------------------
    def _schedule_accuracy(self) -> None:
        """Compute top-k of the shown head: now without an event loop, else on the worker thread."""
        layer, head = self.layer, self.head
        if self._closed or not self._accuracy or _cache.is_cached(self.mv, ("ov_top_k", layer, head)):
            return
        loop = running_loop()
        if loop is None:
            self._apply_accuracy(layer, head, _top_k_pair(self.mv, layer, head))
            return
        if (layer, head) in self._queued:
            return
        self._queued.add((layer, head))
        label = f"computing top-1/top-5 accuracy of L{layer}H{head} over {self.mv.d_vocab:,} tokens"
        self._set(progress=label + "…")

        def on_progress(percent: int) -> None:
            if (layer, head) in self._queued and self.selected_head == (layer, head):
                self._set(progress=f"{label}: {percent}%")

        def submit() -> None:
            self._unsent.pop((layer, head), None)
            if self._closed:
                return
            _background.submit(
                loop,
                lambda report: _top_k_pair(self.mv, layer, head, progress=report),
                wanted=lambda: not self._closed and self.selected_head == (layer, head),
                on_progress=on_progress,
                on_done=lambda result, error: self._finish_accuracy(layer, head, result, error),
            )

        # Submitted once the work already queued on the loop is done (a Dashboard's other children, drawn
        # just after the cell returns), so that the pass takes no CPU from their first pictures.
        self._unsent[(layer, head)] = (loop.call_soon(submit), submit)

    def _finish_accuracy(self, layer: int, head: int, result: Any, error: BaseException | None) -> None:
        self._queued.discard((layer, head))
        if not self._queued:
            self._set(progress="")
        if self._closed:  # dropped for good: never resubmitted, so the widget can be freed
            return
        if isinstance(error, _background.Superseded):  # redone if the user comes back to the head
            if self.selected_head == (layer, head):  # ... which they already did
                self._schedule_accuracy()
        elif error is not None:  # shown, never a silent "computing…" forever
            self._show_error(f"top-k accuracy of L{layer}H{head} failed: {type(error).__name__}: {error}", "accuracy")
        else:
            self._apply_accuracy(layer, head, result)

    def _apply_accuracy(self, layer: int, head: int, result: tuple[float, float]) -> None:
        if layer != self.layer or not 0 <= head < len(self.stats):
            return  # the layer changed meanwhile; the result waits in the cache
        stats = [dict(row) for row in self.stats]
        stats[head]["top1"], stats[head]["top5"] = result
        self._set(stats=stats)

    def wait(self, timeout: float | None = None) -> OVCircuit:
        """Block until queued background work is done and its results are shown; returns self.

        Example:
            >>> import asyncio, circuitwidgets as cw
            >>> async def cell():  # in a notebook the kernel's loop is running, as here
            ...     return cw.OVCircuit(cw.demo_model(), 1, 2).wait().stats[2]["top1"] is not None
            >>> asyncio.run(cell())
            True
        """
        for handle, submit in list(self._unsent.values()):  # (the loop, which this call blocks, would submit them)
            handle.cancel()
            submit()
        _background.wait(timeout)
        # The worker's own report waits for the event loop, which this call is blocking.
        for layer, head in list(self._queued):
            if _cache.is_cached(self.mv, ("ov_top_k", layer, head)):
                self._queued.discard((layer, head))
                self._apply_accuracy(layer, head, _top_k_pair(self.mv, layer, head))
        if not self._queued:
            self._set(progress="")
        return self

    def _pending(self) -> bool:
        return super()._pending() or bool(self._queued) or bool(self._unsent)

    def finish(self) -> OVCircuit:
        super().finish()
        return self.wait()

    def current_block(self) -> torch.Tensor:
        """Exact float32 block ``[n, n]`` of the head shown (rows: source tokens, columns: out tokens).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.OVCircuit(cw.demo_model(), 1, 0, tokens=[2, 3]).current_block().shape
            torch.Size([2, 2])
        """
        return transport.decode(self.values)[self.head]
