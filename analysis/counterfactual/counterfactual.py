"""What would it take for a target item to rank first? The use case ``counterfactual``.

Two answers, each checked against *every* item of the collection (the benchmark
evaluation's score ``Σ_t q_t d_t``, ties by collection row, a target scoring 0 or less not
retrieved):

- **terms** (exact): the smallest set of vocabulary terms whose removal from the query
  vector puts the target first (:mod:`.term_level`), with the target's score and the first
  rival after each removal;
- **text** (re-encoded by the model): the shortest sequence of edits — delete query words
  (occlude cells of an image query), insert query words, in order, into the target's text —
  whose re-encoded inputs rank the target first (:mod:`.edit_search`), guided by the
  term-level answer and provenance, within ``max_edits`` and ``max_calls``.

Counterfactual explanations for retrieval were proposed for BM25, dense and cross-encoders
(CfIR, CFE2, CREDENCE); this one is for learned sparse encoders, and every edit shown is
verified by re-encoding. When none is found the closest one (best rank reached) is given
with ``found: false``, and the answer says whether none exists in the edit space (every
candidate ranked) or none was found among the candidates the budget let be searched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.arguments import collection_argument
from lexlens.analysis.collections.stored import reencoding_notes
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    image_argument,
    text_argument,
)
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.threads import analysis_threads, thread_count
from lexlens.analysis.core.truncation import opening, truncation
from lexlens.analysis.counterfactual.edit_search import EditSpace, Outcome, TextSearch, prior_of
from lexlens.analysis.counterfactual.edits import (
    Edit,
    ImageQuery,
    TextQuery,
    TextTarget,
    insertable,
    word_key,
)
from lexlens.analysis.counterfactual.options import CounterfactualOptions
from lexlens.analysis.counterfactual.result import Counterfactual, CounterfactualResult
from lexlens.analysis.counterfactual.screen import EditScreen
from lexlens.analysis.counterfactual.term_level import TermAnswer, term_counterfactual
from lexlens.analysis.datasets.trec import read_queries
from lexlens.analysis.lexical.word_units import TextWords, text_words, word_terms
from lexlens.analysis.retrieval.queries import (
    IMAGE_QUERY_NEEDS,
    QuerySpec,
    query_encoder_for,
    text_query_needs,
)
from lexlens.analysis.retrieval.scorer import Placement, Scorer, scorer_for
from lexlens.models.base import Encoder, InputError

IMAGE_TARGET_NOTE = "the target is an image: it takes no document edits"


def stored_query(collection: Collection, query_id: Any) -> str:
    """The text of query ``query_id`` among the queries a collection keeps (built from a
    benchmark)."""

    text_argument(query_id, "query_id")
    found = collection.benchmark_files
    if found is None:
        raise InputError("query_id: this collection keeps no queries: give the query's text")
    queries = read_queries(found[0])
    if query_id not in queries:
        raise InputError(f"query_id {query_id!r} is not among the {len(queries)} queries kept")
    return queries[query_id]


def _target_row(collection: Collection, ids: list[str], target: Any) -> tuple[int, dict]:
    """The row of item ``target`` (its id) and its metadata."""
    text_argument(target, "target", about="an item's id")
    try:
        row = ids.index(target)
    except ValueError:
        raise InputError(f"target {target!r} is not an item of the collection") from None
    return row, collection.meta([row])[0]


def _document_encoder(
    collection: Collection, query_encoder: Encoder, device: str | None
) -> Encoder:
    """The encoder the collection's items were encoded with (the query's when the same)."""

    spec = collection.encoder_spec
    if spec in (query_encoder.name, getattr(query_encoder, "source", None)):
        return query_encoder
    return encoder_argument(spec, "the collection's encoder", device=device)


def _query_input(query: Any, query_id: Any, collection: Collection) -> Any:
    if query_id is not None:
        if query is not None:
            raise InputError("give the query or query_id, not both")
        return stored_query(collection, query_id)
    if isinstance(query, str):
        if not query.strip():
            raise InputError("query is empty: type some words")
        return query
    if query is None:
        raise InputError("query must be a text or an image (or give query_id)")
    return image_argument(query, "query")


@dataclass(frozen=True)
class Prepared:
    """One counterfactual's inputs, checked and loaded: the collection and its ids, the query
    as the search edits it, the target's row and metadata, the encoder and device."""

    collection: Collection
    ids: list[str]
    query: TextQuery | ImageQuery
    row: int
    meta: dict
    encoder: Encoder
    device: str | None
    query_id: str | None


