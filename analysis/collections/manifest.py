"""An index's ``manifest.json`` as a typed, frozen record (:class:`Manifest`), read and
written in one place.

Every key the writer writes is a field of its own, of its declared type (checked when
read); a key this version does not know is kept in ``extra``, and each entry keeps the
order its keys were read in, so :meth:`Manifest.to_dict` gives back exactly the object it
was read from (and a manifest written from one is the same bytes). A key a manifest
lacks (an older index) takes its field's default and stays absent when written again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from lexlens.analysis.datasets.items import Skipped

E = TypeVar("E", bound="Entry")

#: No keys given: an entry made in code has every field, in declaration order.
EVERY_KEY: tuple[str, ...] = ()


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Entry:
    """A JSON object as typed fields: the known keys (``JSON_NAMES`` maps a field whose key
    is not a Python name), the unknown ones in ``extra``, and the order they were read in."""

    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True, repr=False)
    keys: tuple[str, ...] = field(default=EVERY_KEY, kw_only=True, repr=False, compare=False)

    #: Field name → its JSON key, where they differ.
    JSON_NAMES: ClassVar[dict[str, str]] = {}
    #: Fields left out of an entry made in code while they are ``None`` (keys added later,
    #: so the manifests of builds that have none stay the bytes they were).
    OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", _frozen(self.extra))

    @classmethod
    def _fields(cls) -> dict[str, dataclasses.Field]:
        """JSON key → field, for the known keys."""
        return {
            cls.JSON_NAMES.get(f.name, f.name): f
            for f in dataclasses.fields(cls)
            if f.name not in ("extra", "keys")
        }

    @classmethod
    def from_dict(cls: type[E], data: Any, where: str) -> E:
        """The entry ``data`` holds (``where``: its key path, for the message when a value
        is not of its field's type: :class:`ValueError`)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} is {_shown(data)}, not an object")
        known = cls._fields()
        given = {}
        for key, value in data.items():
            if key in known:
                read = _READERS[known[key].type]
                given[known[key].name] = read(value, f"{where}.{key}" if where else key)
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**given, extra=extra, keys=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: its keys in the order read (every field's, in declaration
        order, for an entry made in code), then unknown keys added since."""
        known = self._fields()
        order = self.keys or tuple(known)
        out: dict[str, Any] = {}
        for key in order:
            if key in known:
                value = getattr(self, known[key].name)
                if value is None and not self.keys and known[key].name in self.OMITTED_WHEN_NONE:
                    continue
                out[key] = _plain(value)
            elif key in self.extra:
                out[key] = _plain(self.extra[key])
        for key, value in self.extra.items():
            if key not in out:
                out[key] = _plain(value)
        return out


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "…"


def _plain(value: Any) -> Any:
    """A field's value as JSON data (entries and records as objects, tuples as lists)."""
    if isinstance(value, Entry):
        return value.to_dict()
    if isinstance(value, Skipped):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _is(kinds: tuple[type, ...], wanted: str, optional: bool = False) -> Callable[[Any, str], Any]:
    def read(value: Any, where: str) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) and bool not in kinds:
            raise ValueError(f"{where} is {_shown(value)}, not {wanted}")
        if not isinstance(value, kinds):
            raise ValueError(f"{where} is {_shown(value)}, not {wanted}")
        return value

    return read


def _texts(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where} is {_shown(value)}, not a list of texts")
    return tuple(value)


def _mapping(values: Callable[[Any, str], Any]) -> Callable[[Any, str], Mapping[str, Any]]:
    def read(value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} is {_shown(value)}, not an object")
        return _frozen({str(k): values(v, f"{where}.{k}") for k, v in value.items()})

    return read


