"""Dense2Sparse (D2S) heads, as github.com/thongnt99/lsr-multimodal saves them.

D2S is the projection head of "Multimodal Learned Sparse Retrieval with Probabilistic
Expansion Control" (Nguyen, Hendriksen, Yates, de Rijke, ECIR 2024).

A D2S head turns a *frozen* dense vector ``z`` (a BLIP/ALBEF image or caption embedding,
256-d in the published models) into weights over the bert-base-uncased vocabulary. One
head serves both modalities. Forward pass, top to bottom (``model.py``, ``D2SModel``)::

    h = proj(z)                          # Linear(dense_size → hidden), with bias   [N, H]
    h = vocab_layer_norm(h)              # LayerNorm(hidden), eps 1e-12 (DistilBERT's)
    s = vocab_projector(h)               # Linear(hidden → 30,522), with bias        [N, |V|]
    s = log(1 + relu(s))                 # the SPLADE activation: sparse, non-negative

No GELU, no dropout, no normalisation of ``z`` inside the head. Output dimension ``i`` is
WordPiece id ``i`` (decoded with the packaged bert-base-uncased tokenizer, the same
vocabulary as the published distilbert-base-uncased). The lexical mask of ``model.py``
(outputs restricted to a caption's tokens) is a training device and is not applied here.

What the files on disk say (``config.json``, the weight file names, the sizes read from
the header) is in :mod:`lexlens.models.d2s_config`; this module is the head and its encoder.

Each dense vector is one *unit*: an encoding's ``unit_weights`` is its single row, and the
gate is top-k only (a vector has no bag of words).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from lexlens.models.base import (
    Capability,
    Encoder,
    EncoderLoadError,
    InputError,
    LexicalEncoding,
    check_texts,
)
from lexlens.models.checkpoint import check_header, read_state_dict, tensor_shapes
from lexlens.models.config_files import first_line, read_config
from lexlens.models.d2s_config import (
    D2S_WEIGHT_FILES,
    find_d2s_weights,
    head_sizes,
    strip_prefix,
    vocabulary_notes,
)
from lexlens.models.text_io import MAX_CHARS, load_bert_tokenizer
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB

#: DistilBERT's MLM-head LayerNorm epsilon (``nn.LayerNorm(dim, eps=1e-12)``).
LAYER_NORM_EPS = 1e-12


class D2SHead(nn.Module):
    """The three layers of a D2S head and its forward pass (module docstring)."""

    def __init__(self, dense_size: int, hidden: int, vocab_size: int = BERT_UNCASED_VOCAB) -> None:
        super().__init__()
        self.proj = nn.Linear(dense_size, hidden)
        self.vocab_layer_norm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.vocab_projector = nn.Linear(hidden, vocab_size)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Dense vectors ``[N, dense_size]`` → vocabulary weights ``[N, |V|]``."""
        h = self.vocab_layer_norm(self.proj(z))
        return torch.log1p(torch.relu(self.vocab_projector(h)))


