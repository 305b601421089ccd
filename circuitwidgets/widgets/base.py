"""`CircuitWidget`, what every circuitwidgets widget is: a model and its view, layer/head, a refreshed picture.

A widget is one subclass that names its JS view, declares its traits and implements `_refresh()`:
call `circuitwidgets.analysis`, hand the tensors to `circuitwidgets.transport` (via `payload_*`)
and assign the payload traits at the end, so that a failure leaves the last good picture in place.

    class MyView(CircuitWidget, view="myview"):   # js/views/myview.js draws it
        controls = ("top",)  # synced traits the user or the browser may set (with the base's layer, head...)
        inputs = ("layer", "top")  # the controls whose change recomputes the picture
        top = traitlets.Int(5, help="how many heads to list").tag(sync=True)
        scores = traitlets.Dict(help="float32 [n_heads]").tag(sync=True)  # not a control: read-only

        def __init__(self, model, layer=0, head=0, **kwargs):
            super().__init__(model, layer=layer, head=head, **kwargs)
            self._start()

        def _check_top(self, value):  # runs after the type check; raise ValueError to refuse
            if not 1 <= value <= 10:
                raise ValueError(f"top={value} is out of range: 1..10")
            return value

        def _refresh(self):
            self.scores = self.payload_float32(analysis.copying_scores(self.mv)[self.layer])

Subclassing registers the class in `WIDGETS` (name → class); `circuitwidgets.MyView` then works.
What else a widget is comes mixed in, one module each: the error contract (`_contract.Contract`:
every write checked, refusals shown), the kernel's loop and the worker thread (`_loop.KernelLoop`:
messages in order, coalesced refreshes, long jobs) and export (`_export.Exportable`: `save_html`).
A change of one of the class's `inputs` asks for a refresh.
"""

from __future__ import annotations

import functools
import textwrap
import weakref
from contextlib import nullcontext
from typing import Any, ClassVar

import traitlets

from .. import transport
from ..ablation import Ablated
from ..model import ModelView, checked, with_trace_options
from ._bundle import BUNDLE_CSS, BUNDLE_JS, STATIC
from ._contract import Contract, _traits_of, described, refusal, short
from ._export import Exportable
from ._loop import COALESCE_S, KernelLoop, running_loop
from ._views import current_view

# Names other modules took from here before the contract, the loop and the bundle had modules of their own.
__all__ = [
    "BUNDLE_CSS", "BUNDLE_JS", "COALESCE_S", "STATIC", "WIDGETS", "CircuitWidget", "_traits_of", "described",
    "document_traits", "hooks_note", "note_of", "refusal", "running_loop", "selector_facts", "short",
]

#: Every widget class, by class name (filled by subclassing `CircuitWidget` with ``view=``).
WIDGETS: dict[str, type[CircuitWidget]] = {}


def document_traits(cls: type) -> None:
    """Add a "Traits" section to `cls`'s docstring from its synced traits' ``help=`` (written once).

    The section goes before the docstring's ``Example:``; each line reads ``name (type): help``. It lists
    the class's own traits and those of its bases in private modules (``_long_runs``...: a reader
    opens the widget's class, not theirs), and names the other bases that declare traits.
    """
    def declared(c: type) -> list[tuple[str, Any]]:  # the public synced traits `c` itself declares
        return [(n, t) for n, t in vars(c).items() if isinstance(t, traitlets.TraitType) and t.metadata.get("sync")
                and not n.startswith("_")]

    ours = [c for c in cls.__mro__[1:] if c.__module__.startswith("circuitwidgets") and declared(c)]
    private = [c for c in ours if c.__module__.rpartition(".")[2].startswith("_")]
    own = [item for c in [*reversed(private), cls] for item in declared(c)]
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
    bases = [base.__name__ for base in ours if base not in private]
    also = f"; also those of {', '.join(bases)}" if bases else ""
    section = f"\n    Traits (synced with the browser{also}):\n" + "\n".join(lines) + "\n"
    cls.__doc__ = head.rstrip() + "\n" + section + (example + rest if example else "    ")


