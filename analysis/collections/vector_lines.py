"""JsonVectorCollection lines read many at a time with numpy, for :mod:`.vector_import`.

A line of the usual shape ``{..., "vector": {"term": weight, ...}}`` (the vector object
last, its members written ``"t": w`` or ``"t":w`` and separated by ``", "`` or ``","``) is
read over the bytes of a whole batch of lines: the string delimiters are the quotes not
escaped by an odd run of backslashes; each term's bytes are looked up in a hash table of
the vocabulary's spellings (its UTF-8 bytes and the escaped forms ``json.dumps`` writes),
a spelling it lacks decoded by orjson; integer impacts of up to 8 digits are read eight
bytes at a time (SWAR), every other number by orjson over the numbers alone (so its value
is orjson's, bit for bit). The rest of the line, its vector replaced by ``0``, is parsed by
orjson (or, ``{"id": "…", "contents": "…", `` with no escape, taken as those bytes): the
vector being the top object's last member, that ``0`` is the value its ``"vector"`` key
keeps, and the line is valid JSON exactly when that text is. A line whose every byte of the
vector object is not
accounted for this way (other whitespace or order, a nested value, a term this reader
cannot decode, a number beyond these forms) is left to the per-line reader, which keeps
every rule and message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import orjson

#: Zero bytes after a batch's lines, so that an 8-byte read at any byte stays inside.
PAD = b"\0" * 64
#: The longest term spelling (bytes between its quotes) and number the table and the
#: readers take; a longer one is left to the per-line reader.
MAX_TERM = 32
MAX_NUMBER = 24
#: The table's buckets: 2**BUCKET_BITS by the top bits of a spelling's hash.
BUCKET_BITS = 18

_U = np.uint64
#: Masks keeping a word's first 0..8 bytes.
WORD_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)
_ZEROS = _U(0x3030303030303030)
_LOW7 = _U(0x7F7F7F7F7F7F7F7F)
_TEN = _U(0x7676767676767676)
_HIGH = _U(0x8080808080808080)
_PAIRS = _U(0x000000FF000000FF)
_VECTOR = _U(int.from_bytes(b"vector", "little"))
_SIX = _U((1 << 48) - 1)
#: Odd multipliers of a spelling's hash (its four 8-byte words and its length).
_KEYS = np.array(
    [
        0x9E3779B97F4A7C15,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0xD6E8FEB86659FD93,
        0xFF51AFD7ED558CCD,
    ],
    dtype=np.uint64,
)
#: Bytes a JSON number is written with.
_NUMBER_BYTES = np.zeros(256, bool)
_NUMBER_BYTES[list(b"0123456789+-.eE")] = True
_FLOAT_BYTES = np.zeros(256, bool)
_FLOAT_BYTES[list(b".eE")] = True


def u64_view(buf: bytes) -> np.ndarray:
    """The 8 bytes from each offset of ``buf`` as a little-endian uint64 (a strided view)."""
    return np.ndarray((len(buf) - 7,), np.dtype("<u8"), buf, 0, (1,))


def spelling_hash(words: list[np.ndarray], length: np.ndarray) -> np.ndarray:
    """A spelling's 64-bit hash from its 8-byte words (zero past its end) and length."""
    h = length.astype(np.uint64) * _KEYS[4]
    for k, w in enumerate(words):
        h ^= w * _KEYS[k]
    return h


