"""What every circuitwidgets widget shares: model, layer/head, errors, coalesced refreshes, export.

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

The error contract, written once here: every value a user sets, from Python (`__setattr__`) or
from the browser (`set_state`), passes `_check_write` (the declared type, strictly: no bool for a
number, no NaN; and only `controls` may be set, the other traits are computed) and then, through
the one validator `_validated`, the class's ``_check_<name>`` method. A refused value raises
`traitlets.TraitError` from Python, and in both cases its message, naming the trait and the
value, shows in the widget's `error` while the value and the picture stay as they were.
`set_state` never raises. A change of one of the class's `inputs` asks for a refresh.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import math
import re
import reprlib
import textwrap
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import anywidget
import traitlets

from .. import transport
from ..ablation import Ablated
from ..model import ModelView, checked, with_trace_options
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


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running in this thread (a notebook kernel's), or None in a script."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# ----- messages ---------------------------------------------------------------------------------
_SHORT = reprlib.Repr()  # a refused value is quoted, never a whole junk list
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 6
_SHORT.maxlevel = 3


def short(value: Any) -> str:
    """`value`'s repr, cut short (for messages)."""
    return _SHORT.repr(value)


def described(exc: BaseException) -> str:
    """The message of `exc`: its text, after its type's name unless it is a plain bad-value error."""
    text = str(exc)
    if text and isinstance(exc, (ValueError, TypeError, traitlets.TraitError)):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def refusal(name: str, value: Any, reason: BaseException | str) -> str:
    """The message refusing `value` of trait `name`: `reason`, after ``name=value:`` unless it names `name` first."""
    message = reason if isinstance(reason, str) else described(reason)
    return message if re.match(rf"{re.escape(name)}\b", message) else f"{name}={short(value)}: {message}"


def _expected(trait: traitlets.TraitType) -> str:
    """What `trait` holds, in words: "an int", "a list of ints", "one of 'max', 'mean'"."""
    words = {traitlets.Int: "an int", traitlets.Float: "a finite number", traitlets.Bool: "True or False",
             traitlets.Unicode: "a str", traitlets.Dict: "a dict"}
    if isinstance(trait, traitlets.Enum):
        text = "one of " + ", ".join(map(repr, trait.values or ()))
    elif isinstance(trait, traitlets.Union):
        text = " or ".join(_expected(t) for t in trait.trait_types)
    elif isinstance(trait, traitlets.List):
        item = getattr(trait, "_trait", None)
        text = "a list" + (f" of {_expected(item).split(' ', 1)[-1]}s" if item is not None else "")
    elif isinstance(trait, traitlets.Instance):
        text = f"a {getattr(trait.klass, '__name__', trait.klass)}"
    else:
        text = next((w for kind, w in words.items() if isinstance(trait, kind)), trait.info())
    return text + (" or None" if trait.allow_none else "")


def _fits(trait: traitlets.TraitType, value: Any) -> bool:
    """True when `value` has the type `trait` declares, strictly: no bool for a number, no NaN or infinity."""
    if value is None:
        return bool(trait.allow_none)
    if isinstance(trait, traitlets.Union):
        return any(_fits(t, value) for t in trait.trait_types)
    if isinstance(trait, traitlets.Bool):
        return isinstance(value, bool)
    if isinstance(value, bool):  # True is an int to Python, never a layer or an id
        return False
    if isinstance(trait, traitlets.Int):
        return isinstance(value, int)
    if isinstance(trait, traitlets.Float):
        try:
            return isinstance(value, (int, float)) and math.isfinite(value)
        except OverflowError:  # an int too large for a float
            return False
    if isinstance(trait, traitlets.Unicode):
        return isinstance(value, str)
    if isinstance(trait, traitlets.Enum):
        return any(type(value) is type(v) and value == v for v in trait.values or ())
    if isinstance(trait, traitlets.List):
        item = getattr(trait, "_trait", None)
        return isinstance(value, (list, tuple)) and (item is None or all(_fits(item, v) for v in value))
    if isinstance(trait, traitlets.Dict):
        return isinstance(value, dict)
    if isinstance(trait, traitlets.Instance):  # e.g. layout: a Layout, not a dict to build one from
        return isinstance(value, trait.klass)  # type: ignore[arg-type]
    return True  # any other trait: traitlets' own validation


