"""`Dashboard`: head scores, composition, attention patterns (and OV/QK circuits), linked by traits."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets
import traitlets

from .. import analysis
from ..ablation import METHODS, Ablated
from ..model import checked, with_trace_options
from ._views import current_view
from .attention import AttentionPattern
from .attribution import LogitAttribution
from .base import CircuitWidget
from .composition import CompositionDiagram
from .feature_attention import FeatureAttention, for_dashboard
from .headscores import SCORE_KINDS, HeadScores
from .ov import OVCircuit
from .qk import QKCircuit

_CURRENT: Any = object()  # (AblationToggle.holder: the reference held)


class AblationToggle(CircuitWidget):
    """A Dashboard's ablation controls: ablate or restore the selected head, clear all, the method.

    Not a widget of its own (it drives a `Dashboard`'s children: see ``Dashboard(ablated=...)``).
    A bad head or a method without its reference tokens is refused with its message shown here.

    Example:
        >>> import circuitwidgets as cw
        >>> d = cw.Dashboard(cw.demo_model(), prompt="abcabc", ablated=[])
        >>> d.ablation.ablated = [[1, 2], [1, 0]]
        >>> d.ablation.status["label"], d.attention.model_note
        ('L1H0, L1H2 zero-ablated', 'L1H0, L1H2 zero-ablated')
    """

    view_name = "ablationtoggle"  # (set here, not through view=: no `cw.AblationToggle`, a Dashboard part)
    controls = ("ablated", "ablation_method")
    needs = {"ablated": "hooks", "ablation_method": "hooks"}  # (greyed, with the reason, where the runs have no hooks)
    inputs = ("ablated", "ablation_method")

    ablated = traitlets.List(
        traitlets.List(traitlets.Int()), help="the ablated heads, [[layer, head], ...] (sorted, each once)"
    ).tag(sync=True)
    ablation_method = traitlets.Enum(
        METHODS, "zero", help="how a head is ablated: 'zero', or 'mean' / 'resample' over the Dashboard's "
        "ablation_reference tokens"
    ).tag(sync=True)
    status = traitlets.Dict(help="what is ablated: {label, heads, method, reference (its shape, or None)}").tag(sync=True)

    def __init__(
        self, model: Any, *, ablated: Any = (), ablation_method: str = "zero", reference: Any = None,
        apply: Callable[[Ablated | None], None] | None = None, **kwargs: Any,
    ) -> None:
        self.reference = reference
        self._apply = apply
        super().__init__(model, **kwargs)
        with self._quietly():  # checked by the Dashboard already (or checked here, from Python)
            self.ablated, self.ablation_method = self._check_ablated(list(ablated)), ablation_method
        self._start()

    def holder(self, heads: Any = None, method: str | None = None, reference: Any = _CURRENT) -> Ablated | None:
        """The model with `heads` ablated by `method` over `reference` (default: the current ones), or None for no head."""
        heads = self.ablated if heads is None else heads
        method = self.ablation_method if method is None else method
        reference = self.reference if reference is _CURRENT else reference
        if method not in METHODS:
            raise ValueError(f"ablation_method must be one of {METHODS}; got {method!r}")
        if method != "zero" and reference is None:
            raise ValueError(
                f"{method} ablation needs ablation_reference= tokens (a batch of prompts, e.g. "
                "cw.analysis.repeated_random_tokens(model, 20, 16)); zero ablation needs none"
            )
        view = self.mv
        with checked(view):  # (the view this action checked already: not read again)
            held = analysis.ablated(view, list(heads), method, reference)
        return held if held.heads else None

    def _check_ablated(self, value: list) -> list[list[int]]:
        held = self.holder(value)
        return [] if held is None else [list(pair) for pair in held.heads]

    def _check_ablation_method(self, value: str) -> str:
        self.holder(method=value)
        return value

    def _refresh(self) -> None:
        held = self.holder()
        reference = None if self.reference is None else list(self.mv.check_tokens(self.reference).shape)
        self.status = {
            "label": "" if held is None else held.label,
            "heads": [] if held is None else [list(pair) for pair in held.heads],
            "method": self.ablation_method,
            "reference": reference,
        }
        if self._apply is not None:
            self._apply(held)


#: The first glance's columns (head scores | attention pattern | composition over logit attribution):
#: they fit a 1 400 x 900 screen in JupyterLab (its file browser open), marimo and an exported page.
#: The attention pattern's column holds its smallest picture (200 px and its labels).
FIRST_GLANCE_COLUMNS = "minmax(240px, 0.8fr) minmax(390px, 1.2fr) minmax(300px, 1.05fr)"
#: The title of the folded row under the first glance.
CIRCUITS_TITLE = "OV and QK circuits of the selected head"


def _side_by_side(children: list[Any]) -> ipywidgets.GridBox:
    """A row: side by side when the output area is at least 864 px wide (a 1 280 px window), one column below."""
    columns = "repeat(auto-fit, minmax(min(100%, 420px), 1fr))"
    layout = ipywidgets.Layout(grid_template_columns=columns, grid_gap="24px", align_items="flex-start", width="100%")
    return ipywidgets.GridBox(children, layout=layout)


def _fractions(columns: str) -> list[float] | None:
    """The ``fr`` of each column of a CSS grid template of fixed columns (``"1fr minmax(0, 2fr)"``), else None.

    Example:
        >>> _fractions(FIRST_GLANCE_COLUMNS), _fractions("repeat(auto-fit, minmax(420px, 1fr))")
        ([0.8, 1.2, 1.05], None)
    """
    if "repeat(" in columns:
        return None
    found = re.findall(r"(\d+(?:\.\d+)?)fr", columns)
    return [float(f) for f in found] or None


class Dashboard(ipywidgets.VBox):
    """The circuit widgets of one model side by side, kept in step by ordinary trait links.

    Holds a `HeadScores`, a `CompositionDiagram`, an `AttentionPattern`, a `LogitAttribution`
    (unless ``attribution=False``), an `OVCircuit` and a `QKCircuit` (the last two unless
    ``circuits=False``). Every child's ``layer`` and ``head`` are linked (``traitlets.link``) to
    the `AttentionPattern`'s, so selecting a head in any of them selects it everywhere; the
    composition diagram and the logit attribution read the attention widget's tokens (``dlink``),
    so selecting a composition edge draws both heads' patterns and their virtual head on the same
    prompt, and the attribution explains the logits of the prompt shown. Nothing here is
    special-case code: ``links`` lists the links, and the same can be built by hand from the
    separate widgets.

    **Layout** (``compact=True``, the default): a first glance that fits a 1 400 x 900 screen, in
    three columns: the head scores, the selected head's attention pattern, and the composition graph
    over the logit attribution's head effects, each drawn compact (the `compact` trait: long captions,
    save buttons and secondary panels behind its "more" button); under it, folded (one click on its
    title), the OV and QK circuits. The same grid shows in JupyterLab, Notebook 7, marimo and the
    exported page. ``compact=False``: every view at full size, in rows.

    **Ablation**: with ``ablated=[(layer, head), ...]`` every child that runs the model (the
    attention patterns, the logit attribution, the pattern kinds of the head scores) shows the model
    with those heads ablated (`circuitwidgets.analysis.ablated`) and says so in its caption
    (``model_note``, e.g. "L1H0, L1H2 zero-ablated"); the weight views (OV, QK, composition, OV
    copying) say that the ablation leaves them unchanged. Passing ``ablated`` (``[]`` for none yet)
    also shows a row of controls on top (``ablation``): ablate or restore the selected head, clear
    all, the method. ``ablated``, ``ablation_method`` and ``ablation_reference`` can be set later too;
    the children switch models and redraw.

    On a big model only the head-score kind shown is computed (see `HeadScores`' ``eager``); the
    others are computed when selected. In a notebook only the attention pattern (a run up to its
    layer) is drawn before the cell returns: the logit attribution, the circuits, the head scores
    and the composition are computed just after (``defer=True``), each drawn as soon as it is done,
    showing a progress note until then. One run of the prompt serves the logit attribution and the
    attention patterns of every layer (a layer switch then runs nothing).

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``, or an nnsight model.
        prompt: text for the attention patterns (needs a tokenizer); or tokens: token ids.
        remote, trace_options: for an nnsight model, passed to every ``model.trace`` (True: NDIF), through
            one `HFView` that every child shares; weight-based children need the weights on this machine.
        layer, head: the head selected at first (default: the first attention layer, head 0).
        kinds: `HeadScores` kinds (default: all). composition: "Q", "K" or "V".
        circuits: include `OVCircuit` and `QKCircuit` (default True).
        attribution: include `LogitAttribution` (default True).
        ablated: heads to ablate, ``[(layer, head), ...]``; None (default) for none and no ablation controls.
        ablation_method: "zero" (default), "mean" or "resample" (`circuitwidgets.analysis.ablated`).
        ablation_reference: token ids ``[batch, seq]`` whose head outputs "mean" and "resample" use
            (a batch at least as long as the prompts run, e.g. ``analysis.repeated_random_tokens``).
        compact: the first glance and the folded circuits (default True); False for every view in full, in rows.
        clean, corrupted, metric, target, baseline_token, positions: the composition diagram's causal edges
            (`CompositionDiagram`: each edge's path-patching effect, shown with its "causal" edge toggle).
        dictionary: a `circuitwidgets.Dictionary` (or SAELens SAE) of the head's input: adds a folded
            `FeatureAttention` ("features") that splits the cell clicked in the attention pattern over its features.

    Attributes:
        head_scores, composition, attention: the child widgets; attribution: the
            `LogitAttribution`, or None with ``attribution=False``; ov, qk: the circuit widgets,
            or None with ``circuits=False``.
        links: the ``traitlets.link`` / ``dlink`` objects (kernel side); js_links: the same
            layer/head links, and the ``color_scale`` links of the views of attention weights (attention
            patterns, composition pair panels, positional QK), as ``ipywidgets.jslink`` (browser side).
            ``unlink()`` both to decouple.
        compact: the layout chosen (a plain bool, fixed at construction).
        ablation: the `AblationToggle` (shown on top when ``ablated`` was passed) holding ``ablated``
            and ``ablation_method``; ablated_model: the `Ablated` model the children run, or None.

    Example:
        >>> import circuitwidgets as cw
        >>> d = cw.Dashboard(cw.demo_model(), prompt="abcabc")
        >>> d.head_scores.head = 2
        >>> d.attention.head, d.composition.head
        (2, 2)
        >>> d.attention.compact, d.ov.compact  # the first glance is compact; the folded circuits are not
        (True, False)
        >>> d.ablated = [(1, 0)]
        >>> d.attention.model_note, d.ov.model_note
        ('L1H0 zero-ablated', 'reads the weights: unaffected by the ablation (L1H0 zero-ablated)')
    """

    def __init__(
        self,
        model: Any,
        prompt: str | None = None,
        *,
        tokens: Any = None,
        layer: int | None = None,
        head: int = 0,
        kinds: Any = SCORE_KINDS,
        composition: str = "K",
        circuits: bool = True,
        attribution: bool = True,
        remote: Any = None,
        trace_options: dict[str, Any] | None = None,
        ablated: Any = None,
        ablation_method: str = "zero",
        ablation_reference: Any = None,
        compact: bool = True,
        clean: Any = None,
        corrupted: Any = None,
        metric: Any = "loss",
        target: Any = None,
        baseline_token: Any = None,
        positions: Any = None,
        dictionary: Any = None,
        **kwargs: Any,
    ) -> None:
        model = with_trace_options(model, remote, trace_options)  # an nnsight model run remotely: its shared HFView
        unknown = sorted(set(kwargs) - set(ipywidgets.VBox.class_trait_names()))
        if unknown:
            raise TypeError(f"Dashboard() got an unexpected keyword argument {unknown[0]!r}")
        view = current_view(model)
        if prompt is None and tokens is None:
            raise ValueError("pass prompt= (text) or tokens= (token ids) for the attention patterns")
        if not isinstance(circuits, bool):
            raise TypeError(f"circuits must be a bool; got {circuits!r}")
        if not isinstance(attribution, bool):
            raise TypeError(f"attribution must be a bool; got {attribution!r}")
        if not isinstance(compact, bool):
            raise TypeError(f"compact must be a bool; got {compact!r}")
        self.compact = compact
        layer = view.attn_layers[0] if layer is None else layer
        self.model = model
        # the ablation first (a bad head is refused before anything runs); the controls hold it
        self.ablation = AblationToggle(
            model, ablated=[] if ablated is None else ablated, ablation_method=ablation_method,
            reference=ablation_reference, layer=layer, head=head, head_controls=False,
        )
        self._applied: tuple | None = None
        self._noted = False
        self.ablated_model: Ablated | None = self.ablation.holder()
        runs = self.ablated_model or model  # what the children that run the model are given
        causal = {"clean": clean, "corrupted": corrupted, "metric": metric, "target": target,
                  "baseline_token": baseline_token, "positions": positions}  # the composition diagram's causal edges
        self._make_children(model, runs, prompt, tokens, layer, head, kinds, composition, circuits, attribution, causal)
        self.features: FeatureAttention | None = None  # (a dictionary given: its folded row, after the circuits)
        if dictionary is not None:
            made = for_dashboard(self.attention, runs, prompt, tokens, layer, head, dictionary)
            self.features, feature_links, feature_row = made
        controls = ablated is not None  # the ablation controls are shown (and follow the selected head)
        self._link_children(controls)
        rows = self._compact_rows() if compact else self._full_rows()
        if self.features is not None:
            self.links += feature_links
            rows.append(feature_row)
        if controls:
            rows.insert(0, self.ablation)
        super().__init__(rows, **kwargs)
        self.add_class("cw-dashboard")
        self._apply(self.ablated_model)  # the notes (the models are in place)
        self.ablation._apply = self._apply  # from now on, the controls switch the children's models

    def _make_children(
        self, model: Any, runs: Any, prompt: str | None, tokens: Any, layer: int, head: int, kinds: Any, composition: str,
        circuits: bool, attribution: bool, causal: dict[str, Any],
    ) -> None:
        """The child widgets: those that run the model get `runs` (the model, or its ablated copy), the others `model`."""
        self.attention = AttentionPattern(runs, prompt, tokens=tokens, layer=layer, head=head)
        if not self.attention.tokens:  # its first picture failed (e.g. reference tokens shorter than the prompt)
            message = self.attention.error
            self.attention.close()
            self.ablation.close()
            raise ValueError(message)
        # In a kernel the other children compute just after the cell returns, one after the other in
        # this order, each drawn as soon as it is done: the attention pattern (a run to its layer only)
        # is the first picture, the others show a progress note until theirs arrives. The attribution's
        # run keeps every layer's patterns, so a layer switch in the attention pattern then runs nothing.
        self.attribution: LogitAttribution | None = None
        if attribution:  # its tokens follow the attention widget's (dlink below): no prompt box of its own
            self.attribution = LogitAttribution(
                runs, prompt, tokens=tokens, layer=layer, head=head, show_prompt=False, defer=True
            )
        self.ov: OVCircuit | None = None
        self.qk: QKCircuit | None = None
        if circuits:  # token subset: the prompt's distinct tokens, when there is a prompt
            self.ov = OVCircuit(model, layer=layer, head=head, prompt=prompt, defer=True)
            self.qk = QKCircuit(model, layer=layer, head=head, prompt=prompt, defer=True)
        self.head_scores = HeadScores(runs, kinds, layer=layer, head=head, defer=True)
        self.composition = CompositionDiagram(
            model, composition, layer=layer, head=head, tokens=self.attention.tokens, defer=True, **causal
        )

    def _link_children(self, controls: bool) -> None:
        """Every child follows the attention pattern's layer and head (in the kernel and in the browser), its tokens
        and its colour scale; so do the ablation `controls` when shown."""
        hub = self.attention
        # layer and head of every child follow the attention widget's (and it follows theirs)
        followers = [child for child in self.widgets if child is not hub]
        for child in followers:  # one layer/head pair for the whole dashboard: the attention pattern's
            child.head_controls = False
        if controls:
            followers.append(self.ablation)
        self._head_links = [((hub, name), (child, name)) for child in followers for name in ("layer", "head")]
        with contextlib.ExitStack() as quiet:  # a child that holds the hub's layer and head already: the link's
            for child in followers:  # first sync changes nothing there, and need not check the model again
                if child.selected_head == hub.selected_head:
                    quiet.enter_context(child._quietly())
            self.links: list[Any] = [traitlets.link(*ends) for ends in self._head_links]
        # the same links in the browser: a head picked there redraws every child at once,
        # without a round trip through a kernel that may be busy
        self.js_links: list[Any] = [ipywidgets.jslink(*ends) for ends in self._head_links]
        # one colour scale for every view of attention weights (the pair panels, the positional QK view)
        scaled = [child for child in (self.composition, self.qk) if child is not None]
        self._scale_links = [((hub, "color_scale"), (child, "color_scale")) for child in scaled]
        self.links += [traitlets.link(*ends) for ends in self._scale_links]
        self.js_links += [ipywidgets.jslink(*ends) for ends in self._scale_links]
        self.links.append(traitlets.dlink((hub, "tokens"), (self.composition, "tokens")))
        if self.attribution is not None:
            self.links.append(traitlets.dlink((hub, "tokens"), (self.attribution, "tokens")))

    # ----- layout --------------------------------------------------------------------------------
    def _compact_rows(self) -> list[Any]:
        """The first glance (head scores | attention pattern | composition over logit attribution), then the circuits folded."""
        side = [w for w in (self.composition, self.attribution) if w is not None]
        for child in (self.head_scores, self.attention, *side):
            child.compact = True
        columns = ipywidgets.Layout(grid_template_columns=FIRST_GLANCE_COLUMNS, grid_gap="16px", align_items="flex-start")
        first = ipywidgets.GridBox([self.head_scores, self.attention, ipywidgets.VBox(side)], layout=columns)
        first.add_class("cw-dashboard-first")
        rows: list[Any] = [first]
        circuits = [w for w in (self.ov, self.qk) if w is not None]
        if circuits:
            more = ipywidgets.Accordion([_side_by_side(circuits)], titles=(CIRCUITS_TITLE,), selected_index=None)
            more.add_class("cw-dashboard-more")
            rows.append(more)
        return rows

    def _full_rows(self) -> list[Any]:
        """Every view at its full size: head scores beside composition, the attention pattern, the attribution, OV beside QK."""
        rows: list[Any] = [_side_by_side([self.head_scores, self.composition]), self.attention]
        if self.attribution is not None:
            rows.append(self.attribution)
        circuits = [w for w in (self.ov, self.qk) if w is not None]
        if circuits:
            rows.append(_side_by_side(circuits))
        return rows

    # ----- ablation ------------------------------------------------------------------------------
    @property
    def ablated(self) -> list[list[int]]:
        """The ablated heads, ``[[layer, head], ...]``; setting it (a list of pairs) redraws the children.

        A bad head raises ValueError and shows why in the dashboard (its ablation controls, else the
        attention pattern), leaving everything as it was.
        """
        return [list(pair) for pair in self.ablation.ablated]

    @ablated.setter
    def ablated(self, heads: Any) -> None:
        self._set_ablation("ablated", heads)

    @property
    def ablation_method(self) -> str:
        """"zero", "mean" or "resample"; the last two need `ablation_reference`."""
        return self.ablation.ablation_method

    @ablation_method.setter
    def ablation_method(self, method: Any) -> None:
        self._set_ablation("ablation_method", method)

    @property
    def ablation_reference(self) -> Any:
        """Token ids ``[batch, seq]`` whose head outputs the "mean" and "resample" ablations use (or None)."""
        return self.ablation.reference

    @ablation_reference.setter
    def ablation_reference(self, tokens: Any) -> None:
        try:
            self.ablation.holder(reference=tokens)
        except (TypeError, ValueError) as exc:
            self._ablation_error(f"ablation_reference: {exc}")
            raise ValueError(f"ablation_reference: {exc}") from None
        self._ablation_error("")
        self.ablation.reference = tokens
        self._noted = False  # the same heads and method over other tokens: the children take the new model
        self.ablation.refresh()

    def _set_ablation(self, name: str, value: Any) -> None:
        try:
            setattr(self.ablation, name, value)
        except traitlets.TraitError as exc:
            self._ablation_error(str(exc))
            raise ValueError(str(exc)) from None
        self._ablation_error("")

    def _ablation_error(self, message: str) -> None:
        """Show `message` ('' clears) where the user sees it: the ablation controls, else the attention pattern."""
        if self.ablation in self.children:
            if message:
                self.ablation._show_error(message, "controls")
            else:
                self.ablation._clear_error("controls")
        elif message:
            self.attention._show_error(message, "ablation")
        else:
            self.attention._clear_error("ablation")

    def _apply(self, held: Ablated | None) -> None:
        """Give the children that run the model `held` (None: the model itself), the others the model; set their notes."""
        key = None if held is None else (tuple(held.heads), held.method)
        if self._noted and key == self._applied:  # (the same ablation again: the children keep their model)
            return
        self._applied, self._noted, self.ablated_model = key, True, held
        label = None if held is None else held.label
        runs = self.model if held is None else held
        unaffected = "" if label is None else f"unaffected by the ablation ({label})"
        scores = label or ""
        if label is not None and "ov_copying" in self.head_scores.kinds:
            scores = f"{label} (OV copying reads the weights: unaffected)"
        notes = [
            (self.attention, runs, label or ""),
            (self.attribution, runs, label or ""),
            (self.head_scores, runs, scores),
            (self.features, runs, label or ""),
            (self.composition, self.model, unaffected and f"composition scores read the weights: {unaffected}; "
             "the pair's patterns are the model's own"),
            (self.ov, self.model, unaffected and f"reads the weights: {unaffected}"),
            (self.qk, self.model, unaffected and f"reads the weights: {unaffected}"),
        ]
        for child, model, note in notes:
            if child is not None:
                child.use_model(model, note=note)

    def use_model(self, model: Any, *, note: str | None = None) -> Dashboard:
        """Show `model` in every child from now on (e.g. another training step's: `Training.link`), the ablation chosen
        kept; `note` goes before each child's own caption. Returns the dashboard."""
        current_view(model)  # a clear TypeError (or ValueError) now, for anything that is no model
        self.model = model
        self.ablation.use_model(model)
        self._noted = False
        self._apply(self.ablation.holder())
        if note:
            for child in self.widgets:
                child._set(model_note=f"{note}; {child.model_note}" if child.model_note else note)
        return self

    def _display_(self) -> Any:
        """marimo's display hook: the same rows as ``mo.vstack``/``mo.hstack`` of ``mo.ui.anywidget``.

        marimo cannot show an ``ipywidgets.VBox``; with this, a cell ending in ``dash`` shows the
        dashboard there too, in the same grid (the first glance's columns as ``mo.hstack`` widths,
        the folded row as ``mo.accordion``). Its links run in the kernel (marimo has no ``jslink``).
        """
        import marimo as mo

        def show(item: Any) -> Any:
            if isinstance(item, CircuitWidget):
                return mo.ui.anywidget(item)
            children = [show(child) for child in item.children]
            if isinstance(item, ipywidgets.Accordion):
                titles = [item.get_title(i) or f"part {i + 1}" for i in range(len(children))]
                return mo.accordion(dict(zip(titles, children, strict=True)))
            if isinstance(item, ipywidgets.GridBox):
                widths = _fractions(item.layout.grid_template_columns or "")
                if widths is not None and len(widths) == len(children):  # fixed columns: the same widths
                    return mo.hstack(children, widths=widths, align="start", gap=1)
            if isinstance(item, (ipywidgets.HBox, ipywidgets.GridBox)):
                return mo.hstack(children, wrap=True, align="start")
            return mo.vstack(children)

        return show(self)

    def close(self) -> None:
        """Close the dashboard, its links and its children, so that they and the model can be freed."""
        links, self.links = getattr(self, "links", []), []
        for link in links:
            link.unlink()
        for link in getattr(self, "js_links", []):
            link.close()
        def boxes(item: Any) -> list[Any]:  # the layout's boxes, innermost first (an open box holds its children)
            inner = [box for child in getattr(item, "children", ()) for box in boxes(child)]
            return [*inner, item] if isinstance(item, ipywidgets.Box) else inner

        for child in (*getattr(self, "widgets", []), *(box for row in self.children for box in boxes(row))):
            child.close()
        if getattr(self, "ablation", None) is not None:
            self.ablation.close()
        super().close()

    @property
    def widgets(self) -> list[CircuitWidget]:
        """The child widgets, in the order they are drawn."""
        if getattr(self, "compact", False):  # the first glance's columns, then the circuits
            children = (self.head_scores, self.attention, self.composition, self.attribution, self.ov, self.qk)
        else:
            children = (self.head_scores, self.composition, self.attention, self.attribution, self.ov, self.qk)
        return [w for w in (*children, getattr(self, "features", None)) if w is not None]

    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write every child to one self-contained HTML file, with the head links kept in the page.

        The page has no kernel: selecting a head in another layer than the one saved re-labels
        the others but cannot re-run the model, and a composition pair other than the one
        selected when saving shows no patterns. An ablation is saved as drawn (the pictures of the
        ablated model, every child's note); the ablation controls show it, disabled.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.Dashboard(cw.demo_model(), prompt="abab").save_html("/tmp/dash.html").name
            'dash.html'
        """
        from ._export import export_html

        # the rows as laid out here (head scores beside composition, OV beside QK)
        return export_html(list(self.children), path, title=title or "circuitwidgets dashboard", links=self._head_links)
