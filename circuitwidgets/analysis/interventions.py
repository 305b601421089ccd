"""Ablation: switch heads off and measure what changes, with intervals and p-values over prompts.

A head's output is its ``z`` times ``W_O[head]``; ablating it replaces its ``z`` (``b_O`` untouched):
``"zero"`` (``z = 0``), ``"mean"`` (its mean over a reference batch at each position) or
``"resample"`` (its ``z`` on another prompt at the same positions; with the batch itself as
reference, prompt ``i`` takes prompt ``i + 1``'s). See `circuitwidgets.ablation`.

Metrics (per prompt; ``logits[:, p]`` predicts token ``p + 1``):

- ``"loss"``: mean next-token cross-entropy over `positions` (default: every position that has a
  next token), e.g. ``range(n + 1, 2 * n)`` for the second copy of a block of n tokens after BOS;
- ``"logit_diff"``: ``logit[target] - logit[baseline_token]`` at one position (default the last;
  of several `positions`, the first; without `baseline_token`, the target's logit);
- a callable ``f(logits) -> [batch]`` tensor.

The effect of an ablation is ``metric(ablated) - metric(clean)``, per prompt. Hooks live for one run
only: the model, its hooks and every cache shared with un-ablated use are untouched.

Example:
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> tokens = cw.analysis.repeated_random_tokens(model, seq_len=20, batch=16, seed=3)
    >>> second = range(21, 40)                        # logits predicting the second copy
    >>> fx = cw.analysis.ablation_effects(model, tokens, positions=second, n_boot=200, progress=False)
    >>> fx.effect.shape, bool(fx.effect[1].max() > 0.5)   # the induction heads of layer 1 matter
    (torch.Size([2, 4]), True)
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..ablation import METHODS, Ablated, check_heads, check_reference, replace_heads, source_of, z_site
from ..model import ModelView, as_view

Metric = Callable[[torch.Tensor], torch.Tensor]
#: Up to this many prompts, the permutation test enumerates every sign pattern (exact p-value).
EXACT_PERMUTATION_PROMPTS = 16


def ablated(model: Any, heads: Any, method: str = "zero", reference: Any = None) -> Ablated:
    """`model` with `heads` (``(layer, head)`` pairs) ablated, for any widget or analysis call.

    Patterns, logits and every view that runs the model see the ablation; weight views (OV, QK,
    composition) are the model's own. ``"mean"`` and ``"resample"`` take their replacements from
    `reference` tokens (a batch; ``"mean"`` needs at least two prompts), recomputed when the model
    changes. The model itself is not touched.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> off = cw.analysis.ablated(model, [(1, 0), (1, 2)])
        >>> off.label
        'L1H0, L1H2 zero-ablated'
        >>> bool((cw.analysis.attention_patterns(off, "abcabc") != cw.analysis.attention_patterns(model, "abcabc")).any())
        False
    """
    view = as_view(model)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    checked = check_heads(heads, view.facts)
    ref = None if reference is None else view.check_tokens(reference)
    if method != "zero" and ref is None:
        raise ValueError(f"{method} ablation of a model for widgets needs reference= tokens (a batch of prompts)")
    if method == "mean" and ref is not None and ref.shape[0] < 2:
        raise ValueError("mean ablation needs a reference batch of at least two prompts (the mean of one is itself)")
    return Ablated(view.user_model, checked, method, ref, options=view.backend.options)


def _hooks(view: ModelView, heads: list[tuple[int, int]], method: str, tokens: torch.Tensor, reference: Any) -> list:
    if reference is None:  # the batch itself
        return view.ablation_hooks(heads, method, tokens, shifted=method == "resample")
    return view.ablation_hooks(heads, method, reference)


def run_with_ablation(model: Any, tokens: Any, heads: Any, method: str = "zero", reference: Any = None) -> torch.Tensor:
    """Logits ``[batch, seq, d_vocab]`` (float32) with the outputs of `heads` (``(layer, head)`` pairs) replaced.

    `method`: ``"zero"``, ``"mean"`` (each head's mean ``z`` over `reference` at each position;
    default reference: `tokens` themselves, a batch) or ``"resample"`` (``z`` from reference prompt
    ``i mod len(reference)``; default: prompt ``i + 1`` of `tokens`). Hooks live for this run only.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> logits = cw.analysis.run_with_ablation(model, [[0, 5, 6, 5, 6]], [(1, 0)])
        >>> logits.shape
        torch.Size([1, 5, 64])
    """
    view = as_view(model)
    tokens = view.check_tokens(tokens)
    return view.run_with_hooks(tokens, _hooks(view, check_heads(heads, view.facts), method, tokens, reference))[0]


def next_token_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each next token, ``[batch, seq - 1]``: entry ``p`` is ``logits[:, p]``'s on ``tokens[:, p + 1]``.

    Example:
        >>> next_token_loss(torch.zeros(1, 3, 4), torch.tensor([[0, 1, 2]]))    # uniform over 4 tokens
        tensor([[1.3863, 1.3863]])
    """
    logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return -logprobs.gather(-1, tokens[:, 1:, None].to(logprobs.device)).squeeze(-1)


