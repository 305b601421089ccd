"""One request for a picture of one attention layer: its overview, tiles and hover rows, at any length, on any model.

`ask(view, request)` answers a `LayerRequest` (one layer of one sequence, how its overview pools, the
head shown) from what the view says it can do, and the answer serves every later tile and row of
that picture:

- `WholeLayer`: the layer's patterns held whole. A short prompt (`ModelView.patterns`, one run that
  stops at the layer), or a long one whose scores are not ``q·k`` alone (ALiBi, soft-capping, a hook).
- `RebuiltLayer`: a long prompt on a model run here. Its queries, keys and row log-sum-exp
  (`ModelView.attention_inputs`, memory efficient, else `ModelView.attention_parts`): any block is
  rebuilt exactly from them (`circuitwidgets.analysis.long_patterns`).
- `TracedLayer`: a model that reduces its patterns where it runs (`ModelView.reduces_in_trace`: Hugging
  Face, nnsight). Overview codes made in the trace (`ModelView.reduced`); a tile or a row is one more trace.
- `RemoteLayer`: the same, run elsewhere (an `HFView` with ``remote=``). The shown head's queries and keys
  come back with the picture, so that its tiles and rows are rebuilt here with no new request.

Results are kept between requests by ``keep(view, key, compute)`` (default `keep_nothing`); a widget
passes its per-model cache. Keys: ``("layer_patterns", tokens, layer, layers)`` (the layer's
``[H, n, n]``, from one run of `layers`: a cache may keep them all), ``("attention_parts", tokens,
layer, factor)`` (`layer_parts`) and ``("traced", tokens, layer, request)`` (one `ModelView.reduced` answer).

Example:
    >>> import circuitwidgets as cw
    >>> view = cw.ModelView(cw.demo_model())
    >>> answer = ask(view, LayerRequest(tokens=(0, 2, 3, 2, 3), layer=1))
    >>> type(answer).__name__, answer.picture().values.shape, answer.rows(4).shape
    ('WholeLayer', torch.Size([4, 5, 5]), torch.Size([4, 5]))
    >>> long = ask(view, LayerRequest(tokens=(0, 2, 3, 2, 3), layer=1, lod=True, factor=2))
    >>> rebuilt = long.block(None, 0, 5, 0, 5)  # the exact cells, from the queries and keys kept
    >>> type(long).__name__, long.picture().values.shape, bool(rebuilt.allclose(answer.block(None, 0, 5, 0, 5), atol=1e-6))
    ('RebuiltLayer', torch.Size([4, 3, 3]), True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .. import in_trace
from . import long_patterns as lp

#: How results are kept between requests: ``keep(view, key, compute)`` is ``compute()`` or what is kept under `key`.
Keep = Callable[[Any, tuple, Callable[[], Any]], Any]
#: A run stops at the shown layer; the patterns of the layers below it, computed on the way, are
#: kept too while all of them fit in this many float32 values (switching down is then free).
ALL_LAYERS_BUDGET = 16_000_000
#: Largest difference allowed between the model's pattern and the one rebuilt from q, k and lse.
PARTS_TOLERANCE = 1e-4


def keep_nothing(view: Any, key: tuple, compute: Callable[[], Any]) -> Any:
    """The default `Keep`: every request computes."""
    return compute()


class LayerRequest(NamedTuple):
    """What a picture of one attention layer of one sequence asks for."""

    tokens: tuple[int, ...]  # the sequence's token ids
    layer: int  # block index of the attention layer
    lod: bool = False  # level of detail (a long prompt): an overview, and exact cells asked for by tile
    factor: int = 1  # the overview's cells each pool factor x factor positions
    pool: str = "max"  # how: "max" (a one-cell stripe stays visible) or "mean"
    scale: dict[str, Any] | None = None  # the colour scale (transport's meta) of an overview drawn where the model runs
    head: int = 0  # the head shown: a model run elsewhere sends its queries and keys with the picture


class Picture(NamedTuple):
    """The cells a picture draws: weights (`scale` None: drawn on the caller's colour scale), or colour
    positions already drawn where the model ran, on `scale` (transport's meta, ``his`` filled in)."""

    values: torch.Tensor  # [n_heads, rows, cols]
    scale: dict[str, Any] | None


class LayerAnswer:
    """What `ask` answers: the picture of one layer, and any block or row of it (exact float32 weights, on the CPU).

    An answer that may run the model for more of itself (`runs_model`) takes its `view`: the model's
    `ModelView`, or a function returning it (called only when a run is needed).
    """

    #: Asking for a block or a row may run the model (pass the view).
    runs_model = False

    def __init__(self, n: int, n_heads: int, layer: int, *, lod: bool, factor: int, pool: str, exact: bool,
                 causal: bool = True) -> None:
        self.n, self.n_heads, self.layer = n, n_heads, layer  # positions, heads, block index
        self.lod, self.factor, self.pool = lod, factor, pool  # the picture: an overview (lod) pooled so
        self.exact = exact  # blocks are the model's own cells (rebuilt, or from the trace), not cut from patterns held
        self.causal = causal  # nothing above the diagonal
        self.held: dict[int, int] = {}  # a model run elsewhere: bytes of each head's inputs held here, as fetched

    def picture(self) -> Picture:
        """The cells drawn: every cell of the layer, or (`lod`) its overview."""
        raise NotImplementedError

    def block(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1, pool: str = "max", view: Any = None
    ) -> torch.Tensor:
        """Weights ``[heads, rows, cols]`` of destinations ``row0:row1`` on sources ``col0:col1`` (`head`, or every
        head for None), pooled over ``step x step`` cells with `pool`."""
        raise NotImplementedError

    def rows(self, query: int, head: int = 0, view: Any = None) -> torch.Tensor:
        """Weights ``[n_heads, n]`` of destination `query` (`head` is the one shown)."""
        return self.block(None, query, query + 1, 0, self.n, view=view)[:, 0, :]

    def row_heads(self) -> list[int]:
        """The heads whose rows `rows` gives exactly (every head, but where only some heads' inputs are here)."""
        return list(range(self.n_heads))


class WholeLayer(LayerAnswer):
    """The layer's patterns ``[H, n, n]`` held whole (float32, CPU); a long one's overviews pooled from them."""

    def __init__(self, patterns: torch.Tensor, layer: int, *, lod: bool = False, factor: int = 1, pool: str = "max",
                 overview: dict[str, torch.Tensor] | None = None, causal: bool = True) -> None:
        super().__init__(patterns.shape[-1], patterns.shape[0], layer, lod=lod, factor=factor, pool=pool, exact=False,
                         causal=causal)
        self.patterns = patterns
        self.overview = {} if overview is None else overview  # by pool (shared: kept with the patterns)

    def picture(self) -> Picture:
        if not self.lod:
            return Picture(self.patterns, None)
        if self.pool not in self.overview:
            self.overview[self.pool] = lp.pool(self.patterns, self.factor, self.pool)
        return Picture(self.overview[self.pool], None)

    def block(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1, pool: str = "max", view: Any = None
    ) -> torch.Tensor:
        heads = slice(None) if head is None else slice(head, head + 1)
        return lp.pool(self.patterns[heads, row0:row1, col0:col1], step, pool)


class RebuiltLayer(LayerAnswer):
    """A long prompt's layer as its queries, keys and row log-sum-exp (`layer_parts`): blocks rebuilt exactly."""

    def __init__(self, parts: dict[str, Any], layer: int, *, factor: int, pool: str) -> None:
        super().__init__(parts["n"], parts["q"].shape[0], layer, lod=True, factor=factor, pool=pool, exact=True)
        self.parts = parts

    def picture(self) -> Picture:
        overview = self.parts["overview"]  # (the other pooling of a kept run: from its parts, kept with them)
        if self.pool not in overview:
            overview[self.pool] = self.block(None, 0, self.n, 0, self.n, self.factor, self.pool)
        return Picture(overview[self.pool], None)

    def block(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1, pool: str = "max", view: Any = None
    ) -> torch.Tensor:
        heads = slice(None) if head is None else slice(head, head + 1)
        q, k, lse = (self.parts[name][heads] for name in ("q", "k", "lse"))
        return lp.pooled_block(q, k, lse, self.parts["scale"], row0, row1, col0, col1, step, pool).to("cpu", torch.float32)


class TracedLayer(LayerAnswer):
    """A layer reduced where the model runs: overview codes drawn there; each block one more trace (pass the view)."""

    runs_model = True

    def __init__(self, request: LayerRequest, reduced: dict[str, Any], keep: Keep) -> None:
        super().__init__(len(request.tokens), reduced["codes"].shape[0], request.layer, lod=request.factor > 1,
                         factor=request.factor, pool=request.pool, exact=True)
        self.tokens, self.reduced, self.scale, self.keep = request.tokens, reduced, request.scale, keep

    def picture(self) -> Picture:
        drawn = self.reduced["codes"].float() / in_trace.CODE_MAX  # re-encoded to the very same codes
        scale = None if self.scale is None else dict(self.scale)
        if scale is not None and "his" in self.reduced:  # auto: each head's largest weight, found where the model ran
            scale["his"] = self.reduced["his"].tolist()
        return Picture(drawn, scale)

    def block(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1, pool: str = "max", view: Any = None
    ) -> torch.Tensor:
        answer = self.trace(view, {"block": (head, row0, row1, col0, col1, step), "pool": pool})
        return answer["block"][0].to("cpu", torch.float32)

    def trace(self, view: Any, request: dict[str, Any]) -> dict[str, Any]:
        """`ModelView.reduced`'s answer to `request` for this layer (kept by `keep`)."""
        return _traced(view() if callable(view) else view, self.tokens, self.layer, request, self.keep)


class RemoteLayer(TracedLayer):
    """A layer reduced where the model runs, elsewhere: the heads whose queries and keys came back are rebuilt here
    (`long_patterns.block_from_inputs`, as the trace does), with no request; another head costs one."""

    def __init__(self, request: LayerRequest, reduced: dict[str, Any], keep: Keep) -> None:
        super().__init__(request, reduced, keep)
        self.inputs: dict[int, dict[str, Any]] = {}  # head -> its attention call's q, k and options
        if "inputs" in reduced:
            self._hold(request.head, reduced["inputs"])

    def block(
        self, head: int | None, row0: int, row1: int, col0: int, col1: int, step: int = 1, pool: str = "max", view: Any = None
    ) -> torch.Tensor:
        if head is None:  # every head: one trace
            return super().block(head, row0, row1, col0, col1, step, pool, view)
        return self._here(self._fetch(head, view), row0, row1, col0, col1, step, pool)

    def rows(self, query: int, head: int = 0, view: Any = None) -> torch.Tensor:
        """The rows of the heads whose inputs are here (the shown `head`'s fetched if need be); NaN for the others."""
        self._fetch(head, view)
        out = torch.full((self.n_heads, self.n), float("nan"))
        for h, inputs in self.inputs.items():
            out[h] = self._here(inputs, query, query + 1, 0, self.n, 1, "max")[0, 0]
        return out

    def row_heads(self) -> list[int]:
        return sorted(self.inputs)

    def _fetch(self, head: int, view: Any) -> dict[str, Any]:
        if head not in self.inputs:  # (a head switch: one request)
            self._hold(head, self.trace(view, {"head_inputs": head})["inputs"])
        return self.inputs[head]

    def _hold(self, head: int, inputs: dict[str, Any]) -> None:
        self.inputs[head] = inputs
        self.held[head] = sum(t.numel() * t.element_size() for t in (inputs["q"], inputs["k"]))

    @staticmethod
    def _here(inputs: dict[str, Any], row0: int, row1: int, col0: int, col1: int, step: int, pool: str) -> torch.Tensor:
        block = lp.block_from_inputs(inputs["q"], inputs["k"], inputs["options"], row0, row1, col0, col1, step, pool)
        return block.to("cpu", torch.float32)


def runs_elsewhere(view: Any) -> bool:
    """True for a view whose model runs elsewhere (``remote=``): each of its traces is a request and a download."""
    return bool(view.runs_remotely)


def ask(view: Any, request: LayerRequest, keep: Keep = keep_nothing) -> LayerAnswer:
    """The answer to `request` from `view` (a `circuitwidgets.model.ModelView`): see the module's docstring."""
    tokens, layer = tuple(request.tokens), request.layer
    if view.reduces_in_trace:
        trace: dict[str, Any] = {"factor": request.factor, "pool": request.pool}
        if request.scale is not None and request.scale["kind"] != "linear":  # (linear: the weights themselves)
            trace["scale"] = request.scale
        remote = runs_elsewhere(view)
        if remote:  # the shown head's queries and keys come back too: its zoom and hover then run here
            trace["head_inputs"] = request.head
        reduced = _traced(view, tokens, layer, trace, keep)
        return (RemoteLayer if remote else TracedLayer)(request, reduced, keep)
    if request.lod:
        key = ("attention_parts", tokens, layer, request.factor)
        parts = keep(view, key, lambda: layer_parts(view, tokens, layer, request.factor, request.pool))
        if parts["patterns"] is not None:  # the model's scores have more than q.k: kept whole
            return WholeLayer(parts["patterns"], layer, lod=True, factor=request.factor, pool=request.pool,
                              overview=parts["overview"])
        return RebuiltLayer(parts, layer, factor=request.factor, pool=request.pool)
    layers = layers_on_the_way(view, layer, len(tokens))
    patterns = keep(view, ("layer_patterns", tokens, layer, layers), lambda: _layer_patterns(view, tokens, layer, layers))
    return WholeLayer(patterns, layer, pool=request.pool)


def memory_reason(view: Any, request: LayerRequest) -> str:
    """Why answering `request` holds each layer's ``n x n`` patterns on the way ('' where it need not: a short prompt,
    a memory-efficient run, a trace reduced block by block)."""
    return view.memory_reason(request.layer) if request.lod else ""


def layers_on_the_way(view: Any, layer: int, n: int) -> tuple[int, ...]:
    """The attention layers whose patterns a run to `layer` keeps: `layer` and, within `ALL_LAYERS_BUDGET`, those below."""
    below = [a for a in view.attn_layers if a <= layer]
    kept = max(1, ALL_LAYERS_BUDGET // max(1, view.n_heads * n * n))
    return tuple(below[-kept:])


def _layer_patterns(view: Any, tokens: tuple[int, ...], layer: int, layers: tuple[int, ...]) -> torch.Tensor:
    ids = torch.tensor([list(tokens)], dtype=torch.long, device=view.device)
    return view.patterns(ids, list(layers))[0, layers.index(layer)].to("cpu", torch.float32)


def _traced(view: Any, tokens: tuple[int, ...], layer: int, request: dict[str, Any], keep: Keep) -> dict[str, Any]:
    key = ("traced", tokens, layer, tuple(sorted((name, repr(value)) for name, value in request.items())))
    return keep(view, key, lambda: view.reduced(torch.tensor([list(tokens)]), {layer: request})[layer])


def layer_parts(view: Any, tokens: tuple[int, ...], layer: int, factor: int, pool: str = "max") -> dict[str, Any]:
    """What a long prompt's picture of `layer` needs, from one run that stops at the layer's pattern.

    Returns ``{"q", "k"`` ``[H, seq, d_head]``, ``"lse"`` ``[H, seq]`` (on the model's device),
    ``"scale"``, ``"n"``, ``"overview": {pool: [H, ceil(seq/factor)]²}`` (CPU; the other pooling is
    added from the parts when asked for), ``"error"`` (largest difference of rebuilt rows from the
    model's), ``"patterns"``}: None, or the float32 patterns (CPU) when rebuilding from q and k does not
    give the model's pattern (scores with other terms: ALiBi, soft-capping, a hook), kept whole instead.
    No layer holds an ``n x n`` matrix on the way where the model allows (`ModelView.attention_inputs`).

    Example:
        >>> import circuitwidgets as cw
        >>> parts = layer_parts(cw.ModelView(cw.demo_model()), (0, 2, 3, 2), 1, 2)
        >>> parts["q"].shape, parts["overview"]["max"].shape, parts["patterns"] is None
        (torch.Size([4, 4, 16]), torch.Size([4, 2, 2]), True)
    """
    scale = view.scale_of(layer)

    def from_pattern(pattern: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> dict[str, Any]:
        n = pattern.shape[-1]
        lse = lp.row_lse(q, k, scale, pattern)
        rows = [0, n // 3, n // 2, (2 * n) // 3, n - 2, n - 1]
        error = lp.max_error(pattern, q, k, lse, scale, [r for r in rows if 0 <= r < n])
        overview = {pool: lp.pool(pattern, factor, pool).cpu()}
        kept = pattern.cpu() if error > PARTS_TOLERANCE else None
        return {"q": q, "k": k, "lse": lse, "scale": scale, "n": n, "overview": overview, "error": error, "patterns": kept}

    def from_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, scaling: float) -> Any:
        n, scale = q.shape[1], 1.0 / scaling  # (the scale the layer itself used)
        lse, pooled = lp.lse_and_pool(q, k, scale, factor, pool)
        rows = [r for r in (0, 1, n // 3, n // 2, (2 * n) // 3, n - 2, n - 1) if 0 <= r < n]
        error, largest = lp.output_error(q, k, v, out, lse, scale, rows)
        if error > max(PARTS_TOLERANCE, in_trace.check_tolerance(view.dtype, largest)):
            return None  # not what the layer computed: the eager run, whose patterns are then kept whole
        overview = {pool: pooled.cpu()}
        return {"q": q, "k": k, "lse": lse, "scale": scale, "n": n, "overview": overview, "error": error, "patterns": None}

    ids = torch.tensor([list(tokens)], dtype=torch.long, device=view.device)
    parts = view.attention_inputs(ids, layer, from_inputs)  # no n x n anywhere, where the model allows
    return view.attention_parts(ids, layer, from_pattern) if parts is None else parts
