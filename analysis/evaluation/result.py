"""What ``lexlens evaluate`` returns and writes: an :class:`Evaluation` — the measures per
query and their means, the failures explained, the words to blame, each cause against its
base rate, and the sections added to it (:mod:`lexlens.analysis.evaluation.sections`) — and
its files (evaluation.json, per_query.csv, failures.csv, blame.csv, causes.csv, slices.csv,
run.trec, evaluation.html, each section's own),
with the tables' columns as the CSV files, the command and the page name them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.metrics import EvaluationResult
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Result, internal, plain, state_of
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.datasets.trec import run_text
from lexlens.analysis.evaluation.causes import BLAME_RATE_COLUMNS, CAUSE_COLUMNS, cause_row
from lexlens.analysis.evaluation.explain import Failure
from lexlens.analysis.evaluation.failures import CAUSES
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.sections import Section
from lexlens.analysis.evaluation.slices import SLICE_COLUMNS, slice_row
from lexlens.analysis.render.html import render_report
from lexlens.analysis.render.notebook import evaluation_html
from lexlens.models.base import InputError

#: The measures every benchmark evaluation reports (ir-measures names).
MEASURES = ("nDCG@10", "RR@10", "R@1", "R@5", "R@10", "R@100", "AP@100")
#: How much of each query's top 10 is judged (ir-measures), reported beside the measures.
JUDGED = "Judged@10"

#: The per-query table's columns, as per_query.csv, the page and the command name them.
PER_QUERY_COLUMNS = (
    "query_id",
    "query",
    "first_relevant_rank",
    *MEASURES,
    "relevant_rank",
    "relevant_status",
    JUDGED,
)
#: failures.csv's columns.
FAILURE_COLUMNS = (
    "query_id",
    "query",
    "first_relevant_rank",
    "nonrelevant",
    "relevant",
    "relevant_rank",
    "relevant_status",
    "gap",
    "decisive_words",
    "favour_nonrelevant",
    "favour_relevant",
    "query_delta",
    "expansion_delta",
    "causes",
    "query_length",
    "missing_words",
)
#: The queries evaluation.html lists, worst first (per_query.csv and the JSON hold all).
LISTED_QUERIES = 100
#: The failures evaluation.html explains, worst first (failures.csv and the JSON hold all).
LISTED_FAILURES = 50
#: The blame table's columns, as blame.csv, the page and the command name them.
#: ``pushed`` (the failures a word decides) beside its base rate: the share of successes
#: where it favours the non-relevant item (:func:`~.causes.blame_rates`).
BLAME_COLUMNS = (
    "word",
    "pushed",
    "amount",
    "mismatch",
    *BLAME_RATE_COLUMNS,
    "pushed_queries",
    "mismatch_queries",
)


@dataclass(frozen=True)
class Evaluation(EvaluationResult):
    """A collection evaluated on a benchmark's queries and judgements (see
    :mod:`lexlens.analysis.evaluation.evaluate`): ``metrics`` holds the means
    (``aggregate``) and one row per query (``per_query``) with its first relevant rank, its
    best relevant item's rank and status and its own top terms; ``failures`` each failing
    query explained, ``blame`` the words behind the failures; ``sections`` what was added
    to it (:class:`~lexlens.analysis.evaluation.sections.Section`: faithfulness,
    counterfactuals, a comparison of systems), in the order added. It carries the
    collection it evaluated, opened (``collection``: not in the JSON document nor in a
    stored state) and its typed ``options`` (:class:`EvaluationOptions`, the values
    ``settings`` records), so what adds a section reads both from it."""

    failures: list[Failure]
    blame: list[dict]
    #: How many failures each cause holds for (not exclusive: see ``failures.CAUSES``)
    causes: dict = field(default_factory=dict)
    missing: dict | None = None  # items a run names that the collection does not hold
    #: {query id: [(item id, score), …]} in the order evaluated: not in the JSON document
    #: (it is the run.trec file)
    run: dict = internal(default_factory=dict)
    #: Each cause against its base rate among the successes (:mod:`.causes`)
    cause_rates: dict = field(default_factory=dict)
    #: The failure rate by query feature, each slice against the rest (:mod:`.slices`)
    slices: dict = field(default_factory=dict)
    #: the options evaluated with (``None``: read from ``settings``)
    options: EvaluationOptions | None = internal(default=None)
    #: what was added, in order (each section's document under its key)
    sections: tuple[Section, ...] = internal(default=())
    #: the collection evaluated, opened (``None`` once rebuilt from a stored state)
    collection: StoredCollection | None = internal(default=None, compare=False, repr=False)
    #: the query vectors ranked, one CSR row per judged query in order (``None`` once
    #: rebuilt from a stored state): what a comparison's efficiency reads
    query_vectors: Any = internal(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.options is None:
            known = {d.name for d in EvaluationOptions.declared()}
            values = {k: v for k, v in self.settings.items() if k in known}
            object.__setattr__(self, "options", EvaluationOptions(**values))
        if not isinstance(self.sections, tuple):
            object.__setattr__(self, "sections", tuple(self.sections))

    def to_state(self) -> dict:
        """Every field given at construction but the opened collection and the options
        (rebuilt from ``settings``), as self-describing JSON data."""
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        del kept["collection"], kept["options"], kept["query_vectors"]
        return {name: state_of(value) for name, value in kept.items()}

    def section(self, key: str) -> Section | None:
        """The section added under ``key`` (``None``: not added)."""
        return next((s for s in self.sections if s.key == key), None)

    def with_section(self, section: Section) -> Evaluation:
        """This evaluation with ``section`` added last (one of each kind: a second of a key
        replaces the first, in its place)."""
        if not isinstance(section, Section):
            raise InputError(f"section must be a Section, not {type(section).__name__}")
        kept = [section if s.key == section.key else s for s in self.sections]
        if self.section(section.key) is None:
            kept.append(section)
        return replace(self, sections=tuple(kept))

    def collection_for(self, index: Any, what: str) -> StoredCollection:
        """The collection a section (``what``) re-scores the failures on: this evaluation's
        own, or ``index`` when given — which must be that collection
        (:func:`evaluated_index`); one without its collection (rebuilt from a stored state)
        needs ``index``."""
        if index is not None:
            return evaluated_index(index, self, what)
        if self.collection is None:
            raise InputError(
                f"{what}: this evaluation holds no opened collection (it was rebuilt from a "
                "stored state): give the index it evaluated"
            )
        return self.collection

    def to_dict(self) -> dict:
        """The JSON document: the fields in declaration order, the notes, each section's
        document under its key after them. Kept as evaluation.json always wrote it: when
        the counterfactuals come first, they sit before the notes after ``faithfulness``
        (``null`` when not measured)."""
        document = super().to_dict()
        notes = document.pop("notes")
        sections = {s.key: plain(s) for s in self.sections}
        if self.sections and self.sections[0].key == "counterfactuals":
            document["faithfulness"] = sections.pop("faithfulness", None)
            document["counterfactuals"] = sections.pop("counterfactuals")
        document["notes"] = notes
        document.update(sections)
        return document

    def files(self) -> dict[str, bytes]:
        """evaluation.json, per_query.csv, failures.csv, blame.csv, causes.csv, slices.csv, the run
        (run.trec), evaluation.html and each section's files."""
        failures = [list(failure_row(f).values()) for f in self.failures]
        out = {
            "evaluation.json": json_bytes(self),
            "per_query.csv": csv_bytes(
                PER_QUERY_COLUMNS,
                [list(per_query_row(q).values()) for q in self.metrics["per_query"]],
            ),
            "failures.csv": csv_bytes(FAILURE_COLUMNS, failures),
            "blame.csv": csv_bytes(
                BLAME_COLUMNS, [list(blame_row(b).values()) for b in self.blame]
            ),
            "causes.csv": csv_bytes(
                CAUSE_COLUMNS,
                [list(cause_row(c).values()) for c in self.cause_rates.get("causes", [])],
            ),
            "slices.csv": csv_bytes(
                SLICE_COLUMNS,
                [list(slice_row(r).values()) for r in self.slices.get("slices", [])],
            ),
            "run.trec": run_text(self.run, tag=f"lexlens-{self.encoder}").encode("utf-8"),
            "evaluation.html": self.html().encode("utf-8"),
        }
        for s in self.sections:
            out.update(s.section_files())
        return out

    def reported(self) -> Result:
        """What ``lexlens evaluate`` prints (``--json``) and writes (``--out``): several
        systems' comparison when this evaluation carries one, else this evaluation."""
        comparison = self.section("comparison")
        return comparison if isinstance(comparison, Result) else self

    def sections_text(self) -> str:
        """The lines each section adds to the command's text view, in the order added."""
        return "".join(s.text() for s in self.sections)

    def latex(self) -> str:
        """The LaTeX table of several systems (comparison.tex); refused for one system."""
        comparison = self.section("comparison")
        if comparison is None:
            raise InputError("--latex: a LaTeX table compares two or more systems")
        return comparison.section_files()["comparison.tex"].decode()

    def frame_rows(self) -> list[dict]:
        """The per-query table (per_query.csv's rows); of several systems, their comparison's
        table."""
        comparison = self.section("comparison")
        if comparison is not None:
            return comparison.frame_rows()
        return [per_query_row(q) for q in self.metrics["per_query"]]

    def frame_tables(self) -> dict:
        """per_query, failures, blame and causes (the CSV files of those names); of several
        systems, their comparison's tables too (comparison, deltas)."""
        tables = {
            "per_query": (
                PER_QUERY_COLUMNS,
                lambda: [per_query_row(q) for q in self.metrics["per_query"]],
            ),
            "failures": (FAILURE_COLUMNS, lambda: [failure_row(f) for f in self.failures]),
            "blame": (BLAME_COLUMNS, lambda: [blame_row(b) for b in self.blame]),
            "causes": (
                CAUSE_COLUMNS,
                lambda: [cause_row(c) for c in self.cause_rates.get("causes", [])],
            ),
        }
        comparison = self.section("comparison")
        if isinstance(comparison, Result):
            tables.update(comparison.frame_tables())
        return tables

    def notebook_html(self) -> str:
        """Measures, worst queries and failures by cause (:mod:`lexlens.analysis.render.notebook`);
        an evaluation of several systems shows their comparison."""
        comparison = self.section("comparison")
        if comparison is not None:
            return comparison.notebook_html()
        doc = self.to_dict()
        return evaluation_html(doc, worst_first(doc["metrics"]["per_query"]))

    def html(self, max_failures: int = LISTED_FAILURES) -> str:
        """A self-contained HTML report (Jinja2, autoescaped): metrics, the queries worst
        first, the failures per cause, each failure (the worst first, collapsed to a line)
        side by side with its causes, the words favouring either item with their sums (net:
        the gap) and its decisive words, the blame table, then each section's block. The
        sections fold; the report lists the :data:`LISTED_QUERIES` worst queries and the
        ``max_failures`` worst failures, and says how many more its CSV and JSON files
        hold."""
        doc = self.to_dict()
        worst = worst_first(doc["metrics"]["per_query"])
        place = {q["id"]: i for i, q in enumerate(worst)}
        failures = sorted(doc["failures"], key=lambda f: place.get(f["query_id"], len(place)))
        meta = {
            "index": self.index.get("name") or self.index.get("path"),
            "encoder": self.encoder,
            **self.settings,
        }
        return render_report(
            "evaluation.html",
            title=f"Lexlens evaluation — {meta['index']}",
            meta=meta,
            r=doc,
            measures=MEASURES,
            worst=worst[:LISTED_QUERIES],
            more_queries=max(0, len(worst) - LISTED_QUERIES),
            failures=failures[:max_failures],
            hidden=max(0, len(failures) - max_failures),
            ndcg={q["id"]: q["nDCG@10"] for q in worst},
            sections=[s.html() for s in self.sections],
        )