def _positions(positions: Any, length: int, what: str) -> list[int]:
    if isinstance(positions, int) and not isinstance(positions, bool):
        positions = [positions]
    try:
        given = list(positions)
        chosen = [operator.index(p) for p in given if not isinstance(p, bool)]  # ints of any kind, not floats
    except TypeError:
        given, chosen = [None], []
    if len(chosen) != len(given):
        raise TypeError(f"positions must be an int or a list of ints; got {positions!r}")
    if not chosen:
        raise ValueError("positions must name at least one position")
    for p in chosen:
        if not -length <= p < length:
            raise ValueError(f"position {p} is outside the {length} {what}")
    return [p % length for p in chosen]


def _per_prompt(value: Any, batch: int, name: str, d_vocab: int) -> torch.Tensor:
    ids = torch.as_tensor(value).reshape(-1).cpu()  # indexes the logits, read on the CPU
    if ids.numel() not in (1, batch) or ids.is_floating_point():
        raise ValueError(f"{name} must be a token id or one id per prompt ({batch}); got {value!r}")
    if bool(((ids < 0) | (ids >= d_vocab)).any()):
        raise ValueError(f"{name} must be token ids in [0, {d_vocab}); got {value!r}")
    return ids.expand(batch).long()


class Measure:
    """A metric of runs: ``measure(logits)`` -> ``[batch]`` (float32, CPU; ``()`` for a callable that returns one
    number, where allowed), and the logit positions it reads, so that a sweep unembeds only those.

    ``reads``: the distinct logit positions read, in order (None: a callable, which may read any);
    ``on_read(logits)``: the metric from the logits at ``reads`` only (``[batch, len(reads), d_vocab]``; every
    position for a callable); ``name``: ``"loss"``, ``"logit_diff"`` or the callable's name.
    """

    def __init__(self, name: str, reads: list[int] | None, on_read: Callable[[torch.Tensor], torch.Tensor]):
        self.name, self.reads, self.on_read = name, reads, on_read

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return self.on_read(logits if self.reads is None else logits[:, self.reads])


def metric_of(
    metric: str | Metric,
    tokens: torch.Tensor,
    d_vocab: int,
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
    *,
    scalar: bool = False,
) -> Measure:
    """The per-prompt metric ``f(logits) -> [batch]`` that `metric` names (see the module docstring), a `Measure`.

    A callable must return one value per prompt, ``[batch]`` (with `scalar`, one number is accepted too): any
    other shape is refused (ValueError), never averaged into a plausible number.

    Example:
        >>> f = metric_of("logit_diff", torch.tensor([[0, 1]]), 4, target=2, baseline_token=3)
        >>> f(torch.tensor([[[0.0, 0, 0, 0], [0.0, 0, 5, 1]]])), f.reads
        (tensor([4.]), [1])
    """
    batch, seq = tokens.shape
    if callable(metric):
        shapes = f"shape ({batch},) or ()" if scalar else f"shape ({batch},)"

        def measured(logits: torch.Tensor) -> torch.Tensor:
            value = torch.as_tensor(metric(logits))
            if value.shape != (batch,) and not (scalar and value.ndim == 0):
                what = "one value per prompt or one number" if scalar else "one value per prompt"
                raise ValueError(f"the metric must return {what}, {shapes}; got shape {tuple(value.shape)}")
            return value.detach().float().cpu() if not value.requires_grad else value.float()

        return Measure(getattr(metric, "__name__", "custom"), None, measured)
    if metric == "loss":
        if seq < 2:
            raise ValueError("the loss needs at least two tokens per prompt")
        chosen = _positions(range(seq - 1) if positions is None else positions, seq - 1, "positions that have a next token")
        reads = sorted(set(chosen))
        index = [reads.index(p) for p in chosen]
        targets = tokens[:, [p + 1 for p in chosen]]

        def loss(read: torch.Tensor) -> torch.Tensor:  # next_token_loss at the chosen positions only
            logprobs = torch.log_softmax(read[:, index].float(), dim=-1)
            return -logprobs.gather(-1, targets[..., None].to(logprobs.device)).squeeze(-1).mean(-1).cpu()

        return Measure("loss", reads, loss)
    if metric == "logit_diff":
        if target is None:
            raise ValueError('metric="logit_diff" needs target= (a token id, or one per prompt)')
        (position,) = _positions(-1 if positions is None else positions, seq, "positions")[:1]
        rows = torch.arange(batch)
        good = _per_prompt(target, batch, "target", d_vocab)
        bad = None if baseline_token is None else _per_prompt(baseline_token, batch, "baseline_token", d_vocab)

        def diff(read: torch.Tensor) -> torch.Tensor:
            at = read[:, 0].float()
            on = rows.to(at.device)
            value = at[on, good.to(at.device)] - (0.0 if bad is None else at[on, bad.to(at.device)])
            return value.cpu()

        return Measure("logit_diff", [position], diff)
    raise ValueError(f'metric must be "loss", "logit_diff" or a callable on logits; got {metric!r}')


