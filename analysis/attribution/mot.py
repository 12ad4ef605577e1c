"""The MoT masking evaluation (RepMoT, "Interpreting Dense Retrieval as Mixture of Topics",
Table 3).

For each document ``d`` and sub-vector ``i``, keep only the top ``keep`` fraction of its
words according to a ranking, mask the rest, and measure ``||d̂_i − f_i(mask(d))||²`` with
``d̂_i`` the centroid of the code chosen for the unmasked document; average over ``i`` and
documents. Lower means the kept words explain the code better.

Choices the paper leaves open (also listed in the result's ``settings``):

* **Words, candidates, rankings**: :mod:`~lexlens.analysis.attribution.mot_rankings`
  (punctuation is never kept; stop words stay candidates, as in the paper).
* **Masking**: every piece of a dropped word becomes ``[UNK]`` (default; the IG baseline's
  fill token), ``[MASK]`` (``mask="mask"``) or is deleted (``mask="delete"``); ``[CLS]`` and
  ``[SEP]`` stay, positions and length are unchanged unless deleting.
* **Integrated Gradients** as in :mod:`lexlens.analysis.attribution.ig` (stop words kept in
  the baseline, so they score exactly 0); by default adaptive: each document's step count
  grows until every sub-vector's completeness gap is within ``tolerance`` (1 %) of
  ``F_i(x) − F_i(x')``. The per-sub-vector deltas at the steps used are part of the result.
* **Codebooks**: each M has its own product quantiser, fitted on the whole corpus.
* **Significance**: :mod:`~lexlens.analysis.attribution.mot_stats` (Wilcoxon and paired
  t-test per M and baseline, Benjamini–Hochberg q-values over the table).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from lexlens.analysis.attribution.arguments import sequence_of, source_argument, splitting
from lexlens.analysis.attribution.ig import attribute_texts
from lexlens.analysis.attribution.mot_rankings import (
    RANKINGS,
    REFERENCE_ROWS,
    candidates,
    idf_table,
    keep_count,
    masked_ids,
    ranking_sets,
)
from lexlens.analysis.attribution.mot_result import MotResult
from lexlens.analysis.attribution.mot_stats import significance
from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS, MotOptions
from lexlens.analysis.attribution.subvector import SubvectorAttribution, random_other
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    progress_argument,
    texts_argument,
)
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.words import group_word_pieces
from lexlens.models.base import Encoder, InputError
from lexlens.models.pq import ProductQuantizer

log = logging.getLogger(__name__)


@torch.no_grad()
def _errors(encoder, sequences: list[list[int]], dhat: np.ndarray) -> np.ndarray:
    """``||d̂_i − f_i(seq)||²`` for every sequence and sub-vector: ``[n_seq, M]``."""
    width = max(len(s) for s in sequences)
    pad = encoder.tokenizer.pad_token_id
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for r, seq in enumerate(sequences):
        ids[r, : len(seq)] = torch.tensor(seq)
        mask[r, : len(seq)] = 1
    f = encoder.forward_ids(ids.to(encoder.device), mask.to(encoder.device))
    sub = encoder.split_torch(f).double().cpu().numpy()  # [n_seq, M, d]
    return ((sub - dhat[None]) ** 2).sum(-1)


def doc_errors(
    encoder,
    attr: SubvectorAttribution,
    idf: dict[str, float],
    keep: float,
    fill_id: int | None,
    rng: np.random.Generator,
    other: np.ndarray,
) -> dict[str, float]:
    """Mean-over-sub-vectors error of every ranking for one document."""
    ids = encoder.tokenizer.convert_tokens_to_ids(attr.tokens)
    shared, mot = ranking_sets(
        attr.words, attr.attributions, attr.global_attributions, idf, keep, rng
    )
    sets: list[frozenset[int]] = []
    index: dict[frozenset[int], int] = {}
    for s in list(shared.values()) + mot:
        if s not in index:
            index[s] = len(sets)
            sets.append(s)
    seqs = [masked_ids(ids, attr.word_groups, s, fill_id) for s in sets]
    seqs = [s if len(s) > 0 else [encoder.tokenizer.cls_token_id] for s in seqs]
    centroids = np.asarray(encoder.centroids, dtype=np.float64)
    dhat = centroids[np.arange(len(attr.codes)), np.asarray(attr.codes)]  # [M, d]
    err = _errors(encoder, seqs, dhat)  # [n_sets, M]
    m = len(attr.codes)
    out = {name: float(err[index[s]].mean()) for name, s in shared.items()}
    rows = np.arange(m)
    out["MoT"] = float(err[[index[mot[i]] for i in rows], rows].mean())
    out["RandT"] = float(err[[index[mot[j]] for j in other], rows].mean())
    return out


@dataclass(frozen=True)
class _Plan:
    """What every M of one masking evaluation shares."""

    corpus: list[str]
    docs: list[int]  # the evaluated corpus positions, in corpus order
    idf: dict[str, float]
    fill_id: int | None
    options: MotOptions
    attributions: Sequence[SubvectorAttribution] | None
    report: Callable[[float, str], None]

    @property
    def order(self) -> list[int]:
        """The documents in the order they are attributed (shortest text first)."""
        return sorted(self.docs, key=lambda i: len(self.corpus[i]))


def _check_attributions(
    encoder, corpus: list[str], attributions: Sequence[SubvectorAttribution]
) -> None:
    """Given attributions are one per corpus text, in order, over all M sub-vectors."""
    if len(attributions) != len(corpus) or any(
        a.text != t for a, t in zip(attributions, corpus, strict=False)
    ):
        raise InputError("attributions must be given for every corpus text, in order")
    if any(a.subvectors != list(range(encoder.m)) for a in attributions):
        raise InputError("attributions must cover all M sub-vectors of the encoder's codebook")


def _documents(
    encoder, corpus: list[str], limit: int | None, seed: int
) -> tuple[list[int], list[int], dict[str, float], list[int]]:
    """The documents evaluated (a seeded sample of ``limit``, those with a word to keep), the
    sampled ones left out for having none, the IDF of every word over the corpus, and each
    evaluated document's number of candidate words."""
    rng = np.random.default_rng(seed)
    docs = list(range(len(corpus)))
    if limit is not None and limit < len(docs):
        docs = sorted(int(i) for i in rng.choice(len(corpus), size=int(limit), replace=False))
    words_of = [group_word_pieces(encoder.tokenizer.tokenize(t))[0] for t in corpus]
    skipped = [i for i in docs if not candidates(words_of[i])]
    docs = [i for i in docs if i not in set(skipped)]
    if len(docs) < 2:
        raise InputError("fewer than two documents have a word (letter or digit) to keep")
    return docs, skipped, idf_table(words_of), [len(candidates(words_of[i])) for i in docs]


