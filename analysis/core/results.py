"""The result contract every analysis follows.

An analysis returns one :class:`Result`: a frozen dataclass whose JSON document is derived
from its fields (as LIT's ``dtypes`` derive theirs), so the CLI's ``--json``, a page's
download and a notebook's ``to_dict()`` are the same document by construction. Small
nested records (a term, a contribution, a hit) are :class:`Record` s. A field that the JSON
leaves out is declared with :func:`internal`; every other field is written under its own
name (one name per concept: a JSON key is its field's name).

A result's files (JSON, CSV tables, an HTML report) come from its ``files()`` method and
are written by :func:`lexlens.analysis.core.outputs.write_files`: one way for every
analysis, from the CLI's ``--out`` and a page's downloads alike.

The JSON document is for readers and other tools; it may leave fields out. To keep a result
and rebuild it later (the app keeps every run in the workspace, so a reload shows it again),
:meth:`Record.to_state` gives every field as JSON-ready data that says its own type (arrays
with dtype and shape, tables, tuples, sets, nested records), and :meth:`Record.from_state`
rebuilds the same record. Nothing is pickled: a stored state is data, never code, and only
record classes of this package are rebuilt.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from lexlens.analysis.core.outputs import json_bytes
from lexlens.models.base import LexlensError

# Progress (the done fraction of the whole work, 0..1, and a short message; every analysis
# that takes long accepts one, and a job may raise from it to cancel the work) is defined in
# the lowest layer, where codebook fitting reports progress too: one type, re-exported here.
from lexlens.models.base import Progress as Progress

R = TypeVar("R", bound="Record")


class Cancelled(LexlensError):
    """Raised from a :data:`Progress` callback to stop the work it reports on (a cancelled job)."""


_INTERNAL = "lexlens_internal"


def internal(**kwargs: Any) -> Any:
    """A dataclass field kept on the result but left out of its JSON document."""
    return dataclasses.field(metadata={_INTERNAL: True}, **kwargs)


def plain(value: Any) -> Any:
    """Records (and any object with a ``to_dict``) become dicts, recursively through lists
    and dicts; anything else is as is."""
    if isinstance(value, Record) or (hasattr(value, "to_dict") and not isinstance(value, type)):
        return value.to_dict()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class Record:
    """A small typed record whose JSON document is derived from its fields."""

    def to_dict(self) -> dict:
        """The JSON document: every field but :func:`internal` ones, in declaration order."""
        return {
            f.name: plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if not f.metadata.get(_INTERNAL)
        }

    def to_state(self) -> dict:
        """Every field given at construction (internal ones too) as self-describing JSON data."""
        return {f.name: _state(getattr(self, f.name)) for f in dataclasses.fields(self) if f.init}

    @classmethod
    def from_state(cls: type[R], state: Mapping[str, Any]) -> R:
        """The record :meth:`to_state` described (fields it lacks take their defaults)."""
        if not isinstance(state, Mapping):
            raise StateError(f"a stored {cls.__name__} is not a mapping")
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = set(state) - names
        if unknown:
            raise StateError(f"a stored {cls.__name__} has unknown fields: {sorted(unknown)}")
        try:
            return cls(**{name: _restore(value) for name, value in state.items()})
        except TypeError as exc:
            raise StateError(f"a stored {cls.__name__} cannot be rebuilt: {exc}") from None


@dataclasses.dataclass(frozen=True)
class Result(Record):
    """What one analysis returns: a record with the files it can be saved as."""

    #: The stem of the JSON file :meth:`files` writes (``terms.json``, ``search.json``…).
    file_stem: ClassVar[str] = "result"

    def files(self) -> dict[str, bytes]:
        """File name → bytes: the JSON document; results with tables or reports add theirs."""
        return {f"{self.file_stem}.json": json_bytes(self)}

    # ------------------------------------------------------------------ in a notebook
    def frame_rows(self) -> list[dict] | None:
        """The result's main table, one dict a row (``None``: it has none): what
        :meth:`to_frame` holds and the notebook view draws the first rows of."""
        return None

    def frame_tables(self) -> dict[str, tuple[Sequence[str], Callable[[], list[dict]]]]:
        """Its other tables by name (the CSV file of that name: its columns and a function
        giving its rows), what ``to_frame(name)`` holds; none unless the result says."""
        return {}

    def to_frame(self, table: str | None = None) -> Any:
        """A table as a pandas DataFrame, every row: the main one, or the one ``table``
        names (:meth:`frame_tables`); a result without it is refused in one line."""
        columns = None
        if table is None:
            rows = self.frame_rows()
            if rows is None:
                raise LexlensError(f"{type(self).__name__} has no table: read it with to_dict()")
        else:
            tables = self.frame_tables()
            if table not in tables:
                names = ", ".join(repr(t) for t in tables) or "none"
                raise LexlensError(
                    f"{type(self).__name__} has no table {table!r}: its tables are {names}"
                )
            columns, rows_of = tables[table]
            rows = rows_of()
        import pandas as pd  # heavy: pandas loads on first use

        return pd.DataFrame.from_records(rows, columns=None if columns is None else list(columns))

    def notebook_html(self) -> str | None:
        """The result drawn as one self-contained, escaped HTML fragment (``None``: the
        notebook shows its plain repr)."""
        return None

    def _repr_html_(self) -> str | None:
        """Jupyter's rich view (IPython's display protocol): :meth:`notebook_html`."""
        return self.notebook_html()


class StateError(LexlensError):
    """A stored state that does not describe a record of this package."""


#: Tags of values JSON cannot hold as they are (a tagged value is a one-key mapping).
_ARRAY, _FRAME, _SERIES, _TUPLE, _SET, _PATH, _FLOAT, _RECORD, _MAP = (
    "__ndarray__",
    "__dataframe__",
    "__series__",
    "__tuple__",
    "__set__",
    "__path__",
    "__float__",
    "__record__",
    "__mapping__",
)


def state_of(value: Any) -> Any:
    """Any value a record may hold as JSON-ready data that says its own type (arrays,
    tables, tuples, sets, nested records…); :func:`value_of` gives it back."""
    return _state(value)


def value_of(data: Any) -> Any:
    """The value :func:`state_of` described (only package records are rebuilt)."""
    return _restore(data)


def _state(value: Any) -> Any:
    """``value`` as JSON-ready data that says its own type (see :meth:`Record.to_state`)."""
    import numpy as np  # import lexlens stays light: no numpy

    if isinstance(value, Record):
        kind = type(value)
        return {_RECORD: [kind.__module__, kind.__qualname__, value.to_state()]}
    if isinstance(value, np.ndarray):
        return {_ARRAY: [str(value.dtype), list(value.shape), _state(value.ravel().tolist())]}
    if isinstance(value, np.generic):
        return _state(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else {_FLOAT: repr(value)}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_state(v) for v in value]
        return items if isinstance(value, list) else {_TUPLE: items}
    if isinstance(value, (set, frozenset)):
        return {_SET: [type(value) is frozenset, [_state(v) for v in sorted(value, key=repr)]]}
    if isinstance(value, Path):
        return {_PATH: str(value)}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and not any(k.startswith("__") for k in value):
            return {k: _state(v) for k, v in value.items()}
        return {_MAP: [[_state(k), _state(v)] for k, v in value.items()]}
    import pandas as pd  # heavy: pandas loads on first use

    if isinstance(value, pd.DataFrame):
        return {_FRAME: _state(value.to_dict(orient="tight"))}
    if isinstance(value, pd.Series):
        return {_SERIES: [_state(value.name), _state(value.to_dict(into=dict)), str(value.dtype)]}
    raise StateError(f"cannot keep a {type(value).__name__} in a stored state")


def _record_class(module: str, qualname: str) -> type[Record]:
    """A record class of this package, by name (anything else is refused)."""
    if not (module == "lexlens" or module.startswith("lexlens.")) or "<" in qualname:
        raise StateError(f"a stored state names {module}.{qualname}, not a Lexlens record")
    try:
        kind: Any = importlib.import_module(module)
        for part in qualname.split("."):
            kind = getattr(kind, part)
    except (ImportError, AttributeError):
        raise StateError(
            f"a stored state names {module}.{qualname}, which does not exist"
        ) from None
    if not (isinstance(kind, type) and issubclass(kind, Record)):
        raise StateError(f"a stored state names {module}.{qualname}, which is not a record")
    return kind


def _restore(data: Any) -> Any:
    """The value :func:`_state` described."""
    import numpy as np  # import lexlens stays light: no numpy

    if isinstance(data, list):
        return [_restore(v) for v in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1:
        ((tag, body),) = data.items()
        if tag == _RECORD:
            module, qualname, state = body
            return _record_class(module, qualname).from_state(state)
        if tag == _ARRAY:
            dtype, shape, flat = body
            return np.asarray(_restore(flat), dtype=np.dtype(dtype)).reshape(shape)
        if tag == _FLOAT:
            return float(body)
        if tag == _TUPLE:
            return tuple(_restore(v) for v in body)
        if tag == _SET:
            frozen, items = body
            return (frozenset if frozen else set)(_restore(v) for v in items)
        if tag == _PATH:
            return Path(body)
        if tag == _MAP:
            return {_restore(k): _restore(v) for k, v in body}
        if tag in (_FRAME, _SERIES):
            import pandas as pd  # heavy: pandas loads on first use

            if tag == _FRAME:
                return pd.DataFrame.from_dict(_restore(body), orient="tight")
            name, values, dtype = body
            return pd.Series(_restore(values), name=_restore(name), dtype=dtype)
    return {k: _restore(v) for k, v in data.items()}


def progress_part(
    progress: Progress | None, lo: float, hi: float, prefix: str = ""
) -> Progress | None:
    """``progress`` mapped onto ``[lo, hi]`` of the whole bar, each message after ``prefix``."""
    if progress is None:
        return None

    def inner(fraction: float, message: str) -> None:
        progress(lo + (hi - lo) * min(max(float(fraction), 0.0), 1.0), prefix + message)

    return inner