def progress_of(progress: Any, total: int, what: str) -> Callable[[int], None]:
    """``step(done)`` reporting to `progress`: True (a tqdm bar), False/None (nothing) or ``progress(done, total)``."""
    if progress is None or progress is False:
        return lambda done: None
    if callable(progress):
        return lambda done: progress(done, total)
    if progress is not True:
        raise TypeError(f"progress must be True, False, None or a callable (done, total); got {progress!r}")
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=what, leave=False)

    def step(done: int) -> None:
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return step


@dataclass(frozen=True)
class AblationEffects:
    """What ablating each head alone does to a metric (`ablation_effects`).

    ``effect``, ``low``, ``high``, ``p_value``: ``[n_layers, n_heads]`` (attention layers in order;
    NaN for heads not asked for); ``per_prompt``: ``[n_layers, n_heads, batch]``; ``clean``:
    ``[batch]`` the metric without ablation. ``low``/``high``: the 95 % percentile bootstrap interval
    of the mean effect (``n_boot`` resamples of the prompts, ``seed``); ``p_value``: two-sided
    sign-flip permutation test of the per-prompt effects (``p_method`` says exact or sampled).
    """

    effect: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    p_value: torch.Tensor
    per_prompt: torch.Tensor
    clean: torch.Tensor
    heads: list[tuple[int, int]]
    metric: str
    method: str
    n_boot: int
    seed: int
    p_method: str


