"""Runs restarted at a block, and runs with gradients: what fast exact sweeps, path patching and attribution patching
ask of a model whose runs go through TransformerLens hook points (`circuitwidgets.backends.hooked.HookedRuns`).

**Restarting** (`Resumable`, the protocol feature ``"resume"``). One run of the prompts is recorded: the residual
stream entering each block (``hook_resid_pre``) and the arguments each block was called with (the attention mask,
rotary position embeddings, position ids: whatever the model's own loop passed). A later run restarts at block
``l``: it calls blocks ``l, l+1, ...`` with the recorded arguments on a residual stream (the recorded one, or one
given), under any hooks, then the final norm and the unembedding **at the positions asked for only**. Blocks
before ``l`` are not run, nor the unembedding of other positions. A recording is checked once: a restart at its
last block with no hook must give the recorded run's logits at the last position (to a float tolerance of the
model's dtype; with the copies of the batch the caller will use);
a model whose blocks read something the recording did not catch (a final soft-capping outside the unembedding,
a block that reads the model's state) fails that check, and `record` raises `ResumeError` saying so (the callers
then run the model whole, one run at a time).

**Gradients** (the protocol feature ``"gradients"``): `gradient_run` runs the prompts once with gradients on, keeps
the activations at the sites asked for and returns the gradient of an objective (a per-prompt metric, summed over
the prompts, so that each prompt's activations get that prompt's gradient) at each of them; with ``drop`` blocks,
also the gradients of the same run with the backward pass through one block's writes to the residual stream
(its ``attn_out`` and ``mlp_out``) set to zero, one block at a time (AtP*'s GradDrop). Parameters get no
``.grad``: gradients are taken with respect to the activations only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..numerics import all_finite


class ResumeError(ValueError):
    """This model's runs cannot restart at a block from a recording (the check of `HookedRuns.record` failed)."""


class _Stop(Exception):
    """Raised by a restarted run's hook once it has what it needs."""


def _tolerance(dtype: torch.dtype, scale: float) -> float:
    return float(torch.finfo(dtype).eps) * 64 * max(1.0, scale)


def _tile(value: Any, batch: int, copies: int) -> Any:
    """`value` (a block call's argument) for `copies` copies of the batch stacked copy-major: tensors whose first
    dimension is the batch repeated, others (broadcast over the batch, or not batched) kept; inside tuples, lists and
    dicts."""
    if copies == 1:
        return value
    if isinstance(value, torch.Tensor):
        return value.repeat(copies, *([1] * (value.ndim - 1))) if value.ndim and value.shape[0] == batch > 1 else value
    if isinstance(value, tuple):
        return tuple(_tile(v, batch, copies) for v in value)
    if isinstance(value, list):
        return [_tile(v, batch, copies) for v in value]
    if isinstance(value, dict):
        return {k: _tile(v, batch, copies) for k, v in value.items()}
    return value


_NO_CACHE = {"past_key_value": None, "past_key_values": None, "layer_past": None, "cache": None, "use_cache": False}