def prepare(
    index_or_collection: Any,
    query: Any,
    target: Any,
    *,
    query_id: str | None = None,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    options: CounterfactualOptions,
) -> Prepared:
    """Check every input (before any model loads, but the query encoder's) and load them."""
    device_argument(device)
    collection = collection_argument(index_or_collection, "index_or_collection")
    text_argument(query_id, "query_id", optional=True)
    query = _query_input(query, query_id, collection)
    ids = [str(i) for i in collection.column("id")]
    row, meta = _target_row(collection, ids, target)
    is_text = isinstance(query, str)
    encoder = query_encoder_for(
        collection,
        query_encoder,
        device,
        "text" if is_text else "image",
        needs=text_query_needs(options.query_mode) if is_text else IMAGE_QUERY_NEEDS,
    )
    if is_text:
        edited: TextQuery | ImageQuery = TextQuery(
            QuerySpec(encoder, options.query_mode, options.gate_k), query
        )
    else:
        from lexlens.models.images import load_image  # heavy: loads PIL

        picture = query if hasattr(query, "convert") else load_image(query, name="query")
        label = Path(query).name if isinstance(query, Path) else "image"
        edited = ImageQuery(QuerySpec(encoder, "parametric", options.gate_k), picture, label)
    return Prepared(collection, ids, edited, row, meta, encoder, device, query_id)


def counterfactual(
    index_or_collection: Any,
    query: Any,
    target: Any,
    *,
    query_id: str | None = None,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    options: CounterfactualOptions | None = None,
    **given: Any,
) -> CounterfactualResult:
    """What it takes for item ``target`` (its id) to rank first for ``query`` (a text, an
    image, or ``None`` with ``query_id`` naming a query the collection keeps) among all items
    of ``index_or_collection``: the exact term-level answer and (level "text") the shortest
    verified word edits (see the module docstring). Settings: ``options`` or its fields."""
    options = CounterfactualOptions.of(options, **given)
    analysis_threads()  # a bad LEXLENS_THREADS fails here, before any model loads
    prepared = prepare(
        index_or_collection,
        query,
        target,
        query_id=query_id,
        query_encoder=query_encoder,
        device=device,
        options=options,
    )
    return answer(prepared, options)


def answer(
    prepared: Prepared,
    options: CounterfactualOptions,
    *,
    one_at_a_time: bool = False,
    screen: bool = True,
) -> CounterfactualResult:
    """Both levels for one prepared query and target (``one_at_a_time``: the same search
    encoding and ranking each candidate alone; ``screen=False``: every candidate encoded,
    none left out by the score bounds of :mod:`.screen` — both to measure what they save)."""
    with thread_count():  # many small encodings: one thread each on a small machine
        return _answer(prepared, options, one_at_a_time, screen)


def _answer(
    p: Prepared, options: CounterfactualOptions, one_at_a_time: bool, screen: bool
) -> CounterfactualResult:
    started = time.perf_counter()
    # one forward: the query's gated vector and its per-unit rows (provenance)
    q0, with_units = p.query.encode_one_with_units()
    scorer = scorer_for(p.collection)
    found = term_counterfactual(scorer, q0, p.row)
    terms = _terms_record(found, p, time.perf_counter() - started)
    notes = reencoding_notes(p.collection)
    if isinstance(p.query, TextQuery) and p.query.encoding is not None:
        name = f"query {p.query_id}" if p.query_id else f"query {opening(p.query.text)}"
        cut = truncation(p.encoder, p.query.text, p.query.encoding, name)
        notes.extend([cut.note()] if cut is not None else [])
    text_answer = None
    if options.level == "text":
        search = _text_search(
            p, scorer, q0, with_units, found, options, notes, one_at_a_time, screen
        )
        started = time.perf_counter()
        space = EditSpace(
            len(p.query.words),
            options.side in ("query", "both"),
            search.words,
            options.max_edits,
        )
        outcome = search.run(space)
        notes.extend(outcome.notes)
        text_answer = _text_record(outcome, search, p, time.perf_counter() - started)
    query = p.query.text if isinstance(p.query, TextQuery) else p.query.label
    return CounterfactualResult(
        index=p.collection.describe(),
        query=query,
        query_id=p.query_id,
        target=p.ids[p.row],
        counterfactual=text_answer,
        terms=terms,
        settings={"query_encoder": p.encoder.name, **options.to_dict()},
        notes=notes,
    )