def bootstrap_interval(per_prompt: torch.Tensor, n_boot: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The 95 % percentile bootstrap interval of the mean over the last dimension (prompts); NaN where any prompt's
    value is NaN."""
    generator = torch.Generator().manual_seed(seed)
    prompts = per_prompt.shape[-1]
    picks = torch.randint(prompts, (n_boot, prompts), generator=generator)
    means = per_prompt[..., picks].mean(-1)  # [..., n_boot]
    bounds = torch.quantile(means, torch.tensor([0.025, 0.975], dtype=means.dtype), dim=-1)
    missing = per_prompt.isnan().any(-1)  # a NaN prompt: no interval (quantile would skip NaN resamples' order)
    return bounds[0].masked_fill(missing, math.nan), bounds[1].masked_fill(missing, math.nan)


def _hits(per_prompt: torch.Tensor, signs: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
    """How many sign patterns give a mean at least as far from 0 as `observed` (rounding forgiven)."""
    flipped = (per_prompt @ signs.T / per_prompt.shape[-1]).abs()
    return (flipped >= observed[..., None] * (1 - 1e-5) - 1e-12).sum(-1)


def sign_flip_p_value(per_prompt: torch.Tensor, n_perm: int, seed: int) -> tuple[torch.Tensor, str]:
    """Two-sided p-value that the mean over the last dimension is 0, by flipping the signs of the
    per-prompt values: every pattern up to `EXACT_PERMUTATION_PROMPTS` prompts, else `n_perm`
    random ones (``p = (1 + hits) / (1 + n_perm)``). NaN where any prompt's value is NaN."""
    prompts = per_prompt.shape[-1]
    observed = per_prompt.mean(-1).abs()
    missing = per_prompt.isnan().any(-1)  # NaN for a prompt: no p-value (never a p of 0 from NaN comparisons)
    if prompts <= EXACT_PERMUTATION_PROMPTS:
        patterns = torch.arange(2**prompts)[:, None].bitwise_right_shift(torch.arange(prompts)).bitwise_and(1)
        signs = (1 - 2 * patterns).to(per_prompt.dtype)  # [2**prompts, prompts], the identity first
        p = _hits(per_prompt, signs, observed) / 2**prompts
        return p.masked_fill(missing, math.nan), f"exact sign-flip permutation test ({2**prompts} patterns)"
    generator = torch.Generator().manual_seed(seed + 1)
    signs = (1 - 2 * torch.randint(2, (n_perm, prompts), generator=generator)).to(per_prompt.dtype)
    method = f"sign-flip permutation test, {n_perm} random patterns (seed {seed + 1})"
    return ((1 + _hits(per_prompt, signs, observed)) / (1 + n_perm)).masked_fill(missing, math.nan), method


def ablation_effects(
    model: Any,
    tokens: Any,
    metric: str | Metric = "loss",
    heads: Any = None,
    method: str = "mean",
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
    n_boot: int = 1000,
    seed: int = 0,
    reference: Any = None,
    progress: Any = True,
    per_run: int | None = None,
) -> AblationEffects:
    """The change in `metric` when each head alone is ablated, per prompt of the batch `tokens`.

    One run of the prompts, then one run per head (the whole batch each) that restarts at the head's
    layer from the recorded residual stream and unembeds only the positions the metric reads
    (`circuitwidgets.analysis.sweeps`): the answers of running the whole model once per head, faster.
    ``"mean"`` and ``"resample"`` take their replacements from `reference` (default: `tokens`, from the same
    first run; else one run of it). `per_run`: heads sharing one run (copies of the batch; default 1 on a
    CPU, sized to free memory on a GPU). `heads`: the ``(layer, head)`` pairs to try (default: every head).
    See the module docstring for metrics, and `AblationEffects` for what comes back. A metric that is NaN for
    a prompt of the clean run is refused; a head whose ablated run gives NaN for a prompt gets NaN
    statistics (effect, interval and p-value), never a number computed over fewer prompts.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> tokens = cw.analysis.repeated_random_tokens(model, seq_len=20, batch=8)
        >>> fx = cw.analysis.ablation_effects(model, tokens, heads=[(1, 0)], n_boot=100, progress=False)
        >>> fx.per_prompt.shape, bool(fx.effect[0].isnan().all())
        (torch.Size([2, 4, 8]), True)
    """
    view, tokens, chosen, measure = _effects_args(model, tokens, metric, heads, target, baseline_token, positions, n_boot, seed)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    from . import sweeps

    copies = sweeps.per_run(view, tokens, None if measure.reads is None else len(measure.reads), per_run)
    layers = sorted({layer for layer, _ in chosen})
    from_self = reference is None and method != "zero"
    if from_self:  # (the same checks as a run of the reference would make)
        check_reference(method, tokens, shifted=method == "resample")
    recorded = sweeps.record(view, tokens, [z_site(layer) for layer in layers] if from_self else [], copies)
    sources: dict[int, torch.Tensor | None]
    if from_self:
        shifted = method == "resample"
        sources = {layer: source_of(recorded.kept[z_site(layer)], method, shifted) for layer in layers}
    else:
        ref = None if reference is None else view.check_tokens(reference)
        sources = view.ablation_sources(layers, method, ref)
    step = progress_of(progress, len(chosen) + 1, "ablating heads")
    clean = _clean_metric(measure, recorded.logits)
    step(1)
    batch = tokens.shape[0]

    def hooks_of(layer: int, chunk: list[int]) -> list:
        def hook(z: torch.Tensor, hook: Any = None) -> torch.Tensor:
            out = z.clone()
            for c, head in enumerate(chunk):
                rows = sweeps.copy_rows(c, batch)
                out[rows] = replace_heads([head], sources[layer])(z[rows])
            return out

        return [(z_site(layer), hook)]

    jobs: dict[int, list[int]] = {}
    for layer, head in chosen:
        jobs.setdefault(layer, []).append(head)
    values = sweeps.sweep(recorded, jobs, hooks_of, measure, copies, lambda done: step(done + 1))
    per_prompt = torch.full((len(view.attn_layers), view.n_heads, batch), math.nan)
    rows = {layer: i for i, layer in enumerate(view.attn_layers)}
    for (layer, head), value in zip([(at, h) for at, hs in jobs.items() for h in hs], values, strict=True):
        per_prompt[rows[layer], head] = value - clean
    return _effects(per_prompt, clean, chosen, metric, method, n_boot, seed)


def _effects_args(
    model: Any, tokens: Any, metric: Any, heads: Any, target: Any, baseline_token: Any, positions: Any, n_boot: Any, seed: Any
) -> tuple[ModelView, torch.Tensor, list[tuple[int, int]], Measure]:
    view = as_view(model)
    tokens = view.check_tokens(tokens)
    if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive int; got {n_boot!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int; got {seed!r}")
    every = [(layer, head) for layer in view.attn_layers for head in range(view.n_heads)]
    chosen = check_heads(every if heads is None else heads, view.facts)
    if not chosen:
        raise ValueError("heads must name at least one (layer, head) pair")
    return view, tokens, chosen, metric_of(metric, tokens, view.d_vocab, target, baseline_token, positions)


def _clean_metric(measure: Measure, logits: torch.Tensor) -> torch.Tensor:
    """The metric of the clean run, per prompt; ValueError naming the prompts where it is NaN."""
    clean = measure(logits).cpu()
    bad = torch.nonzero(clean.isnan()).flatten().tolist()
    if bad:
        raise ValueError(
            f"the metric is NaN for prompt(s) {bad} of the clean run: no effect can be measured against it "
            "(a metric must be a number for every prompt; drop those prompts or fix the metric)"
        )
    return clean


def _effects_by_loop(
    view: ModelView, tokens: torch.Tensor, chosen: list[tuple[int, int]], method: str, reference: Any, measure: Measure,
    progress: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-prompt effects ``[n_layers, n_heads, batch]`` and the clean metric ``[batch]``: one clean run, then the whole
    model once per head (the reference the fast sweep is tested against, and the path of backends that cannot
    restart runs)."""
    ref = tokens if reference is None else view.check_tokens(reference)
    shifted = reference is None and method == "resample"
    sources = view.ablation_sources({layer for layer, _ in chosen}, method, ref, shifted=shifted)
    step = progress_of(progress, len(chosen) + 1, "ablating heads")
    clean = _clean_metric(measure, view.run_with_hooks(tokens, [])[0])
    step(1)
    rows = {layer: i for i, layer in enumerate(view.attn_layers)}
    per_prompt = torch.full((len(view.attn_layers), view.n_heads, tokens.shape[0]), math.nan)
    for done, (layer, head) in enumerate(chosen, 2):
        logits = view.run_with_hooks(tokens, [(z_site(layer), replace_heads([head], sources[layer]))])[0]
        per_prompt[rows[layer], head] = measure(logits).cpu() - clean
        step(done)
    return per_prompt, clean


def ablation_effects_by_loop(
    model: Any,
    tokens: Any,
    metric: str | Metric = "loss",
    heads: Any = None,
    method: str = "mean",
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
    n_boot: int = 1000,
    seed: int = 0,
    reference: Any = None,
    progress: Any = True,
) -> AblationEffects:
    """`ablation_effects` computed the plain way: one clean run, then the whole model once per head with its hook
    (what TransformerLens users write by hand). The reference the fast sweep is held to (to 1e-5), and the
    path `ablation_effects` takes on a backend that cannot restart runs."""
    view, tokens, chosen, measure = _effects_args(model, tokens, metric, heads, target, baseline_token, positions, n_boot, seed)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    per_prompt, clean = _effects_by_loop(view, tokens, chosen, method, reference, measure, progress)
    return _effects(per_prompt, clean, chosen, metric, method, n_boot, seed)


def _effects(
    per_prompt: torch.Tensor, clean: torch.Tensor, chosen: list[tuple[int, int]], metric: Any, method: str, n_boot: int,
    seed: int,
) -> AblationEffects:
    low, high = bootstrap_interval(per_prompt, n_boot, seed)
    p_value, p_method = sign_flip_p_value(per_prompt, n_boot, seed)
    return AblationEffects(
        effect=per_prompt.mean(-1),
        low=low,
        high=high,
        p_value=p_value,
        per_prompt=per_prompt,
        clean=clean,
        heads=chosen,
        metric=metric if isinstance(metric, str) else getattr(metric, "__name__", "custom"),
        method=method,
        n_boot=n_boot,
        seed=seed,
        p_method=p_method,
    )


def joint_ablation_effect(
    model: Any,
    tokens: Any,
    heads: Any,
    metric: str | Metric = "loss",
    method: str = "mean",
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
    reference: Any = None,
) -> torch.Tensor:
    """Per-prompt change ``[batch]`` in `metric` when every head of `heads` is ablated at once (two runs).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> tokens = cw.analysis.repeated_random_tokens(model, seq_len=20, batch=8)
        >>> cw.analysis.joint_ablation_effect(model, tokens, [(1, 0), (1, 1)]).shape
        torch.Size([8])
    """
    view = as_view(model)
    tokens = view.check_tokens(tokens)
    measure = metric_of(metric, tokens, view.d_vocab, target, baseline_token, positions)
    clean = measure(view.run_with_hooks(tokens, [])[0])
    return (measure(run_with_ablation(view, tokens, heads, method, reference)) - clean).cpu()