#: The name this class had before sections (kept: stored states and callers name it).
BenchmarkEvaluationResult = Evaluation


def _named(index: Mapping) -> str:
    """A collection as an evaluation names it: its folder's name, items and fingerprint."""
    fingerprint = index.get("fingerprint")
    return f"{index.get('name')}, {index.get('items')} items" + (
        f", fingerprint {fingerprint}" if fingerprint else ""
    )


def evaluation_argument(evaluation: Any, what: str) -> Evaluation:
    """``evaluation`` when it is an :class:`Evaluation`; else refused naming ``what``."""
    if not isinstance(evaluation, Evaluation):
        raise InputError(
            f"{what}: evaluation must be the result of evaluate_benchmark (one system), not "
            f"{type(evaluation).__name__}"
        )
    return evaluation


def evaluated_index(index: Any, evaluation: Any, what: str) -> StoredCollection:
    """``index`` opened, when it is the collection ``evaluation`` (one system's
    :class:`Evaluation`) evaluated: what adds to an evaluation (``what``:
    faithfulness, counterfactuals) re-scores its failures on the collection, so another
    collection's scores would be paired with these failures. The collection is the one its
    fingerprint says (what it holds: a copy is the same one); an evaluation recorded before
    fingerprints is matched on name, items and encoder. Refused in one line naming both."""
    evaluation_argument(evaluation, what)
    return index_evaluated(index, evaluation.index, what)


