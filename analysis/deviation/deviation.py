"""Semantic deviation (Exact@k, Semantic@k) and co-activation (FLOPs), after D2S (Dense2Sparse).

Every number is read off the retrieval representation ``E(x) = V(x) ⊙ G(x)`` (VDR's gate
keeps the ``gate_k`` highest dimensions and the input's own tokens), held as CSR rows:

- ``Exact@k`` = (terms among ``top_k(E)`` that are tokens of the caption) / denominator;
- ``Semantic@k`` = Σ over ``top_k(E)`` of the best cosine to any caption token, in a
  *static* (context-free) token space ``f_enc``, / denominator. ``f_enc`` is the encoder's
  own input word-embedding table by default, or a GloVe-format text file;
- the denominator is ``k`` (the paper's, the default) or ``min(k, positive terms)``. A
  caption with fewer than ``k`` positive terms cannot reach Exact@k = 1 under ``k``: its
  *cap* is ``min(k, positive)/k``; both are reported per caption;
- ``FLOPs`` within one set = the mean, over pairs of *different* items, of the number of
  dimensions both activate (self-pairs left out: an item always co-activates with itself);
  between a caption set ``C`` and an image set ``I`` it is D2S's
  ``(1/(|C||I|)) Σ_c Σ_i s_c⁰ · s_i⁰`` over every pair, with ``s⁰ = (s != 0)``, computed as
  ``Σ_j n_C(j) n_I(j) / (|C||I|)`` from per-dimension activation counts, as D2S's
  ``train.py`` does.

Token choices (the paper leaves them open): top-k terms and caption tokens are vocabulary
token strings; special tokens (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[MASK]``, ``[UNK]``,
``[unusedN]``) are excluded from both sides and from the positive-term count; a caption
token counts once however often it appears; word pieces (``##raf``) are tokens like any
other. A top term without a static vector (GloVe has no ``##`` pieces) adds 0 to
Semantic@k and is counted (``no_vector``); caption tokens without one cannot be matched
semantically. A caption with no token of the vocabulary (emoji only, say) is left out of
Exact@k and Semantic@k with a note and counted (its vector, an item of the set, still
counts in FLOPs and the vocabulary statistics); the run goes on. Special tokens do count
as active dimensions in FLOPs, which follow D2S (every dimension ``!= 0``).

Everything streams: per-item metrics, activation counts and :mod:`vocab_stats` are folded
in one batch at a time, so memory is O(|V|) plus the rows asked for.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.collections.arguments import collection_argument
from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    progress_argument,
    text_argument,
)
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.inputs import TEXT_SUFFIXES, TextTable
from lexlens.analysis.core.results import Progress
from lexlens.analysis.deviation.captions import (
    CaptionSource,
    EncodedCaptions,
    encode_captions,
    input_name,
    read_captions,
)
from lexlens.analysis.deviation.flops import flops_between
from lexlens.analysis.deviation.item_tokens import text_token_rows
from lexlens.analysis.deviation.options import (
    CAPTION_BATCH,
    DEVIATION_NEEDS,
    STORED_BATCH,
    DeviationOptions,
    deviation_needs_for,
)
from lexlens.analysis.deviation.result import DeviationResult, set_notes
from lexlens.analysis.deviation.scoring import Scorer, caption_terms
from lexlens.analysis.deviation.sets import SetAccumulator, SetDeviation
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings, static_embeddings_for
from lexlens.analysis.retrieval.queries import query_encoder_for
from lexlens.models.base import Encoder, InputError

#: Metadata columns a stored item is measured with.
ITEM_COLUMNS = ["id", "text", "image", "captions"]


def _refuse_wrong_names(name: Any, suffix: Any) -> None:
    """The captions' file name and suffix: text, a suffix one of the text files'."""
    text_argument(name, "name", optional=True)
    text_argument(suffix, "suffix", optional=True)
    if suffix is not None and suffix.lower() not in TEXT_SUFFIXES:
        raise InputError(f"suffix must be one of {', '.join(TEXT_SUFFIXES)}, not {suffix!r}")


def deviation_of_encoded(
    encoded: EncodedCaptions,
    *,
    encoder_name: str,
    vocab: list[str],
    static: StaticEmbeddings,
    options: DeviationOptions,
    input_info: dict | None = None,
    notes: list[str] | None = None,
) -> DeviationResult:
    """The :class:`DeviationResult` of an already encoded caption set (cheap: no model)."""
    scorer = Scorer.build(vocab, static, options.k, options.denominator)
    acc = SetAccumulator("captions", scorer, max_rows=options.max_rows)
    start = 0
    for ids, texts, batch in encoded.batches():
        acc.add(ids, texts, batch, encoded.tokens[start : start + len(ids)])
        start += len(ids)
    captions = acc.result()
    out_notes = list(notes or [])
    if encoded.truncated:
        out_notes.append(f"{encoded.truncated} caption(s) cut to the encoder's token limit")
    out_notes += set_notes(captions, options.k)
    if captions.n_measured == 0:
        raise InputError("no caption has a token of the encoder's vocabulary: nothing to measure")
    return DeviationResult(
        encoder=encoder_name,
        input=dict(input_info or {}),
        k=options.k,
        gate_k=encoded.gate_k,
        denominator=options.denominator,
        f_enc=static.description,
        captions=captions,
        notes=out_notes,
    )


def deviation(
    encoder: Encoder | str,
    captions: CaptionSource,
    *,
    name: str | None = None,
    suffix: str | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: DeviationOptions | None = None,
    **given: Any,
) -> DeviationResult:
    """Exact@k, Semantic@k, FLOPs and vocabulary statistics of an encoder over captions.

    ``encoder``: loaded, or a registry name / checkpoint directory (loaded on ``device``).
    ``captions``: a path, a file's bytes (give the upload's ``name``), or a list of texts.
    Options: :class:`DeviationOptions` (or its fields as keywords). Every argument, the
    GloVe file and the captions are checked before the encoder loads.
    """
    options = DeviationOptions.of(options, **given)
    device_argument(device)
    progress = progress_argument(progress)
    _refuse_wrong_names(name, suffix)
    table = read_captions(captions, name, suffix=suffix)
    encoder = encoder_argument(encoder, needs=DEVIATION_NEEDS, device=device)
    static = static_embeddings_for(encoder, options.glove)
    encoded = encode_captions(
        encoder,
        table,
        gate_k=options.caption_gate(),
        batch_size=options.batch_size or CAPTION_BATCH,
        progress=progress,
    )
    notes = [f"{table.skipped} empty row(s) left out"] if table.skipped else []
    return deviation_of_encoded(
        encoded,
        encoder_name=encoder.name,
        vocab=encoder.vocab,
        static=static,
        options=options,
        input_info={"captions": input_name(captions, name), "rows": len(table)},
        notes=notes,
    )


def deviation_of_index(
    index: str | Path | Collection,
    encoder: Encoder | str | None = None,
    *,
    device: str | None = None,
    progress: Progress | None = None,
    options: DeviationOptions | None = None,
    **given: Any,
) -> DeviationResult:
    """The same analyses on a collection: a stored index (or its folder), streamed from its
    memory-mapped CSR vectors, or any :class:`Collection` (held in memory: give the
    ``gate_k`` its vectors were made with).

    - A text collection: Exact@k / Semantic@k of each stored text vector against its own
      tokens, FLOPs between different texts, vocabulary statistics.
    - An image collection: each image's stored vector against the tokens of its paired
      captions (all of them: a term counts if it is a token of any; an item's ``text`` stands
      in when it has no ``caption``); the captions themselves, encoded by ``encoder`` with
      the index's gate k, as a caption set; D2S's FLOPs between the caption set and the
      image set; vocabulary statistics of both.
    - A collection of dense features (``modality`` "features", indexed through a D2S head):
      each stored vector against the tokens of its paired captions, which the head's
      tokenizer splits (``tokenize_texts``: the head has no text tower, so there is no
      caption set and no caption × image FLOPs); FLOPs between different vectors.

    ``encoder`` is the text encoder (its tokens, its static embeddings unless ``glove``); its
    vocabulary must be the index's. Left out, it is the one that puts text queries into the
    index's vocabulary (the index's own encoder, or its text partner for an image index).
    Options: :class:`DeviationOptions` (or its fields as keywords); ``gate_k``, when given,
    must equal a stored index's (stored vectors cannot be re-gated). Memory: O(|V|) plus one
    batch, whatever the collection size.
    """
    options = DeviationOptions.of(options, **given)
    device_argument(device)
    progress = progress_argument(progress)
    ix = collection_argument(index, "index")
    loading = time.perf_counter()
    gate_k = _gate_of(ix, options.gate_k)
    encoder = _index_encoder(ix, encoder, device)
    started, cpu = time.perf_counter(), time.thread_time()
    static = static_embeddings_for(encoder, options.glove)
    scorer = Scorer.build(encoder.vocab, static, options.k, options.denominator)
    item_set, cap_set = _measured(ix, encoder, scorer, options, gate_k, progress)
    images = ix.modality == "image"
    between = (
        flops_between(cap_set.counts, cap_set.n, item_set.counts, item_set.n) if cap_set else None
    )
    return DeviationResult(
        encoder=encoder.name,
        input={
            "index": ix.describe()["name"],
            "index_encoder": ix.encoder_name,
            "modality": ix.modality,
            "items": len(ix),
        },
        k=options.k,
        gate_k=gate_k,
        denominator=options.denominator,
        f_enc=static.description,
        captions=cap_set if images else item_set,
        images=item_set if images else None,
        flops_captions_images=between,
        notes=_collection_notes(ix.modality, item_set, cap_set, options.k),
        seconds=time.perf_counter() - started,
        load_seconds=started - loading,
        cpu_seconds=time.thread_time() - cpu,
    )


def _gate_of(ix: Collection, given: int | None) -> int:
    """The gate k of a collection's vectors: a stored index's own (a ``given`` one must
    equal it: stored vectors cannot be re-gated); for a collection held in memory, whose
    vectors may have been made elsewhere, the one ``given``."""
    name = ix.describe()["name"]
    if not is_stored(ix):
        if given is None:
            raise InputError(
                f"the collection {name} does not record the gate k of its vectors: give the "
                "gate_k they were made with"
            )
        return given
    if given is not None and given != ix.gate_k:
        raise InputError(
            f"the collection {name} stores vectors gated at k = {ix.gate_k}: "
            f"they cannot be re-gated at {given} (leave the gate k out, or re-index)"
        )
    return ix.gate_k


def _index_encoder(ix: Collection, encoder: Encoder | str | None, device: str | None) -> Encoder:
    """The text encoder of a collection's captions, loaded and checked against its vocabulary
    (left out: the encoder of its text queries, as search picks it)."""
    needs = deviation_needs_for(ix.modality)
    return query_encoder_for(ix, encoder, device, needs=needs, argument="encoder")


def _batches(
    ix: Collection, size: int, columns: list[str]
) -> Iterator[tuple[int, Any, list[dict]]]:
    """(the end row, the rows as CSR, their metadata ``columns``) of every ``size`` items in
    order: a stored index's memory-mapped rows, any other collection's rows one by one."""
    if is_stored(ix):
        for batch in ix.iter_batches(batch_size=size, columns=columns):
            yield batch.stop, batch.vectors, batch.meta
        return
    for start in range(0, len(ix), size):
        stop = min(len(ix), start + size)
        rows = [ix.row(i) for i in range(start, stop)]
        indptr = np.cumsum([0, *(len(columns) for columns, _ in rows)])
        matrix = sp.csr_matrix(
            (
                np.concatenate([w for _, w in rows]).astype(np.float32),
                np.concatenate([c for c, _ in rows]),
                indptr,
            ),
            shape=(stop - start, ix.vocab_size),
        )
        yield stop, matrix, ix.meta(range(start, stop), columns)


def _measured(
    ix: Collection,
    encoder: Encoder,
    scorer: Scorer,
    options: DeviationOptions,
    gate_k: int,
    progress: Progress | None,
) -> tuple[SetDeviation, SetDeviation | None]:
    """The item set (texts, images or features) and, for images, their captions' set."""
    images, features = ix.modality == "image", ix.modality == "features"
    kind = "images" if images else "features" if features else "texts"
    items = SetAccumulator(kind, scorer, max_rows=options.max_rows)
    captions = SetAccumulator("captions", scorer, max_rows=options.max_rows) if images else None
    if captions is not None:  # an image's words are its captions': one evidence for both sets
        items.words = captions.words
    total = len(ix)
    columns = ["id", "text"] if kind == "texts" else ITEM_COLUMNS
    for stop, vectors, meta in _batches(ix, options.batch_size or STORED_BATCH, columns):
        ids = [m["id"] for m in meta]
        if kind == "texts":  # each text against its own tokens, as the index keeps them
            texts = [m.get("text") or "" for m in meta]
            span = (stop - len(meta), stop)
            items.add(ids, texts, vectors, text_token_rows(ix, encoder, scorer, span, texts))
        else:
            items.add(ids, *_measured_against(meta, vectors, encoder, features, captions, gate_k))
        if progress:
            progress(stop / total, f"Measured {stop} of {total} items")
    cap_set = captions.result() if captions is not None and captions.n else None
    return items.result(), cap_set


