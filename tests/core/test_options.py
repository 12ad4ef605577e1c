"""Options declared once: what a declaration accepts for each type, and how it says no."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from lexlens.analysis.core.options import OptionError, Options, option


@dataclass(frozen=True)
class Toy(Options):
    what = "the toy"

    count: int = option(5, "how many", low=1, high=100)
    scale: float = option(0.5, "a scale", low=0.0, high=10.0)
    flag: bool = option(False, "a switch")


#: Values no option of that name takes, of a kind that used to slip past or break the check.
WRONG = [
    ("count", np.array([1, 2])), ("count", np.array(3)), ("count", 10**400),
    ("count", np.True_), ("count", True), ("count", "3"), ("count", 3.0),
    ("scale", np.array([1.0, 2.0])), ("scale", np.array([1.5])), ("scale", 10**400),
    ("scale", -(10**400)), ("scale", np.True_), ("scale", True), ("scale", "0.5"),
    ("scale", b"0.5"), ("scale", float("nan")), ("scale", None), ("flag", 1),
    ("flag", "yes"), ("flag", np.array([True])),
]  # fmt: skip


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
