"""Options declared once: what a declaration accepts for each type, and how it says no."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from lexlens.analysis.core.options import OptionError, Options, option
from lexlens.models.base import InputError


@dataclass(frozen=True)
class Toy(Options):
    what = "the toy"

    count: int = option(5, "how many", low=1, high=100)
    scale: float = option(0.5, "a scale", low=0.0, high=10.0)
    flag: bool = option(False, "a switch")


#: Values no option of that name takes, of a kind that used to slip past or break the check.
WRONG = [
    ("count", np.array([1, 2])),
    ("count", np.array(3)),
    ("count", 10**400),
    ("count", np.True_),
    ("count", True),
    ("count", "3"),
    ("count", 3.0),
    ("scale", np.array([1.0, 2.0])),
    ("scale", np.array([1.5])),
    ("scale", 10**400),
    ("scale", -(10**400)),
    ("scale", np.True_),
    ("scale", True),
    ("scale", "0.5"),
    ("scale", b"0.5"),
    ("scale", float("nan")),
    ("scale", None),
    ("flag", 1),
    ("flag", "yes"),
    ("flag", np.array([True])),
]


@pytest.mark.parametrize(("name", "value"), WRONG, ids=[f"{n}={v!r:.24}" for n, v in WRONG])
def test_traceback_a_value_of_the_wrong_kind_is_refused_naming_the_option(name, value):
    """An array, a number beyond any float, a truth value for a number: one line that
    names the option, never a TypeError or an OverflowError."""
    with pytest.raises(OptionError) as info:
        Toy.of(**{name: value})
    assert str(info.value).startswith(f"{name} must be ") and info.value.name == name


def test_silent_wrong_numpy_values_count_as_their_python_kind():
    """``np.True_`` is a truth value: taken by a switch (as ``True``), never taken as 1.0
    by a number (``True`` was refused there while ``np.True_`` passed); numpy numbers
    become Python ones."""
    options = Toy.of(flag=np.True_, count=np.int64(7), scale=np.float32(0.25))
    assert options.flag is True and Toy.of(flag=np.False_).flag is False
    assert options.count == 7 and type(options.count) is int
    assert options.scale == 0.25 and type(options.scale) is float
    assert Toy.of(scale=3).scale == 3.0 and type(Toy.of(scale=3).scale) is float


def _even(value: int) -> int:
    if value % 2:
        raise InputError(f"{value} is odd: give an even number")
    return value


def _pair(text: str) -> tuple[str, ...]:
    parts = tuple(text.split(","))
    if len(parts) != 2:
        raise InputError(f"{text!r} is not two names joined by a comma")
    return parts


@dataclass(frozen=True)
class Checked(Options):
    size: int = option(2, "an even size", low=0, high=100, check=_even)
    names: tuple = option(("a", "b"), "two names", parse=_pair)


def test_traceback_a_declarations_own_refusal_names_its_option():
    """A declaration's own check or parse that raises a plain InputError is named as the
    option (the API: ``size: …``; the command line: ``--size: …``), as the type and limit
    checks are: the user learns which flag to fix."""
    with pytest.raises(OptionError) as info:
        Checked.of(size=3)
    assert (info.value.name, str(info.value)) == ("size", "size: 3 is odd: give an even number")
    assert info.value.as_flag() == "--size: 3 is odd: give an even number"
    with pytest.raises(OptionError) as info:
        Checked.from_texts({"names": "a,b,c"})
    assert info.value.as_flag() == "--names: 'a,b,c' is not two names joined by a comma"
    with pytest.raises(OptionError, match="^size must be an integer from 0 to 100, not 101$"):
        Checked.of(size=101)  # the declaration's own wording stays as it was


def test_traceback_the_box_flag_is_named_when_its_text_is_refused(cli):
    from tests.helpers import one_line_error

    run = cli("terms", "--encoder", "splade-tiny", "--text", "a cat", "--box", "a,b,c,d")
    one_line_error(run, "--box: bad box 'a,b,c,d'")