def _collection_notes(
    modality: str, item_set: SetDeviation, cap_set: SetDeviation | None, k: int
) -> list[str]:
    """Notes on each set, and on a collection whose items have no caption to compare with."""
    notes = set_notes(item_set, k) + (set_notes(cap_set, k) if cap_set else [])
    if modality == "features" and item_set.n_measured == 0:
        notes.append(
            "no vector of this collection has a caption: Exact@k and Semantic@k need "
            "captions (index the features with --captions)"
        )
    if modality == "image" and cap_set is None:
        notes.append(
            "no image of this collection has a caption: Exact@k, Semantic@k and the "
            "caption × image FLOPs need captions (a caption column in the source)"
        )
    return notes


def _measured_against(
    meta: list[dict],
    vectors: Any,
    encoder: Encoder,
    features: bool,
    captions: SetAccumulator | None,
    gate_k: int,
) -> tuple[list[str], Any, list[list[str]]]:
    """(names, vectors, caption tokens) of a batch of stored images or feature vectors:
    each against the tokens of its paired captions (an image collection's captions are also
    a set of their own, encoded at the index's gate, folded into ``captions``; a D2S head
    tokenises them: it has no text tower)."""
    paired = [_paired_captions(m) for m in meta]
    flat = [c for p in paired for c in p]
    if features:
        tokens = [caption_terms(e.units) for e in encoder.tokenize_texts(flat)] if flat else []
        names = [p[0] if p else m["id"] for p, m in zip(paired, meta, strict=True)]
    else:
        ids = [f"{m['id']}#{j}" for p, m in zip(paired, meta, strict=True) for j in range(len(p))]
        encoded = encode_captions(encoder, TextTable(ids, flat), gate_k=gate_k)
        if flat:
            captions.add(encoded.ids, encoded.texts, encoded.vectors, encoded.tokens)
        tokens = encoded.tokens
        names = [m.get("image") or m["id"] for m in meta]
    return names, vectors, _per_item(paired, tokens)


def _per_item(paired: list[list[str]], tokens: list[list[str]]) -> list[list[str]]:
    """Each item's caption tokens: the union over its paired captions' tokens (in order)."""
    out, at = [], 0
    for captions in paired:
        out.append(caption_terms(t for toks in tokens[at : at + len(captions)] for t in toks))
        at += len(captions)
    return out


def _paired_captions(meta: dict) -> list[str]:
    """An item's non-empty captions (its ``text`` when it has none)."""
    paired = [c.strip() for c in (meta.get("captions") or []) if c and c.strip()]
    if not paired and (meta.get("text") or "").strip():
        paired = [meta["text"].strip()]
    return paired
