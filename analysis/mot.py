"""The MoT masking evaluation (RepMoT Table 3, SPEC.md §4).

For each document ``d`` and sub-vector ``i``, keep only the top ``keep`` fraction of its
words according to a ranking, mask the rest, and measure ``||d̂_i − f_i(mask(d))||²`` with
``d̂_i`` the centroid of the code chosen for the unmasked document; average over ``i`` and
documents. Lower means the kept words explain the code better.

Choices the paper leaves open (documented here, shown in the result's ``settings``):

* **Words** are WordPiece tokens merged at ``##`` (``[CLS]``/``[SEP]`` are never masked,
  punctuation tokens count as words); a word's attribution is the sum of its pieces.
* **How many**: ``max(1, floor(keep · n_words + 0.5))`` words (round half up, at least one).
* **Masking**: every word piece of a dropped word is replaced by ``[UNK]`` (default), the
  same token as the Integrated-Gradients baseline, so the masked input is exactly the
  point of the IG path where kept words are real and the others are at the baseline; the
  sequence length and positions are unchanged. ``mask="mask"`` uses ``[MASK]`` and
  ``mask="delete"`` removes the pieces instead.
* **Rankings**: Tail / Head keep the last / first words; Rand a random set (seeded per
  document); TF = count of the word in the document, IDF = ``log(N / df)`` over the whole
  evaluation corpus, TF-IDF their product; GlobalT = IG of the whole vector; MoT = IG of
  sub-vector i; RandT = IG of another sub-vector j(i) ≠ i (seeded). Ties are broken by a
  seeded random order of the document's words (so TF's many ties are not Head in
  disguise).
* **Codebooks**: each M has its own quantiser, fitted by k-means on the corpus.
* **Significance**: per-document errors (mean over i), MoT vs each baseline, two-sided
  Wilcoxon signed-rank test; the paired t-test the paper used is reported alongside.

Cost: one IG pass per document and M (M reverse passes, see ``analysis.attribution``);
the masked inputs of one document (7 shared rankings + one per sub-vector for MoT, whose
sets RandT reuses) go through the model in one batch.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from lexlens.analysis.attribution import (
    attribute_batch,
    check_steps,
    group_word_pieces,
    random_other,
)
from lexlens.models.base import InputError, LexlensError, check_texts

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]
POSITION = ("Tail", "Rand", "Head")
FREQUENCY = ("IDF", "TF", "TF-IDF")
ATTRIBUTION = ("RandT", "GlobalT", "MoT")
RANKINGS = POSITION + FREQUENCY + ATTRIBUTION
#: Reference rows (not rankings): no word masked (the quantisation error) / every word.
REFERENCE_ROWS = ("(none masked)", "(all masked)")
MASKS = ("unk", "mask", "delete")


@dataclass
class MotResult:
    """The masking table and its significance tests.

    Attributes:
        table: mean error, rows = rankings (+ reference rows), columns = M.
        significance: one row per (M, baseline): mean errors, Wilcoxon and t-test p-values,
            the share of documents where MoT's error is lower.
        per_doc: for each M, a frame of per-document errors (rows = documents).
        settings: what was run (keep, steps, mask, K, corpus sizes, seed) and notices.
    """

    table: pd.DataFrame
    significance: pd.DataFrame
    per_doc: dict[int, pd.DataFrame]
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "table": {
                str(m): {r: float(v) for r, v in self.table[m].items()} for m in self.table.columns
            },
            "significance": self.significance.to_dict(orient="records"),
            "settings": self.settings,
        }


def keep_count(n_words: int, keep: float) -> int:
    """Words kept: ``max(1, floor(keep · n + 0.5))``, at most ``n``."""
    return min(n_words, max(1, math.floor(keep * n_words + 0.5)))


def idf_table(word_lists: Sequence[Sequence[str]]) -> dict[str, float]:
    """``log(N / df)`` per lowercased word over the documents."""
    df: Counter[str] = Counter()
    for words in word_lists:
        df.update({w.lower() for w in words})
    n = len(word_lists)
    return {w: math.log(n / c) for w, c in df.items()}


def _top(scores: np.ndarray, tiebreak: np.ndarray, k: int) -> frozenset[int]:
    """Indices of the ``k`` highest scores; ties by the random order ``tiebreak``."""
    order = np.lexsort((tiebreak, -np.asarray(scores, dtype=np.float64)))
    return frozenset(int(j) for j in order[:k])


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
    k = keep_count(n, keep)
    tiebreak = rng.permutation(n)
    lower = [w.lower() for w in words]
    tf_counts = Counter(lower)
    tf = np.array([tf_counts[w] for w in lower], dtype=np.float64)
    idf_v = np.array([idf.get(w, 0.0) for w in lower], dtype=np.float64)
    shared = {
        "Tail": frozenset(range(n - k, n)),
        "Head": frozenset(range(k)),
        "Rand": frozenset(int(j) for j in rng.choice(n, size=k, replace=False)),
        "IDF": _top(idf_v, tiebreak, k),
        "TF": _top(tf, tiebreak, k),
        "TF-IDF": _top(tf * idf_v, tiebreak, k),
        "GlobalT": _top(global_attributions, tiebreak, k),
        "(none masked)": frozenset(range(n)),
        "(all masked)": frozenset(),
    }
    mot = [_top(row, tiebreak, k) for row in attributions]
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


def _doc_errors(encoder, attr, idf, keep, fill_id, rng, other) -> dict[str, float]:
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
    dhat = encoder.quantizer.decode(attr.codes[None])[0].astype(np.float64)  # [M, d]
    err = _errors(encoder, seqs, dhat)  # [n_sets, M]
    m = len(attr.codes)
    out = {name: float(err[index[s]].mean()) for name, s in shared.items()}
    rows = np.arange(m)
    out["MoT"] = float(err[[index[mot[i]] for i in rows], rows].mean())
    out["RandT"] = float(err[[index[mot[j]] for j in other], rows].mean())
    return out


def _significance(per_doc: dict[int, pd.DataFrame]) -> pd.DataFrame:
    from scipy.stats import ttest_rel, wilcoxon

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
                    "wilcoxon_p": p_w,
                    "ttest_p": p_t,
                    "n_docs": len(diff),
                }
            )
    return pd.DataFrame(rows)


def mot_evaluate(
    encoder,
    corpus: list[str],
    *,
    m_values: Sequence[int] = (12, 24, 48),
    keep: float = 0.05,
    steps: int = 16,
    k: int = 256,
    seed: int = 0,
    limit: int | None = None,
    mask: str = "unk",
    batch_size: int = 4,
    progress: ProgressFn | None = None,
    own_codebook: bool = False,
    attributions: Sequence | None = None,
) -> MotResult:
    """Run the masking evaluation; codebooks (one per M) are fitted on the whole corpus.

    ``limit`` evaluates a seeded random sample of that many documents (IG dominates the
    cost); IDF and the codebooks still use the whole corpus.

    ``own_codebook=True`` evaluates the encoder's own codebook instead (one column, its M;
    ``m_values`` is ignored). ``attributions`` — one :class:`SubvectorAttribution` per
    corpus text, all M sub-vectors, computed with the encoder's own codebook (e.g. by a
    report that already ran IG) — are reused instead of recomputed, and imply
    ``own_codebook``.
    """
    from lexlens.models.dense import ProductQuantizer, check_m

    if not hasattr(encoder, "with_quantizer"):
        raise LexlensError(
            f"encoder {getattr(encoder, 'name', encoder)!r} is not a dense+PQ encoder (e.g. minilm-pq)"
        )
    if not isinstance(corpus, list) or not corpus:
        raise InputError("the corpus is empty: give at least two texts")
    check_texts(corpus)
    if len(corpus) < 2:
        raise InputError("the masking evaluation needs at least two texts")
    if not 0 < keep <= 1:
        raise LexlensError(f"keep must be a fraction in (0, 1], got {keep}")
    if mask not in MASKS:
        raise LexlensError(f"unknown mask {mask!r}: use one of {', '.join(MASKS)}")
    steps = check_steps(steps)
    if attributions is not None:
        own_codebook = True
        if len(attributions) != len(corpus) or any(
            a.text != t for a, t in zip(attributions, corpus, strict=False)
        ):
            raise LexlensError("attributions must be given for every corpus text, in order")
    if own_codebook:
        if getattr(encoder, "quantizer", None) is None:
            raise LexlensError(f"encoder {encoder.name!r} has no codebook to evaluate")
        m_values = [encoder.m]
        if attributions is not None and any(
            a.subvectors != list(range(encoder.m)) or len(a.codes) != encoder.m
            for a in attributions
        ):
            raise LexlensError(
                "attributions must cover all M sub-vectors of the encoder's codebook"
            )
    m_values = [int(m) for m in m_values]
    if not m_values:
        raise LexlensError("give at least one M")
    for m in m_values:
        check_m(m, encoder.dim)
        if m < 2:
            raise LexlensError("M must be at least 2 (RandT needs another sub-vector)")
    rng = np.random.default_rng(seed)
    docs = list(range(len(corpus)))
    if limit is not None and limit < len(docs):
        if limit < 2:
            raise LexlensError("limit must be at least 2 documents")
        docs = sorted(int(i) for i in rng.choice(len(corpus), size=int(limit), replace=False))
    tok = encoder.tokenizer
    fill_id = {"unk": tok.unk_token_id, "mask": tok.mask_token_id, "delete": None}[mask]
    idf = idf_table([group_word_pieces(tok.tokenize(t))[0] for t in corpus])

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
    notes: list[str] = []
    ks: dict[int, int] = {}
    order = sorted(docs, key=lambda i: len(corpus[i]))
    for m in m_values:
        if own_codebook:
            enc_m = encoder
        else:
            enc_m = encoder.with_quantizer(ProductQuantizer.fit(vectors, m, k, seed=seed))
        notes.extend(n for n in enc_m.quantizer.notes if n not in notes)
        ks[m] = enc_m.k
        other = random_other(m, seed)
        rows: dict[int, dict[str, float]] = {}
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            if attributions is not None:
                attrs = [attributions[i] for i in idx]
            else:
                attrs = attribute_batch(enc_m, [corpus[i] for i in idx], steps=steps)
            for i, attr in zip(idx, attrs, strict=True):
                doc_rng = np.random.default_rng([seed, i])
                rows[i] = _doc_errors(enc_m, attr, idf, keep, fill_id, doc_rng, other)
            done += len(idx)
            report(0.05 + 0.95 * done / total, f"M={m}: {start + len(idx)}/{len(order)} documents")
        per_doc[m] = pd.DataFrame.from_dict(rows, orient="index").loc[
            docs, list(RANKINGS) + list(REFERENCE_ROWS)
        ]
    table = pd.DataFrame({m: per_doc[m].mean() for m in m_values})
    table.index.name = "ranking"
    table.columns.name = "M"
    settings = {
        "keep": keep,
        "steps": steps,
        "mask": mask,
        "k": {str(m): ks[m] for m in m_values},
        "seed": seed,
        "n_corpus": len(corpus),
        "n_docs": len(docs),
        "m_values": m_values,
        "notes": notes,
        "codebook": "encoder's own" if own_codebook else "k-means per M on the corpus",
    }
    if attributions is not None:
        settings["steps"] = int(attributions[0].steps)
    return MotResult(table, _significance(per_doc), per_doc, settings)


def mot_eval(encoder, corpus: list[str], **kwargs) -> pd.DataFrame:
    """:func:`mot_evaluate`'s table (rows ranking, columns M); the significance frame and
    settings ride along in ``.attrs["significance"]`` (alias ``"tests"``) and
    ``.attrs["settings"]``."""
    result = mot_evaluate(encoder, corpus, **kwargs)
    table = result.table.copy()
    table.attrs["significance"] = result.significance
    table.attrs["tests"] = result.significance  # alias used by analysis.cli.report
    table.attrs["settings"] = result.settings
    return table
