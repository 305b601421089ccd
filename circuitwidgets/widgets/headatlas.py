"""`HeadAtlas`: what every head does across a list of texts (a `HeadScan`), one click from its examples.

A scatter of every head on two dataset-wide metrics (or a layer x head grid), coloured by a third;
the selected head's examples, one text per decile of its per-text metric, as token strips coloured
by its attention; a click on an example opens that text in a linked `AttentionPattern` or `Dashboard`
(`HeadAtlas.link`). The scan itself is `circuitwidgets.analysis.scan_heads`; in a notebook it runs on
the background worker (`_background`) while the widget shows the points filling in.
"""

from __future__ import annotations

from typing import Any

import ipywidgets
import torch
import traitlets

from .. import transport
from ..analysis import head_scan
from ..analysis.head_scan import DESCRIPTIONS, LABELS, SCAN_METRICS, HeadScan
from . import _cache
from ._color import color_scale_trait
from ._loop import running_loop
from ._scanning import ScanningWidget
from .base import CircuitWidget
from .dashboard import Dashboard

#: Metrics that are shares of attention: drawn on a fixed 0..1 axis and colour scale (the others on their data's range).
SHARE_METRICS = ("previous_token", "first_token", "duplicate_token", "induction", "self")
#: Metrics on a signed scale (drawn diverging, 0 neutral).
SIGNED_RANGES = {"ov_copying": (-1.0, 1.0)}
SCAN_STATES = ("running", "stopped", "done")


def count(n: int) -> str:
    """`n` with its thousands apart: ``count(1000) == "1 000"`` (a narrow no-break space)."""
    return f"{n:,}".replace(",", "\u202f")


def decile_label(decile: int) -> str:
    """``"90–100 %"`` for decile 9."""
    return f"{10 * decile}–{10 * decile + 10} %"


class _Follow:
    """Pushes a HeadAtlas's ``example_tokens`` (when not empty) to a widget's ``tokens``, and the example's
    destination to its ``selection`` when it has one (an `AttentionPattern` then shows that row)."""

    def __init__(self, atlas: HeadAtlas, target: CircuitWidget) -> None:
        self.atlas, self.target = atlas, target
        atlas.observe(self._tokens, names="example_tokens")
        atlas.observe(self._example, names="example")
        self._tokens({"new": atlas.example_tokens})
        self._example({"new": atlas.example})

    def _tokens(self, change: dict) -> None:
        if change["new"] and list(self.target.tokens) != list(change["new"]):
            self.target.tokens = list(change["new"])

    def _example(self, change: dict) -> None:
        example = change["new"]
        if example and "selection" in self.target.trait_names() and list(self.target.tokens) == list(self.atlas.example_tokens):
            self.target.selection = {"query": example[1], "key": None, "locked": True}

    def unlink(self) -> None:
        self.atlas.unobserve(self._tokens, names="example_tokens")
        self.atlas.unobserve(self._example, names="example")