def single_word_notes(
    per_doc: dict[int, pd.DataFrame], sizes: list[int], keep: float
) -> tuple[int, list[str]]:
    """How many evaluated texts keep a single word at ``keep`` (``keep_count`` is 1 below
    ``1.5 / keep`` candidate words), and notes saying so and naming, per M, the rankings whose
    errors are equal in every document: they kept the same words, which a single kept word
    makes likely (IDF and TF-IDF agree on it whenever every word occurs once)."""
    single = sum(1 for n in sizes if keep_count(n, keep) == 1)
    notes = []
    if single:
        notes.append(
            f"keep {keep:.0%}: {counted(single, 'text')} of {len(sizes)} keep a single word "
            f"(max(1, floor(keep · words + 0.5)) is 1 below {math.ceil(1.5 / keep)} words)"
        )
    for m, frame in per_doc.items():
        names = [r for r in RANKINGS if r in frame.columns]
        same = [
            (a, b)
            for i, a in enumerate(names)
            for b in names[i + 1 :]
            if frame[a].to_numpy().tobytes() == frame[b].to_numpy().tobytes()
        ]
        for a, b in same:
            why = f", {single} of {len(sizes)} keeping one word" if single else ""
            notes.append(
                f"M={m}: {a} and {b} keep the same words in every document (their errors are "
                f"equal{why}): their rows coincide"
            )
    return single, notes


