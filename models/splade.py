"""SPLADE: a masked-LM head read as vocabulary weights.

Forward pass, top to bottom (one text: its real tokens only, never padding)::

    h      = BertModel(tokens)                    # [T, H]   (the MLM's base model)
    z      = transform(h)                         # MLM head: dense → activation → LayerNorm
    logits = z @ E.T + b                          # decoder, tied to the word embeddings [T, |V|]
    rows   = log(1 + relu(logits))                # per-token lexical rows
    V(x)   = max over tokens of rows              # [|V|]
           = log(1 + relu(max_t (z_t @ E.T) + b)) # the same without the rows (monotonic)

When rows are not kept (``keep_units=False``) the second form runs on the batch's real
tokens packed into one matrix (``models.projection``): no ``[batch, length, |V|]`` tensor.
Any local ``BertForMaskedLM``-style directory (config + weights + tokenizer) loads this
way, including naver/splade-* checkpoints a user has on disk. A BERT masked LM runs as the
plain-torch ``models.bert.BertMaskedLM`` and a plain BERT ``tokenizer.json`` on the
``tokenizers`` library (``models.bert_tokenizer``), so neither imports transformers; other
masked LMs run through transformers (DistilBERT heads packed as above; an unknown head
through its full logits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lexlens.models.base import Capability, Encoder, EncoderLoadError, LexicalEncoding, check_texts
from lexlens.models.bert import BertMaskedLM, plain_bert_config
from lexlens.models.bert_tokenizer import WordPieceTokenizer, load_wordpiece_tokenizer
from lexlens.models.checkpoint import (
    check_header,
    load_checked,
    no_init,
    read_state_dict,
    tensor_shapes,
)
from lexlens.models.config_files import check_sizes, find_weights, first_line, read_config
from lexlens.models.imports import HEAVY_IMPORTS
from lexlens.models.projection import pack, project_rows, segment_max, segment_max_projection
from lexlens.models.text_io import (
    TokenBatch,
    check_tokenizer_fits,
    load_bert_tokenizer,
    tokenize_batch,
)

#: Texts tokenised at once before being sorted by length into batches.
TOKENIZE_GROUP = 1024


class SpladeEncoder(Encoder):
    """A SPLADE text encoder (one tower serves queries and documents)."""

    capabilities = frozenset({Capability.TEXT_LEXICAL})

    #: Texts per forward pass when per-token rows are kept, and when they are not.
    batch_size = 32
    pooled_batch_size = 128
    #: Padded tokens per forward pass (bounds the body's memory on long texts), and rows
    #: of ``[n, |V|]`` logits per pass when they are kept.
    max_batch_tokens = 16384
    max_kept_rows = 4096
    #: Rows of logits per matrix multiply when rows are not kept. Measured on 2 busy cores
    #: (600 long texts): 1,024 rows took 30 % less CPU and 25–55 % less wall time than 256
    #: (fewer parallel regions to wait for); with one thread within 2 % of 256. The buffer holds
    #: ``rows × |V|`` floats (125 MB for 30,522 terms).
    projection_rows = 1024

    def __init__(
        self, mlm: nn.Module, tokenizer: Any, *, device: str, name: str, source: str = ""
    ) -> None:
        self.model = mlm.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.name = name
        self.source = source
        self.max_length = min(int(mlm.config.max_position_embeddings), 512)
        vocab_size = int(mlm.config.vocab_size)
        vocab = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
        self.vocab = [t if t is not None else f"[id{i}]" for i, t in enumerate(vocab)]
        self.head = mlm_head(mlm)

    @classmethod
    def from_dir(cls, path: Path, *, device: str, name: str) -> SpladeEncoder:
        """Load a masked-LM directory (safetensors or a plain PyTorch state dict).

        Checked before the model is allocated: config.json readable with plausible sizes,
        and the weight file's tensor shapes (its header) against a meta-device build of
        the config; then the tensors are read (NaN/Inf refused) and loaded. A BERT masked
        LM runs as :class:`~lexlens.models.bert.BertMaskedLM` (plain torch); any other
        through transformers' ``AutoModelForMaskedLM``.
        """
        path = Path(path)
        config_file = path / "config.json"
        fields = read_config(config_file)
        check_sizes(fields, config_file)
        weights = find_weights(path)
        bert = plain_bert_config(fields)
        if bert is None:
            mlm = _transformers_mlm(config_file, weights)
        else:
            with torch.device("meta"):
                skeleton = BertMaskedLM(bert)
            check_header(skeleton, tensor_shapes(weights), weights, optional=("position_ids",))
            state = read_state_dict(weights)
            mlm = BertMaskedLM(bert)  # uninitialised: every weight is loaded (or tied)
            load_checked(mlm, state, weights)
        tokenizer = load_wordpiece_tokenizer(path) or load_bert_tokenizer(path)
        check_tokenizer_fits(tokenizer, int(mlm.config.vocab_size), str(path))
        return cls(mlm, tokenizer, device=device, name=name, source=str(path))

    @torch.inference_mode()
    def encode_texts(
        self, texts: list[str], side: str = "query", *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode texts (one tower: ``side`` is ignored); batched by length, order kept."""
        check_texts(texts)
        out: list[LexicalEncoding | None] = [None] * len(texts)
        for index, ids, mask, truncated in self._batches(texts, keep_units):
            pooled, rows = self._forward(ids.to(self.device), mask.to(self.device), keep_units)
            pooled_np = pooled.float().cpu().numpy()
            lengths = mask.sum(dim=1).tolist()
            offset = 0
            for b, i in enumerate(index):
                n = int(lengths[b])
                token_ids = ids[b, :n].tolist()
                out[i] = LexicalEncoding(
                    weights=pooled_np[b],
                    unit_weights=None if rows is None else rows[offset : offset + n],
                    units=self.tokenizer.convert_ids_to_tokens(token_ids),
                    input_ids=token_ids,
                    truncated=truncated[b],
                )
                offset += n
        return out  # type: ignore[return-value]

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, keep_units: bool
    ) -> tuple[torch.Tensor, np.ndarray | None]:
        """``V(x)`` per text ``[B, |V|]``, and the real tokens' rows ``[n, |V|]`` if kept."""
        if self.head is None:  # an MLM head of unknown structure: its full logits
            logits = self.model(input_ids=ids, attention_mask=mask).logits
            rows_all = torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1)
            kept = rows_all[mask.bool()].float().cpu().numpy() if keep_units else None
            return rows_all.amax(dim=1), kept
        transform, decoder = self.head
        if isinstance(self.model, BertMaskedLM):
            hidden = self.model.hidden_states(ids, mask)
        else:
            hidden = self.model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
        packed, lengths = pack(hidden, mask.bool())
        z = transform(packed)
        if not keep_units:
            logits = segment_max_projection(z, decoder.weight, lengths, chunk=self.projection_rows)
            if decoder.bias is not None:
                logits += decoder.bias
            return torch.log1p(torch.relu_(logits)), None
        rows = torch.log1p_(torch.relu_(project_rows(z, decoder.weight, decoder.bias)))
        pooled = segment_max(rows, lengths)
        return pooled, rows.float().cpu().numpy()

    def _batches(
        self, texts: list[str], keep_units: bool
    ) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor, list[bool]]]:
        """Length-sorted batches ``(indices, ids, mask, truncated)``, trimmed to their width.

        At most ``batch_size`` (``pooled_batch_size``) texts and ``max_batch_tokens``
        padded tokens (``max_kept_rows`` real tokens when rows are kept) per batch.
        """
        size = self.batch_size if keep_units else self.pooled_batch_size
        right = getattr(self.tokenizer, "padding_side", "right") == "right"
        for start in range(0, len(texts), TOKENIZE_GROUP):
            group = self._tokenize(texts[start : start + TOKENIZE_GROUP])
            lengths = group.attention_mask.sum(dim=1)
            order = torch.argsort(lengths, stable=True).tolist()
            i = 0
            while i < len(order):
                j, real = i + 1, int(lengths[order[i]])
                while j < len(order) and j - i < size:
                    width = int(lengths[order[j]])
                    if width * (j - i + 1) > self.max_batch_tokens or (
                        keep_units and real + width > self.max_kept_rows
                    ):
                        break
                    real += width
                    j += 1
                index = order[i:j]
                width = int(lengths[index[-1]]) if right else group.input_ids.shape[1]
                yield (
                    [start + k for k in index],
                    group.input_ids[index, :width],
                    group.attention_mask[index, :width],
                    [group.truncated[k] for k in index],
                )
                i = j

    def _tokenize(self, texts: list[str]) -> TokenBatch:
        """Padded ids and mask of ``texts``, cut at ``max_length`` tokens, and which were cut."""
        if isinstance(self.tokenizer, WordPieceTokenizer):
            return self.tokenizer.encode_padded(texts, self.max_length)
        return tokenize_batch(self.tokenizer, texts, self.max_length)

    def static_embeddings(self) -> tuple[np.ndarray, list[str]]:
        """The masked LM's input word-embedding table ``[|V|, H]`` and the token of each row."""
        table = self.model.get_input_embeddings().weight.detach().float().cpu().numpy()
        return table, self.vocab[: table.shape[0]]