class D2SEncoder(Encoder):
    """A D2S head over dense features: ``encode_features`` → one lexical encoding per row."""

    capabilities = frozenset({Capability.FEATURE_LEXICAL})
    batch_size = 256

    def __init__(
        self,
        head: D2SHead,
        *,
        device: str,
        name: str,
        source: str = "",
        notes: tuple[str, ...] = (),
    ) -> None:
        self.head = head.to(device).eval()
        for p in self.head.parameters():
            p.requires_grad_(False)
        self.device = device
        self.name = name
        self.source = source
        self.notes = tuple(notes)
        self.feature_dim = int(head.proj.in_features)
        self.tokenizer = load_bert_tokenizer()
        vocab_size = int(head.vocab_projector.out_features)
        tokens = self.tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
        self.vocab = [t if t is not None else f"[id{i}]" for i, t in enumerate(tokens)]
        self.max_length = 512

    # ----- loading

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str, name: str | None = None) -> D2SEncoder:
        """Load a D2S head directory, refusing a bad one before allocating.

        Sizes, keys and shapes are checked from the weight file's header, then NaN/Inf per
        tensor.
        """
        path = Path(path)
        config_file = path / "config.json"
        config = read_config(config_file) if config_file.exists() else {}
        weights = find_d2s_weights(path)
        if weights is None:
            raise EncoderLoadError(
                f"{path} has no weights file (expected one of: {', '.join(D2S_WEIGHT_FILES)})"
            )
        shapes = strip_prefix(tensor_shapes(weights))
        dense, hidden, vocab_size = head_sizes(config, shapes, config_file, weights)
        with torch.device("meta"):
            skeleton = D2SHead(dense, hidden, vocab_size)
        check_header(skeleton, shapes, weights)
        state = strip_prefix(read_state_dict(weights))
        expected = skeleton.state_dict()
        state = {k: v.to(torch.float32) for k, v in state.items() if k in expected}
        head = skeleton  # every tensor comes from the file: nothing to initialise
        head.load_state_dict(state, strict=True, assign=True)
        return cls(
            head,
            device=device,
            name=name or path.name,
            source=f"D2S head ({weights})",
            notes=vocabulary_notes(config),
        )

    # ----- encoding

    def _check(self, features: np.ndarray | torch.Tensor) -> np.ndarray:
        array = np.asarray(features)
        if array.dtype.kind not in "fiu":
            raise InputError(f"dense features must be numbers, not {array.dtype}")
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape[0] == 0:
            raise InputError(
                f"dense features must be an [N, d] array with N ≥ 1, got shape {array.shape}"
            )
        if array.shape[1] != self.feature_dim:
            raise InputError(
                f"the features are {array.shape[1]}-d but the D2S head {self.name!r} expects "
                f"{self.feature_dim}-d vectors (its dense_size)"
            )
        array = np.asarray(array, dtype=np.float32)
        if not np.isfinite(array).all():
            row = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
            raise InputError(f"feature vector {row} holds NaN or Inf values")
        return array

    @torch.inference_mode()
    def scores(self, features: np.ndarray) -> np.ndarray:
        """``s = log(1 + relu(W2 · LN(W1 z + b1) + b2))`` for every row: ``[N, |V|]`` float32."""
        array = self._check(features)
        out = np.empty((array.shape[0], len(self.vocab)), dtype=np.float32)
        for lo in range(0, array.shape[0], self.batch_size):
            z = torch.from_numpy(np.ascontiguousarray(array[lo : lo + self.batch_size]))
            out[lo : lo + len(z)] = self.head(z.to(self.device)).float().cpu().numpy()
        return out

    def encode_features(
        self, features: np.ndarray, *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """One :class:`LexicalEncoding` per feature vector (one unit: the vector itself)."""
        rows = self.scores(features)
        return [
            LexicalEncoding(
                weights=row,
                unit_weights=row[None, :] if keep_units else None,
                units=["vector"],
                notes=self.notes,
            )
            for row in rows
        ]

    def tokenize_texts(self, texts: list[str]) -> list[LexicalEncoding]:
        """Texts' own WordPiece tokens as encodings with zero weights: their bag of words.

        The head has no text tower; this is what a bag-of-words query and a caption's
        tokens (Exact@k, Semantic@k) need. ``truncated`` marks texts over 512 tokens.
        """
        check_texts(texts)
        out = []
        zeros = np.zeros(len(self.vocab), dtype=np.float32)
        zeros.setflags(write=False)
        for text in texts:
            ids = self.tokenizer(text[:MAX_CHARS], truncation=False)["input_ids"]
            cut = len(ids) > self.max_length or len(text) > MAX_CHARS
            ids = ids[: self.max_length - 1] + [ids[-1]] if len(ids) > self.max_length else ids
            out.append(
                LexicalEncoding(
                    weights=zeros,
                    unit_weights=None,
                    units=self.tokenizer.convert_ids_to_tokens(ids),
                    input_ids=list(ids),
                    truncated=cut,
                )
            )
        return out

    def static_embeddings(self) -> tuple[np.ndarray, list[str]]:
        """The rows of ``vocab_projector.weight`` ``[|V|, hidden]``: D2S's token vectors.

        A D2S head has no input word-embedding table. Its output projection was initialised
        from DistilBERT's MLM projector, which DistilBERT ties to its word embeddings, and
        then fine-tuned: each row is a context-free vector of one vocabulary token, in the
        space the head scores in. Semantic@k uses these cosines unless a GloVe file is
        given (``--glove``).
        """
        table = self.head.vocab_projector.weight.detach().float().cpu().numpy()
        return table, self.vocab[: table.shape[0]]


def load_d2s(path: str | Path, *, device: str, name: str | None = None) -> D2SEncoder:
    """Load a D2S head directory (see the module docstring for the layout)."""
    try:
        return D2SEncoder.from_dir(path, device=device, name=name)
    except (RuntimeError, ValueError) as exc:  # load_state_dict on an unexpected tensor
        raise EncoderLoadError(f"{path}: not a loadable D2S head ({first_line(exc)})") from None
