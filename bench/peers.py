"""Peers measured beside Lexlens's retrieval in ``make bench`` (same run, one thread each).

- scipy's inverted CSC product: the collection as one in-memory ``csc_matrix`` [items ×
  |V|] (float32 weights, int32 ids), a query as a sparse column: ``X @ q`` touches only
  the query terms' columns, then ``argpartition`` over the items it scored.
- PISA (block-max WAND over an impact-quantised index, ×100 as pyterrier-pisa's
  ``toks_indexer`` does) through pyterrier-pisa (``pip install "lexlens[bench]"``). Its index
  is written here from the stored postings in PISA's binary collection format (the files
  pyterrier-pisa's own indexer writes; its Python loop over a million documents would take
  the bench's whole budget), then compressed by PISA at its first query.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: PISA's impact quantisation of pyterrier-pisa's toks indexer: int(weight × 100).
PISA_SCALE = 100.0


def term_name(t: int) -> str:
    """A vocabulary id as a PISA term (zero-padded: sorted names are sorted ids)."""
    return f"t{t:05d}"


def write_pisa_index(index, folder: Path) -> int:
    """PISA's binary collection of a stored index's postings, its lexicons and
    pyterrier-pisa's metadata; returns the number of terms written."""
    from pyterrier_pisa import _pisathon

    folder.mkdir(parents=True, exist_ok=True)
    p_indptr, p_items, p_weights = (np.asarray(a) for a in index.postings[:3])
    scale = float(index.postings[3])
    n = len(index)
    terms = []
    sizes = np.zeros(n, np.int64)
    with open(folder / "inv.docs", "wb") as docs, open(folder / "inv.freqs", "wb") as freqs:
        docs.write(np.array([1, n], np.uint32).tobytes())
        for t in range(p_indptr.size - 1):
            a, b = int(p_indptr[t]), int(p_indptr[t + 1])
            impact = (p_weights[a:b].astype(np.float64) * scale * PISA_SCALE).astype(np.int64)
            keep = impact > 0
            items = p_items[a:b][keep]
            if not items.size:
                continue
            terms.append(t)
            np.add.at(sizes, items, impact[keep])
            docs.write(np.r_[items.size, items].astype(np.uint32).tobytes())
            freqs.write(np.r_[items.size, impact[keep]].astype(np.uint32).tobytes())
    (folder / "inv.sizes").write_bytes(np.r_[n, sizes].astype(np.uint32).tobytes())
    (folder / "fwd.documents").write_text("".join(f"{i}\n" for i in range(n)))
    (folder / "fwd.terms").write_text("".join(term_name(t) + "\n" for t in terms))
    _pisathon.build_binlex(str(folder / "fwd.documents"), str(folder / "fwd.doclex"))
    _pisathon.build_binlex(str(folder / "fwd.terms"), str(folder / "fwd.termlex"))
    meta = {"type": "sparse_index", "format": "pisa", "package_hint": "pyterrier-pisa",
            "stemmer": "none"}  # fmt: skip
    (folder / "pt_meta.json").write_text(json.dumps(meta))
    return len(terms)


def pisa_queries(vectors: list[np.ndarray]):
    """Queries as pyterrier-pisa's ``query_toks`` frame (weights scaled ×100 by it)."""
    import pandas as pd

    rows = []
    for i, q in enumerate(vectors):
        terms = np.flatnonzero(q)
        rows.append({"qid": str(i), "query_toks": {term_name(int(t)): float(q[t]) for t in terms}})
    return pd.DataFrame(rows)


def csc_top(csc, q: np.ndarray, n: int) -> np.ndarray:
    """scipy's inverted product for one query: the rows of its top ``n`` (ties by row)."""
    import scipy.sparse as sp

    column = sp.csc_matrix(q.reshape(-1, 1))
    scored = (csc @ column).tocoo()
    rows, scores = scored.row, scored.data
    keep = min(n, scores.size)
    if keep == 0:
        return rows[:0]
    top = np.argpartition(-scores, keep - 1)[:keep]
    return rows[top[np.lexsort((rows[top], -scores[top]))]]


def csc_batch_top(csc, vectors: list[np.ndarray], n: int, chunk: int = 64) -> list[np.ndarray]:
    """The inverted product for a batch of queries: ``X @ Q_chunkᵀ`` (sparse), then each
    query's column partitioned."""
    import scipy.sparse as sp

    out = []
    for start in range(0, len(vectors), chunk):
        block = sp.csr_matrix(np.stack(vectors[start : start + chunk])).T.tocsc()
        scored = (csc @ block).tocsc()
        for j in range(scored.shape[1]):
            a, b = scored.indptr[j], scored.indptr[j + 1]
            rows, scores = scored.indices[a:b], scored.data[a:b]
            keep = min(n, scores.size)
            top = np.argpartition(-scores, keep - 1)[:keep] if keep else rows[:0]
            out.append(rows[top[np.lexsort((rows[top], -scores[top]))]])
    return out