def _skipped(value: Any, where: str) -> tuple[Skipped, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{where} is {_shown(value)}, not a list")
    out = []
    for n, item in enumerate(value):
        if not (
            isinstance(item, Mapping)
            and set(item) == {"file", "reason"}
            and all(isinstance(v, str) for v in item.values())
        ):
            raise ValueError(f"{where}[{n}] is {_shown(item)}, not a file and a reason")
        out.append(Skipped(item["file"], item["reason"]))
    return tuple(out)


_INT = _is((int,), "a whole number")
_TEXT = _is((str,), "a text")
_NUMBER = _is((int, float), "a number")

#: How each field type is read from JSON (checked, never converted: a value read is the
#: value written back).
_READERS: dict[str, Callable[[Any, str], Any]] = {
    "str": _TEXT,
    "int": _INT,
    "bool": _is((bool,), "true or false"),
    "str | None": _is((str,), "a text", optional=True),
    "int | None": _is((int,), "a whole number", optional=True),
    "float": _NUMBER,
    "float | None": _is((int, float), "a number", optional=True),
    "tuple[str, ...]": _texts,
    "tuple[str, ...] | None": lambda v, w: None if v is None else _texts(v, w),
    "Mapping[str, int]": _mapping(_INT),
    "Mapping[str, str]": _mapping(_TEXT),
    "tuple[Skipped, ...]": _skipped,
}


def _entry_reader(kind: type[Entry], optional: bool = False) -> Callable[[Any, str], Any]:
    def read(value: Any, where: str) -> Any:
        return None if value is None and optional else kind.from_dict(value, where)

    return read


@dataclass(frozen=True)
class EncoderEntry(Entry):
    """The encoder that made the vectors: its name, the spec that loads it, the fingerprint
    of its weights (stored vectors are reused only when it is unchanged), its class, what
    it encodes, and whether its bag-of-words queries are normalised."""

    name: str = ""
    spec: str = ""
    fingerprint: str = ""
    class_name: str = ""
    capabilities: tuple[str, ...] = ()
    bow_normalize: bool = False

    JSON_NAMES: ClassVar[dict[str, str]] = {"class_name": "class"}

    @property
    def loads_as(self) -> str:
        """The spec that loads this encoder (its name when the build recorded none)."""
        return self.spec or self.name


@dataclass(frozen=True)
class VocabEntry(Entry):
    """The output vocabulary: its size and the hash of its tokens (one a line)."""

    size: int = 0
    hash: str | None = None


@dataclass(frozen=True)
class BenchmarkEntry(Entry):
    """The benchmark a collection was built from: what it is and the queries and
    judgements it keeps (counts), and how many of its lines were problems."""

    kind: str | None = None
    split: str | None = None
    splits: tuple[str, ...] | None = None
    queries: int | None = None
    judged_queries: int | None = None
    judgements: int | None = None
    problems: int | None = None


@dataclass(frozen=True)
class SourceEntry(Entry):
    """What was indexed: its path, the folder item paths are relative to, its kind and
    fingerprint; a benchmark's counts and problems; a features file's dimension, where its
    ids came from and its captions file."""

    path: str = ""
    root: str = ""
    kind: str = ""
    fingerprint: str = ""
    benchmark: BenchmarkEntry | None = None
    problems: tuple[str, ...] = ()
    dim: int | None = None
    ids: str | None = None
    captions: str | None = None


@dataclass(frozen=True)
class Counts(Entry):
    """How many items and weights an index holds, and what its last build did."""

    items: int = 0
    nnz: int = 0
    encoded: int = 0
    reused: int = 0
    skipped: int = 0
    labelled: int = 0
    captioned: int = 0


@dataclass(frozen=True)
class ParityEntry(Entry):
    """Imported vectors against the named encoder's own, on a seeded sample of items
    re-encoded from their text: mean cosine, mean top-10 term overlap, the share of the
    imported weight on terms the encoder gives 0, the median ratio of the vectors' norms,
    the tolerance, and whether a mismatch beyond it was accepted."""

    encoder: str = ""
    sample: int = 0
    seed: int = 0
    cosine: float = 0.0
    top10_overlap: float = 0.0
    zero_mass: float = 0.0
    norm_ratio: float = 0.0
    min_cosine: float = 0.0
    min_top10_overlap: float = 0.0
    max_zero_mass: float = 0.0
    passed: bool = False
    accepted_mismatch: bool = False

    def line(self) -> str:
        """The check in one line, as an import states it."""
        return (
            f"parity with {self.encoder}: cosine {self.cosine:.4f}, top-10 overlap "
            f"{self.top10_overlap:.2f}, imported weight on terms it gives 0 "
            f"{self.zero_mass:.1%}, norm ratio {self.norm_ratio:.3g} over {self.sample} items"
        )

    def mismatch_note(self) -> str | None:
        """What an analysis that re-encodes the collection's texts says when the imported
        vectors were stored beyond the tolerance (``None`` when within it)."""
        if not self.accepted_mismatch:
            return None
        return (
            f"the stored vectors were imported beyond the parity tolerance ({self.line()}; "
            f"accepted with --accept-mismatch): what {self.encoder} encodes here differs "
            "from what the collection stores"
        )


@dataclass(frozen=True)
class ImportEntry(Entry):
    """Vectors encoded elsewhere and imported: their format, the scale integer impacts were
    divided by, the terms not in the vocabulary (postings, items, the most frequent by
    name), and the parity check (``None``: imported without an encoder)."""

    format: str = ""
    scale: float | None = None
    integer_impacts: bool = False
    unknown_postings: int = 0
    unknown_items: int = 0
    unknown_terms: Mapping[str, int] = field(default_factory=dict)
    parity: ParityEntry | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "unknown_terms", _frozen(self.unknown_terms))


