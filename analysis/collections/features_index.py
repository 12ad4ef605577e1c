"""Stored collections of dense features (``modality`` "features"): a researcher's
``.npy`` / ``.safetensors`` / ``.parquet`` vectors put through a D2S (Dense2Sparse) head.

The vectors (BLIP/ALBEF image or caption embeddings, say) have no text or image the
workbench could show; each item keeps its id and its paired captions (``--captions``),
which deviation measures the vector against and search results show. The index is the
same format as any other (:mod:`.store`): gated CSR vectors ``E = V ⊙ G`` (VDR's gate;
a vector has no bag of words, so the gate is its top-k), ``items.parquet`` rows with
``kind`` "features" (``captions``: the paired captions, ``text``: the first of them,
which search results show), and a manifest whose ``source.kind`` is "features".
Search takes bag-of-words text queries (``--query-mode bow``): the head tokenises them.

Re-indexing the same files with the same head and gate k encodes nothing (the source
fingerprint covers the features, ids and captions files); anything else re-encodes every
vector (a D2S head is one matrix product per batch).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.build_parts import (
    IndexResult,
    check_build_options,
    encoder_entry,
    unchanged,
)
from lexlens.analysis.collections.encoding import gated_sparse
from lexlens.analysis.collections.feature_files import FeatureTable, read_features
from lexlens.analysis.collections.store import existing_index, open_index, vocab_hash
from lexlens.analysis.collections.store_writer import write_index
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Capability, Encoder, InputError, Needs

#: What indexing dense features needs of an encoder: a head over feature vectors.
FEATURES_INDEX_NEEDS = Needs(
    "a stored collection of dense features", all_of=frozenset({Capability.FEATURE_LEXICAL})
)
#: Vectors encoded per batch (one ``[batch, |V|]`` float32 block in memory at a time).
BATCH_SIZE = 256


def read_source(
    source: str | Path,
    *,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
    label: str | None = None,
) -> FeatureTable:
    """The :class:`~.feature_files.FeatureTable` of a source, checked in full before
    anything is encoded."""
    shown = label or str(source)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError(f"--source {shown}: not found")
    return read_features(
        path,
        name=shown,
        ids=None if ids is None else Path(ids).expanduser(),
        ids_name=None if ids is None else str(ids),
        captions=None if captions is None else Path(captions).expanduser(),
        captions_name=None if captions is None else str(captions),
    )


def source_fingerprint(*paths: Path | None) -> str:
    """sha256 over the bytes of the features file and its ids and captions files."""
    digest = hashlib.sha256(b"features\0")
    for path in paths:
        digest.update(b"\0" if path is None else str(Path(path).name).encode() + b"\0")
        if path is None:
            continue
        with open(path, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def build_features_index(
    encoder: Encoder,
    source: str | Path,
    out: str | Path,
    *,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = BATCH_SIZE,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
    progress: Progress | None = None,
    postings: bool | None = None,
    encoder_spec: str | None = None,
    source_label: str | None = None,
    table: FeatureTable | None = None,
) -> IndexResult:
    """Encode a dense features file with a feature head into an index folder at ``out``.

    Checked before anything is encoded: the head (``FEATURE_LEXICAL``), the files (the
    features, ids and captions: see :func:`.feature_files.read_features`; ``table``: read
    already), the vectors' dimension against the head's, ``--out``.
    """
    started = time.perf_counter()
    check_build_options(gate_k, batch_size)
    FEATURES_INDEX_NEEDS.check(encoder)
    shown = source_label or str(source)
    if table is None:
        table = read_source(source, captions=captions, ids=ids, label=shown)
    if table.dim != encoder.feature_dim:
        raise InputError(
            f"--source {shown} holds {table.dim}-d vectors but the head {encoder.name!r} "
            f"expects {encoder.feature_dim}-d (its dense_size)"
        )
    out = Path(out).expanduser()
    path = Path(source).expanduser()
    sidecar = path.with_name(f"{path.stem}.ids.txt")
    ids_path = (
        Path(ids).expanduser() if ids is not None else (sidecar if sidecar.is_file() else None)
    )
    caps_path = None if captions is None else Path(captions).expanduser()
    entry = encoder_entry(encoder, encoder_spec)
    s_fingerprint = source_fingerprint(path, ids_path, caps_path)
    old = existing_index(out)
    if (
        old is not None
        and old.manifest.get("modality") == "features"
        and old.manifest["encoder"].get("fingerprint") == entry["fingerprint"]
        and old.manifest["vocab"].get("hash") == vocab_hash(encoder.vocab)
        and old.gate_k == gate_k
        and old.manifest["source"].get("fingerprint") == s_fingerprint
    ):
        return unchanged(str(out), encoder, old, time.perf_counter() - started)
    n = len(table)

    def rows() -> Iterator[tuple[dict, Any, Any]]:
        for lo in range(0, n, batch_size):
            hi = min(n, lo + batch_size)
            block = table.vectors[lo:hi]
            encodings = encoder.encode_features(block, keep_units=False)
            for j, encoding in enumerate(encodings):
                cols, vals = gated_sparse(encoding, encoder.vocab, gate_k)
                paired = list(table.captions[lo + j]) if table.captions else []
                meta = {
                    "id": table.ids[lo + j],
                    "kind": "features",
                    "text": paired[0] if paired else "",  # what search results show
                    "captions": paired,
                    "content_key": hashlib.blake2b(block[j].tobytes(), digest_size=16).hexdigest(),
                }
                yield meta, cols, vals
            if progress is not None:
                progress(hi / n, f"{hi}/{n} vectors")

    source_entry = {
        "path": str(path.resolve()),
        "root": str(path.resolve().parent),
        "kind": "features",
        "fingerprint": s_fingerprint,
        "dim": table.dim,
        "ids": table.id_source,
        "captions": None if caps_path is None else str(caps_path.resolve()),
    }
    write_index(
        out, encoder.vocab, rows(), encoder=entry, gate_k=gate_k, modality="features",
        source=source_entry, postings=postings,
    )  # fmt: skip
    ix = open_index(out)
    notes = list(table.notes)
    if old is not None:
        notes.append("the stored index was replaced: every vector was encoded again")
    return IndexResult(
        out=str(out),
        encoder=encoder.name,
        items=len(ix),
        encoded=len(ix),
        reused=0,
        skipped=[],
        up_to_date=False,
        seconds=time.perf_counter() - started,
        manifest=ix.manifest,
        notes=notes,
    )