class HeadAtlas(ScanningWidget, view="headatlas"):
    """What every head does across a list of texts: a scatter of every head on two metrics, its examples.

    Each point is one head at its mean ``x_metric`` and ``y_metric`` over the texts (`HeadScan.mean`),
    coloured by ``color_metric`` (or, with ``mode="grid"``, a layer x head grid coloured by it); hover
    a point for its values, click it to select the head. Below, the selected head's examples: one text
    per decile of its per-text ``example_metric`` (`HeadScan.deciles`), each a token strip coloured by
    the head's attention from the text's strongest destination (outlined); hover a token to see its
    own attention row; click an example to set ``example`` (and ``example_tokens``, which a linked
    `AttentionPattern` or `Dashboard` shows: `link`). The metrics are `scan_heads`'s.

    Give either `texts` (scanned by the widget) or a `scan` made before (e.g. ``HeadScan.load(path)``,
    drawn at once: the model only runs for the examples). In a notebook the scan runs in the background:
    the widget shows at once, with a progress bar and a Stop button, and the points fill in as batches
    finish; Stop (``scan_state = "stopped"``) leaves a partial scan that Resume (``"running"``)
    continues. In a script, or with ``defer=False``, the scan runs before the constructor returns.
    `save_html` keeps the scan (as far as it has got: the page says how far) and the selected head's examples.

    Args:
        model: any model the widgets take (TransformerLens, Hugging Face, nnsight).
        texts: a list of strings (tokenised with BOS) or token ids (``[n, seq]`` or a list of lists).
        scan: a `HeadScan` of this model, in place of `texts`.
        metrics: the metrics scanned (with `texts`) or shown (with `scan`: a subset of its metrics);
            default: all of `SCAN_METRICS` (those the scan has).
        x_metric, y_metric, color_metric: the scatter's axes and colour (a default the metrics lack
            falls back to one they have).
        mode: "scatter" or "grid".
        max_tokens, batch_size: as in `scan_heads`.
        layer, head: the head selected (default: the first attention layer, head 0).
        defer: in a notebook, scan in the background (True) or before returning (False).

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> texts = cw.analysis.repeated_random_tokens(model, seq_len=10, batch=8)
        >>> atlas = cw.HeadAtlas(model, texts, layer=1, head=0)
        >>> atlas.scan["shape"], atlas.scan_state, len(atlas.examples["items"])  # one example per text (8 texts)
        ([8, 2, 4], 'done', 8)
        >>> pattern = cw.AttentionPattern(model, prompt="abcabc")
        >>> links = atlas.link(pattern)
        >>> (pattern.layer, pattern.head)
        (1, 0)
        >>> item = atlas.examples["items"][0]
        >>> atlas.example = [item["text"], item["dest"]]
        >>> pattern.tokens == atlas.example_tokens == atlas.head_scan.tokens_of(item["text"])
        True
    """

    SCAN_UNIT = "texts"
    controls = ("x_metric", "y_metric", "color_metric", "mode", "example_metric", "example", "scan_state", "color_scale")
    inputs = ("layer", "head", "example_metric", "color_scale")

    x_metric = traitlets.Unicode(help="the metric on the scatter's x axis (one of scan['metrics'])").tag(sync=True)
    y_metric = traitlets.Unicode(help="the metric on the scatter's y axis (one of scan['metrics'])").tag(sync=True)
    color_metric = traitlets.Unicode(help="the metric that colours the points and the grid").tag(sync=True)
    mode = traitlets.Enum(("scatter", "grid"), "scatter", help="a scatter of every head, or a layer x head grid").tag(sync=True)
    example_metric = traitlets.Unicode(
        help="the pattern metric whose per-text deciles the examples show (default: y_metric when it is one)"
    ).tag(sync=True)
    example = traitlets.List(
        traitlets.Int(), help="the example clicked, [text_index, destination], or [] for none"
    ).tag(sync=True)
    color_scale = color_scale_trait()
    scan_state = traitlets.Enum(
        SCAN_STATES, "done", help="'running' while scanning, 'stopped' (a partial scan: set 'running' to resume it), "
        "'done'; set 'stopped' to stop within one batch"
    ).tag(sync=True)
    scan = traitlets.Dict(
        help="payload (circuitwidgets.transport) of float32 per-head means [n_metrics, n_attn_layers, n_heads], with "
        "metrics, pattern_metrics (those with examples), labels, descriptions, metric_ranges {metric: [lo, hi]} (axis and "
        "colour ranges), layers, n_heads, done and total (texts)"
    ).tag(sync=True)
    progress = traitlets.Dict(help="the scan's progress: {done, total, text, running}").tag(sync=True)
    examples = traitlets.Dict(
        help="payload of uint8 attention patterns [n_examples, n, n] (lower triangle, zero-padded) of the selected head "
        "on one text per decile of example_metric, with layer, head, metric, items [{decile, text, dest, value, length}], "
        "tokens (each text's token strings) and scanned (texts the deciles came from)"
    ).tag(sync=True)
    example_tokens = traitlets.List(
        traitlets.Int(), help="token ids of the text of `example`, as scanned ([] for none): what a linked view shows"
    ).tag(sync=True)

    def __init__(
        self,
        model: Any,
        texts: Any = None,
        *,
        scan: HeadScan | None = None,
        metrics: Any = SCAN_METRICS,
        x_metric: str = "previous_token",
        y_metric: str = "induction",
        color_metric: str = "first_token",
        mode: str = "scatter",
        max_tokens: int = 512,
        batch_size: int | None = None,
        layer: int | None = None,
        head: int = 0,
        defer: bool = True,
        **kwargs: Any,
    ) -> None:
        self._check_keywords(kwargs)  # (a mistyped keyword first: it may be why texts or scan look missing)
        if isinstance(scan, dict):  # e.g. another atlas's `scan` trait: the payload, not a HeadScan
            raise TypeError("HeadAtlas() got 'scan', which the widget computes: it cannot be passed; pass a HeadScan "
                            "(made by scan_heads or HeadScan.load) as scan=")
        if texts is not None and scan is not None:
            raise ValueError("pass either texts= (a list of texts or token ids, scanned by the widget) or scan= (a HeadScan, "
                             "e.g. HeadScan.load(path)), not both")
        if texts is None and scan is None:
            raise ValueError("pass texts= (a list of texts or token ids to scan) or scan= (a HeadScan made by scan_heads)")
        if not isinstance(defer, bool):
            raise TypeError(f"defer must be a bool; got {defer!r}")
        if scan is not None and not isinstance(scan, HeadScan):
            raise TypeError(f"scan must be a HeadScan (made by scan_heads or HeadScan.load); got {type(scan).__name__}")
        late: dict[str, Any] = {name: kwargs.pop(name) for name in ("example_metric", "example", "scan_state") if name in kwargs}
        self._texts = texts
        self._batch_size = batch_size
        self.links: list[Any] = []
        super().__init__(model, head=head, mode=mode, **kwargs)
        loop = running_loop() if defer else None
        try:
            self._set_up(texts, scan, metrics, x_metric, y_metric, color_metric, max_tokens, layer, late)
            wanted = late.get("scan_state", "running" if texts is not None else "stopped")  # (a scan given waits for Resume)
            scanning = not self._scan.complete and wanted == "running"
            if scanning and loop is None:
                self._scan_now()
        except Exception:
            self.close()
            raise
        self._start(defer)
        self._start_scan(loop if scanning else None)

    def _set_up(
        self, texts: Any, scan: HeadScan | None, metrics: Any, x_metric: str, y_metric: str, color_metric: str,
        max_tokens: int, layer: int | None, late: dict[str, Any],
    ) -> None:
        """The scan (empty, for texts), the metrics shown, the selected head and the controls given (checked)."""
        mv = self.mv
        if scan is None:  # checks texts, metrics, max_tokens and batch_size; scans nothing yet
            scan = head_scan.scan_heads(
                self._model, texts, metrics, max_tokens=max_tokens, batch_size=self._batch_size, progress=False,
                stop=lambda: True,
            )
            shown = scan.all_metrics
        else:
            shown = scan.all_metrics if metrics is SCAN_METRICS else self._subset(metrics, scan)
            self._check_scan(scan, mv)
        self._scan = scan
        self._metrics: tuple[str, ...] = tuple(shown)
        with self._quietly():
            self.x_metric = self._pick("x_metric", x_metric, "previous_token", 0)
            self.y_metric = self._pick("y_metric", y_metric, "induction", 1)
            self.color_metric = self._pick("color_metric", color_metric, "first_token", 2)
            patterns = [m for m in self._metrics if m in scan.metrics]
            self.example_metric = self.y_metric if self.y_metric in patterns else (patterns[0] if patterns else "")
            self.scan_state = "done" if scan.complete else "stopped"
        self.layer = mv.attn_layers[0] if layer is None else layer
        for name, value in late.items():  # (checked against the scan, which they need)
            setattr(self, name, value)
        self._set(progress=self._progress())

    # ----- construction checks ------------------------------------------------------------------
    @staticmethod
    def _subset(metrics: Any, scan: HeadScan) -> tuple[str, ...]:
        if isinstance(metrics, str):
            metrics = [metrics]
        try:
            metrics = list(metrics)
        except TypeError:
            raise TypeError(f"metrics must be a list of metric names; got {type(metrics).__name__}") from None
        if not metrics:
            raise ValueError(f"metrics must name at least one of the scan's metrics {list(scan.all_metrics)}")
        for metric in metrics:
            if metric not in scan.all_metrics:
                raise ValueError(f"metrics holds {metric!r}, which the scan lacks; it has {list(scan.all_metrics)}")
        if len(set(metrics)) != len(metrics):
            raise ValueError(f"metrics must not repeat a metric; got {metrics}")
        return tuple(metrics)

    @staticmethod
    def _check_scan(scan: HeadScan, mv: Any) -> None:
        if tuple(scan.layers) != tuple(mv.attn_layers) or scan.n_heads != mv.n_heads:
            raise ValueError(
                f"scan is of another model: attention layers {list(scan.layers)} x {scan.n_heads} heads; this model has "
                f"{list(mv.attn_layers)} x {mv.n_heads}"
            )
        if scan.token_ids.numel() and int(scan.token_ids.max()) >= mv.d_vocab:
            raise ValueError(f"scan holds token id {int(scan.token_ids.max())}, outside this model's vocabulary ({mv.d_vocab})")

    def _pick(self, name: str, value: Any, default: str, fallback: int) -> str:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str (a metric name); got {type(value).__name__}")
        if value in self._metrics:
            return value
        if value == default:  # the default, on a scan without it: another metric
            return self._metrics[min(fallback, len(self._metrics) - 1)]
        raise ValueError(f"{name}={value!r} is not a metric of this scan: {list(self._metrics)}")

    # ----- checks of the controls (see CircuitWidget) ------------------------------------------
    def _metric(self, name: str, value: str) -> str:
        if value not in self._metrics:
            raise ValueError(f"{name}={value!r} is not a metric of this scan: {list(self._metrics)}")
        return value

    def _check_x_metric(self, value: str) -> str:
        return self._metric("x_metric", value)

    def _check_y_metric(self, value: str) -> str:
        return self._metric("y_metric", value)

    def _check_color_metric(self, value: str) -> str:
        return self._metric("color_metric", value)

    def _check_example_metric(self, value: str) -> str:
        patterns = [m for m in self._metrics if m in self._scan.metrics]
        if value not in patterns:
            weight = " (a weight metric: one value per head, no texts)" if value in self._metrics else ""
            raise ValueError(f"example_metric={value!r}{weight} must be one of the scan's pattern metrics {patterns}")
        return value

    def _check_example(self, value: list[int]) -> list[int]:
        if not value:
            return []
        if len(value) != 2:
            raise ValueError(f"example must be [text_index, destination] or []; got {len(value)} numbers")
        text, dest = value
        if not 0 <= text < self._scan.n_texts:
            raise ValueError(f"example text {text} is out of range: 0..{self._scan.n_texts - 1}")
        length = int(self._scan.offsets[text + 1] - self._scan.offsets[text])
        if not 0 <= dest < length:
            raise ValueError(f"example destination {dest} is out of range: text {text} has positions 0..{length - 1}")
        return [text, dest]

    def _check_scan_state(self, value: str) -> str:
        scan = self._scan
        if value == "done" and not scan.complete:
            raise ValueError(
                f"scan_state='done': the scan is not complete ({scan.n_done} of {scan.n_texts} texts); "
                "set 'running' to continue it"
            )
        if value != "done" and scan.complete:
            raise ValueError(f"scan_state={value!r}: the scan is complete (every text scanned), nothing to run or stop")
        return value

    # ----- the scan -------------------------------------------------------------------------------
    @property
    def head_scan(self) -> HeadScan:
        """The `HeadScan` shown (filled in place while scanning; ``head_scan.save(path)`` keeps it)."""
        return self._scan

    def _scan_texts(self) -> Any:
        scan = self._scan
        return self._texts if self._texts is not None else [scan.tokens_of(i) for i in range(scan.n_texts)]

    def _scan_kwargs(self) -> dict[str, Any]:
        scan = self._scan
        return {"max_tokens": scan.max_tokens, "batch_size": self._batch_size, "resume": scan}

    def _scan_rest(self, progress: Any, stop: Any) -> HeadScan:
        scan = self._scan
        return head_scan.scan_heads(self._model, self._scan_texts(), scan.all_metrics, progress=progress, stop=stop,
                                    **self._scan_kwargs())

    def _scan_total(self) -> int:
        return self._scan.n_texts

    def _scan_snapshot(self) -> tuple:
        return self._means(), self._scan.n_done

    def _scan_ended(self) -> None:
        self._show_scan(*self._scan_snapshot())
        self._request_refresh()  # the examples, from the texts scanned by now

    def wait(self, timeout: float | None = None) -> HeadAtlas:
        """Block until the background scan has finished (or stopped) and show it; returns the widget.

        Example:
            >>> import asyncio, circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> async def cell():  # in a notebook the kernel's loop is running, as here
            ...     atlas = cw.HeadAtlas(model, cw.analysis.repeated_random_tokens(model, 8, 6))
            ...     return atlas.wait().scan_state
            >>> asyncio.run(cell())
            'done'
        """
        self._wait_scan(timeout)
        return self

    # ----- payloads -------------------------------------------------------------------------------
    def _means(self) -> torch.Tensor:
        return torch.stack([self._scan.mean(m).float() for m in self._metrics])

    def _progress(self, running: bool = False, done: int | None = None) -> dict[str, Any]:
        done, total = self._scan.n_done if done is None else done, self._scan.n_texts
        return {"done": done, "total": total, "text": f"texts {count(done)} of {count(total)}", "running": running}

    def _scan_payload(self, means: torch.Tensor, done: int) -> dict[str, Any]:
        ranges = {}
        for i, metric in enumerate(self._metrics):
            if metric in SHARE_METRICS:
                ranges[metric] = [0.0, 1.0]
            elif metric in SIGNED_RANGES:
                ranges[metric] = list(SIGNED_RANGES[metric])
            else:
                finite = means[i][torch.isfinite(means[i])]
                top = float(finite.max()) if finite.numel() else 0.0
                ranges[metric] = [min(0.0, float(finite.min()) if finite.numel() else 0.0), top if top > 0 else 1.0]
        return self.payload_float32(
            means,
            metrics=list(self._metrics),
            pattern_metrics=[m for m in self._metrics if m in self._scan.metrics],
            labels={m: LABELS.get(m, m) for m in self._metrics},
            descriptions={m: DESCRIPTIONS.get(m, "") for m in self._metrics},
            metric_ranges=ranges,
            layers=list(self._scan.layers),
            n_heads=self._scan.n_heads,
            done=done,
            total=self._scan.n_texts,
        )

    def _show_scan(self, means: torch.Tensor, done: int) -> None:
        """Show `means` of `done` texts (a job's report runs only while the job does: a late one never undoes a later)."""
        if self._closed:
            return
        self._sent_for.pop("scan", None)
        self._set(scan=self._scan_payload(means, done), progress=self._progress(running=self._job is not None, done=done))
        if done and not self.examples.get("items") and self.examples.get("scanned") == 0:  # the first texts are in
            self._request_refresh()

    def _examples_payload(self) -> dict[str, Any]:
        layer, head, metric, scan = self.layer, self.head, self.example_metric, self._scan
        fields = {"layer": layer, "head": head, "metric": metric, "scanned": scan.n_done}
        if not metric:
            return self.empty_payload(**fields, items=[], tokens=[], note="the scan has no pattern metric: no examples")
        picks = [p for p in scan.deciles(layer, head, metric) if p[2] >= 0]
        if not picks:
            why = "no text scanned yet" if not scan.n_done else f"no text scanned has a {LABELS.get(metric, metric)} value"
            return self.empty_payload(**fields, items=[], tokens=[], note=f"{why}: no examples")
        ids = [scan.tokens_of(text) for _, text, _, _ in picks]
        n = max(len(t) for t in ids)
        stack = torch.zeros(len(picks), n, n)
        for i, tokens in enumerate(ids):
            stack[i, : len(tokens), : len(tokens)] = _cache.layer_patterns(self.mv, tuple(tokens), layer, (layer,))[head]
        items = [
            {"decile": decile, "text": text, "dest": dest, "value": value, "length": len(tokens)}
            for (decile, text, dest, value), tokens in zip(picks, ids, strict=True)
        ]
        strings = [self.mv.token_strings(tokens) for tokens in ids]
        drawn, scale = transport.scaled(stack, self.color_scale, n)  # (relative: a row sees itself and those before)
        return self.payload_uint8(drawn, layout="tril", compress=True, **fields, items=items, tokens=strings, scale=scale)

    def _refresh(self) -> None:
        scan = self._scan
        if self._inputs_changed("scan", scan.n_done, self._metrics):
            done = scan.n_done  # (read once: a background scan may move on meanwhile)
            self.scan = self._scan_payload(self._means(), done)
            self.progress = self._progress(running=self._job is not None, done=done)
        if self._inputs_changed("examples", self.layer, self.head, self.example_metric, scan.n_done, self.color_scale):
            self.examples = self._examples_payload()

    @traitlets.observe("example")
    def _on_example(self, change: dict) -> None:
        example = change["new"]
        self._set(example_tokens=self._scan.tokens_of(example[0]) if example else [])

    # ----- links ----------------------------------------------------------------------------------
    def link(self, target: Any) -> list[Any]:
        """Keep `target` in step with the atlas: layer and head both ways, and the example's text.

        `target` is an `AttentionPattern`, a `Dashboard` (linked through its ``attention``, which its other
        views follow), or any widget with ``layer`` and ``head`` on the same model. The atlas's head is
        given to `target` now; from then on selecting a head in either selects it in the other
        (``traitlets.link`` in the kernel, ``ipywidgets.jslink`` in the browser), and clicking an example
        (``example``) shows its text in `target` (its ``tokens``, when it has them; never an empty list),
        with the example's destination selected in an `AttentionPattern`.

        Returns the links made: two ``traitlets.link`` (layer, head), two ``ipywidgets.jslink`` and, when
        `target` has ``tokens``, one that follows ``example_tokens`` (``unlink()`` each, or ``close()``
        the jslinks, to undo; closing the atlas undoes them all). They are also kept in ``links``.

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> atlas = cw.HeadAtlas(model, cw.analysis.repeated_random_tokens(model, 8, 4))
            >>> dash = cw.Dashboard(model, prompt="abcabc", circuits=False)
            >>> len(atlas.link(dash))
            5
            >>> atlas.head = 3
            >>> dash.attention.head, dash.head_scores.head
            (3, 3)
        """
        hub = target.attention if isinstance(target, Dashboard) else target
        if not isinstance(hub, CircuitWidget):
            raise TypeError(
                f"target must be an AttentionPattern, a Dashboard or another circuitwidgets widget; got {type(target).__name__}"
            )
        if hub is self:
            raise ValueError("an atlas cannot be linked to itself")
        if hub.needs_model:
            try:
                self._check_scan(self._scan, hub.mv)
            except ValueError as exc:
                raise ValueError(f"target shows another model than the atlas: {exc}") from None
        made: list[Any] = [traitlets.link((self, name), (hub, name)) for name in ("layer", "head")]
        made += [ipywidgets.jslink((self, name), (hub, name)) for name in ("layer", "head")]
        if "tokens" in hub.trait_names():
            made.append(_Follow(self, hub))
        self.links += made
        return made

    # ----- export and closing ---------------------------------------------------------------------
    def _prepare_export(self) -> None:
        super()._prepare_export()
        if self._job is not None:  # the texts scanned by now
            self._show_scan(*self._scan_snapshot())

    def close(self) -> None:
        """Close the widget: a background scan stops before its next batch; the links are undone."""
        for link in getattr(self, "links", []):
            if isinstance(link, ipywidgets.Widget):  # a jslink
                link.close()
            else:
                link.unlink()
        self.links = []
        super().close()
