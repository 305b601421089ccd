"""`Training`: heads across training — every head's metric along the checkpoints, the losses, a step scrubber.

Line charts of a head metric along training (one line a head; hover names it), the loss curves below, the
phase-change window shaded (`CheckpointScan.phase_change`), and a step scrubber (slider and play). Linked widgets
(`Training.link`: an `AttentionPattern`, `CompositionDiagram`, `OVCircuit`, `Dashboard`...) follow the selected head
and step: they get that step's model, so the pattern of an induction head can be watched forming. The scan is
`circuitwidgets.analysis.scan_checkpoints`; in a notebook it runs on the background worker (`_background`, as
`HeadAtlas`'s scan does) while the curves fill in, with progress and Stop/Resume.
"""

from __future__ import annotations

import math
from typing import Any

import ipywidgets
import torch
import traitlets

from .. import head_metrics
from ..analysis import checkpoints as along
from ..analysis.checkpoints import COMPOSITION_METRICS, DEFAULT_METRICS, LOSS_METRICS, Checkpoints, CheckpointScan
from ..model import ModelView
from ._scanning import ScanningWidget
from ._views import current_view
from .base import CircuitWidget, described, running_loop
from .dashboard import Dashboard

#: While scanning, the curves are resent at most this often (seconds).
SCAN_STATES = ("running", "stopped", "done")
#: Steps spanning at least this ratio (last / first step after 0), further apart late than early, are drawn on a log axis
#: by default (`Training.x_scale`).
LOG_SPAN = 10
LABELS = {
    "composition_q": "Q-composition",
    "composition_k": "K-composition",
    "composition_v": "V-composition",
    "loss": "loss",
    "in_context_loss": "in-context loss",
}
DEFINITIONS = {
    "composition_q": "composition_scores(model, 'Q'): how much the selected head's queries read each earlier head's output",
    "composition_k": "composition_scores(model, 'K'): how much the selected head's keys read each earlier head's output",
    "composition_v": "composition_scores(model, 'V'): how much the selected head's values read each earlier head's output",
}
#: What the page says about the step models (an exported page holds the curves only).
KERNEL_NOTE = "the curves are saved in this page; each step's model (what a linked view shows at a step) needs the kernel"


def _label(metric: str) -> str:
    spec = head_metrics.METRICS.get(metric)
    return spec.label if spec is not None else LABELS.get(metric, metric)


def _definition(metric: str) -> str:
    spec = head_metrics.METRICS.get(metric)
    return spec.definition if spec is not None else DEFINITIONS.get(metric, "")


class _StepFollow:
    """Gives `target` the model of `training`'s selected step whenever it changes (the latest step wins)."""

    def __init__(self, training: Training, target: Any) -> None:
        self.training, self.target = training, target
        training.observe(self._changed, names="step")
        self.follow()

    def _changed(self, change: dict) -> None:
        self.training._soon("follow", self.follow)

    def follow(self) -> None:
        training = self.training
        if training._checkpoints is None or training._closed:
            return
        step = training.step
        try:
            model = training.step_model()
            self.target.use_model(model, note=f"{training.unit} {step} of the training run")
        except Exception as exc:  # (a checkpoint that fails to load: said in the training view, the target keeps its model)
            training._show_error(f"{training.unit} {step}: its model could not be shown: {described(exc)}", "follow")
            return
        training._clear_error("follow")

    def unlink(self) -> None:
        self.training.unobserve(self._changed, names="step")


