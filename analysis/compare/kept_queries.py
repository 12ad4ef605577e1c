"""The queries and judgements a collection keeps (built from a benchmark: BEIR's
``queries.jsonl`` and qrels), as Compare uses them: a query picked by its id is searched on
both sides, its judged items are marked in both rankings, and each side's metrics are
computed against its judgements (trec_eval's rules through ir-measures, the one metrics
layer)."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.compare.side_cache import SIDE_CACHE
from lexlens.analysis.core.metrics import is_relevant
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries
from lexlens.models.base import InputError


@dataclass(frozen=True)
class KeptQueries:
    """A collection's kept queries (id → text) and judgements (id → {item: relevance})."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    def listed(self) -> list[dict]:
        """Every kept query: id, text and how many items it judges relevant, in file order."""
        return [
            {
                "id": q,
                "text": text,
                "relevant": sum(is_relevant(r) for r in self.qrels.get(q, {}).values()),
            }
            for q, text in self.queries.items()
        ]


def _read(ix: StoredCollection) -> KeptQueries | None:
    stored = ix.benchmark_files
    if stored is None:
        return None
    problems = Problems()  # a malformed line was reported when the collection was built
    return KeptQueries(read_queries(stored[0], problems), read_qrels(stored[1], problems))


def kept_queries(ix: StoredCollection) -> KeptQueries | None:
    """The queries and judgements ``ix`` keeps, or ``None`` (read once per index state)."""
    return SIDE_CACHE.per_index(ix, "kept queries", _read)


def kept_query(
    indexes: tuple[StoredCollection, StoredCollection], query_id: str
) -> tuple[str, dict]:
    """The text and judgements of the kept query ``query_id`` (A's, else B's: both hold the
    same source's items)."""
    for ix in indexes:
        kept = kept_queries(ix)
        if kept is None:
            continue
        if query_id not in kept.queries:
            known = list(kept.queries)
            raise InputError(
                f"query_id {query_id!r} is not one of the {len(known):,} queries {ix.path.name} "
                f"keeps (e.g. {', '.join(known[:3])})"
            )
        return kept.queries[query_id], dict(kept.qrels.get(query_id, {}))
    raise InputError(
        f"query_id: {indexes[0].path.name} keeps no queries and judgements (it was not built "
        "from a benchmark): type a query instead"
    )