class _Traits(NamedTuple):
    """A widget class's synced traits, sorted by what the error contract does with them."""

    ours: tuple[str, ...]  # declared by CircuitWidget and its subclasses: each passes `_validated`
    controls: frozenset[str]  # of ours, those the user or the browser may set (the others are read-only)
    inputs: tuple[str, ...]  # controls whose change asks for a refresh
    typed: frozenset[str]  # ours and the public synced traits of ipywidgets: checked on every user write


_TRAITS: dict[type, _Traits] = {}


def _traits_of(cls: type[CircuitWidget]) -> _Traits:
    """`cls`'s `_Traits`, worked out once per class."""
    if cls not in _TRAITS:
        def declared(attr: str) -> tuple[str, ...]:  # the union over the class and its bases, in order
            return tuple(dict.fromkeys(n for c in reversed(cls.__mro__) for n in vars(c).get(attr, ())))

        synced = cls.class_traits(sync=True)
        mine = cls.__mro__[: cls.__mro__.index(CircuitWidget) + 1]  # (not anywidget's, nor ipywidgets')
        names = dict.fromkeys(n for c in mine for n in vars(c))
        ours = tuple(n for n in names if n in synced and (n[0] != "_" or n == "_cw_view"))  # (not anywidget's _esm...)
        typed = frozenset(n for n in synced if n[0] != "_") | set(ours)
        _TRAITS[cls] = _Traits(ours, frozenset(declared("controls")), declared("inputs"), typed)
    return _TRAITS[cls]


class _Contract(traitlets.EventHandler):
    """Sets up each widget: `_validated` for every synced trait of ours, `_on_input` for the class's inputs.

    A class-level handler, as ``@validate`` and ``@observe`` are, so that a copied widget has them too.
    """

    def instance_init(self, inst: Any) -> None:
        traits = _traits_of(type(inst))
        inst._register_validator(CircuitWidget._validated, traits.ours)
        if traits.inputs:
            inst.observe(inst._on_input, names=list(traits.inputs))

    def __get__(self, inst: Any, cls: Any = None) -> _Contract:
        return self


