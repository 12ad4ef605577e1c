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

On disk (``save_pretrained``): ``config.json`` with ``"model_type": "d2s"``,
``dense_size`` and ``mlm_head``, and ``model.safetensors`` or ``pytorch_model.bin`` (older
code: ``model.pt``, a plain state dict) holding ``proj.{weight,bias}``,
``vocab_layer_norm.{weight,bias}`` and ``vocab_projector.{weight,bias}``. The sizes are
read from the file's header (hidden = 768 for the published heads); the config's
``dense_size``, when present, must agree with ``proj.weight``.

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
from lexlens.models.config_files import check_sizes, first_line, read_config
from lexlens.models.text_io import MAX_CHARS, load_bert_tokenizer
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB

#: Weight files of a D2S head directory, in the order they are looked for.
D2S_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.pt")
#: DistilBERT's MLM-head LayerNorm epsilon (``nn.LayerNorm(dim, eps=1e-12)``).
LAYER_NORM_EPS = 1e-12
#: The published heads: DistilBERT's MLM head (hidden 768) on 256-d BLIP/ALBEF features.
DEFAULT_HIDDEN = 768
DEFAULT_DENSE = 256
#: ``mlm_head`` values whose vocabulary is bert-base-uncased (the typo is from an early
#: default in lsr-multimodal, fixed in commit bc4a212).
UNCASED_HEADS = ("distilbert-base-uncased", "distilbert-based-uncased", "bert-base-uncased")


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


def is_d2s_config(config: dict) -> bool:
    """``config.json`` of a D2S head (``model_type`` "d2s" or a ``D2SModel`` architecture)."""
    architectures = config.get("architectures") or []
    return config.get("model_type") == "d2s" or (
        isinstance(architectures, list) and "D2SModel" in architectures
    )


def find_d2s_weights(directory: Path) -> Path | None:
    """The weight file of a D2S head directory (:data:`D2S_WEIGHT_FILES` order), or ``None``."""
    for name in D2S_WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def is_legacy_d2s_dir(directory: Path) -> bool:
    """A directory without config.json whose ``model.pt`` holds the D2S keys (pre-2024 code)."""
    weights = directory / "model.pt"
    if (directory / "config.json").exists() or not weights.is_file():
        return False
    try:
        shapes = tensor_shapes(weights)
    except EncoderLoadError:
        return False
    return {"proj.weight", "vocab_projector.weight"} <= set(_strip_prefix(shapes))


def _strip_prefix(state: dict) -> dict:
    """Drop a prefix every key shares (``module.`` from DataParallel, ``model.``)."""
    for prefix in ("module.", "model."):
        if state and all(k.startswith(prefix) for k in state):
            return {k[len(prefix) :]: v for k, v in state.items()}
    return state


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
        shapes = _strip_prefix(tensor_shapes(weights))
        dense, hidden, vocab_size = _sizes(config, shapes, config_file, weights)
        with torch.device("meta"):
            skeleton = D2SHead(dense, hidden, vocab_size)
        check_header(skeleton, shapes, weights)
        state = _strip_prefix(read_state_dict(weights))
        expected = skeleton.state_dict()
        state = {k: v.to(torch.float32) for k, v in state.items() if k in expected}
        head = skeleton  # every tensor comes from the file: nothing to initialise
        head.load_state_dict(state, strict=True, assign=True)
        notes: list[str] = []
        mlm_head = config.get("mlm_head")
        if isinstance(mlm_head, str) and mlm_head not in UNCASED_HEADS:
            notes.append(
                f"mlm_head is {mlm_head!r}: outputs are decoded with the bert-base-uncased "
                "vocabulary (30,522 WordPiece tokens), which its vocabulary size matches"
            )
        return cls(
            head,
            device=device,
            name=name or path.name,
            source=f"D2S head ({weights})",
            notes=tuple(notes),
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


def _sizes(
    config: dict, shapes: dict[str, tuple[int, ...]], config_file: Path, weights: Path
) -> tuple[int, int, int]:
    """``(dense_size, hidden, vocab)`` from the header, checked against config.json."""
    dense_cfg = config.get("dense_size")
    if dense_cfg is not None and (
        isinstance(dense_cfg, bool) or not isinstance(dense_cfg, int) or not 1 <= dense_cfg <= 65536
    ):
        raise EncoderLoadError(
            f"{config_file}: dense_size = {dense_cfg!r} is not a plausible size (a positive integer)"
        )
    proj = shapes.get("proj.weight")
    if proj is not None and len(proj) != 2:
        raise EncoderLoadError(f"{weights}: tensor 'proj.weight' has shape {proj}, expected 2-D")
    hidden = int(proj[0]) if proj else DEFAULT_HIDDEN
    dense = int(proj[1]) if proj else int(dense_cfg or DEFAULT_DENSE)
    if proj and dense_cfg is not None and dense != dense_cfg:
        raise EncoderLoadError(
            f"{weights}: tensor 'proj.weight' has shape {tuple(proj)}, but {config_file.name} "
            f"says dense_size = {dense_cfg}"
        )
    check_sizes({"hidden_size": hidden, "dim": dense}, weights, "proj.weight: ")
    projector = shapes.get("vocab_projector.weight")
    vocab_size = int(projector[0]) if projector and len(projector) == 2 else BERT_UNCASED_VOCAB
    if vocab_size != BERT_UNCASED_VOCAB:
        raise EncoderLoadError(
            f"{weights}: tensor 'vocab_projector.weight' has {vocab_size} rows; a D2S head "
            f"outputs the bert-base-uncased vocabulary ({BERT_UNCASED_VOCAB:,} tokens)"
        )
    return dense, hidden, vocab_size


def load_d2s(path: str | Path, *, device: str, name: str | None = None) -> D2SEncoder:
    """Load a D2S head directory (see the module docstring for the layout)."""
    try:
        return D2SEncoder.from_dir(path, device=device, name=name)
    except (RuntimeError, ValueError) as exc:  # load_state_dict on an unexpected tensor
        raise EncoderLoadError(f"{path}: not a loadable D2S head ({first_line(exc)})") from None