def _evaluate_m(
    plan: _Plan, enc_m, m: int, done: int, total: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.Series]:
    """One M: every document's errors per ranking, its gaps, deltas and IG steps."""
    seed = plan.options.seed
    other = random_other(m, seed)
    order = plan.order
    rows: dict[int, dict[str, float]] = {}
    gap_rows: dict[int, np.ndarray] = {}
    delta_rows: dict[int, np.ndarray] = {}
    step_rows: dict[int, int] = {}
    for n_done, i in enumerate(order):
        base = 0.05 + 0.95 * (done + n_done) / total

        def inner(f: float, msg: str, base=base, n=n_done + 1) -> None:
            plan.report(base + 0.95 * f / total, f"M={m}: document {n}/{len(order)} · {msg}")

        if plan.attributions is not None:
            attr = plan.attributions[i]
        else:
            (attr,) = attribute_texts(
                enc_m, [plan.corpus[i]], options=plan.options.ig_options(), progress=inner
            )
        doc_rng = np.random.default_rng([seed, i])
        keep = plan.options.keep
        rows[i] = doc_errors(enc_m, attr, plan.idf, keep, plan.fill_id, doc_rng, other)
        gap_rows[i], delta_rows[i], step_rows[i] = attr.gap(), attr.delta, attr.steps
    plan.report(0.05 + 0.95 * (done + len(order)) / total, f"M={m}: {len(order)} documents")
    docs, cols = plan.docs, [f"sv{j}" for j in range(m)]
    return (
        pd.DataFrame.from_dict(rows, orient="index").loc[
            docs, list(RANKINGS) + list(REFERENCE_ROWS)
        ],
        pd.DataFrame.from_dict(gap_rows, orient="index", columns=cols).loc[docs],
        pd.DataFrame.from_dict(delta_rows, orient="index", columns=cols).loc[docs],
        pd.Series(step_rows).loc[docs],
    )


def _settings(
    plan: _Plan, *, ks: dict[int, int], n_skipped: int, m_values: list[int], own_codebook: bool
) -> dict:
    """What was run, with the choices the paper leaves open (the result's ``settings``)."""
    options = plan.options
    ig_steps = "auto" if options.steps is None else options.steps
    if plan.attributions is not None:
        attrs = plan.attributions
        ig_steps = attrs[0].steps if len({a.steps for a in attrs}) == 1 else "auto"
    return {
        "keep": options.keep,
        "steps": ig_steps,
        "tolerance": options.tolerance,
        "max_steps": options.max_steps,
        "mask": options.mask,
        "k": {str(m): ks[m] for m in m_values},
        "seed": options.seed,
        "n_corpus": len(plan.corpus),
        "n_docs": len(plan.docs),
        "skipped_docs": n_skipped,
        "m_values": m_values,
        "codebook": "encoder's own" if own_codebook else "product quantiser per M on the corpus",
        "words": "word pieces merged at ##; candidates have a letter or digit "
        "(punctuation always masked); stop words are candidates",
        "keep_count": "max(1, floor(keep · candidates + 0.5))",
        "error": "||d̂_i − f_i(mask(d))||², mean over i and documents",
        "tests": "two-sided Wilcoxon signed-rank and paired t-test per M and baseline; "
        "q = Benjamini–Hochberg over every comparison of the table",
    }


def _convergence_notes(result: MotResult, tolerance: float) -> list[str]:
    """One note per M whose completeness deltas exceed the tolerance somewhere."""
    conv = result.convergence()
    return [
        f"M={row.m}: {row.share_above_tolerance:.1%} of document × sub-vector deltas exceed "
        f"{tolerance:.0%} of F(x) − F(x′) (worst {row.relative_delta_max:.1%}) at "
        f"{row.steps_max} steps; raise the steps for tighter attributions"
        for row in conv[conv["share_above_tolerance"] > 0].itertuples()
    ]


def mot_inputs(
    encoder: Any, corpus: Any, options: MotOptions, attributions: Any, device: str | None = None
) -> tuple[Encoder, list[str], list[int], list[SubvectorAttribution] | None]:
    """The encoder, the corpus, the M values and the attributions to reuse of a masking
    evaluation, checked against each other before any model runs."""
    corpus = texts_argument(corpus, "corpus")
    if len(corpus) < 2:
        raise InputError(
            f"corpus holds {len(corpus)} text: the masking evaluation needs at least two texts"
        )
    attributions = sequence_of(
        attributions,
        SubvectorAttribution,
        "attributions",
        "a list of SubvectorAttribution, one per corpus text",
    )
    encoder = encoder_argument(encoder, needs=ATTRIBUTION_NEEDS, device=device)
    if attributions is not None:
        _check_attributions(encoder, corpus, attributions)
    if options.own_codebook or attributions is not None:
        if encoder.m < 2:
            raise InputError("M must be at least 2 (RandT needs another sub-vector)")
        return encoder, corpus, [encoder.m], attributions
    dim = encoder.dim
    m_values = [splitting(m, dim, "m_values", f"m_values holds {m}") for m in options.m_values]
    return encoder, corpus, m_values, attributions


