"""A small collection held in memory: texts from a .txt/.csv/.jsonl file (``lexlens search
--collection FILE``, the Search page's sample and uploads), encoded as documents and gated
(``E = V ⊙ G``), kept as one scipy CSR matrix. It answers the calls of a collection
(:class:`lexlens.analysis.core.collection.Collection`), as a stored index does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import vocab_hash
from lexlens.analysis.core.gating import DEFAULT_GATE_K, check_gate_k, gate
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Capability, Encoder, InputError, Needs

#: What encoding a text collection needs: texts into the vocabulary.
TEXT_COLLECTION_NEEDS = Needs("a text collection", all_of=frozenset({Capability.TEXT_LEXICAL}))


class MemoryCollection:
    """A small collection held in memory (the ``--collection FILE`` path): texts encoded
    as documents, gated (at ``gate_k``), kept as a scipy CSR matrix."""

    modality = "text"
    #: Held in memory: no folder, and no queries or judgements kept beside its items.
    path = None
    benchmark_files = None
    #: Its encoder's own word list is not kept.
    known_words: frozenset[str] = frozenset()

    def __init__(
        self,
        ids: list[str],
        texts: list[str],
        vectors: Any,
        vocab: list[str],
        labels: list[frozenset[str]] | None = None,
        name: str = "collection",
        encoder_name: str = "",
        gate_k: int = DEFAULT_GATE_K,
    ) -> None:
        import scipy.sparse as sp  # heavy: scipy loads on first use

        if len(ids) == 0:
            raise InputError("the collection is empty")
        matrix = sp.csr_matrix(vectors, dtype=np.float32)
        if matrix.shape[0] != len(ids):
            raise ValueError("one vector per item")
        matrix.sort_indices()
        self.ids, self.texts, self._matrix = list(ids), list(texts), matrix
        self.vocab = list(vocab)
        self.labels = [frozenset(x) for x in labels] if labels else []
        self.name = name
        self.encoder_name = encoder_name
        self.gate_k = int(gate_k)
        self.norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel()).astype(
            np.float32
        )
        self._vocab_hash: str | None = None
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def label(self) -> str:
        """How messages name it: its name."""
        return self.name

    @property
    def encoder_spec(self) -> str:
        """The encoder that made the vectors: the name it was given under."""
        return self.encoder_name

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def vocab_hash(self) -> str:
        """The hash of the vocabulary, as a stored index records it."""
        if self._vocab_hash is None:
            self._vocab_hash = vocab_hash(self.vocab)
        return self._vocab_hash

    @property
    def fingerprint(self) -> str:
        """What the collection holds, as a digest: its ids and vectors, the vocabulary, the
        encoder's name and the gate (made once)."""
        if self._fingerprint is None:
            vectors = hashlib.blake2b(digest_size=16)
            for array in (self._matrix.indptr, self._matrix.indices, self._matrix.data):
                vectors.update(np.ascontiguousarray(array).tobytes())
            held = {
                "ids": hashlib.sha256("\n".join(self.ids).encode("utf-8")).hexdigest(),
                "vectors": vectors.hexdigest(),
                "encoder": self.encoder_name,
                "vocab": self.vocab_hash,
                "gate_k": self.gate_k,
                "items": len(self),
            }
            text = json.dumps(held, sort_keys=True).encode("utf-8")
            self._fingerprint = hashlib.sha256(text).hexdigest()[:16]
        return self._fingerprint

    @property
    def has_labels(self) -> bool:
        return bool(self.labels) and any(self.labels)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self._matrix.indptr[i], self._matrix.indptr[i + 1]
        return self._matrix.indices[a:b], self._matrix.data[a:b]

    def matrix(self) -> Any:
        """Every item's vector: the CSR matrix it holds (float32, indices sorted)."""
        return self._matrix

    def kept_benchmark(self) -> dict | None:
        """None: a collection held in memory keeps no queries or judgements."""
        return None

    def meta(
        self, rows: Sequence[int] | np.ndarray, columns: list[str] | None = None
    ) -> list[dict]:
        """Each item's id, text and labels (every column: the collection has no others)."""
        out = []
        for r in rows:
            r = int(r)
            labels = sorted(self.labels[r]) if self.labels else []
            out.append(
                {
                    "id": self.ids[r],
                    "kind": "text",
                    "image": "",
                    "text": self.texts[r],
                    "captions": [],
                    "labels": labels,
                    "row": r,
                }
            )
        return out

    def column(self, name: str) -> list:
        if name == "labels":
            return [sorted(x) for x in self.labels] if self.labels else [[]] * len(self.ids)
        if name == "id":
            return list(self.ids)
        return [m[name] for m in self.meta(range(len(self)))]

    def describe(self) -> dict:
        """How results name the collection they come from."""
        return {
            "name": self.name,
            "items": len(self),
            "encoder": self.encoder_name,
            "modality": "text",
            "stored": False,
        }


def encode_collection(
    encoder: Encoder,
    texts: list[str],
    *,
    ids: list[str] | None = None,
    labels: list[frozenset[str]] | None = None,
    gate_k: int = DEFAULT_GATE_K,
    batch: int = 64,
    progress: Progress | None = None,
    name: str = "collection",
) -> MemoryCollection:
    """Encode texts as documents, gate them (``E = V ⊙ G``) into a :class:`MemoryCollection`."""
    import scipy.sparse as sp  # heavy: scipy loads on first use

    TEXT_COLLECTION_NEEDS.check(encoder)
    check_gate_k(gate_k)
    blocks = []
    for start in range(0, len(texts), batch):
        chunk = encoder.encode_texts(
            texts[start : start + batch], side="document", keep_units=False
        )
        blocks.append(sp.csr_matrix(np.stack([gate(e, encoder.vocab, gate_k) for e in chunk])))
        if progress:
            done = min(len(texts), start + batch)
            progress(done / len(texts), f"{done}/{len(texts)} texts encoded")
    return MemoryCollection(
        ids or [str(i) for i in range(len(texts))],
        texts,
        sp.vstack(blocks).tocsr(),
        encoder.vocab,
        labels,
        name=name,
        encoder_name=encoder.name,
        gate_k=gate_k,
    )


def collection_from_file(
    encoder: Encoder,
    source: Any,
    name: str | None = None,
    *,
    gate_k: int = DEFAULT_GATE_K,
    progress: Progress | None = None,
) -> MemoryCollection:
    """Read a .txt/.csv/.jsonl of texts (``id``, ``labels`` optional) and encode it."""
    table = read_texts(source, name, what="text")
    label = name or (Path(source).name if isinstance(source, (str, Path)) else "collection")
    return encode_collection(
        encoder,
        table.texts,
        ids=table.ids,
        labels=table.labels or None,
        gate_k=gate_k,
        progress=progress,
        name=label,
    )
