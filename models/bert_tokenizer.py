"""BERT's WordPiece tokenizer run by the ``tokenizers`` library directly (without importing
transformers, which costs more to import than the tokenizer takes to load).

:func:`load_wordpiece_tokenizer` accepts a folder only when its ``tokenizer.json`` is a plain
BERT pipeline (BertNormalizer, BertPreTokenizer, WordPiece, ``[CLS] $A [SEP]``) whose settings
agree with ``tokenizer_config.json``: then transformers' ``BertTokenizer`` builds the very same
pipeline, and :meth:`WordPieceTokenizer.encode_padded` gives its ids, padding and truncation.
Anything else returns ``None`` and the caller loads transformers' tokenizer. Every part of
transformers' tokenizer API that is not implemented here is transformers' own tokenizer,
loaded on first use, so callers see one tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from lexlens.models.config_files import read_json
from lexlens.models.text_io import MAX_CHARS, TokenBatch, load_bert_tokenizer

#: tokenizer_config.json fields and the value transformers' BertTokenizer assumes without them.
CONFIG_DEFAULTS: dict[str, Any] = {
    "tokenizer_class": "BertTokenizer",
    "do_lower_case": True,
    "strip_accents": None,
    "tokenize_chinese_chars": True,
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "mask_token": "[MASK]",
    "padding_side": "right",
    "truncation_side": "right",
}


def _plain_bert_pipeline(pipeline: dict, config: dict, vocab: dict[str, int]) -> bool:
    """Whether ``tokenizer.json`` is BERT's pipeline with the settings ``config`` asks for."""
    normalizer = pipeline.get("normalizer") or {}
    model = pipeline.get("model") or {}
    post = pipeline.get("post_processor") or {}
    cls, sep = config["cls_token"], config["sep_token"]
    single = [
        {"SpecialToken": {"id": cls, "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}},
        {"SpecialToken": {"id": sep, "type_id": 0}},
    ]
    specials = post.get("special_tokens") or {}
    return (
        config["tokenizer_class"] in ("BertTokenizer", "BertTokenizerFast")
        and normalizer.get("type") == "BertNormalizer"
        and normalizer.get("clean_text") is True
        and normalizer.get("lowercase") is config["do_lower_case"]
        and normalizer.get("strip_accents") == config["strip_accents"]
        and normalizer.get("handle_chinese_chars") is config["tokenize_chinese_chars"]
        and (pipeline.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
        and model.get("type") == "WordPiece"
        and model.get("unk_token") == config["unk_token"]
        and post.get("type") == "TemplateProcessing"
        and post.get("single") == single
        and all(specials.get(t, {}).get("ids") == [vocab.get(t)] for t in (cls, sep))
        and all(config[k] in vocab for k in ("cls_token", "sep_token", "pad_token", "unk_token"))
        and config["padding_side"] == config["truncation_side"] == "right"
    )


def load_wordpiece_tokenizer(path: Path) -> WordPieceTokenizer | None:
    """The folder's BERT tokenizer on ``tokenizers`` alone, or ``None`` when the folder's
    tokenizer is not a plain BERT one (the caller then loads transformers')."""
    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        return None
    config = dict(CONFIG_DEFAULTS)
    if (path / "tokenizer_config.json").is_file():
        found = read_json(path / "tokenizer_config.json")
        if not isinstance(found, dict):
            return None
        config |= {k: found[k] for k in CONFIG_DEFAULTS if found.get(k) is not None}
    pipeline = read_json(path / "tokenizer.json")
    if not isinstance(pipeline, dict):
        return None
    vocab = (pipeline.get("model") or {}).get("vocab")
    if not isinstance(vocab, dict) or not _plain_bert_pipeline(pipeline, config, vocab):
        return None
    from tokenizers import Tokenizer  # heavy: tokenizers loads on first use

    try:
        backend = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception:  # tokenizers raises its own exception types: transformers then decides
        return None
    return WordPieceTokenizer(path, backend, config)


class WordPieceTokenizer:
    """A BERT tokenizer on ``tokenizers``; other attributes come from transformers' tokenizer
    of the same folder, loaded on first use."""

    padding_side = "right"

    def __init__(self, path: Path, backend: Any, config: dict[str, Any]) -> None:
        self.path = Path(path)
        self.backend = backend
        self.backend.no_truncation()
        self.backend.no_padding()
        self.pad_token_id = int(backend.token_to_id(config["pad_token"]))
        self._pad_token = config["pad_token"]
        self._transformers_tokenizer: Any = None
        self._counter: Any = None  # the pipeline without truncation, to count tokens

    def __len__(self) -> int:
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    def convert_ids_to_tokens(self, ids: int | list[int]) -> str | None | list[str | None]:
        """The token of each id (``None`` for an id the vocabulary lacks), as transformers."""
        if isinstance(ids, int):
            return self.backend.id_to_token(ids)
        return [self.backend.id_to_token(int(i)) for i in ids]

    def encode_padded(self, texts: list[str], max_length: int) -> TokenBatch:
        """Ids and mask padded to the batch's longest text, cut at ``max_length`` tokens
        (special tokens included), and which texts were cut (characters past
        ``text_io.MAX_CHARS`` count as cut)."""
        clipped = [t[:MAX_CHARS] for t in texts]
        self.backend.enable_truncation(max_length, stride=0, strategy="longest_first")
        self.backend.enable_padding(pad_id=self.pad_token_id, pad_token=self._pad_token)
        try:
            encodings = self.backend.encode_batch(clipped)
        finally:
            self.backend.no_truncation()
            self.backend.no_padding()
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
        truncated = [
            len(t) > len(c) or bool(e.overflowing)
            for t, c, e in zip(texts, clipped, encodings, strict=True)
        ]
        return TokenBatch(ids, mask, truncated)

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is, special tokens left out, without a limit (a copy of
        the pipeline with truncation off: :meth:`encode_padded` turns it on meanwhile)."""
        if self._counter is None:
            from tokenizers import Tokenizer  # heavy: tokenizers loads on first use

            counter = Tokenizer.from_str(self.backend.to_str())
            counter.no_truncation()
            counter.no_padding()
            self._counter = counter
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def transformers_tokenizer(self) -> Any:
        """transformers' tokenizer of the same folder (loaded once, on first use)."""
        if self._transformers_tokenizer is None:
            self._transformers_tokenizer = load_bert_tokenizer(self.path)
        return self._transformers_tokenizer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.transformers_tokenizer()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in (
            "backend",
            "path",
            "_transformers_tokenizer",
            "_counter",
        ):
            raise AttributeError(name)
        return getattr(self.transformers_tokenizer(), name)