def index_evaluated(index: Any, recorded: Any, what: str) -> StoredCollection:
    """``index`` opened, when it is the collection an evaluation records as its ``index``
    (its JSON document's, read back from evaluation.json too); see
    :func:`evaluated_index`."""
    ix = index_argument(index)
    recorded = recorded if isinstance(recorded, Mapping) else {}
    given = ix.describe()
    keys = ("fingerprint",) if recorded.get("fingerprint") else ("name", "items", "encoder")
    if any(recorded.get(k) != given.get(k) for k in keys):
        raise InputError(
            f"{what}: the index {ix.label} ({_named(given)}) is not the collection the "
            f"evaluation evaluated ({_named(recorded)}): give that collection"
        )
    return ix


def natural_key(text: str) -> tuple:
    """A sort key that orders the numbers inside ids by value: q2, q10, q102."""
    parts = re.split(r"([0-9]+)", text)
    return (
        tuple((0, int(p), "") if i % 2 else (1, 0, p.casefold()) for i, p in enumerate(parts)),
        text,
    )


def worst_first(per_query: Iterable[Mapping]) -> list[Mapping]:
    """The per-query rows by nDCG@10, lowest first; equal values by id in natural order."""
    return sorted(per_query, key=lambda q: (q["nDCG@10"], natural_key(q["id"])))


