"""Heads across training: a sequence of checkpoints (`Checkpoints`) and every head metric along it (`scan_checkpoints`).

`Checkpoints` holds a model per training step, loaded lazily and kept a few at a time (an LRU of `keep` models).
Each step's model is an ordinary model: ``cw.as_view(ck[i])`` picks its backend as for any other (TransformerLens,
Hugging Face, nnsight), and every analysis function and widget takes it. `scan_checkpoints` runs the same analysis
on each step's model in turn — any head metric of the head-metric table (`circuitwidgets.head_metrics`), the
composition scores, and the loss on given tokens — and `CheckpointScan.phase_change` finds the window of
checkpoints where a curve changes most (Olsson et al.'s phase change: induction heads form, the K-composition
of previous-token into induction heads appears and the in-context loss falls, all in one window).

Example:
    >>> import circuitwidgets as cw
    >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
    >>> scan = cw.analysis.scan_checkpoints(ck, metrics=["induction", "loss"], progress=False)
    >>> scan.values["induction"].shape, scan.values["loss"].shape
    (torch.Size([2, 2, 4]), torch.Size([2]))
    >>> bool(scan.values["induction"][1, 1].max() > scan.values["induction"][0, 1].max())
    True
"""

from __future__ import annotations

import gc
import math
import re
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import head_metrics
from ..model import ModelView, as_view
from ._arguments import check_metric_names
from .composition import composition_scores
from .detectors import DEFAULT_BATCH, computed_by, head_scores, pattern_scores, repeated_random_tokens, whole_patterns
from .interventions import next_token_loss, progress_of

#: Composition metrics: name -> kind of `composition_scores` (values ``[n_steps, L, H, L, H]``).
COMPOSITION_METRICS = {"composition_q": "Q", "composition_k": "K", "composition_v": "V"}
#: Loss metrics (values ``[n_steps]``).
LOSS_METRICS = ("loss", "in_context_loss")
#: What `scan_checkpoints` computes by default.
DEFAULT_METRICS = ("previous_token", "induction", "composition_k", "loss", "in_context_loss")
#: Models kept in memory by default (`Checkpoints`).
KEEP = 2
_FORMAT = "circuitwidgets.CheckpointScan/1"
_STATE_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")


def checkpoint_metrics() -> tuple[str, ...]:
    """Every metric `scan_checkpoints` takes: the head-metric table's rows (read afresh), then composition and losses.

    Example:
        >>> "induction" in checkpoint_metrics() and "composition_k" in checkpoint_metrics()
        True
    """
    return (*head_metrics.METRICS, *COMPOSITION_METRICS, *LOSS_METRICS)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _step_of(text: str, what: str) -> int:
    """The last run of digits in `text` (``"step1000"`` -> 1000, ``"ckpt_00500.pt"`` -> 500)."""
    found = re.findall(r"\d+", text)
    if not found:
        raise ValueError(f"{what} {text!r} names no step (no digits in it): pass steps= explicitly")
    return int(found[-1])


def around(steps: Sequence[int], step: int) -> list[int]:
    """The steps of `steps` (increasing) on either side of `step`: the last before it and the first after it.

    Example:
        >>> around([0, 10, 100], 30), around([0, 10, 100], 500)
        ([10, 100], [100])
    """
    before = [s for s in steps if s < step][-1:]
    after = [s for s in steps if s > step][:1]
    return before + after


def _check_steps(steps: Any, n: int | None) -> tuple[int, ...]:
    try:
        steps = list(steps)
    except TypeError:
        raise TypeError(f"steps must be a list of ints; got {type(steps).__name__}") from None
    for step in steps:
        if not _is_int(step):
            raise TypeError(f"steps must be ints; got {step!r}")
        if step < 0:
            raise ValueError(f"steps must be >= 0; got {step}")
    if n is not None and len(steps) != n:
        raise ValueError(f"steps has {len(steps)} entries for {n} checkpoints")
    if not steps:
        raise ValueError("a Checkpoints needs at least one step")
    if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        raise ValueError(f"steps must increase (one checkpoint per step); got {steps[:8]}{'...' if len(steps) > 8 else ''}")
    return tuple(steps)