class Resumable:
    """A recorded run of ``tokens`` ``[batch, seq]`` that restarts at any of its blocks (see the module docstring).

    ``residual[block]``: the residual stream entering `block` in the recorded run ``[batch, seq, d_model]``;
    ``logits``: the recorded run's logits (float32); ``kept``: the activations it kept, keyed as asked.
    """

    def __init__(self, runs: Any, tokens: torch.Tensor, residual: dict[int, torch.Tensor], calls: dict[int, tuple],
                 logits: torch.Tensor, kept: dict[Any, torch.Tensor]):
        self._runs = runs
        self.tokens = tokens
        self.residual = residual
        self._calls = calls
        self.logits = logits
        self.kept = kept

    @property
    def batch(self) -> int:
        return int(self.tokens.shape[0])

    def run(
        self,
        start: int,
        hooks: Sequence[tuple[Any, Callable[..., Any]]] = (),
        *,
        positions: Sequence[int] | None = None,
        residual: torch.Tensor | None = None,
        copies: int = 1,
        keep: Sequence[Any] = (),
        stop: bool = False,
    ) -> tuple[torch.Tensor | None, dict[Any, torch.Tensor]]:
        """Logits ``[copies * batch, len(positions), d_vocab]`` (float32; every position when None) of a run restarted
        at block `start` on `residual` (default: the recorded one; ``[batch, seq, d_model]``, or already
        ``[copies * batch, ...]``) under `hooks` (``(site or hook point, function)``), and the activations at `keep`.
        `copies` stacks that many copies of the batch, copy-major (row ``c * batch + b``), so that hooks can change
        each copy differently (several heads in one run). With `stop`, the run stops as soon as every place of
        `keep` has been seen (no later block, no unembedding) and the logits are None."""
        runs = self._runs
        if start not in self._calls:
            raise ValueError(f"block {start} was not reached by the recorded run")
        x = self.residual[start] if residual is None else residual
        batch = self.batch
        if x.shape[0] == batch and copies > 1:
            x = x.repeat(copies, 1, 1)
        if x.shape[0] != batch * copies:
            raise ValueError(f"the residual stream has {x.shape[0]} rows; expected {batch} or {batch * copies}")
        names = {runs.hook_name(where): where for where in keep}
        if stop and not names:
            raise ValueError("stop=True needs places to keep: the run stops once it has seen them all")
        kept: dict[str, torch.Tensor] = {}

        def keeper(name: str) -> Callable[..., None]:
            def hook(tensor: torch.Tensor, hook: Any = None) -> None:
                kept[name] = tensor.detach()
                if stop and len(kept) == len(names):
                    raise _Stop

            return hook

        fwd = [(runs.hook_name(where), fn) for where, fn in hooks] + [(name, keeper(name)) for name in names]
        logits = None
        with runs.running() as model, model.hooks(fwd_hooks=fwd), contextlib.suppress(_Stop):
            blocks = model.blocks
            for block in range(start, len(blocks)):
                args, kwargs = self._calls[block]
                out = blocks[block](x, *_tile(args[1:], batch, copies), **_tile(kwargs, batch, copies))
                x = out[0] if isinstance(out, (tuple, list)) else out
            if positions is not None:
                x = x[:, list(positions)]
            norm = getattr(model, "ln_final", None)
            if norm is not None and runs.facts.normalization_type is not None:
                x = norm(x)
            logits = model.unembed(x)
        missing = [name for name in names if name not in kept]
        if missing:
            raise ValueError(f"the restarted run never reached hook point(s) {missing}")
        if logits is not None:
            if not all_finite(logits):
                raise runs.error("logits contain NaN/Inf values")
            logits = logits.float()
        return logits, {names[name]: value for name, value in kept.items()}


def record(runs: Any, tokens: torch.Tensor, keep: Sequence[Any] = (), copies: int = 1) -> Resumable:
    """One run of `tokens` recorded for restarts (`Resumable`), keeping `keep`; checked by restarting at the last
    block with `copies` copies (ResumeError when that does not give the run's logits at the last position)."""
    calls: dict[int, tuple] = {}
    residual: dict[int, torch.Tensor] = {}
    handles = []
    names = {runs.hook_name(where): where for where in keep}
    kept: dict[str, torch.Tensor] = {}

    def keeper(name: str) -> Callable[..., None]:
        def hook(tensor: torch.Tensor, hook: Any = None) -> None:
            kept[name] = tensor.detach()

        return hook

    with runs.running() as model:
        n_blocks = len(model.blocks)
        for block in range(n_blocks):

            def pre(module: Any, args: tuple, kwargs: dict, block: int = block) -> None:
                calls[block] = (args, {**kwargs, **{k: v for k, v in _NO_CACHE.items() if k in kwargs}})

            handles.append(model.blocks[block].register_forward_pre_hook(pre, with_kwargs=True))

        def resid(block: int) -> Callable[..., None]:
            def hook(tensor: torch.Tensor, hook: Any = None) -> None:
                residual[block] = tensor.detach()

            return hook

        fwd = [(runs.hook_name(("resid_pre", b)), resid(b)) for b in range(n_blocks)]
        fwd += [(name, keeper(name)) for name in names]
        try:
            logits = model.run_with_hooks(tokens, fwd_hooks=fwd)
        finally:
            for handle in handles:
                handle.remove()
    if not all_finite(logits):
        raise runs.error("logits contain NaN/Inf values")
    missing = [b for b in range(n_blocks) if b not in calls or b not in residual]
    if missing:
        raise ResumeError(f"the run never called block(s) {missing} with a residual stream: it cannot restart there")
    recorded = Resumable(runs, tokens, residual, calls, logits.float(), {names[n]: v for n, v in kept.items()})
    last = tokens.shape[1] - 1  # (the last block and one position: what restarting adds is checked, at little cost)
    replayed, _ = recorded.run(n_blocks - 1, positions=[last], copies=copies)
    assert replayed is not None
    want = recorded.logits[:, [last]].repeat(copies, 1, 1)
    error = float((replayed - want).abs().max())
    allowed = _tolerance(runs.facts.dtype, float(want.abs().max()))
    if not error <= allowed:
        raise ResumeError(
            f"this model's blocks, run again from the recorded residual stream, do not give its logits (largest "
            f"difference {error:.3g}, allowed {allowed:.3g}): something outside its blocks, final norm and "
            "unembedding changes the logits, or a block reads state the recording did not catch"
        )
    return recorded


