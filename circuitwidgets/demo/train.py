"""Train the two-layer demo model: ``python -m circuitwidgets.demo.train [--seed N --steps N --out DIR]``.

Data (fresh every step, never stored; `training_batch`): ``n_ctx + 1`` tokens, ``<bos>`` at
position 0 and characters drawn uniformly from the 62 non-special tokens elsewhere; `COPIES`
segments of length L (uniform in 6..20) each copied to a random later position, and `BIGRAMS`
token pairs repeated at a random later position, so that every position of the context takes
part in some repeat. Loss: next-token cross-entropy, the copied targets weighted 1 and the
random ones `OTHER_WEIGHT`. A model can lower the loss on a copy only by finding the earlier
occurrence of the current token and predicting what followed it: previous-token heads plus
induction heads. The held-out data (`make_batch`) has one copied segment.

`evaluate(model)` computes every metric recorded in ``model_card.json`` from the model itself.

Example (a few steps; the real run is the command line above):
    >>> model, history = train(steps=5, batch=8, progress=False)
    >>> len(history)
    5
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from . import (
    BOS,
    BOS_ID,
    CARD_FILE,
    CHARS,
    CONFIG,
    DEMO_DIR,
    TOKENIZER_DIR,
    UNK,
    UNK_ID,
    WEIGHTS_FILE,
    boot,
    load_tokenizer,
    tables,
)

MIN_SEGMENT, MAX_SEGMENT = 6, 20
DEFAULTS = {"seed": 0, "steps": 6000, "batch": 64, "lr": 1e-3, "weight_decay": 0.01, "warmup": 200}
# Every step at the full context (n_ctx + 1 tokens: the last input position is trained too),
# with COPIES copied segments and BIGRAMS repeated token pairs per sequence (`training_batch`),
# and the loss on the unpredictable random characters weighted OTHER_WEIGHT.
# Measured (README "Training"): trained 75% at 48 tokens then at 64 with one copy and equal
# weights (the recipe shipped before), previous-token attention fell to 0.37 at positions
# 40-47 and to 0 beyond (never trained: no first copy there); at 64 tokens from the start with
# one copy the loss stayed on its plateau for 6 000 steps. Weighting the random characters 0.1
# (their gradient is noise that Adam's normalisation divides the signal by) and two copies per
# sequence left the plateau after ~2 000 steps.
COPIES, BIGRAMS, OTHER_WEIGHT = 2, 8, 0.1
EVAL_SEED = 12345  # held-out data: a generator seed the training run never uses
EVAL_BATCH = 512
BUCKET = 8  # per-position metrics average over buckets of this many query positions
BY_POSITION_DEFINITION = (
    "previous_token_attention: per layer-0 head, the attention from query i on position i-1, averaged over 32 "
    "sequences of random characters at length 64 (generator seed 12345) and over the queries of each bucket (1-7, "
    "8-15, ..., 56-63); previous_token_heads_worst_bucket: in each bucket the best previous-token head, the lowest "
    "over the buckets; second_copy_loss: held-out second-copy loss of the queries in each bucket"
)
# A layer-0 head is a previous-token head, a layer-1 head an induction head, when its
# score (head_scores, default tokens) is at least this.
HEAD_THRESHOLD = 0.3
# One thread: on this shared 2-core machine two OpenMP threads stalled each other under load
# (measured 1.5 s/step at load average 7, against 0.05 s/step idle).
N_THREADS = 1


# ----- tokenizer -----------------------------------------------------------------------------
def build_tokenizer():
    """The character tokenizer, in memory: ``<bos>`` 0, ``<unk>`` 1, `CHARS` 2..63.

    BPE with no merges over single characters (each character is one token, an unknown one is
    ``<unk>``), a lowercase normalizer, a template that prepends ``<bos>`` and a decoder that
    joins characters back without spaces. ``<bos>`` doubles as EOS and PAD so that
    TransformerLens adds no token beyond the 64.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {BOS: BOS_ID, UNK: UNK_ID, **{c: i + 2 for i, c in enumerate(CHARS)}}
    if len(vocab) != CONFIG["d_vocab"]:
        raise RuntimeError(f"tokenizer has {len(vocab)} tokens, config says d_vocab={CONFIG['d_vocab']}")
    inner = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    inner.normalizer = normalizers.Lowercase()
    inner.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, BOS_ID)]
    )
    inner.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=inner,
        bos_token=BOS,
        eos_token=BOS,
        pad_token=BOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
        model_max_length=CONFIG["n_ctx"],
    )


