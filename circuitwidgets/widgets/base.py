"""What every circuitwidgets widget shares: model, layer/head, errors, coalesced refreshes, export.

A widget is one subclass that names its JS view, declares its traits and implements `_refresh()`:
call `circuitwidgets.analysis`, hand the tensors to `circuitwidgets.transport` (via `payload_*`)
and assign the payload traits at the end, so that a failure leaves the last good picture in place.

    class MyView(CircuitWidget, view="myview"):   # js/views/myview.js draws it
        scores = traitlets.Dict(help="float32 [n_heads]").tag(sync=True)

        def __init__(self, model, layer=0, head=0, **kwargs):
            super().__init__(model, layer=layer, head=head, **kwargs)
            self._start()

        def _refresh(self):
            self.scores = self.payload_float32(analysis.copying_scores(self.mv)[self.layer])

Subclassing registers the class in `WIDGETS` (name → class); `circuitwidgets.MyView` then works.
"""

from __future__ import annotations

import asyncio
import difflib
import textwrap
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import anywidget
import traitlets

from .. import transport
from ..model import ModelView, with_trace_options
from ._views import current_view

STATIC = Path(__file__).parent / "static"
# Read once, as text: anywidget watches a Path for changes with a callback that holds every
# instance, so a closed widget (and its model) could never be freed.
BUNDLE_JS = (STATIC / "widgets.js").read_text(encoding="utf-8")
BUNDLE_CSS = (STATIC / "widgets.css").read_text(encoding="utf-8")

#: Delay before a refresh asked for by the browser runs. Messages that queued up meanwhile (a user
#: typing, a slider dragged) are applied first and the refresh runs once, on the latest state.
COALESCE_S = 0.03

#: Every widget class, by class name (filled by subclassing `CircuitWidget` with ``view=``).
WIDGETS: dict[str, type[CircuitWidget]] = {}


