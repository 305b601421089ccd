"""Dataset-wide head metrics: what every head does across many texts, from one pass over them (HeadAtlas).

`scan_heads` runs the model over a list of texts in batches and keeps, per text and head, one value of
each metric, and per head the destinations where each metric is strongest. Patterns are reduced where
the model runs, layer by layer (inside a TransformerLens run's hooks; inside the nnsight trace for
Hugging Face, nnsight and NDIF models), so no ``[texts, heads, n, n]`` ever exists and memory does not
grow with the number of texts beyond a few numbers per text and head.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import head_metrics
from ..model import ModelView, as_view
from ._arguments import check_metric_names
from .detectors import computed_by
from .interventions import progress_of


class _Column(Mapping):
    """One column of the head-metric table (`head_metrics.METRICS`) as a live mapping name -> value, for the metrics
    `scan_heads` computes: a row added to the table shows here at once."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __getitem__(self, name: str) -> Any:
        return getattr(_scanned()[name], self.field)

    def __iter__(self) -> Iterator[str]:
        return iter(_scanned())

    def __len__(self) -> int:
        return len(_scanned())


def _scanned() -> dict[str, head_metrics.HeadMetric]:
    """The metrics `scan_heads` computes (pattern metrics per destination, weight metrics once a head), in table order."""
    return {name: m for name, m in head_metrics.METRICS.items() if m.scan and m.source in ("pattern", "weights")}


#: The default metrics (the table's, when this module was imported; `scan_heads` reads the table afresh each call).
SCAN_METRICS = tuple(_scanned())
PATTERN_METRICS = tuple(name for name, metric in _scanned().items() if metric.source == "pattern")
LABELS = _Column("label")
DESCRIPTIONS = _Column("definition")
#: Strongest destinations kept per head and metric (what `HeadScan.top` can list).
KEEP = 64
#: Texts per batch by default: the patterns of one layer of a batch stay under this many bytes ...
PATTERN_BUDGET = 256 * 2**20
#: ... and a batch holds at most this many token positions.
TOKEN_BUDGET = 16384
_FORMAT = "circuitwidgets.HeadScan/1"


def _check_metrics(metrics: Any) -> tuple[str, ...]:
    return check_metric_names(metrics, tuple(_scanned()))