def gradient_run(
    runs: Any,
    tokens: torch.Tensor,
    sites: Sequence[Any],
    objective: Callable[[torch.Tensor], torch.Tensor],
    drop: Sequence[int] = (),
) -> dict[str, Any]:
    """One run of `tokens` with gradients (see the module docstring). `objective(logits)` -> ``[batch]``.

    Returns ``{"value": [batch], "acts": {site: activation}, "grads": {site: gradient}, "dropped": {block: {site:
    gradient}}}`` (float32, detached; a site the objective does not depend on has a zero gradient)."""
    names = {runs.hook_name(where): where for where in sites}
    acts: dict[str, torch.Tensor] = {}
    state: dict[str, Any] = {"drop": None}

    def leaf(tensor: torch.Tensor, hook: Any = None) -> torch.Tensor:
        return tensor.detach().requires_grad_(True)  # the graph starts here: no parameter gets a gradient

    def keeper(name: str) -> Callable[..., torch.Tensor]:
        def hook(tensor: torch.Tensor, hook: Any = None) -> torch.Tensor:
            acts[name] = tensor
            return tensor  # (returned, so that the run goes on from this very tensor: a bridge that reshapes an
            # activation for its hook and would otherwise go on from the unreshaped one leaves it out of the graph)

        return hook

    def dropper(block: int) -> Callable[..., None]:
        def hook(tensor: torch.Tensor, hook: Any = None) -> None:
            if tensor.requires_grad:
                tensor.register_hook(lambda grad: torch.zeros_like(grad) if state["drop"] == block else grad)

        return hook

    with runs.running(grad=True) as model:
        points = model.hook_dict
        fwd = [(runs.hook_name(("resid_pre", 0)), leaf)] + [(name, keeper(name)) for name in names]
        for block in drop:
            for word in ("attn_out", "mlp_out"):
                name = runs.hook_name((word, block))
                if name in points:
                    fwd.append((name, dropper(block)))
        logits = model.run_with_hooks(tokens, fwd_hooks=fwd)
        if not all_finite(logits.detach()):
            raise runs.error("logits contain NaN/Inf values")
        value = objective(logits.float())
        missing = [name for name in names if name not in acts]
        if missing:
            raise ValueError(f"the model never reached hook point(s) {missing}")
        order = list(names)
        inputs = [acts[name] for name in order]

        def grads() -> dict[Any, torch.Tensor]:
            found = torch.autograd.grad(value.sum(), inputs, retain_graph=True, allow_unused=True)
            return {
                names[name]: (torch.zeros_like(acts[name]) if g is None else g).detach().float()
                for name, g in zip(order, found, strict=True)
            }

        plain = grads()
        dropped = {}
        for block in drop:
            state["drop"] = block
            dropped[block] = grads()
        state["drop"] = None
    return {
        "value": value.detach().float(),
        "acts": {names[name]: acts[name].detach().float() for name in order},
        "grads": plain,
        "dropped": dropped,
    }