def note_of(model: Any, weights_only: bool = False) -> str:
    """The `model_note` a widget on `model` shows at first: an ablated model's label (`Ablated.label`), else ''.
    A view that reads only the weights (`weights_only`) says the ablation leaves it unchanged.

    Example:
        >>> import circuitwidgets as cw
        >>> model = cw.demo_model()
        >>> note_of(model), note_of(cw.analysis.ablated(model, [(1, 0), (1, 2)]))
        ('', 'L1H0, L1H2 zero-ablated')
        >>> note_of(cw.analysis.ablated(model, [(1, 0)]), weights_only=True)
        'reads the weights: unaffected by the ablation (L1H0 zero-ablated)'
    """
    if not isinstance(model, Ablated):
        return ""
    return f"reads the weights: unaffected by the ablation ({model.label})" if weights_only else model.label


def selector_facts(mv: ModelView) -> dict[str, Any]:
    """The model facts a widget's layer and head selectors read from its ``info`` trait.

    Example:
        >>> import circuitwidgets as cw
        >>> selector_facts(cw.ModelView(cw.demo_model()))
        {'n_layers': 2, 'n_heads': 4, 'attn_layers': [0, 1], 'has_tokenizer': True}
    """
    return {"n_layers": mv.n_layers, "n_heads": mv.n_heads, "attn_layers": list(mv.attn_layers),
            "has_tokenizer": mv.tokenizer is not None}


def hooks_note(hook_state: tuple) -> str:
    """The `hooks_note` of a picture drawn while `hook_state` (`ModelView.hook_state`) was active: '' for none.

    Example:
        >>> hooks_note((("blocks.0.attn.hook_pattern", "forward", (7,)),))
        'drawn under hooks: blocks.0.attn.hook_pattern'
        >>> hooks_note(())
        ''
    """
    names = list(dict.fromkeys(name for name, _, _ in hook_state))
    if not names:
        return ""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"drawn under hooks: {', '.join(names[:3])}{more}"