def document_traits(cls: type) -> None:
    """Add a "Traits" section to `cls`'s docstring from its synced traits' ``help=`` (written once).

    The section goes before the docstring's ``Example:``; each line reads ``name (type): help``.
    """
    own = [(name, t) for name, t in vars(cls).items() if isinstance(t, traitlets.TraitType) and t.metadata.get("sync")]
    own = [(name, t) for name, t in own if not name.startswith("_")]
    if not own or not cls.__doc__:
        return
    kinds = {"Unicode": "str", "Int": "int", "Float": "float", "Bool": "bool", "Dict": "dict", "List": "list"}
    lines = []
    for name, trait in own:
        if isinstance(trait, traitlets.Enum):
            kind = " | ".join(map(repr, trait.values or ()))
        elif isinstance(trait, traitlets.Union):  # e.g. an id or a token string
            kind = " | ".join([kinds[type(t).__name__] for t in trait.trait_types] + ["None"] * trait.allow_none)
        else:
            kind = kinds[type(trait).__name__]
        lines += textwrap.wrap(f"{name} ({kind}): {trait.help}", 96, initial_indent=" " * 8, subsequent_indent=" " * 12)
    head, example, rest = cls.__doc__.partition("\n    Example:")
    bases = [base.__name__ for base in cls.__mro__[1:] if base.__module__.startswith("circuitwidgets")]
    also = f"; also those of {', '.join(bases)}" if bases else ""
    section = f"\n    Traits (synced with the browser{also}):\n" + "\n".join(lines) + "\n"
    cls.__doc__ = head.rstrip() + "\n" + section + (example + rest if example else "    ")


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running in this thread (a notebook kernel's), or None in a script."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class CircuitWidget(anywidget.AnyWidget):
    """Base class: one shared bundle (`static/widgets.js`) that draws the view named at subclassing.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``, an nnsight model, or a
            Hugging Face causal LM (its tokenizer as ``model.tokenizer``, or pass an `HFView`).
        remote: for an nnsight model, passed to each ``model.trace`` (True: run on NDIF); with
            `trace_options` (other ``trace`` keywords) it makes the widget's model an `HFView`.
        layer, head: the head shown or selected (block index, head index).
        **kwargs: initial values of other traits; an unknown name raises ``TypeError``.

    Every widget has the traits below; an out-of-range layer or head raises ``TraitError`` and
    shows the message in the widget, keeping the last good picture.
    """

    _esm = BUNDLE_JS
    _css = BUNDLE_CSS
    #: The JS view that draws this class (``class X(CircuitWidget, view="name")``).
    view_name: ClassVar[str] = ""

    _cw_view = traitlets.Unicode("", help="name of the JS view that draws this widget").tag(sync=True)
    layer = traitlets.Int(0, help="block index of the layer of the head shown or selected").tag(sync=True)
    head = traitlets.Int(0, help="index of the head shown or selected, within its layer").tag(sync=True)
    head_controls = traitlets.Bool(
        True, help="show this widget's own layer and head selectors (a Dashboard shows one pair for all)"
    ).tag(sync=True)
    error = traitlets.Unicode("", help="message shown inside the widget; '' when all is well").tag(sync=True)
    busy = traitlets.Bool(False, help="True while the kernel recomputes (the widget shows a progress note)").tag(sync=True)

    def __init_subclass__(cls, view: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        document_traits(cls)
        if view is not None:
            if not view.isidentifier():
                raise ValueError(f"view name must be an identifier; got {view!r}")
            cls.view_name = view
            WIDGETS[cls.__name__] = cls

    def __init__(self, model: Any, *, remote: Any = None, trace_options: dict[str, Any] | None = None, **kwargs: Any) -> None:
        model = with_trace_options(model, remote, trace_options)  # an nnsight model run remotely: its shared HFView
        if not self.view_name:
            raise TypeError(f"{type(self).__name__} names no view: subclass CircuitWidget with view='...'")
        self._quiet = 0
        self._ready = False
        self._closed = False
        self._frontend_depth = 0
        self._pending: asyncio.TimerHandle | None = None
        self._error_source: str | None = None
        self._rejected: tuple[str, str] | None = None  # message and source of the last refused value
        self._start_pending = False
        self._sent_for: dict[str, tuple] = {}  # payload name -> the inputs it was last computed from
        self._drawn_state: tuple = ()  # the model state (weights, hooks) of the picture on screen
        self._action_view: ModelView | None = None  # the view one refresh works with (checked once)
        self.revision = 0  # refreshes begun; every payload of one refresh carries it
        self.refresh_count = 0  # refreshes completed; lets tests see that updates coalesced
        self._check_keywords(kwargs)
        self._model = model
        # Construction is one user action: one checked view serves it until the first refresh.
        # (No view is kept beyond that: an old view holds a copy of the old weights.)
        self._action_view = current_view(model)  # raises a clear TypeError for anything else
        super().__init__(_cw_view=self.view_name, **kwargs)

    def _check_keywords(self, kwargs: dict[str, Any]) -> None:
        known = set(self.trait_names())
        for name in kwargs:
            if name not in known or name.startswith("_"):
                public = sorted(n for n in known if not n.startswith("_"))
                close = difflib.get_close_matches(name, public, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}{hint}")

    @property
    def model(self) -> Any:
        """The model this widget shows."""
        return self._model

    @property
    def mv(self) -> ModelView:
        """The model's current `ModelView` (rebuilt by `as_view` after any change to the weights).

        During a refresh, the view checked once at its start: the staleness check reads every
        weight (see `circuitwidgets.model`), so one user action pays it once.
        """
        return self._action_view if self._action_view is not None else current_view(self._model)

    @property
    def selected_head(self) -> tuple[int, int]:
        """``(layer, head)`` of the head shown or selected."""
        return (self.layer, self.head)

    # ----- layer and head ----------------------------------------------------------------------
    @traitlets.validate("layer")
    def _valid_layer(self, proposal: dict) -> int:
        return self._checked(self.mv.layer_index, proposal["value"])

    @traitlets.validate("head")
    def _valid_head(self, proposal: dict) -> int:
        return self._checked(self.mv.check_head, proposal["value"])

    def _checked(self, check: Any, value: Any) -> Any:
        """`value` if ``check(value)`` passes; else show why in the widget and raise ``TraitError``."""
        try:
            check(value)
        except (ValueError, TypeError) as exc:
            raise self._trait_error(exc, "controls") from None
        self._clear_error("controls")  # a good value clears the message, changed or not
        return value

    def _sequence(self, prompt_or_tokens: Any) -> list[int]:
        """Token ids of one sequence (a prompt is tokenised with BOS); a batch is refused."""
        ids = self.mv.tokens_of(prompt_or_tokens)
        if ids.shape[0] != 1:
            raise ValueError(f"tokens must be one sequence; got a batch of {ids.shape[0]}")
        return ids[0].tolist()

    @contextmanager
    def _quietly(self) -> Iterator[None]:
        """Assign traits without their observers asking for another refresh."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    @property
    def _live(self) -> bool:
        """True when a change made now should redraw: started, not closed, not a quiet assignment."""
        return self._ready and not self._quiet and not self._closed

    # ----- payloads ----------------------------------------------------------------------------
    # Each stamps the payload with this refresh's revision unless `extra` names another.
    def payload_uint8(self, tensor: Any, **extra: Any) -> dict[str, Any]:
        """`transport.uint8_payload` of `tensor` (lo, hi, layout and extra fields in `extra`)."""
        return transport.uint8_payload(tensor, **{"revision": self.revision, **extra})

    def payload_float32(self, tensor: Any, **extra: Any) -> dict[str, Any]:
        """`transport.float32_payload` of `tensor`, with `extra` fields."""
        return transport.float32_payload(tensor, **{"revision": self.revision, **extra})

    def payload_heads(self, blocks: Any, **extra: Any) -> dict[str, Any]:
        """`transport.heads_payload` of ``[H, n, n]`` signed blocks, with `extra` fields."""
        return transport.heads_payload(blocks, **{"revision": self.revision, **extra})

    def _model_state(self) -> tuple:
        """What a picture depends on besides the widget's inputs: the model's weights and hooks."""
        mv = self.mv
        return (weakref.ref(mv), mv.hook_state())

    def _inputs_changed(self, payload: str, *inputs: Any) -> bool:
        """True when `payload` was last computed from other inputs (the model's weights and hooks included).

        Lets a refresh skip a payload whose inputs did not change; `refresh()`, a failed
        refresh, an edit of the weights (a new `ModelView`) and added or removed hooks make it
        recompute.
        """
        key = (*self._model_state(), *inputs)
        if self._sent_for.get(payload) == key:
            return False
        self._sent_for[payload] = key
        return True

    def empty_payload(self, **extra: Any) -> dict[str, Any]:
        """A payload with nothing to draw (no ``data``), saying why in `extra`."""
        return {"revision": self.revision, **extra}

    # ----- errors ----------------------------------------------------------------------------
    def _show_error(self, message: str, source: str) -> None:
        """Show `message` in the widget; `source` lets a later success clear only its own error."""
        self._error_source = source
        self.error = message

    def _clear_error(self, source: str) -> None:
        if self._error_source == source:
            self._error_source = None
            self.error = ""

    def _trait_error(self, exc: Exception, source: str) -> traitlets.TraitError:
        """Show a bad value's message in the widget and return the `TraitError` to raise."""
        self._show_error(str(exc), source)
        self._rejected = (str(exc), source)
        return traitlets.TraitError(str(exc))

    # ----- coalesced refreshes -----------------------------------------------------------------
    def set_state(self, sync_data: dict[str, Any]) -> None:
        # Remember that these changes come from the browser, so observers defer their refresh.
        self._frontend_depth += 1
        self._rejected = None
        try:
            super().set_state(sync_data)
            self._redraw_if_model_changed()  # every browser event is a user action
        except traitlets.TraitError as exc:
            # The update's hold rolled back each of its changes, the message the failed check
            # showed included; raised further, it would only reach ipywidgets' message handler
            # (a log line no one sees). Show it in the widget again; the last good picture stays.
            message, source = self._rejected or (str(exc), "controls")
            self._show_error(message, source)
        finally:
            self._frontend_depth -= 1

    @traitlets.observe("head")
    def _on_head_seen(self, change: dict) -> None:
        self._redraw_if_model_changed()  # a head switch draws from the payload already sent

    def _redraw_if_model_changed(self) -> None:
        """Refresh when the weights or hooks changed since the picture on screen was computed."""
        if self._live and self._drawn_state and self._drawn_state != self._model_state():
            self._request_refresh()

    def _request_refresh(self) -> None:
        """Refresh now for changes made in Python; for browser changes, once the queue is drained.

        A refresh already waiting is replaced, so a burst of edits costs one model run on the
        latest state (the latest request wins, no backlog). Before `_start` this does nothing.
        """
        if not self._live:
            return
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        loop = running_loop() if self._frontend_depth else None
        if loop is None:
            self._run_refresh(raise_bugs=not self._frontend_depth)
        else:
            self._pending = loop.call_later(COALESCE_S, self._run_refresh)

    def _run_refresh(self, raise_bugs: bool = False) -> None:
        self._pending = None
        self.revision += 1
        self.busy = True
        try:
            with self.hold_sync(), self._quietly():
                if self._action_view is None:  # else the constructor's view, checked just before
                    self._action_view = current_view(self._model)
                state = self._model_state()
                self._refresh()
                self._drawn_state = state
                self.refresh_count += 1
                self._clear_error("refresh")
        except (ValueError, TypeError) as exc:  # bad input: say so, keep the last good picture
            self._sent_for.clear()
            self._show_error(str(exc), "refresh")
        except Exception as exc:  # a bug: show it rather than leave a silent blank widget
            self._sent_for.clear()
            self._show_error(f"{type(exc).__name__}: {exc}", "refresh")
            if raise_bugs:
                raise
        finally:
            self._action_view = None
            self.busy = False

    def _refresh(self) -> None:
        """Recompute the payload traits from the current inputs (subclasses implement it)."""
        raise NotImplementedError

    def _start(self, defer: bool = False) -> None:
        """First refresh, at the end of a subclass's ``__init__``: now, or (``defer``) just after.

        Deferred inside a running event loop (a notebook kernel), the widget is displayed first
        and shows its progress note; the computation runs once the cell has returned.
        """
        if not isinstance(defer, bool):
            raise TypeError(f"defer must be a bool; got {defer!r}")
        self._ready = True
        loop = running_loop() if defer else None
        self._start_pending = loop is not None
        if loop is None:
            self._run_refresh(raise_bugs=True)
        else:
            self._action_view = None  # the refresh runs later: it checks the model then
            self.busy = True
            loop.call_soon(self.finish_start)

    def finish_start(self) -> None:
        """Run a deferred first refresh now if it has not run yet (export does this itself)."""
        if self._start_pending and not self._closed:
            self._start_pending = False
            self._run_refresh()

    def refresh(self) -> CircuitWidget:
        """Recompute everything from the current model and inputs now; returns the widget.

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abab")
            >>> w.refresh().refresh_count
            2
        """
        self._start_pending = False
        self._sent_for.clear()
        self._run_refresh(raise_bugs=True)
        return self

    def close(self) -> None:
        """Close the widget: stop its pending work, so that it and its model can be freed."""
        self._closed = True
        pending, self._pending = getattr(self, "_pending", None), None  # None too when __init__ failed early
        if pending is not None:
            pending.cancel()
        super().close()

    # ----- export ------------------------------------------------------------------------------
    def save_html(self, path: str | Path, *, title: str | None = None) -> Path:
        """Write one self-contained HTML file (bundle and data inlined, no CDN, no kernel needed).

        Example:
            >>> import circuitwidgets as cw
            >>> w = cw.AttentionPattern(cw.demo_model(), prompt="abcabc")
            >>> w.save_html("/tmp/attention.html").name
            'attention.html'
        """
        from ._export import export_html

        return export_html([self], path, title=title)

    def _prepare_export(self) -> None:
        """Make the state complete for a page with no kernel (subclasses compute more here)."""
        self.finish_start()


document_traits(CircuitWidget)