class CircuitWidget(anywidget.AnyWidget):
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
    #: Synced traits the user or the browser may set (each class adds its own to its bases').
    controls: ClassVar[tuple[str, ...]] = ("layer", "head", "head_controls", "compact")
    #: Controls whose change recomputes the picture (each class adds its own to its bases').
    inputs: ClassVar[tuple[str, ...]] = ()
    #: Controls the view sets to ask for data (a hover, a zoom): their messages are their own, and
    #: a good one does not clear another control's (the others share one message, "controls").
    requests: ClassVar[tuple[str, ...]] = ()
    #: False for a widget drawn from data given to it, with no model (`model` is None, no view is checked).
    needs_model: ClassVar[bool] = True
    #: True for a view drawn from the weights alone (an ablated model's note then says it is unaffected).
    weights_only: ClassVar[bool] = False
    _contract = _Contract()

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
    hooks_note = traitlets.Unicode(
        "", help="'drawn under hooks: <hook points>' when the picture shown was computed with hooks on the model; '' otherwise"
    ).tag(sync=True)

    def __init_subclass__(cls, view: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        document_traits(cls)
        for name in (*vars(cls).get("controls", ()), *vars(cls).get("inputs", ())):
            if not isinstance(getattr(cls, name, None), traitlets.TraitType):
                raise TypeError(f"{cls.__name__} lists {name!r} in controls or inputs, but has no such trait")
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
        loop = running_loop()  # the kernel's loop (a notebook), where every message is handled: see `_handle_msg`
        self._home: tuple[asyncio.AbstractEventLoop, int] | None = (loop, threading.get_ident()) if loop else None
        self._timers: dict[str, asyncio.TimerHandle] = {}  # deferred work by kind; the latest of each wins
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
        self._action_view = current_view(model) if self.needs_model else None  # a clear TypeError for anything else
        super().__init__(_cw_view=self.view_name, model_note=note_of(model, self.weights_only), **kwargs)

    def _check_keywords(self, kwargs: dict[str, Any]) -> None:
        known = set(self.trait_names())
        traits = _traits_of(type(self))
        for name in [n for n in kwargs if n not in ("remote", "trace_options")]:  # (ours: a subclass may check early)
            if name not in known or name.startswith("_"):
                public = sorted(n for n in known if not n.startswith("_"))
                close = difflib.get_close_matches(name, public, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}{hint}")
            if name in traits.ours and name not in traits.controls:
                raise TypeError(f"{type(self).__name__}() got {name!r}, which the widget computes: it cannot be passed")

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
            current_view(model)  # a clear TypeError (or ValueError) now, for anything that is no model
            self._model = model
            self._sent_for.clear()
        self._set(model_note=note_of(model, self.weights_only) if note is None else note)
        if changed and not self._start_pending:  # (a deferred first refresh runs on the new model anyway)
            self._request_refresh()
        return self

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

    # ----- the error contract: every user write is checked here ------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        # A user's write (not the widget's own, see `_quietly`) is checked for type and access
        # first, so that a wrong type shows in the widget as any other refused value does.
        if not self.__dict__.get("_quiet", 1) and name in _traits_of(type(self)).typed:
            self._check_write(name, value)
        super().__setattr__(name, value)

    def _check_write(self, name: str, value: Any) -> None:
        """Refuse a user's `value` of `name` unless it has the declared type and `name` is a control."""
        traits, trait = _traits_of(type(self)), getattr(type(self), name)
        if name in traits.ours and name not in traits.controls:
            if self._ready and not self._same(name, value):  # (an echo of the value held is harmless)
                raise self._refuse(name, value, f"{name} is computed by the widget and cannot be set")
            return
        if not _fits(trait, value):
            raise self._refuse(name, value, f"{name} must be {_expected(trait)}; got {type(value).__name__} {short(value)}")
        if value is None or name not in traits.ours:  # no validator of ours follows (traitlets skips it for
            self._clear_error(self._source(name))  # an allowed None): a good value, clear its message here

    def _source(self, name: str) -> str:
        """Whose message a refusal of `name` is (see `requests`)."""
        return name if name in self.requests else "controls"

    def _validated(self, proposal: dict) -> Any:
        """The one validator of every synced trait of ours: a control's value passes its `_check_<name>`."""
        name, value = proposal["trait"].name, proposal["value"]
        if self._quiet or name not in _traits_of(type(self)).controls:  # the widget's own assignment
            return value
        check: Callable[[Any], Any] | None = getattr(self, f"_check_{name}", None)
        if value is None and proposal["trait"].allow_none:  # (as traitlets itself does outside a held update)
            check = None
        try:
            checked = value if check is None else check(value)
        except Exception as exc:  # a bug in a check or a broken model must not escape either
            raise self._refuse(name, value, exc) from None
        self._clear_error(self._source(name))  # a good value clears the message, changed or not
        return checked

    def _same(self, name: str, value: Any) -> bool:
        try:
            return bool(getattr(self, name) == value)
        except Exception:
            return False

    def _refuse(self, name: str, value: Any, reason: BaseException | str) -> traitlets.TraitError:
        """Show why `value` of `name` is refused (naming both) and return the `TraitError` to raise."""
        message = refusal(name, value, reason)
        self._rejected = (message, self._source(name))
        self._show_error(*self._rejected)
        return traitlets.TraitError(message)

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

    @contextmanager
    def _quietly(self) -> Iterator[None]:
        """Assign traits as the widget itself: no checks, no observer asking for another refresh."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _set(self, **values: Any) -> None:
        """Assign traits as the widget itself (see `_quietly`)."""
        with self._quietly():
            for name, value in values.items():
                setattr(self, name, value)

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
        self._set(error=message)

    def _clear_error(self, *sources: str) -> None:
        if self._error_source in sources:
            self._error_source = None
            self._set(error="")

    # ----- coalesced refreshes -----------------------------------------------------------------
    def _elsewhere(self) -> asyncio.AbstractEventLoop | None:
        """The kernel loop the widget was made on, when called from another thread while that loop runs."""
        home = self._home
        if home is None or home[1] == threading.get_ident() or home[0].is_closed() or not home[0].is_running():
            return None
        return home[0]

    def _handle_msg(self, msg: dict) -> None:
        # JupyterLab 4.6 sends widget messages to a kernel subshell by default ("commsOverSubshells"),
        # which ipykernel 7 runs on a thread of its own: a message could then land in the middle of a
        # refresh on the kernel's thread, its change taken for one of the widget's own (see
        # `_quietly`) and never drawn. Every message is handled on the kernel's loop, in order.
        loop = self._elsewhere()
        if loop is not None:
            loop.call_soon_threadsafe(super()._handle_msg, msg)
        else:
            super()._handle_msg(msg)

    def set_state(self, sync_data: dict[str, Any]) -> None:
        # Every browser update comes here (the comm's handler calls it). Nothing may escape: it
        # would only reach ipywidgets' message handler, a log line no one sees.
        self._frontend_depth += 1
        self._rejected = None
        try:
            if not isinstance(sync_data, dict):
                raise TypeError(f"a browser update must be a dict of trait values; got {type(sync_data).__name__}")
            traits = _traits_of(type(self))
            echoes = []
            for name, value in sync_data.items():
                if name in traits.typed:
                    value = self.trait_metadata(name, "from_json", self._trait_from_json)(value, self)
                    self._check_write(name, value)
                    if name in traits.controls and name not in self.requests and self._same(name, value):
                        echoes.append(name)
            super().set_state(sync_data)
            for name in echoes:  # (traitlets validates no unchanged value) a control's value held was checked: as
                self._clear_error(self._source(name))  # from Python, a good value clears the message, changed or not
            self._redraw_if_model_changed()  # every browser event is a user action
        except Exception as exc:
            # A refused value rolled back the whole update, the message its check showed included:
            # show it again (the last good picture stays) and put the browser's copy back in step.
            message, source = self._rejected or (described(exc), "refresh")
            self._show_error(message, source)
            if isinstance(sync_data, dict) and self.comm is not None:
                self.send_state([name for name in sync_data if name in self.keys])
        finally:
            self._frontend_depth -= 1

    @traitlets.observe("layer", "head")
    def _on_head_seen(self, change: dict) -> None:
        if change["name"] not in _traits_of(type(self)).inputs:  # (an input refreshes anyway)
            self._redraw_if_model_changed()  # a head switch draws from the payload already sent

    def _redraw_if_model_changed(self) -> None:
        """Refresh when the weights or hooks changed since the picture on screen was computed, or it failed."""
        if self._live and self._drawn_state and (self._error_source == "refresh" or self._drawn_state != self._model_state()):
            self._request_refresh()

    def _soon(self, kind: str, work: Callable[[], None], *, defer: bool = True) -> None:
        """Run `work` now, or, for a browser update in a kernel (and `defer`), once the queue is drained.

        The latest `work` of each `kind` wins. Run later, a failure shows in the widget (under
        `kind`) rather than escaping into the event loop; run now, `work` shows its own.
        """
        home = self._elsewhere()
        if home is not None:  # (a change from another thread, e.g. a widget linked to this one: work on the kernel's)
            home.call_soon_threadsafe(self._soon, kind, work)
            return
        pending = self._timers.pop(kind, None)
        if pending is not None:
            pending.cancel()
        loop = running_loop() if self._frontend_depth and defer else None
        if loop is None:
            work()
        else:
            self._timers[kind] = loop.call_later(COALESCE_S, self._guarded, kind, work)

    def _guarded(self, kind: str, work: Callable[[], None]) -> None:
        self._timers.pop(kind, None)
        if self._closed:
            return
        try:
            work()
        except Exception as exc:
            self._show_error(described(exc), kind)

    def _request_refresh(self) -> None:
        """Refresh now for changes made in Python; for browser changes, once the queue is drained.

        A refresh already waiting is replaced, so a burst of edits costs one model run on the
        latest state (the latest request wins, no backlog). Before `_start` this does nothing.
        """
        if self._live:
            self._soon("refresh", functools.partial(self._run_refresh, raise_bugs=not self._frontend_depth))

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

    def _computing(self) -> bool:
        """True while a run started by the last refresh goes on elsewhere (a long prompt on the worker thread)."""
        return False

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
        timers, self._timers = getattr(self, "_timers", {}), {}  # none too when __init__ failed early
        for timer in timers.values():
            timer.cancel()
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
