"""Reading a trained faiss ``OPQ{M},PQ{M}x8`` index (the RepCONC / JPQ release format)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.models.base import EncoderLoadError, InputError, LexlensError
from lexlens.models.files import open_regular
from lexlens.models.pq import ProductQuantizer

#: Largest index file read (bytes): faiss holds the whole index in memory (MS MARCO's 8.8
#: million passages at 96 bytes a code are under 1 GB).
MAX_INDEX_BYTES = 4 * 1024**3
#: The first four bytes faiss writes for the indexes read here: an OPQ pre-transform
#: (``IxPT``) or a product quantiser (``IxPq``, and older ``IxPQ``, ``IxPo``).
PQ_FOURCCS = (b"IxPT", b"IxPq", b"IxPQ", b"IxPo")


def load_faiss_index(path: str | Path, *, dim: int | None = None) -> ProductQuantizer:
    """The OPQ rotation ``[D, D]`` (``y = A x``) and PQ centroids ``[M, 256, D/M]`` of an index.

    A plain ``PQ{M}x8`` index (no rotation) is accepted too. ``dim``: the encoder's embedding
    size; a mismatch is an error. Only a regular file of at most :data:`MAX_INDEX_BYTES` is
    read; one that does not start as a faiss PQ index does is refused without echoing its
    bytes.
    """
    import faiss  # heavy: faiss loads on first use

    path = Path(path)
    index = _read_index(path, f"faiss index {path}")
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


def _read_index(path: Path, label: str) -> Any:
    """The faiss index in the file at ``path``, read from one opened regular file through a
    bounded reader; anything else is one line that says what it is not."""
    import faiss  # heavy: faiss loads on first use

    with open_regular(path, label) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_INDEX_BYTES:
            raise InputError(f"{label}: too large ({size:,} bytes; limit {MAX_INDEX_BYTES:,})")
        if handle.read(4) not in PQ_FOURCCS:
            raise EncoderLoadError(
                f"{label}: not a readable faiss index (an OPQ{{M}},PQ{{M}}x8 or PQ{{M}}x8 "
                "index file, as faiss.write_index writes it)"
            )
        handle.seek(0)
        left = [MAX_INDEX_BYTES]

        def read(n: int) -> bytes:
            data = handle.read(min(n, left[0]))
            left[0] -= len(data)
            return data

        try:
            return faiss.read_index(faiss.PyCallbackIOReader(read))
        except Exception:  # noqa: BLE001  (faiss raises RuntimeError quoting the file's bytes)
            raise EncoderLoadError(
                f"{label}: not a readable faiss index (damaged: faiss could not read it whole)"
            ) from None