def _spelling_words(spellings: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Each spelling (at most :data:`MAX_TERM` bytes) as four zero-padded words, its length."""
    raw = b"".join(s.ljust(MAX_TERM, b"\0") for s in spellings)
    words = np.frombuffer(raw, dtype="<u8").reshape(-1, MAX_TERM // 8).astype(np.uint64)
    return words, np.array([len(s) for s in spellings], np.int64)


class TermTable:
    """Term spellings, as a JSON line writes them between quotes, → vocabulary ids: each
    token's UTF-8 bytes (when they need no escape) and its ``json.dumps`` forms with and
    without ``ensure_ascii``, in an open-addressing table of their 64-bit hashes (linear
    probing). A hit is exact: a spelling of up to 8 bytes is one word, which its hash and
    length determine (the hash multiplies it by an odd number); a longer one is compared
    word by word."""

    def __init__(self) -> None:
        self.covered = 0
        self._spellings: list[bytes] = []
        self._ids: list[int] = []
        self.size = 0

    def extend(self, tokens: list[str], ids: dict[str, int]) -> None:
        """Add the spellings of ``tokens[covered:]`` (their ids as ``ids`` gives them):
        into the slots while they stay at most half full, else all placed anew."""
        if self.covered == len(tokens):
            return
        spellings: list[bytes] = []
        numbers: list[int] = []
        for token in tokens[self.covered :]:
            try:
                plain = json.dumps(token, ensure_ascii=False)[1:-1].encode("utf-8")
            except UnicodeEncodeError:
                continue  # a lone surrogate: no JSON text orjson reads spells it
            ascii_form = json.dumps(token)[1:-1].encode("ascii")
            for spelling in [plain] if plain == ascii_form else [plain, ascii_form]:
                if len(spelling) <= MAX_TERM:
                    spellings.append(spelling)
                    numbers.append(ids[token])
        self.covered = len(tokens)
        self._spellings += spellings
        self._ids += numbers
        if self.size and 2 * len(self._spellings) <= self.size:
            self._place(spellings, numbers)
            return
        bits = max(10, int(len(self._spellings) * 4).bit_length())
        self.shift = _U(64 - bits)
        self.size = 1 << bits
        self.taken = np.zeros(self.size, bool)
        # a slot: the hash, and id << 8 | length (-1: empty), read at once
        self.slots = np.zeros(self.size, dtype=[("hash", "<u8"), ("info", "<i8")])
        self.slots["info"] = -1
        self.words = [np.zeros(self.size, np.uint64) for _ in range(MAX_TERM // 8)]
        self._place(self._spellings, self._ids)

    def _place(self, spellings: list[bytes], numbers: list[int]) -> None:
        """Put spellings in free slots by linear probing, all at once: in round ``r`` each
        one left tries its home slot + ``r`` (so every slot between an entry's home and its
        own is taken, and a lookup may stop at the first free one)."""
        if not spellings:
            return
        words, lengths = _spelling_words(spellings)
        hashes = spelling_hash([words[:, k] for k in range(words.shape[1])], lengths)
        slot_of = np.full(len(hashes), -1, np.int64)
        home = (hashes >> self.shift).astype(np.int64)
        todo = np.arange(len(hashes))
        step = 0
        while todo.size:
            want = (home[todo] + step) & (self.size - 1)
            free = ~self.taken[want]
            slots, first = np.unique(want[free], return_index=True)
            placed = todo[free][first]
            slot_of[placed] = slots
            self.taken[slots] = True
            todo = np.setdiff1d(todo, placed, assume_unique=True)
            step += 1
        self.slots["hash"][slot_of] = hashes
        self.slots["info"][slot_of] = (np.asarray(numbers, np.int64) << 8) | lengths
        for k, column in enumerate(self.words):
            column[slot_of] = words[:, k]

    def lookup(
        self, words: list[np.ndarray] | None, length: np.ndarray, h: np.ndarray
    ) -> np.ndarray:
        """The id of each spelling (``-1``: not in the table): its hash and length match,
        and (``words`` given: spellings over 8 bytes) its words."""
        if not self.size:
            return np.full(len(h), -1, np.int64)
        slot = (h >> self.shift).astype(np.int64)
        found = self.slots[slot]
        info = found["info"]
        hit = found["hash"] == h
        hit &= (info & 255) == length
        if words is not None:
            for k, w in enumerate(words):
                hit &= self.words[k][slot] == w
        ids = np.where(hit, info >> 8, -1)
        todo = np.flatnonzero(~hit & (info >= 0))
        mask = self.size - 1
        while todo.size:  # probe on until the spelling or an empty slot
            at = (slot[todo] + 1) & mask
            slot[todo] = at
            found = self.slots[at]
            info = found["info"]
            hit = (found["hash"] == h[todo]) & ((info & 255) == length[todo])
            if words is not None:
                for k, w in enumerate(words):
                    hit &= self.words[k][at] == w[todo]
            ids[todo[hit]] = info[hit] >> 8
            todo = todo[~hit & (info >= 0)]
        return ids


@dataclass
class Batch:
    """Complete lines of one part: its bytes (padded with :data:`PAD`), each non-blank
    line's start, end (before its newline) and number, and the control bytes other than
    newlines inside them."""

    buf: bytes
    starts: np.ndarray
    ends: np.ndarray
    numbers: np.ndarray
    controls: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def split(self, n: int) -> tuple[Batch, Batch]:
        """The first ``n`` lines and the rest."""
        a, b = self.starts, self.ends
        cut = self.ends[n - 1] if n else self.starts[0]
        left = self.controls < cut
        return (
            Batch(self.buf, a[:n], b[:n], self.numbers[:n], self.controls[left]),
            Batch(self.buf, a[n:], b[n:], self.numbers[n:], self.controls[~left]),
        )


@dataclass
class Parsed:
    """What the batch reader found: per line whether it was read here, where its vector
    object starts and, for a line ``{"id": "…", "contents": "…", "vector": …`` with no
    escape before its vector (``plain``), where its id and text lie between their quotes;
    per weight of those lines, in order, its line, term id (from the table; ``-1``: not
    in it), value and whether it was a float."""

    ok: np.ndarray
    vector_at: np.ndarray
    sizes: np.ndarray
    term_line: np.ndarray
    term_open: np.ndarray
    term_close: np.ndarray
    ids: np.ndarray
    values: np.ndarray
    floats: np.ndarray
    plain: np.ndarray
    fields: np.ndarray  # [n, 4]: the id's first byte and end, the text's


def _unescaped(quotes: np.ndarray, slashes: np.ndarray, u8: np.ndarray) -> np.ndarray:
    """The quotes not escaped: not preceded by an odd run of backslashes."""
    after = np.flatnonzero(u8[quotes - 1] == 92)
    if not after.size:
        return quotes
    run_start = np.where(np.r_[True, slashes[1:] != slashes[:-1] + 1], slashes, 0)
    np.maximum.accumulate(run_start, out=run_start)
    last = np.searchsorted(slashes, quotes[after] - 1)
    escaped = ((quotes[after] - run_start[last]) & 1) == 1
    keep = np.ones(len(quotes), bool)
    keep[after[escaped]] = False
    return quotes[keep]


def _numbers(
    u8: np.ndarray, w64: np.ndarray, start: np.ndarray, length: np.ndarray, bad: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each number's value (float64) and whether it is written as a float; ``bad`` set
    where a number is none this reader takes (its line is read per line)."""
    if not len(start):
        return np.zeros(0, np.float64), np.zeros(0, bool)
    word = w64[start]
    clipped = np.clip(length, 1, 8)
    mask = WORD_MASKS[clipped]
    digits = word ^ _ZEROS
    digits &= mask
    check = digits & _LOW7
    check += _TEN
    check |= digits
    check &= _HIGH
    simple = check == 0  # every byte a digit (the bytes past its end masked)
    simple &= length == clipped
    simple &= (length == 1) | ((word & _U(0xFF)) != _U(48))  # a leading zero: not JSON
    shift = clipped.astype(np.uint64)
    shift *= _U(8)
    np.subtract(_U(64), shift, out=shift)
    d = digits << shift
    pairs = d >> _U(8)
    d *= _U(10)
    d += pairs
    low = d & _PAIRS
    low *= _U(100 + (1000000 << 32))
    d >>= _U(16)
    d &= _PAIRS
    d *= _U(1 + (10000 << 32))
    d += low
    d >>= _U(32)
    values = d.astype(np.float64)
    floats = np.zeros(len(start), bool)
    other = np.flatnonzero(~simple & ~bad)
    if other.size:
        _other_numbers(u8, start[other], length[other], other, values, floats, bad)
    return values, floats


def _other_numbers(
    u8: np.ndarray,
    start: np.ndarray,
    length: np.ndarray,
    where: np.ndarray,
    values: np.ndarray,
    floats: np.ndarray,
    bad: np.ndarray,
) -> None:
    """Numbers other than short integers, read by orjson as one array of them."""
    fits = (length >= 1) & (length <= MAX_NUMBER)
    bad[where[~fits]] = True
    start, length, where = start[fits], length[fits], where[fits]
    if not where.size:
        return
    width = int(length.max())
    cols = np.arange(width)
    inside = cols < length[:, None]
    text = u8[np.minimum(start[:, None] + cols, len(u8) - 1)]
    allowed = np.where(inside, _NUMBER_BYTES[text], True).all(axis=1)
    is_float = np.where(inside, _FLOAT_BYTES[text], False).any(axis=1)
    # an integer past 18 digits may be a float to orjson (beyond 64 bits): read per line
    allowed &= is_float | (length - (text[:, 0] == 45) <= 18)
    bad[where[~allowed]] = True
    slots = np.full((len(where), width + 1), 32, np.uint8)
    slots[:, :width] = np.where(inside, text, 32)
    slots[:, width] = 44
    slots[~allowed, :width] = 32  # left to the per-line reader: a 0 in its place
    slots[~allowed, 0] = 48
    for _ in range(8):
        try:
            read = orjson.loads(b"[" + slots.tobytes()[:-1] + b"]")
            break
        except orjson.JSONDecodeError as exc:
            slot = min(max(exc.pos - 1, 0) // (width + 1), len(where) - 1)
            bad[where[slot]] = True
            slots[slot, :width] = 32
            slots[slot, 0] = 48
    else:
        bad[where] = True
        return
    values[where] = np.array(read, dtype=np.float64)
    floats[where] = is_float


def parse_batch(batch: Batch, table: TermTable) -> Parsed:
    """The batch's lines of the usual shape read (see the module docstring)."""
    buf, ls, le = batch.buf, batch.starts, batch.ends
    n = len(ls)
    u8 = np.frombuffer(buf, np.uint8)
    w64 = u64_view(buf)
    r0, r1 = int(ls[0]), int(le[-1])
    region = u8[r0:r1]
    quotes = np.flatnonzero(region == 34) + r0
    slashes = np.flatnonzero(region == 92) + r0
    bad = np.zeros(n, bool)
    if batch.controls.size:  # a control byte in a line (a last \r aside): per line
        c = batch.controls
        line = np.searchsorted(ls, c, side="right") - 1
        bad[line[(c < le[line]) & ~((c == le[line] - 1) & (u8[c] == 13))]] = True
    if slashes.size:
        quotes = _unescaped(quotes, slashes, u8)
    count = np.searchsorted(quotes, le) - np.searchsorted(quotes, ls)
    odd = (count & 1) == 1
    if odd.any():
        bad |= odd
        quotes = quotes[np.repeat(~odd, count)]
        count[odd] = 0
    opens, closes = quotes[0::2], quotes[1::2]
    last_string = np.cumsum(count // 2)  # one past each line's last string
    # the "vector" key: a 6-byte string spelled so, then ':' (or ': ') and '{'
    cand = np.flatnonzero(closes - opens == 7)
    at = opens[cand]
    keep = ((w64[at + 1] & _SIX) == _VECTOR) & (u8[at + 8] == 58)
    brace = at + 9 + (u8[at + 9] == 32)
    keep &= u8[brace] == 123
    cand, brace = cand[keep], brace[keep]
    cand_line = np.searchsorted(last_string, cand, side="right")
    first = np.r_[True, cand_line[1:] != cand_line[:-1]] if cand.size else np.zeros(0, bool)
    key = np.full(n, -1, np.int64)
    vector_at = np.zeros(n, np.int64)
    key[cand_line[first]] = cand[first]
    vector_at[cand_line[first]] = brace[first]
    end = le - 1 - (u8[le - 1] == 13)
    vector_end = end - 1
    ok = ~bad & (key >= 0) & (u8[end] == 125) & (u8[vector_end] == 125)
    sizes = np.where(ok, last_string - key - 1, 0)
    empty = ok & (sizes == 0)
    ok[empty] = vector_end[empty] == vector_at[empty] + 1
    full = np.flatnonzero(ok & (sizes > 0))
    ok[full] = opens[key[full] + 1] == vector_at[full] + 1
    sizes[~ok] = 0
    # the terms and the bytes between them: '"t": w, "u": v}' exactly
    total = int(sizes.sum())
    offsets = np.cumsum(sizes) - sizes
    term_line = np.repeat(np.arange(n), sizes)
    strings = np.arange(total) + np.repeat(key + 1 - offsets, sizes)
    t_open, t_close = opens[strings], closes[strings]
    is_last = np.zeros(total, bool)
    last_at = (offsets + sizes - 1)[sizes > 0]
    is_last[last_at] = True
    nxt = opens[np.minimum(strings + 1, len(opens) - 1)] - 1
    nxt -= u8[nxt] == 32
    term_bad = ~((u8[t_close + 1] == 58) & (is_last | (u8[nxt] == 44)))
    n_start = t_close + 2 + (u8[t_close + 2] == 32)
    n_end = nxt
    n_end[last_at] = vector_end[sizes > 0]
    values, floats = _numbers(u8, w64, n_start, n_end - n_start, term_bad)
    # the terms' spellings looked up
    length = t_close - t_open - 1
    words = [w64[t_open + 1] & WORD_MASKS[np.clip(length, 0, 8)]]
    ids = np.full(total, -1, np.int64)
    if total:
        ids = table.lookup(None, length, spelling_hash(words, length))
        longer = np.flatnonzero(length > 8)
        if longer.size:  # a hit over 8 bytes is checked word by word
            lw = [words[0][longer]]
            for k in range(1, MAX_TERM // 8):
                at = t_open[longer] + 1 + 8 * k
                lw.append(w64[at] & WORD_MASKS[np.clip(length[longer] - 8 * k, 0, 8)])
            ids[longer] = table.lookup(lw, length[longer], spelling_hash(lw, length[longer]))
            ids[longer[length[longer] > MAX_TERM]] = -1
    if term_bad.any():
        ok[term_line[term_bad]] = False
    plain, fields = _plain_fields(
        u8, w64, ls, ok, key, last_string - count // 2, opens, closes, slashes
    )
    return Parsed(
        ok, vector_at, sizes, term_line, t_open, t_close, ids, values, floats, plain, fields
    )


_ID = np.uint64(int.from_bytes(b"id", "little"))
_CONTENTS = np.uint64(int.from_bytes(b"contents", "little"))


def _plain_fields(
    u8: np.ndarray,
    w64: np.ndarray,
    ls: np.ndarray,
    ok: np.ndarray,
    key: np.ndarray,
    first: np.ndarray,
    opens: np.ndarray,
    closes: np.ndarray,
    slashes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Which lines are ``{"id": "…", "contents": "…", "vector": …`` exactly (``": "`` or
    ``":"``, ``", "`` or ``","``) with no backslash before the vector, and where their id
    and text lie: orjson would read those two strings as their bytes decoded."""
    n = len(ls)
    plain = ok & (key == first + 4)
    fields = np.zeros((n, 4), np.int64)
    at = np.flatnonzero(plain)
    if not at.size:
        return plain, fields
    s = first[at]
    o = [opens[s + k] for k in range(5)]
    c = [closes[s + k] for k in range(4)]
    good = (u8[ls[at]] == 123) & (o[0] == ls[at] + 1)
    good &= (c[0] - o[0] == 3) & ((w64[o[0] + 1] & np.uint64(0xFFFF)) == _ID)
    good &= (c[2] - o[2] == 9) & (w64[o[2] + 1] == _CONTENTS)
    for k, sep in ((0, 58), (1, 44), (2, 58), (3, 44)):
        good &= u8[c[k] + 1] == sep
        good &= o[k + 1] == c[k] + 2 + (u8[c[k] + 2] == 32)
    if slashes.size:
        good &= np.searchsorted(slashes, ls[at]) == np.searchsorted(slashes, o[4])
    plain[at[~good]] = False
    fields[at, 0], fields[at, 1] = o[1] + 1, c[1]
    fields[at, 2], fields[at, 3] = o[3] + 1, c[3]
    return plain, fields