class Checkpoints:
    """A sequence of models along training, one per step, loaded lazily (at most `keep` loaded models in memory).

    Build it from what you have:

    - a list of models (``steps`` default ``0, 1, 2, ...``) or a mapping ``{step: model}``: held as given;
    - a loader ``load(step) -> model`` with ``steps=[...]``: each model is loaded when first asked for and kept in an
      LRU of `keep` models (default 2): memory stays at `keep` models whatever the number of steps (a model you hold
      yourself stays alive as long as you hold it);
    - `Checkpoints.hugging_face` (revisions ``"step1000"``, Pythia / OLMo style, or one local folder per revision),
      `Checkpoints.transformer_lens` (TransformerLens's ``checkpoint_index``), `Checkpoints.state_dicts` (a folder of
      saved state dicts), `circuitwidgets.demo_checkpoints` (the demo model's own training run).

    ``len(ck)``, ``ck.steps``, ``ck[i]`` (the model of the i-th step; a slice gives a `Checkpoints` of those steps),
    ``ck.at(step)``, iteration (models in step order). Every model is an ordinary model for ``cw.as_view`` and the
    widgets (any backend). `unit` names what a step counts ("step", or "token" for checkpoints labelled by tokens seen).

    Example:
        >>> import circuitwidgets as cw
        >>> ck = cw.Checkpoints(load=lambda step: cw.demo.boot(seed=step + 1), steps=[0, 10, 100])
        >>> len(ck), ck.steps, ck.loaded
        (3, (0, 10, 100), ())
        >>> model = ck.at(10)
        >>> ck.loaded, ck.index(100)
        ((10,), 2)
        >>> [tuple(m.cfg.d_model for m in ck)]           # iterating loads each in turn; 2 are kept
        [(64, 64, 64)]
        >>> ck.loaded
        (10, 100)
    """

    def __init__(
        self,
        models: Any = None,
        *,
        steps: Any = None,
        load: Callable[[int], Any] | None = None,
        keep: int = KEEP,
        unit: str = "step",
        name: str = "",
    ) -> None:
        if not _is_int(keep) or keep < 1:
            raise ValueError(f"keep must be an int >= 1 (models held in memory); got {keep!r}")
        if not isinstance(unit, str) or not unit:
            raise TypeError(f"unit must be a non-empty str (what a step counts: 'step', 'token'); got {unit!r}")
        if not isinstance(name, str):
            raise TypeError(f"name must be a str; got {type(name).__name__}")
        if callable(models) and not isinstance(models, torch.nn.Module) and load is None:
            models, load = None, models
        self._given: list[Any] | None = None
        self._load: Callable[[int], Any] | None = None
        if load is not None:
            if models is not None:
                raise ValueError("pass either models (a list or {step: model}) or load= with steps=, not both")
            if not callable(load):
                raise TypeError(f"load must be a function load(step) -> model; got {type(load).__name__}")
            if steps is None:
                raise ValueError("load= needs steps=[...]: the steps it can load")
            self._steps = _check_steps(steps, None)
            self._load = load
        elif isinstance(models, Mapping):
            if steps is not None:
                raise ValueError("a mapping {step: model} names its steps: pass no steps=")
            ordered = sorted(models.items(), key=lambda kv: kv[0] if _is_int(kv[0]) else -1)
            self._steps = _check_steps([step for step, _ in ordered], None)
            self._given = [model for _, model in ordered]
        elif models is None:
            raise ValueError("pass models (a list of models or a mapping {step: model}) or load=load(step) with steps=")
        elif isinstance(models, (str, bytes, torch.nn.Module)) or not isinstance(models, Sequence):
            raise TypeError(
                f"models must be a list of models or a mapping {{step: model}}; got {type(models).__name__} "
                "(one model? wrap it in a list; a loader? pass load=)"
            )
        else:
            self._given = list(models)
            self._steps = _check_steps(range(len(self._given)) if steps is None else steps, len(self._given))
        if self._given is not None and any(model is None for model in self._given):
            raise ValueError("models holds None: every step needs a model")
        self.keep = keep
        self.unit = unit
        self.name = name
        self._lru: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.RLock()
        self._loads = 0

    # ----- helpers for what users have -------------------------------------------------------------
    @classmethod
    def hugging_face(
        cls,
        name_or_path: str | Path,
        revisions: Sequence[str],
        *,
        steps: Any = None,
        tokenizer: Any = None,
        keep: int = KEEP,
        **from_pretrained: Any,
    ) -> Checkpoints:
        """Checkpoints of a Hugging Face model, one per revision (``"step1000"``: Pythia, OLMo, ...).

        `name_or_path`: a Hub id (each revision loads with ``from_pretrained(name, revision=...)``; a download unless
        it is in the local cache, or ``local_files_only=True`` is passed), a local folder holding one folder per
        revision (``runs/step1000/``), or a path with ``{revision}`` in it (``"runs/{revision}/hf"``): local folders
        load offline. `steps`: default the last number in each revision's name. `tokenizer`: a tokenizer, a name or
        folder to load one from, or None (default) for the one saved with the first revision (if any); it becomes
        each model's ``model.tokenizer``. Other keywords go to ``AutoModelForCausalLM.from_pretrained``.

        Example:
            >>> import tempfile, transformers, circuitwidgets as cw
            >>> folder = tempfile.mkdtemp()
            >>> config = transformers.GPTNeoXConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            ...                                     num_attention_heads=2, vocab_size=64, max_position_embeddings=32)
            >>> for step in (0, 100):
            ...     transformers.AutoModelForCausalLM.from_config(config).save_pretrained(f"{folder}/step{step}")
            >>> ck = cw.Checkpoints.hugging_face(folder, ["step0", "step100"])
            >>> ck.steps, type(ck[1]).__name__
            ((0, 100), 'GPTNeoXForCausalLM')
        """
        revisions = list(revisions) if not isinstance(revisions, str) else [revisions]
        if not revisions or not all(isinstance(r, str) and r for r in revisions):
            raise TypeError(f"revisions must be a list of revision names (str), e.g. ['step1000']; got {revisions!r}")
        if len(set(revisions)) != len(revisions):
            raise ValueError(f"revisions must not repeat a revision; got {revisions}")
        steps = [_step_of(r, "revision") for r in revisions] if steps is None else list(steps)
        if len(steps) != len(revisions):
            raise ValueError(f"steps has {len(steps)} entries for {len(revisions)} revisions")
        order = sorted(range(len(revisions)), key=lambda i: steps[i] if _is_int(steps[i]) else -1)
        revisions, steps = [revisions[i] for i in order], [steps[i] for i in order]
        sources = {step: _revision_source(name_or_path, revision) for step, revision in zip(steps, revisions, strict=True)}
        held: dict[str, Any] = {}

        def the_tokenizer() -> Any:
            if "tokenizer" not in held:
                held["tokenizer"] = _hf_tokenizer(tokenizer, sources[steps[0]], from_pretrained)
            return held["tokenizer"]

        def load(step: int) -> Any:
            import transformers

            where, revision = sources[step]
            options = dict(from_pretrained) if revision is None else {**from_pretrained, "revision": revision}
            model = transformers.AutoModelForCausalLM.from_pretrained(where, **options)
            model.eval()
            found = the_tokenizer()
            if found is not None:
                model.tokenizer = found
            return model

        return cls(load=load, steps=steps, keep=keep, name=str(name_or_path))

    @classmethod
    def transformer_lens(cls, name: str, indices: Any = None, *, keep: int = KEEP, **boot: Any) -> Checkpoints:
        """TransformerLens's training checkpoints of model `name` (``checkpoint_index``): Pythia, stanford-crfm, the
        legacy TransformerLens repos (NeelNanda/..., e.g. ``"NeelNanda/Attn_Only_2L512W_Shortformer"``).

        `indices`: which of the model's checkpoints (indices into its checkpoint labels, negative from the end;
        default all); ``steps`` are their labels (training steps, or tokens seen: `unit`). Each model loads with
        ``TransformerBridge.boot_transformers(name, checkpoint_index=i, **boot)`` (``boot_tl_legacy`` for the legacy
        repos) under TransformerLens 4, ``HookedTransformer.from_pretrained(name, checkpoint_index=i, **boot)`` under
        2.x: a download from the Hugging Face Hub unless cached.

        Example:
            >>> import circuitwidgets as cw
            >>> ck = cw.Checkpoints.transformer_lens("EleutherAI/pythia-70m", [0, 4, -1])   # (nothing loads yet)
            >>> ck.steps
            (0, 8, 143000)
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a model name (str); got {name!r}")
        labels, unit = _checkpoint_labels(name)
        n = len(labels)
        if indices is None:
            indices = list(range(n))
        elif _is_int(indices):
            indices = [indices]
        try:
            indices = list(indices)
        except TypeError:
            raise TypeError(f"indices must be a list of ints; got {type(indices).__name__}") from None
        chosen = []
        for index in indices:
            if not _is_int(index):
                raise TypeError(f"indices must be ints (checkpoint indices); got {index!r}")
            if not -n <= index < n:
                raise ValueError(f"checkpoint index {index} is out of range: {name} has {n} checkpoints (0..{n - 1})")
            chosen.append(index % n)
        if not chosen:
            raise ValueError("indices is empty: give at least one checkpoint index")
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"indices name a checkpoint twice: {indices}")
        chosen.sort()
        by_step = {labels[i]: i for i in chosen}

        def load(step: int) -> Any:
            return _tl_boot(name, by_step[step], boot)

        return cls(load=load, steps=[labels[i] for i in chosen], keep=keep, unit=unit, name=name)

    @classmethod
    def state_dicts(
        cls, folder: str | Path, make_model: Callable[[], Any], *, steps: Any = None, keep: int = KEEP, strict: bool = True
    ) -> Checkpoints:
        """A folder of saved state dicts (``*.safetensors``, ``*.pt``, ``*.pth``, ``*.bin``), one file per step.

        The step of a file is the last number in its name (``ckpt_1000.pt`` -> 1000) unless `steps` maps file names
        to steps. `make_model()` builds a fresh model of the architecture (e.g. ``lambda: cw.demo.boot()``), into
        which each file's state dict is loaded (``load_state_dict(state, strict=strict)``; a torch file saved as
        ``{"state_dict": ...}`` or ``{"model_state_dict": ...}`` works too); the model is put in eval mode.

        Example:
            >>> import tempfile, torch, circuitwidgets as cw
            >>> folder = tempfile.mkdtemp()
            >>> for step in (0, 50):
            ...     torch.save(cw.demo.boot(seed=step + 1).state_dict(), f"{folder}/ckpt_{step}.pt")
            >>> ck = cw.Checkpoints.state_dicts(folder, lambda: cw.demo.boot())
            >>> ck.steps, bool(torch.equal(ck.at(50).W_E, cw.demo.boot(seed=51).W_E))
            ((0, 50), True)
        """
        if isinstance(make_model, torch.nn.Module) or not callable(make_model):
            raise TypeError(
                "make_model must be a function that builds a fresh model of the architecture (e.g. lambda: "
                f"cw.demo.boot()); got {type(make_model).__name__} (a model would be shared by every step)"
            )
        root = Path(folder)
        if not root.is_dir():
            raise ValueError(f"folder={str(folder)!r} is not a folder")
        files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix in _STATE_SUFFIXES)
        if not files:
            raise ValueError(f"folder={str(folder)!r} holds no state dict ({', '.join(_STATE_SUFFIXES)} files)")
        if steps is None:
            by_step: dict[int, Path] = {}
            for path in files:
                step = _step_of(path.stem, "file")
                if step in by_step:
                    raise ValueError(f"{by_step[step].name} and {path.name} are both step {step}: pass steps={{file name: step}}")
                by_step[step] = path
        else:
            if not isinstance(steps, Mapping):
                raise TypeError("steps must map file names to steps, e.g. {'final.pt': 6000}")
            known = {p.name: p for p in files}
            missing = [n for n in steps if n not in known]
            if missing:
                raise ValueError(f"steps names {missing[0]!r}, which is not a state dict file of {folder}")
            by_step = {step: known[n] for n, step in steps.items()}

        def load(step: int) -> Any:
            model = make_model()
            model.load_state_dict(_read_state(by_step[step]), strict=strict)
            model.eval()
            return model

        return cls(load=load, steps=sorted(by_step), keep=keep, name=str(folder))

    # ----- the sequence ------------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[int, ...]:
        """The training steps, increasing (one model each)."""
        return self._steps

    @property
    def loaded(self) -> tuple[int, ...]:
        """The steps whose models are in memory now (held by this object), least recently used first."""
        if self._given is not None:
            return self._steps
        with self._lock:
            return tuple(self._lru)

    @property
    def loads(self) -> int:
        """How many times a model was loaded (a step asked for again after it left the LRU loads again)."""
        return self._loads

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            chosen = self._steps[i]
            if not chosen:
                raise ValueError(f"the slice {i} selects no step")
            if self._given is not None:
                models = self._given[i]
                return Checkpoints(models, steps=list(chosen), unit=self.unit, name=self.name)
            return Checkpoints(load=self._load, steps=list(chosen), keep=self.keep, unit=self.unit, name=self.name)
        if not _is_int(i):
            raise TypeError(f"a checkpoint index must be an int (or a slice; ck.at(step) takes a step); got {i!r}")
        n = len(self._steps)
        if not -n <= i < n:
            raise IndexError(f"checkpoint index {i} is out of range: {n} checkpoints")
        return self._model(i % n)

    def index(self, step: int) -> int:
        """The index of `step` in `steps` (ValueError naming the nearest steps when it is not one)."""
        if not _is_int(step):
            raise TypeError(f"step must be an int; got {step!r}")
        if step in self._steps:
            return self._steps.index(step)
        raise ValueError(f"step={step} is not a checkpoint {self.unit}; the nearest are {around(self._steps, step)}")

    def at(self, step: int) -> Any:
        """The model at training step `step` (one of `steps`)."""
        return self._model(self.index(step))

    def _model(self, i: int) -> Any:
        if self._given is not None:
            return self._given[i]
        step = self._steps[i]
        with self._lock:  # (one load at a time: a widget's background scan and a linked view ask from two threads)
            if step in self._lru:
                self._lru.move_to_end(step)
                return self._lru[step]
            assert self._load is not None
            model = self._load(step)
            if model is None:
                raise ValueError(f"load({step}) returned None: it must return the model of that step")
            self._loads += 1
            self._lru[step] = model
            while len(self._lru) > self.keep:
                self._evict()
            return model

    def _evict(self) -> None:
        """Drop the least recently used model; free it now if only reference cycles hold it."""
        _, model = self._lru.popitem(last=False)
        try:
            gone = weakref.ref(model)
        except TypeError:  # (an object without weak references: nothing to check)
            return
        del model
        if gone() is not None:  # a model's modules and hooks refer to each other: collect the cycles now, so that
            gc.collect()  # memory stays at `keep` models (unless the user holds the model)

    def clear(self) -> None:
        """Drop every loaded model (models given as a list or mapping stay: they are the caller's)."""
        with self._lock:
            while self._lru:
                self._evict()

    def __repr__(self) -> str:
        first, last = self._steps[0], self._steps[-1]
        held = f"{len(self._steps)} models given" if self._given is not None else f"loaded lazily, keep={self.keep}"
        name = f"{self.name}: " if self.name else ""
        return f"Checkpoints({name}{len(self)} {self.unit}s {first}..{last}, {held})"


# ----- loading helpers ---------------------------------------------------------------------------------
def _revision_source(name_or_path: str | Path, revision: str) -> tuple[str, str | None]:
    """``(where, revision)`` for ``from_pretrained``: a local folder (revision None) or a Hub id with its revision."""
    text = str(name_or_path)
    if "{revision}" in text:
        where = Path(text.format(revision=revision))
        if not where.is_dir():
            raise ValueError(f"revision {revision!r}: {str(where)!r} is not a folder")
        return str(where), None
    root = Path(text)
    if root.is_dir():
        if (root / revision).is_dir():
            return str(root / revision), None
        raise ValueError(f"{text!r} is a local folder with no folder {revision!r} in it (one folder per revision)")
    return text, revision


def _hf_tokenizer(tokenizer: Any, source: tuple[str, str | None], options: dict[str, Any]) -> Any:
    if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
        return tokenizer
    import transformers

    where, revision = (str(tokenizer), None) if tokenizer is not None else source
    passed = ("local_files_only", "token", "cache_dir", "trust_remote_code")
    kwargs: dict[str, Any] = {k: options[k] for k in passed if k in options}
    if revision is not None:
        kwargs["revision"] = revision
    try:
        return transformers.AutoTokenizer.from_pretrained(where, **kwargs)
    except Exception:
        if tokenizer is not None:
            raise
        return None  # no tokenizer saved with the checkpoints: the models take token ids


def _checkpoint_labels(name: str) -> tuple[list[int], str]:
    """TransformerLens's checkpoint labels of `name` and what they count ("step" or "token")."""
    try:
        from transformer_lens.tools.model_registry import checkpoints as registry
    except ImportError:  # TransformerLens 2.x
        from transformer_lens import loading_from_pretrained as registry  # type: ignore[no-redef]
    labels, unit = registry.get_checkpoint_labels(name)
    return [int(label) for label in labels], str(unit)


def _tl_boot(name: str, index: int, options: dict[str, Any]) -> Any:
    """Model `name` at checkpoint `index`, as the installed TransformerLens loads it."""
    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:  # TransformerLens 2.x
        from transformer_lens import HookedTransformer

        return HookedTransformer.from_pretrained(name, checkpoint_index=index, **options)
    from transformer_lens.model_bridge.sources.tl_legacy import TL_LEGACY_PREFIXES

    if name.startswith(TL_LEGACY_PREFIXES):
        from transformer_lens.model_bridge.sources import boot_tl_legacy

        return boot_tl_legacy(name, checkpoint_index=index, **options)
    return TransformerBridge.boot_transformers(name, checkpoint_index=index, **options)


def _read_state(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict):
        for key in ("state_dict", "model_state_dict"):
            if isinstance(state.get(key), dict):
                return state[key]
        return state
    raise ValueError(f"{path.name} holds a {type(state).__name__}, not a state dict")


# ----- the scan --------------------------------------------------------------------------------------
def _kind_of(metric: str) -> str:
    if metric in COMPOSITION_METRICS:
        return "composition"
    if metric in LOSS_METRICS:
        return "loss"
    return "head"


def _shape_of(metric: str, n_steps: int, n_layers: int, n_heads: int) -> tuple[int, ...]:
    """The shape of ``CheckpointScan.values[metric]``."""
    grid = (n_layers, n_heads)
    return {"head": (n_steps, *grid), "composition": (n_steps, *grid, *grid), "loss": (n_steps,)}[_kind_of(metric)]


def in_context_positions(seq: int) -> tuple[range, range]:
    """``(early, late)``: the token positions whose losses `in_context_loss` compares on a sequence of `seq` tokens.

    Positions 2 .. seq-1 (token 0 is not predicted, and token 1 follows BOS alone) split into tenths of
    ``k = max(1, (seq - 2) // 10)`` tokens: early is the first tenth (tokens 2 .. 1+k), late the last (tokens
    seq-k .. seq-1). Olsson et al. compare token 500 with token 50 of 512-token contexts; this is the same
    scaled to the prompt's length.

    Example:
        >>> in_context_positions(51)      # [BOS, r, r] with |r| = 25: first-copy tokens 2..5, second-copy tokens 47..50
        (range(2, 6), range(47, 51))
    """
    if seq < 4:
        raise ValueError(f"in_context_loss needs at least 4 tokens (early and late positions after position 1); got {seq}")
    k = max(1, (seq - 2) // 10)
    return range(2, 2 + k), range(seq - k, seq)


@dataclass
class CheckpointScan:
    """Head metrics, composition and losses at every checkpoint (made by `scan_checkpoints`; `save` / `load` keep it).

    ``values[metric]`` (float32, NaN where a step is not scanned yet): ``[n_steps, n_attn_layers, n_heads]`` for a
    head metric, ``[n_steps, L, H, L, H]`` for ``composition_q/k/v`` (NaN where undefined: the reader not in a later
    layer), ``[n_steps]`` for ``loss`` and ``in_context_loss``. ``position_loss`` ``[n_steps, seq - 1]``: the mean
    loss of each next token (entry p: the logits at p predicting token p + 1), when a loss was scanned. ``tokens``:
    the tokens of the losses (and of every head metric when ``tokens_given``; else each head metric ran on
    `head_scores`' default tokens, which for the two-copy metrics are these). Rows follow ``layers``.
    """

    steps: tuple[int, ...]
    metrics: tuple[str, ...]
    layers: tuple[int, ...]
    n_heads: int
    values: dict[str, torch.Tensor]
    position_loss: torch.Tensor | None
    tokens: torch.Tensor
    tokens_given: bool
    done: torch.Tensor  # bool [n_steps]
    unit: str = "step"
    model_name: str = ""
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def n_done(self) -> int:
        return int(self.done.sum())

    @property
    def complete(self) -> bool:
        return bool(self.done.all())

    def __repr__(self) -> str:
        state = "complete" if self.complete else f"{self.n_done} of {self.n_steps} checkpoints scanned"
        return (
            f"CheckpointScan({self.n_steps} {self.unit}s {self.steps[0]}..{self.steps[-1]}, {len(self.layers)} layers x "
            f"{self.n_heads} heads, metrics {list(self.metrics)}, {state})"
        )

    # ----- reading ---------------------------------------------------------------------------------
    def _metric(self, metric: Any) -> str:
        if metric not in self.metrics:
            raise ValueError(f"metric {metric!r} was not scanned; this scan has {list(self.metrics)}")
        return metric

    def _head(self, head: Any) -> tuple[int, int]:
        if not isinstance(head, (tuple, list)) or len(head) != 2 or not all(_is_int(x) for x in head):
            raise TypeError(f"a head is a pair (layer, head) of ints; got {head!r}")
        layer, index = head
        if layer not in self.layers:
            raise ValueError(f"head {tuple(head)}: layer {layer} is not an attention layer of this scan: {list(self.layers)}")
        if not 0 <= index < self.n_heads:
            raise ValueError(f"head {tuple(head)}: head {index} is out of range 0..{self.n_heads - 1}")
        return self.layers.index(layer), index

    def curve(self, metric: str, heads: Any = None, *, positions: Any = None) -> torch.Tensor:
        """``[n_steps]``: what `phase_change` follows (NaN at steps not scanned).

        A head metric: its maximum over `heads` (``[(layer, head), ...]``, default every head; NaN values left out);
        a composition metric: its maximum over `heads` given as pairs ``[((l1, h1), (l2, h2)), ...]`` (writer, reader;
        default every defined pair); ``loss`` / ``in_context_loss``: the value itself, or with `positions` (``loss``
        only) the mean loss over those positions p of ``position_loss`` (the logits at p predicting token p + 1), e.g.
        the second copy of repeated tokens.

        Example:
            >>> import circuitwidgets as cw
            >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
            >>> scan = cw.analysis.scan_checkpoints(ck, metrics=["induction", "loss"], progress=False)
            >>> second = range(26, 50)   # [BOS, r, r], |r| = 25: the logits predicting the second copy's tokens 2..25
            >>> bool(scan.curve("loss", positions=second)[1] < 1.0 < scan.curve("loss", positions=second)[0])
            True
        """
        metric = self._metric(metric)
        values = self.values[metric]
        kind = _kind_of(metric)
        if positions is not None:
            if metric != "loss" or self.position_loss is None:
                raise ValueError("positions= goes with the 'loss' metric (the mean loss over those positions)")
            if heads is not None:
                raise ValueError("a loss has no heads: pass heads=None")
            width = self.position_loss.shape[1]
            chosen = [positions] if _is_int(positions) else list(positions)
            if not chosen or not all(_is_int(p) and 0 <= p < width for p in chosen):
                raise ValueError(
                    f"positions must be ints 0..{width - 1} (the logits at p predict token p + 1); got {positions!r}"
                )
            return self.position_loss[:, chosen].mean(1)
        if kind == "loss":
            if heads is not None:
                raise ValueError(f"{metric} is one number per checkpoint: pass heads=None")
            return values.clone()
        flat = values.reshape(self.n_steps, -1)
        if heads is not None:
            try:
                chosen = list(heads)
            except TypeError:
                raise TypeError(f"heads must be a list; got {type(heads).__name__}") from None
            if not chosen:
                raise ValueError("heads is empty: name at least one head (or pass None for every head)")
            n = self.n_heads
            if kind == "head":
                index = [row * n + h for row, h in map(self._head, chosen)]
            else:
                index = []
                for pair in chosen:
                    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                        raise TypeError(f"{metric}: heads are pairs ((l1, h1), (l2, h2)) of writer and reader; got {pair!r}")
                    (r1, h1), (r2, h2) = self._head(pair[0]), self._head(pair[1])
                    if r1 >= r2:
                        raise ValueError(
                            f"{metric}: {tuple(pair[0])} -> {tuple(pair[1])} is undefined (the reader must be in a later layer)"
                        )
                    index.append(((r1 * n + h1) * len(self.layers) + r2) * n + h2)
            flat = flat[:, index]
        finite = torch.isfinite(flat)
        best = flat.masked_fill(~finite, -math.inf).max(1).values
        return torch.where(finite.any(1), best, torch.tensor(float("nan")))

    def phase_change(self, metric: str, heads: Any = None, *, positions: Any = None) -> tuple[int, int]:
        """``(start_step, end_step)``: the window of checkpoints where `metric`'s `curve` changes most.

        The rule (circuits-spec.md, "Along training"): between neighbouring checkpoints i, i + 1 (of those scanned)
        the change is ``curve[i + 1] - curve[i]``; the window starts as the pair with the largest change in absolute
        value and widens to the neighbouring pairs on either side while their change has the same sign and at least
        half that size. `heads` and `positions` as in `curve`.

        Example:
            >>> import circuitwidgets as cw
            >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
            >>> cw.analysis.scan_checkpoints(ck, metrics=["induction"], progress=False).phase_change("induction")
            (0, 6000)
        """
        curve = self.curve(metric, heads, positions=positions)
        done = self.done & torch.isfinite(curve)
        steps = [s for s, d in zip(self.steps, done.tolist(), strict=True) if d]
        return phase_change_window(steps, curve[done])

    def delta(self, metric: str, heads: Any = None, *, positions: Any = None) -> torch.Tensor:
        """``[n_steps - 1]``: the change of `curve` between neighbouring checkpoints (what `phase_change` compares)."""
        curve = self.curve(metric, heads, positions=positions)
        return curve[1:] - curve[:-1]

    # ----- files -----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the scan to `path` (a torch file of plain tensors and lists, read back by `CheckpointScan.load`).

        Example:
            >>> import circuitwidgets as cw
            >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
            >>> scan = cw.analysis.scan_checkpoints(ck, metrics=["induction", "loss"], progress=False)
            >>> again = cw.analysis.CheckpointScan.load(scan.save("/tmp/checkpoint_scan.pt"))
            >>> again.steps, bool(torch.equal(again.values["induction"], scan.values["induction"]))
            ((0, 6000), True)
        """
        path = Path(path)
        state = {name: getattr(self, name) for name in self.__dataclass_fields__}
        state.update(steps=list(self.steps), metrics=list(self.metrics), layers=list(self.layers))
        torch.save({"format": _FORMAT, **state}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> CheckpointScan:
        """A scan written by `save` (tensors only: loaded with ``weights_only=True``, no code runs), checked (`check`):
        a file tampered with or of another version is refused naming what does not fit."""
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.pop("format", None) != _FORMAT:
            raise ValueError(f"{path} is not a CheckpointScan file (written by CheckpointScan.save)")
        try:
            for name in ("steps", "metrics", "layers"):
                state[name] = tuple(state[name])
            scan = cls(**state)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path} is not a consistent CheckpointScan file: {exc}") from None
        return scan.check(f"{path}")

    def check(self, what: str = "the scan") -> CheckpointScan:
        """ValueError naming the first thing that does not fit (a file tampered with, or of another version): the
        steps, metrics, layers and heads; every tensor's shape and dtype against them and the tokens. Returns the scan.

        Example:
            >>> import circuitwidgets as cw
            >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
            >>> scan = cw.analysis.scan_checkpoints(ck, metrics=["induction"], progress=False)
            >>> scan.n_heads = 7
            >>> scan.check()
            Traceback (most recent call last):
            ...
            ValueError: the scan: values['induction'] has shape (2, 2, 4), not (2, 2, 7)
        """

        def fail(why: str) -> ValueError:
            return ValueError(f"{what}: {why}")

        steps = self.steps
        if not steps or not all(_is_int(s) for s in steps) or any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
            raise fail(f"steps must be increasing ints; got {list(steps)}")
        try:
            _check_metrics(self.metrics)
        except (TypeError, ValueError) as exc:
            raise fail(str(exc)) from None
        if not self.layers or not all(_is_int(x) and x >= 0 for x in self.layers):
            raise fail(f"layers must be block indices; got {list(self.layers)}")
        if not _is_int(self.n_heads) or self.n_heads < 1:
            raise fail(f"n_heads must be a positive int; got {self.n_heads!r}")
        n = len(steps)
        if not isinstance(self.done, torch.Tensor) or self.done.dtype != torch.bool or tuple(self.done.shape) != (n,):
            raise fail(f"done must be {n} booleans (one per step)")
        tokens = self.tokens
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.is_floating_point() or tokens.numel() == 0:
            raise fail("tokens must be a [batch, seq] tensor of token ids")
        if not isinstance(self.values, dict) or set(self.values) != set(self.metrics):
            raise fail(f"values holds {sorted(self.values) if isinstance(self.values, dict) else self.values!r}, "
                       f"not the metrics {list(self.metrics)}")
        for metric, tensor in self.values.items():
            want = _shape_of(metric, n, len(self.layers), self.n_heads)
            if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tuple(tensor.shape) != want:
                got = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
                raise fail(f"values[{metric!r}] has shape {got}, not {want}")
        wants_positions = any(m in LOSS_METRICS for m in self.metrics)
        if (self.position_loss is not None) != wants_positions:
            raise fail("position_loss must be there exactly when a loss was scanned")
        width = (n, tokens.shape[1] - 1)
        if self.position_loss is not None and (
            not isinstance(self.position_loss, torch.Tensor) or tuple(self.position_loss.shape) != width
        ):
            raise fail(f"position_loss must have shape {width} (steps, positions)")
        return self


def phase_change_window(steps: Sequence[int], curve: torch.Tensor) -> tuple[int, int]:
    """``(start_step, end_step)`` of `curve` ``[len(steps)]`` by `CheckpointScan.phase_change`'s rule.

    Example:
        >>> phase_change_window([0, 10, 100, 1000, 2000, 6000], torch.tensor([0.0, 0.01, 0.02, 0.3, 0.5, 0.52]))
        (100, 2000)
    """
    values = [float(x) for x in torch.as_tensor(curve).flatten().tolist()]
    if len(values) != len(steps):
        raise ValueError(f"curve has {len(values)} values for {len(steps)} steps")
    if len(values) < 2:
        raise ValueError(f"a phase change needs at least 2 checkpoints with a value; got {len(values)}")
    changes = [b - a for a, b in zip(values, values[1:], strict=False)]
    size = max(abs(c) for c in changes)
    if not size > 0:
        raise ValueError("the curve does not change between checkpoints: no phase change")
    top = max(range(len(changes)), key=lambda i: abs(changes[i]))
    sign = math.copysign(1.0, changes[top])

    def keeps(i: int) -> bool:
        return changes[i] * sign > 0 and abs(changes[i]) >= size / 2

    lo = top
    while lo > 0 and keeps(lo - 1):
        lo -= 1
    hi = top
    while hi + 1 < len(changes) and keeps(hi + 1):
        hi += 1
    return int(steps[lo]), int(steps[hi + 1])


def _check_metrics(metrics: Any) -> tuple[str, ...]:
    return check_metric_names(metrics, checkpoint_metrics())


def _tokens(view: ModelView, tokens_or_texts: Any) -> tuple[torch.Tensor, str]:
    """The ``[batch, seq]`` tokens of a scan (CPU, long) and a note saying what they are."""
    if tokens_or_texts is None:
        tokens = repeated_random_tokens(view, None, DEFAULT_BATCH, 2, 0)
        half = (tokens.shape[1] - 1) // 2
        return tokens.cpu(), (
            f"{tokens.shape[0]} sequences [BOS, r, r] of random tokens, |r| = {half} (repeated_random_tokens, seed 0): "
            "head_scores' default tokens"
        )
    if isinstance(tokens_or_texts, str):
        return view.to_tokens(tokens_or_texts).cpu(), "the text given"
    if isinstance(tokens_or_texts, (list, tuple)) and tokens_or_texts and all(isinstance(t, str) for t in tokens_or_texts):
        rows = [view.to_tokens(text)[0].cpu() for text in tokens_or_texts]
        n = min(len(r) for r in rows)
        cut = f", cut to the shortest ({n} tokens)" if any(len(r) > n for r in rows) else ""
        return torch.stack([r[:n] for r in rows]), f"{len(rows)} texts given{cut}"
    tokens = view.tokens_of(tokens_or_texts).cpu()
    return tokens, f"{tokens.shape[0]} token sequences given"


def _empty(
    ck: Checkpoints, view: ModelView, metrics: tuple[str, ...], tokens: torch.Tensor, given: bool, note: str
) -> CheckpointScan:
    n, L, H = len(ck), len(view.attn_layers), view.n_heads
    values = {}
    for metric in metrics:
        values[metric] = torch.full(_shape_of(metric, n, L, H), float("nan"))
    losses = any(m in LOSS_METRICS for m in metrics)
    notes = {"tokens": note}
    if "in_context_loss" in metrics:
        early, late = in_context_positions(tokens.shape[1])
        notes["in_context_loss"] = (
            f"mean loss of tokens {late.start}..{late.stop - 1} minus that of tokens {early.start}..{early.stop - 1} "
            f"(the last and the first tenth of positions 2..{tokens.shape[1] - 1})"
        )
    if "loss" in metrics:
        notes["loss"] = f"mean next-token loss over every position of the {tokens.shape[0]} x {tokens.shape[1]} tokens"
    return CheckpointScan(
        steps=ck.steps,
        metrics=metrics,
        layers=tuple(view.attn_layers),
        n_heads=view.n_heads,
        values=values,
        position_loss=torch.full((n, tokens.shape[1] - 1), float("nan")) if losses else None,
        tokens=tokens,
        tokens_given=given,
        done=torch.zeros(n, dtype=torch.bool),
        unit=ck.unit,
        model_name=ck.name or type(view.user_model).__name__,
        notes=notes,
    )


def checkpoint_values(model: Any, metrics: Any, tokens: Any = None) -> dict[str, torch.Tensor]:
    """The values of `metrics` on one model: what `scan_checkpoints` records for each step (see there).

    `tokens`: ``[batch, seq]`` token ids, or None for `head_scores`' defaults (and its two-copy tokens for the losses).

    Example:
        >>> import circuitwidgets as cw
        >>> values = checkpoint_values(cw.demo_model(), ["induction", "composition_k", "in_context_loss"])
        >>> values["induction"].shape, values["composition_k"].shape, float(values["in_context_loss"]) < -2
        (torch.Size([2, 4]), torch.Size([2, 4, 2, 4]), True)
    """
    view = as_view(model)
    metrics = _check_metrics(metrics)
    given = tokens is not None
    loss_tokens = view.tokens_of(tokens) if given else repeated_random_tokens(view, None, DEFAULT_BATCH, 2, 0)
    out: dict[str, torch.Tensor] = {}
    table = head_metrics.METRICS
    losses: torch.Tensor | None = None
    shared: torch.Tensor | None = None  # the patterns of the loss tokens, from the run that gives the logits
    patterns = [m for m in metrics if m in table and table[m].source == "pattern"]
    groups: dict[int, list[str]] = {}  # default tokens: by the repeats of each metric's tokens
    for metric in patterns:
        groups.setdefault(table[metric].repeats, []).append(metric)
    wants_loss = any(m in LOSS_METRICS for m in metrics)
    if wants_loss and (given or 2 in groups) and whole_patterns(view, loss_tokens) and view.supports("hooks"):
        # one run for the logits and the patterns (the same numbers as two runs: tests/test_checkpoints.py)
        with torch.no_grad():
            logits, kept = view.run_with_hooks(loss_tokens, [], keep=[("pattern", layer) for layer in view.attn_layers])
        shared = torch.stack([kept[("pattern", layer)] for layer in view.attn_layers], dim=1).float()
        losses = next_token_loss(logits, loss_tokens).float().cpu()
    for repeats, kinds in groups.items():
        same = given or repeats == 2
        scored = loss_tokens if same else repeated_random_tokens(view, None, DEFAULT_BATCH, repeats, 0)
        out.update(pattern_scores(view, kinds, scored, shared if same else None))
    for metric in metrics:
        if metric in out:
            continue
        if metric in table:
            spec = table[metric]
            if spec.source == "weights":
                out[metric] = computed_by(spec)(view).float().cpu()
            else:
                out[metric] = head_scores(view, metric, loss_tokens if given else None)
        elif metric in COMPOSITION_METRICS:
            out[metric] = composition_scores(view, COMPOSITION_METRICS[metric])
    if wants_loss:
        if losses is None:
            with torch.no_grad():
                losses = next_token_loss(view.logits(loss_tokens), loss_tokens).float().cpu()  # [batch, seq - 1]
        out["position_loss"] = losses.mean(0)
        if "loss" in metrics:
            out["loss"] = losses.mean()
        if "in_context_loss" in metrics:
            early, late = in_context_positions(loss_tokens.shape[1])
            # loss index p is token p + 1
            late_loss = losses[:, late.start - 1 : late.stop - 1].mean()
            out["in_context_loss"] = late_loss - losses[:, early.start - 1 : early.stop - 1].mean()
    return out


def scan_checkpoints(
    checkpoints: Any,
    tokens_or_texts: Any = None,
    metrics: Any = DEFAULT_METRICS,
    *,
    progress: Any = True,
    resume: CheckpointScan | None = None,
    stop: Callable[[], bool] | None = None,
) -> CheckpointScan:
    """The same analysis on every checkpoint's model in turn: a `CheckpointScan`.

    Each step's values equal the analysis run on that step's model directly (`checkpoint_values`):

    - any metric of the head-metric table (`circuitwidgets.head_metrics.METRICS`: ``previous_token``,
      ``duplicate_token``, ``induction``, ``prefix_matching``, ``first_token``, ``entropy``, ``distance``, ``self``,
      ``direct_copying``, ``ov_copying``, and any row added): ``head_scores(model, metric, tokens)`` ``[L, H]``;
    - ``composition_q``, ``composition_k``, ``composition_v``: ``composition_scores(model, kind)`` ``[L, H, L, H]``;
    - ``loss``: the mean next-token loss over every position of the tokens;
    - ``in_context_loss``: the mean loss at the last tenth of positions minus that at the first tenth after position
      1 (`in_context_positions`; Olsson et al.'s token 500 minus token 50, scaled to the prompt's length); negative
      once the model uses its context.

    Args:
        checkpoints: a `Checkpoints` (or a list of models, or a mapping ``{step: model}``).
        tokens_or_texts: a text, a list of texts (tokenised with BOS, cut to the shortest) or token ids ``[batch,
            seq]``; default None: each head metric on `head_scores`' default tokens (repeated random tokens
            ``[BOS, r, r]``), the losses on those two-copy tokens (8 x 51 on the demo model).
        metrics: the metrics (default `DEFAULT_METRICS`: previous-token, induction, K-composition, loss, in-context loss).
        progress: True (a tqdm bar over the checkpoints), False/None, or ``progress(done, n_steps)``.
        resume: a partial scan of the same checkpoints, metrics and tokens (after a stop or an interrupt): filled in
            place and returned.
        stop: called before each checkpoint; True stops there and returns the partial scan (``complete`` False). An
            interrupt (Ctrl-C) does the same, with a warning.

    Memory: one checkpoint's model at a time is asked for (the `Checkpoints` keeps at most its ``keep``); the scan
    itself holds a few numbers per head and step.

    Example:
        >>> import circuitwidgets as cw
        >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
        >>> scan = cw.analysis.scan_checkpoints(ck, progress=False)
        >>> scan.values["composition_k"].shape, scan.complete
        (torch.Size([2, 2, 4, 2, 4]), True)
        >>> [round(float(x), 1) for x in scan.values["in_context_loss"]]    # no use of context, then induction
        [0.0, -3.7]
    """
    ck = checkpoints if isinstance(checkpoints, Checkpoints) else Checkpoints(checkpoints)
    metrics = _check_metrics(metrics)
    if resume is not None and not isinstance(resume, CheckpointScan):
        raise TypeError(f"resume must be a CheckpointScan; got {type(resume).__name__}")
    first = as_view(ck[0])
    tokens, note = _tokens(first, tokens_or_texts)
    given = tokens_or_texts is not None
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens must have at least 2 positions; got {tokens.shape[1]}")
    if "in_context_loss" in metrics:
        in_context_positions(tokens.shape[1])  # (checks the length)
    fresh = _empty(ck, first, metrics, tokens, given, note)
    del first
    if resume is None:
        scan = fresh
    else:
        scan = resume
        if (scan.steps, scan.metrics, scan.layers, scan.n_heads) != (fresh.steps, fresh.metrics, fresh.layers, fresh.n_heads):
            raise ValueError("resume: that scan is of other checkpoints or other metrics; start a new scan")
        if scan.tokens_given != given or not torch.equal(scan.tokens, fresh.tokens):
            raise ValueError("resume: that scan is of other tokens; start a new scan")
    report = progress_of(progress, scan.n_steps, "scanning checkpoints")
    report(scan.n_done)
    try:
        for i in range(scan.n_steps):
            if bool(scan.done[i]):
                continue
            if stop is not None and stop():
                break
            _scan_step(ck, scan, i, tokens if given else None)
            report(scan.n_done)
    except KeyboardInterrupt:
        warnings.warn(
            f"scan stopped after {scan.n_done} of {scan.n_steps} checkpoints: scan_checkpoints(checkpoints, ..., "
            "resume=scan) continues it", stacklevel=2,
        )
    return scan


def _scan_step(ck: Checkpoints, scan: CheckpointScan, i: int, tokens: torch.Tensor | None) -> None:
    model = ck[i]
    view = as_view(model)
    if (tuple(view.attn_layers), view.n_heads) != (scan.layers, scan.n_heads):
        raise ValueError(
            f"the checkpoint at {scan.unit} {scan.steps[i]} has attention layers {list(view.attn_layers)} x {view.n_heads} "
            f"heads; the first has {list(scan.layers)} x {scan.n_heads}: every checkpoint must have one architecture"
        )
    found = checkpoint_values(view, scan.metrics, tokens)
    del model, view
    for metric in scan.metrics:
        scan.values[metric][i] = found[metric]
    if scan.position_loss is not None:
        scan.position_loss[i] = found["position_loss"]
    scan.done[i] = True
