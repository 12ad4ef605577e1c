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
from collections.abc import Sequence
from dataclasses import replace

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
    corpus = check_mot_corpus(corpus)
    check_texts(corpus)
    ATTRIBUTION_NEEDS.check(encoder)
    if attributions is not None:
        own_codebook = True
        if len(attributions) != len(corpus) or any(
            a.text != t for a, t in zip(attributions, corpus, strict=False)
        ):
            raise InputError("attributions must be given for every corpus text, in order")
        if any(a.subvectors != list(range(encoder.m)) for a in attributions):
            raise InputError("attributions must cover all M sub-vectors of the encoder's codebook")
    m_values = [encoder.m] if own_codebook else check_m_values(m_values, encoder.dim)
    if own_codebook and encoder.m < 2:
        raise InputError("M must be at least 2 (RandT needs another sub-vector)")

    rng = np.random.default_rng(seed)
    docs = list(range(len(corpus)))
    if limit is not None and limit < len(docs):
        docs = sorted(int(i) for i in rng.choice(len(corpus), size=int(limit), replace=False))
    tok = encoder.tokenizer
    fill_id = {"unk": tok.unk_token_id, "mask": tok.mask_token_id, "delete": None}[mask]
    words_of = [group_word_pieces(tok.tokenize(t))[0] for t in corpus]
    idf = idf_table(words_of)
    skipped = [i for i in docs if not candidates(words_of[i])]
    docs = [i for i in docs if i not in set(skipped)]
    if len(docs) < 2:
        raise InputError("fewer than two documents have a word (letter or digit) to keep")

    def report(frac: float, msg: str) -> None:
        log.info("%s", msg)
        if progress is not None:
            progress(min(1.0, frac), msg)

    vectors = None
    if not own_codebook:
        vectors = encoder.embed_texts(corpus, progress=lambda f, msg: report(0.05 * f, msg))
    total = len(m_values) * len(docs)
    done = 0
    per_doc: dict[int, pd.DataFrame] = {}
    gaps: dict[int, pd.DataFrame] = {}
    deltas: dict[int, pd.DataFrame] = {}
    steps_used: dict[int, pd.Series] = {}
    notes: list[str] = []
    ks: dict[int, int] = {}
    order = sorted(docs, key=lambda i: len(corpus[i]))
    for m in m_values:
        enc_m = encoder if own_codebook else _with_fitted(encoder, vectors, m, k, seed)
        notes.extend(n for n in getattr(enc_m, "notes", ()) if n not in notes)
        ks[m] = enc_m.k
        other = random_other(m, seed)
        rows: dict[int, dict[str, float]] = {}
        gap_rows: dict[int, np.ndarray] = {}
        delta_rows: dict[int, np.ndarray] = {}
        step_rows: dict[int, int] = {}
        for n_done, i in enumerate(order):
            base = 0.05 + 0.95 * (done + n_done) / total

            def inner(f: float, msg: str, base=base, m=m, n=n_done + 1) -> None:
                report(base + 0.95 * f / total, f"M={m}: document {n}/{len(order)} · {msg}")

            if attributions is not None:
                attr = attributions[i]
            else:
                (attr,) = attribute_texts(
                    enc_m,
                    [corpus[i]],
                    steps=steps,
                    tolerance=tolerance,
                    max_steps=max_steps,
                    progress=inner,
                )
            doc_rng = np.random.default_rng([seed, i])
            rows[i] = doc_errors(enc_m, attr, idf, keep, fill_id, doc_rng, other)
            gap_rows[i], delta_rows[i], step_rows[i] = attr.gap(), attr.delta, attr.steps
        done += len(order)
        report(0.05 + 0.95 * done / total, f"M={m}: {len(order)} documents")
        per_doc[m] = pd.DataFrame.from_dict(rows, orient="index").loc[
            docs, list(RANKINGS) + list(REFERENCE_ROWS)
        ]
        cols = [f"sv{j}" for j in range(m)]
        gaps[m] = pd.DataFrame.from_dict(gap_rows, orient="index", columns=cols).loc[docs]
        deltas[m] = pd.DataFrame.from_dict(delta_rows, orient="index", columns=cols).loc[docs]
        steps_used[m] = pd.Series(step_rows).loc[docs]
    table = pd.DataFrame({m: per_doc[m].mean() for m in m_values})
    table.index.name = "ranking"
    table.columns.name = "M"
    ig_steps = "auto" if steps is None else steps
    if attributions is not None:
        ig_steps = attributions[0].steps if len({a.steps for a in attributions}) == 1 else "auto"
    settings = {
        "keep": keep,
        "steps": ig_steps,
        "tolerance": tolerance,
        "max_steps": max_steps,
        "mask": mask,
        "k": {str(m): ks[m] for m in m_values},
        "seed": seed,
        "n_corpus": len(corpus),
        "n_docs": len(docs),
        "skipped_docs": len(skipped),
        "m_values": m_values,
        "codebook": "encoder's own" if own_codebook else "product quantiser per M on the corpus",
        "words": "word pieces merged at ##; candidates have a letter or digit "
        "(punctuation always masked); stop words are candidates",
        "keep_count": "max(1, floor(keep · candidates + 0.5))",
        "error": "||d̂_i − f_i(mask(d))||², mean over i and documents",
        "tests": "two-sided Wilcoxon signed-rank and paired t-test per M and baseline; "
        "q = Benjamini–Hochberg over every comparison of the table",
    }
    if skipped:
        notes.append(f"{len(skipped)} document(s) without a word to keep were left out")
    result = MotResult(
        encoder=encoder.name,
        table=table,
        significance=significance(per_doc),
        per_doc=per_doc,
        gaps=gaps,
        deltas=deltas,
        steps=steps_used,
        settings=settings,
        notes=list(notes),
        source=source,
    )
    conv = result.convergence()
    loose = conv[conv["share_above_tolerance"] > 0]
    for row in loose.itertuples():
        notes.append(
            f"M={row.m}: {row.share_above_tolerance:.1%} of document × sub-vector deltas exceed "
            f"{tolerance:.0%} of F(x) − F(x′) (worst {row.relative_delta_max:.1%}) at "
            f"{row.steps_max} steps; raise the steps for tighter attributions"
        )
    return replace(result, notes=notes)


def _with_fitted(encoder, vectors: np.ndarray, m: int, k: int, seed: int):
    """The encoder with a product quantiser of M sub-vectors fitted on ``vectors``."""
    from lexlens.models.pq import ProductQuantizer

    return encoder.with_quantizer(ProductQuantizer.fit(vectors, m, k, seed=seed))