def _text_search(
    p: Prepared,
    scorer: Scorer,
    q0: np.ndarray,
    with_units,
    found: TermAnswer,
    options: CounterfactualOptions,
    notes: list[str],
    one_at_a_time: bool,
    screen: bool,
) -> TextSearch:
    """The text-level search of one query and target: its single edits (by ``side``) and
    their prior (from provenance and the term-level answer)."""
    query, target = p.query, None
    singles = query.edits() if options.side in ("query", "both") else []
    words: list[str] = []
    excluded: list[dict] = []
    if options.side in ("document", "both"):
        if bool(p.meta.get("image")) or p.collection.modality != "text":
            notes.append(IMAGE_TARGET_NOTE)
        elif isinstance(query, TextQuery):
            gate_k = p.collection.gate_k
            text = str(p.meta.get("text") or "")
            encoder = _document_encoder(p.collection, p.encoder, p.device)
            target = TextTarget(encoder, text, gate_k, options.insert_at)
            words, excluded = insertable(
                query.words, text, allow_stop_words=options.allow_stop_words
            )
            singles += [Edit("insert", "document", w, -1) for w in words]
        else:
            notes.append("an image query's words cannot be inserted into a text: query edits only")
    d0 = np.zeros(len(p.collection.vocab))
    cols, vals = p.collection.row(p.row)
    d0[cols] = vals
    probes: dict[str, np.ndarray] = {}
    if isinstance(query, TextQuery):
        provenance, units = _word_terms(p.encoder, query, with_units, q0, notes)
        if units is not None and target is not None:
            probes = _word_rows(units, with_units, words)
    else:
        provenance = _cell_terms(with_units, q0, len(query.words))
    probe = None if target is None else target.encode
    predicted = EditScreen(scorer, q0, scorer.all_scores(q0)[0], p.row, provenance, d0, probe)
    if screen:
        predicted.probes.update(probes)
        predicted.prepare([e.value for e in singles if e.side == "document"])
    search = TextSearch(
        scorer,
        query,
        p.row,
        target,
        q0,
        d0,
        options.max_calls,
        one_at_a_time=one_at_a_time,
        screen=predicted if screen else None,
    )
    search.calls = predicted.calls
    search.singles = singles
    search.words = tuple(words)
    search.excluded = excluded
    search.prior = prior_of(query, predicted, provenance, set(found.terms), d0)
    return search


def _word_terms(
    encoder: Encoder, query: TextQuery, encoding, q0: np.ndarray, notes: list[str]
) -> tuple[list[set[int]], TextWords | None]:
    """For each query word, the query terms it produced (none known: empty sets), and the
    query's words with their units."""
    if encoding is None or encoding.unit_weights is None:
        return [set() for _ in query.words], None
    try:
        words = text_words(encoder, query.text, encoding.units)
    except InputError as error:
        notes.append(f"no provenance to guide the search: {error}")
        return [set() for _ in query.words], None
    return word_terms(words, encoding, q0), words


def _word_rows(words: TextWords, encoding, inserted: list[str]) -> dict[str, np.ndarray]:
    """For each word to insert, the largest per-unit weights of the query's units of that
    word (the terms it expands to, as the query's encoding read it)."""
    out: dict[str, np.ndarray] = {}
    for value in inserted:
        units = [
            u
            for j, w in enumerate(words.words)
            if word_key(w) == word_key(value)
            for u in words.units_of(j)
        ]
        if units:
            out[value] = encoding.unit_weights[units].max(axis=0).astype(np.float64)
    return out