class Training(ScanningWidget, view="training"):
    """Heads across training: a head metric of every head along the checkpoints, the losses, a step scrubber.

    Above, the chosen ``metric`` of every head at every checkpoint (one line a head; hover a line to name it; click
    to select the head; for a composition metric, one line per earlier head into the selected head); below, the loss
    curves (``loss``, ``in_context_loss``). The phase-change window of each chart (`CheckpointScan.phase_change`:
    the neighbouring checkpoints where the curve's maximum over the heads changes most, widened while the change
    keeps at least half that size) is shaded. The slider and its play button move the selected ``step``; linked
    widgets (`link`) show that step's model. Log-spaced steps (over a decade, further apart late than early) are drawn
    on a log axis (``x_scale``; ``log(1 + step)``, so step 0 is drawn).

    Give `checkpoints` (a `Checkpoints`; scanned by the widget with `scan_checkpoints`) or a `CheckpointScan` made
    before (``scan=``, or as the first argument: drawn at once; pass the checkpoints too to link step models). In a
    notebook the scan runs in the background: the widget shows at once, with a progress bar and a Stop button, and
    the curves fill in checkpoint by checkpoint; Stop (``scan_state = "stopped"``) leaves a partial scan that Resume
    (``"running"``) continues. In a script, or with ``defer=False``, the scan runs before the constructor returns. (The
    constructor loads the first checkpoint in any case: its shape and tokens check the arguments.)
    `save_html` keeps the curves (as far as the scan has got); each step's model needs the kernel, and the page says so.

    Args:
        checkpoints: a `Checkpoints` (or a list of models), or a `CheckpointScan`.
        tokens_or_texts: the tokens of the scan (`scan_checkpoints`; default: its repeated random tokens).
        scan: a `CheckpointScan` of these checkpoints, in place of scanning them.
        metrics: the metrics scanned (default `DEFAULT_METRICS`); with `scan`, those it has.
        metric: the head (or composition) metric drawn per head (default "induction", else the scan's first).
        layer, head: the head selected (default: the head with the largest final value of `metric`, once scanned;
            else the last attention layer's head 0).
        step: the step selected (default the last).
        defer: in a notebook, scan in the background (True) or before returning (False).

    Example:
        >>> import circuitwidgets as cw
        >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
        >>> w = cw.Training(ck, metrics=["induction", "composition_k", "loss", "in_context_loss"])
        >>> w.curves["shape"], w.curves["window"], (w.layer, w.head), w.step
        ([2, 2, 4], [0, 6000], (1, 1), 6000)
        >>> pattern = cw.AttentionPattern(cw.demo_model(), prompt="abcabc")
        >>> _ = w.link(pattern)
        >>> w.step = 0
        >>> pattern.model is ck.at(0), pattern.model_note, (pattern.layer, pattern.head)
        (True, 'step 0 of the training run', (1, 1))
    """

    needs_model = False
    controls = ("metric", "step", "x_scale", "scan_state")
    inputs = ("metric", "layer", "head")

    metric = traitlets.Unicode(help="the head metric drawn, one line a head (one of curves['metrics'])").tag(sync=True)
    step = traitlets.Int(help="the training step selected (one of curves['steps']): what linked widgets show").tag(sync=True)
    x_scale = traitlets.Enum(("log", "linear"), "log", help="the step axis: 'log' (log(1 + step): step 0 drawn) or 'linear'").tag(
        sync=True
    )
    SCAN_UNIT = "checkpoints"
    scan_state = traitlets.Enum(
        SCAN_STATES,
        "done",
        help="'running' while scanning, 'stopped' (a partial scan: set 'running' to resume it), "
        "'done'; set 'stopped' to stop before the next checkpoint",
    ).tag(sync=True)
    curves = traitlets.Dict(
        help="payload (circuitwidgets.transport) of float32 [n_steps, n_attn_layers, n_heads]: the metric of every head at "
        "every step (a composition metric: of every earlier head into the selected one, `into`; NaN where undefined or "
        "not scanned), with steps, unit, metric, label, description, metrics (those drawable per head), labels, layers, "
        "n_heads, done (per step), window [start_step, end_step] (the phase change of the maximum over the heads, or "
        "null) and into"
    ).tag(sync=True)
    losses = traitlets.Dict(
        help="payload of float32 [n_losses, n_steps]: the loss metrics scanned (names, labels, descriptions) and windows "
        "{name: [start_step, end_step]}; no data when the scan has no loss"
    ).tag(sync=True)
    progress = traitlets.Dict(help="the scan's progress: {done, total, text, running}").tag(sync=True)
    kernel_note = traitlets.Unicode(help="what needs the kernel in an exported page (the step models)").tag(sync=True)

    def __init__(
        self,
        checkpoints: Any = None,
        tokens_or_texts: Any = None,
        *,
        scan: CheckpointScan | None = None,
        metrics: Any = DEFAULT_METRICS,
        metric: str = "induction",
        layer: int | None = None,
        head: int | None = None,
        step: int | None = None,
        defer: bool = True,
        **kwargs: Any,
    ) -> None:
        self._check_keywords(kwargs)
        if isinstance(scan, dict):
            raise TypeError(
                "Training() got 'scan' as a dict (a payload?): pass a CheckpointScan (scan_checkpoints or "
                "CheckpointScan.load) as scan="
            )
        if isinstance(checkpoints, CheckpointScan):
            if scan is not None:
                raise ValueError("pass the CheckpointScan once: as the first argument or as scan=")
            checkpoints, scan = None, checkpoints
        if scan is not None and not isinstance(scan, CheckpointScan):
            raise TypeError(
                f"scan must be a CheckpointScan (made by scan_checkpoints or CheckpointScan.load); got {type(scan).__name__}"
            )
        if checkpoints is None and scan is None:
            raise ValueError("pass checkpoints (a Checkpoints, to scan) or a CheckpointScan (made by scan_checkpoints)")
        if checkpoints is not None and not isinstance(checkpoints, Checkpoints):
            if isinstance(checkpoints, (list, tuple, dict)):
                checkpoints = Checkpoints(checkpoints)
            else:
                raise TypeError(
                    "checkpoints must be a Checkpoints (or a list of models, or a CheckpointScan); got "
                    f"{type(checkpoints).__name__}"
                )
        if scan is not None and tokens_or_texts is not None:
            raise ValueError("tokens_or_texts goes with scanning the checkpoints; a scan given has its own tokens")
        if not isinstance(defer, bool):
            raise TypeError(f"defer must be a bool; got {defer!r}")
        late = {name: kwargs.pop(name) for name in ("scan_state", "x_scale") if name in kwargs}
        self._checkpoints: Checkpoints | None = checkpoints
        self._tokens = tokens_or_texts
        self.links: list[Any] = []
        self._follows: list[_StepFollow] = []
        given = scan is not None  # (a scan given waits for Resume; one made here starts at once)
        if scan is None:  # checks the metrics and tokens; scans nothing yet
            assert checkpoints is not None
            scan = along.scan_checkpoints(checkpoints, tokens_or_texts, metrics, progress=False, stop=lambda: True)
        elif checkpoints is not None and tuple(checkpoints.steps) != tuple(scan.steps):
            raise ValueError(
                f"the scan is of steps {list(scan.steps)[:6]}...; the checkpoints have {list(checkpoints.steps)[:6]}..."
            )
        elif metrics is not DEFAULT_METRICS:
            raise ValueError("metrics goes with scanning the checkpoints; a scan given has its own metrics")
        self._scan = scan
        drawn = self._drawable()
        if not drawn:
            raise ValueError(f"the scan has no metric of heads to draw (it has {list(scan.metrics)}); scan a head metric too")
        if metric not in drawn:
            if metric != "induction":
                raise ValueError(f"metric={metric!r} is not a head metric of this scan: {drawn}")
            metric = drawn[0]
        loop = running_loop() if defer else None
        scanning = not scan.complete and late.get("scan_state", "stopped" if given else "running") == "running"
        if scanning and checkpoints is None:
            raise ValueError("scan_state='running': a scan given without its checkpoints cannot go on; pass the checkpoints")
        self._auto_head = layer is None and head is None  # (the strongest head, once scanned; until the user picks one)
        super().__init__(
            None,
            metric=metric,
            step=scan.steps[-1] if step is None else step,
            layer=scan.layers[-1] if layer is None else layer,
            head=0 if head is None else head,
            **kwargs,
        )
        try:
            state = "done" if scan.complete else "stopped"
            self._set(kernel_note=KERNEL_NOTE, x_scale=self._default_scale(), scan_state=state, progress=self._progress())
            if "x_scale" in late:
                self.x_scale = late["x_scale"]
            if scanning and loop is None:
                self._scan_now()
            if self._auto_head:
                self._pick_head()
        except Exception:
            self.close()
            raise
        self._start(defer)
        self._start_scan(loop if scanning else None)

    # ----- what the widget holds ---------------------------------------------------------------
    @property
    def checkpoint_scan(self) -> CheckpointScan:
        """The `CheckpointScan` shown (filled in place while scanning; ``checkpoint_scan.save(path)`` keeps it)."""
        return self._scan

    @property
    def checkpoints(self) -> Checkpoints | None:
        """The `Checkpoints` (None when the widget was given a scan alone)."""
        return self._checkpoints

    @property
    def unit(self) -> str:
        return self._scan.unit

    def step_model(self, step: int | None = None) -> Any:
        """The model of `step` (default: the selected step), from the checkpoints (loaded if need be)."""
        if self._checkpoints is None:
            raise ValueError("this Training widget was given a scan without its checkpoints: no step models; pass them")
        return self._checkpoints.at(self.step if step is None else step)

    @property
    def model(self) -> Any:
        """The selected step's model, or None without checkpoints."""
        return None if self._checkpoints is None else self.step_model()

    @property
    def mv(self) -> ModelView:
        """The selected step's model's view (ValueError without checkpoints)."""
        return current_view(self.step_model())

    def use_model(self, model: Any, *, note: str | None = None) -> CircuitWidget:
        raise TypeError("Training shows its checkpoints' models: select a step (the `step` trait) instead of use_model")

    def _model_state(self) -> tuple:
        return ()  # the curves are the scan's: a step model's weights do not draw them

    def _drawable(self) -> list[str]:
        return [m for m in self._scan.metrics if m not in LOSS_METRICS]

    def _default_scale(self) -> str:
        """'log' for steps over a decade or more whose gaps grow (log-spaced: Pythia's, the demo run's), else 'linear'."""
        p = [s for s in self._scan.steps if s > 0]
        if not p or p[-1] / p[0] < LOG_SPAN:
            return "linear"
        return "log" if len(p) < 3 or p[-1] - p[-2] >= 4 * (p[1] - p[0]) else "linear"

    def _input_changed(self, name: str) -> None:
        if name in ("layer", "head"):
            self._auto_head = False  # the user's choice stays

    def _pick_head(self) -> None:
        """Select the head with the largest value of `metric` at the last step scanned (heads of a composition: readers)."""
        scan, metric = self._scan, self.metric
        done = torch.nonzero(scan.done).flatten()
        if not done.numel():
            return
        values = scan.values[metric][int(done[-1])]
        if metric in COMPOSITION_METRICS:  # a reader's strongest input
            values = values.nan_to_num(-math.inf).amax(dim=(0, 1))
        values = values.nan_to_num(-math.inf)
        if not bool(torch.isfinite(values).any()):
            return
        flat = int(values.flatten().argmax())
        self._set(layer=scan.layers[flat // scan.n_heads], head=flat % scan.n_heads)

    # ----- checks of the controls (see CircuitWidget) --------------------------------------------
    def _check_layer(self, value: int) -> int:
        if value not in self._scan.layers:
            raise ValueError(f"layer={value} is out of range: the scan has attention layers {list(self._scan.layers)}")
        return value

    def _check_head(self, value: int) -> int:
        if not 0 <= value < self._scan.n_heads:
            raise ValueError(f"head={value} is out of range: the scan has heads 0..{self._scan.n_heads - 1}")
        return value

    def _check_metric(self, value: str) -> str:
        drawn = self._drawable()
        if value not in drawn:
            raise ValueError(f"metric={value!r} is not a head metric of this scan: {drawn}")
        return value

    def _check_step(self, value: int) -> int:
        steps = self._scan.steps
        if value not in steps:
            raise ValueError(f"step={value} is not a checkpoint {self._scan.unit}; the nearest are {along.around(steps, value)}")
        return value

    def _check_scan_state(self, value: str) -> str:
        scan = self._scan
        if value == "done" and not scan.complete:
            raise ValueError(
                f"scan_state='done': the scan is not complete ({scan.n_done} of {scan.n_steps} checkpoints); "
                "set 'running' to continue it"
            )
        if value != "done" and scan.complete:
            raise ValueError(f"scan_state={value!r}: the scan is complete (every checkpoint scanned), nothing to run or stop")
        if value == "running" and self._checkpoints is None:
            raise ValueError("scan_state='running': this scan was given without its checkpoints; nothing to scan with")
        return value

    # ----- the scan ------------------------------------------------------------------------------
    def _scan_rest(self, progress: Any, stop: Any) -> CheckpointScan:
        scan = self._scan
        return along.scan_checkpoints(self._checkpoints, self._tokens, scan.metrics, progress=progress, resume=scan, stop=stop)

    def _scan_total(self) -> int:
        return self._scan.n_steps

    def _scan_ended(self) -> None:
        if self._auto_head:
            self._pick_head()
        self._show_scan()

    def wait(self, timeout: float | None = None) -> Training:
        """Block until the background scan has finished (or stopped) and show it; returns the widget.

        Example:
            >>> import asyncio, circuitwidgets as cw
            >>> ck = cw.Checkpoints([cw.demo.boot(seed=1), cw.demo_model()], steps=[0, 6000])
            >>> async def cell():  # in a notebook the kernel's loop is running, as here
            ...     w = cw.Training(ck, metrics=["induction"])
            ...     return w.wait().scan_state
            >>> asyncio.run(cell())
            'done'
        """
        self._wait_scan(timeout)
        return self

    def _show_scan(self) -> None:
        """Show the scan as far as it has got."""
        if self._closed:
            return
        self._sent_for.clear()
        self._set(progress=self._progress(running=self._job is not None))
        self._request_refresh()

    def _progress(self, running: bool = False) -> dict[str, Any]:
        done, total = self._scan.n_done, self._scan.n_steps
        return {"done": done, "total": total, "text": f"checkpoints {done} of {total}", "running": running}

    # ----- payloads ------------------------------------------------------------------------------
    def _window(self, metric: str, heads: Any = None) -> list[int] | None:
        try:
            start, end = self._scan.phase_change(metric, heads)
        except ValueError:  # fewer than two checkpoints scanned, or no change at all
            return None
        return [start, end]

    def _curves_payload(self) -> dict[str, Any]:
        scan, metric = self._scan, self.metric
        values = scan.values[metric]
        into = None
        heads = None
        if metric in COMPOSITION_METRICS:
            row = scan.layers.index(self.layer)
            into = [self.layer, self.head]
            values = values[:, :, :, row, self.head]  # every writer into the selected head
            heads = [((layer, h), (self.layer, self.head)) for layer in scan.layers[:row] for h in range(scan.n_heads)]
        finite = values[torch.isfinite(values)]
        lo = min(0.0, float(finite.min())) if finite.numel() else 0.0
        hi = max(0.0, float(finite.max())) if finite.numel() else 1.0
        drawn = self._drawable()
        return self.payload_float32(
            values.float(),
            steps=list(scan.steps),
            unit=scan.unit,
            metric=metric,
            label=_label(metric),
            description=_definition(metric),
            metrics=drawn,
            labels={m: _label(m) for m in drawn},
            layers=list(scan.layers),
            n_heads=scan.n_heads,
            done=[bool(d) for d in scan.done.tolist()],
            window=self._window(metric, heads) if heads != [] else None,
            into=into,
            range=[lo, hi if hi > lo else lo + 1.0],
        )

    def _losses_payload(self) -> dict[str, Any]:
        scan = self._scan
        names = [m for m in scan.metrics if m in LOSS_METRICS]
        if not names:
            return self.empty_payload(names=[], note="no loss scanned")
        stack = torch.stack([scan.values[m] for m in names]).float()
        windows = {m: self._window(m) for m in names}
        return self.payload_float32(
            stack,
            names=names,
            labels={m: _label(m) for m in names},
            descriptions={m: scan.notes.get(m, "") for m in names},
            windows=windows,
            steps=list(scan.steps),
        )

    def _refresh(self) -> None:
        scan = self._scan
        into = (self.layer, self.head) if self.metric in COMPOSITION_METRICS else None
        if self._inputs_changed("curves", self.metric, into, scan.n_done):
            self.curves = self._curves_payload()
        if self._inputs_changed("losses", scan.n_done):
            self.losses = self._losses_payload()
        self.progress = self._progress(running=self._job is not None)

    # ----- links ---------------------------------------------------------------------------------
    def link(self, target: Any) -> list[Any]:
        """Keep `target` in step with the training view: its head both ways, and the selected step's model.

        `target` is an `AttentionPattern`, `CompositionDiagram`, `OVCircuit`, `QKCircuit`, `HeadScores`, any other
        widget on a model of these checkpoints, or a `Dashboard` (every child follows). It gets the selected step's
        model now (``use_model``, with the note "step N of the training run") and again at every step selected (the
        latest step wins when steps are played quickly); layer and head are linked both ways (``traitlets.link`` in the
        kernel, ``ipywidgets.jslink`` in the browser). Returns the links made (also in ``links``; closing the training
        view undoes them).
        """
        if self._checkpoints is None:
            raise ValueError("this Training widget has no checkpoints (a scan alone): linked views need each step's model")
        hub = target.attention if isinstance(target, Dashboard) else target
        if hub is self:
            raise ValueError("a Training widget cannot be linked to itself")
        if not isinstance(hub, CircuitWidget) or not hub.needs_model:
            raise TypeError(f"target must be a circuitwidgets widget on a model, or a Dashboard; got {type(target).__name__}")
        view = hub.mv
        if (tuple(view.attn_layers), view.n_heads) != (self._scan.layers, self._scan.n_heads):
            raise ValueError(
                f"target's model has another shape than the checkpoints: attention layers {list(view.attn_layers)} x "
                f"{view.n_heads} heads, not {list(self._scan.layers)} x {self._scan.n_heads}"
            )
        follow = _StepFollow(self, target)  # (first: the target gets this step's model before the head links sync)
        made: list[Any] = [traitlets.link((self, name), (hub, name)) for name in ("layer", "head")]
        made += [ipywidgets.jslink((self, name), (hub, name)) for name in ("layer", "head")]
        made.append(follow)
        self.links += made
        return made

    # ----- export and closing --------------------------------------------------------------------
    def _prepare_export(self) -> None:
        super()._prepare_export()
        if self._job is not None:
            self._show_scan()

    def close(self) -> None:
        """Close the widget: a background scan stops before its next checkpoint; the links are undone."""
        for link in getattr(self, "links", []):
            if isinstance(link, ipywidgets.Widget):
                link.close()
            else:
                link.unlink()
        self.links = []
        super().close()
