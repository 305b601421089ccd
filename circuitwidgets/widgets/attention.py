"""`AttentionPattern`: one layer's attention patterns, live on a prompt or on token ids.

Short prompts send the whole layer (uint8, lower triangle). Long ones (the layer's codes above
`LOD_BYTES`) send an overview per head, pooled over `factor x factor` cells, and answer the
view's tile requests with exact cells recomputed from the layer's queries, keys and row
log-sum-exp (`circuitwidgets.analysis.long_patterns`), which is all the kernel keeps of them.

`AttentionPattern.from_tensors` draws attention computed anywhere (a TransformerLens cache,
nnsight, NumPy or JAX arrays) with no model: the same picture, level of detail and export, the
tiles and rows cut from the tensor given; the controls that need a model are hidden.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import traitlets

from .. import progress as progress_of
from .. import transport
from ..analysis import long_patterns
from . import _background, _cache
from ._color import color_scale_trait
from ._given import ModelFree, as_float32, itemsize, token_strings
from .base import described, refusal, running_loop, short
from .sequence import SequenceWidget

#: A run stops at the shown layer; the patterns of the layers below it, computed on the way, are
#: kept too while all of them fit in this many float32 values (switching down is then free).
ALL_LAYERS_BUDGET = 16_000_000
#: Above this many bytes of uint8 codes for the layer (lower triangles of every head), the widget
#: sends overviews and tiles (level of detail) instead of every cell.
LOD_BYTES = 4 << 20
#: Longest side of an overview, in pooled cells (a factor of ceil(seq / OVERVIEW_CELLS)).
OVERVIEW_CELLS = 512
#: Largest tile side, in (pooled) cells, the kernel answers.
TILE_CELLS = 1024
#: The fields of a `tile_request`, every one an int.
TILE_FIELDS = ("id", "layer", "head", "row0", "col0", "rows", "cols", "step", "revision")
#: An exported page of a long prompt holds finer overviews of the shown head (pooled 2, 4, ... times
#: less than `patterns`) while their deflated bytes fit in this budget (and each level has at most
#: 4 x as many cells, so that a level that cannot fit is never computed).
EXPORT_LEVEL_BYTES = 8_000_000
#: From tensors: weights further than this outside [0, 1] are refused (rounding may stray this far).
RANGE_TOLERANCE = 1e-5
#: From tensors: rows whose sum is further than this from 1 are noted (drawn as given); 2-byte dtypes
#: (bfloat16, float16) round each weight to 3 digits, so theirs is looser.
ROW_SUM_TOLERANCE = 1e-3
ROW_SUM_TOLERANCE_16 = 1e-2
#: From tensors: cells checked at once (bounds the memory of the checks of a long prompt).
CHECK_CELLS = 1 << 24
#: What a widget drawn from tensors says in place of its model controls.
TENSOR_NOTE = "from tensors: no model, so no layer or prompt controls"


class TensorFacts(NamedTuple):
    """What `checked_attention` found: causal (zero above every diagonal), rows not summing to ~1."""

    causal: bool
    off_rows: int  # rows (over every head) whose sum is not ~1
    example: tuple[int, int, float] | None  # (head, destination, sum) of the first of them


def checked_attention(attention: Any, n_tokens: int) -> tuple[torch.Tensor, TensorFacts]:
    """`attention` (``[n_heads, destination, source]`` or one head's ``[destination, source]``) as float32 ``[H, n, n]``.

    Refused (ValueError or TypeError naming the problem): anything that is not an array of real
    numbers, other shapes, sizes other than `n_tokens`, NaN or infinite values, values outside
    [0, 1]. Rows that do not sum to ~1 are allowed and counted in the facts returned.

    Example:
        >>> import torch
        >>> stack, facts = checked_attention(torch.tril(torch.ones(3, 3)) / torch.arange(1, 4)[:, None], 3)
        >>> stack.shape, facts.causal, facts.off_rows
        (torch.Size([1, 3, 3]), True, 0)
    """
    stack = as_float32(attention, "attention")
    shape = tuple(stack.shape)
    if stack.dim() == 2:
        stack = stack.unsqueeze(0)
    if stack.dim() != 3:
        hint = "; for a batch, pick one sequence, e.g. cache['pattern', 0][0]" if stack.dim() == 4 else ""
        raise ValueError(
            f"attention must be [n_heads, destination, source] or one head's [destination, source]; got shape {shape}{hint}"
        )
    n_heads, rows, cols = stack.shape
    if rows != cols:
        raise ValueError(f"attention must be square over its last two dims (destination, source); got shape {shape}")
    if rows != n_tokens:
        raise ValueError(f"attention has {rows} positions (shape {shape}) but tokens has {n_tokens} strings: they must match")
    if n_heads == 0 or rows == 0:
        raise ValueError(f"attention is empty (shape {shape})")
    tolerance = ROW_SUM_TOLERANCE_16 if itemsize(attention) <= 2 else ROW_SUM_TOLERANCE
    causal, off_rows, example = True, 0, None
    chunk = max(1, CHECK_CELLS // (n_heads * rows))
    for r0 in range(0, rows, chunk):
        block = stack[:, r0 : r0 + chunk]
        low, high = (float(x) for x in torch.aminmax(block))
        if not -RANGE_TOLERANCE <= low <= high <= 1 + RANGE_TOLERANCE:  # (NaN fails too)
            bad = ~torch.isfinite(block)
            if bad.any():
                raise ValueError(f"attention must be finite; got {float(block[bad][0])} at {_cell(bad, r0)}")
            value = low if low < -RANGE_TOLERANCE else high
            raise ValueError(f"attention weights must be in [0, 1]; got {value:.6g} at {_cell(block == value, r0)}")
        sums = block.sum(-1)
        far = (sums - 1).abs() > tolerance
        if far.any():
            off_rows += int(far.sum())
            if example is None:
                h, i = far.nonzero()[0].tolist()
                example = (h, r0 + i, float(sums[h, i]))
        if causal:  # sources right of the block's last destination, then the triangle beside the diagonal
            end = r0 + block.shape[1]
            causal = not (bool(block[:, :, end:].any()) or bool(torch.triu(block[:, :, r0 + 1 : end]).any()))
    return stack, TensorFacts(causal, off_rows, example)


def _cell(mask: torch.Tensor, r0: int) -> str:
    """Where the first true cell of `mask` (rows of a block from destination `r0`) is, in words."""
    h, i, j = mask.nonzero()[0].tolist()
    return f"head {h}, destination {r0 + i}, source {j}"


def tensor_note(facts: TensorFacts) -> str:
    """The note of a widget drawn from tensors: no model controls, and rows that do not sum to ~1."""
    if not facts.off_rows or facts.example is None:
        return TENSOR_NOTE
    head, query, total = facts.example
    rows = f"{facts.off_rows} row{'s' * (facts.off_rows > 1)} {'do' if facts.off_rows > 1 else 'does'} not sum to 1"
    return f"{TENSOR_NOTE}; {rows} (head {head}, destination {query}: {total:.4g}), drawn as given"


def in_kernel() -> Any:
    """The running loop of a notebook kernel (an IPython kernel's), where a long run can go on while the kernel
    answers the browser; None elsewhere (a script, or another library's loop: Playwright's sync API runs one)."""
    loop = running_loop()
    if loop is None:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return loop if shell is not None and getattr(shell, "kernel", None) is not None else None


#: Seconds between two progress messages of a long run.
PROGRESS_S = 0.2


class _Job:
    """A long run on the worker thread: what it computes, and whether the user cancelled it."""

    def __init__(self, what: str):
        self.what = what
        self.cancelled = False


def memory_note(reason: str, n_heads: int, seq: int, dtype: torch.dtype) -> str:
    """What a long prompt costs on a model that must hold its patterns (`ModelView.memory_reason`): '' for none.

    Example:
        >>> memory_note("a hook sits on the pattern", 12, 8192, torch.float32)[-67:]
        '(3.2 GB per layer, one layer at a time): a hook sits on the pattern'
    """
    if not reason:
        return ""
    size = n_heads * seq * seq * max(4, dtype.itemsize) / 1e9
    held = f"each layer's {seq} x {seq} attention patterns on the way ({size:.1f} GB per layer, one layer at a time)"
    return f"this model holds {held}: {reason}"


class AttentionPattern(SequenceWidget, view="attention"):
    """Heatmap of a head's attention pattern, thumbnails of every head in the layer, a token view.

    Rows are destinations (the query position, where the head writes), columns sources (the key
    position, the token attended to); each row sums to 1.

    Switching head within a layer happens in the browser (the whole layer is sent, as uint8);
    editing the prompt or changing layer re-runs the model in the kernel, up to that layer only.

    Long prompts (the layer's uint8 codes above `LOD_BYTES`, e.g. 12 heads from about 830
    tokens) are drawn by level of detail: ``patterns`` holds each head's overview, pooled over
    ``factor x factor`` cells (`pool`: "max" keeps a one-cell stripe visible, "mean" averages),
    and zooming in the view asks the kernel for exact tiles through ``tile_request``, answered in
    ``tile``. Hover values are exact at every zoom (``row``). Exported pages hold the overview;
    deeper zoom needs the kernel.

    `from_tensors` draws attention weights computed elsewhere, with no model (see there).

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``.
        prompt: text to run (tokenised with BOS). Needs a tokenizer.
        tokens: token ids ``[seq]`` or ``[1, seq]``, in place of `prompt` (labels then show ids).
        layer: block index of an attention layer. head: head index in that layer.
        pool: "max" or "mean", how overviews of long prompts pool cells.
        defer: in a notebook kernel, show the widget at once and compute just after the cell returns: a long
            prompt then runs on the worker thread, with a progress bar and Cancel in the widget, and fills in
            (``patterns`` stays empty until then). Default False: the picture is there for the next line,
            with the cell's own progress bar on long work.
        lod: False sends every cell of long prompts too (the full-matrix path).

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc", layer=1, head=0)
        >>> w.patterns["shape"], w.str_tokens[1:4]
        ([4, 7, 7], ['a', 'b', 'c'])
    """

    controls = ("selection", "pool", "lod", "tile_request", "color_scale", "cancel")
    _job: _Job | None = None  # the long run going on on the worker thread (`_compute`)
    _may_defer = True  # long runs may go to the worker thread (not while an export computes its picture)
    inputs = ("layer", "pool", "lod", "color_scale")  # a head switch needs nothing: the browser holds the whole layer
    requests = ("selection", "tile_request")

    selection = traitlets.Dict(
        {"query": None, "key": None, "locked": False},
        help="the hovered or clicked cell, {'query', 'key', 'locked'}, set by the browser",
    ).tag(sync=True)
    patterns = traitlets.Dict(
        help="payload (circuitwidgets.transport) of the layer's patterns [n_heads, destination (query), source (key)] "
        "as uint8, lower triangle only when causal, with its layer, revision and labels (the token strings); for long "
        "prompts each head's overview, with lod = {n, factor, pool, exact}"
    ).tag(sync=True)
    row = traitlets.Dict(
        help="payload of the exact float32 weights [n_heads, source (key)] of the selected destination (query)"
    ).tag(sync=True)
    info = traitlets.Dict(help="model facts the controls need (layers, heads, n_ctx, tokenizer or not)").tag(sync=True)
    pool = traitlets.Enum(
        long_patterns.POOLS, "max", help="how a long prompt's overview pools cells: the block's largest weight or its mean"
    ).tag(sync=True)
    lod = traitlets.Bool(True, help="level of detail for long prompts (overview + tiles); False sends every cell").tag(sync=True)
    tile_request = traitlets.Dict(
        help="set by the view: {id, layer, head, row0, col0, rows, cols, step, revision}, the cells wanted "
        "(destination rows from row0, source columns from col0, pooled over step x step)"
    ).tag(sync=True)
    tile = traitlets.Dict(
        help="payload answering the latest tile_request: uint8 [rows/step, cols/step] pooled as `pool` says, "
        "with the request's fields (NaN code above the diagonal)"
    ).tag(sync=True)
    color_scale = color_scale_trait()
    remote_note = traitlets.Unicode(
        "", help="for a remote model: whose queries and keys are on this machine (zoom and hover of that head run here)"
    ).tag(sync=True)
    progress = traitlets.Dict(
        help="a long prompt's run in a kernel: {running, text ('layer 5 of 12, block 40 of 256'), fraction}; {} when idle"
    ).tag(sync=True)
    cancel = traitlets.Int(
        0, help="raised by one (the Cancel button) to stop the long run going on: it stops within one block"
    ).tag(sync=True)
    memory_note = traitlets.Unicode(
        "", help="for a long prompt on a model whose attention cannot run memory efficiently: that each layer's n x n "
        "patterns are held on the way, and why"
    ).tag(sync=True)
    levels = traitlets.List(
        traitlets.Dict(),
        help="set by save_html for long prompts: finer overviews of the shown head, tiles of the whole pattern at steps "
        "factor/2, factor/4, ... (while they fit EXPORT_LEVEL_BYTES), so that the page zooms deeper without a kernel",
    ).tag(sync=True)

    def __init__(
        self, model: Any, prompt: str | None = None, *, tokens: Any = None, layer: int = 0, head: int = 0,
        defer: bool = False, **kwargs: Any,
    ) -> None:
        if prompt is not None and tokens is not None:
            raise ValueError("pass either prompt or tokens, not both")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        self._shown: torch.Tensor | None = None  # float32 [n_heads, q, k] of the picture on screen
        self._parts: dict[str, Any] | None = None  # long prompts: q, k, lse (or the patterns) of the layer
        self._causal = True  # a model's patterns are causal: nothing is drawn above the diagonal
        super().__init__(model, layer=layer, head=head, **kwargs)
        mv = self.mv
        self.info = {
            "n_layers": mv.n_layers,
            "n_heads": mv.n_heads,
            "attn_layers": list(mv.attn_layers),
            "n_ctx": mv.n_ctx,
            "has_tokenizer": mv.tokenizer is not None,
        }
        if tokens is not None:
            self.tokens, self.source = self._sequence(self.mv.check_tokens(tokens)), "tokens"
        elif prompt is not None:
            self.prompt, self.source = prompt, "prompt"
        self._start(defer)

    @classmethod
    def from_tensors(
        cls, tokens: Any, attention: Any, *, head_names: Any = None, layer_name: Any = None, **kwargs: Any
    ) -> AttentionPattern:
        """The widget drawing attention weights computed anywhere, with no model.

        The same picture, head thumbnails, hover read-outs, selection, level of detail for long
        prompts (tiles and exact rows cut from `attention` in the kernel; every cell shipped when
        small) and export as a model's. The layer and prompt controls, which need a model, are
        hidden; the widget says so in its note (``info["note"]``), with any rows that do not sum
        to ~1 (allowed, drawn as given).

        Args:
            tokens: the token strings, one per position (e.g. ``model.to_str_tokens(prompt)``).
            attention: ``[n_heads, destination, source]`` weights in [0, 1], or one head's
                ``[destination, source]``: a torch tensor of any float dtype on any device (e.g.
                ``cache["pattern", 0][0]``), a NumPy or JAX array, nested lists. Kept as float32 on
                the CPU (a float32 CPU tensor is kept itself, not copied).
            head_names: a name for each head (thumbnails, head selector, title); default H0, H1...
            layer_name: a caption for the layer (str, or an int shown as "Layer <n>").
            **kwargs: initial values of other traits (head, pool, lod, selection).

        Raises ValueError or TypeError naming the problem: tokens that are not strings, a shape
        that is not square over its last two dims or does not match ``len(tokens)``, NaN or
        infinite values, values outside [0, 1], head names of the wrong number or type.

        Example:
            >>> import torch
            >>> import circuitwidgets as cw
            >>> prev = torch.eye(4).roll(-1, 1).tril() + torch.eye(4) * torch.tensor([1.0, 0, 0, 0])
            >>> w = cw.AttentionPattern.from_tensors(["a", "b", "c", "d"], prev, head_names=["previous"])
            >>> w.patterns["shape"], w.info["head_names"], w.info["note"]
            ([1, 4, 4], ['previous'], 'from tensors: no model, so no layer or prompt controls')
        """
        return AttentionFromTensors(tokens, attention, head_names=head_names, layer_name=layer_name, **kwargs)

    # ----- checks (see CircuitWidget: run after the type check, raise to refuse) ---------------
    def _check_selection(self, value: dict) -> dict:
        unknown = sorted(map(repr, set(value) - {"query", "key", "locked"}))
        if unknown:
            raise ValueError(f"selection has unknown fields {', '.join(unknown)}: it holds query, key and locked")
        seq = self._seq() or math.inf  # (before the first picture, any position)
        for field in ("query", "key"):
            cell = value.get(field)
            if cell is not None and (isinstance(cell, bool) or not isinstance(cell, int) or not 0 <= cell < seq):
                raise ValueError(f"selection {field}={short(cell)} is out of range: a position 0..{seq - 1}, or None")
        if not isinstance(value.get("locked", False), bool):
            raise TypeError(f"selection locked={short(value['locked'])} must be True or False")
        return {"query": value.get("query"), "key": value.get("key"), "locked": value.get("locked", False)}

    @traitlets.observe("tile_request")
    def _on_tile_request(self, change: dict) -> None:
        if self._ready:
            self._soon("tile_request", self._answer_tile)

    @traitlets.observe("selection")
    def _on_selection(self, change: dict) -> None:
        if self._ready:  # a traced row is a run (maybe remote): from the browser, the latest hover wins
            self._soon("selection", self._selection_row, defer="traced" in (self._parts or {}))

    @traitlets.observe("head")
    def _on_head(self, change: dict) -> None:
        if self._ready and (self._parts or {}).get("inputs"):  # a remote model: the new head's inputs, one request
            self._soon("selection", self._selection_row, defer=True)

    def _layer_patterns(self, tokens: torch.Tensor, layer: int) -> torch.Tensor:
        mv = self.mv
        seq = tokens.shape[1]
        below = [a for a in mv.attn_layers if a <= layer]  # computed on the way to `layer` anyway
        keep = max(1, ALL_LAYERS_BUDGET // max(1, mv.n_heads * seq * seq))
        return _cache.layer_patterns(mv, tuple(tokens[0].tolist()), layer, tuple(below[-keep:]))

    def _uses_lod(self, seq: int, n_heads: int) -> bool:
        return self.lod and n_heads * seq * (seq + 1) // 2 > LOD_BYTES

    def _refresh(self) -> None:
        if self._job is not None:  # superseded: it stops at its next block
            self._job = None
            self._set(progress={})
        mv = self.mv
        tokens = mv.check_tokens(self.tokens) if self.source == "tokens" else mv.to_tokens(self.prompt)
        str_tokens = mv.to_str_tokens(tokens)
        ids = tokens[0].tolist()  # the read-out names each token's id beside its string
        seq = tokens.shape[1]
        long = self._uses_lod(seq, mv.n_heads)
        what = f"layer {self.layer} of {seq} tokens"
        if mv.reduces_in_trace:  # nnsight / Hugging Face: reduced where the model runs
            factor = -(-seq // OVERVIEW_CELLS) if long else 1
            scale = transport.color_scale(self.color_scale, seq, step=factor)
            request = {"factor": factor, "pool": self.pool, **({"scale": scale} if scale["kind"] != "linear" else {})}
            if mv.remote:  # the shown head's queries and keys come back too: its zoom and hover then run here
                request["head_inputs"] = self.head
            layer, head = self.layer, self.head

            def show_traced(reduced: dict[str, Any]) -> None:
                if "his" in reduced:  # auto: each head's largest weight, found where the model ran
                    scale["his"] = reduced["his"].tolist()
                lod = {"n": seq, "factor": factor, "pool": self.pool, "exact": True} if factor > 1 else None
                drawn = reduced["codes"].float() / transport.CODE_MAX  # re-encoded to the very same codes
                fields = {"lod": lod} if lod else {}
                payload = self.payload_uint8(drawn, layer=layer, labels=str_tokens, ids=ids, compress=True, scale=scale, **fields)
                self._shown, self._parts = None, {"n": seq, "traced": (tuple(ids), layer), "inputs": {}}
                if "inputs" in reduced:
                    self._keep_inputs(head, reduced["inputs"])
                self.tokens, self.str_tokens, self.patterns = ids, str_tokens, payload
                self._send_row()

            self._compute(lambda: _cache.traced(mv, tuple(ids), layer, request), show_traced, long=long, what=what)
            return
        if long:
            factor, layer = -(-seq // OVERVIEW_CELLS), self.layer
            self._set(memory_note=memory_note(mv.memory_reason(layer), mv.n_heads, seq, mv.dtype))

            def show_parts(parts: dict[str, Any]) -> None:
                self._draw(str_tokens, parts=parts, ids=ids)
                self.tokens = ids

            pool = self.pool
            self._compute(lambda: _cache.attention_parts(mv, tuple(ids), layer, factor, pool), show_parts, long=True, what=what)
            return
        shown = self._layer_patterns(tokens, self.layer)
        self._set(memory_note="")
        self._draw(str_tokens, shown=shown, ids=ids)
        self.tokens = ids

    def _compute(self, compute: Callable[[], Any], show: Callable[[Any], None], *, long: bool, what: str) -> None:
        """``show(compute())``, with a tqdm bar for long work (in a notebook cell: the cell's progress bar), so that
        the code after it in a cell or script reads the picture. Long work the browser asked for (a prompt edit, a
        layer or scale switch in the widget) runs on the worker thread (`_background`) instead: the widget shows
        its progress and a Cancel button meanwhile, and the picture when it is done."""
        loop = in_kernel() if long and self._may_defer and self._for_browser else None
        if loop is None:
            with progress_of.console(f"{type(self).__name__}: {what}", enabled=long):
                result = compute()
            show(result)
            return
        job = self._job = _Job(what)
        stages, shown_at = progress_of.Stages(), [0.0]
        self._set(progress={"running": True, "text": "", "fraction": 0.0})

        def work(report: Callable[[int, int], None]) -> Any:
            def on_step(stage: str, done: int, total: int) -> None:
                report(0, 1)  # raises Superseded once this run is not wanted (cancelled, a newer input, closed)
                stages(stage, done, total)
                now = time.monotonic()
                if now - shown_at[0] >= PROGRESS_S:
                    shown_at[0] = now
                    loop.call_soon_threadsafe(self._show_progress, job, stages.text, stages.fraction)

            with progress_of.reporting(on_step):
                return compute()

        _background.submit(
            loop, work, wanted=lambda: job is self._job and not self._closed, on_progress=lambda percent: None,
            on_done=lambda result, error: self._computed(job, show, result, error),
        )

    def _show_progress(self, job: _Job, text: str, fraction: float) -> None:
        if job is self._job and not self._closed:
            self._set(progress={"running": True, "text": text, "fraction": round(fraction, 3)})

    def _computed(self, job: _Job, show: Callable[[Any], None], result: Any, error: BaseException | None) -> None:
        """The end of a long run, on the kernel's loop: its picture, its error, or that it was cancelled."""
        if self._closed or (job is not self._job and not job.cancelled):
            return  # superseded: the newer run shows its own
        self._job = None
        try:
            with self.hold_sync(), self._quietly():
                if job.cancelled:
                    shown = "the picture below is of the input before" if self.patterns.get("data") else "nothing is drawn yet"
                    self._show_error(f"cancelled: {job.what} was not computed; {shown} "
                                     "(refresh() or change an input to compute it)", "refresh")
                elif error is not None:
                    self._show_error(described(error), "refresh")
                else:
                    show(result)
                    self._clear_error("refresh")
        except Exception as exc:  # (show failed: say so, as a refresh does)
            self._show_error(described(exc), "refresh")
        finally:
            self._set(progress={}, busy=False)

    def _check_cancel(self, value: int) -> int:
        if not 0 <= value < 2**31:
            raise ValueError(f"cancel counts the presses of Cancel: an int from 0; got {value}")
        return value

    @traitlets.observe("layer", "pool", "lod", "color_scale", "tokens", "prompt", "source")
    def _on_new_input(self, change: dict) -> None:
        """A long run of the inputs before is not wanted any more (its refresh comes after a coalescing wait: the
        old run's picture must not land in between, under the new input)."""
        if self._job is not None:
            self._job = None  # (its next block raises Superseded; its result is dropped)
            self._set(progress={})

    @traitlets.observe("cancel")
    def _on_cancel(self, change: dict) -> None:
        job = self._job
        if job is not None:
            job.cancelled = True
            self._job = None  # (its next block raises Superseded)

    def _computing(self) -> bool:
        return self._job is not None

    def _draw(
        self, labels: list[str], *, shown: torch.Tensor | None = None, parts: dict[str, Any] | None = None, **fields: Any
    ) -> None:
        """Send the picture: every cell of `shown` ``[H, n, n]``, or for a long prompt the overview of `parts`.

        `parts` holds ``"n"``, ``"overview"`` (by pool, filled here) and either the whole float32
        ``"patterns"`` or the layer's q, k and lse (`_block` cuts tiles and rows from them).
        `fields` go into the payload with the layer and the labels (the token strings).
        """
        if parts is not None:
            n = parts["n"]
            factor = -(-n // OVERVIEW_CELLS)
            if self.pool not in parts["overview"]:  # the other pooling of a cached run: from its parts
                parts["overview"][self.pool] = self._block(None, 0, n, 0, n, factor, parts=parts)
            drawn = parts["overview"][self.pool]
            fields["lod"] = {"n": n, "factor": factor, "pool": self.pool, "exact": parts["patterns"] is None}
            if not self._causal:  # (tensors given: e.g. a bidirectional encoder's) cells above the diagonal too
                fields["lod"]["causal"] = False
        else:
            drawn = shown
        n, step = drawn.shape[-1], 1 if parts is None else fields["lod"]["factor"]
        positions, scale = transport.scaled(drawn, self.color_scale, parts["n"] if parts else n, step=step, causal=self._causal)
        payload = self.payload_uint8(positions, layer=self.layer, labels=labels, compress=True, scale=scale, **fields)
        self._shown, self._parts = shown, parts
        self.str_tokens = labels
        self.patterns = payload
        self._send_row()

    def _block(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1, parts: dict | None = None
    ) -> torch.Tensor:
        """Exact weights ``[heads, rows, cols]`` of the layer on screen, or of `parts`, pooled over `step` with `pool`, on CPU."""
        heads = slice(None) if head is None else slice(head, head + 1)
        if parts is None and self._shown is not None:
            return long_patterns.pool(self._shown[heads, row0:row1, col0:col1], step, self.pool)
        parts = parts or self._parts
        if parts is None:
            raise ValueError(f"nothing drawn yet: {self.error or 'no input'}")
        if "traced" in parts and parts["inputs"] and head is not None:  # a remote model: its head's cells here
            return self._block_here(head, row0, row1, col0, col1, step, parts)
        if "traced" in parts:  # a trace answers with the exact cells, pooled where the model runs
            tokens, layer = parts["traced"]
            request = {"block": (head, row0, row1, col0, col1, step), "pool": self.pool}
            return _cache.traced(self.mv, tokens, layer, request)["block"][0].to("cpu", torch.float32)
        if parts["patterns"] is not None:  # the model's scores have more than q.k: kept whole
            return long_patterns.pool(parts["patterns"][heads, row0:row1, col0:col1], step, self.pool)
        q, k, lse = parts["q"][heads], parts["k"][heads], parts["lse"][heads]
        block = long_patterns.pooled_block(q, k, lse, parts["scale"], row0, row1, col0, col1, step, self.pool)
        return block.to("cpu", torch.float32)

    def _keep_inputs(self, head: int, inputs: dict[str, Any]) -> None:
        """Keep a remote head's attention-call inputs (queries, keys, options) and say what they weighed."""
        parts = self._parts or {}
        parts["inputs"][head] = inputs
        size = sum(t.numel() * t.element_size() for t in (inputs["q"], inputs["k"]))
        self._set(remote_note=f"H{head}'s queries and keys are here ({size / 1e6:.2f} MB, downloaded once): "
                  "its zoom, pan and hover run on this machine; another head costs one request")

    def _block_here(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int, parts: dict[str, Any]
    ) -> torch.Tensor:
        """Exact cells of the heads whose inputs are here (`head`, or every head kept: the others NaN)."""
        held = parts["inputs"]
        if head is not None and head not in held:
            self._keep_inputs(head, self._fetch_inputs(head, parts))
        heads = [head] if head is not None else range(self.info["n_heads"])
        rows, cols = -(-(row1 - row0) // step), -(-(col1 - col0) // step)
        out = torch.full((len(heads), rows, cols), float("nan"))
        for i, h in enumerate(heads):
            if h in held:
                q, k, options = held[h]["q"], held[h]["k"], held[h]["options"]
                out[i] = long_patterns.block_from_inputs(q, k, options, row0, row1, col0, col1, step, self.pool)[0]
        return out

    def _fetch_inputs(self, head: int, parts: dict[str, Any]) -> dict[str, Any]:
        """One request for `head`'s attention-call inputs (a head switch of a remote model)."""
        tokens, layer = parts["traced"]
        return _cache.traced(self.mv, tokens, layer, {"head_inputs": head})["inputs"]

    def _seq(self) -> int:
        return self._shown.shape[1] if self._shown is not None else (self._parts or {}).get("n", 0)

    def _send_row(self) -> None:
        """Exact weights of the selected query (every head), for the read-out.

        A selection past the end of a new, shorter prompt is dropped, as the view drops it; a row of
        an earlier picture is never left in ``row`` (Python reads what the page shows).
        """
        seq: int = self._seq()
        if not seq:  # nothing drawn yet
            return
        cells = [(self.selection or {}).get(name) for name in ("query", "key")]
        if any(isinstance(cell, int) and cell >= seq for cell in cells):
            self._set(selection={"query": None, "key": None, "locked": False})
        query = (self.selection or {}).get("query")
        if not isinstance(query, int) or not 0 <= query < seq:
            if self.row.get("revision") not in (None, self.patterns.get("revision")):
                self._set(row=self.empty_payload(query=None))
            return
        parts = self._parts or {}
        if parts.get("inputs"):  # a remote model: the rows of the heads whose inputs are here (the others NaN), no trace
            if self.head not in parts["inputs"]:  # (a head switch: one request)
                self._keep_inputs(self.head, self._fetch_inputs(self.head, parts))
            row = self._block_here(None, query, query + 1, 0, seq, 1, parts)[:, 0, :]
        else:
            row = self._block(None, query, query + 1, 0, seq)[:, 0, :]
        self._set(row=self.payload_float32(row, query=query, layer=self.patterns["layer"], revision=self.patterns["revision"]))

    def _selection_row(self) -> None:
        try:  # a row of a traced model is a run, which can fail: say so rather than raise from a hover
            self._send_row()
        except Exception as exc:
            self._show_error(refusal("selection", self.selection, exc), "selection")

    def _answer_tile(self) -> None:
        """Answer `tile_request` (the latest one) with its pooled exact cells; a stale request gets nothing.

        A request is answered, not refused: a bad one (its structure and ranges are checked here)
        shows its message in the widget and gets no answer, from Python as from the browser.
        """
        request = self.tile_request
        if not request or self._closed:
            return
        try:
            answer = self._tile_for(request)
        except Exception as exc:
            self._show_error(refusal("tile_request", request, exc), "tile_request")
            return
        if answer is not None:
            self._clear_error("tile_request")
            self._set(tile=answer)

    def _tile_for(self, request: dict) -> dict[str, Any] | None:
        if set(request) != set(TILE_FIELDS) or any(isinstance(v, bool) or not isinstance(v, int) for v in request.values()):
            raise ValueError(f"tile_request needs integer fields {', '.join(TILE_FIELDS)} and no others; got {short(request)}")
        if request["revision"] < self.patterns.get("revision", 0):
            return None  # asked of an earlier picture
        if (request["revision"], request["layer"]) != (self.patterns.get("revision"), self.patterns.get("layer")):
            raise ValueError(f"tile_request layer={request['layer']}, revision={request['revision']} names no picture drawn")
        seq, heads = self._seq(), self.info["n_heads"]  # (not self.mv: a tile belongs to the picture on screen)
        head, step, row0, col0 = request["head"], request["step"], request["row0"], request["col0"]
        if not 0 <= head < heads:
            raise ValueError(f"tile_request head={head} is out of range: this model has heads 0..{heads - 1}")
        if not 1 <= step <= max(seq, 1):
            raise ValueError(f"tile_request step={step} is out of range: 1..{seq}")
        row1, col1 = min(seq, row0 + request["rows"]), min(seq, col0 + request["cols"])
        if not (0 <= row0 < row1 and 0 <= col0 < col1):
            raise ValueError(f"tile_request rows {row0}+{request['rows']}, cols {col0}+{request['cols']} is outside 0..{seq}")
        if -(-(row1 - row0) // step) > TILE_CELLS or -(-(col1 - col0) // step) > TILE_CELLS:
            raise ValueError(f"tile_request asks for more than {TILE_CELLS} x {TILE_CELLS} cells; use a larger step")
        return self._tile(head, row0, row1, col0, col1, step, id=request["id"])

    def _tile(self, head: int, row0: int, row1: int, col0: int, col1: int, step: int, **extra: Any) -> dict[str, Any]:
        """Payload of one head's cells ``row0:row1, col0:col1`` pooled over `step` (NaN code above the diagonal)."""
        values = self._block(head, row0, row1, col0, col1, step)[0]
        top = torch.arange(row0, row1, step)[:, None] + step - 1
        left = torch.arange(col0, col1, step)[None, :]
        if self._causal:  # blocks entirely above the diagonal hold nothing
            values = values.masked_fill(left > top, float("nan"))
        fields = {"layer": self.patterns["layer"], "head": head, "row0": row0, "col0": col0, "rows": row1 - row0,
                  "cols": col1 - col0, "step": step, "pool": self.pool, **extra}
        shown = self.patterns["scale"]  # the picture's scale: auto keeps the head's range of the overview
        his = None if shown["his"] is None else shown["his"][head : head + 1]
        positions, scale = transport.scaled(
            values, shown["kind"], self._seq(), row0=row0, step=step, causal=self._causal, his=his
        )
        return transport.uint8_payload(
            positions, layout="full", compress=True, revision=self.patterns["revision"], scale=scale, **fields
        )

    def _prepare_export(self) -> None:
        super()._prepare_export()
        if self._job is not None:  # a long run still going: the page gets its picture, computed now
            self._job, self._may_defer = None, False
            try:
                self._run_refresh(raise_bugs=True)
            finally:
                self._may_defer = True
        lod = (self.patterns or {}).get("lod")
        levels: list[dict[str, Any]] = []
        if lod and self._parts is not None:
            n, step, total = lod["n"], lod["factor"] // 2, 0
            while step >= 1 and math.ceil(n / step) ** 2 <= 4 * EXPORT_LEVEL_BYTES:
                level = self._tile(self.head, 0, n, 0, n, step, id=0)
                total += len(level["data"])
                if total > EXPORT_LEVEL_BYTES:
                    break
                levels.append(level)
                step //= 2
        self._set(levels=levels)

    def current_patterns(self) -> torch.Tensor:
        """Exact float32 patterns ``[n_heads, destination (query), source (key)]`` of the layer on screen.

        For a long prompt (level of detail) the kernel holds only the layer's queries, keys and row
        log-sum-exp: this rebuilds the whole matrix (n_heads x seq² float32: 3.2 GB for 12 heads
        at 8 192 tokens).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.AttentionPattern(cw.demo_model(), prompt="abab").current_patterns().shape
            torch.Size([4, 5, 5])
        """
        if self._shown is None and self._parts is None:
            raise ValueError(f"nothing drawn yet: {self.error or 'no input'}")
        n = self._seq()
        return self._shown if self._shown is not None else self._block(None, 0, n, 0, n)


def _head_names(names: Any, n_heads: int) -> list[str] | None:
    """`names` checked: None, or one str per head."""
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"head_names must be a list of str, one per head; got {type(names).__name__} {short(names)}")
    if len(names) != n_heads:
        raise ValueError(f"head_names has {len(names)} names but attention has {n_heads} heads: give one per head")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"head_names[{i}] must be a str; got {type(name).__name__} {short(name)}")
    return list(names)


def _layer_caption(layer_name: Any) -> str | None:
    """`layer_name` as the caption shown: a str as given, an int as "Layer <n>"."""
    if layer_name is None or isinstance(layer_name, str):
        return layer_name
    if isinstance(layer_name, int) and not isinstance(layer_name, bool):
        return f"Layer {layer_name}"
    raise TypeError(f"layer_name must be a str, an int or None; got {type(layer_name).__name__} {short(layer_name)}")


class AttentionFromTensors(ModelFree, AttentionPattern):
    """What `AttentionPattern.from_tensors` makes: an `AttentionPattern` of the tensors given, with no model.

    Layer, prompt and token ids cannot be set (no model to run: the message says so); the head is
    checked against the heads given. Tiles and exact rows of a long prompt are cut from the
    tensor kept in the kernel.

    Example:
        >>> import torch
        >>> w = AttentionFromTensors(["x", "y"], torch.tensor([[1.0, 0.0], [0.5, 0.5]]), layer_name=3)
        >>> w.info["layer_name"], w.current_patterns()[0, 1].tolist(), w.model is None
        ('Layer 3', [0.5, 0.5], True)
    """

    no_model = TENSOR_NOTE

    def __init__(self, tokens: Any, attention: Any, *, head_names: Any = None, layer_name: Any = None, **kwargs: Any) -> None:
        labels = token_strings(tokens)
        stack, facts = checked_attention(attention, len(labels))
        n_heads, n = stack.shape[0], stack.shape[1]
        names, caption = _head_names(head_names, n_heads), _layer_caption(layer_name)
        self._given_labels, self._given = labels, stack
        self._given_parts: dict[str, Any] = {"n": n, "patterns": stack, "overview": {}}  # long: overviews by pool
        self._shown, self._parts, self._causal = None, None, facts.causal
        super(AttentionPattern, self).__init__(None, **kwargs)  # (no model: AttentionPattern's own set-up runs it)
        self.info = {
            "n_layers": 0, "n_heads": n_heads, "attn_layers": [], "n_ctx": n, "has_tokenizer": False,
            "tensors": True, "head_names": names, "layer_name": caption, "note": tensor_note(facts),
        }
        self._start()

    def _check_layer(self, value: int) -> int:
        if value != 0:  # (the one layer there is; name it with layer_name)
            raise ValueError(f"layer={value}: {TENSOR_NOTE}")
        return value

    def _check_head(self, value: int) -> int:
        n_heads = self._given.shape[0]
        if not 0 <= value < n_heads:
            raise ValueError(f"head={value} is out of range: the tensors given have heads 0..{n_heads - 1}")
        return value

    def _no_model(self, value: Any) -> Any:
        raise ValueError(TENSOR_NOTE)

    _check_prompt = _check_tokens = _check_source = _no_model

    def _refresh(self) -> None:
        n_heads, n = self._given.shape[0], self._given.shape[1]
        if self._uses_lod(n, n_heads):
            self._draw(self._given_labels, parts=self._given_parts)
        else:
            self._draw(self._given_labels, shown=self._given)
