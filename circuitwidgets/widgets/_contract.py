"""The error contract of every widget: what a user may set, how a value is checked, how a refusal is shown.

Every value a user sets, from Python (`Contract.__setattr__`) or from the browser
(`Contract.set_state`), passes `Contract._check_write` (the declared type, strictly: no bool for a
number, no NaN; and only `controls` may be set, the other traits are computed) and then, through the
one validator `Contract._validated`, the class's ``_check_<name>`` method. A refused value raises
`traitlets.TraitError` from Python, and in both cases its message, naming the trait and the value,
shows in the widget's `error` while the value and the picture stay as they were. `set_state` never
raises.

Example:
    >>> refusal("layer", 7, ValueError("out of range: 0..1"))
    'layer=7: out of range: 0..1'
    >>> refusal("layer", 7, "layer must be an int")
    'layer must be an int'
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, NamedTuple

import anywidget
import traitlets

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


class RefusedType(traitlets.TraitError, TypeError):
    """A widget refused a value of the wrong type (caught as `traitlets.TraitError` or as `TypeError`)."""


class RefusedValue(traitlets.TraitError, ValueError):
    """A widget refused a value (caught as `traitlets.TraitError` or as `ValueError`)."""


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


# ----- which traits the contract checks ---------------------------------------------------------
class _Traits(NamedTuple):
    """A widget class's synced traits, sorted by what the error contract does with them."""

    ours: tuple[str, ...]  # declared by the widget classes of this package (and their subclasses): each passes `_validated`
    controls: frozenset[str]  # of ours, those the user or the browser may set (the others are read-only)
    inputs: tuple[str, ...]  # controls whose change asks for a refresh
    typed: frozenset[str]  # ours and the public synced traits of ipywidgets: checked on every user write


_TRAITS: dict[type, _Traits] = {}


def _traits_of(cls: type) -> _Traits:
    """`cls`'s `_Traits`, worked out once per class."""
    if cls not in _TRAITS:
        def declared(attr: str) -> tuple[str, ...]:  # the union over the class and its bases, in order
            return tuple(dict.fromkeys(n for c in reversed(cls.__mro__) for n in vars(c).get(attr, ())))

        synced = cls.class_traits(sync=True)  # type: ignore[attr-defined]
        mine = cls.__mro__[: cls.__mro__.index(anywidget.AnyWidget)]  # (not anywidget's, nor ipywidgets')
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
        inst._register_validator(Contract._validated, traits.ours)
        if traits.inputs:
            inst.observe(inst._on_input, names=list(traits.inputs))

    def __get__(self, inst: Any, cls: Any = None) -> _Contract:
        return self


class Contract(anywidget.AnyWidget):
    """The error contract, mixed into `CircuitWidget`: every user write checked, every refusal shown.

    A class declares its `controls`, `inputs` and `requests` (each adds its own to its bases') and a
    ``_check_<name>`` method for any control that needs more than its type. Messages show in the
    widget's ``error`` trait (declared by `CircuitWidget`); the widget's own assignments
    (`_quietly`, `_set`) skip every check.
    """

    #: Synced traits the user or the browser may set (each class adds its own to its bases').
    controls: ClassVar[tuple[str, ...]] = ()
    #: Controls whose change recomputes the picture (each class adds its own to its bases').
    inputs: ClassVar[tuple[str, ...]] = ()
    #: Controls the view sets to ask for data (a hover, a zoom): their messages are their own, and
    #: a good one does not clear another control's (the others share one message, "controls").
    requests: ClassVar[tuple[str, ...]] = ()
    _contract = _Contract()
    _ready = False  # the widget has its first picture (or is computing it): a computed trait's echo is harmless before
    _error_source: str | None = None  # whose message `error` shows: a control's, "controls", "refresh"...
    _rejected: tuple[str, str] | None = None  # message and source of the last refused value

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in (*vars(cls).get("controls", ()), *vars(cls).get("inputs", ())):
            if not isinstance(getattr(cls, name, None), traitlets.TraitType):
                raise TypeError(f"{cls.__name__} lists {name!r} in controls or inputs, but has no such trait")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._quiet = 0  # (until set, every assignment is the widget's own: see __setattr__)
        super().__init__(*args, **kwargs)

    def _check_keywords(self, kwargs: dict[str, Any]) -> None:
        """Refuse a constructor keyword that names no trait, or a trait the widget computes."""
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

    # ----- the widget's own assignments --------------------------------------------------------
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

    # ----- messages in the widget --------------------------------------------------------------
    def _show_error(self, message: str, source: str) -> None:
        """Show `message` in the widget; `source` lets a later success clear only its own error."""
        self._error_source = source
        self._set(error=message)

    def _clear_error(self, *sources: str) -> None:
        if self._error_source in sources:
            self._error_source = None
            self._set(error="")

    # ----- every user write is checked here ----------------------------------------------------
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
            message = f"{name} must be {_expected(trait)}; got {type(value).__name__} {short(value)}"
            raise self._refuse(name, value, message, wrong_type=True)
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
        reason = (getattr(self, "unsupported", None) or {}).get(name)
        if reason and self._ready and not self._same(name, value):  # a control this model's backend cannot serve
            raise self._refuse(name, value, reason)
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

    def _refuse(self, name: str, value: Any, reason: BaseException | str, *, wrong_type: bool = False) -> traitlets.TraitError:
        """Show why `value` of `name` is refused (naming both) and return the error to raise: a `TraitError` that is
        also a `TypeError` (a value of the wrong type) or a `ValueError` (any other), as the contract says."""
        message = refusal(name, value, reason)
        self._rejected = (message, self._source(name))
        self._show_error(*self._rejected)
        return (RefusedType if wrong_type or isinstance(reason, TypeError) else RefusedValue)(message)

    def set_state(self, sync_data: dict[str, Any]) -> None:
        # Every browser update comes here (the comm's handler calls it). Nothing may escape: it
        # would only reach ipywidgets' message handler, a log line no one sees.
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
            self._on_user_action()  # every browser event is a user action
        except Exception as exc:
            # A refused value rolled back the whole update, the message its check showed included:
            # show it again (the last good picture stays) and put the browser's copy back in step.
            message, source = self._rejected or (described(exc), "refresh")
            self._show_error(message, source)
            if isinstance(sync_data, dict) and self.comm is not None:
                self.send_state([name for name in sync_data if name in self.keys])

    # ----- what the widget class does with the writes it accepted (`CircuitWidget`) ------------
    def _on_input(self, change: dict) -> None:
        """A change of one of the class's `inputs`."""

    def _on_user_action(self) -> None:
        """A browser update was applied."""
