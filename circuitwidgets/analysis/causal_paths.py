"""Path patching: how much of an effect travels along given paths, from sender heads to receivers' inputs.

Senders are heads ``(layer, head)``; receivers are heads' inputs ``(layer, head, channel)`` with channel
``"q"``, ``"k"`` or ``"v"`` (the head's queries, keys or values), or ``"logits"``. Denoising (the direction of
`circuitwidgets.analysis.patching`): the corrupted prompts run; the clean outputs of the senders reach only the
receivers' given inputs, and every other head, MLP and path keeps its corrupted value:

- a sender's output is its ``z`` times ``W_O[head]`` (no ``b_O``); its delta is its clean output minus its
  corrupted output: what its layer writes (``attn_out``) with the sender's ``z`` from the clean run, minus
  what it writes in the corrupted run (the layer's output is linear in ``z``: the deltas of several senders
  of one layer add up);
- each receiver's input is the residual stream entering its layer in the corrupted run plus the deltas of
  every sender in an earlier layer (senders in its own or a later layer cannot reach it); the receiver's
  layer norm recomputes on that input, and its channel's activation (queries, keys or values) is computed
  from it by the model's own layer. With grouped K/V heads a receiver's ``"k"``/``"v"`` is its group's:
  the whole group's keys or values are patched (as `patching` does);
- the MLPs and the other heads between a sender and a receiver are **not** on the path: they keep their
  corrupted values (the senders' effect on them is not passed on);
- the measured run is the corrupted run with each receiver's channel replaced by that activation (everything
  after the receivers recomputes from them); ``"logits"``: the deltas of every sender are added to the
  residual stream entering the final norm (which recomputes), the senders' direct paths to the logits.

The metric is taken per prompt on that run's logits. ``direction="noising"`` is the mirror: the clean run,
with the senders' corrupted outputs reaching the receivers (their delta: corrupted minus clean).

Runs (`circuitwidgets.backends.resume`): the two prompts once each; one short run per sender layer that stops
after that layer's output; one per receiver layer that stops at its channels; the measured run restarted at
the first receiver's layer, unembedding only the positions the metric reads.

Example:
    >>> import torch
    >>> import circuitwidgets as cw
    >>> model = cw.demo_model()
    >>> clean = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=4, seed=1)
    >>> corrupted = torch.cat([clean[:, :11], clean[:, 11:].roll(1, 0)], 1)
    >>> result = cw.analysis.path_patching(model, clean, corrupted, "loss", senders=[(0, 1)], receivers=[(1, 0, "k")])
    >>> result.per_prompt.shape, isinstance(result.value, float)
    (torch.Size([4]), True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..ablation import check_heads
from ..model import ModelView, as_view
from . import sweeps
from .activation_patching import DIRECTIONS
from .interventions import Measure, Metric, metric_of

#: A receiver's channel -> the protocol's site word.
CHANNELS = ("q", "k", "v")


@dataclass(frozen=True)
class PathPatchingResult:
    """`path_patching`'s answer.

    ``per_prompt`` ``[batch]``: the metric of each prompt's patched run; ``value``: their mean; ``clean``,
    ``corrupted``: the metric's mean over the prompts of the clean and corrupted runs (``clean_per_prompt``,
    ``corrupted_per_prompt``: per prompt); ``senders``, ``receivers``, ``direction`` as checked.
    """

    per_prompt: torch.Tensor
    clean_per_prompt: torch.Tensor
    corrupted_per_prompt: torch.Tensor
    senders: list[tuple[int, int]]
    receivers: list[Any]
    direction: str

    @property
    def value(self) -> float:
        return float(self.per_prompt.mean())

    @property
    def clean(self) -> float:
        return float(self.clean_per_prompt.mean())

    @property
    def corrupted(self) -> float:
        return float(self.corrupted_per_prompt.mean())

    @property
    def effect(self) -> float:
        """``value - corrupted`` (denoising) or ``value - clean`` (noising): what the paths changed."""
        return self.value - (self.corrupted if self.direction == "denoising" else self.clean)

    @property
    def normalised(self) -> float:
        """``(value - corrupted) / (clean - corrupted)``: denoising, 1 = these paths alone restore the clean metric;
        noising, 0 = they alone take the clean run to the corrupted metric. ValueError when the two runs score the
        same."""
        gap = self.clean - self.corrupted
        if gap == 0:
            raise ValueError("the clean and corrupted prompts score the same on this metric: nothing to normalise by")
        return (self.value - self.corrupted) / gap


def check_receivers(view: ModelView, receivers: Any) -> list[Any]:
    """`receivers` as a list of ``(layer, head, channel)`` (and ``"logits"``), distinct, in order; ValueError/TypeError
    naming a bad one."""
    if isinstance(receivers, str):
        receivers = [receivers]
    if isinstance(receivers, tuple) and len(receivers) == 3 and isinstance(receivers[2], str):
        receivers = [receivers]
    try:
        items = list(receivers)
    except TypeError:
        raise TypeError(f'receivers must be "logits" or a list of (layer, head, "q"|"k"|"v"); got {receivers!r}') from None
    checked: list[Any] = []
    for item in items:
        if item == "logits":
            found: Any = "logits"
        else:
            if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != 3:
                raise TypeError(f'each receiver must be (layer, head, "q"|"k"|"v") or "logits"; got {item!r}')
            layer, head, channel = item
            if channel not in CHANNELS:
                raise ValueError(f'receiver {tuple(item)!r}: the channel must be "q", "k" or "v"; got {channel!r}')
            ((layer, head),) = check_heads([(layer, head)], view.facts)
            found = (layer, head, channel)
        if found not in checked:
            checked.append(found)
    if not checked:
        raise ValueError('receivers must name at least one (layer, head, channel) or "logits"')
    return checked


def path_patching(
    model: Any,
    clean: Any,
    corrupted: Any,
    metric: str | Metric,
    senders: Any,
    receivers: Any,
    direction: str = "denoising",
    *,
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
) -> PathPatchingResult:
    """The metric of the corrupted run in which the senders' clean outputs reach only the receivers' given inputs
    (see the module docstring for exactly what is computed).

    Args:
        model: any model whose runs take hooks (a TransformerLens model, a local Hugging Face or nnsight model).
        clean, corrupted: token batches of one shape.
        metric: ``"loss"`` (next-token loss of the clean tokens at `positions`), ``"logit_diff"`` (`target` −
            `baseline_token` at one position) or a callable ``f(logits) -> [batch]`` (one value per prompt).
        senders: heads ``[(layer, head), ...]``.
        receivers: ``[(layer, head, "q"|"k"|"v"), ...]`` and/or ``"logits"``; each head receiver must come after some
            sender.
        direction: ``"denoising"`` (clean senders into the corrupted run) or ``"noising"`` (the mirror).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> tokens = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=2, seed=0)
        >>> same = cw.analysis.path_patching(model, tokens, tokens, "loss", [(0, 1)], "logits")
        >>> abs(same.value - same.clean) < 1e-6          # nothing differs between the runs: nothing changes
        True
    """
    view = as_view(model)
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}; got {direction!r}")
    clean, corrupted = view.check_tokens(clean), view.check_tokens(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted tokens must have one shape; got {tuple(clean.shape)} and {tuple(corrupted.shape)}")
    chosen = check_heads(senders, view.facts)
    if not chosen:
        raise ValueError("senders must name at least one (layer, head) pair")
    wanted = check_receivers(view, receivers)
    first = min(layer for layer, _ in chosen)
    for receiver in wanted:
        if receiver != "logits" and receiver[0] <= first:
            raise ValueError(
                f"receiver {receiver!r} is not in a layer after any sender (the first sender is in layer {first}): "
                "no sender's output reaches it"
            )
    measure = metric_of(metric, clean, view.d_vocab, target, baseline_token, positions)
    support = view.supports("resume")
    if not support:
        raise ValueError(support.reason)
    base, source = (corrupted, clean) if direction == "denoising" else (clean, corrupted)
    return _path_patching(view, base, source, measure, chosen, wanted, direction)


class Paths:
    """What every path patching of one pair of prompts shares: the base run recorded, the source run's sender
    outputs, and each sender layer's base output (for many sender/receiver sets: `composition_paths`)."""

    def __init__(self, view: ModelView, base: torch.Tensor, source: torch.Tensor, measure: Measure, layers: list[int]):
        self.view, self.measure = view, measure
        z_sites = [("z", layer) for layer in layers]
        out_sites = [("attn_out", layer) for layer in layers]
        self.source_logits, kept = view.run_with_hooks(source, [], keep=z_sites)
        self.source_z = {layer: kept[("z", layer)] for layer in layers}
        self.recorded = sweeps.record(view, base, [*z_sites, *out_sites])
        self.base_out = {layer: self.recorded.kept[("attn_out", layer)] for layer in layers}
        self.base_value = measure(self.recorded.logits)
        self.source_value = measure(self.source_logits)

    def delta(self, layer: int, heads: list[int]) -> torch.Tensor:
        """What `layer` writes with `heads`' ``z`` from the source run, minus what it writes in the base run."""
        source = self.source_z[layer]

        def hook(z: torch.Tensor, hook: Any = None) -> torch.Tensor:
            z = z.clone()
            z[:, :, heads] = source[:, :, heads].to(z.dtype)
            return z

        _, kept = self.recorded.run(layer, [(("z", layer), hook)], keep=[("attn_out", layer)], stop=True)
        return kept[("attn_out", layer)] - self.base_out[layer]

    def run(self, deltas: dict[int, torch.Tensor], receivers: list[Any]) -> torch.Tensor:
        """The metric per prompt of the base run with `receivers` fed the `deltas` of earlier layers (``{sender layer:
        delta}``; see the module docstring)."""
        view, recorded = self.view, self.recorded
        per_group = view.n_heads // view.n_kv_heads
        heads = [r for r in receivers if r != "logits"]
        by_layer: dict[int, list[tuple[int, str]]] = {}
        for layer, head, channel in heads:
            by_layer.setdefault(layer, []).append((head, channel))
        hooks: list = []
        for layer, items in by_layer.items():
            earlier = [d for at, d in deltas.items() if at < layer]
            stream = recorded.residual[layer] + torch.stack(earlier).sum(0).to(recorded.residual[layer].dtype)
            channels = sorted({channel for _, channel in items})
            _, acts = recorded.run(layer, residual=stream, keep=[(c, layer) for c in channels], stop=True)
            for channel in channels:
                patched = acts[(channel, layer)]
                grouped = channel in ("k", "v") and patched.shape[2] != view.n_heads
                index = sorted({h // per_group if grouped else h for h, c in items if c == channel})
                hooks.append(((channel, layer), _replacing(index, patched)))
        last = view.n_layers - 1
        if "logits" in receivers:
            total = torch.stack(list(deltas.values())).sum(0)
            hooks.append((("resid_post", last), lambda x, hook=None: x + total.to(x.dtype)))
        start = min(by_layer) if by_layer else last
        logits, _ = recorded.run(start, hooks, positions=self.measure.reads)
        assert logits is not None
        return self.measure.on_read(logits).cpu()


def _replacing(index: list[int], patched: torch.Tensor) -> Any:
    def hook(act: torch.Tensor, hook: Any = None) -> torch.Tensor:
        act = act.clone()
        act[:, :, index] = patched[:, :, index].to(act.dtype)
        return act

    return hook


def _path_patching(
    view: ModelView, base: torch.Tensor, source: torch.Tensor, measure: Measure, senders: list[tuple[int, int]],
    receivers: list[Any], direction: str,
) -> PathPatchingResult:
    layers = sorted({layer for layer, _ in senders})
    paths = Paths(view, base, source, measure, layers)
    deltas = {layer: paths.delta(layer, [h for at, h in senders if at == layer]) for layer in layers}
    per_prompt = paths.run(deltas, receivers)
    clean, corrupted = (
        (paths.source_value, paths.base_value) if direction == "denoising" else (paths.base_value, paths.source_value)
    )
    return PathPatchingResult(
        per_prompt=per_prompt, clean_per_prompt=clean.cpu(), corrupted_per_prompt=corrupted.cpu(), senders=senders,
        receivers=receivers, direction=direction,
    )


def composition_paths(
    model: Any,
    clean: Any,
    corrupted: Any,
    metric: str | Metric,
    kind: str,
    sender_layer: int,
    receiver_layer: int,
    direction: str = "denoising",
    *,
    target: Any = None,
    baseline_token: Any = None,
    positions: Any = None,
    progress: Any = None,
) -> torch.Tensor:
    """The path-patching effect of every edge from a head of `sender_layer` to the `kind` input (``"Q"``, ``"K"``
    or ``"V"``) of a head of `receiver_layer`: ``[n_heads (sender), n_heads (receiver)]``, each entry
    ``path_patching(model, clean, corrupted, metric, [(sender_layer, h1)], [(receiver_layer, h2, kind)],
    direction).effect`` (the patched run's metric minus the unpatched run's: the corrupted run's denoising, the
    clean run's noising), from one recording of the prompts.

    Example:
        >>> import torch
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> clean = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=4, seed=1)
        >>> corrupted = torch.cat([clean[:, :11], clean[:, 11:].roll(1, 0)], 1)
        >>> cw.analysis.composition_paths(model, clean, corrupted, "loss", "K", 0, 1).shape
        torch.Size([4, 4])
    """
    from .interventions import progress_of

    view = as_view(model)
    kinds = {"Q": "q", "K": "k", "V": "v"}
    if kind not in kinds:
        raise ValueError(f"kind must be one of {list(kinds)}; got {kind!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}; got {direction!r}")
    clean, corrupted = view.check_tokens(clean), view.check_tokens(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted tokens must have one shape; got {tuple(clean.shape)} and {tuple(corrupted.shape)}")
    layers = view.check_layers([sender_layer, receiver_layer])
    if not layers[0] < layers[1]:
        raise ValueError(f"the sender layer ({sender_layer}) must come before the receiver layer ({receiver_layer})")
    support = view.supports("resume")
    if not support:
        raise ValueError(support.reason)
    measure = metric_of(metric, clean, view.d_vocab, target, baseline_token, positions)
    heads = view.n_heads
    step = progress_of(progress, heads * heads, f"{kind} paths, layer {sender_layer} to layer {receiver_layer}")
    base, source = (corrupted, clean) if direction == "denoising" else (clean, corrupted)
    paths = Paths(view, base, source, measure, [sender_layer])
    unpatched = paths.base_value.mean()
    effects = torch.full((heads, heads), math.nan)
    for h1 in range(heads):
        delta = {sender_layer: paths.delta(sender_layer, [h1])}
        for h2 in range(heads):
            value = paths.run(delta, [(receiver_layer, h2, kinds[kind])]).mean()
            effects[h1, h2] = float(value - unpatched)
            step(h1 * heads + h2 + 1)
    return effects
