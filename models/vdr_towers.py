"""The towers of a published VDR checkpoint (github.com/jzhoubu/VDR, ``src/ir/encoder/``).

Each tower's forward pass, top to bottom (one row per unit; parameter names as in the
published state dict)::

``vdr`` text tower (both towers of vsearch/vdr-nq)::

    h      = BertModel(tokens).last_hidden_state            # [T, d], no pooler
    rows   = elu1p(ln(h) @ E[shift:].T)                     # E = tied word embeddings
    V(x)   = max over tokens of rows   (L2-normalised if the tower's ``norm``)

``vdr_crossmodal_text`` (the text tower of vsearch/vdr-cross-modal)::

    rows   = elu1p(ln(h) @ E[VALID_TOKEN_IDS].T)            # 27,623 dimensions
    V(x)   = l2norm(max over all max_len positions, [PAD] included, of rows)

    (the published code max-pools the logits, then applies elu1p; elu1p is monotonic,
    so elu1p-then-max gives the same vector and keeps per-token rows meaningful)

``vdr_crossmodal_image`` (a CLIP-style ViT without class token)::

    x      = conv1(pixels) → [g*g, width] + positional_embedding → ln_pre
    x      = resblocks (pre-LN: x + attn(ln_1 x); x + mlp(ln_2 x), QuickGELU)
    rows   = elu1p(ln_post(x) @ proj.T)                      # [g*g, 27623], one per patch
    V(x)   = l2norm(max over patches of rows)

``elu1p(z) = elu(z) + 1``. Which positions a text tower pools over, and the final L2
normalisation, are applied by the encoder (``models.vdr``); :meth:`TextTower.pooled` is
the same max computed on packed rows without the per-token matrix (``models.projection``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lexlens.models.imports import HEAVY_IMPORTS
from lexlens.models.projection import pack, segment_max_projection
from lexlens.models.vdr_config import VALID_TOKEN_IDS


def elu1p(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1``: ``x + 1`` for ``x >= 0``, else ``exp(x)`` (always positive)."""
    return F.elu(x) + 1.0


class TextTower(nn.Module):
    """``ln`` + ``bert_model``: the published ``VDREncoder`` / ``VDRTextEncoder``."""

    def __init__(self, kind: str, bert_config: Any, *, shift: int, normalize: bool) -> None:
        with HEAVY_IMPORTS:
            from transformers import BertModel  # heavy: transformers, under HEAVY_IMPORTS

        super().__init__()
        self.kind = kind
        self.bert_model = BertModel(bert_config, add_pooling_layer=False)
        self.ln = nn.LayerNorm(bert_config.hidden_size, eps=1e-5)
        self.shift = shift
        self.normalize = normalize

    def vocab_ids(self) -> list[int]:
        """bert-base-uncased id of each output dimension."""
        if self.kind == "vdr":
            return list(range(self.shift, self.bert_model.config.vocab_size))
        return list(VALID_TOKEN_IDS)

    def projection(self) -> torch.Tensor:
        """``[|V|, d]``: the rows of the tied word embeddings that are output dimensions."""
        word_embeddings = self.bert_model.embeddings.word_embeddings.weight
        if self.kind == "vdr":
            return word_embeddings[self.shift :]
        return word_embeddings[list(VALID_TOKEN_IDS)]

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``ln(BertModel(tokens))``: ``[B, T, d]``, every position."""
        hidden = self.bert_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=torch.zeros_like(input_ids),
        ).last_hidden_state
        return self.ln(hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Per-token lexical rows ``[B, T, |V|]`` (every position, padding included)."""
        return elu1p(self.hidden(input_ids, attention_mask) @ self.projection().T)

    def pooled(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, select: torch.Tensor
    ) -> torch.Tensor:
        """``[B, |V|]``: ``elu1p`` of the max over the ``select``-ed positions of the logits.

        Equals ``forward(...)`` max-pooled over those positions (``elu1p`` is monotonic),
        without the ``[B, T, |V|]`` tensor.
        """
        rows, lengths = pack(self.hidden(input_ids, attention_mask), select)
        return elu1p(segment_max_projection(rows, self.projection().contiguous(), lengths))


class QuickGELU(nn.Module):
    """CLIP's GELU approximation ``x · sigmoid(1.702 x)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Elementwise ``x · sigmoid(1.702 x)``."""
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    """Pre-LN transformer block of the CLIP ViT."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            OrderedDict(
                [
                    ("c_fc", nn.Linear(width, width * 4)),
                    ("gelu", QuickGELU()),
                    ("c_proj", nn.Linear(width * 4, width)),
                ]
            )
        )
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x + attn(ln_1 x)``, then ``+ mlp(ln_2 x)``: ``[B, n, width]`` in and out."""
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    """``transformer.resblocks.N``: the published module path."""

    def __init__(self, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.resblocks = nn.ModuleList(ResidualAttentionBlock(width, heads) for _ in range(layers))


class ImageTower(nn.Module):
    """The published ``VDRImageEncoder``: a ViT without class token, projected on 27,623 ids."""

    kind = "vdr_crossmodal_image"

    def __init__(
        self, resolution: int, patch_size: int, width: int, layers: int, heads: int
    ) -> None:
        super().__init__()
        self.resolution = resolution
        self.grid = resolution // patch_size
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        self.positional_embedding = nn.Parameter(torch.zeros(self.grid**2, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(torch.zeros(len(VALID_TOKEN_IDS), width))

    def vocab_ids(self) -> list[int]:
        """bert-base-uncased id of each output dimension (the 27,623 valid ids)."""
        return list(VALID_TOKEN_IDS)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """Per-patch lexical rows ``[B, g*g, 27623]``, patches in row-major order."""
        x = self.conv1(pixels)  # [B, width, g, g]
        x = x.flatten(2).transpose(1, 2)  # [B, g*g, width]
        x = self.ln_pre(x + self.positional_embedding)
        for block in self.transformer.resblocks:
            x = block(x)
        return elu1p(self.ln_post(x) @ self.proj.T)