def _token_lists(view: ModelView, texts: Any, max_tokens: int) -> list[list[int]]:
    """Each text's ids (a string tokenised with BOS), cut to `max_tokens` and the model's context."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of texts (or token ids [n, seq]); got one str: wrap it in a list")
    if isinstance(texts, torch.Tensor):
        if texts.ndim != 2:
            raise ValueError(f"token ids must be [n_texts, seq]; got shape {tuple(texts.shape)}")
        texts = texts.tolist()
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"texts must be a list of str or of token id lists; got {type(texts).__name__}") from None
    if not texts:
        raise ValueError("texts is empty: give at least one text")
    limit = min(max_tokens, view.n_ctx)
    lists: list[list[int]] = []
    for i, text in enumerate(texts):
        if not isinstance(text, (str, list, tuple, torch.Tensor)):
            raise TypeError(f"texts[{i}] must be a str or a list of token ids; got {type(text).__name__}")
        if not isinstance(text, str) and len(text) == 0:
            raise ValueError(f"texts[{i}] has no tokens")
        try:
            ids = view.to_tokens(text, truncate=True) if isinstance(text, str) else view.check_tokens([list(text)], truncate=True)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"texts[{i}]: {exc}") from None
        lists.append([int(t) for t in ids[0, :limit].tolist()])
        if not lists[-1]:
            raise ValueError(f"texts[{i}] has no tokens")
    return lists


def _batches(lengths: list[int], order: list[int], n_heads: int, batch_size: int | None) -> list[list[int]]:
    """`order` (text indices, longest first) cut into batches that fit the budgets (or `batch_size` texts)."""
    batches: list[list[int]] = []
    for index in order:
        if batches:
            current = batches[-1]
            n = lengths[current[0]]  # the longest of the batch: its padded length
            fits = len(current) + 1 <= batch_size if batch_size else (
                (len(current) + 1) * n_heads * n * n * 4 <= PATTERN_BUDGET and (len(current) + 1) * n <= TOKEN_BUDGET
            )
            if fits:
                current.append(index)
                continue
        batches.append([index])
    return batches


@dataclass
class HeadScan:
    """What every head does across a list of texts (made by `scan_heads`; `save` / `load` keep it).

    ``values[metric]``: float32 ``[n_texts, n_attn_layers, n_heads]``, the metric of each head on each text
    (NaN where the text is not scanned yet, or has no destination the metric is defined on: e.g. no repeated
    token for induction); ``head_values[metric]``: ``[n_attn_layers, n_heads]`` for the weight metrics.
    Rows follow ``layers`` (attention layers, block indices). See `scan_heads` for the definitions.
    """

    metrics: tuple[str, ...]
    layers: tuple[int, ...]
    n_heads: int
    max_tokens: int
    values: dict[str, torch.Tensor]
    head_values: dict[str, torch.Tensor]
    peak_positions: dict[str, torch.Tensor]  # [n_texts, L, H] int32: each text's strongest destination (-1: none)
    peak_values: dict[str, torch.Tensor]  # [n_texts, L, H] float32: the metric there
    best: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]  # metric -> (value, text, destination) [L, H, KEEP]
    token_ids: torch.Tensor  # every text's ids, one after another (int32)
    offsets: torch.Tensor  # [n_texts + 1]: text i is token_ids[offsets[i]:offsets[i + 1]]
    done: torch.Tensor  # bool [n_texts]
    model_name: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    #: The digest of the weights the scan ran on (`ModelView.weights_digest`; "" in files from before it was kept):
    #: ``resume=`` refuses to add texts scanned on other weights.
    weights: str = ""

    @property
    def n_texts(self) -> int:
        return int(self.done.numel())

    @property
    def n_done(self) -> int:
        return int(self.done.sum())

    @property
    def complete(self) -> bool:
        return bool(self.done.all())

    @property
    def weight_metrics(self) -> tuple[str, ...]:
        return tuple(self.head_values)

    @property
    def all_metrics(self) -> tuple[str, ...]:
        """The pattern metrics, then the weight metrics."""
        return (*self.metrics, *self.head_values)

    def __repr__(self) -> str:
        state = "complete" if self.complete else f"{self.n_done} of {self.n_texts} texts scanned"
        return (
            f"HeadScan({self.n_texts} texts, {len(self.layers)} layers x {self.n_heads} heads, "
            f"metrics {list(self.all_metrics)}, {state})"
        )

    # ----- reading ---------------------------------------------------------------------------------
    def _row(self, layer: int) -> int:
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int (a block index); got {layer!r}")
        if layer not in self.layers:
            raise ValueError(f"layer={layer} is not an attention layer of this scan: {list(self.layers)}")
        return self.layers.index(layer)

    def _head(self, head: int) -> int:
        if isinstance(head, bool) or not isinstance(head, int):
            raise TypeError(f"head must be an int; got {head!r}")
        if not 0 <= head < self.n_heads:
            raise ValueError(f"head={head} is out of range: the scan has heads 0..{self.n_heads - 1}")
        return head

    def _pattern_metric(self, metric: Any) -> str:
        if metric not in self.metrics:
            if metric in self.head_values:
                raise ValueError(f"{metric!r} is a weight metric: one value per head (see mean), no texts or positions")
            raise ValueError(f"metric {metric!r} was not scanned; this scan has {list(self.metrics)}")
        return metric

    def mean(self, metric: str) -> torch.Tensor:
        """``[n_attn_layers, n_heads]``: a pattern metric's mean over the texts scanned (NaN where no text has a value),
        or a weight metric's values."""
        if metric in self.head_values:
            return self.head_values[metric].clone()
        values = self.values[self._pattern_metric(metric)]
        return values.nanmean(0) if values.numel() else torch.full(values.shape[1:], float("nan"))

    def top(self, layer: int, head: int, metric: str, k: int = 10) -> list[tuple[int, int, float]]:
        """The `k` destinations where `metric` of head (`layer`, `head`) is largest over every text scanned:
        ``[(text_index, destination, value), ...]``, strongest first (at most `KEEP` are kept)."""
        row, head, metric = self._row(layer), self._head(head), self._pattern_metric(metric)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int; got {k!r}")
        values, texts, positions = (t[row, head] for t in self.best[metric])
        if k > values.numel():
            raise ValueError(f"k={k}: the scan kept the strongest {values.numel()} destinations per head")
        found = texts[:k] >= 0
        chosen = zip(texts[:k][found], positions[:k][found], values[:k][found], strict=True)
        return [(int(t), int(p), float(v)) for t, p, v in chosen]

    def deciles(self, layer: int, head: int, metric: str) -> list[tuple[int, int, int, float]]:
        """One example text per decile of the head's per-text `metric`: ``[(decile, text_index, destination,
        value), ...]`` from decile 9 (the top tenth) down to 0; `value` is the text's metric, `destination` its
        strongest destination there. The text is the middle one of its decile; with fewer than 10 texts with a
        value, each text is its own example (its decile from its rank)."""
        row, head, metric = self._row(layer), self._head(head), self._pattern_metric(metric)
        per_text = self.values[metric][:, row, head]
        texts = torch.nonzero(torch.isfinite(per_text)).flatten()
        if texts.numel() == 0:
            return []
        ranked = texts[per_text[texts].argsort(stable=True)]
        m = ranked.numel()
        picks = []
        for decile in range(9, -1, -1):
            lo, hi = math.ceil(decile * m / 10), math.ceil((decile + 1) * m / 10)
            if hi > lo:
                text = int(ranked[(lo + hi - 1) // 2])
                position = int(self.peak_positions[metric][text, row, head])
                picks.append((decile, text, position, float(per_text[text])))
        return picks

    def tokens_of(self, text: int) -> list[int]:
        """The token ids of text `text` as scanned (BOS first for a text given as a string)."""
        if isinstance(text, bool) or not isinstance(text, int) or not 0 <= text < self.n_texts:
            raise ValueError(f"text must be an index 0..{self.n_texts - 1}; got {text!r}")
        return self.token_ids[int(self.offsets[text]) : int(self.offsets[text + 1])].tolist()

    # ----- files -----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the scan to `path` (a torch file of plain tensors, read back by `HeadScan.load`); returns the path.

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> scan = cw.analysis.scan_heads(model, cw.analysis.repeated_random_tokens(model, 8, 4), progress=False)
            >>> again = cw.analysis.HeadScan.load(scan.save("/tmp/scan.pt"))
            >>> bool(torch.equal(again.values["induction"], scan.values["induction"]))
            True
        """
        path = Path(path)
        state = {name: getattr(self, name) for name in self.__dataclass_fields__}
        state["best"] = {metric: list(parts) for metric, parts in self.best.items()}
        state["metrics"], state["layers"] = list(self.metrics), list(self.layers)
        torch.save({"format": _FORMAT, **state}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> HeadScan:
        """A scan written by `save` (tensors only: loaded with ``weights_only=True``, no code runs)."""
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.pop("format", None) != _FORMAT:
            raise ValueError(f"{path} is not a HeadScan file (written by HeadScan.save)")
        try:
            state["best"] = {metric: tuple(parts) for metric, parts in state["best"].items()}
            state["metrics"], state["layers"] = tuple(state["metrics"]), tuple(state["layers"])
            scan = cls(**state)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path} is not a consistent HeadScan file: {exc}") from None
        scan.check(f"{path}")
        return scan

    def check(self, what: str = "the scan") -> HeadScan:
        """ValueError naming the first thing that does not fit (a file tampered with, or of another version): every
        tensor's shape and dtype against the texts, layers and heads; the offsets against the token ids; the kept
        destinations against the texts. Returns the scan.

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> scan = cw.analysis.scan_heads(model, cw.analysis.repeated_random_tokens(model, 8, 2), progress=False)
            >>> scan.n_heads = 7
            >>> scan.check()
            Traceback (most recent call last):
            ...
            ValueError: the scan: values['previous_token'] has shape (2, 2, 4), not (2, 2, 7) (texts, layers, heads)
        """

        def fail(why: str) -> ValueError:
            return ValueError(f"{what}: {why}")

        if not self.metrics and not self.head_values:
            raise fail("it holds no metric")
        if not self.layers or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in self.layers):
            raise fail(f"layers must be block indices; got {list(self.layers)}")
        if isinstance(self.n_heads, bool) or not isinstance(self.n_heads, int) or self.n_heads < 1:
            raise fail(f"n_heads must be a positive int; got {self.n_heads!r}")
        offsets, ids = self.offsets, self.token_ids
        if offsets.dim() != 1 or offsets.numel() < 1 or int(offsets[0]) != 0 or bool((offsets[1:] < offsets[:-1]).any()):
            raise fail("offsets must start at 0 and never decrease")
        if int(offsets[-1]) != ids.numel() or ids.dim() != 1:
            raise fail(f"the offsets end at {int(offsets[-1])} but there are {ids.numel()} token ids")
        n = offsets.numel() - 1
        if self.done.dtype != torch.bool or tuple(self.done.shape) != (n,):
            raise fail(f"done must be {n} booleans (one per text); got {self.done.dtype} {tuple(self.done.shape)}")
        grid = (n, len(self.layers), self.n_heads)
        for name in ("values", "peak_positions", "peak_values"):
            table = getattr(self, name)
            if set(table) != set(self.metrics):
                raise fail(f"{name} holds {sorted(table)}, not the metrics {list(self.metrics)}")
            for metric, tensor in table.items():
                if tuple(tensor.shape) != grid:
                    raise fail(f"{name}[{metric!r}] has shape {tuple(tensor.shape)}, not {grid} (texts, layers, heads)")
        for metric, tensor in self.head_values.items():
            if tuple(tensor.shape) != grid[1:]:
                raise fail(f"head_values[{metric!r}] has shape {tuple(tensor.shape)}, not {grid[1:]} (layers, heads)")
        for metric in self.metrics:
            parts = self.best.get(metric)
            if parts is None or len(parts) != 3 or any(tuple(t.shape[:2]) != grid[1:] for t in parts):
                raise fail(f"best[{metric!r}] must be three [layers, heads, kept] tensors")
            texts, positions = parts[1], parts[2]
            if bool((texts >= n).any()) or bool((texts < -1).any()):
                raise fail(f"best[{metric!r}] names texts outside 0..{n - 1}")
            lengths = (offsets[1:] - offsets[:-1])[texts.clamp(min=0)]
            if bool(((texts >= 0) & ((positions < 0) | (positions >= lengths))).any()):
                raise fail(f"best[{metric!r}] names destinations outside their text")
        return self


def _empty(view: ModelView, metrics: tuple[str, ...], ids: list[list[int]], max_tokens: int) -> HeadScan:
    n, shape = len(ids), (len(ids), len(view.attn_layers), view.n_heads)
    lengths = torch.tensor([0] + [len(t) for t in ids])
    keep = (len(view.attn_layers), view.n_heads, KEEP)
    return HeadScan(
        metrics=metrics,
        layers=tuple(view.attn_layers),
        n_heads=view.n_heads,
        max_tokens=max_tokens,
        values={m: torch.full(shape, float("nan")) for m in metrics},
        head_values={},
        peak_positions={m: torch.full(shape, -1, dtype=torch.int32) for m in metrics},
        peak_values={m: torch.full(shape, float("nan")) for m in metrics},
        best={
            m: (torch.full(keep, -math.inf), torch.full(keep, -1, dtype=torch.long), torch.full(keep, -1, dtype=torch.int32))
            for m in metrics
        },
        token_ids=torch.tensor([t for text in ids for t in text], dtype=torch.int32),
        offsets=lengths.cumsum(0),
        done=torch.zeros(n, dtype=torch.bool),
        model_name=type(view.user_model).__name__,
        weights=view.weights_digest(),
    )


def _defined(tokens: torch.Tensor, lengths: torch.Tensor, metric: str) -> torch.Tensor:
    """Boolean ``[batch, n]``: the destinations where `metric` is defined (inside the text, and per the metric)."""
    inside = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
    return inside & head_metrics.METRICS[metric].defined(tokens)


def _record(scan: HeadScan, metric: str, texts: list[int], scores: torch.Tensor, defined: torch.Tensor) -> None:
    """Fold one batch's per-destination `scores` ``[batch, L, H, n]`` into the scan."""
    weight = defined[:, None, None, :].float()
    count = weight.sum(-1)
    total = (scores * weight).sum(-1)
    index = torch.tensor(texts)
    scan.values[metric][index] = torch.where(count > 0, total / count.clamp_min(1), torch.tensor(float("nan")))
    masked = scores.masked_fill(~defined[:, None, None, :], -math.inf)
    peak, where = masked.max(-1)
    has = torch.isfinite(peak)
    scan.peak_values[metric][index] = torch.where(has, peak, torch.tensor(float("nan")))
    scan.peak_positions[metric][index] = torch.where(has, where, torch.tensor(-1)).to(torch.int32)
    # the strongest destinations so far, per head: the kept ones and this batch's, merged
    batch, n_layers, n_heads, n = masked.shape
    candidates = masked.permute(1, 2, 0, 3).reshape(n_layers, n_heads, batch * n)
    old_values, old_texts, old_positions = scan.best[metric]
    old_values = old_values.masked_fill(torch.isin(old_texts, index), -math.inf)  # a batch redone replaces its own
    flat = torch.arange(batch * n)
    values = torch.cat([old_values, candidates], -1)
    texts_all = torch.cat([old_texts, index[flat // n].expand(n_layers, n_heads, -1)], -1)
    positions_all = torch.cat([old_positions, (flat % n).to(torch.int32).expand(n_layers, n_heads, -1)], -1)
    top, order = values.topk(old_values.shape[-1], dim=-1)
    found = torch.isfinite(top)
    scan.best[metric] = (
        top,
        torch.where(found, texts_all.gather(-1, order), torch.tensor(-1)),
        torch.where(found, positions_all.gather(-1, order), torch.tensor(-1, dtype=torch.int32)),
    )


def scan_heads(
    model: Any,
    texts: Any,
    metrics: Any = SCAN_METRICS,
    *,
    max_tokens: int = 512,
    batch_size: int | None = None,
    progress: Any = True,
    resume: HeadScan | None = None,
    stop: Callable[[], bool] | None = None,
) -> HeadScan:
    """Every head's metrics on every text, from one pass over the texts: a `HeadScan`.

    Per text and head, with A the head's pattern ``[destination d, source s]`` on that text:

    - ``previous_token``: mean over d >= 1 of ``A[d, d-1]``;
    - ``first_token`` (the sink): mean over d >= 1 of ``A[d, 0]``;
    - ``duplicate_token``: mean, over the destinations whose token occurred earlier, of the attention on
      those earlier copies;
    - ``induction``: the same on the positions right after the earlier copies;
    - ``entropy``: mean over d of ``-sum_s A log A`` (nats); ``distance``: mean over d of
      ``sum_s A[d, s] (d - s)`` (tokens); ``self``: mean over d of ``A[d, d]``;
    - ``ov_copying`` (weights, one value per head): ``sum(eigenvalues) / sum(|eigenvalues|)`` of the full
      OV circuit (`copying_scores`).

    A text with no destination a metric is defined on (no repeated token, for induction) has NaN there.
    `HeadScan.top` lists the destinations where a metric is largest (per destination: ``A[d, d-1]``, the
    mass on the earlier copies, the row's entropy...).

    Args:
        model: any model the widgets take (TransformerLens, Hugging Face, nnsight, NDIF through an `HFView`).
        texts: a list of strings (tokenised with BOS) or token ids (``[n_texts, seq]`` or a list of lists);
            each cut to `max_tokens` (and the model's context).
        metrics: from `SCAN_METRICS` (default: all; ``ov_copying`` needs the weights on this machine and is
            left out of the default when they are not).
        batch_size: texts per run (default: as many as keep one layer's patterns under `PATTERN_BUDGET`
            and the batch under `TOKEN_BUDGET` positions). Texts run longest first, each batch padded on the
            right, which a causal model's earlier positions never see.
        progress: True (a tqdm bar), False/None, or ``progress(texts_done, n_texts)``.
        resume: a partial scan of the same texts (after a stop or an interrupt): filled in place and returned.
        stop: called before each batch; True stops there and returns the partial scan (``complete`` False).
            An interrupt (Ctrl-C, a notebook's stop button) does the same, with a warning.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> texts = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=8)
        >>> scan = cw.analysis.scan_heads(model, texts, progress=False)
        >>> scan.values["induction"].shape
        torch.Size([8, 2, 4])
        >>> (scan.mean("previous_token")[0] > 0.9).tolist(), scan.complete   # the previous-token heads L0H1, L0H3
        ([False, True, False, True], True)
        >>> text, destination, value = scan.top(1, 0, "induction", k=1)[0]
    """
    view = as_view(model)
    asked_default = metrics is SCAN_METRICS
    metrics = _check_metrics(tuple(_scanned()) if asked_default else metrics)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int; got {max_tokens!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None; got {batch_size!r}")
    table = head_metrics.METRICS
    weight_metrics = [m for m in metrics if table[m].source == "weights"]
    support = view.supports("weight_views")
    if weight_metrics and not support:
        if not asked_default:
            raise ValueError(f"the {weight_metrics[0]} metric: {support.reason}")
        weight_metrics = []
    pattern_metrics = tuple(m for m in metrics if table[m].source == "pattern")
    ids = _token_lists(view, texts, max_tokens)
    if resume is None:
        scan = _empty(view, pattern_metrics, ids, max_tokens)
    else:
        scan = resume
        if not isinstance(scan, HeadScan):
            raise TypeError(f"resume must be a HeadScan; got {type(scan).__name__}")
        scan.check("resume")
        fresh = _empty(view, pattern_metrics, ids, max_tokens)
        if scan.weights and scan.weights != fresh.weights:
            raise ValueError(
                "resume: the model's weights changed since that scan began (its texts were scanned on other weights): "
                "start a new scan"
            )
        if (scan.layers, scan.n_heads, scan.metrics) != (fresh.layers, fresh.n_heads, fresh.metrics):
            raise ValueError("resume: that scan is of another model or other metrics; start a new scan")
        if not (torch.equal(scan.offsets, fresh.offsets) and torch.equal(scan.token_ids, fresh.token_ids)):
            raise ValueError("resume: that scan is of other texts (or another max_tokens); start a new scan")
    for metric in weight_metrics:
        if metric not in scan.head_values:
            scan.head_values[metric] = computed_by(table[metric])(view)
    lengths = [len(t) for t in ids]
    todo = sorted((i for i in range(len(ids)) if not bool(scan.done[i])), key=lambda i: -lengths[i])
    report = progress_of(progress, len(ids), "scanning heads")
    report(scan.n_done)
    if pattern_metrics:
        try:
            for batch in _batches(lengths, todo, view.n_heads, batch_size):
                if stop is not None and stop():
                    break
                _scan_batch(view, scan, batch, ids, lengths)
                report(scan.n_done)
        except KeyboardInterrupt:
            warnings.warn(
                f"scan stopped after {scan.n_done} of {scan.n_texts} texts: scan_heads(model, texts, resume=scan) "
                "continues it", stacklevel=2,
            )
    else:
        scan.done[:] = True
    report(len(ids))
    return scan


def _scan_batch(view: ModelView, scan: HeadScan, batch: list[int], ids: list[list[int]], lengths: list[int]) -> None:
    n = max(lengths[i] for i in batch)
    tokens = torch.zeros(len(batch), n, dtype=torch.long)  # right padding: causal positions never see it
    for row, i in enumerate(batch):
        tokens[row, : lengths[i]] = torch.tensor(ids[i])
    answers = view.reduced(tokens, {layer: {"scores": scan.metrics} for layer in scan.layers})
    sizes = torch.tensor([lengths[i] for i in batch])
    for metric in scan.metrics:
        scores = torch.stack([answers[layer]["scores"][metric].float().cpu() for layer in scan.layers], dim=1)
        _record(scan, metric, batch, scores, _defined(tokens, sizes, metric))
    scan.done[torch.tensor(batch)] = True