def mot_evaluate(
    encoder: Encoder,
    corpus: list[str],
    *,
    options: MotOptions | None = None,
    attributions: Sequence[SubvectorAttribution] | None = None,
    source: str = "",
    progress: Progress | None = None,
    device: str | None = None,
    **given: Any,
) -> MotResult:
    """Run the masking evaluation (the use case); every input is checked first.

    Options: :class:`~lexlens.analysis.attribution.options.MotOptions` (or its fields as
    keywords). Codebooks (one per M) are fitted on the whole corpus; ``limit`` evaluates a
    seeded random sample of that many documents (IG dominates the cost) while IDF and the
    codebooks still use every text. ``own_codebook`` evaluates the encoder's own codebook
    (one column, its M). ``attributions`` — one per corpus text, all M sub-vectors,
    computed with the encoder's own codebook (e.g. by a report) — are reused instead of
    recomputed, and imply ``own_codebook``. ``source`` names the corpus in the result's
    HTML view.
    """
    options = MotOptions.of(options, **given)
    source = source_argument(source)
    progress = progress_argument(progress)
    encoder, corpus, m_values, attributions = mot_inputs(
        encoder, corpus, options, attributions, device_argument(device)
    )
    own_codebook = options.own_codebook or attributions is not None
    docs, skipped, idf, sizes = _documents(encoder, corpus, options.limit, options.seed)
    tok = encoder.tokenizer
    fill_id = {"unk": tok.unk_token_id, "mask": tok.mask_token_id, "delete": None}[options.mask]
    plan = _Plan(corpus, docs, idf, fill_id, options, attributions, _reporter(progress))
    frames, ks, notes = _evaluate_every_m(plan, encoder, m_values, own_codebook=own_codebook)
    table = pd.DataFrame({m: frames["per_doc"][m].mean() for m in m_values})
    table.index.name = "ranking"
    table.columns.name = "M"
    if skipped:
        notes.append(
            counted(
                len(skipped),
                "document without a word to keep was",
                "documents without a word to keep were",
            )
            + " left out"
        )
    single, coincide = single_word_notes(frames["per_doc"], sizes, options.keep)
    notes.extend(coincide)
    settings = _settings(
        plan, ks=ks, n_skipped=len(skipped), m_values=m_values, own_codebook=own_codebook
    )
    settings["single_word_docs"] = single
    result = MotResult(
        encoder=encoder.name,
        table=table,
        significance=significance(frames["per_doc"]),
        **frames,
        settings=settings,
        notes=list(notes),
        source=source,
    )
    return replace(result, notes=notes + _convergence_notes(result, options.tolerance))


def _reporter(progress: Progress | None) -> Callable[[float, str], None]:
    """Progress as the evaluation reports it: logged, and passed on (capped at 1)."""

    def report(frac: float, msg: str) -> None:
        log.info("%s", msg)
        if progress is not None:
            progress(min(1.0, frac), msg)

    return report


def _evaluate_every_m(
    plan: _Plan, encoder, m_values: list[int], *, own_codebook: bool
) -> tuple[dict[str, dict], dict[int, int], list[str]]:
    """Every M, with its codebook (fitted on the corpus, or the encoder's own): the result's
    frames per M (``per_doc``, ``gaps``, ``deltas``, ``steps``), K per M, the codebooks' notes."""
    options = plan.options
    vectors = None
    if not own_codebook:
        vectors = encoder.embed_texts(
            plan.corpus,
            batch_size=options.batch_size,
            progress=lambda f, m: plan.report(0.05 * f, m),
        )
    frames: dict[str, dict] = {"per_doc": {}, "gaps": {}, "deltas": {}, "steps": {}}
    notes: list[str] = []
    ks: dict[int, int] = {}
    total = len(m_values) * len(plan.docs)
    for j, m in enumerate(m_values):
        enc_m = encoder if own_codebook else _with_fitted(encoder, vectors, m, options)
        notes.extend(note for note in getattr(enc_m, "notes", ()) if note not in notes)
        ks[m] = enc_m.k
        parts = _evaluate_m(plan, enc_m, m, j * len(plan.docs), total)
        for name, part in zip(frames, parts, strict=True):
            frames[name][m] = part
    return frames, ks, notes


def _with_fitted(encoder, vectors: np.ndarray, m: int, options: MotOptions):
    """The encoder with a product quantiser of M sub-vectors (K and the k-means seed of the
    options) fitted on ``vectors``."""

    pq = ProductQuantizer.fit(vectors, m, options.k, seed=options.seed)
    return encoder.with_quantizer(pq)
