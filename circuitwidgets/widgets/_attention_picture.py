"""`AttentionPicture`: what the attention view draws, whoever answered it: a model's view, or tensors given.

The picture is one answer of `circuitwidgets.analysis.attention_request` (a `LayerAnswer`): every
cell of the layer (uint8, lower triangle when causal), or for a long prompt each head's overview
pooled over ``factor x factor`` cells. The view asks the kernel for more of the same answer: exact
tiles (``tile_request``, answered in ``tile``) and the hovered destination's exact row of every
head (``selection``, answered in ``row``); an exported page holds finer overviews of the shown head
(``levels``), so that it zooms deeper without a kernel.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import traitlets

from .. import transport
from ..analysis import long_patterns
from ..analysis.attention_request import LayerAnswer
from ._color import color_scale_trait
from ._contract import refusal, short
from .sequence import SequenceWidget

#: Largest tile side, in (pooled) cells, the kernel answers.
TILE_CELLS = 1024
#: The fields of a `tile_request`, every one an int.
TILE_FIELDS = ("id", "layer", "head", "row0", "col0", "rows", "cols", "step", "revision")
#: An exported page of a long prompt holds finer overviews of the shown head (pooled 2, 4, ... times
#: less than `patterns`) while their deflated bytes fit in this budget (and each level has at most
#: 4 x as many cells, so that a level that cannot fit is never computed).
EXPORT_LEVEL_BYTES = 8_000_000


class AttentionPicture(SequenceWidget):
    """Base of the attention widgets: one layer's answer drawn, its tiles, hover rows and export levels answered.

    A subclass's refresh gets a `LayerAnswer` and hands it to `_draw`.
    """

    controls: ClassVar[tuple[str, ...]] = ("selection", "pool", "lod", "tile_request", "color_scale")
    inputs: ClassVar[tuple[str, ...]] = ("pool", "lod", "color_scale")  # (a head switch: drawn by the browser)
    requests: ClassVar[tuple[str, ...]] = ("selection", "tile_request")

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
        help="payload of the exact float32 weights [heads, source (key)] of the selected destination (query), one row for "
        "each head in its 'heads' (every head; a remote model's: those whose queries and keys are here)"
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
    levels = traitlets.List(
        traitlets.Dict(),
        help="set by save_html for long prompts: finer overviews of the shown head, tiles of the whole pattern at steps "
        "factor/2, factor/4, ... (while they fit EXPORT_LEVEL_BYTES), so that the page zooms deeper without a kernel",
    ).tag(sync=True)

    def __init__(self, model: Any, **kwargs: Any) -> None:
        self._answer: LayerAnswer | None = None  # the answer drawn: every tile and row comes from it
        super().__init__(model, **kwargs)

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
        if self._ready:  # a row that runs the model (maybe remotely): from the browser, the latest hover wins
            self._soon("selection", self._selection_row, defer=self._answer is not None and self._answer.runs_model)

    # ----- the picture ---------------------------------------------------------------------------
    def _draw(self, labels: list[str], answer: LayerAnswer, **fields: Any) -> None:
        """Send `answer`'s picture, labelled with the token strings `labels`; `fields` go into the payload."""
        picture = answer.picture()
        if answer.lod:
            fields["lod"] = {"n": answer.n, "factor": answer.factor, "pool": answer.pool, "exact": answer.exact}
            if not answer.causal:  # (tensors given: e.g. a bidirectional encoder's) cells above the diagonal too
                fields["lod"]["causal"] = False
        if picture.scale is None:  # weights: drawn here, on the widget's colour scale
            step = answer.factor if answer.lod else 1
            positions, scale = transport.scaled(picture.values, self.color_scale, answer.n, step=step, causal=answer.causal)
        else:  # drawn where the model ran
            positions, scale = picture.values, picture.scale
        payload = self.payload_uint8(positions, layer=answer.layer, labels=labels, compress=True, scale=scale, **fields)
        self._answer = answer
        self._note_held()
        self.str_tokens = labels
        self.patterns = payload
        self._send_row()

    def _asked(self) -> LayerAnswer:
        if self._answer is None:
            raise ValueError(f"nothing drawn yet: {self.error or 'no input'}")
        self._verify_given()
        return self._answer

    def _verify_given(self) -> None:
        """ValueError when what the answer drawn was computed from changed since (a tensor given, edited in place)."""

    def _view_for(self, answer: LayerAnswer) -> Any:
        """How an answer gets the view it runs the model on for more of itself (checked only then: a remote model's
        zoom into the head it holds checks nothing); None when it holds all it answers."""
        return (lambda: self.mv) if answer.runs_model else None

    def _block(self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1) -> torch.Tensor:
        """Exact weights ``[heads, rows, cols]`` of the layer on screen, pooled over `step` with `pool`, on the CPU."""
        answer = self._asked()
        block = answer.block(head, row0, row1, col0, col1, step, self.pool, view=self._view_for(answer))
        self._note_held()
        return block

    def _note_held(self) -> None:
        """Say whose queries and keys a remote model's answer holds here (the head fetched last)."""
        held = self._answer.held if self._answer is not None else {}
        if held:
            head, size = list(held.items())[-1]
            self._set(remote_note=f"H{head}'s queries and keys are here ({size / 1e6:.2f} MB, downloaded once): "
                      "its zoom, pan and hover run on this machine; another head costs one request")

    def _seq(self) -> int:
        return self._answer.n if self._answer is not None else 0

    # ----- hover rows ---------------------------------------------------------------------------
    def _send_row(self) -> None:
        """Exact weights of the selected query (every head), for the read-out.

        A selection past the end of a new, shorter prompt is dropped, as the view drops it; a row of
        an earlier picture is never left in ``row`` (Python reads what the page shows).
        """
        seq = self._seq()
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
        answer = self._asked()
        row = answer.rows(query, self.head, view=self._view_for(answer))  # (a remote model: the shown head's, here)
        heads = answer.row_heads()  # (only rows known exactly travel: a remote model's, those of the heads it holds)
        self._note_held()
        self._set(row=self.payload_float32(row[heads], heads=heads, query=query, layer=self.patterns["layer"],
                                           revision=self.patterns["revision"]))

    def _selection_row(self) -> None:
        try:  # a row of a traced model is a run, which can fail: say so rather than raise from a hover
            self._send_row()
        except Exception as exc:
            self._show_error(refusal("selection", self.selection, exc), "selection")

    # ----- zoom tiles ---------------------------------------------------------------------------
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
        causal = self._asked().causal
        if causal:  # blocks entirely above the diagonal hold nothing
            values = values.masked_fill(left > top, float("nan"))
        fields = {"layer": self.patterns["layer"], "head": head, "row0": row0, "col0": col0, "rows": row1 - row0,
                  "cols": col1 - col0, "step": step, "pool": self.pool, **extra}
        shown = self.patterns["scale"]  # the picture's scale: auto keeps the head's range of the overview
        his = None if shown["his"] is None else shown["his"][head : head + 1]
        positions, scale = transport.scaled(values, shown["kind"], self._seq(), row0=row0, step=step, causal=causal, his=his)
        return transport.uint8_payload(
            positions, layout="full", compress=True, revision=self.patterns["revision"], scale=scale, **fields
        )

    # ----- export and Python ---------------------------------------------------------------------
    def _prepare_export(self) -> None:
        super()._prepare_export()
        lod = (self.patterns or {}).get("lod")
        levels: list[dict[str, Any]] = []
        if lod and self._answer is not None:
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
        n = self._asked().n
        return self._block(None, 0, n, 0, n)
