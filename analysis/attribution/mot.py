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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from lexlens.analysis.attribution.ig import attribute_texts
from lexlens.analysis.attribution.mot_rankings import (
    RANKINGS,
    REFERENCE_ROWS,
    candidates,
    idf_table,
    masked_ids,
    ranking_sets,
)
from lexlens.analysis.attribution.mot_result import MotResult
from lexlens.analysis.attribution.mot_stats import significance
from lexlens.analysis.attribution.subvector import SubvectorAttribution, random_other
from lexlens.analysis.attribution.validate import (
    ATTRIBUTION_NEEDS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    check_keep,
    check_limit,
    check_m_values,
    check_mask,
    check_max_steps,
    check_mot_corpus,
    check_seed,
    check_steps,
    check_tolerance,
)
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.words import group_word_pieces
from lexlens.models.base import InputError, check_texts

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
    keep: float
    fill_id: int | None
    steps: int | None
    tolerance: float
    max_steps: int
    seed: int
    attributions: Sequence[SubvectorAttribution] | None
    report: Callable[[float, str], None]

    @property
    def order(self) -> list[int]:
        """The documents in the order they are attributed (shortest text first)."""
        return sorted(self.docs, key=lambda i: len(self.corpus[i]))


def _check_settings(
    *,
    keep: float,
    mask: str,
    steps: int | None,
    tolerance: float,
    max_steps: int,
    seed: int,
    k: int,
    limit: int | None,
    own_codebook: bool,
) -> tuple[float, int | None, float, int, int]:
    """The settings checked and normalised: keep, steps, tolerance, max steps, seed."""
    keep = check_keep(keep)
    check_mask(mask)
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance)
    max_steps = check_max_steps(max_steps)
    seed = check_seed(seed)
    if not own_codebook:
        from lexlens.models.pq import check_k

        check_k(k)
    check_limit(limit)
    return keep, steps, tolerance, max_steps, seed


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
) -> tuple[list[int], list[int], dict[str, float]]:
    """The documents evaluated (a seeded sample of ``limit``, those with a word to keep), the
    sampled ones left out for having none, and the IDF of every word over the corpus."""
    rng = np.random.default_rng(seed)
    docs = list(range(len(corpus)))
    if limit is not None and limit < len(docs):
        docs = sorted(int(i) for i in rng.choice(len(corpus), size=int(limit), replace=False))
    words_of = [group_word_pieces(encoder.tokenizer.tokenize(t))[0] for t in corpus]
    skipped = [i for i in docs if not candidates(words_of[i])]
    docs = [i for i in docs if i not in set(skipped)]
    if len(docs) < 2:
        raise InputError("fewer than two documents have a word (letter or digit) to keep")
    return docs, skipped, idf_table(words_of)


def _evaluate_m(
    plan: _Plan, enc_m, m: int, done: int, total: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.Series]:
    """One M: every document's errors per ranking, its gaps, deltas and IG steps."""
    other = random_other(m, plan.seed)
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
                enc_m,
                [plan.corpus[i]],
                steps=plan.steps,
                tolerance=plan.tolerance,
                max_steps=plan.max_steps,
                progress=inner,
            )
        doc_rng = np.random.default_rng([plan.seed, i])
        rows[i] = doc_errors(enc_m, attr, plan.idf, plan.keep, plan.fill_id, doc_rng, other)
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


