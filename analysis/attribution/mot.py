"""The MoT masking evaluation (RepMoT Table 3, SPEC.md §4).

For each document ``d`` and sub-vector ``i``, keep only the top ``keep`` fraction of its
words according to a ranking, mask the rest, and measure ``||d̂_i − f_i(mask(d))||²`` with
``d̂_i`` the centroid of the code chosen for the unmasked document; average over ``i`` and
documents. Lower means the kept words explain the code better.

Choices the paper leaves open (also listed in the result's ``settings``):

* **Words** are WordPiece tokens merged at ``##``. **Candidates** are the words with a
  letter or digit: punctuation and symbols are never kept and never counted in the 5 %
  (they are always masked). Stop words stay candidates, as in the paper.
* **How many**: ``max(1, floor(keep · n_candidates + 0.5))`` (round half up, at least one).
* **Masking**: every piece of a dropped word becomes ``[UNK]`` (default; the IG baseline's
  fill token), ``[MASK]`` (``mask="mask"``) or is deleted (``mask="delete"``); ``[CLS]`` and
  ``[SEP]`` stay, positions and length are unchanged unless deleting.
* **Rankings** (over candidates): Tail / Head keep the last / first words; Rand a random
  set (seeded per document); TF = count of the word in the document, IDF = ``log(N / df)``
  over the whole evaluation corpus, TF-IDF their product; GlobalT = IG of the whole
  vector; MoT = IG of sub-vector i; RandT = IG of another sub-vector j(i) ≠ i (seeded).
  Ties are broken by a seeded random order of the document's words.
* **Integrated Gradients** as in :mod:`lexlens.analysis.attribution.attribution` (stop words kept in
  the baseline, so they score exactly 0); by default adaptive: each document's step count
  grows until every sub-vector's completeness gap is within ``tolerance`` (1 %) of
  ``F_i(x) − F_i(x')``. The per-sub-vector deltas at the steps used are part of the result.
* **Codebooks**: each M has its own product quantiser, fitted on the whole corpus.
* **Significance**: per-document errors (mean over i), MoT against each baseline, two-sided
  Wilcoxon signed-rank test and the paired t-test the paper used; the p-values of all
  comparisons of a table (every M × baseline) are corrected for multiple comparisons by
  Benjamini–Hochberg (``scipy.stats.false_discovery_control``) into q-values.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from lexlens.analysis.attribution.attribution import (
    ATTRIBUTION_NEEDS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    SubvectorAttribution,
    attribute_texts,
    check_max_steps,
    check_steps,
    check_tolerance,
    group_word_pieces,
    is_word,
    random_other,
)
from lexlens.models.base import InputError, check_texts

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]
POSITION = ("Tail", "Rand", "Head")
FREQUENCY = ("IDF", "TF", "TF-IDF")
ATTRIBUTION = ("RandT", "GlobalT", "MoT")
RANKINGS = POSITION + FREQUENCY + ATTRIBUTION
#: Reference rows (not rankings): no word masked (the quantisation error) / every word.
REFERENCE_ROWS = ("(none masked)", "(all masked)")
MASKS = ("unk", "mask", "delete")
#: What the masking evaluation needs: the same as Integrated Gradients per sub-vector.
MOT_NEEDS = ATTRIBUTION_NEEDS


@dataclass(frozen=True)
class MotResult:
    """The masking table, its significance tests and the IG completeness behind it.

    Attributes:
        table: mean error, rows = rankings (+ reference rows), columns = M (int).
        significance: one row per (M, baseline): mean errors, the share of documents where
            MoT's error is lower, Wilcoxon and t-test p-values and their FDR q-values.
        per_doc: for each M, per-document errors (rows = corpus positions).
        gaps / deltas: for each M, ``F_i(x) − F_i(x')`` and the completeness gap ``delta_i``
            of every document × sub-vector, at the steps used (``steps``: per document).
        settings: what was run (keep, steps, mask, K, corpus sizes, seed, choices).
    """

    encoder: str
    table: pd.DataFrame
    significance: pd.DataFrame
    per_doc: dict[int, pd.DataFrame]
    gaps: dict[int, pd.DataFrame]
    deltas: dict[int, pd.DataFrame]
    steps: dict[int, pd.Series]
    settings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def relative_deltas(self, m: int) -> pd.DataFrame:
        """``|delta_i| / |F_i(x) − F_i(x')|`` per document × sub-vector."""
        gap = self.gaps[m].abs()
        return (self.deltas[m].abs() / gap.where(gap > 0)).fillna(np.inf)

    def convergence(self) -> pd.DataFrame:
        """Per M: steps used and the relative completeness deltas at those steps."""
        rows = []
        tol = float(self.settings.get("tolerance", DEFAULT_TOLERANCE))
        for m in self.table.columns:
            rel = self.relative_deltas(m).to_numpy().ravel()
            rel = rel[np.isfinite(rel)]
            steps = self.steps[m]
            rows.append(
                {
                    "m": int(m),
                    "steps_min": int(steps.min()),
                    "steps_median": float(steps.median()),
                    "steps_max": int(steps.max()),
                    "relative_delta_mean": float(rel.mean()) if rel.size else 0.0,
                    "relative_delta_median": float(np.median(rel)) if rel.size else 0.0,
                    "relative_delta_max": float(rel.max()) if rel.size else 0.0,
                    "share_above_tolerance": float((rel > tol).mean()) if rel.size else 0.0,
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        """Every number: the table, the tests, the per-document errors and deltas."""
        ms = [int(m) for m in self.table.columns]
        return {
            "kind": "mot",
            "encoder": self.encoder,
            "settings": dict(self.settings),
            "notes": list(self.notes),
            "rankings": list(self.table.index),
            "table": {str(m): {r: float(v) for r, v in self.table[m].items()} for m in ms},
            "significance": self.significance.to_dict(orient="records"),
            "pairwise": pairwise(self.per_doc).to_dict(orient="records"),
            "convergence": self.convergence().to_dict(orient="records"),
            "per_m": {
                str(m): {
                    "docs": [int(i) for i in self.per_doc[m].index],
                    "errors": {c: self.per_doc[m][c].tolist() for c in self.per_doc[m].columns},
                    "steps": [int(s) for s in self.steps[m]],
                    "target_gap": self.gaps[m].to_numpy().tolist(),
                    "delta": self.deltas[m].to_numpy().tolist(),
                }
                for m in ms
            },
        }


def keep_count(n_words: int, keep: float) -> int:
    """Words kept: ``max(1, floor(keep · n + 0.5))``, at most ``n`` (0 when ``n`` is 0)."""
    if n_words <= 0:
        return 0
    return min(n_words, max(1, math.floor(keep * n_words + 0.5)))


def candidates(words: Sequence[str]) -> list[int]:
    """Indices of the words that may be kept: those with a letter or digit."""
    return [j for j, w in enumerate(words) if is_word(w)]


def idf_table(word_lists: Sequence[Sequence[str]]) -> dict[str, float]:
    """``log(N / df)`` per lower-cased candidate word over the documents."""
    df: Counter[str] = Counter()
    for words in word_lists:
        df.update({w.lower() for w in words if is_word(w)})
    n = len(word_lists)
    return {w: math.log(n / c) for w, c in df.items()}


def _top(cand: list[int], scores: np.ndarray, tiebreak: np.ndarray, k: int) -> frozenset[int]:
    """The ``k`` candidates with the highest scores; ties by the random order ``tiebreak``."""
    s = np.asarray(scores, dtype=np.float64)[cand]
    order = np.lexsort((tiebreak[cand], -s))
    return frozenset(cand[int(j)] for j in order[:k])


def ranking_sets(
    words: list[str],
    attributions: np.ndarray,
    global_attributions: np.ndarray,
    idf: dict[str, float],
    keep: float,
    rng: np.random.Generator,
) -> tuple[dict[str, frozenset[int]], list[frozenset[int]]]:
    """Kept word sets: the shared rankings by name, and MoT's set for each sub-vector."""
    n = len(words)
    cand = candidates(words)
    k = keep_count(len(cand), keep)
    tiebreak = rng.permutation(n)
    lower = [w.lower() for w in words]
    tf_counts = Counter(lower[j] for j in cand)
    tf = np.array([tf_counts.get(w, 0) for w in lower], dtype=np.float64)
    idf_v = np.array([idf.get(w, 0.0) for w in lower], dtype=np.float64)
    picked = rng.choice(len(cand), size=k, replace=False) if cand else []
    shared = {
        "Tail": frozenset(cand[len(cand) - k :]) if k else frozenset(),
        "Head": frozenset(cand[:k]),
        "Rand": frozenset(cand[int(j)] for j in picked),
        "IDF": _top(cand, idf_v, tiebreak, k),
        "TF": _top(cand, tf, tiebreak, k),
        "TF-IDF": _top(cand, tf * idf_v, tiebreak, k),
        "GlobalT": _top(cand, global_attributions, tiebreak, k),
        "(none masked)": frozenset(range(n)),
        "(all masked)": frozenset(),
    }
    mot = [_top(cand, row, tiebreak, k) for row in attributions]
    return shared, mot


def masked_ids(
    ids: list[int], groups: list[list[int]], kept: frozenset[int], fill_id: int | None
) -> list[int]:
    """``ids`` with the pieces of words not in ``kept`` replaced by ``fill_id`` (or deleted)."""
    drop = {j for w, idx in enumerate(groups) if w not in kept for j in idx}
    if fill_id is None:
        return [t for j, t in enumerate(ids) if j not in drop]
    return [fill_id if j in drop else t for j, t in enumerate(ids)]


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


def significance(per_doc: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """MoT against every baseline, per M: Wilcoxon and paired t-test, with BH q-values."""
    from scipy.stats import false_discovery_control, ttest_rel, wilcoxon

    rows = []
    for m, frame in per_doc.items():
        mot = frame["MoT"].to_numpy()
        for base in RANKINGS:
            if base == "MoT":
                continue
            other = frame[base].to_numpy()
            diff = mot - other
            if len(diff) < 2 or np.allclose(diff, 0):
                p_w = p_t = 1.0
            else:
                p_w = float(wilcoxon(mot, other, alternative="two-sided").pvalue)
                p_t = float(ttest_rel(mot, other).pvalue)
            rows.append(
                {
                    "m": int(m),
                    "baseline": base,
                    "mean_mot": float(mot.mean()),
                    "mean_baseline": float(other.mean()),
                    "mot_lower_share": float((diff < 0).mean()),
                    "n_docs": len(diff),
                    "wilcoxon_p": p_w,
                    "ttest_p": p_t,
                }
            )
    frame = pd.DataFrame(rows)
    if len(frame):
        for test in ("wilcoxon", "ttest"):
            p = frame[f"{test}_p"].to_numpy()
            frame[f"{test}_q"] = false_discovery_control(p, method="bh") if len(p) > 1 else p
    return frame


def pairwise(per_doc: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Every pair of rankings, per M: which is lower, how often, and whether significantly.

    One row per (M, a, b) with ``a`` the ranking of lower mean error: mean errors, the share
    of documents where ``a`` is lower, the two-sided Wilcoxon p and its Benjamini–Hochberg q
    over all pairs of the table. This is what supports (or not) an ordering between two
    baselines, which the MoT-against-each-baseline tests do not cover.
    """
    from itertools import combinations

    from scipy.stats import false_discovery_control, wilcoxon

    rows = []
    for m, frame in per_doc.items():
        for x, y in combinations(RANKINGS, 2):
            a, b = (x, y) if frame[x].mean() <= frame[y].mean() else (y, x)
            diff = frame[a].to_numpy() - frame[b].to_numpy()
            p = 1.0 if len(diff) < 2 or np.allclose(diff, 0) else float(wilcoxon(diff).pvalue)
            rows.append(
                {
                    "m": int(m),
                    "lower": a,
                    "higher": b,
                    "mean_lower": float(frame[a].mean()),
                    "mean_higher": float(frame[b].mean()),
                    "lower_share": float((diff < 0).mean()),
                    "wilcoxon_p": p,
                }
            )
    out = pd.DataFrame(rows)
    if len(out) > 1:
        out["wilcoxon_q"] = false_discovery_control(out["wilcoxon_p"].to_numpy(), method="bh")
    elif len(out):
        out["wilcoxon_q"] = out["wilcoxon_p"]
    return out


def check_seed(seed: int) -> int:
    """A seed for the sampling, RandT and k-means: an integer in ``0 .. 2**31 − 1``."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**31:
        raise InputError(f"the seed must be an integer from 0 to {2**31 - 1}, got {seed!r}")
    return int(seed)


def _check_m_values(m_values: Sequence[int], dim: int) -> list[int]:
    from lexlens.models.pq import check_m

    out = []
    for m in m_values:
        if isinstance(m, bool) or not isinstance(m, int | np.integer):
            raise InputError(f"M must be an integer, got {m!r}")
        if m < 2:
            raise InputError("M must be at least 2 (RandT needs another sub-vector)")
        check_m(int(m), dim)
        out.append(int(m))
    if not out:
        raise InputError("give at least one M")
    if len(set(out)) != len(out):
        raise InputError("M values must not repeat")
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
    progress: ProgressFn | None = None,
) -> MotResult:
    """Run the masking evaluation (the use case); every option is checked first.

    Codebooks (one per M) are fitted on the whole corpus; ``limit`` evaluates a seeded
    random sample of that many documents (IG dominates the cost) while IDF and the
    codebooks still use every text. ``own_codebook=True`` evaluates the encoder's own
    codebook (one column, its M). ``attributions`` — one per corpus text, all M
    sub-vectors, computed with the encoder's own codebook (e.g. by a report) — are reused
    instead of recomputed, and imply ``own_codebook``.
    """
    if isinstance(corpus, str) or not isinstance(corpus, list | tuple):
        raise InputError("the corpus must be a list of texts")
    corpus = list(corpus)
    if len(corpus) < 2:
        raise InputError("the masking evaluation needs at least two texts")
    check_texts(corpus)
    MOT_NEEDS.check(encoder)
    if isinstance(keep, bool) or not isinstance(keep, int | float) or not 0 < keep <= 1:
        raise InputError(f"keep must be a fraction in (0, 1], got {keep!r}")
    if mask not in MASKS:
        raise InputError(f"unknown mask {mask!r}: use one of {', '.join(MASKS)}")
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance)
    max_steps = check_max_steps(max_steps)
    seed = check_seed(seed)
    if not own_codebook:
        from lexlens.models.pq import check_k

        check_k(k)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 2):
        raise InputError(f"the document limit must be an integer ≥ 2, got {limit!r}")
    if attributions is not None:
        own_codebook = True
        if len(attributions) != len(corpus) or any(
            a.text != t for a, t in zip(attributions, corpus, strict=False)
        ):
            raise InputError("attributions must be given for every corpus text, in order")
        if any(a.subvectors != list(range(encoder.m)) for a in attributions):
            raise InputError("attributions must cover all M sub-vectors of the encoder's codebook")
    m_values = [encoder.m] if own_codebook else _check_m_values(m_values, encoder.dim)
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


# ----------------------------------------------------------------------------- display


def format_p(p: float) -> str:
    """A p-value as people read it: ``3.0e-15`` below 0.001, else three decimals."""
    if p is None or not math.isfinite(p):
        return "–"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def format_error(v: float) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{v:.4g}"


def display_tables(result: MotResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The masking table and the tests as shown to people (the app and the HTML report).

    Table: a ``ranking`` column and one ``M=…`` column per M (4 significant digits). Tests:
    one row per baseline, per M the Wilcoxon p and its FDR q (``3.0e-15`` style) and the
    share of documents where MoT is lower.
    """
    table = result.table
    shown = pd.DataFrame({"ranking": list(table.index)})
    for m in table.columns:
        shown[f"M={m}"] = [format_error(float(v)) for v in table[m]]
    sig = result.significance
    tests = pd.DataFrame({"baseline": [b for b in RANKINGS if b != "MoT"]})
    for m in table.columns:
        part = sig[sig["m"] == int(m)].set_index("baseline")
        tests[f"M={m} p"] = [format_p(float(part.loc[b, "wilcoxon_p"])) for b in tests["baseline"]]
        tests[f"M={m} q (FDR)"] = [
            format_p(float(part.loc[b, "wilcoxon_q"])) for b in tests["baseline"]
        ]
        tests[f"M={m} MoT lower"] = [
            f"{float(part.loc[b, 'mot_lower_share']):.0%}" for b in tests["baseline"]
        ]
    return shown, tests


def best_rows(result: MotResult) -> dict[int, str]:
    """Per M, the ranking with the lowest error (reference rows are not contenders)."""
    contenders = result.table.loc[list(RANKINGS)]
    return {int(m): str(contenders[m].idxmin()) for m in result.table.columns}
