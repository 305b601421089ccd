"""The two-layer demo model's own training run, saved along the way: `demo_checkpoints()`.

``python -m circuitwidgets.demo.train`` (``make train-demo``) saves the model at `checkpoint_steps` — 0 (the
initialisation) and log-spaced steps up to the last, 6 000, whose weights are the shipped ``weights.safetensors`` —
into ``checkpoints.safetensors``: for every step but the last, the difference from the final weights in float16,
under the keys ``"<step>/<parameter>"``. A step's weights are the final weights plus that difference (in float32):
the final step is ``demo_model()`` bit for bit, the others are within float16 rounding of the difference (about
5e-4 of it) of the weights the run had, which the scores read at three decimals never see.

Example:
    >>> import circuitwidgets as cw
    >>> ck = cw.demo_checkpoints()
    >>> len(ck) >= 24, ck.steps[0], ck.steps[-1]
    (True, 0, 6000)
    >>> import torch
    >>> bool(torch.equal(ck.at(6000).W_Q, cw.demo_model().W_Q))
    True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from . import DEMO_DIR, _state, model_from_state

CHECKPOINTS_FILE = DEMO_DIR / "checkpoints.safetensors"
_FORMAT = "circuitwidgets.demo_checkpoints/1"
#: Checkpoints saved by the training run (the initialisation and the last step included), and the first step after 0.
COUNT, FIRST = 28, 10
_STORED: dict[str, Any] = {}  # the file's tensors and steps, read once per process


def checkpoint_steps(steps: int = 6000, count: int = COUNT, first: int = FIRST) -> list[int]:
    """`count` training steps to save: 0 (the initialisation), then `count` - 1 steps log-spaced from `first` to
    `steps` (the last): ``round(first * (steps / first) ** (i / (count - 2)))``, a step that rounds onto the one
    before moved to the next free step.

    Example:
        >>> checkpoint_steps(6000, 8)
        [0, 10, 29, 84, 245, 711, 2066, 6000]
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps must be an int >= 2; got {steps!r}")
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first < steps:
        raise ValueError(f"first must be an int from 1 to steps - 1 = {steps - 1}; got {first!r}")
    if isinstance(count, bool) or not isinstance(count, int) or not 3 <= count <= steps - first + 2:
        raise ValueError(f"count must be an int from 3 to {steps - first + 2} (steps {first}..{steps} and 0); got {count!r}")
    chosen = [0]
    for i in range(count - 1):
        chosen.append(max(round(first * (steps / first) ** (i / (count - 2))), chosen[-1] + 1))
    if chosen[-1] != steps:  # (bumped past the end: pull the crowded early steps back is not needed at these counts)
        raise ValueError(f"count={count} steps do not fit between {first} and {steps}")
    return chosen


def write_checkpoints(states: dict[int, dict[str, torch.Tensor]], path: str | Path = CHECKPOINTS_FILE) -> Path:
    """Write `states` (step -> state dict; the last step is the final model, stored in ``weights.safetensors``) as
    float16 differences from the last step's weights; returns the path.

    Example:
        >>> import tempfile, torch
        >>> final = {"w": torch.tensor([1.0, 2.0])}
        >>> path = write_checkpoints({0: {"w": torch.tensor([0.5, 2.5])}, 10: final}, tempfile.mkdtemp() + "/ck.safetensors")
        >>> read_checkpoints(path, final)[0]["w"]
        tensor([0.5000, 2.5000])
    """
    from safetensors.torch import save_file

    steps = sorted(states)
    final = states[steps[-1]]
    tensors = {}
    for step in steps[:-1]:
        for name, value in states[step].items():
            delta = (value.detach().float().cpu() - final[name].detach().float().cpu()).to(torch.float16)
            if not bool(torch.isfinite(delta).all()):
                raise ValueError(f"step {step}: {name} differs from the final weights by more than float16 holds")
            tensors[f"{step}/{name}"] = delta.contiguous()
    metadata = {"format": _FORMAT, "steps": json.dumps(steps), "encoding": "float16 difference from the last step's weights"}
    path = Path(path)
    save_file(tensors, str(path), metadata=metadata)
    return path


def read_checkpoints(path: str | Path, final: dict[str, torch.Tensor]) -> dict[int, dict[str, torch.Tensor]]:
    """Every step's float32 state dict from a file of `write_checkpoints` and the `final` weights."""
    steps, deltas = _read(Path(path))
    return {step: _weights(step, steps, deltas, final) for step in steps}


def _read(path: Path) -> tuple[list[int], dict[str, torch.Tensor]]:
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    if metadata.get("format") != _FORMAT:
        raise ValueError(f"{path} is not a demo checkpoints file (written by circuitwidgets.demo.checkpoints)")
    return [int(s) for s in json.loads(metadata["steps"])], load_file(str(path))


def _weights(
    step: int, steps: list[int], deltas: dict[str, torch.Tensor], final: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    if step == steps[-1]:
        return dict(final)
    return {name: value + deltas[f"{step}/{name}"].float() for name, value in final.items()}


def _stored() -> tuple[list[int], dict[str, torch.Tensor]]:
    if "file" not in _STORED:
        if not CHECKPOINTS_FILE.is_file():
            raise FileNotFoundError(f"{CHECKPOINTS_FILE} is missing; run python -m circuitwidgets.demo.train")
        _STORED["file"] = _read(CHECKPOINTS_FILE)
    return _STORED["file"]


def checkpoint_state(step: int) -> dict[str, torch.Tensor]:
    """The demo model's weights (bridge ``state_dict`` layout, float32) at training step `step` (one of the saved ones).

    Example:
        >>> checkpoint_state(0)["embed.weight"].shape
        torch.Size([64, 64])
    """
    steps, deltas = _stored()
    if isinstance(step, bool) or not isinstance(step, int) or step not in steps:
        raise ValueError(f"step={step!r} is not a saved step of the demo training run: {steps}")
    return _weights(step, steps, deltas, _state("2l"))


def demo_checkpoints(keep: int = 2) -> Any:
    """The two-layer demo model along its training run: a `circuitwidgets.Checkpoints` of `COUNT` log-spaced steps from
    0 (the initialisation) to 6 000 (``demo_model()``), each loaded when asked for (at most `keep` in memory; one is
    180 kB of weights plus its TransformerLens bridge). Offline: the weights ship with the package.

    Example:
        >>> import circuitwidgets as cw
        >>> ck = cw.demo_checkpoints()
        >>> scores = cw.analysis.head_scores(ck.at(0), "induction")     # the initialisation: no induction head
        >>> bool(scores[1].max() < 0.1)
        True
    """
    from ..analysis.checkpoints import Checkpoints

    steps, _ = _stored()
    return Checkpoints(
        load=lambda step: model_from_state(checkpoint_state(step)), steps=steps, keep=keep,
        name="circuitwidgets demo model (2l), training run",
    )
