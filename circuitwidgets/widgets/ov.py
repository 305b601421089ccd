"""`OVCircuit`: a head's full OV circuit on a token subset, its eigenvalues, copying and top-k accuracy.

Also holds what `OVCircuit` and `QKCircuit` share: choosing the token subset, the layer/head
traits and their validation, and the per-model cache keys.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch
import traitlets

from .. import transport
from ..analysis import copying_score_of, ov_circuit, ov_top_k_accuracy
from ..model import ModelView, as_view
from . import _cache
from .base import CircuitWidget, _running_loop

#: A vocabulary this small is shown whole when no tokens are given.
WHOLE_VOCAB = 64
#: Tokens drawn at random (fixed seed) from a larger vocabulary when no tokens are given.
DEFAULT_COUNT = 40
DEFAULT_SEED = 0
#: Most tokens a subset may hold (a 256 x 256 block per head is 64 K values).
MAX_TOKENS = 256


# ----- token subsets ------------------------------------------------------------------------


def _tokenize_one(view: ModelView, text: str) -> int:
    if view.tokenizer is None:
        raise TypeError(f"token {text!r} is a string but this model has no tokenizer; pass token ids")
    ids = view.model.to_tokens(text, prepend_bos=False, truncate=False)[0].tolist()
    if len(ids) != 1:
        raise ValueError(f"token string {text!r} is {len(ids)} tokens, not one; pass token ids or single tokens")
    return int(ids[0])


def resolve_tokens(view: ModelView, tokens: Any = None, prompt: str | None = None) -> tuple[list[int], str]:
    """The token ids to show and the sentence that says how they were chosen.

    - `prompt`: its distinct tokens in order of first appearance (special tokens such as BOS left out).
    - `tokens`: ids (ints, a 1-D tensor) or token strings (each must be exactly one token); repeats dropped.
    - neither: the whole vocabulary when it has at most `WHOLE_VOCAB` tokens, else `DEFAULT_COUNT`
      non-special tokens drawn uniformly at random with seed `DEFAULT_SEED` (an unbiased sample:
      the copying score and top-k accuracy summarise the whole vocabulary).

    Example:
        >>> import circuitwidgets as cw
        >>> resolve_tokens(cw.as_view(cw.demo_model()), prompt="abca")
        ([2, 3, 4], 'the 3 distinct tokens of the prompt, in order of first appearance')
    """
    if tokens is not None and prompt is not None:
        raise ValueError("pass either tokens or prompt, not both")
    specials = set(view.special_token_ids)
    if prompt is not None:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        if not prompt:
            raise ValueError("prompt is empty: give some text whose tokens to show")
        if view.tokenizer is None:
            raise TypeError("this model has no tokenizer: pass tokens=[ids] instead of a prompt")
        ids = [int(i) for i in view.model.to_tokens(prompt, prepend_bos=False, truncate=False)[0].tolist()]
        distinct = list(dict.fromkeys(i for i in ids if i not in specials)) or list(dict.fromkeys(ids))
        chosen, criterion = distinct, f"the {len(distinct)} distinct tokens of the prompt, in order of first appearance"
    elif tokens is not None:
        if isinstance(tokens, str):
            raise TypeError("tokens takes a list of token ids or token strings; for the tokens of a text use prompt=")
        if isinstance(tokens, torch.Tensor):
            if tokens.ndim != 1 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
                raise TypeError(f"tokens must be a 1-D integer tensor; got shape {tuple(tokens.shape)}, dtype {tokens.dtype}")
            tokens = tokens.tolist()
        if not isinstance(tokens, Sequence):
            raise TypeError(f"tokens must be a list of token ids or strings; got {type(tokens).__name__}")
        ids = []
        for item in tokens:
            if isinstance(item, str):
                ids.append(_tokenize_one(view, item))
            elif isinstance(item, int) and not isinstance(item, bool):
                if not 0 <= item < view.d_vocab:
                    raise ValueError(f"token id {item} is out of range: 0..{view.d_vocab - 1}")
                ids.append(item)
            else:
                raise TypeError(f"tokens must hold ints or strings; got {item!r}")
        if not ids:
            raise ValueError("tokens is empty: give at least one token")
        chosen, criterion = list(dict.fromkeys(ids)), "tokens chosen by the caller"
    elif view.d_vocab <= WHOLE_VOCAB:
        chosen, criterion = list(range(view.d_vocab)), f"the whole vocabulary ({view.d_vocab} tokens)"
    else:
        pool = torch.tensor([i for i in range(view.d_vocab) if i not in specials])
        gen = torch.Generator().manual_seed(DEFAULT_SEED)
        picked = pool[torch.randperm(len(pool), generator=gen)[:DEFAULT_COUNT]].sort().values
        chosen = [int(i) for i in picked]
        criterion = (
            f"{len(chosen)} tokens drawn uniformly at random (seed {DEFAULT_SEED}) from the "
            f"{view.d_vocab:,}-token vocabulary; pass tokens= or prompt= to choose"
        )
    if len(chosen) > MAX_TOKENS:
        raise ValueError(f"{len(chosen)} tokens is too many to draw: at most {MAX_TOKENS}")
    return chosen, criterion


def str_tokens_of(view: ModelView, ids: list[int]) -> list[str]:
    """Each id's string (the id itself without a tokenizer)."""
    if view.tokenizer is None:
        return [str(i) for i in ids]
    return [view.tokenizer.decode([i]) for i in ids]


