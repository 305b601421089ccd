"""Head-type detectors: previous-token, duplicate-token, induction, prefix-matching, copying.

Every score is one number in [0, 1] per attention layer and head, ``[n_attn_layers, n_heads]``.
Attention-pattern scores measure the attention mass a head puts on *target* keys derived from
the tokens themselves, averaged over the queries that have at least one target and then over
the sequences of the batch. By default they run on repeated random tokens ``[BOS, r, r]``
(``[BOS, r, r, r, r]`` for prefix matching), where they equal the diagonal definitions
(e.g. induction = mean of ``A[i, i-L+1]`` over the second copy), so an ideal head scores 1.

The model runs once per call, with a hook filter that caches only what the kind needs.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import in_trace
from ..model import ModelView, as_view

HEAD_SCORE_KINDS = ("previous_token", "duplicate_token", "induction", "prefix_matching", "direct_copying")

DEFAULT_SEQ_LEN = 25
DEFAULT_BATCH = 8
#: Most sequences of random tokens drawn at once (`repeated_random_tokens`, `head_scores`'s `batch`):
#: drawing them takes ``batch x d_vocab`` random numbers (51 MB at 256 x 50 257). Pass your own
#: ``tokens`` for more.
MAX_BATCH = 256
# repeats of the random block in the default tokens; prefix matching wants several earlier copies
DEFAULT_REPEATS = {"prefix_matching": 4}
# elements per chunk of [positions, d_vocab] logits of one head in the copying score (64 MB of float32)
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


def _target_mask(tokens: torch.Tensor, kind: str) -> torch.Tensor:
    """Boolean ``[batch, query, key]``: the keys each query should attend to for `kind`.

    previous_token: key i-1. duplicate_token: earlier keys j < i holding the same token.
    induction / prefix_matching: keys j+1 for every earlier j < i-1 with ``tokens[j] == tokens[i]``
    (the token that followed an earlier occurrence of the current token).

    Example:
        >>> _target_mask(torch.tensor([[5, 7, 5]]), "induction")[0, 2].tolist()
        [False, True, False]
    """
    _check_kind(kind, attention_only=True)
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be [batch, seq]; got shape {tuple(tokens.shape)}")
    return in_trace.target_mask(tokens, kind)  # one definition, also run inside remote traces


def _score_from_patterns(patterns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention mass on the targets, averaged over queries with a target, then over sequences.

    `patterns` is ``[batch, ..., query, key]`` (e.g. ``[batch, layers, heads, q, k]``) and `mask`
    the boolean targets ``[batch, query, key]``. Returns ``patterns.shape[1:-2]``. Sequences with
    no query that has a target are left out of the batch mean; a ValueError says when no
    sequence has one.

    Example:
        >>> A = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])        # [batch, q, k]: query 1 attends key 0
        >>> _score_from_patterns(A, _target_mask(torch.tensor([[3, 4]]), "previous_token"))
        tensor(1.)
    """
    batch, seq = mask.shape[0], mask.shape[1]
    if patterns.shape[0] != batch or patterns.shape[-2:] != (seq, seq):
        raise ValueError(f"patterns {tuple(patterns.shape)} do not match targets {tuple(mask.shape)}")
    per_seq, used = in_trace.target_mass(patterns, mask)
    if not bool(used.any()):
        raise ValueError("no query in tokens has a target for this kind (e.g. no repeated token); use other tokens")
    return per_seq[used].mean(0)


def _check_kind(kind: Any, attention_only: bool = False) -> str:
    kinds = HEAD_SCORE_KINDS[:-1] if attention_only else HEAD_SCORE_KINDS
    if kind not in kinds:
        raise ValueError(f"kind must be one of {kinds}; got {kind!r}")
    return kind


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

    `kind` is one of ``HEAD_SCORE_KINDS``. `tokens` is a prompt string, ``[seq]`` or
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
    LayerNorm are ignored (neither belongs to one head). Costs one ``[positions, n_heads,
    d_vocab]`` block of logits per layer, computed head by head in chunks: by far the slowest kind
    (the README's benchmark table has its time on GPT-2 small's shape).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> cw.analysis.head_scores(model, "induction").shape      # [n_attn_layers, n_heads]
        torch.Size([2, 4])
        >>> cw.analysis.head_scores(model, "duplicate_token", torch.tensor([[0, 5, 9, 5, 9]])).shape
        torch.Size([2, 4])
    """
    view = as_view(model)
    kind = _check_kind(kind)
    if tokens is None:
        batch = DEFAULT_BATCH if batch is None else batch
        repeats = DEFAULT_REPEATS.get(kind, 2)
        tokens = repeated_random_tokens(view, seq_len, batch, repeats, seed)
    else:
        if seq_len is not None or batch is not None:
            raise ValueError("pass either tokens or seq_len/batch (for random tokens), not both")
        tokens = view.tokens_of(tokens)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens must have at least 2 positions to score heads; got {tokens.shape[1]}")
    if kind == "direct_copying":
        return _direct_copying(view, tokens).cpu()
    if view.reduces_in_trace:  # reduced where the model runs: only the masses come back
        return view.pattern_scores(tokens, kind)
    mask = _target_mask(tokens, kind)
    return _score_from_patterns(view.patterns(tokens), mask).cpu()


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
    with torch.no_grad():
        patterns, values = view.patterns_and_values(tokens)
        layers = range(len(view.attn_layers))
        return torch.stack([_copying_one_layer(view, li, patterns[:, li], values[:, li], tokens) for li in layers])


def _copying_one_layer(
    view: ModelView, li: int, pattern: torch.Tensor, values: torch.Tensor, tokens: torch.Tensor
) -> torch.Tensor:
    """``[n_heads]`` copying score of attention layer `li` from its pattern and values ``[batch, seq, n_heads, d_head]``."""
    batch, seq = tokens.shape
    n_heads, d_head = view.n_heads, view.d_head
    W_O = view.W_O[li].float()  # [heads, d_head, d_model]
    W_U = view.W_U.float()  # [d_model, d_vocab]
    rows = values.reshape(batch * seq, n_heads, d_head)
    own = tokens.reshape(batch * seq)
    count = rows.shape[0]
    step = max(1, _CHUNK // view.d_vocab)
    # one reused block of logits per head and chunk: a fresh one per chunk costs more in page faults
    buffer = torch.empty(min(step, count), view.d_vocab, dtype=W_U.dtype, device=W_U.device)
    shares = torch.empty(n_heads, count, dtype=W_U.dtype, device=W_U.device)
    for head in range(n_heads):
        # With more source positions than d_head it is cheaper to form this head's W_O W_U once.
        W_OU = W_O[head] @ W_U if count > d_head else None
        for start in range(0, count, step):
            stop = min(start + step, count)
            x, logits = rows[start:stop, head], buffer[: stop - start]
            if W_OU is not None:
                torch.matmul(x, W_OU, out=logits)
            else:
                torch.matmul(x @ W_O[head], W_U, out=logits)
            shares[head, start:stop] = _own_token_share(logits, own[start:stop], inplace=True)
    share = shares.reshape(n_heads, batch, seq).permute(1, 0, 2)  # [batch, heads, key]
    received = pattern.sum(-2)[..., 1:]  # [batch, heads, key >= 1]: attention each key receives
    per_seq = (received * share[..., 1:]).sum(-1) / received.sum(-1).clamp_min(torch.finfo(received.dtype).tiny)
    return per_seq.mean(0)
