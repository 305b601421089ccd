"""Head metrics: one table of every per-head score, its label, its definition and how it is computed.

`head_scores`, `scan_heads`, `HeadScores`, `HeadAtlas` and the traces that reduce patterns where the
model runs all read `METRICS`. A row (`HeadMetric`) says what the metric is called, in words and on
screen, and how it is computed:

- ``"pattern"``: from one head's attention weights ``A [batch, heads, destination, source]`` alone,
  one value per destination (`HeadMetric.per_destination`), averaged over the destinations where
  it is defined (`HeadMetric.defined`); computed where the model runs (this module is shipped into
  traces with `circuitwidgets.in_trace`), whatever the prompt's length;
- ``"weights"``: a weight view (`compute` names the analysis function, ``f(model) -> [layers, heads]``);
- ``"runs"``: runs with hooks (``f(model, tokens) -> [layers, heads]``).

Adding a pattern metric is one row: a name, a label, a definition and its per-destination function
(`add`); every view and `scan_heads` then offer it. Targets come from the tokens themselves
(`target_mask`), so every metric works on any text as well as on repeated random tokens.

Like `circuitwidgets.in_trace`, this module imports only torch and the standard library.

Example:
    >>> import torch
    >>> A = torch.tensor([[[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]])   # [batch, heads, dest, source]
    >>> METRICS["previous_token"].per_destination(A, torch.tensor([[5, 6, 7]]), 0)
    tensor([[[0., 1., 1.]]])
    >>> METRICS["previous_token"].defined(torch.tensor([[5, 6, 7]])).tolist()
    [[False, True, True]]
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch


def target_mask(tokens, kind, row0=0, row1=None):
    """Boolean ``[batch, query, key]``: the keys each query should attend to for a target `kind`.

    previous_token: key i-1. duplicate_token: earlier keys j < i holding the same token.
    induction (and prefix matching): keys j+1 for every earlier j < i-1 with ``tokens[j] == tokens[i]``.
    `row0`, `row1`: only those queries' rows (default: every query).

    Example:
        >>> target_mask(torch.tensor([[5, 7, 5]]), "induction")[0, 2].tolist()
        [False, True, False]
    """
    seq = tokens.shape[1]
    row1 = seq if row1 is None else row1
    query = torch.arange(row0, row1, device=tokens.device)[:, None]
    key = torch.arange(seq, device=tokens.device)[None, :]
    if kind == "previous_token":
        return (key == query - 1).expand(tokens.shape[0], row1 - row0, seq).clone()
    same = tokens[:, row0:row1, None] == tokens[:, None, :]
    if kind == "duplicate_token":
        return same & (key < query)
    shifted = torch.zeros_like(same)
    shifted[:, :, 1:] = same[:, :, :-1]
    return shifted & (key < query)


def _destinations(weights, row0):
    return torch.arange(row0, row0 + weights.shape[-2], device=weights.device)


def _column(weights, columns):
    """``weights[..., d, columns[d]]`` for each destination row d."""
    index = columns.clamp(min=0).reshape(*([1] * (weights.ndim - 2)), -1, 1).expand(*weights.shape[:-1], 1)
    return weights.gather(-1, index)[..., 0]


def _previous(weights, tokens, row0):
    where = _destinations(weights, row0)
    picked = _column(weights, where - 1)
    return torch.where(where > 0, picked, torch.zeros_like(picked))


def _first(weights, tokens, row0):
    where = _destinations(weights, row0)
    picked = _column(weights, where * 0)
    return torch.where(where > 0, picked, torch.zeros_like(picked))


def _self(weights, tokens, row0):
    return _column(weights, _destinations(weights, row0))


def _entropy(weights, tokens, row0):
    return -torch.special.xlogy(weights, weights).sum(-1)


def _distance(weights, tokens, row0):
    where = _destinations(weights, row0).to(weights.dtype)
    sources = torch.arange(weights.shape[-1], device=weights.device, dtype=weights.dtype)
    return where * weights.sum(-1) - torch.matmul(weights, sources)


def _mass_on(kind):
    """The attention mass on `kind`'s targets (`target_mask`), per destination."""

    def mass(weights, tokens, row0):
        rows = target_mask(tokens.to(weights.device), kind, row0, row0 + weights.shape[-2])[..., : weights.shape[-1]]
        rows = rows.reshape(rows.shape[0], *([1] * (weights.ndim - 3)), *rows.shape[1:])  # [batch, ..., q, k]
        return (weights * rows.to(weights.dtype)).sum(-1)

    return mass


def _after_first(tokens):
    return (torch.arange(tokens.shape[1], device=tokens.device) >= 1)[None].expand(tokens.shape[0], -1)


def _every(tokens):
    return torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)


def _with_target(kind):
    def defined(tokens):
        return target_mask(tokens, kind).any(-1)

    return defined