_READERS.update(
    {
        "ParityEntry | None": _entry_reader(ParityEntry, optional=True),
    }
)


_READERS.update(
    {
        "ImportEntry | None": _entry_reader(ImportEntry, optional=True),
        "EncoderEntry": _entry_reader(EncoderEntry),
        "VocabEntry": _entry_reader(VocabEntry),
        "BenchmarkEntry | None": _entry_reader(BenchmarkEntry, optional=True),
        "SourceEntry": _entry_reader(SourceEntry),
        "Counts": _entry_reader(Counts),
    }
)


@dataclass(frozen=True)
class Manifest(Entry):
    """An index's manifest: format and version, the encoder, the vocabulary, the gate k,
    what the items are, the source, the counts, the items skipped (the first ones), when
    it was created and last updated, every file's size and checksum, whether every stored
    weight is non-negative, and the Lexlens version that wrote it."""

    format: str = ""
    format_version: int = 0
    encoder: EncoderEntry = field(default_factory=EncoderEntry)
    vocab: VocabEntry = field(default_factory=VocabEntry)
    gate_k: int = -1
    modality: str | None = None
    source: SourceEntry = field(default_factory=SourceEntry)
    counts: Counts = field(default_factory=Counts)
    skipped: tuple[Skipped, ...] = ()
    created: str | None = None
    updated: str | None = None
    files: Mapping[str, int] = field(default_factory=dict)
    checksums: Mapping[str, str] = field(default_factory=dict)
    nonnegative: bool = False
    lexlens: str = ""
    imported: ImportEntry | None = None

    def reencoding_note(self) -> str | None:
        """The note of every analysis that re-encodes this collection's texts: the imported
        vectors' accepted parity mismatch, if any."""
        parity = self.imported.parity if self.imported is not None else None
        return parity.mismatch_note() if parity is not None else None

    OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = ("imported",)

    #: The keys a manifest must hold to be one.
    REQUIRED: ClassVar[tuple[str, ...]] = (
        "encoder",
        "vocab",
        "counts",
        "files",
        "source",
        "gate_k",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "files", _frozen(self.files))
        object.__setattr__(self, "checksums", _frozen(self.checksums))

    @classmethod
    def read(cls, data: Any) -> Manifest:
        """The manifest a parsed ``manifest.json`` holds (:class:`ValueError` naming the key
        that is missing or of another type)."""
        if not isinstance(data, Mapping):
            raise ValueError("not an object")
        for key in cls.REQUIRED:
            if key not in data:
                raise ValueError(f"missing {key!r}")
        return cls.from_dict(data, "")

    def to_json(self) -> bytes:
        """``manifest.json``'s bytes (two-space indents, UTF-8, a final newline)."""
        return (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    @property
    def kept_benchmark(self) -> BenchmarkEntry | None:
        """The benchmark the source was, when the build recorded one."""
        return self.source.benchmark


def _check_readers() -> None:
    """Every field of every entry has a reader of its type (a new field needs one)."""
    kinds = (EncoderEntry, VocabEntry, BenchmarkEntry, SourceEntry, Counts, ParityEntry)
    for kind in (*kinds, ImportEntry, Manifest):
        for f in kind._fields().values():
            if f.type not in _READERS:
                raise TypeError(f"{kind.__name__}.{f.name}: no reader of {f.type}")


_check_readers()
