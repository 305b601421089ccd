"""`Ablation`: what switching off each head does to a metric, and what switching off a chosen set does."""

from __future__ import annotations

from typing import Any

import torch
import traitlets

from ..ablation import METHODS, check_heads
from ..analysis import ablation_effects, repeated_random_tokens, run_with_ablation
from ..analysis.interventions import bootstrap_interval, metric_of, next_token_loss, sign_flip_p_value
from ._interventions import BATCH, block_length, progress_reporter, second_copy, token_batch
from .base import CircuitWidget

METRICS = ("loss", "logit_diff")
METRIC_LABELS = {"loss": "next-token loss", "logit_diff": "logit difference"}
METHOD_LABELS = {
    "zero": "zero-ablated (z = 0)",
    "mean": "mean-ablated (z replaced by its mean over the reference prompts, per position)",
    "resample": "resample-ablated (z taken from another prompt at the same positions)",
}


class Ablation(CircuitWidget, view="ablation"):
    """Ablate heads: each head alone (a layer x head grid of effects with intervals and p-values), and a set together.

    The grid shows, for each head, the mean over the prompts of ``metric(ablated) - metric(clean)``
    when that head alone is ablated (`circuitwidgets.analysis.ablation_effects`): a diverging
    colour scale centred on 0; hovering a cell gives its 95 % bootstrap interval and sign-flip
    p-value. Clicking a cell adds the head to the set `ablated` or takes it out; the set's
    combined effect (every head of it ablated at once, as
    `circuitwidgets.analysis.joint_ablation_effect`) is shown beside the sum of its heads' single
    effects (their difference is the interaction). Below, the metric at every position of one
    prompt (`prompt_index`), clean and with the set ablated: for ``"loss"`` the next-token loss at
    each position (`circuitwidgets.analysis.next_token_loss`), the positions the metric averages
    marked; for ``"logit_diff"`` the target's logit minus the baseline token's at each position.

    The model is live: a weight edit or a hook shows at the next action (or `refresh()`).

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer`` (any model whose runs
            have hook points; a remote nnsight model shows why it cannot).
        tokens: the prompts, a list of str (tokenised with BOS; they must give one number of tokens),
            or a token batch ``[batch, seq]``. Default: `BATCH` prompts ``[BOS, r, r]`` of a random block
            ``r`` repeated (`circuitwidgets.analysis.repeated_random_tokens`), the loss taken on the
            second copy (positions default to it).
        metric: ``"loss"`` or ``"logit_diff"`` (needs `target`), see `circuitwidgets.analysis.interventions`.
        method: ``"zero"``, ``"mean"`` or ``"resample"``.
        ablated: the heads ablated together at first, ``[(layer, head), ...]``.
        prompt_index: the prompt the per-position strip shows.
        target, baseline_token, positions, n_boot, seed, reference: passed to
            `circuitwidgets.analysis.ablation_effects` (reference: tokens or prompts for mean and
            resample ablation; default: the batch itself).
        layer, head: the selected head (marked in the grid; the arrow keys move it, Enter toggles it).
        defer: inside a running event loop (a notebook kernel), draw at once and compute right after
            the cell returns, showing a progress note meanwhile.

    Example:
        >>> import circuitwidgets as cw
        >>> w = cw.Ablation(cw.demo_model(), n_boot=200)
        >>> w.effects["shape"], w.info["batch"]
        ([4, 2, 4], 8)
        >>> w.ablated = [[1, 0], [1, 2]]
        >>> w.joint["heads"], w.joint["mean"] > w.joint["sum_single"] / 2
        ([[1, 0], [1, 2]], True)
    """

    controls = ("ablated", "prompt_index", "metric", "method")
    inputs = ("ablated", "metric", "method")  # a prompt switch draws from the strip already sent

    ablated: traitlets.List[Any] = traitlets.List(
        help="the heads ablated together, [[layer, head], ...] (kept sorted and distinct); a click on a cell of the "
        "grid adds or removes one"
    ).tag(sync=True)
    prompt_index = traitlets.Int(0, help="the prompt of the batch whose per-position metric the strip shows").tag(sync=True)
    metric = traitlets.Enum(
        METRICS, "loss", help="what is measured: next-token loss, or the logit difference target - baseline_token"
    ).tag(sync=True)
    method = traitlets.Enum(METHODS, "mean", help="how a head is ablated: its z set to zero, to its mean, or resampled").tag(
        sync=True
    )
    progress = traitlets.Unicode("", help="what the kernel is computing and how far it is, '' when idle").tag(sync=True)
    info = traitlets.Dict(help="layers, heads, batch and sequence sizes, labels, and what the metric ran on").tag(sync=True)
    effects = traitlets.Dict(
        help="payload float32 [4, n_attn_layers, n_heads]: effect, low, high (the 95 % bootstrap interval) and p-value "
        "of ablating each head alone; with p_method, n_boot, seed, metric, method, clean (the clean metric's mean)"
    ).tag(sync=True)
    joint = traitlets.Dict(
        help="payload float32 [batch]: the per-prompt effect of ablating every head of `ablated` at once; with heads, "
        "mean, low, high, p_value, p_method and sum_single (the sum of those heads' single effects)"
    ).tag(sync=True)
    strip = traitlets.Dict(
        help="payload float32 [2, batch, n_positions]: the metric at every position, clean (0) and with `ablated` "
        "(1); with heads, kind ('loss': entry p is the loss of predicting token p + 1), positions (those the "
        "metric averages) and labels (each prompt's token strings)"
    ).tag(sync=True)

    def __init__(
        self, model: Any, tokens: Any = None, *, metric: str = "loss", method: str = "mean", ablated: Any = (),
        prompt_index: int = 0, target: Any = None, baseline_token: Any = None, positions: Any = None,
        n_boot: int = 1000, seed: int = 0, reference: Any = None, layer: int | None = None, head: int = 0,
        defer: bool = False, **kwargs: Any,
    ) -> None:
        super().__init__(model, head=head, **kwargs)
        mv = self.mv
        self.layer = mv.attn_layers[0] if layer is None else layer
        if tokens is None:
            n = block_length(mv)
            self._tokens = repeated_random_tokens(mv, seq_len=n, batch=BATCH)
            positions = second_copy(mv) if positions is None else positions
            ran_on = f"{BATCH} random blocks of {n} tokens, each repeated once after BOS (repeated_random_tokens)"
        else:
            self._tokens = token_batch(mv, tokens, "tokens")
            ran_on = f"the given {self._tokens.shape[0]} prompts of {self._tokens.shape[1]} tokens"
        for name, value in (("n_boot", n_boot), ("seed", seed)):
            if not isinstance(value, int) or isinstance(value, bool) or (name == "n_boot" and value < 1):
                raise ValueError(f"{name} must be {'a positive' if name == 'n_boot' else 'an'} int; got {value!r}")
        ref = None if reference is None else token_batch(mv, reference, "reference")
        self._reference = ref
        self._options = {"target": target, "baseline_token": baseline_token, "positions": positions}
        self._n_boot, self._seed = n_boot, seed
        self._fx: Any = None  # the single-head effects of the picture, and the clean run's metrics
        self._clean_strip: torch.Tensor | None = None
        batch, seq = self._tokens.shape
        self.metric, self.method, self.prompt_index, self.ablated = metric, method, prompt_index, list(ablated)
        reference_text = "the batch itself" if ref is None else f"{ref.shape[0]} reference prompts"
        self.info = {
            "attn_layers": list(mv.attn_layers),
            "n_heads": mv.n_heads,
            "batch": batch,
            "seq": seq,
            "metric_labels": METRIC_LABELS,
            "method_labels": METHOD_LABELS,
            "has_target": target is not None,
            "n_boot": n_boot,
            "seed": seed,
            "reference": reference_text,
            "ran_on": ran_on,
        }
        self._start(defer)

    # ----- checks (see CircuitWidget: run after the type check, raise to refuse) ---------------
    def _measure(self, metric: str, position: int | None = None) -> Any:
        """The per-prompt metric of `analysis.metric_of`, at the widget's positions or at one `position`."""
        opts = self._options
        chosen = opts["positions"] if position is None else position
        return metric_of(metric, self._tokens, self.mv.d_vocab, opts["target"], opts["baseline_token"], chosen)

    def _check_metric(self, value: str) -> str:
        self._measure(value)  # e.g. logit_diff without a target, positions outside the prompts
        return value

    def _check_method(self, value: str) -> str:
        if value != "zero" and self._reference is None and self._tokens.shape[0] < 2:
            raise ValueError(
                f"{value} ablation over the batch itself needs at least two prompts (one prompt's {value} is itself): "
                "give more prompts or reference= tokens"
            )
        return value

    def _check_prompt_index(self, value: int) -> int:
        batch = self._tokens.shape[0]
        if not 0 <= value < batch:
            raise ValueError(f"prompt_index={value} is out of range: the batch has prompts 0..{batch - 1}")
        return value

    def _check_ablated(self, value: list) -> list[list[int]]:
        return [list(pair) for pair in check_heads(value, self.mv.facts)]

    # ----- computing ---------------------------------------------------------------------------
    def _per_position(self, logits: torch.Tensor) -> torch.Tensor:
        """The metric at every position, ``[batch, n_positions]`` (float32, CPU)."""
        if self.metric == "loss":
            return next_token_loss(logits, self._tokens).cpu()
        return torch.stack([self._measure("logit_diff", p)(logits) for p in range(self._tokens.shape[1])], 1).cpu()

    def _strip_positions(self) -> list[int]:
        """The positions (in the strip's coordinates) the metric averages over."""
        seq, chosen = self._tokens.shape[1], self._options["positions"]
        if isinstance(chosen, int):
            chosen = [chosen]
        if self.metric == "loss":  # the mean over the positions given (every one by default)
            length, chosen = seq - 1, range(seq - 1) if chosen is None else chosen
        else:  # one position: the first given (the last by default)
            length, chosen = seq, [-1] if chosen is None else list(chosen)[:1]
        return sorted({int(p) % length for p in chosen})

    def _refresh(self) -> None:
        mv, tokens = self.mv, self._tokens
        opts = {**self._options, "reference": self._reference}
        metric, method = self.metric, self.method
        recomputed = self._inputs_changed("effects", metric, method)
        if recomputed:
            try:
                fx = ablation_effects(
                    mv, tokens, metric, method=method, n_boot=self._n_boot, seed=self._seed,
                    progress=progress_reporter(self, "ablating each head"), **opts,
                )
            finally:
                self._set(progress="")
            self._fx = fx
            self._clean_strip = self._per_position(mv.run_with_hooks(tokens, [])[0])
            self.effects = self.payload_float32(
                torch.stack([fx.effect, fx.low, fx.high, fx.p_value]), layers=list(mv.attn_layers), p_method=fx.p_method,
                n_boot=fx.n_boot, seed=fx.seed, metric=metric, method=method, clean=float(fx.clean.mean()),
            )
        heads = [tuple(pair) for pair in self.ablated]
        if self._inputs_changed("joint", metric, method, tuple(heads)) or recomputed:
            fx, clean_strip = self._fx, self._clean_strip
            assert fx is not None and clean_strip is not None
            if heads:
                logits = run_with_ablation(mv, tokens, heads, method, self._reference)
                per_prompt = self._measure(metric)(logits).cpu() - fx.clean
                ablated_strip = self._per_position(logits)
                low, high = bootstrap_interval(per_prompt, self._n_boot, self._seed)
                p_value, p_method = sign_flip_p_value(per_prompt, self._n_boot, self._seed)
                summary = {"low": float(low), "high": float(high), "p_value": float(p_value), "p_method": p_method}
            else:
                per_prompt, ablated_strip = torch.zeros(tokens.shape[0]), clean_strip
                summary = {"low": 0.0, "high": 0.0, "p_value": 1.0, "p_method": ""}
            rows = list(mv.attn_layers)
            single = sum(float(fx.effect[rows.index(layer), head]) for layer, head in heads)
            where = {"heads": [list(pair) for pair in heads], "metric": metric, "method": method}
            self.joint = self.payload_float32(per_prompt, mean=float(per_prompt.mean()), sum_single=single, **summary, **where)
            labels = [mv.token_strings(row.tolist()) for row in tokens]
            self.strip = self.payload_float32(
                torch.stack([clean_strip, ablated_strip]), kind=metric, positions=self._strip_positions(), labels=labels,
                **where,
            )

    # ----- reading back ------------------------------------------------------------------------
    def effects_of(self) -> Any:
        """The `circuitwidgets.analysis.AblationEffects` the grid shows (None before the first picture)."""
        return self._fx
