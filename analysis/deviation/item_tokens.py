"""Each text item's own tokens, read from what its index keeps, never from the encoder's
forward pass: the input token ids stored at index time
(:mod:`lexlens.analysis.collections.token_ids`), or, for an index built before they were
kept (or an item without them), the stored text tokenised again by the encoder's own
tokenizer (no model forward)."""

from __future__ import annotations

import numpy as np

from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.collections.token_ids import ragged, stored_token_ids, units_to_ids
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.deviation.options import CAPTION_BATCH
from lexlens.analysis.deviation.scoring import Scorer
from lexlens.analysis.deviation.tokens import TokenRows
from lexlens.models.base import Encoder


def text_token_rows(
    ix: Collection,
    encoder: Encoder,
    scorer: Scorer,
    span: tuple[int, int],
    texts: list[str],
) -> TokenRows:
    """The tokens that count of items ``span = (start, stop)`` of a text collection, whose
    texts are ``texts``: stored ids where the index keeps them, the rest tokenised again."""
    start, stop = span
    stored = stored_token_ids(ix).rows(start, stop) if is_stored(ix) else None
    if stored is not None:
        indptr, ids = stored
        missing = [i for i, t in enumerate(texts) if indptr[i] == indptr[i + 1] and t.strip()]
        if not missing:
            return TokenRows.from_ids(indptr, ids, scorer, scorer.vocab)
        rows = [ids[indptr[i] : indptr[i + 1]] for i in range(len(texts))]
    else:
        missing = [i for i, t in enumerate(texts) if t.strip()]
        rows = [np.zeros(0, np.int64) for _ in texts]
    for i, found in zip(missing, tokenized_ids(encoder, [texts[i] for i in missing]), strict=True):
        rows[i] = found
    return TokenRows.from_ids(*ragged(rows), scorer, scorer.vocab)


def tokenized_ids(encoder: Encoder, texts: list[str]) -> list[np.ndarray]:
    """Each text's input tokens as positions in the encoder's vocabulary (tokens outside it
    left out), as its own tokenizer cuts them (``encode_texts`` when it shows none)."""
    out: list[np.ndarray] = []
    tokenizer, limit = getattr(encoder, "tokenizer", None), getattr(encoder, "max_length", None)
    for lo in range(0, len(texts), CAPTION_BATCH * 16):
        chunk = texts[lo : lo + CAPTION_BATCH * 16]
        if tokenizer is not None and isinstance(limit, int):
            from lexlens.models.text_io import tokenize_batch  # heavy: loads torch

            batch = tokenize_batch(tokenizer, chunk, limit)
            units = [
                tokenizer.convert_ids_to_tokens(ids[mask.bool()].tolist())
                for ids, mask in zip(batch.input_ids, batch.attention_mask, strict=True)
            ]
        else:
            units = [e.units for e in encoder.encode_texts(chunk, keep_units=False)]
        out += [units_to_ids(unit, encoder.vocab) for unit in units]
    return out