def _settings(plan: _Plan, *, mask: str, ks: dict[int, int], n_skipped: int,
              m_values: list[int], own_codebook: bool) -> dict:  # fmt: skip
    """What was run, with the choices the paper leaves open (the result's ``settings``)."""
    ig_steps = "auto" if plan.steps is None else plan.steps
    if plan.attributions is not None:
        attrs = plan.attributions
        ig_steps = attrs[0].steps if len({a.steps for a in attrs}) == 1 else "auto"
    return {
        "keep": plan.keep,
        "steps": ig_steps,
        "tolerance": plan.tolerance,
        "max_steps": plan.max_steps,
        "mask": mask,
        "k": {str(m): ks[m] for m in m_values},
        "seed": plan.seed,
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


def mot_evaluate(
    encoder,
    corpus: list[str],
    *,
    m_values: Sequence[int] = (12, 24, 48),
    keep: float = 0.05,
    steps: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = DEFAULT_MAX_STEPS,
    k: int = 256,
    seed: int = 0,
    limit: int | None = None,
    mask: str = "unk",
    own_codebook: bool = False,
    attributions: Sequence[SubvectorAttribution] | None = None,
    source: str = "",
    progress: Progress | None = None,
) -> MotResult:
    """Run the masking evaluation (the use case); every option is checked first.

    Codebooks (one per M) are fitted on the whole corpus; ``limit`` evaluates a seeded
    random sample of that many documents (IG dominates the cost) while IDF and the
    codebooks still use every text. ``own_codebook=True`` evaluates the encoder's own
    codebook (one column, its M). ``attributions`` — one per corpus text, all M
    sub-vectors, computed with the encoder's own codebook (e.g. by a report) — are reused
    instead of recomputed, and imply ``own_codebook``. ``source`` names the corpus in the
    result's HTML view.
    """
    keep, steps, tolerance, max_steps, seed = _check_settings(
        keep=keep, mask=mask, steps=steps, tolerance=tolerance, max_steps=max_steps,
        seed=seed, k=k, limit=limit, own_codebook=own_codebook,
    )  # fmt: skip
    corpus = check_mot_corpus(corpus)
    check_texts(corpus)
    ATTRIBUTION_NEEDS.check(encoder)
    if attributions is not None:
        own_codebook = True
        _check_attributions(encoder, corpus, attributions)
    m_values = [encoder.m] if own_codebook else check_m_values(m_values, encoder.dim)
    if own_codebook and encoder.m < 2:
        raise InputError("M must be at least 2 (RandT needs another sub-vector)")
    docs, skipped, idf = _documents(encoder, corpus, limit, seed)
    tok = encoder.tokenizer
    fill_id = {"unk": tok.unk_token_id, "mask": tok.mask_token_id, "delete": None}[mask]
    plan = _Plan(corpus, docs, idf, keep, fill_id, steps, tolerance, max_steps, seed,
                 attributions, _reporter(progress))  # fmt: skip
    frames, ks, notes = _evaluate_every_m(plan, encoder, m_values, k=k, own_codebook=own_codebook)
    table = pd.DataFrame({m: frames["per_doc"][m].mean() for m in m_values})
    table.index.name = "ranking"
    table.columns.name = "M"
    if skipped:
        notes.append(f"{len(skipped)} document(s) without a word to keep were left out")
    settings = _settings(plan, mask=mask, ks=ks, n_skipped=len(skipped), m_values=m_values,
                         own_codebook=own_codebook)  # fmt: skip
    result = MotResult(
        encoder=encoder.name,
        table=table,
        significance=significance(frames["per_doc"]),
        **frames,
        settings=settings,
        notes=list(notes),
        source=source,
    )
    return replace(result, notes=notes + _convergence_notes(result, tolerance))


def _reporter(progress: Progress | None) -> Callable[[float, str], None]:
    """Progress as the evaluation reports it: logged, and passed on (capped at 1)."""

    def report(frac: float, msg: str) -> None:
        log.info("%s", msg)
        if progress is not None:
            progress(min(1.0, frac), msg)

    return report


def _evaluate_every_m(
    plan: _Plan, encoder, m_values: list[int], *, k: int, own_codebook: bool
) -> tuple[dict[str, dict], dict[int, int], list[str]]:
    """Every M, with its codebook (fitted on the corpus, or the encoder's own): the result's
    frames per M (``per_doc``, ``gaps``, ``deltas``, ``steps``), K per M, the codebooks' notes."""
    vectors = None
    if not own_codebook:
        vectors = encoder.embed_texts(plan.corpus, progress=lambda f, m: plan.report(0.05 * f, m))
    frames: dict[str, dict] = {"per_doc": {}, "gaps": {}, "deltas": {}, "steps": {}}
    notes: list[str] = []
    ks: dict[int, int] = {}
    total = len(m_values) * len(plan.docs)
    for j, m in enumerate(m_values):
        enc_m = encoder if own_codebook else _with_fitted(encoder, vectors, m, k, plan.seed)
        notes.extend(note for note in getattr(enc_m, "notes", ()) if note not in notes)
        ks[m] = enc_m.k
        parts = _evaluate_m(plan, enc_m, m, j * len(plan.docs), total)
        for name, part in zip(frames, parts, strict=True):
            frames[name][m] = part
    return frames, ks, notes


def _with_fitted(encoder, vectors: np.ndarray, m: int, k: int, seed: int):
    """The encoder with a product quantiser of M sub-vectors fitted on ``vectors``."""
    from lexlens.models.pq import ProductQuantizer

    return encoder.with_quantizer(ProductQuantizer.fit(vectors, m, k, seed=seed))