def encode_heads(blocks: torch.Tensor) -> tuple[bytes, dict[str, Any]]:
    """uint8 codes of ``[H, n, n]`` signed blocks, each head on its own symmetric range.

    The bytes are the heads one after another; ``meta["ranges"][h]`` is head h's ``[lo, hi]``.
    """
    parts, ranges = [], []
    for block in blocks:
        lo, hi = transport.symmetric_range(block)
        data, _ = transport.encode_uint8(block, lo=lo, hi=hi)
        parts.append(data)
        ranges.append([lo, hi])
    meta = {"dtype": "uint8", "shape": list(blocks.shape), "layout": "full", "nan_code": transport.NAN_CODE, "ranges": ranges}
    return b"".join(parts), meta


def decode_heads(data: bytes, meta: dict[str, Any]) -> torch.Tensor:
    """Inverse of `encode_heads` (up to quantisation), for tests."""
    n_heads, rows, cols = meta["shape"]
    size = rows * cols
    out = [
        transport.decode(data[h * size : (h + 1) * size], {**meta, "shape": [rows, cols], "lo": lo, "hi": hi})
        for h, (lo, hi) in enumerate(meta["ranges"])
    ]
    return torch.stack(out) if out else torch.zeros(0, rows, cols)


# ----- the shared widget base ---------------------------------------------------------------


class HeadCircuitWidget(CircuitWidget):
    """What OVCircuit and QKCircuit share: layer/head traits, token subset, model facts."""

    layer = traitlets.Int(0, help="block index of the attention layer shown").tag(sync=True)
    head = traitlets.Int(0, help="head shown; every head of the layer is in the browser").tag(sync=True)
    tokens = traitlets.List(traitlets.Int(), help="token ids of the rows and columns").tag(sync=True)
    str_tokens = traitlets.List(traitlets.Unicode(), help="token strings (ids without a tokenizer)").tag(sync=True)
    token_criterion = traitlets.Unicode("", help="how the tokens were chosen, shown in the widget").tag(sync=True)
    info = traitlets.Dict(help="model facts for the controls").tag(sync=True)

    def __init__(self, model: Any, layer: int, head: int, tokens: Any, prompt: str | None, **kwargs: Any) -> None:
        self._model = model
        view = as_view(model)
        self._ready = False
        self._internal = False
        ids, criterion = resolve_tokens(view, tokens, prompt)
        info = {
            "n_layers": view.n_layers,
            "n_heads": view.n_heads,
            "attn_layers": list(view.attn_layers),
            "d_head": view.d_head,
            "d_vocab": view.d_vocab,
            "n_ctx": view.n_ctx,
            "has_tokenizer": view.tokenizer is not None,
        }
        super().__init__(info=info, layer=layer, head=head, **kwargs)
        self._internal = True
        self.tokens = ids
        self.token_criterion = criterion
        self._internal = False

    @property
    def model(self) -> Any:
        """The model this widget shows."""
        return self._model

    @traitlets.validate("layer")
    def _valid_layer(self, proposal: dict) -> int:
        try:
            as_view(self._model).layer_index(proposal["value"])
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        return proposal["value"]

    @traitlets.validate("head")
    def _valid_head(self, proposal: dict) -> int:
        try:
            as_view(self._model).check_head(proposal["value"])
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        return proposal["value"]

    @traitlets.validate("tokens")
    def _valid_tokens(self, proposal: dict) -> list[int]:
        if self._internal:
            return proposal["value"]
        try:
            ids, _ = resolve_tokens(as_view(self._model), list(proposal["value"]))
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "tokens") from None
        return ids

    @traitlets.observe("tokens")
    def _on_tokens(self, change: dict) -> None:
        if self._ready and not self._internal:
            self._clear_error("tokens")
            self._internal = True
            self.token_criterion = "tokens chosen by the caller"
            self._internal = False
            self._request_refresh()

    @traitlets.observe("layer")
    def _on_layer(self, change: dict) -> None:
        self._clear_error("controls")
        if self._ready:
            self._request_refresh()

    @traitlets.observe("head")
    def _on_head(self, change: dict) -> None:
        self._clear_error("controls")  # the browser holds every head of the layer already
        if self._ready:
            self._after_head_switch()

    def _after_head_switch(self) -> None:
        pass

    def _layer_key(self) -> tuple:
        return (self.layer, tuple(self.tokens))