class CircuitWidget(KernelLoop, Contract, Exportable):
    """Base class: one shared bundle (`static/widgets.js`) that draws the view named at subclassing.

    Args:
        model: a TransformerLens ``TransformerBridge`` or ``HookedTransformer``, an nnsight model, or a
            Hugging Face causal LM (its tokenizer as ``model.tokenizer``, or pass an `HFView`).
        remote: for an nnsight model, passed to each ``model.trace`` (True: run on NDIF); with
            `trace_options` (other ``trace`` keywords) it makes the widget's model an `HFView`.
        layer, head: the head shown or selected (block index, head index).
        **kwargs: initial values of other traits; an unknown name raises ``TypeError``.

    Every widget has the traits below. A bad value of any trait (wrong type, out of range, not
    allowed), set from Python or from the browser, shows its message in the widget and keeps the
    last good picture; from Python it also raises ``TraitError``. Traits that are not controls
    (payloads, ``info``, ``error``...) are computed by the widget and cannot be set.
    """

    _esm = BUNDLE_JS
    _css = BUNDLE_CSS
    #: The JS view that draws this class (``class X(CircuitWidget, view="name")``).
    view_name: ClassVar[str] = ""
    #: Synced traits the user or the browser may set (see `Contract`; each class adds its own, and its
    #: `inputs` and `requests`).
    controls: ClassVar[tuple[str, ...]] = ("layer", "head", "head_controls", "compact")
    #: False for a widget drawn from data given to it, with no model (`model` is None, no view is checked).
    needs_model: ClassVar[bool] = True
    #: True for a view drawn from the weights alone (an ablated model's note then says it is unaffected).
    weights_only: ClassVar[bool] = False

    _cw_view = traitlets.Unicode("", help="name of the JS view that draws this widget").tag(sync=True)
    layer = traitlets.Int(0, help="block index of the layer of the head shown or selected").tag(sync=True)
    head = traitlets.Int(0, help="index of the head shown or selected, within its layer").tag(sync=True)
    head_controls = traitlets.Bool(
        True, help="show this widget's own layer and head selectors (a Dashboard shows one pair for all)"
    ).tag(sync=True)
    compact = traitlets.Bool(
        False, help="a smaller picture: long captions and secondary panels hidden behind a 'more' button (a Dashboard's)"
    ).tag(sync=True)
    error = traitlets.Unicode("", help="message shown inside the widget; '' when all is well").tag(sync=True)
    busy = traitlets.Bool(False, help="True while the kernel recomputes (the widget shows a progress note)").tag(sync=True)
    model_note = traitlets.Unicode(
        "", help="a caption about the model shown, e.g. 'L1H0, L1H2 zero-ablated' (an ablated model); '' for none"
    ).tag(sync=True)
    unsupported = traitlets.Dict(
        help="the controls this model's backend cannot serve, {control: the backend's reason}: greyed in the view, "
        "the reason shown, and a write to one refused with it ({} when every control works)"
    ).tag(sync=True)
    #: The backend features the controls need, {control: feature} (`circuitwidgets.backends.protocol.FEATURES`); a
    #: widget whose controls vary (one per score kind...) overrides `_needs`.
    needs: ClassVar[dict[str, str]] = {}
    hooks_note = traitlets.Unicode(
        "", help="'drawn under hooks: <hook points>' when the picture shown was computed with hooks on the model; '' otherwise"
    ).tag(sync=True)

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
        self._action_view = current_view(model) if self.needs_model else None  # a clear TypeError for anything else
        super().__init__(_cw_view=self.view_name, model_note=note_of(model, self.weights_only), **kwargs)
        self._note_unsupported(self._action_view)  # (the view just checked: reading every weight again costs 27 ms)

    @property
    def model(self) -> Any:
        """The model this widget shows."""
        return self._model

    def use_model(self, model: Any, *, note: str | None = None) -> CircuitWidget:
        """Show `model` from now on (e.g. an ablated model in place of the plain one) and redraw; returns the widget.

        `note` becomes `model_note` (default: `note_of(model)`, e.g. an ablated model's label). The
        same model again changes only the note. Layer, head and the other inputs stay.

        Example:
            >>> import circuitwidgets as cw
            >>> model = cw.demo_model()
            >>> w = cw.AttentionPattern(model, prompt="abcabc", layer=1)
            >>> w.use_model(cw.analysis.ablated(model, [(1, 0)])).model_note
            'L1H0 zero-ablated'
            >>> w.use_model(model).model_note
            ''
        """
        if note is not None and not isinstance(note, str):
            raise TypeError(f"note must be a str or None; got {type(note).__name__}")
        changed = model is not self._model
        if changed:
            view = current_view(model)  # a clear TypeError (or ValueError) now, for anything that is no model
            self._model = model
            self._sent_for.clear()
            self._note_unsupported(view)  # (the same model: what its backend supports is as it was)
        self._set(model_note=note_of(model, self.weights_only) if note is None else note)
        if changed and not self._start_pending:  # (a deferred first refresh runs on the new model anyway)
            self._request_refresh()
        return self

    def _needs(self) -> dict[str, str]:
        """The backend feature each control needs, {control: feature}: the class's `needs`."""
        return dict(self.needs)

    def _note_unsupported(self, view: ModelView | None = None) -> None:
        """Set `unsupported` from what this model's backend supports (`ModelView.supports`), asking `view` (the model's
        view checked a moment ago) or else the model's current view."""
        if not self.needs_model:
            return
        view = view if view is not None else current_view(self._model)
        found = {control: view.supports(feature) for control, feature in self._needs().items()}
        self._set(unsupported={control: support.reason for control, support in found.items() if not support})

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

    # ----- checks of the base controls (see `Contract`) ---------------------------------------
    def _check_layer(self, value: int) -> int:
        self.mv.layer_index(value)
        return value

    def _check_head(self, value: int) -> int:
        return self.mv.check_head(value)

    def _on_input(self, change: dict) -> None:
        if self._live:
            self._input_changed(change["name"])
            self._request_refresh()

    def _input_changed(self, name: str) -> None:
        """Called when input `name` was set by the user, before the refresh (e.g. to note which input drew)."""

    def _sequence(self, prompt_or_tokens: Any) -> list[int]:
        """Token ids of one sequence (a prompt is tokenised with BOS); a batch is refused."""
        if isinstance(prompt_or_tokens, (list, tuple)) and not prompt_or_tokens:
            raise ValueError("tokens is empty: give at least one token id")
        ids = self.mv.tokens_of(prompt_or_tokens)
        if ids.shape[0] != 1:
            raise ValueError(f"tokens must be one sequence; got a batch of {ids.shape[0]}")
        return ids[0].tolist()

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

    # ----- coalesced refreshes -----------------------------------------------------------------
    def _on_user_action(self) -> None:
        self._redraw_if_model_changed()  # (every browser event)

    @traitlets.observe("layer", "head")
    def _on_head_seen(self, change: dict) -> None:
        if change["name"] not in _traits_of(type(self)).inputs:  # (an input refreshes anyway)
            self._redraw_if_model_changed()  # a head switch draws from the payload already sent

    def _redraw_if_model_changed(self) -> None:
        """Refresh when the weights or hooks changed since the picture on screen was computed, or it failed."""
        if self._live and self._drawn_state and (self._error_source == "refresh" or self._drawn_state != self._model_state()):
            self._request_refresh()

    def _request_refresh(self) -> None:
        """Refresh now for changes made in Python; for browser changes, once the queue is drained.

        A refresh already waiting is replaced, so a burst of edits costs one model run on the
        latest state (the latest request wins, no backlog). Before `_start` this does nothing.
        """
        if self._live:
            self._soon("refresh", functools.partial(self._run_refresh, raise_bugs=not self._in_browser_update))

    def _run_refresh(self, raise_bugs: bool = False) -> None:
        self._for_browser = not raise_bugs  # (a browser change, or a deferred start: the cell has returned)
        self.revision += 1
        self._set(busy=True)
        try:
            with self.hold_sync(), self._quietly():
                if self._action_view is None and self.needs_model:  # else the constructor's view, checked just before
                    self._action_view = current_view(self._model)
                state = self._model_state()
                with checked(self._action_view) if self._action_view is not None else nullcontext():  # one check
                    self._refresh()
                self._drawn_state = state
                self.hooks_note = "" if self.weights_only or not self.needs_model else hooks_note(state[1])
                self.refresh_count += 1
                self._clear_error("refresh")
        except (ValueError, TypeError) as exc:  # bad input: say so, keep the last good picture
            self._sent_for.clear()
            self._show_error(described(exc), "refresh")
        except Exception as exc:  # a bug: show it rather than leave a silent blank widget
            self._sent_for.clear()
            self._show_error(described(exc), "refresh")
            if raise_bugs:
                raise
        finally:
            self._action_view = None
            self._set(busy=self._computing())

    _for_browser = False  # the refresh running was asked for by the browser (`_run_refresh`)

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
            self._set(busy=True)
            loop.call_soon(self.finish_start)

    def finish_start(self) -> None:
        """Run a deferred first refresh now if it has not run yet (export does this itself)."""
        if self._start_pending and not self._closed:
            self._start_pending = False
            self._run_refresh()

    def _pending(self) -> bool:
        return self._start_pending or super()._pending()

    def finish(self) -> CircuitWidget:
        self.finish_start()
        super().finish()
        return self

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

    def _prepare_export(self) -> None:
        """Make the state complete for a page with no kernel (subclasses compute more here)."""
        self.finish_start()


document_traits(CircuitWidget)