@dataclass(frozen=True)
class HeadMetric:
    """One head metric (see the module docstring). `scale`: how its grid is coloured, ``(kind, (low, high))`` or
    ``(kind, None)`` for a metric without fixed bounds; `detector`: a head type scored on repeated random tokens
    by default (`HeadScores`' grids); `repeats`: how often those tokens repeat their random block."""

    name: str
    label: str
    definition: str
    source: str = "pattern"
    per_destination: Callable | None = None
    defined: Callable | None = None
    compute: str | None = None
    scale: tuple = ("sequential", (0.0, 1.0))
    detector: bool = False
    repeats: int = 2
    scan: bool = True

    @property
    def needs(self):
        """The backend feature it needs (`circuitwidgets.backends.protocol.FEATURES`)."""
        return {"pattern": "patterns", "weights": "weight_views", "runs": "hooks"}[self.source]


METRICS = {}


def add(metric):
    """Add `metric` (a `HeadMetric`) to the table: every view and `scan_heads` offer it from then on."""
    METRICS[metric.name] = metric
    return metric


add(HeadMetric("previous_token", "previous token", "mean over destinations d >= 1 of A[d, d-1]",
               per_destination=_previous, defined=_after_first, detector=True))
add(HeadMetric("first_token", "first token (sink)", "mean over destinations d >= 1 of A[d, 0] (the attention sink)",
               per_destination=_first, defined=_after_first))
add(HeadMetric("duplicate_token", "duplicate token",
               "mean over destinations with an earlier copy of their token of the attention on those copies",
               per_destination=_mass_on("duplicate_token"), defined=_with_target("duplicate_token"), detector=True))
add(HeadMetric("induction", "induction",
               "mean over destinations with an earlier copy of their token of the attention on the tokens after those copies",
               per_destination=_mass_on("induction"), defined=_with_target("induction"), detector=True))
add(HeadMetric("prefix_matching", "prefix matching",
               "induction's targets, on a random block repeated four times (three earlier copies to match)",
               per_destination=_mass_on("induction"), defined=_with_target("induction"), detector=True, repeats=4, scan=False))
add(HeadMetric("entropy", "entropy", "mean over destinations of -sum_s A[d, s] log A[d, s] (nats)",
               per_destination=_entropy, defined=_every, scale=("sequential", None)))
add(HeadMetric("distance", "distance", "mean over destinations of the mean attention distance sum_s A[d, s] (d - s), in tokens",
               per_destination=_distance, defined=_every, scale=("sequential", None)))
add(HeadMetric("self", "self", "mean over destinations of A[d, d]", per_destination=_self, defined=_every))
add(HeadMetric("direct_copying", "direct copying",
               "share of the logit raise a head writes, through W_U on the direct path, that lands on the token it "
               "attends to (Olsson et al.'s copying; attention-weighted, key 0 left out)",
               source="runs", compute="direct_copying_scores", detector=True, scan=False))
add(HeadMetric("ov_copying", "OV copying",
               "sum(eigenvalues) / sum(|eigenvalues|) of the full OV circuit (weights, the same for every text)",
               source="weights", compute="copying_scores", scale=("diverging", (-1.0, 1.0))))


def pattern_metrics():
    """The names of the metrics computed from attention weights alone (where the model runs)."""
    return tuple(name for name, metric in METRICS.items() if metric.source == "pattern")


def destination_scores(weights, metric, tokens, row0=0):
    """One value per destination ``[batch, heads, q]`` of pattern `metric`, from weights ``[batch, heads, q, k]`` of
    destinations ``row0, row0 + 1, ...`` and the ``[batch, seq]`` `tokens`. Where a metric is undefined (d = 0 for
    the previous and first token, a destination with no target) the value is 0: the caller knows where from the
    tokens alone (`HeadMetric.defined`; a NaN would read as a broken model)."""
    return METRICS[metric].per_destination(weights, tokens, row0)


def mean_over_defined(per_destination, defined):
    """``per_destination`` ``[batch, ..., q]`` averaged over each sequence's `defined` destinations ``[batch, q]``,
    then over the sequences that have one: ``[...]``; ValueError when none has.

    Example:
        >>> mean_over_defined(torch.tensor([[[0.0, 1.0, 0.5]]]), torch.tensor([[False, True, True]]))
        tensor([0.7500])
    """
    batch, q = defined.shape
    weight = defined.to(per_destination.dtype).reshape(batch, *([1] * (per_destination.ndim - 2)), q)
    count = defined.sum(-1)
    if not bool((count > 0).any()):
        raise ValueError("no query in tokens has a target for this metric (e.g. no repeated token); use other tokens")
    per_seq = (per_destination * weight).sum(-1) / count.clamp_min(1).reshape(batch, *([1] * (per_destination.ndim - 2)))
    return per_seq[count > 0].mean(0)


def score_of_patterns(patterns, tokens, metric):
    """Pattern `metric` of whole patterns ``[batch, ..., q, k]`` (e.g. ``[batch, layers, heads, q, k]``) on `tokens`
    ``[batch, seq]``: ``[...]``, as `head_scores` reduces it where the model runs.

    Example:
        >>> A = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])            # [batch, q, k]: query 1 attends key 0
        >>> score_of_patterns(A[:, None], torch.tensor([[3, 4]]), "previous_token")
        tensor([1.])
    """
    spec = METRICS[metric]
    return mean_over_defined(spec.per_destination(patterns, tokens, 0), spec.defined(tokens))