# ----- OV -----------------------------------------------------------------------------------


def _ov_block(model: Any, layer: int, head: int, ids: list[int]) -> torch.Tensor:
    """``(W_E W_V W_O W_U)[ids][:, ids]`` via the d_model-sized `ov_circuit` (no vocab-wide factor)."""
    view = as_view(model)
    index = torch.tensor(ids, device=view.device)
    circuit = ov_circuit(model, layer, head)
    embed = view.W_E[index].to(circuit.dtype)
    unembed = view.W_U[:, index].to(circuit.dtype)
    return (embed @ circuit @ unembed).dense().float().cpu()


def _unembed_embed(model: Any) -> torch.Tensor:
    """``W_U W_E`` (d_model x d_model, one pass over the vocabulary), cached per model."""

    def compute() -> torch.Tensor:
        view = as_view(model)
        dtype = torch.float32 if view.dtype in (torch.float16, torch.bfloat16) else view.dtype
        return view.W_U.to(dtype) @ view.W_E.to(dtype)

    return _cache.cached(model, ("W_U W_E",), compute)


def _ov_layer_eigenvalues(model: Any, layer: int) -> torch.Tensor:
    """Non-zero eigenvalues of every head's full OV circuit in `layer`: complex ``[H, d_head]``.

    Same values as `analysis.ov_eigenvalues` (eigenvalues of ``W_E W_OV W_U`` equal those of
    ``W_OV (W_U W_E)``), but with ``W_U W_E`` formed once per model instead of two
    vocabulary-wide products per head (GPT-2 shape: 0.02 s per head instead of 0.37 s).
    """

    def compute() -> torch.Tensor:
        unembed_embed = _unembed_embed(model)
        values = []
        for head in range(as_view(model).n_heads):
            circuit = ov_circuit(model, layer, head)
            values.append((circuit @ unembed_embed.to(circuit.dtype)).eigenvalues())
        return torch.stack(values).cpu()

    return _cache.cached(model, ("ov_eigenvalues", layer), compute)


#: Rows x vocabulary entries per chunk of the background top-k pass (32 MB of float32): on GPT-2
#: small's shape one chunk takes ~30 ms, the longest a head switch waits for the CPU.
_CHUNK_ENTRIES = 2**23
#: Seconds the background pass waits after a head switch before starting, so that stepping
#: through heads (arrow keys, a linked dashboard) draws at once and only the head that stays runs.
SETTLE_S = 0.3


def _top_k_pair(model: Any, layer: int, head: int, progress: Any = None) -> tuple[float, float]:
    """``(top-1, top-5)`` accuracy of the full OV circuit over the whole vocabulary, cached.

    One pass for both k, in chunks of `_CHUNK_ENTRIES` so that a `progress` callback that
    raises (the user chose another head) stops it within a few tens of milliseconds.
    """

    def compute() -> tuple[float, float]:
        view = as_view(model)
        ks = (1, min(5, view.d_vocab))
        chunk = max(1, _CHUNK_ENTRIES // view.d_vocab)
        return ov_top_k_accuracy(model, layer, head, k=ks, chunk_size=chunk, progress=progress)

    return _cache.cached(model, ("ov_top_k", layer, head), compute)


class _Superseded(Exception):
    """Raised inside a background top-k pass whose head is no longer shown."""


# One worker for every widget: top-k passes are CPU-bound, running two at once gains nothing.
_WORKER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="circuitwidgets")