def sort_rows(rows: Iterable[Mapping], by: str, descending: bool = False) -> list[Mapping]:
    """Table rows sorted by column ``by``: numbers by value, texts (ids, queries) in natural
    order (q13 before q102), a missing value (``None``) last either way; ties keep the
    order given."""
    rows = list(rows)
    present = [r for r in rows if r.get(by) is not None]
    missing = [r for r in rows if r.get(by) is None]
    numeric = all(isinstance(r[by], (int, float)) for r in present)
    key = (lambda r: r[by]) if numeric else (lambda r: natural_key(str(r[by])))
    return sorted(present, key=key, reverse=descending) + missing


def per_query_row(q: Mapping) -> dict[str, Any]:
    """One per-query row under :data:`PER_QUERY_COLUMNS` (a rank is ``None`` when there is
    none; ``relevant_status`` says why, empty in a result kept from before it was recorded)."""
    return {
        "query_id": q["id"],
        "query": q["text"],
        "first_relevant_rank": q["first_relevant_rank"],
        **{m: q[m] for m in MEASURES},
        "relevant_rank": q["relevant_rank"],
        "relevant_status": q.get("relevant_status", ""),
        JUDGED: q.get(JUDGED),
    }


def blame_row(b: Mapping) -> dict[str, Any]:
    """One blame row under :data:`BLAME_COLUMNS` (the queries joined by spaces; a piece
    marked: ``##ome (piece)``)."""
    return {
        "word": entry_label(b),
        "pushed": b["pushed"],
        "amount": b["amount"],
        "mismatch": b["mismatch"],
        **{column: b.get(column) for column in BLAME_RATE_COLUMNS},
        "pushed_queries": " ".join(b["pushed_queries"]),
        "mismatch_queries": " ".join(b["mismatch_queries"]),
    }


def failure_row(f: Failure) -> dict[str, Any]:
    """One failure under :data:`FAILURE_COLUMNS` (words and causes joined; a missing number
    is ``None``)."""
    sides = (f.favour_nonrelevant, f.favour_relevant)
    return {
        "query_id": f.query_id,
        "query": f.query,
        "first_relevant_rank": f.first_relevant_rank,
        "nonrelevant": f.nonrelevant.id if f.nonrelevant else "",
        "relevant": f.relevant.id if f.relevant else "",
        "relevant_rank": f.relevant.rank if f.relevant else None,
        "relevant_status": f.relevant_status,
        "gap": f.gap,
        "decisive_words": ", ".join(entry_label(d) for d in f.decisive),
        "favour_nonrelevant": sides[0].total if sides[0] else None,
        "favour_relevant": sides[1].total if sides[1] else None,
        "query_delta": f.query_delta,
        "expansion_delta": f.expansion_delta,
        "causes": "; ".join(f.causes),
        "query_length": f.query_length,
        "missing_words": " ".join(f.missing_words),
    }


def cause_counts(failures: Iterable[Failure]) -> dict[str, int]:
    """How many failures each cause holds for, in the order of ``failures.CAUSES`` (every
    cause listed, 0 included; a failure counts under each of its causes)."""
    counts = dict.fromkeys(CAUSES, 0)
    for f in failures:
        for cause in f.causes:
            counts[cause] = counts.get(cause, 0) + 1
    return counts


def select_failures(
    failures: Iterable[Failure],
    causes: Iterable[str] | None = None,
    lengths: tuple[int, int] | None = None,
) -> list[Failure]:
    """The failures with any of ``causes`` (``None``: every one) whose query spells from
    ``lengths[0]`` to ``lengths[1]`` words (``None``: any length), in the order given."""
    wanted = None if causes is None else set(causes)
    return [
        f
        for f in failures
        if (wanted is None or wanted & set(f.causes))
        and (lengths is None or lengths[0] <= f.query_length <= lengths[1])
    ]
