"""Options declared once: every analysis's settings as one frozen type.

An analysis's options are a frozen dataclass derived from :class:`Options`; each field is
declared with :func:`option` — its default, limits or choices, help text, page label and
any extra check — and that one declaration drives everything else (LIT's ``config_spec()``
is the model):

- the **API** checks through it: ``terms(enc, text=…, top=5)`` builds
  ``TermsOptions.of(top=5)``; a wrong type or value is a :class:`InputError` naming the
  option, an unknown keyword names itself;
- the **command line** derives its flags from it (``--top``, ``--gate-k``: the field name with
  dashes; :func:`lexlens.app.cli.common.add_options`) and parses the typed text through
  :meth:`Options.from_text`;
- the **pages** derive their widgets from it (:func:`lexlens.app.views.widgets.option_widget`:
  slider, number, choice, toggle or text, with the same label, limits and help).

So a limit and its message live in one place, and CLI, page and API say the same thing.
Options shared by several analyses are declared once (:func:`shared_option`: the query
mode, the batch size and the seed here, the gate ``gate_k`` beside the gate in
:mod:`.gating`) and used through :func:`shared`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from lexlens.models.base import InputError

_SPEC = "lexlens_option"
#: Options renamed to one spelling everywhere: the old name is refused naming the new one
#: (as a keyword here; as a flag, ``--topk``, by the command line).
RENAMED_OPTIONS = {
    "topk": "gate_k",
    "rows": "max_rows",
    "text_column": "text_columns",
    "mode": "query_mode",
}


class OptionError(InputError):
    """A wrong value of one declared option; the message starts with the option's name,
    which the command line spells as its flag (:meth:`as_flag`)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name

    def as_flag(self) -> str:
        """The message with the option named as its command-line flag (``--gate-k``)."""
        text = str(self)
        flag = "--" + self.name.replace("_", "-")
        return flag + text[len(self.name) :] if text.startswith(self.name) else text


@dataclass(frozen=True)
class Spec:
    """How one option is checked, offered on the command line and drawn on a page."""

    help: str
    low: float | None = None  # inclusive limits of a number
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    label: str = ""  # the page's label (default: the name in words)
    widget: str = ""  # slider | number | radio | select | toggle | text ("": from the type)
    step: float | None = None
    cli: bool = True  # offered as a flag (False: API and pages only)
    metavar: str | None = None
    #: An extra check after the type and limits: returns the (normalised) value or raises.
    check: Callable[[Any], Any] | None = None
    #: The command line's text → value (default: from the declared type).
    parse: Callable[[str], Any] | None = None
    #: What a valid value is, in words, when the type and limits do not say it well.
    wanted: str = ""


