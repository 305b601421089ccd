"""`Dashboard`: head scores, composition, attention patterns (and OV/QK circuits), linked by traits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets
import traitlets

from ..model import with_trace_options
from ._views import current_view
from .attention import AttentionPattern
from .attribution import LogitAttribution
from .base import CircuitWidget
from .composition import CompositionDiagram
from .headscores import SCORE_KINDS, HeadScores
from .ov import OVCircuit
from .qk import QKCircuit


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

    On a big model only the head-score kind shown is computed (see `HeadScores`' ``eager``); the
    others are computed when selected. In a notebook the head scores and the composition are
    computed just after the cell returns (``defer=True``), so the attention pattern draws first
    and the other widgets show a progress note until their scores arrive.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``, or an nnsight model.
        prompt: text for the attention patterns (needs a tokenizer); or tokens: token ids.
        remote, trace_options: for an nnsight model, passed to every ``model.trace`` (True: NDIF), through
            one `HFView` that every child shares; weight-based children need the weights on this machine.
        layer, head: the head selected at first (default: the first attention layer, head 0).
        kinds: `HeadScores` kinds (default: all). composition: "Q", "K" or "V".
        circuits: include `OVCircuit` and `QKCircuit` (default True).
        attribution: include `LogitAttribution` (default True).

    Attributes:
        head_scores, composition, attention: the child widgets; attribution: the
            `LogitAttribution`, or None with ``attribution=False``; ov, qk: the circuit widgets,
            or None with ``circuits=False``.
        links: the ``traitlets.link`` / ``dlink`` objects (kernel side); js_links: the same
            layer/head links as ``ipywidgets.jslink`` (browser side). ``unlink()`` both to decouple.

    Example:
        >>> import circuitwidgets as cw
        >>> d = cw.Dashboard(cw.demo_model(), prompt="abcabc")
        >>> d.head_scores.head = 2
        >>> d.attention.head, d.composition.head
        (2, 2)
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
        layer = view.attn_layers[0] if layer is None else layer
        self.model = model
        self.attention = AttentionPattern(model, prompt, tokens=tokens, layer=layer, head=head)
        # In a kernel these two compute just after the cell returns, so the attention pattern
        # (and the circuits) show first and the scores follow with a progress note.
        self.head_scores = HeadScores(model, kinds, layer=layer, head=head, defer=True)
        self.composition = CompositionDiagram(
            model, composition, layer=layer, head=head, tokens=self.attention.tokens, defer=True
        )
        self.attribution: LogitAttribution | None = None
        if attribution:  # its tokens follow the attention widget's (dlink below): no prompt box of its own
            self.attribution = LogitAttribution(model, prompt, tokens=tokens, layer=layer, head=head, show_prompt=False)
        self.ov: OVCircuit | None = None
        self.qk: QKCircuit | None = None
        if circuits:  # token subset: the prompt's distinct tokens, when there is a prompt
            self.ov = OVCircuit(model, layer=layer, head=head, prompt=prompt)
            self.qk = QKCircuit(model, layer=layer, head=head, prompt=prompt)
        hub = self.attention
        # layer and head of every child follow the attention widget's (and it follows theirs)
        followers = [child for child in self.widgets if child is not hub]
        for child in followers:  # one layer/head pair for the whole dashboard: the attention pattern's
            child.head_controls = False
        self._head_links = [((hub, name), (child, name)) for child in followers for name in ("layer", "head")]
        self.links: list[Any] = [traitlets.link(*ends) for ends in self._head_links]
        # the same links in the browser: a head picked there redraws every child at once,
        # without a round trip through a kernel that may be busy
        self.js_links: list[Any] = [ipywidgets.jslink(*ends) for ends in self._head_links]
        self.links.append(traitlets.dlink((hub, "tokens"), (self.composition, "tokens")))
        if self.attribution is not None:
            self.links.append(traitlets.dlink((hub, "tokens"), (self.attribution, "tokens")))
        def row(children: list[Any]) -> ipywidgets.GridBox:
            # side by side when the output area is at least 864 px wide (a 1 280 px window), one column below
            columns = "repeat(auto-fit, minmax(min(100%, 420px), 1fr))"
            layout = ipywidgets.Layout(grid_template_columns=columns, grid_gap="24px", align_items="flex-start", width="100%")
            return ipywidgets.GridBox(children, layout=layout)

        rows: list[Any] = [row([self.head_scores, self.composition]), self.attention]
        if self.attribution is not None:
            rows.append(self.attribution)
        circuit_row = [w for w in (self.ov, self.qk) if w is not None]
        if circuit_row:
            rows.append(row(circuit_row))
        super().__init__(rows, **kwargs)
        self.add_class("cw-dashboard")

    def _display_(self) -> Any:
        """marimo's display hook: the same rows as ``mo.vstack``/``mo.hstack`` of ``mo.ui.anywidget``.

        marimo cannot show an ``ipywidgets.VBox``; with this, a cell ending in ``dash`` shows the
        dashboard there too. Its links run in the kernel (marimo has no ``jslink``).
        """
        import marimo as mo

        def show(item: Any) -> Any:
            if isinstance(item, CircuitWidget):
                return mo.ui.anywidget(item)
            children = [show(child) for child in item.children]
            side_by_side = isinstance(item, (ipywidgets.HBox, ipywidgets.GridBox))
            return mo.hstack(children, wrap=True, align="start") if side_by_side else mo.vstack(children)

        return show(self)

    def close(self) -> None:
        """Close the dashboard, its links and its children, so that they and the model can be freed."""
        links, self.links = getattr(self, "links", []), []
        for link in links:
            link.unlink()
        for link in getattr(self, "js_links", []):
            link.close()
        for child in (*getattr(self, "widgets", []), *self.children):
            child.close()
        super().close()

    @property
    def widgets(self) -> list[CircuitWidget]:
        """The child widgets, in the order they are drawn."""
        children = (self.head_scores, self.composition, self.attention, self.attribution, self.ov, self.qk)
        return [w for w in children if w is not None]

    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write every child to one self-contained HTML file, with the head links kept in the page.

        The page has no kernel: selecting a head in another layer than the one saved re-labels
        the others but cannot re-run the model, and a composition pair other than the one
        selected when saving shows no patterns.

        Example:
            >>> import circuitwidgets as cw
            >>> cw.Dashboard(cw.demo_model(), prompt="abab").save_html("/tmp/dash.html").name
            'dash.html'
        """
        from ._export import export_html

        # the rows as laid out here (head scores beside composition, OV beside QK)
        return export_html(list(self.children), path, title=title or "circuitwidgets dashboard", links=self._head_links)
