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

from pathlib import Path
from typing import Any

from lexlens.analysis.collections.store import StoredIndex, open_index, vocab_hash
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.inputs import TextTable
from lexlens.analysis.core.results import Progress
from lexlens.analysis.deviation.captions import (
    CaptionSource,
    EncodedCaptions,
    encode_captions,
    input_name,
    read_captions,
)
from lexlens.analysis.deviation.flops import flops_between
from lexlens.analysis.deviation.options import (
    BATCH_SIZE,
    DEFAULT_K,
    DEFAULT_MAX_ROWS,
    DEVIATION_NEEDS,
    check_options,
    deviation_needs_for,
)
from lexlens.analysis.deviation.result import DeviationResult, set_notes
from lexlens.analysis.deviation.scoring import Scorer, caption_terms
from lexlens.analysis.deviation.sets import SetAccumulator
from lexlens.analysis.deviation.static_embeddings import (
    StaticEmbeddings,
    check_glove,
    static_embeddings_for,
)
from lexlens.analysis.search.queries import default_query_encoder
from lexlens.models.base import Encoder, InputError
from lexlens.models.registry import as_encoder


def deviation_of_encoded(
    encoded: EncodedCaptions,
    *,
    encoder_name: str,
    vocab: list[str],
    static: StaticEmbeddings,
    k: int = DEFAULT_K,
    denominator: str = "k",
    input_info: dict | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    notes: list[str] | None = None,
) -> DeviationResult:
    """The :class:`DeviationResult` of an already encoded caption set (cheap: no model)."""
    check_options(k=k, gate_k=encoded.gate_k, denominator=denominator, max_rows=max_rows)
    scorer = Scorer.build(vocab, static, k, denominator)
    acc = SetAccumulator("captions", scorer, max_rows=max_rows)
    start = 0
    for ids, texts, batch in encoded.batches():
        acc.add(ids, texts, batch, encoded.tokens[start : start + len(ids)])
        start += len(ids)
    captions = acc.result()
    out_notes = list(notes or [])
    if encoded.truncated:
        out_notes.append(f"{encoded.truncated} caption(s) cut to the encoder's token limit")
    out_notes += set_notes(captions, k)
    if captions.n_measured == 0:
        raise InputError("no caption has a token of the encoder's vocabulary: nothing to measure")
    return DeviationResult(
        encoder=encoder_name,
        input=dict(input_info or {}),
        k=k,
        gate_k=encoded.gate_k,
        denominator=denominator,
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
    k: int = DEFAULT_K,
    gate_k: int = DEFAULT_GATE_K,
    denominator: str = "k",
    glove: str | Path | bytes | None = None,
    glove_name: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_rows: int = DEFAULT_MAX_ROWS,
    device: str | None = None,
    progress: Progress | None = None,
) -> DeviationResult:
    """Exact@k, Semantic@k, FLOPs and vocabulary statistics of an encoder over captions.

    ``encoder``: loaded, or a registry name / checkpoint directory (loaded on ``device``).
    ``captions``: a path, a file's bytes (give the upload's ``name``), or a list of texts.
    Options, the GloVe file and the captions are checked before the encoder loads.
    """
    check_options(
        k=k, gate_k=gate_k, denominator=denominator, batch_size=batch_size, max_rows=max_rows
    )
    glove = check_glove(glove)
    table = read_captions(captions, name, suffix=suffix)
    encoder = as_encoder(encoder, device, DEVIATION_NEEDS)
    static = static_embeddings_for(encoder, glove, glove_name=glove_name)
    encoded = encode_captions(
        encoder, table, gate_k=gate_k, batch_size=batch_size, progress=progress
    )
    notes = [f"{table.skipped} empty row(s) left out"] if table.skipped else []
    return deviation_of_encoded(
        encoded,
        encoder_name=encoder.name,
        vocab=encoder.vocab,
        static=static,
        k=k,
        denominator=denominator,
        input_info={"captions": input_name(captions, name), "rows": len(table)},
        max_rows=max_rows,
        notes=notes,
    )


def index_tokens(
    encoder: Encoder, texts: list[str], batch_size: int = BATCH_SIZE
) -> list[list[str]]:
    """Caption tokens of texts as ``encoder`` tokenises them (empty text → no token)."""
    out: list[list[str]] = [[] for _ in texts]
    todo = [i for i, t in enumerate(texts) if t and t.strip()]
    for lo in range(0, len(todo), batch_size):
        chunk = todo[lo : lo + batch_size]
        encodings = encoder.encode_texts([texts[i] for i in chunk], keep_units=False)
        for i, e in zip(chunk, encodings, strict=True):
            out[i] = caption_terms(e.units)
    return out