def _transformers_mlm(config_file: Path, weights: Path) -> nn.Module:
    """Any other masked LM, built by transformers' ``AutoModelForMaskedLM`` and loaded checked."""
    with HEAVY_IMPORTS:
        # heavy: transformers, under HEAVY_IMPORTS
        from transformers import AutoConfig, AutoModelForMaskedLM

    try:
        config = AutoConfig.from_pretrained(str(config_file.parent), local_files_only=True)
    except Exception as exc:  # transformers raises many types for a bad config
        raise EncoderLoadError(
            f"{config_file}: not a usable model config ({first_line(exc)})"
        ) from None
    try:
        with torch.device("meta"):
            skeleton = AutoModelForMaskedLM.from_config(config)
    except (ValueError, TypeError, KeyError) as exc:
        raise EncoderLoadError(
            f"{config_file}: no masked-LM head for it ({first_line(exc)})"
        ) from None
    check_header(skeleton, tensor_shapes(weights), weights, optional=("position_ids",))
    state = read_state_dict(weights)
    with no_init():  # every weight is loaded (or tied) below
        mlm = AutoModelForMaskedLM.from_config(config)
    load_checked(mlm, state, weights)
    return mlm


def mlm_head(mlm: nn.Module) -> tuple[Callable[[torch.Tensor], torch.Tensor], nn.Linear] | None:
    """``(transform, decoder)`` of a BERT- or DistilBERT-style MLM head, else ``None``.

    ``decoder(transform(h))`` is the model's own head on base-model states ``h``.
    """
    predictions = getattr(getattr(mlm, "cls", None), "predictions", None)
    if predictions is not None and isinstance(getattr(predictions, "decoder", None), nn.Linear):
        return predictions.transform, predictions.decoder
    parts = ("vocab_transform", "activation", "vocab_layer_norm", "vocab_projector")
    if all(hasattr(mlm, p) for p in parts) and isinstance(mlm.vocab_projector, nn.Linear):
        return (
            lambda h: mlm.vocab_layer_norm(mlm.activation(mlm.vocab_transform(h))),
            mlm.vocab_projector,
        )
    return None
