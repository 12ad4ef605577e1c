"""SPLADE: a masked-LM head read as vocabulary weights.

Forward pass, top to bottom::

    logits = BertForMaskedLM(tokens)             # [B, T, |V|]
    rows   = log(1 + relu(logits)) * mask         # per-token lexical rows, padding zeroed
    V(x)   = max over tokens of rows              # [B, |V|]

Any local ``BertForMaskedLM``-style directory (config + weights + tokenizer) loads this
way, including naver/splade-* checkpoints a user has on disk.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from lexlens.models.base import Capability, Encoder, EncoderLoadError, LexicalEncoding, check_texts
from lexlens.models.checkpoint import (
    check_header,
    check_sizes,
    find_weights,
    first_line,
    load_checked,
    no_init,
    read_config,
    read_state_dict,
    tensor_shapes,
)
from lexlens.models.text_io import load_bert_tokenizer, tokenize_batch


class SpladeEncoder(Encoder):
    """A SPLADE text encoder (one tower serves queries and documents)."""

    capabilities = frozenset({Capability.TEXT_LEXICAL})

    def __init__(self, mlm, tokenizer, *, device: str, name: str, source: str = "") -> None:
        self.model = mlm.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.name = name
        self.source = source
        self.max_length = min(int(mlm.config.max_position_embeddings), 512)
        vocab_size = int(mlm.config.vocab_size)
        vocab = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
        self.vocab = [t if t is not None else f"[id{i}]" for i, t in enumerate(vocab)]
        self.batch_size = 32

    @classmethod
    def from_dir(cls, path: Path, *, device: str, name: str) -> SpladeEncoder:
        """Load a masked-LM directory (safetensors or a plain PyTorch state dict).

        Checked before the model is allocated: config.json readable with plausible sizes,
        and the weight file's tensor shapes (its header) against a meta-device build of
        the config; then the tensors are read (NaN/Inf refused) and loaded.
        """
        from transformers import AutoConfig, AutoModelForMaskedLM

        path = Path(path)
        config_file = path / "config.json"
        check_sizes(read_config(config_file), config_file)
        weights = find_weights(path)
        try:
            config = AutoConfig.from_pretrained(str(path), local_files_only=True)
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
        tokenizer = load_bert_tokenizer(path)
        return cls(mlm, tokenizer, device=device, name=name, source=str(path))

    @torch.inference_mode()
    def encode_texts(
        self, texts: list[str], side: str = "query", *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        check_texts(texts)
        out: list[LexicalEncoding] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            batch = tokenize_batch(self.tokenizer, chunk, self.max_length)
            ids = batch.input_ids.to(self.device)
            mask = batch.attention_mask.to(self.device)
            logits = self.model(input_ids=ids, attention_mask=mask).logits
            rows = torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1)
            pooled = rows.amax(dim=1)
            for b in range(len(chunk)):
                n = int(mask[b].sum())
                token_ids = ids[b, :n].tolist()
                out.append(
                    LexicalEncoding(
                        weights=pooled[b].float().cpu().numpy(),
                        unit_weights=rows[b, :n].float().cpu().numpy() if keep_units else None,
                        units=self.tokenizer.convert_ids_to_tokens(token_ids),
                        input_ids=token_ids,
                        truncated=batch.truncated[b],
                    )
                )
        return out

    def static_embeddings(self) -> tuple[np.ndarray, list[str]]:
        table = self.model.get_input_embeddings().weight.detach().float().cpu().numpy()
        return table, self.vocab[: table.shape[0]]
