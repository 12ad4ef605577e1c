"""Product quantisation on faiss: codebooks, codes and their file.

The discretisation RepMoT ("Interpreting Dense Retrieval as Mixture of Topics", Zhan et
al., 2021) interprets: each sub-vector of a dense embedding is replaced by the id of its
nearest centroid.

Top to bottom, for a dense embedding ``x ∈ R^D``::

    y      = A x                                  # optional OPQ rotation [D, D] (faiss convention)
    f_i(x) = y[i*D/M : (i+1)*D/M]                 # M sub-vectors of D/M dimensions
    code_i = argmin_j ||f_i(x) - c_{i,j}||        # codebook c: [M, K, D/M]

Fitting uses faiss: ``faiss.OPQMatrix`` for the rotation (``opq_iters > 0``), then
``faiss.ProductQuantizer`` (k-means per sub-space, seeded by ``seed``) on the rotated
vectors, which is what faiss's ``OPQ{M},PQ{M}x{log2 K}`` index factory trains. Codes are
faiss's own ``compute_codes``, so they equal a ``faiss.IndexPQ`` holding the same centroids.
K is a power of two (faiss stores a code in log2 K bits); on a corpus of fewer than K
vectors it drops to the largest power of two not above N, with a notice.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.models.base import EncoderLoadError, InputError, LexlensError, Progress
from lexlens.models.dense_config import DEFAULT_K, DEFAULT_M, DEFAULT_SEED

log = logging.getLogger(__name__)

CODEBOOK_FILE = "codebook.safetensors"
#: faiss stores each code in ``log2 K`` bits; it supports up to 16.
MAX_K = 1 << 16

_FAISS_THREADS = threading.Lock()


def report(progress: Progress | None, fraction: float, message: str) -> None:
    """Log a step and pass it to ``progress`` (clamped to [0, 1])."""
    log.info("%s (%.0f%%)", message, 100 * fraction)
    if progress is not None:
        progress(min(max(fraction, 0.0), 1.0), message)


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order (the M values that split a dimension)."""
    return [d for d in range(1, n + 1) if n % d == 0]


def check_m(m: int, dim: int) -> None:
    """Reject an M that does not split ``dim`` into equal sub-vectors."""
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1 or dim % int(m) != 0:
        choices = ", ".join(str(d) for d in divisors(dim) if 4 <= d <= 96)
        raise LexlensError(
            f"M={m} sub-vectors does not divide the embedding dimension {dim}: choose one of {choices}"
        )


def check_k(k: int) -> int:
    """K must be a power of two from 2 to 65,536 (faiss stores a code in log2 K bits)."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 2 <= k <= MAX_K:
        raise LexlensError(f"K must be a power of two from 2 to {MAX_K}, got {k}")
    if int(k) & (int(k) - 1):
        raise LexlensError(
            f"K must be a power of two (faiss stores each code in log2 K bits), got {k}: "
            f"try {1 << (int(k).bit_length() - 1)} or {1 << int(k).bit_length()}"
        )
    return int(k)


def check_seed(seed: int) -> int:
    """faiss seeds k-means with a non-negative 32-bit integer."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**31:
        raise LexlensError(f"seed must be an integer from 0 to {2**31 - 1}, got {seed}")
    return int(seed)


def check_opq(opq_iters: int, n: int, dim: int) -> None:
    """``opq_iters`` ≥ 0; OPQ (a D×D rotation) needs at least D vectors to fit."""
    if isinstance(opq_iters, bool) or not isinstance(opq_iters, int | np.integer) or opq_iters < 0:
        raise LexlensError(f"opq_iters must be a non-negative integer, got {opq_iters}")
    if opq_iters > 0 and n < dim:
        # faiss's OPQMatrix crashes the process below that (segmentation fault, faiss 1.15).
        raise InputError(
            f"an OPQ rotation needs at least {dim} texts (the embedding dimension); the "
            f"corpus has {n}: give more texts or fit without OPQ (opq_iters=0)"
        )


@contextlib.contextmanager
def faiss_single_thread() -> Iterator[object]:
    """faiss with one OpenMP thread, serialised between callers.

    faiss and torch each bring an OpenMP runtime; after torch has run, two faiss threads
    spin against torch's on a 2-core machine (PQ fit of 600 × 384 vectors, M=24, K=64:
    0.45–6.2 s with 2 threads, 0.11–0.17 s with 1, measured in one process).
    """
    import faiss  # heavy: faiss loads on first use

    with _FAISS_THREADS:
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            yield faiss
        finally:
            faiss.omp_set_num_threads(before)


