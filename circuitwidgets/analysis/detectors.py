"""Head-type detectors: every metric of the head-metric table (`circuitwidgets.head_metrics`) as one score a head.

Every score is one number per attention layer and head, ``[n_attn_layers, n_heads]``; the
head types (previous-token, duplicate-token, induction, prefix-matching, direct copying) lie in
[0, 1]. Attention-pattern metrics are computed per destination where the model runs and averaged
over the destinations where they are defined (e.g. for induction: those with an earlier copy of
their token, whose targets are derived from the tokens themselves), then over the sequences of the
batch. By default they run on repeated random tokens ``[BOS, r, r]`` (``[BOS, r, r, r, r]`` for
prefix matching), where they equal the diagonal definitions (e.g. induction = mean of
``A[i, i-L+1]`` over the second copy), so an ideal head scores 1.

The model runs once per call, and stops after the last attention layer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from .. import head_metrics
from ..model import ModelView, as_view

#: The head types (`head_metrics.HeadMetric.detector`): what `HeadScores` draws by default. `head_scores` takes every
#: metric of `head_metrics.METRICS`.
HEAD_SCORE_KINDS = tuple(name for name, metric in head_metrics.METRICS.items() if metric.detector)
#: The head-metric table (`circuitwidgets.head_metrics.METRICS`): name -> `HeadMetric`.
HEAD_METRICS = head_metrics.METRICS

#: Whole patterns of every layer up to this size (float32) are scored from one run here; longer ones are reduced a
#: block of rows at a time where the model runs.
WHOLE_PATTERNS_BYTES = 2**28
DEFAULT_SEQ_LEN = 25
DEFAULT_BATCH = 8
#: Most sequences of random tokens drawn at once (`repeated_random_tokens`, `head_scores`'s `batch`):
#: drawing them takes ``batch x d_vocab`` random numbers (51 MB at 256 x 50 257). Pass your own
#: ``tokens`` for more.
MAX_BATCH = 256
# the copying score forms logits one block of the vocabulary at a time (`_source_raises`): columns per
# block, and most logits held at once ([heads, rows, columns]; 64 MB of float32)
_VOCAB_BLOCK = 2048
_CHUNK = 1 << 24


def _check_count(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {value!r}")
    if value < low:
        raise ValueError(f"{name}={value} must be at least {low}")
    return value


def _bos_id(view: ModelView) -> int:
    bos = view.bos_token_id
    return 0 if bos is None else int(bos)


def repeated_random_tokens(
    model: Any, seq_len: int | None = None, batch: int = DEFAULT_BATCH, repeats: int = 2, seed: int = 0
) -> torch.Tensor:
    """Random blocks repeated after a BOS token, ``[batch, 1 + repeats * seq_len]`` (long).

    Each row is ``[BOS, r, r, ...]`` with ``r`` a block of ``seq_len`` tokens drawn uniformly
    from the vocabulary without the special tokens. BOS is the tokenizer's ``bos_token_id``;
    a model without a tokenizer (or whose tokenizer has no BOS) uses token 0 as BOS, and token
    0 is then never drawn inside ``r``. Tokens inside one block are distinct (drawn without
    replacement) whenever the allowed vocabulary has at least ``seq_len`` tokens, else they
    are drawn with replacement. ``seq_len=None`` picks ``min(25, (n_ctx - 1) // repeats)``.
    The same ``seed`` gives the same tokens (drawn on the CPU, then moved to the model's device).
    At most `MAX_BATCH` (256) sequences: a larger `batch` raises ValueError before anything is drawn.

    Example:
        >>> import circuitwidgets as cw
        >>> tokens = cw.analysis.repeated_random_tokens(cw.demo_model(), seq_len=10, batch=2)
        >>> tokens.shape
        torch.Size([2, 21])
        >>> bool((tokens[:, 1:11] == tokens[:, 11:]).all())
        True
    """
    view = as_view(model)
    repeats = _check_count("repeats", repeats)
    batch = _check_count("batch", batch)
    if batch > MAX_BATCH:
        raise ValueError(
            f"batch={batch} is more than {MAX_BATCH} sequences (MAX_BATCH) of random tokens; pass a smaller "
            "batch, or your own tokens"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {seed!r}")
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"seed={seed} is out of range: torch takes seeds from -2**63 to 2**64 - 1")
    room = (view.n_ctx - 1) // repeats
    if seq_len is None:
        seq_len = min(DEFAULT_SEQ_LEN, room)
        if seq_len < 2:
            raise ValueError(
                f"the model's n_ctx={view.n_ctx} leaves room for blocks of only {seq_len} tokens at "
                f"repeats={repeats}; pass fewer repeats or your own tokens"
            )
    seq_len = _check_count("seq_len", seq_len)
    if 1 + repeats * seq_len > view.n_ctx:
        raise ValueError(
            f"seq_len={seq_len} with repeats={repeats} needs {1 + repeats * seq_len} positions, more than "
            f"the model's n_ctx={view.n_ctx}; use seq_len <= {room}"
        )
    bos = _bos_id(view)
    banned = set(view.special_token_ids) | {bos}
    allowed = torch.tensor([t for t in range(view.d_vocab) if t not in banned], dtype=torch.long)
    if allowed.numel() == 0:
        raise ValueError(f"the vocabulary of {view.d_vocab} tokens has no non-special token to draw")
    gen = torch.Generator().manual_seed(seed)
    if allowed.numel() >= seq_len:
        # the first seq_len entries of a random permutation: distinct tokens per row
        picks = torch.rand(batch, allowed.numel(), generator=gen).argsort(dim=-1)[:, :seq_len]
    else:
        picks = torch.randint(allowed.numel(), (batch, seq_len), generator=gen)
    block = allowed[picks]
    tokens = torch.cat([torch.full((batch, 1), bos, dtype=torch.long), block.repeat(1, repeats)], dim=1)
    return tokens.to(view.device)


def computed_by(metric: head_metrics.HeadMetric) -> Callable[..., torch.Tensor]:
    """The analysis function that computes a weight or run metric (its row's ``compute``)."""
    return getattr(importlib.import_module("circuitwidgets.analysis"), str(metric.compute))


def _check_kind(kind: Any) -> head_metrics.HeadMetric:
    if not isinstance(kind, str) or kind not in head_metrics.METRICS:
        raise ValueError(f"kind must be one of {tuple(head_metrics.METRICS)}; got {kind!r}")
    return head_metrics.METRICS[kind]


def head_scores(
    model: Any,
    kind: str,
    tokens: Any = None,
    *,
    seq_len: int | None = None,
    batch: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """Score every attention head for one head type, ``[n_attn_layers, n_heads]`` in [0, 1] (float32, CPU).

    `kind` is a metric of the head-metric table (`HEAD_METRICS`, `circuitwidgets.head_metrics`): the head
    types ``HEAD_SCORE_KINDS`` or any other (``"entropy"``, ``"first_token"``, ``"ov_copying"``...).
    `tokens` is a prompt string, ``[seq]`` or
    ``[batch, seq]`` token ids; by default ``repeated_random_tokens(model, seq_len, batch,
    repeats, seed)`` with 2 repeats (4 for prefix_matching), ``batch`` 8 (at most `MAX_BATCH`)
    and ``seq_len`` up to 25 (to fit n_ctx).

    Attention-pattern kinds score the attention mass on target keys, derived from the tokens:
    previous_token: key i-1; duplicate_token: earlier keys j < i holding the same token;
    induction and prefix_matching: keys j+1 for every earlier j < i-1 with
    ``tokens[j] == tokens[i]``. The mass is averaged over the queries with at least one target,
    then over the sequences that have such a query (a ValueError when none has). Induction and
    prefix matching share these targets and differ only in their default tokens (one earlier
    copy, or three). On ``[BOS, r, r]`` with distinct tokens in ``r`` they reduce to the
    diagonal definitions (induction = mean of ``A[i, i-L+1]`` over the second copy).

    ``direct_copying`` (Olsson et al.'s copying, on the direct path to the logits): the head
    moves ``A[i, j] * v_j W_O`` from key j to query i (``v_j = x_j W_V + b_V``, ``x_j`` the
    input of the attention layer). Map each source's output through ``W_U``, subtract its mean
    logit over the vocabulary and apply ReLU: ``share_j`` is the fraction of that raise landing
    on ``tokens[j]``, the token attended to. ``A[i, j]`` scales the source's output without
    changing ``share_j`` (ReLU and the mean commute with positive scaling), so the query's
    output splits exactly into per-source terms. The score is the attention-weighted mean of
    ``share_j`` over every (query, key) pair of a sequence, ``sum_ij A[i,j] share_j /
    sum_ij A[i,j]``, then the mean over sequences. Key position 0 (BOS in the default tokens,
    where heads park attention as a no-op) is left out of both sums. ``b_O`` and the final
    LayerNorm are ignored (neither belongs to one head). Costs one run of the model and, per
    head, ``W_O W_U`` and the ``[positions, d_vocab]`` logits, formed one block of the vocabulary
    at a time (`_source_raises`): by far the slowest kind (``make bench``'s limits table has its
    time on GPT-2 small's shape against that work at the machine's matrix-multiply rate).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> cw.analysis.head_scores(model, "induction").shape      # [n_attn_layers, n_heads]
        torch.Size([2, 4])
        >>> cw.analysis.head_scores(model, "duplicate_token", torch.tensor([[0, 5, 9, 5, 9]])).shape
        torch.Size([2, 4])
    """
    view = as_view(model)
    metric = _check_kind(kind)
    if metric.source == "weights":  # the same for any tokens: a weight view
        return computed_by(metric)(view)
    if tokens is None:
        batch = DEFAULT_BATCH if batch is None else batch
        tokens = repeated_random_tokens(view, seq_len, batch, metric.repeats, seed)
    else:
        if seq_len is not None or batch is not None:
            raise ValueError("pass either tokens or seq_len/batch (for random tokens), not both")
        tokens = view.tokens_of(tokens)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens must have at least 2 positions to score heads; got {tokens.shape[1]}")
    if metric.source == "runs":
        return computed_by(metric)(view, tokens).cpu()
    return pattern_scores(view, [kind], tokens)[kind]


def whole_patterns(view: ModelView, tokens: torch.Tensor) -> bool:
    """True when `head_scores` scores `tokens` ``[batch, seq]`` from the whole patterns of one run here (not reduced a
    block of rows at a time where the model runs)."""
    batch, seq = tokens.shape
    return not view.reduces_in_trace and batch * len(view.attn_layers) * view.n_heads * seq * seq * 4 <= WHOLE_PATTERNS_BYTES


def pattern_scores(model: Any, kinds: Any, tokens: torch.Tensor, patterns: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """`head_scores` of several pattern metrics on the same ``[batch, seq]`` `tokens`, from one run: kind -> ``[L, H]``.

    `patterns`: the model's own patterns of `tokens` ``[batch, layers, heads, q, k]``, when a run made them already
    (only where `whole_patterns` holds: else the scores are reduced where the model runs).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> tokens = cw.analysis.repeated_random_tokens(model)
        >>> both = pattern_scores(model, ["induction", "previous_token"], tokens)
        >>> bool(torch.equal(both["induction"], cw.analysis.head_scores(model, "induction", tokens)))
        True
    """
    view = as_view(model)
    specs = [_check_kind(kind) for kind in kinds]
    for spec in specs:
        assert spec.defined is not None and spec.per_destination is not None, f"{spec.name!r} needs its pattern rules"
    if whole_patterns(view, tokens):
        # the model's own patterns, from one run here: the numbers every widget computes from them (bit for bit)
        patterns, ids = (view.patterns(tokens) if patterns is None else patterns).cpu(), tokens.cpu()
        per = {spec.name: spec.per_destination(patterns, ids, 0) for spec in specs}  # type: ignore[misc]
    else:  # reduced where the model runs, a block of rows at a time: only the per-destination scores come back
        names = [spec.name for spec in specs]
        answers = view.reduced(tokens, {layer: {"scores": names} for layer in view.attn_layers})
        per = {
            name: torch.stack([answers[layer]["scores"][name].float().cpu() for layer in view.attn_layers], dim=1)
            for name in names
        }
    return {spec.name: head_metrics.mean_over_defined(per[spec.name], spec.defined(tokens.cpu())) for spec in specs}  # type: ignore[misc]


def direct_copying_scores(model: Any, tokens: Any) -> torch.Tensor:
    """The ``direct_copying`` score of every head on `tokens` ``[batch, seq]`` (see `head_scores`), ``[layers, heads]``.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> direct_copying_scores(model, [[0, 5, 9, 5, 9]]).shape
        torch.Size([2, 4])
    """
    view = as_view(model)
    return _direct_copying(view, view.tokens_of(tokens)).cpu()


def _own_token_share(logits: torch.Tensor, own: torch.Tensor, *, inplace: bool = False) -> torch.Tensor:
    """Share of the ReLU'd, mean-subtracted logits landing on token `own`, ``logits.shape[:-1]``.

    `logits` is ``[..., d_vocab]``; `own` holds one token id per row, broadcastable to
    ``logits.shape[:-1]``. A row with no raise at all (constant logits) scores 0. With
    `inplace` the raise overwrites `logits` (no second vocabulary-sized block).

    Example:
        >>> _own_token_share(torch.tensor([[3.0, 2.0, 0.0, -1.0]]), torch.tensor([0]))   # raise [2, 1, 0, 0]
        tensor([0.6667])
    """
    mean = logits.mean(-1, keepdim=True)
    raise_ = logits.sub_(mean).clamp_(min=0) if inplace else torch.relu(logits - mean)
    index = own.expand(logits.shape[:-1]).unsqueeze(-1)
    total = raise_.sum(-1)
    return raise_.gather(-1, index).squeeze(-1) / total.clamp_min(torch.finfo(total.dtype).tiny)


def _direct_copying(view: ModelView, tokens: torch.Tensor) -> torch.Tensor:
    """``[n_attn_layers, n_heads]`` copying scores: one run for patterns and values, then `_source_raises` of every head."""
    with torch.no_grad():
        patterns, values = view.patterns_and_values(tokens)  # [batch, L, H, q, k], [batch, L, seq, H, d_head]
        batch, n_layers, seq, n_heads, d_head = values.shape
        # key 0 is left out of the score: its logits are never formed
        sources = values[:, :, 1:].permute(1, 3, 0, 2, 4).reshape(n_layers, n_heads, batch * (seq - 1), d_head)
        W_O, W_U = view.W_O.float(), view.W_U.float()
        raised, own = _source_raises(sources, W_O, W_U, tokens[:, 1:].reshape(-1))
        share = own / raised.clamp_min(torch.finfo(raised.dtype).tiny)  # [L, H, sources]
        share = share.reshape(n_layers, n_heads, batch, seq - 1).permute(2, 0, 1, 3)  # [batch, L, H, key >= 1]
        received = patterns.sum(-2)[..., 1:]  # attention each key >= 1 receives
        tiny = torch.finfo(received.dtype).tiny
        per_seq = (received * share).sum(-1) / received.sum(-1).clamp_min(tiny)
        return per_seq.mean(0)


def _source_raises(
    sources: torch.Tensor, W_O: torch.Tensor, W_U: torch.Tensor, own: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The raise of every source's direct logits, in total and on its own token: two ``[layers, heads, rows]``.

    `sources` ``[layers, heads, rows, d_head]`` are value vectors, `W_O` ``[layers, heads, d_head,
    d_model]``, `W_U` ``[d_model, d_vocab]``, `own` ``[rows]`` the token of each row. The logits of
    row r of a head are ``l = v_r W_O W_U``; with ``c = l - mean(l)`` (the mean over the vocabulary)
    returns ``sum(relu(c))`` and ``relu(c[own[r]])`` (a summand of that sum: a share never exceeds 1).

    The vocabulary is walked in blocks of `_VOCAB_BLOCK` columns ``U`` of ``W_U`` minus its row means
    (``mean(l) = v W_O mean(W_U)``: centring ``W_U`` once per block centres every logit). With more rows
    than ``d_head * d_model / (d_model - d_head)`` each layer first forms ``W_O U`` for all its heads
    (``[heads, d_head, block]``, one large product) and the logits are a batched ``[rows, d_head] x
    [d_head, block]`` product per head; with fewer rows the outputs ``v W_O`` go straight through ``U``.
    Logits live only one block at a time (at most `_CHUNK` entries, rows split when more), in buffers
    reused across blocks; the ReLU and the sum run on them while they are in cache.

    Example:
        >>> v, W_O, W_U = torch.ones(1, 1, 1, 1), torch.ones(1, 1, 1, 1), torch.tensor([[3.0, 2.0, 0.0, -1.0]])
        >>> _source_raises(v, W_O, W_U, torch.tensor([0]))       # centred logits [2, 1, -1, -2]
        (tensor([[[3.]]]), tensor([[[2.]]]))
    """
    n_layers, n_heads, rows, d_head = sources.shape
    d_model, d_vocab = W_U.shape
    device, dtype = W_U.device, W_U.dtype
    mean = W_U.mean(-1, keepdim=True)  # [d_model, 1]
    factored = d_head * (d_model + rows) < rows * d_model
    outputs = None if factored else torch.matmul(sources, W_O)  # [layers, heads, rows, d_model]
    width = min(d_vocab, _VOCAB_BLOCK)
    step = max(1, min(rows, _CHUNK // (n_heads * width)))  # rows per chunk of logits
    # reused buffers (fresh vocabulary-sized blocks cost more in page faults than they take to fill)
    logits_buffer = torch.empty(n_heads * step * width, dtype=dtype, device=device)
    block_buffer = torch.empty(d_model * width, dtype=dtype, device=device)
    product_buffer = torch.empty(n_heads * d_head * width, dtype=dtype, device=device) if factored else None
    total = torch.zeros(n_layers, n_heads, rows, dtype=dtype, device=device)
    own_raise = torch.zeros(n_layers, n_heads, rows, dtype=dtype, device=device)
    by_token = own.argsort()
    bounds = torch.searchsorted(own[by_token], torch.arange(0, d_vocab + width, width, device=own.device)).tolist()
    transposed = W_U.mT.is_contiguous()  # read W_U in its own memory order
    for index, start in enumerate(range(0, d_vocab, width)):
        n = min(width, d_vocab - start)
        if transposed:  # [n, d_model] in memory, used as [d_model, n]
            U = torch.sub(W_U[:, start : start + n].mT, mean.mT, out=block_buffer[: d_model * n].view(n, d_model)).mT
        else:
            U = torch.sub(W_U[:, start : start + n], mean, out=block_buffer[: d_model * n].view(d_model, n))
        hit = by_token[bounds[index] : bounds[index + 1]]  # rows whose own token lies in this block
        for layer in range(n_layers):
            if product_buffer is not None:
                product = product_buffer[: n_heads * d_head * n].view(n_heads * d_head, n)
                torch.mm(W_O[layer].reshape(n_heads * d_head, d_model), U, out=product)
                left, right = sources[layer], product.view(n_heads, d_head, n)
            else:
                assert outputs is not None
                left, right = outputs[layer], U
            for first in range(0, rows, step):
                last = min(first + step, rows)
                logits = logits_buffer[: n_heads * (last - first) * n].view(n_heads, last - first, n)
                torch.matmul(left[:, first:last], right, out=logits)
                logits.relu_()
                total[layer, :, first:last] += logits.sum(-1)
                mine = hit if step == rows else hit[(hit >= first) & (hit < last)]
                if mine.numel():
                    own_raise[layer, :, mine] = logits[:, mine - first, own[mine] - start]
    return total, own_raise