def _cell_terms(encoding, q0: np.ndarray, cells: int) -> list[set[int]]:
    """For each cell of an image query, the query terms whose max pool it won."""
    out: list[set[int]] = [set() for _ in range(cells)]
    if encoding is None or encoding.unit_weights is None:
        return out
    terms = np.flatnonzero(q0)
    winners = np.argmax(encoding.unit_weights[:, terms], axis=0) if terms.size else []
    for term, unit in zip(terms, winners, strict=True):
        if int(unit) < cells:
            out[int(unit)].add(int(term))
    return out


def _rival(ids: list[str], placed: Placement) -> str | None:
    return None if placed.rival is None else ids[placed.rival]


def _text_record(
    outcome: Outcome, search: TextSearch, p: Prepared, seconds: float
) -> Counterfactual:
    """The text-level answer as reported."""
    state, root, ids = outcome.state, search.root, p.ids
    notes = list(outcome.notes)
    if root.first:
        notes.append("the target already ranks first")
    elif not outcome.found:
        rank = outcome.placement.rank if outcome.placement.rank else "none"
        if outcome.status == "none exists":
            said = (
                f"none exists in this edit space: all {outcome.space:,} candidates of at most "
                f"{search.max_edits} edits encoded and ranked"
            )
        else:
            said = (
                f"none found: searched {outcome.searched:,} of {outcome.space:,} candidates "
                "(the budget of model calls ran out)"
            )
        notes.append(f"{said}; the closest tried is shown (rank {rank})")
    elif not outcome.shortest:
        notes.append(
            "the shortest found: not every candidate of fewer edits was ranked, a shorter "
            "one may exist"
        )
    return Counterfactual(
        target=ids[p.row],
        level="text",
        edits=[e.to_dict() for e in outcome.edits],
        edited_query=p.query.shown(state.deleted),
        edited_document=None if search.target is None else search.target.edited(state.inserted),
        rank_before=root.rank,
        rank_after=outcome.placement.rank,
        score_after=outcome.placement.score,
        rival_after=_rival(ids, outcome.placement),
        verified=outcome.verified,
        model_calls=outcome.model_calls,
        seconds=round(seconds, 4),
        found=outcome.found,
        exact=False,
        score_before=root.score,
        rival_before=_rival(ids, root),
        rival_score_after=outcome.placement.rival_score,
        notes=notes,
        search=outcome.status,
        searched=outcome.searched,
        space=outcome.space,
        exhaustive=outcome.exhaustive,
        shortest=outcome.shortest,
        excluded=list(search.excluded),
    )


def _terms_record(found: TermAnswer, p: Prepared, seconds: float) -> Counterfactual:
    """The term-level answer as reported, each step over the whole collection."""
    before, after = found.before, found.after or found.before
    ids, vocab = p.ids, p.collection.vocab
    notes = [found.note] if found.note else []
    if before.first:
        notes.append("the target already ranks first")
    elif found.first and not found.exact:
        notes.append("smallest found (beyond the exact search): a smaller set may exist")
    elif found.first:
        notes.append("the smallest set (exact search)")
    steps = [
        {
            "term": vocab[s.term],
            "score": s.score,
            "rank": s.rank,
            "rival": None if s.rival is None else ids[s.rival],
            "rival_score": s.rival_score,
        }
        for s in found.steps
    ]
    return Counterfactual(
        target=ids[p.row],
        level="terms",
        edits=[{"op": "delete", "side": "query", "term": vocab[t]} for t in found.terms],
        edited_query=p.query.shown(frozenset()),
        edited_document=None,
        rank_before=before.rank,
        rank_after=after.rank,
        score_after=after.score,
        rival_after=_rival(ids, after),
        verified=True,
        model_calls=0,
        seconds=round(seconds, 4),
        found=found.first,
        exact=found.exact,
        score_before=before.score,
        rival_before=_rival(ids, before),
        rival_score_after=after.rival_score,
        steps=steps,
        notes=notes,
    )
