"""Tokenisation shared by the BERT-family text towers: local files only, truncation noted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lexlens.models.base import EncoderLoadError
from lexlens.models.config_files import first_line
from lexlens.models.imports import HEAVY_IMPORTS
from lexlens.models.packaged import bert_uncased_tokenizer_dir

#: Texts longer than this many characters are cut before tokenisation (a 512-token
#: window never needs more); the encoding is then marked ``truncated``.
MAX_CHARS = 20_000
#: Whitespace, where a text is cut into pieces to count its tokens.
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class TokenBatch:
    """Padded token ids, attention mask, and which texts were cut."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    truncated: list[bool]


def load_bert_tokenizer(path: Path | None = None) -> Any:
    """The WordPiece tokenizer in ``path``; without one, the packaged bert-base-uncased one."""
    with HEAVY_IMPORTS:
        from transformers import AutoTokenizer  # heavy: transformers, under HEAVY_IMPORTS

    candidates = [path] if path is not None else []
    candidates.append(bert_uncased_tokenizer_dir())
    for candidate in candidates:
        if candidate is not None and any(
            (Path(candidate) / f).exists() for f in ("tokenizer.json", "vocab.txt")
        ):
            try:
                return AutoTokenizer.from_pretrained(str(candidate), local_files_only=True)
            except Exception as exc:  # tokenizers / transformers raise many types
                raise EncoderLoadError(
                    f"{candidate}: cannot load its tokenizer ({first_line(exc)})"
                ) from None
    raise EncoderLoadError("no tokenizer found (tokenizer.json or vocab.txt)")


def check_tokenizer_fits(tokenizer: Any, rows: int, where: str) -> None:
    """Refuse a tokenizer whose ids run past the model's embedding table (another model's)."""
    size = len(tokenizer)
    if size > rows:
        raise EncoderLoadError(
            f"{where}: its tokenizer has {size:,} tokens but the model embeds only {rows:,}: "
            "the tokenizer belongs to another checkpoint"
        )


def tokenize_batch(tokenizer: Any, texts: list[str], max_length: int) -> TokenBatch:
    """Tokenise with padding and truncation; records which texts were cut."""
    clipped = [t[:MAX_CHARS] for t in texts]
    enc = tokenizer(
        clipped,
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
        return_overflowing_tokens=False,
    )
    truncated = []
    for original, text, mask in zip(texts, clipped, enc["attention_mask"], strict=True):
        cut = len(original) > len(text)
        if not cut and int(mask.sum()) >= max_length:
            # Full window: tokenise without truncation to see whether anything was dropped.
            cut = (
                len(tokenizer(text, truncation=False, add_special_tokens=True)["input_ids"])
                > max_length
            )
        truncated.append(cut)
    return TokenBatch(enc["input_ids"], enc["attention_mask"], truncated)


def whitespace_pieces(text: str, size: int = MAX_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``size`` characters, each cut after a
    whitespace character (a word longer than ``size`` is one piece): joined, the text."""
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            cut = max(text.rfind(c, start, end) for c in " \n\t\r\f\v")
            if cut >= start:
                end = cut + 1
            else:
                found = _SPACE.search(text, end)
                end = found.end() if found else n
        yield text[start:end]
        start = end


def count_tokens(tokenizer: Any, text: str) -> int:
    """How many tokens ``text`` is, special tokens left out, as ``tokenizer`` cuts it without
    a limit: counted piece by piece (:func:`whitespace_pieces`), which gives the whole text's
    count for a tokenizer that splits words at whitespace first (BERT's WordPiece), in the
    memory of one piece. A tokenizer with its own ``count_tokens`` (the WordPiece one on
    ``tokenizers``) counts with it."""
    own = getattr(tokenizer, "count_tokens", None)
    total = 0
    for piece in whitespace_pieces(text):
        if own is not None:
            total += own(piece)
        else:
            ids = tokenizer(piece, add_special_tokens=False, truncation=False)["input_ids"]
            total += len(ids)
    return total
