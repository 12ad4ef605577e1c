"""Counts and numbers as a reader reads them: "1 relevant item", "3 relevant items", "1 query
has"; a measure to four significant digits, "-" where there is none."""

from __future__ import annotations

#: Nouns whose plural is not the noun with an "s" (the last word of a counted phrase).
IRREGULAR = {"query": "queries", "entry": "entries", "index": "indexes", "match": "matches"}


def plural(noun: str) -> str:
    """The plural of a counted noun or phrase (its last word): ``relevant item`` → ``relevant
    items``, ``query`` → ``queries``."""
    head, _, last = noun.rpartition(" ")
    many = IRREGULAR.get(last, last + "s")
    return f"{head} {many}" if head else many


def counted(n: int | float, one: str, many: str | None = None, *, grouped: bool = False) -> str:
    """``n`` and the noun that agrees with it: ``counted(1, "relevant item")`` → "1 relevant
    item", ``counted(3, "query")`` → "3 queries"; ``many`` for a plural :func:`plural` does
    not know ("query has" / "queries have"); ``grouped``: thousands separated (12,345)."""
    number = f"{n:,}" if grouped else f"{n}"
    return f"{number} {one if n == 1 else (many or plural(one))}"


def figure(value: float | None) -> str:
    """A measure in a text line: four significant digits, "-" for a measure not defined."""
    return "-" if value is None else f"{value:.4g}"