def _faiss_pq(faiss: Any, dim: int, m: int, k: int, seed: int) -> Any:
    """An untrained ``faiss.ProductQuantizer`` with Lexlens's k-means settings."""
    pq = faiss.ProductQuantizer(dim, m, k.bit_length() - 1)
    pq.cp.seed = seed
    # Small corpora are expected (a few hundred texts): no "provide at least 39×K points"
    # warning on stderr, and no subsampling below faiss's default of 256 points per centroid.
    pq.cp.min_points_per_centroid = 1
    pq.verbose = False
    return pq


@dataclass(frozen=True)
class ProductQuantizer:
    """M codebooks of K centroids over D/M-dimensional sub-spaces (after ``rotation``).

    Attributes:
        centroids: ``[M, K, D/M]`` float32.
        rotation: ``[D, D]`` float32 ``A`` applied as ``y = A x`` before splitting (faiss
            ``OPQMatrix`` convention), or ``None``.
        notes: user-facing notices (e.g. K reduced on a small corpus).
        meta: provenance (seed, corpus hash and size, origin).
    """

    centroids: np.ndarray
    rotation: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict)

    @property
    def m(self) -> int:
        """Number of sub-vectors (codebooks)."""
        return int(self.centroids.shape[0])

    @property
    def k(self) -> int:
        """Centroids per codebook."""
        return int(self.centroids.shape[1])

    @property
    def dsub(self) -> int:
        """Dimensions of one sub-vector (D/M)."""
        return int(self.centroids.shape[2])

    @property
    def dim(self) -> int:
        """Dimension D of the embeddings it quantises."""
        return self.m * self.dsub

    def rotate(self, vectors: np.ndarray) -> np.ndarray:
        """``[N, D]`` embeddings → ``y = A x`` (unchanged without an OPQ rotation)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        return vectors if self.rotation is None else vectors @ self.rotation.T

    def split(self, vectors: np.ndarray) -> np.ndarray:
        """``[N, D]`` embeddings → ``[N, M, D/M]`` sub-vectors (rotated first)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise InputError(f"expected [N, {self.dim}] vectors, got shape {tuple(vectors.shape)}")
        return self.rotate(vectors).reshape(len(vectors), self.m, self.dsub)

    @functools.cached_property
    def _faiss(self) -> Any:
        """A faiss ``ProductQuantizer`` holding these centroids (K a power of two)."""
        import faiss  # heavy: faiss loads on first use

        pq = faiss.ProductQuantizer(self.dim, self.m, self.k.bit_length() - 1)
        faiss.copy_array_to_vector(np.ascontiguousarray(self.centroids).ravel(), pq.centroids)
        return pq

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """Nearest centroid per sub-space: ``[N, M]`` int64 codes (faiss ``compute_codes``)."""
        sub = self.split(vectors)
        n = len(sub)
        if self.k == 1:
            return np.zeros((n, self.m), dtype=np.int64)
        y = np.ascontiguousarray(sub.reshape(n, self.dim))
        if self.k & (self.k - 1):  # a codebook read from elsewhere with K not a power of two
            with faiss_single_thread() as faiss:
                return np.stack(
                    [
                        faiss.knn(sub[:, i].copy(), self.centroids[i], 1)[1][:, 0]
                        for i in range(self.m)
                    ],
                    axis=1,
                ).astype(np.int64)
        with faiss_single_thread():
            packed = self._faiss.compute_codes(y)  # [N, code_size] uint8, log2 K bits per code
        return unpack_codes(packed, self.m, self.k.bit_length() - 1)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codes ``[N, M]`` → the chosen centroids ``[N, M, D/M]`` (in the rotated space)."""
        codes = np.asarray(codes, dtype=np.int64)
        return self.centroids[np.arange(self.m)[None, :], codes]

    @classmethod
    def fit(
        cls,
        vectors: np.ndarray,
        m: int = DEFAULT_M,
        k: int = DEFAULT_K,
        *,
        seed: int = DEFAULT_SEED,
        opq_iters: int = 0,
        progress: Progress | None = None,
    ) -> ProductQuantizer:
        """faiss k-means per sub-space; with ``opq_iters > 0`` an OPQ rotation first.

        Deterministic for a given ``seed``. When the corpus has fewer than ``k`` vectors, K
        becomes the largest power of two not above N and a notice is recorded in ``notes``
        (and logged).
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) == 0:
            raise InputError("cannot fit codebooks on an empty corpus: give at least one text")
        if not np.isfinite(vectors).all():
            raise InputError("cannot fit codebooks: the embeddings contain NaN or Inf")
        n, dim = vectors.shape
        check_m(m, dim)
        m, k, seed = int(m), check_k(k), check_seed(seed)
        check_opq(opq_iters, n, dim)
        notes: list[str] = []
        if n < k:
            k_new = 1 << (n.bit_length() - 1)
            notes.append(
                f"the corpus has {n} texts, fewer than K={k} centroids: K reduced to {k_new}"
            )
            log.warning(notes[-1])
            k = k_new
        rotation = None
        y = vectors
        report(progress, 0.0, f"fitting {m} codebooks (K={k}) on {n} vectors")
        with faiss_single_thread() as faiss:
            if opq_iters > 0 and k > 1:
                opq = faiss.OPQMatrix(dim, m)
                opq.niter = opq_iters
                inner = _faiss_pq(faiss, dim, m, k, seed)  # kept alive while OPQ uses it
                opq.pq = inner
                opq.train(vectors)
                rotation = faiss.vector_to_array(opq.A).reshape(dim, dim).astype(np.float32)
                y = np.ascontiguousarray(vectors @ rotation.T)
                report(progress, 0.5, f"fitted the OPQ rotation ({opq_iters} iterations)")
            if k == 1:  # one centroid per sub-space: k-means gives the mean
                centroids = y.reshape(n, m, dim // m).mean(axis=0)[:, None, :]
            else:
                pq = _faiss_pq(faiss, dim, m, k, seed)
                pq.train(y)
                centroids = faiss.vector_to_array(pq.centroids).reshape(m, k, dim // m)
        report(progress, 1.0, f"fitted {m} codebooks (K={k})")
        meta = {"seed": seed, "n_fit": int(n), "opq_iters": int(opq_iters), "origin": "faiss"}
        return cls(np.ascontiguousarray(centroids, dtype=np.float32), rotation, tuple(notes), meta)

    # ----- persistence

    def save(self, directory: Path) -> Path:
        """Write ``codebook.safetensors`` (``centroids`` and, with OPQ, ``rotation``)."""
        from safetensors.numpy import save_file  # heavy: safetensors loads on first use

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {"centroids": np.ascontiguousarray(self.centroids, dtype=np.float32)}
        if self.rotation is not None:
            tensors["rotation"] = np.ascontiguousarray(self.rotation, dtype=np.float32)
        path = directory / CODEBOOK_FILE
        save_file(tensors, str(path))
        return path

    @classmethod
    def load(
        cls, directory: Path, *, notes: tuple[str, ...] = (), meta: dict | None = None
    ) -> ProductQuantizer:
        """Read ``codebook.safetensors``; a missing, corrupt or ill-shaped file is an error."""
        from safetensors import SafetensorError  # heavy: safetensors loads on first use
        from safetensors.numpy import load_file  # heavy: safetensors loads on first use

        path = Path(directory) / CODEBOOK_FILE
        if not path.exists():
            raise EncoderLoadError(f"{path} not found: the dense+PQ directory needs its codebook")
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EncoderLoadError(f"{path}: not a readable safetensors file ({first})") from None
        if "centroids" not in tensors:
            raise EncoderLoadError(f"{path} has no 'centroids' tensor")
        cents = tensors["centroids"].astype(np.float32)
        if cents.ndim != 3 or 0 in cents.shape:
            raise EncoderLoadError(f"{path}: 'centroids' must be [M, K, D/M], got {cents.shape}")
        rot = tensors.get("rotation")
        dim = cents.shape[0] * cents.shape[2]
        if rot is not None and rot.shape != (dim, dim):
            raise EncoderLoadError(f"{path}: 'rotation' must be [{dim}, {dim}], got {rot.shape}")
        for key, value in (("centroids", cents), ("rotation", rot)):
            if value is not None and not np.isfinite(value).all():
                raise EncoderLoadError(f"{path}: tensor {key!r} holds NaN or Inf values")
        return cls(
            cents, None if rot is None else rot.astype(np.float32), tuple(notes), dict(meta or {})
        )


def unpack_codes(packed: np.ndarray, m: int, nbits: int) -> np.ndarray:
    """faiss's packed PQ codes (``nbits`` per code, least significant bit first) → ``[N, M]``."""
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), axis=1, bitorder="little")
    bits = bits[:, : m * nbits].reshape(len(packed), m, nbits).astype(np.int64)
    return bits @ (np.int64(1) << np.arange(nbits, dtype=np.int64))