def integer_list(text: str) -> Any:
    """A command line's list of integers, separated by commas or spaces (``1,3,5``): a tuple,
    or the text as given when a part is not an integer (the option's check refuses it)."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return text


def option(default: Any = dataclasses.MISSING, help: str = "", **spec: Any) -> Any:
    """A field of an :class:`Options` type: its default and its :class:`Spec`."""
    kwargs: dict[str, Any] = {"metadata": {_SPEC: Spec(help=help, **spec)}}
    if isinstance(default, (list, dict, set)):
        kwargs["default_factory"] = lambda value=default: type(value)(value)
    elif default is not dataclasses.MISSING:
        kwargs["default"] = default
    return dataclasses.field(**kwargs)


@dataclass(frozen=True)
class Declared:
    """One option as declared: its name, base type, whether ``None`` is allowed, default, spec."""

    name: str
    kind: type
    optional: bool
    default: Any
    spec: Spec

    @property
    def flag(self) -> str:
        """Its command-line flag: the name with dashes."""
        return "--" + self.name.replace("_", "-")

    @property
    def label(self) -> str:
        """Its label on a page."""
        return self.spec.label or self.name.replace("_", " ").capitalize()

    def wanted(self) -> str:
        """What a valid value is, in words (for messages and help)."""
        spec, kind = self.spec, self.kind
        if spec.wanted:
            text = spec.wanted
        elif spec.choices is not None:
            text = "one of " + ", ".join(str(c) for c in spec.choices)
        elif kind is bool:
            text = "true or false"
        elif kind in (int, float):
            noun = "an integer" if kind is int else "a number"
            low, high = spec.low, spec.high
            if low is not None and high is not None:
                text = f"{noun} from {_num(low)} to {_num(high)}"
            elif low is not None:
                text = f"{noun} ≥ {_num(low)}"
            elif high is not None:
                text = f"{noun} ≤ {_num(high)}"
            else:
                text = f"a finite {noun.split()[-1]}" if kind is float else noun
        elif kind is str:
            text = "text"
        else:
            text = getattr(kind, "__name__", str(kind))
        return text + (" (or none)" if self.optional else "")

    def help_line(self) -> str:
        """Its help as a flag shows it: what it is, what a valid value is, its default."""
        if self.default is dataclasses.MISSING:
            return f"{self.spec.help} ({self.wanted()})"
        shown = "none" if self.default is None else self.default
        return f"{self.spec.help} ({self.wanted()}; default {shown})"

    def refuse(self, value: Any) -> OptionError:
        """The one message for a wrong value of this option."""
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "…"
        return OptionError(self.name, f"{self.name} must be {self.wanted()}, not {shown}")

    def check(self, value: Any) -> Any:
        """``value`` checked against the type, limits and choices (normalised), or an error."""
        if value is None:
            if self.optional:
                return None
            raise self.refuse(value)
        value = self._typed(value)
        spec = self.spec
        if spec.choices is not None and value not in spec.choices:
            raise self.refuse(value)
        below = spec.low is not None and self.kind in (int, float) and value < spec.low
        above = spec.high is not None and self.kind in (int, float) and value > spec.high
        if below or above:
            raise self.refuse(value)
        return self._own(spec.check, value) if spec.check is not None else value

    def _own(self, step: Callable[[Any], Any], value: Any) -> Any:
        """``step(value)`` (the declaration's own check or parse), its refusal named as this
        option (``box: …``; the command line spells it ``--box: …``)."""
        try:
            return step(value)
        except OptionError:
            raise
        except InputError as exc:
            raise OptionError(self.name, f"{self.name}: {exc}") from None

    def _typed(self, value: Any) -> Any:
        """``value`` as the declared type (numpy scalars become Python ones), or an error: a
        truth value (``True``, ``np.True_``) is no number, an array is no scalar."""
        kind = self.kind
        truth = isinstance(value, (bool, np.bool_))
        if kind is bool:
            if not truth:
                raise self.refuse(value)
            return bool(value)
        if truth or (kind in (int, float) and isinstance(value, np.ndarray)):
            raise self.refuse(value)
        if kind is int:
            try:
                return int(operator.index(value))
            except TypeError:
                raise self.refuse(value) from None
        if kind is float:
            try:
                number = float(value) if isinstance(value, typing.SupportsFloat) else math.nan
            except (TypeError, ValueError, OverflowError):  # a huge integer has no float
                number = math.nan
            if not math.isfinite(number):
                raise self.refuse(value)
            return number
        if kind is str and not isinstance(value, str):
            raise self.refuse(value)
        if kind in (tuple, list):
            if not isinstance(value, (tuple, list)):
                raise self.refuse(value)
            return kind(value)
        return value

    def from_text(self, text: str) -> Any:
        """The value of a command-line text (checked like any value)."""
        if self.spec.parse is not None:
            return self.check(self._own(self.spec.parse, text))
        if self.optional and self.kind is not str and text.strip().lower() in ("", "none"):
            return None  # a text option keeps what was typed ("none" may be a query)
        try:
            if self.kind is int:
                return self.check(int(text.strip()))
            if self.kind is float:
                return self.check(float(text.strip()))
        except ValueError:
            raise self.refuse(text) from None
        if self.kind is bool:
            words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
            if text.strip().lower() not in words:
                raise self.refuse(text)
            return self.check(words[text.strip().lower()])
        if self.spec.choices is not None:  # choices given as text on the command line
            match = [c for c in self.spec.choices if str(c) == text]
            return self.check(match[0] if match else text)
        return self.check(text)


def _num(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _base_type(hint: Any) -> tuple[type, bool]:
    """(the base type, whether ``None`` is allowed) of a field's type hint."""
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        hint = args[0] if len(args) == 1 else object
        origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return type(typing.get_args(hint)[0]), optional
    return (origin or hint if isinstance(origin or hint, type) else object), optional


@dataclass(frozen=True)
class Options:
    """Base of every analysis's options (see the module docstring)."""

    #: What these options are for, in messages ("terms", "search"…).
    what: typing.ClassVar[str] = "this analysis"

    def __post_init__(self) -> None:
        for declared in self.declared():
            object.__setattr__(self, declared.name, declared.check(getattr(self, declared.name)))

    @classmethod
    def declared(cls) -> list[Declared]:
        """Every option of this type, in declaration order."""
        return _declarations(cls)

    @classmethod
    def option(cls, name: str) -> Declared:
        """The declaration of one option."""
        for declared in cls.declared():
            if declared.name == name:
                return declared
        raise KeyError(name)

    @classmethod
    def of(cls, options: Self | None = None, /, **given: Any) -> Self:
        """``options`` (or the defaults) with ``given`` keyword values, all checked; an unknown
        keyword is refused naming itself and the known ones."""
        names = [d.name for d in cls.declared()]
        unknown = [k for k in given if k not in names]
        if unknown and RENAMED_OPTIONS.get(unknown[0]) in names:
            raise InputError(
                f"{unknown[0]!r} is now {RENAMED_OPTIONS[unknown[0]]!r} (one spelling per option)"
            )
        if unknown:
            raise InputError(
                f"{unknown[0]!r} is not an option of {cls.what} (options: {', '.join(names)})"
            )
        if options is None:
            return cls(**given)
        if not isinstance(options, cls):
            raise InputError(f"options must be {cls.__name__}, not {type(options).__name__}")
        return dataclasses.replace(options, **given) if given else options

    @classmethod
    def from_texts(cls, texts: dict[str, str | bool | None]) -> Self:
        """Options from command-line values (text, or bools of switches; ``None``: not given)."""
        values = {}
        for name, text in texts.items():
            if text is None:
                continue
            declared = cls.option(name)
            values[name] = text if isinstance(text, bool) else declared.from_text(text)
        return cls.of(**values)

    def to_dict(self) -> dict[str, Any]:
        """The options as a plain mapping (field name → value)."""
        return {d.name: getattr(self, d.name) for d in self.declared()}


@functools.cache
def _declarations(options_type: type[Options]) -> list[Declared]:
    hints = typing.get_type_hints(options_type)
    out = []
    for f in dataclasses.fields(options_type):
        spec = f.metadata.get(_SPEC) or Spec(help="")
        kind, optional = _base_type(hints[f.name])
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        out.append(Declared(f.name, kind, optional, default, spec))
    return out


def checked(options_type: type[Options], name: str, value: Any) -> Any:
    """One option's value checked alone (for an analysis that takes it as a plain argument)."""
    return options_type.option(name).check(value)


def names(options_type: type[Options]) -> Sequence[str]:
    """The option names of a type, in declaration order."""
    return [d.name for d in options_type.declared()]


def shared(declared: Declared, default: Any = dataclasses.MISSING, **override: Any) -> Any:
    """A field for an option several analyses share: the same spec (check, limits, help),
    its own default; ``override`` changes page-only details (``label``, ``widget``)."""
    spec = dataclasses.replace(declared.spec, **override) if override else declared.spec
    value = declared.default if default is dataclasses.MISSING else default
    return dataclasses.field(default=value, metadata={_SPEC: spec})


def shared_option(
    name: str, kind: type, default: Any, optional: bool = False, **spec: Any
) -> Declared:
    """The declaration of an option several analyses share (each uses it through
    :func:`shared`, and checks a lone value with its ``check``)."""
    return Declared(name, kind, optional, default, Spec(**spec))


#: How a text query is encoded: VDR's parametric E_q = V ⊙ G, or its binary bag of words.
QUERY_MODE = shared_option(
    "query_mode",
    str,
    "parametric",
    choices=("parametric", "bow"),
    label="Query mode",
    widget="radio",
    help="parametric: the query encoder's gated vector; bow: the binary bag "
    "of the query's own tokens (VDR's nonparametric query, no network forward)",
)
#: The most inputs encoded at once: memory grows with the batch.
MAX_BATCH_SIZE = 4096
BATCH_SIZE = shared_option(
    "batch_size",
    int,
    16,
    low=1,
    high=MAX_BATCH_SIZE,
    label="Batch size",
    widget="number",
    help="inputs encoded at once (memory grows with the batch)",
)
#: Seeds of random sampling and k-means: a non-negative 32-bit integer (faiss's range).
SEED = shared_option(
    "seed",
    int,
    0,
    low=0,
    high=2**31 - 1,
    label="Seed",
    widget="number",
    help="seed of the random choices (the same seed, the same result)",
)