def deviation_of_index(
    index: str | Path | Any,
    encoder: Encoder | str | None = None,
    *,
    k: int = DEFAULT_K,
    gate_k: int | None = None,
    denominator: str = "k",
    glove: str | Path | bytes | None = None,
    glove_name: str | None = None,
    batch_size: int = 1024,
    max_rows: int = DEFAULT_MAX_ROWS,
    device: str | None = None,
    progress: Progress | None = None,
) -> DeviationResult:
    """The same analyses on a stored collection, streamed from its memory-mapped CSR vectors.

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
    ``gate_k``, when given, must equal the index's (stored vectors cannot be re-gated). Memory: O(|V|) plus one batch, whatever the collection size.
    """
    check_options(k=k, denominator=denominator, batch_size=batch_size, max_rows=max_rows)
    glove = check_glove(glove)
    ix = index if isinstance(index, StoredIndex) else open_index(index)
    stored_gate = ix.gate_k
    if gate_k is not None and gate_k != stored_gate:
        raise InputError(
            f"the collection {ix.path.name} stores vectors gated at k = {stored_gate}: "
            f"they cannot be re-gated at {gate_k} (leave the gate k out, or re-index)"
        )
    features = ix.modality == "features"
    needs = deviation_needs_for(ix.modality)
    if encoder is None:
        encoder = _text_encoder_of(ix)
    encoder = as_encoder(encoder, device, needs)
    if vocab_hash(encoder.vocab) != ix.manifest["vocab"]["hash"]:
        raise InputError(
            f"{encoder.name!r} does not share the vocabulary of the collection "
            f"{ix.path.name} (built with {ix.encoder_name!r}): pick a text encoder in its space"
        )
    static = static_embeddings_for(encoder, glove, glove_name=glove_name)
    scorer = Scorer.build(encoder.vocab, static, k, denominator)
    images = ix.modality == "image"
    kind = "images" if images else "features" if features else "texts"
    items = SetAccumulator(kind, scorer, max_rows=max_rows)
    captions = SetAccumulator("captions", scorer, max_rows=max_rows) if images else None
    total = len(ix)
    columns = ["id", "text", "image", "captions"]
    for batch in ix.iter_batches(batch_size=batch_size, columns=columns):
        items.add(batch.ids, *_measured_against(batch, encoder, features, captions, stored_gate))
        if progress:
            progress(batch.stop / total, f"Measured {batch.stop} of {total} items")
    item_set = items.result()
    cap_set = captions.result() if captions is not None and captions.n else None
    between = (
        flops_between(cap_set.counts, cap_set.n, item_set.counts, item_set.n) if cap_set else None
    )
    notes = set_notes(item_set, k) + (set_notes(cap_set, k) if cap_set else [])
    if features and item_set.n_measured == 0:
        notes.append(
            "no vector of this collection has a caption: Exact@k and Semantic@k need "
            "captions (index the features with --captions)"
        )
    if images and cap_set is None:
        notes.append(
            "no image of this collection has a caption: Exact@k, Semantic@k and the "
            "caption × image FLOPs need captions (a caption column in the source)"
        )
    info = {
        "index": ix.path.name,
        "index_encoder": ix.encoder_name,
        "modality": ix.modality,
        "items": total,
    }
    return DeviationResult(
        encoder=encoder.name,
        input=info,
        k=k,
        gate_k=stored_gate,
        denominator=denominator,
        f_enc=static.description,
        captions=cap_set if images else item_set,
        images=item_set if images else None,
        flops_captions_images=between,
        notes=notes,
    )


def _text_encoder_of(ix: StoredIndex) -> str:
    """The encoder that reads an index's texts and captions: its text query encoder."""
    try:
        return default_query_encoder(ix, "text")
    except InputError:
        raise InputError(
            f"{ix.path.name} was built with {ix.encoder_name!r}, which reads no text: name a "
            "text encoder in its vocabulary for the captions (--encoder)"
        ) from None


def _measured_against(
    batch: Any, encoder: Encoder, features: bool, captions: SetAccumulator | None, gate_k: int
) -> tuple[list[str], Any, list[list[str]]]:
    """(names, vectors, caption tokens) of a batch of stored items: a text against its own
    tokens; an image or a feature vector against the tokens of its paired captions (an image
    collection's captions are also a set of their own, encoded at the index's gate, folded
    into ``captions``; a D2S head tokenises them: it has no text tower)."""
    if captions is None and not features:
        texts = [m.get("text") or "" for m in batch.meta]
        return texts, batch.vectors, index_tokens(encoder, texts)
    paired = [_paired_captions(m) for m in batch.meta]
    flat = [c for p in paired for c in p]
    if features:
        tokens = [caption_terms(e.units) for e in encoder.tokenize_texts(flat)] if flat else []
        names = [p[0] if p else m["id"] for p, m in zip(paired, batch.meta, strict=True)]
    else:
        ids = [
            f"{m['id']}#{j}" for p, m in zip(paired, batch.meta, strict=True) for j in range(len(p))
        ]
        encoded = encode_captions(encoder, TextTable(ids, flat), gate_k=gate_k)
        if flat:
            captions.add(encoded.ids, encoded.texts, encoded.vectors, encoded.tokens)
        tokens = encoded.tokens
        names = [m.get("image") or m["id"] for m in batch.meta]
    return names, batch.vectors, _per_item(paired, tokens)


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