def save_tokenizer(folder: str | Path) -> Path:
    """Write the tokenizer to `folder` (loadable by ``PreTrainedTokenizerFast.from_pretrained``)."""
    folder = Path(folder)
    build_tokenizer().save_pretrained(str(folder))
    return folder


# ----- data ----------------------------------------------------------------------------------
def make_batch(
    batch: int, generator: torch.Generator, n_ctx: int = CONFIG["n_ctx"]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(tokens, first, second)``: ``[batch, n_ctx]`` tokens and two ``[batch, n_ctx - 1]`` masks.

    ``first`` / ``second`` mark the prediction positions (logit at position p predicts token
    p + 1) whose targets are tokens 2..L of the first / second copy of the segment: the
    tokens an induction head can predict in the second copy, and their twins in the first.

    Example:
        >>> tokens, first, second = make_batch(2, torch.Generator().manual_seed(0))
        >>> tokens.shape, bool((tokens[:, 0] == 0).all()), bool((tokens[:, 1:] >= 2).all())
        (torch.Size([2, 64]), True, True)
        >>> bool((tokens[:, 1:][first] == tokens[:, 1:][second]).all())
        True
    """
    if n_ctx < 1 + 2 * MAX_SEGMENT:
        raise ValueError(f"n_ctx={n_ctx} is too short for two copies of {MAX_SEGMENT} tokens after BOS")
    n_special = 2
    tokens = torch.randint(n_special, CONFIG["d_vocab"], (batch, n_ctx), generator=generator)
    tokens[:, 0] = BOS_ID
    length = torch.randint(MIN_SEGMENT, MAX_SEGMENT + 1, (batch,), generator=generator)
    # s uniform in 1 .. n_ctx - 2L, then t uniform in s + L .. n_ctx - L
    u, v = torch.rand(batch, generator=generator), torch.rand(batch, generator=generator)
    start = 1 + (u * (n_ctx - 2 * length)).long()
    copy = start + length + (v * (n_ctx - length - (start + length) + 1)).long()
    pos = torch.arange(n_ctx)[None, :]
    in_copy = (pos >= copy[:, None]) & (pos < (copy + length)[:, None])
    index = torch.where(in_copy, pos - copy[:, None] + start[:, None], pos)
    tokens = tokens.gather(1, index)
    pred = torch.arange(n_ctx - 1)[None, :]
    first = (pred >= start[:, None]) & (pred < (start + length - 1)[:, None])
    second = (pred >= copy[:, None]) & (pred < (copy + length - 1)[:, None])
    return tokens, first, second


def training_batch(
    batch: int, generator: torch.Generator, length: int | None = None, copies: int | None = None, bigrams: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, copied)``, both ``[batch, length]``: the training data and where it is predictable.

    Random characters after ``<bos>``; then `copies` times a segment of length L (uniform in
    `MIN_SEGMENT`..`MAX_SEGMENT`) placed as in `make_batch` is copied (a later copy may
    overwrite an earlier one); then `bigrams` times a token pair at a uniform position j is
    repeated at a uniform later position, so that every position of the context is the key or
    query of some repeat. ``copied[b, i]`` is True where a repeat wrote token i to follow an
    earlier occurrence of token i-1 (tokens 2..L of a copy, the second token of a repeated pair);
    a later repeat can overwrite part of an earlier one, which leaves about a third of them
    unpredictable (kept as written: the README's "Training" says what recomputing them did).

    Example:
        >>> tokens, copied = training_batch(2, torch.Generator().manual_seed(0))
        >>> tokens.shape, copied.shape, bool((tokens[:, 0] == 0).all())
        (torch.Size([2, 65]), torch.Size([2, 65]), True)
    """
    length = CONFIG["n_ctx"] + 1 if length is None else length
    copies = COPIES if copies is None else copies
    bigrams = BIGRAMS if bigrams is None else bigrams
    tokens = torch.randint(2, CONFIG["d_vocab"], (batch, length), generator=generator)
    tokens[:, 0] = BOS_ID
    pos = torch.arange(length)[None, :]
    copied = torch.zeros(batch, length, dtype=torch.bool)
    for _ in range(copies):
        size = torch.randint(MIN_SEGMENT, MAX_SEGMENT + 1, (batch,), generator=generator)
        u, v = torch.rand(batch, generator=generator), torch.rand(batch, generator=generator)
        start = 1 + (u * (length - 2 * size)).long()
        copy = start + size + (v * (length - size - (start + size) + 1)).long()
        in_copy = (pos >= copy[:, None]) & (pos < (copy + size)[:, None])
        tokens = tokens.gather(1, torch.where(in_copy, pos - copy[:, None] + start[:, None], pos))
        copied |= in_copy & (pos > copy[:, None])
    rows = torch.arange(batch)
    for _ in range(bigrams):
        j = torch.randint(1, length - 3, (batch,), generator=generator)
        i = j + 2 + (torch.rand(batch, generator=generator) * (length - 3 - j)).long()
        tokens[rows, i], tokens[rows, i + 1] = tokens[rows, j], tokens[rows, j + 1]
        copied[rows, i + 1] = True
    return tokens, copied


def token_losses(model: Any, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy at every position, ``[batch, seq - 1]``."""
    logits = model(tokens)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")


def versions() -> dict[str, str | None]:
    """Versions of the libraries a training run used (recorded in the model cards)."""
    import tokenizers
    import transformer_lens
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformer_lens": getattr(transformer_lens, "__version__", None) or _dist_version("transformer-lens"),
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


# ----- training ------------------------------------------------------------------------------
def boot_for_training(seed: Any, tokenizer: Any, name: str) -> Any:
    """A fresh bridge of demo model `name` (initial weights from `seed`), checked arguments."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {seed!r}")
    if seed == EVAL_SEED:
        raise ValueError(f"seed={seed} is reserved for the held-out evaluation data; pick another")
    return boot(seed=seed, tokenizer=tokenizer, name=name)


def fit(
    model: Any, next_batch: Any, *, steps: int, batch: int, lr: float, weight_decay: float, warmup: int,
    progress: bool, desc: str, snapshot: Any = None,
) -> list[float]:
    """AdamW on `model`'s parameters; returns the per-step training loss. Leaves `model` in eval mode.

    ``next_batch(step, batch)`` returns ``(tokens, weights)``: ``[batch, length + 1]`` tokens, of
    which the model reads the first `length` and is scored on predicting tokens 1..length (so
    the last input position is trained too), and ``[batch, length]`` weights of those targets
    (None: equal weights); the loss is the weighted mean next-token cross-entropy. The learning rate rises
    linearly over the first `warmup` steps. The forward pass runs through the native module the
    bridge wraps (same parameters, same logits, no hook overhead). ``snapshot(done, model)``, when
    given, is called before the first step (``done`` 0) and after each step: it may copy the
    weights (`checkpoint_steps`), which changes nothing the run computes.
    """
    from tqdm.auto import tqdm

    for name, value in (("steps", steps), ("batch", batch), ("warmup", warmup)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {value!r}")
    if steps < 1 or batch < 1:
        raise ValueError(f"steps={steps} and batch={batch} must both be at least 1")
    forward = getattr(model, "original_model", model)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    history: list[float] = []
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=0.5)
    if snapshot is not None:
        snapshot(0, model)
    for step in bar:
        for group in optimiser.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup > 0 else lr
        tokens, weights = next_batch(step, batch)
        losses = F.cross_entropy(forward(tokens[:, :-1]).transpose(1, 2), tokens[:, 1:], reduction="none")
        loss = losses.mean() if weights is None else (losses * weights).sum() / weights.sum()
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        history.append(float(loss.detach()))
        if snapshot is not None:
            snapshot(step + 1, model)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{sum(history[-50:]) / len(history[-50:]):.3f}")
    model.eval()
    return history


def train(
    seed: int = DEFAULTS["seed"],
    steps: int = DEFAULTS["steps"],
    batch: int = DEFAULTS["batch"],
    lr: float = DEFAULTS["lr"],
    weight_decay: float = DEFAULTS["weight_decay"],
    progress: bool = True,
    tokenizer: Any = None,
    warmup: int = DEFAULTS["warmup"],
    snapshot: Any = None,
) -> tuple[Any, list[float]]:
    """Train a fresh demo-config bridge; returns ``(model in eval mode, per-step training loss)``.

    `seed` sets both the initial weights (``TransformerBridgeConfig.seed``) and the data
    (`training_batch`, weights `OTHER_WEIGHT` on targets outside the copies).
    `tokenizer` defaults to the one saved in the package (`load_tokenizer()`).
    `snapshot(done, model)`: see `fit` (the command line saves `checkpoint_steps` with it).
    """
    model = boot_for_training(seed, tokenizer, "2l")
    generator = torch.Generator().manual_seed(seed)

    def next_batch(step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, copied = training_batch(size, generator)
        return tokens, torch.where(copied[:, 1:], 1.0, OTHER_WEIGHT)

    history = fit(
        model, next_batch, steps=steps, batch=batch, lr=lr, weight_decay=weight_decay, warmup=warmup,
        progress=progress, desc="training the two-layer demo model", snapshot=snapshot,
    )
    return model, history


# ----- evaluation ----------------------------------------------------------------------------
def _ablate_hooks(heads: list[tuple[int, int]]) -> list[tuple[str, Any]]:
    """Hooks that zero the listed heads' outputs (``hook_z``, before ``W_O``; ``b_O`` stays)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def make(chosen: list[int]):
        def hook(z: torch.Tensor, hook: Any) -> torch.Tensor:
            z = z.clone()
            z[:, :, chosen] = 0.0
            return z

        return hook

    return [(f"blocks.{layer}.attn.hook_z", make(chosen)) for layer, chosen in sorted(by_layer.items())]


def copy_losses(model: Any, heads_to_ablate: list[tuple[int, int]] | None = None, *, batch: int = EVAL_BATCH) -> dict[str, float]:
    """Mean loss on the first and second copy (and overall) of held-out data.

    `heads_to_ablate` lists ``(layer, head)`` pairs whose outputs are zeroed.
    """
    tokens, first, second = make_batch(batch, torch.Generator().manual_seed(EVAL_SEED))
    tokens = tokens.to(model.W_E.device)
    with torch.no_grad():
        if heads_to_ablate:
            logits = model.run_with_hooks(tokens, fwd_hooks=_ablate_hooks(heads_to_ablate))
        else:
            logits = model(tokens)
        losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none").cpu()
    return {
        "first_copy": float(losses[first].mean()),
        "second_copy": float(losses[second].mean()),
        "all": float(losses.mean()),
    }


def position_buckets(n_ctx: int = CONFIG["n_ctx"]) -> list[tuple[int, int]]:
    """``[(first, last), ...]``: query positions 1..n_ctx-1 in buckets of `BUCKET` (the first one starts at 1)."""
    return [(max(lo, 1), min(lo + BUCKET, n_ctx) - 1) for lo in range(0, n_ctx, BUCKET)]


def previous_token_by_position(model: Any, *, batch: int = 32, seed: int = EVAL_SEED) -> torch.Tensor:
    """``[n_heads, n_ctx - 1]``: layer-0 attention on position i-1 from query i = 1..n_ctx-1, batch mean.

    On `batch` full-length sequences of uniform random characters after ``<bos>`` (no repeats
    planted), from `circuitwidgets.analysis.attention_patterns`.

    Example:
        >>> import circuitwidgets as cw
        >>> previous_token_by_position(cw.demo_model(), batch=2).shape
        torch.Size([4, 63])
    """
    from .. import analysis

    n_ctx = model.cfg.n_ctx
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(2, model.cfg.d_vocab, (batch, n_ctx), generator=generator)
    tokens[:, 0] = BOS_ID
    query = torch.arange(1, n_ctx)
    total = torch.zeros(model.cfg.n_heads, n_ctx - 1)
    for row in tokens:
        pattern = analysis.attention_patterns(model, row, layers=[0])[0]  # [heads, query, key]
        total += pattern[:, query, query - 1].cpu()
    return total / batch


def second_copy_loss_by_position(model: Any, *, batch: int = EVAL_BATCH) -> list[dict[str, Any]]:
    """Held-out second-copy loss in buckets of query position (the position that predicts the next token).

    One dict per bucket of `position_buckets`: ``first``, ``last``, ``loss`` (None when no
    second-copy target falls there) and ``count`` (targets averaged).
    """
    tokens, _, second = make_batch(batch, torch.Generator().manual_seed(EVAL_SEED))
    with torch.no_grad():
        logits = model(tokens.to(model.W_E.device)).float().cpu()
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    position = torch.arange(losses.shape[1]).expand_as(losses)
    rows = []
    for first, last in position_buckets(tokens.shape[1]):
        chosen = second & (position >= first) & (position <= last)
        loss = round(float(losses[chosen].mean()), 4) if chosen.any() else None
        rows.append({"first": first, "last": last, "loss": loss, "count": int(chosen.sum())})
    return rows


def by_position(model: Any, previous: list[tuple[int, int]]) -> dict[str, Any]:
    """The per-position metrics of the card: previous-token attention and second-copy loss by bucket."""
    attention = previous_token_by_position(model)
    buckets = position_buckets(model.cfg.n_ctx)
    per_head = {
        f"0.{h}": [round(float(attention[h, first - 1 : last].mean()), 4) for first, last in buckets]
        for h in range(attention.shape[0])
    }
    chosen = [f"0.{h}" for _, h in previous] or list(per_head)
    best = [max(per_head[head][i] for head in chosen) for i in range(len(buckets))]
    return {
        "buckets": [[first, last] for first, last in buckets],
        "previous_token_attention": per_head,
        # in each bucket the best previous-token head's attention; the lowest over the buckets
        "previous_token_heads_worst_bucket": min(best),
        "second_copy_loss": second_copy_loss_by_position(model),
    }


def _rounded(tensor: torch.Tensor) -> list:
    return [[None if math.isnan(x) else round(x, 4) for x in row] for row in tensor.tolist()]


def evaluate(model: Any) -> dict[str, Any]:
    """Every metric of the model card, computed from `model` (a bridge with the demo config).

    Returns a JSON-ready dict: held-out losses (first vs second copy, uniform baseline
    ``ln 62``), the five `head_scores` and `copying_scores` per head (``[layer][head]``), the
    previous-token heads (layer 0, previous_token >= HEAD_THRESHOLD) and induction heads
    (layer 1, induction >= HEAD_THRESHOLD), the raw K-composition from every layer-0 head into
    each induction head with the random baseline, and the held-out losses after zero-ablating
    the previous-token heads, the other layer-0 heads (a control), and the induction heads.

    Example:
        >>> import circuitwidgets as cw
        >>> metrics = evaluate(cw.demo_model())
        >>> metrics["loss"]["second_copy"] < metrics["loss"]["first_copy"] / 3
        True
    """
    from .. import analysis
    from ..report import SCORE_COLUMNS

    scores = {kind: analysis.head_scores(model, kind) for kind, _ in SCORE_COLUMNS}
    copying = analysis.copying_scores(model)
    n_heads = model.cfg.n_heads
    previous = [(0, h) for h in range(n_heads) if float(scores["previous_token"][0, h]) >= HEAD_THRESHOLD]
    induction = [(1, h) for h in range(n_heads) if float(scores["induction"][1, h]) >= HEAD_THRESHOLD]
    others = [(0, h) for h in range(n_heads) if (0, h) not in previous]
    k_comp = analysis.composition_scores(model, "K")
    composition = {
        f"1.{h}": {f"0.{h1}": round(float(k_comp[0, h1, 1, h]), 4) for h1 in range(n_heads)} for _, h in induction
    }
    return {
        "loss": {**copy_losses(model), "uniform": round(math.log(CONFIG["d_vocab"] - 2), 4)},
        "heads": {"previous_token": [list(x) for x in previous], "induction": [list(x) for x in induction]},
        "head_scores": {kind: _rounded(value) for kind, value in scores.items()},
        "copying_scores": _rounded(copying),
        "k_composition_into_induction_heads": composition,
        "k_composition_baseline": round(float(analysis.composition_baseline(model, kind="K")), 4),
        "ablation": {
            "previous_token_heads": copy_losses(model, previous),
            "other_layer0_heads": copy_losses(model, others),
            "induction_heads": copy_losses(model, induction),
        },
        "by_position": by_position(model, previous),
    }


# ----- the model card and the command line ---------------------------------------------------
def model_card(seed: int, steps: int, history: list[float], metrics: dict[str, Any], seconds: float) -> dict[str, Any]:
    tail = history[-100:]
    return {
        "name": "circuitwidgets demo model",
        "architecture": "two-layer attention-only transformer, no LayerNorm, learned positions (TransformerLens native)",
        "config": {**CONFIG, "seed": seed},
        "tokenizer": {
            "kind": "characters (tokenizers BPE with no merges, lowercase normalizer)",
            "special": {BOS: BOS_ID, UNK: UNK_ID},
            "chars": CHARS,
            "uppercase": "lowercased",
            "other characters": "<unk>, one per character",
            "bos": "prepended by to_tokens; <bos> also serves as EOS and PAD",
        },
        "data": {
            "sequence_length": f"{CONFIG['n_ctx'] + 1} tokens: inputs 0..{CONFIG['n_ctx'] - 1}, targets 1..{CONFIG['n_ctx']}",
            "recipe": (
                f"<bos> at position 0, then tokens 2..63 drawn uniformly; {COPIES} times, a segment of length L uniform "
                f"in {MIN_SEGMENT}..{MAX_SEGMENT}, starting at s uniform in 1..n-2L, copied to t uniform in s+L..n-L "
                f"(a later copy may overwrite an earlier one); then {BIGRAMS} times, the pair at a uniform position j "
                "repeated at a uniform later position; fresh batch each step from torch.Generator().manual_seed(seed)"
            ),
            "loss": (
                f"next-token cross-entropy, weighted mean: 1 on copied targets (tokens 2..L of a copy, the second "
                f"token of a repeated pair), {OTHER_WEIGHT} on the others"
            ),
            "held_out": f"{EVAL_BATCH} sequences from torch.Generator().manual_seed({EVAL_SEED}); first/second copy "
            "losses are over targets 2..L of each copy",
        },
        "training": {
            "optimizer": "AdamW",
            "lr": DEFAULTS["lr"],
            "warmup_steps": DEFAULTS["warmup"],
            "weight_decay": DEFAULTS["weight_decay"],
            "batch": DEFAULTS["batch"],
            "steps": steps,
            "seed": seed,
            "torch_threads": torch.get_num_threads(),
            "final_train_loss_mean_last_100": round(sum(tail) / len(tail), 4),
            "train_loss_every_500_steps": [round(history[i], 4) for i in range(0, len(history), 500)],
            "wall_seconds": round(seconds, 1),
        },
        "versions": versions(),
        "metric_definitions": {
            "head_scores": "circuitwidgets.analysis.head_scores(model, kind) with its defaults (seed 0, batch 8, "
            "[BOS, r, r] with |r| = 25; four repeats for prefix_matching)",
            "copying_scores": "circuitwidgets.analysis.copying_scores(model): sum(eig)/sum(|eig|) of the full OV circuit",
            "heads": f"previous_token: layer-0 heads with previous_token score >= {HEAD_THRESHOLD}; "
            f"induction: layer-1 heads with induction score >= {HEAD_THRESHOLD}",
            "k_composition": (
                "circuitwidgets.analysis.composition_scores(model, 'K') raw, [from layer-0 head][into induction head]"
            ),
            "ablation": "held-out losses with the listed heads' hook_z zeroed",
            "by_position": BY_POSITION_DEFINITION,
        },
        **metrics,
    }


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def command(argv: list[str] | None, prog: str, description: str, defaults: dict, out_help: str, run: Any) -> int:
    """The command line both trainers share: parse and check the options, run with that many threads."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--seed", type=int, default=defaults["seed"], help="initial weights and data (default 0)")
    parser.add_argument("--steps", type=int, default=defaults["steps"], help=f"optimiser steps (default {defaults['steps']})")
    parser.add_argument("--out", type=Path, default=DEMO_DIR, help=f"{out_help} (default: the package's demo folder)")
    parser.add_argument("--threads", type=int, default=N_THREADS, help=f"torch CPU threads (default {N_THREADS})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1; got {args.steps}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1; got {args.threads}")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return run(args)
    finally:
        torch.set_num_threads(previous_threads)


def main(argv: list[str] | None = None) -> int:
    return command(
        argv, "python -m circuitwidgets.demo.train",
        "Train the circuitwidgets demo model (a few CPU minutes) and write its weights, tokenizer and model card.",
        DEFAULTS, "folder for weights.safetensors, checkpoints.safetensors, model_card.json and tokenizer/", _run,
    )


# ----- the training run, along its checkpoints ------------------------------------------------
#: The scan of the saved checkpoints that the card records (`training_run`).
RUN_METRICS = ("previous_token", "induction", "composition_k", "loss", "in_context_loss")
#: The logits that predict the second copy of the scan's default tokens ([BOS, r, r], |r| = 25): tokens 2..25 of it.
SECOND_COPY = range(26, 50)
RUN_DEFINITIONS = {
    "checkpoints": "the model after 0 (initialisation) .. 6000 optimiser steps, saved by python -m circuitwidgets.demo.train "
    "at circuitwidgets.demo.checkpoints.checkpoint_steps(); every step but the last stored as its float16 difference from "
    "the final weights (weights.safetensors) in checkpoints.safetensors",
    "curves": "circuitwidgets.analysis.scan_checkpoints(cw.demo_checkpoints()) with its default tokens (8 sequences [BOS, r, "
    "r], |r| = 25, seed 0): previous_token = max over the previous-token heads; induction = max over the induction heads; "
    "k_composition = max of composition_scores(model, 'K') over the pairs previous-token head -> induction head; "
    "k_composition_other = the same from the other layer-0 heads; second_copy_loss = mean loss of the logits at 26..49 "
    "(predicting tokens 2..25 of the second copy); in_context_loss = loss of tokens 47..50 minus tokens 2..5",
    "phase_change": "CheckpointScan.phase_change of each curve: the neighbouring checkpoints with the largest change, widened "
    "to the neighbouring pairs while the change keeps its sign and at least half that size",
}


def saved_steps(steps: int) -> list[int]:
    """The steps a run of `steps` optimiser steps saves: `checkpoint_steps` (every step for a short run)."""
    from .checkpoints import COUNT, FIRST, checkpoint_steps

    return checkpoint_steps(steps, COUNT, FIRST) if steps >= COUNT + FIRST else list(range(steps + 1))


def training_run(checkpoints: Any, heads: dict[str, list[list[int]]]) -> dict[str, Any]:
    """The card's record of the run along `checkpoints`: the curves of `RUN_DEFINITIONS` and their phase changes.

    `heads`: the final model's ``previous_token`` and ``induction`` heads (``evaluate(model)["heads"]``).
    """
    from ..analysis import scan_checkpoints

    scan = scan_checkpoints(checkpoints, metrics=RUN_METRICS, progress=False)
    previous = [tuple(h) for h in heads["previous_token"]] or [(0, h) for h in range(CONFIG["n_heads"])]
    induction = [tuple(h) for h in heads["induction"]] or [(1, h) for h in range(CONFIG["n_heads"])]
    others = [(0, h) for h in range(CONFIG["n_heads"]) if (0, h) not in previous]
    pairs = [(p, i) for p in previous for i in induction]
    asked: dict[str, tuple[str, dict[str, Any]]] = {
        "previous_token": ("previous_token", {"heads": previous}),
        "induction": ("induction", {"heads": induction}),
        "k_composition": ("composition_k", {"heads": pairs}),
        "second_copy_loss": ("loss", {"positions": SECOND_COPY}),
        "in_context_loss": ("in_context_loss", {}),
    }
    curves = {name: scan.curve(metric, **options) for name, (metric, options) in asked.items()}
    if others:
        curves["k_composition_other"] = scan.curve("composition_k", [(o, i) for o in others for i in induction])
    return {
        "steps": list(scan.steps),
        "curves": {name: [round(float(x), 4) for x in curve] for name, curve in curves.items()},
        "phase_change": {name: list(scan.phase_change(metric, **options)) for name, (metric, options) in asked.items()},
        "definitions": RUN_DEFINITIONS,
    }


def _run(args: argparse.Namespace) -> int:
    from safetensors.torch import save_file

    from ..analysis import Checkpoints
    from .checkpoints import CHECKPOINTS_FILE, read_checkpoints, write_checkpoints

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_dir = out / TOKENIZER_DIR.name
    save_tokenizer(tokenizer_dir)
    start = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_dir)
    wanted, states = set(saved_steps(args.steps)), {}

    def snapshot(done: int, model: Any) -> None:  # (copies of the weights: the run computes the same)
        if done in wanted:
            states[done] = {name: t.detach().clone().cpu() for name, t in model.state_dict().items()}

    model, history = train(
        seed=args.seed, steps=args.steps, progress=not args.no_progress, tokenizer=tokenizer, snapshot=snapshot
    )
    seconds = time.perf_counter() - start
    metrics = evaluate(model)
    state = {name: tensor.detach().contiguous().cpu() for name, tensor in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS_FILE.name))
    path = write_checkpoints(states, out / CHECKPOINTS_FILE.name)
    stored = read_checkpoints(path, state)  # what ships: the last step is the final weights, bit for bit
    from . import model_from_state

    run = training_run(Checkpoints(load=lambda step: model_from_state(stored[step]), steps=sorted(stored)), metrics["heads"])
    run["file"] = {"name": path.name, "bytes": path.stat().st_size, "checkpoints": len(stored)}
    metrics["training_run"] = run
    card = model_card(args.seed, args.steps, history, metrics, seconds)
    if (out / CARD_FILE.name).is_file():  # the measurements of the recipe shipped before this one stay
        before = json.loads((out / CARD_FILE.name).read_text()).get("before_this_recipe")
        if before:
            card["before_this_recipe"] = before
    (out / CARD_FILE.name).write_text(json.dumps(card, indent=2) + "\n")
    tables.update_readme("2l", card, out / tables.README.name)
    loss = metrics["loss"]
    print(
        f"wrote {out / WEIGHTS_FILE.name}, {path.name} ({len(stored)} checkpoints, {path.stat().st_size / 1e6:.2f} MB) "
        f"and {out / CARD_FILE.name} ({seconds:.0f} s): "
        f"held-out loss first copy {loss['first_copy']:.3f}, second copy {loss['second_copy']:.3f}; "
        f"previous-token heads {metrics['heads']['previous_token']}, induction heads {metrics['heads']['induction']}"
    )
    if not metrics["heads"]["previous_token"] or not metrics["heads"]["induction"]:
        print("warning: no previous-token or no induction head reached the threshold; train longer", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
