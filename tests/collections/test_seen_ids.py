"""The build's register of ids against a plain Python set: the same first repeated id of
every batch, one at a time and in batches, across level merges, nothing registered from a
batch it refuses; and its memory, 16 bytes an id, measured by its arrays' sizes."""

from __future__ import annotations

import random

import pytest

from lexlens.analysis.collections.seen_ids import PENDING, SeenIds


def _first_repeated(seen: set[str], batch: list[str]) -> int | None:
    """The reference: the first id of ``batch`` in ``seen`` or earlier in ``batch``."""
    here: set[str] = set()
    for n, item in enumerate(batch):
        if item in seen or item in here:
            return n
        here.add(item)
    return None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_silent_wrong_repeated_ids_are_found_as_a_set_finds_them(seed):
    rng = random.Random(seed)
    pool = [f"doc-{n}" for n in range(40_000)] + ["é", "\ud800", "", "a b", "x" * 5000]
    seen, register = set(), SeenIds()
    for _ in range(300):
        size = rng.choice([1, 1, 1, 3, 50, 700, 4000])
        batch = [rng.choice(pool) for _ in range(size)]
        want = _first_repeated(seen, batch)
        assert [i in register for i in batch[:20]] == [i in seen for i in batch[:20]]
        assert register.add(batch) == want
        if want is None:  # registered whole
            seen.update(batch)
        else:  # nothing registered: the batch's new ids go in one by one
            for item in dict.fromkeys(batch):
                assert register.add([item]) == (0 if item in seen else None)
                seen.add(item)
        assert len(register) == len(seen)
    assert all(i in register for i in seen)
    assert not any(f"other-{n}" in register for n in range(1000))


def test_unbounded_an_id_costs_sixteen_bytes_after_the_pending_strings():
    register = SeenIds()
    for start in range(0, 200_000, 8192):
        register.add([f"item-{n}" for n in range(start, min(start + 8192, 200_000))])
    for n in range(PENDING + 5):  # one at a time: held as strings up to PENDING, then hashed
        register.add([f"one-{n}"])
    held = sum(level.nbytes for level in register._levels)
    assert held == 16 * (200_000 + PENDING)
    assert len(register._pending) == 5
    assert len(register._levels) <= 2 * (200_000 + PENDING).bit_length()