class OVCircuit(HeadCircuitWidget):
    """The full OV circuit ``W_E W_V W_O W_U`` of a head on a token subset, and whether it copies.

    Left: heatmap of source token (row: the token attended to) × output logit (column), the
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
        accuracy: compute top-1/top-5 accuracy (a pass over the vocabulary per head:
            about 14 s on GPT-2 small's shape on 2 CPU cores).

    Traits (all synced with the browser):
        layer (int), head (int): the head shown; out-of-range values raise ``TraitError`` and
            show the message in the widget. Switching head is instant (the layer is sent whole).
        tokens (list[int]), str_tokens (list[str]), token_criterion (str): the token subset.
        ov (bytes) + ov_meta (dict): the layer's blocks ``[n_heads, n, n]`` as uint8, each head on
            its own symmetric range ``ov_meta["ranges"][h]`` (see `encode_heads`).
        values (bytes) + values_meta (dict): the same blocks as exact float32, for read-outs.
        eigenvalues (bytes) + eigenvalues_meta (dict): float32 ``[n_heads, d_head, 2]`` (real, imaginary).
        stats (list[dict]): per head of the layer ``{"copying", "top1", "top5"}``; top-k is None
            until computed.
        progress (str): what the background is computing, "" when idle.
        info (dict): model facts for the controls. error (str), busy (bool): see `CircuitWidget`.

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.OVCircuit(cw.demo_model(), 1, 0, tokens=["a", "b", "c"])
        >>> w.ov_meta["shape"], round(w.stats[0]["copying"], 2) > 0
        ([4, 3, 3], True)
    """

    _kind = traitlets.Unicode("ov").tag(sync=True)
    ov = traitlets.Bytes(b"", help="uint8 blocks [n_heads, n, n], one symmetric range per head").tag(sync=True)
    ov_meta = traitlets.Dict(help="shape, per-head ranges and layer of `ov`").tag(sync=True)
    values = traitlets.Bytes(b"", help="exact float32 blocks [n_heads, n, n]").tag(sync=True)
    values_meta = traitlets.Dict(help="shape of `values`").tag(sync=True)
    eigenvalues = traitlets.Bytes(b"", help="float32 [n_heads, d_head, 2]: real and imaginary parts").tag(sync=True)
    eigenvalues_meta = traitlets.Dict(help="shape of `eigenvalues`").tag(sync=True)
    stats = traitlets.List(traitlets.Dict(), help="per head: copying score, top-1 and top-5 accuracy").tag(sync=True)
    progress = traitlets.Unicode("", help="background computation in progress, '' when idle").tag(sync=True)

    def __init__(
        self,
        model: Any,
        layer: int = 0,
        head: int = 0,
        tokens: Any = None,
        *,
        prompt: str | None = None,
        accuracy: bool = True,
        **kwargs: Any,
    ) -> None:
        if not isinstance(accuracy, bool):
            raise TypeError(f"accuracy must be a bool; got {accuracy!r}")
        self._accuracy = accuracy
        self._lock = threading.Lock()
        self._queued: set[tuple] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        super().__init__(model, layer, head, tokens, prompt, **kwargs)
        self._ready = True
        self._run_refresh(raise_bugs=True)

    def _refresh(self) -> None:
        view = as_view(self._model)
        layer, ids = self.layer, list(self.tokens)
        blocks = torch.stack(
            [_cache.cached(self._model, ("ov_block", layer, h, tuple(ids)), lambda h=h: _ov_block(self._model, layer, h, ids))
             for h in range(view.n_heads)]
        )
        eigs = _ov_layer_eigenvalues(self._model, layer)
        codes, codes_meta = encode_heads(blocks)
        codes_meta["layer"] = layer
        exact, exact_meta = transport.encode_float32(blocks)
        pairs = torch.stack([eigs.real, eigs.imag], dim=-1).float()
        eig_data, eig_meta = transport.encode_float32(pairs)
        copying = copying_score_of(eigs)
        self._internal = True
        try:
            self.str_tokens = str_tokens_of(view, ids)
            self.values, self.values_meta = exact, {**exact_meta, "layer": layer}
            self.eigenvalues, self.eigenvalues_meta = eig_data, {**eig_meta, "layer": layer}
            self.stats = self._stats(layer, copying)
            self.ov = codes
            self.ov_meta = codes_meta
        finally:
            self._internal = False
        self._schedule_accuracy()

    def _stats(self, layer: int, copying: torch.Tensor) -> list[dict]:
        out = []
        for h in range(len(copying)):
            c = float(copying[h])
            row = {"copying": None if c != c else c, "top1": None, "top5": None}
            if _cache.is_cached(self._model, ("ov_top_k", layer, h)):
                row["top1"], row["top5"] = _top_k_pair(self._model, layer, h)
            out.append(row)
        return out

    # ----- top-k in the background -------------------------------------------------------------
    def _after_head_switch(self) -> None:
        self._schedule_accuracy()

    def _schedule_accuracy(self) -> None:
        """Compute top-k of the shown head: now without an event loop, else on the worker thread."""
        layer, head = self.layer, self.head
        key = ("ov_top_k", layer, head)
        if not self._accuracy or _cache.is_cached(self._model, key):
            return
        loop = _running_loop()
        if loop is None:
            self._apply_accuracy(layer, head, _top_k_pair(self._model, layer, head))
            return
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
        d_vocab = as_view(self._model).d_vocab
        label = f"computing top-1/top-5 accuracy of L{layer}H{head} over {d_vocab:,} tokens"
        self.progress = label + "…"
        reported = 0  # percent last sent to the browser

        def still_shown() -> None:
            if (self.layer, self.head) != (layer, head):
                raise _Superseded

        def report(done: int, total: int) -> None:
            nonlocal reported
            still_shown()
            percent = 100 * done // total
            if percent >= reported + 5:  # a trait message every 5%, not every chunk
                reported = percent
                loop.call_soon_threadsafe(self._show_progress, layer, head, f"{label}: {percent}%")

        def job() -> tuple[float, float]:
            time.sleep(SETTLE_S)
            still_shown()
            return _top_k_pair(self._model, layer, head, progress=report)

        def done(future: concurrent.futures.Future) -> None:
            loop.call_soon_threadsafe(self._finish_accuracy, layer, head, future)

        _WORKER.submit(job).add_done_callback(done)

    def _show_progress(self, layer: int, head: int, text: str) -> None:
        if ("ov_top_k", layer, head) in self._queued and (self.layer, self.head) == (layer, head):
            self.progress = text

    def _finish_accuracy(self, layer: int, head: int, future: concurrent.futures.Future) -> None:
        with self._lock:
            self._queued.discard(("ov_top_k", layer, head))
            idle = not self._queued
        try:
            result = future.result()
        except _Superseded:  # dropped for the head now shown; redone if the user comes back
            result = None
            if (self.layer, self.head) == (layer, head):  # ... which they already did
                self._schedule_accuracy()
                return
        except Exception as exc:  # shown, never a silent "computing…" forever
            self._show_error(f"top-k accuracy of L{layer}H{head} failed: {type(exc).__name__}: {exc}", "accuracy")
            result = None
        if idle:
            self.progress = ""
        if result is not None:
            self._apply_accuracy(layer, head, result)

    def _apply_accuracy(self, layer: int, head: int, result: tuple[float, float]) -> None:
        if layer != self.layer or not 0 <= head < len(self.stats):
            return  # the layer changed meanwhile; the result waits in the cache
        stats = [dict(row) for row in self.stats]
        stats[head]["top1"], stats[head]["top5"] = result
        self.stats = stats

    def wait(self, timeout: float | None = None) -> "OVCircuit":
        """Block until queued background work is done (for scripts and tests); returns self."""
        _WORKER.submit(lambda: None).result(timeout)
        return self

    def current_block(self) -> torch.Tensor:
        """Exact float32 block ``[n, n]`` of the head shown (rows: source tokens, columns: logits).

        Example:
            >>> import circuitwidgets as cw
            >>> cw.OVCircuit(cw.demo_model(), 1, 0, tokens=[2, 3]).current_block().shape
            torch.Size([2, 2])
        """
        return transport.decode(self.values, self.values_meta)[self.head]
