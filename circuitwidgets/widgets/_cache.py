"""A per-model cache of analysis results, shared by every widget on the same model.

Widgets on one model (a `Dashboard`'s children, or two cells of a notebook) ask for the same
scores: composition per kind, head scores per kind, copying scores, patterns of a prompt. This
module computes each once per model *and weight version*. Entries live under the model's
`ModelView` (`circuitwidgets.model.as_view`), which is rebuilt when the weights change in place
(an optimiser step, ``load_state_dict``), so a retrained model never reads stale scores; the
entries of a view nobody holds any more are dropped with it (weak references).

Each model keeps at most `MAX_ENTRIES` results and `MAX_BYTES` bytes of tensors, the least
recently used going first. Keys are tuples that start with the name of the computation, e.g.
``("composition", "K")`` or ``("patterns", (0, 17, 4), (0, 1))``.

Example:
    >>> import torch
    >>> import circuitwidgets as cw
    >>> from circuitwidgets.widgets import _cache
    >>> model = cw.demo_model()
    >>> calls = []
    >>> def work():
    ...     calls.append(1)
    ...     return torch.zeros(3)
    >>> _cache.cached(model, ("example",), work).shape, _cache.cached(model, ("example",), work).shape
    (torch.Size([3]), torch.Size([3]))
    >>> len(calls), _cache.is_cached(model, ("example",))
    (1, True)
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any, TypeVar

import torch

from .. import head_metrics
from ..analysis import attention_request
from ..model import ModelView
from ._views import current_view

T = TypeVar("T")

MAX_ENTRIES = 64  # results kept per model
MAX_BYTES = 1 << 30  # tensor bytes kept per model (1 GiB); one larger result is kept alone
#: The attention patterns of every layer of one prompt are kept (float32, CPU) while they hold at most this
#: many values (64 MB; GPT-2 small's 12 x 12 heads up to 333 tokens): the run of a logit attribution keeps
#: them too, so that the attention patterns and the pattern head scores of its prompt need no run of their own.
ALL_LAYERS_BUDGET = 16_000_000

# Widgets run background passes (OV top-k) on a worker thread that stores here too.
_LOCK = threading.Lock()
_STORE: weakref.WeakKeyDictionary[ModelView, OrderedDict[Hashable, Any]] = weakref.WeakKeyDictionary()


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


def _entries(model: Any) -> OrderedDict[Hashable, Any]:
    view = current_view(model)
    with _LOCK:
        store = _STORE.get(view)
        if store is None:
            store = OrderedDict()
            _STORE[view] = store
        return store


def _check_key(key: Any) -> tuple:
    if not isinstance(key, tuple) or not key or not isinstance(key[0], str):
        raise TypeError(f"key must be a tuple starting with a str (the computation's name); got {key!r}")
    hash(key)  # raises TypeError for an unhashable part
    return key


def cached(model: Any, key: tuple, compute: Callable[[], T], *, runs_model: bool = False) -> T:
    """The result stored under `key` for `model`, computing it with ``compute()`` the first time.

    A failing ``compute()`` stores nothing (its exception propagates). Treat results as
    read-only: they are shared between widgets. With ``runs_model=True`` (patterns, detector
    scores: a forward pass), a result computed while the model has hooks is never stored and a
    stored one never returned, so hooked and un-hooked use never see each other's results.

    Example:
        >>> import circuitwidgets as cw
        >>> from circuitwidgets.widgets import _cache
        >>> scores = _cache.cached(cw.demo_model(), ("copying_scores",), lambda: cw.analysis.copying_scores(cw.demo_model()))
        >>> scores.shape
        torch.Size([2, 4])
    """
    key = _check_key(key)
    if runs_model and current_view(model).hook_state():
        return compute()
    store = _entries(model)
    with _LOCK:
        if key in store:
            store.move_to_end(key)
            return store[key]
    value = compute()  # outside the lock: a background pass must not block the widgets
    _store(store, key, value)
    return value


def _store(store: OrderedDict[Hashable, Any], key: tuple, value: Any) -> None:
    """Keep `value` under `key`, dropping the least recently used entries beyond the limits."""
    with _LOCK:
        store[key] = value
        store.move_to_end(key)
        total = sum(_nbytes(v) for v in store.values())
        while len(store) > 1 and (len(store) > MAX_ENTRIES or total > MAX_BYTES):
            _, dropped = store.popitem(last=False)
            total -= _nbytes(dropped)


def is_cached(model: Any, key: tuple) -> bool:
    """True when `key` holds a result for `model` at its current weights (nothing is computed).

    Example:
        >>> import circuitwidgets as cw
        >>> from circuitwidgets.widgets import _cache
        >>> _cache.is_cached(cw.demo_model(), ("never computed",))
        False
    """
    key = _check_key(key)
    store = _entries(model)
    with _LOCK:
        return key in store


def clear(model: Any = None) -> None:
    """Forget the results of `model`, or of every model when `model` is None.

    Example:
        >>> import circuitwidgets as cw
        >>> from circuitwidgets.widgets import _cache
        >>> _cache.clear(cw.demo_model())
    """
    store = None if model is None else _entries(model)
    with _LOCK:
        (_STORE if store is None else store).clear()


# ----- the computations widgets share ---------------------------------------------------------


def composition(model: Any, kind: str) -> torch.Tensor:
    """Raw `analysis.composition_scores(model, kind)` ``[L, H, L, H]``, cached."""
    from ..analysis import composition_scores

    return cached(model, ("composition", kind), lambda: composition_scores(model, kind))


def head_scores(model: Any, kind: str, tokens: tuple[int, ...] | None = None) -> torch.Tensor:
    """`analysis.head_scores` ``[L, H]`` of `kind` (a weight metric such as ``"ov_copying"``: its weight view), cached.

    `tokens` is one sequence of ids as a tuple (hashable), or None for the default random tokens.
    The attention kinds of given tokens are read from the `patterns` of every layer (one run serves
    every kind, and the attention patterns or logit attribution of the same prompt) while those fit
    `ALL_LAYERS_BUDGET`: the very patterns `analysis.head_scores` computes, reduced the same way.
    """
    from ..analysis import head_scores as detector

    source = head_metrics.METRICS[kind].source
    if source == "weights":  # the same for every prompt
        return cached(model, ("head_scores", kind), lambda: detector(model, kind))
    if tokens is None:
        return cached(model, ("head_scores", kind, None), lambda: detector(model, kind), runs_model=True)
    view = current_view(model)
    ids = torch.tensor([list(tokens)], dtype=torch.long, device=view.device)

    def compute() -> torch.Tensor:
        layers = tuple(view.attn_layers)
        if source != "pattern" or len(tokens) < 2 or not _keeps_every_layer(view, len(tokens)):
            return detector(view, kind, ids)
        every = patterns(view, tokens, layers)  # (what detector runs, kept for the other kinds and widgets)
        return head_metrics.score_of_patterns(every[None].float().cpu(), ids.cpu(), kind)

    return cached(model, ("head_scores", kind, tokens), compute, runs_model=True)


def _keeps_every_layer(view: ModelView, seq: int) -> bool:
    """True when the patterns of every layer of `seq` tokens are kept whole (`ALL_LAYERS_BUDGET`), from a hook-point run."""
    return not view.reduces_in_trace and len(view.attn_layers) * view.n_heads * seq * seq <= ALL_LAYERS_BUDGET


def _find(model: Any, tokens: tuple[int, ...], layers: tuple[int, ...]) -> tuple[Any, tuple[int, ...]] | None:
    """A cached `patterns` entry of `tokens` holding every layer of `layers`, or None: its value (a tensor
    ``[layers, H, q, k]``, or a tuple of ``[H, q, k]``, one per layer) and its layers."""
    if current_view(model).hook_state():
        return None
    store = _entries(model)
    with _LOCK:
        for key, value in reversed(store.items()):
            if isinstance(key, tuple) and key[0] == "patterns" and key[1] == tokens and set(layers) <= set(key[2]):
                store.move_to_end(key)
                return value, key[2]
    return None


def patterns(model: Any, tokens: tuple[int, ...], layers: tuple[int, ...]) -> torch.Tensor:
    """`analysis.attention_patterns` of one sequence on `layers` ``[layers, H, q, k]`` (CPU), cached; cut from
    any cached entry of `tokens` that holds them (e.g. the run of a logit attribution)."""
    from ..analysis import attention_patterns

    found = _find(model, tokens, layers)
    if found is not None:
        value, held = found
        if isinstance(value, torch.Tensor) and held == layers:
            return value
        return torch.stack([value[held.index(layer)] for layer in layers])

    def compute() -> torch.Tensor:
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=current_view(model).device)
        return attention_patterns(model, ids, layers=list(layers)).to("cpu", torch.float32)

    return cached(model, ("patterns", tokens, layers), compute, runs_model=True)


def layer_patterns(model: Any, tokens: tuple[int, ...], layer: int, layers: tuple[int, ...]) -> torch.Tensor:
    """Patterns ``[H, q, k]`` of `layer`: from any cached `patterns` entry of `tokens` that holds it, else
    from `patterns` of `layers` (which must hold `layer`; the run stops at their last)."""
    found = _find(model, tokens, (layer,))
    if found is not None:
        value, held = found
        return value[held.index(layer)]
    return patterns(model, tokens, layers)[layers.index(layer)]


def residual_terms(model: Any, tokens: tuple[int, ...]) -> dict[str, Any]:
    """`ModelView.residual_terms` of one sequence (what a logit attribution reads), cached.

    The same run keeps the attention patterns of every layer as a `patterns` entry, when they fit
    `ALL_LAYERS_BUDGET` and are not cached yet: the attention patterns and the pattern head scores of
    the prompt then cost no run of their own.

    Example:
        >>> import circuitwidgets as cw
        >>> from circuitwidgets.widgets import _cache
        >>> model = cw.demo_model()
        >>> parts = _cache.residual_terms(model, (0, 2, 3, 2))
        >>> parts["z"].shape, _cache.is_cached(model, ("patterns", (0, 2, 3, 2), (0, 1)))
        (torch.Size([2, 4, 4, 16]), True)
    """
    view = current_view(model)
    layers = tuple(view.attn_layers)
    ids = view.check_tokens([list(tokens)])

    def compute() -> dict[str, Any]:
        if not _keeps_every_layer(view, len(tokens)) or _find(view, tokens, layers) is not None:
            return view.residual_terms(ids)
        parts = view.residual_terms(ids, patterns=layers)
        every = tuple(p.to("cpu", torch.float32) for p in parts.pop("patterns"))  # (per layer: no copy on the CPU)
        if not view.hook_state():  # (with hooks `cached` keeps nothing either)
            _store(_entries(view), ("patterns", tokens, layers), every)
        return parts

    return cached(view, ("residual_terms", tokens), compute, runs_model=True)


def kept(model: Any, key: tuple, compute: Callable[[], T]) -> T:
    """`analysis.attention_request`'s way to keep its results (its `Keep`): here, as runs of the model.

    A layer's patterns (``("layer_patterns", tokens, layer, layers)``) are cut from any entry of the
    same tokens that holds the layer (e.g. the run of a logit attribution), else computed for every
    layer of `layers` and kept so (`layer_patterns`).
    """
    if key[0] == "layer_patterns":
        _, tokens, layer, layers = key
        return layer_patterns(model, tokens, layer, layers)  # type: ignore[return-value]
    return cached(model, key, compute, runs_model=True)


def attention_parts(model: Any, tokens: tuple[int, ...], layer: int, factor: int, pool: str = "max") -> dict[str, Any]:
    """`analysis.attention_request.layer_parts` of one sequence, kept as the attention request keeps it."""
    view = current_view(model)
    compute = partial(attention_request.layer_parts, view, tokens, layer, factor, pool)
    return kept(view, ("attention_parts", tokens, layer, factor), compute)
