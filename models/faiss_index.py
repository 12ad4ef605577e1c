"""Reading a trained faiss ``OPQ{M},PQ{M}x8`` index (the RepCONC / JPQ release format)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lexlens.models.base import EncoderLoadError, InputError, LexlensError
from lexlens.models.pq import ProductQuantizer


def load_faiss_index(path: str | Path, *, dim: int | None = None) -> ProductQuantizer:
    """The OPQ rotation ``[D, D]`` (``y = A x``) and PQ centroids ``[M, 256, D/M]`` of an index.

    A plain ``PQ{M}x8`` index (no rotation) is accepted too. ``dim``: the encoder's embedding
    size; a mismatch is an error.
    """
    import faiss

    path = Path(path)
    if not path.is_file():
        raise InputError(f"faiss index {path} not found")
    try:
        index = faiss.read_index(str(path))
    except Exception as exc:  # faiss raises RuntimeError with a long C++ message
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EncoderLoadError(f"{path}: not a readable faiss index ({first[:160]})") from None
    rotation = None
    if isinstance(index, faiss.IndexPreTransform):
        if index.chain.size() != 1:
            raise EncoderLoadError(
                f"{path}: expected one OPQ transform, found {index.chain.size()}"
            )
        vt = faiss.downcast_VectorTransform(index.chain.at(0))
        if not isinstance(vt, faiss.LinearTransform):
            raise EncoderLoadError(f"{path}: the pre-transform is {type(vt).__name__}, not OPQ")
        if vt.d_in != vt.d_out:
            raise EncoderLoadError(f"{path}: OPQ maps {vt.d_in} → {vt.d_out} dims; expected square")
        if vt.have_bias:
            raise EncoderLoadError(f"{path}: the linear transform has a bias; expected a rotation")
        rotation = faiss.vector_to_array(vt.A).reshape(vt.d_out, vt.d_in).astype(np.float32)
        inner = faiss.downcast_index(index.index)
    else:
        inner = faiss.downcast_index(index)
    if not isinstance(inner, faiss.IndexPQ):
        raise EncoderLoadError(
            f"{path}: expected an IndexPQ (OPQ{{M}},PQ{{M}}x8), found {type(inner).__name__}"
        )
    pq = inner.pq
    if int(pq.nbits) != 8:
        raise EncoderLoadError(f"{path}: PQ uses {pq.nbits} bits per code; only 8 is supported")
    m, ksub, dsub = int(pq.M), int(pq.ksub), int(pq.dsub)
    cents = faiss.vector_to_array(pq.centroids).reshape(m, ksub, dsub).astype(np.float32)
    for key, value in (("PQ centroids", cents), ("OPQ rotation", rotation)):
        if value is not None and not np.isfinite(value).all():
            raise EncoderLoadError(f"{path}: the {key} hold NaN or Inf values")
    index_dim = int(index.d)
    if dim is not None and index_dim != dim:
        raise LexlensError(
            f"faiss index {path.name} is for {index_dim}-d embeddings but the encoder outputs {dim}-d"
        )
    meta = {"origin": f"faiss:{path.name}", "n_fit": int(index.ntotal)}
    return ProductQuantizer(cents, rotation, (), meta)
