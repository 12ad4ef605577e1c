"""Published VDR checkpoints (github.com/jzhoubu/VDR, vsearch/* on the Hugging Face hub).

VDR is the model of "Retrieval-based Disentangled Representation Learning with Natural
Language Supervision" (Zhou et al., ICLR 2024).

One bi-encoder checkpoint loads as one :class:`VDREncoder`: query and document text towers
(``vdr``), or a text tower and an image tower (``vdr_crossmodal_*``). The files:

- ``models.vdr_config``: what ``config.json`` says;
- ``models.vdr_towers``: each tower's forward pass, top to bottom;
- ``models.vdr_load``: strict, header-first building and loading of the towers;
- ``models.vdr_preprocess``: the published image preprocessing (centre view);
- this module: the adapter to the Lexlens encoder contract (which positions are pooled,
  normalisation, units, notes).

``V(x)`` is the ungated vector: the published ``embed`` keeps the top-k (``topk``, 768)
dimensions for retrieval; that gate belongs to the analysis layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from lexlens.models.base import (
    Capability,
    Encoder,
    EncoderLoadError,
    InputError,
    LexicalEncoding,
    ModalityError,
    check_texts,
)
from lexlens.models.text_io import load_bert_tokenizer, tokenize_batch
from lexlens.models.vdr_config import DEFAULT_MAX_LEN, SIDES, TowerSpec
from lexlens.models.vdr_load import LoadedTowers, load_towers
from lexlens.models.vdr_preprocess import pixels
from lexlens.models.vdr_towers import TextTower

if TYPE_CHECKING:
    from PIL import Image


def load_vdr_checkpoint(path: Path, config: dict, *, device: str) -> Encoder:
    """Load a published VDR checkpoint directory as one :class:`VDREncoder`."""
    path = Path(path)
    towers, specs = load_towers(path, config, device=device)
    return VDREncoder(towers, specs, device=device, name=path.name, source=str(path))


# --- the encoder ------------------------------------------------------------------------


class VDREncoder(Encoder):
    """A VDR bi-encoder: query and document text towers, or a text + image pair."""

    def __init__(
        self,
        towers: LoadedTowers,
        specs: dict[str, TowerSpec],
        *,
        device: str,
        name: str,
        source: str,
    ) -> None:
        self.towers = towers
        self.specs = specs
        self.device = device
        self.name = name
        self.source = source
        self.batch_size = 32
        self.image_batch_size = 16
        modules: list[torch.nn.Module] = [*towers.text.values()] + (
            [towers.image] if towers.image else []
        )
        vocab_ids = [m.vocab_ids() for m in modules]  # type: ignore[operator]
        if any(ids != vocab_ids[0] for ids in vocab_ids):
            raise EncoderLoadError(
                f"{source}: the two towers output different vocabularies (e.g. different "
                "shift_vocab_num): they cannot be compared as one encoder"
            )
        #: bert-base-uncased id of each output dimension (``vocab[i]`` is its token).
        self.vocab_ids: list[int] = vocab_ids[0]
        self.tokenizer = load_bert_tokenizer()
        self.vocab = self.tokenizer.convert_ids_to_tokens(self.vocab_ids)
        self.capabilities = frozenset(
            ([Capability.TEXT_LEXICAL] if towers.text else [])
            + ([Capability.IMAGE_LEXICAL] if towers.image else [])
        )
        self.max_length = max(
            [self._text_max_len(side) for side in towers.text] or [DEFAULT_MAX_LEN]
        )
        #: The published retrieval gate (top-k dimensions kept), per side, for reference.
        self.topk = {side: spec.topk for side, spec in specs.items()}
        query = specs.get("query")
        #: Whether VDR^α's nonparametric query ``bow(q)`` is L2-normalised: exactly when
        #: the published code normalises it. A ``vdr`` tower builds it with
        #: ``build_bow_mask(ids, vocab_size, shift_num=config.shift_vocab_num,
        #: norm=config.norm)`` (``src/ir/encoder/vdr.py``, ``VDREncoder.__init__``;
        #: ``src/ir/utils/sparsify_utils.py::build_bow_mask`` normalises after dropping the
        #: first ``shift`` ids), so it follows the tower's ``norm``. The cross-modal text
        #: tower calls ``build_bow_mask(input_ids, vocab_size=30522)`` with the default
        #: ``norm=False`` and then keeps ``VALID_TOKEN_IDS``
        #: (``src/ir/encoder/vdr_crossmodal_text.py::VDRTextEncoder.build_bow_mask``):
        #: binary whatever its config says (its *parametric* vector is L2-normalised).
        self.bow_normalize = bool(query is not None and query.kind == "vdr" and query.norm)

    def _text_max_len(self, side: str) -> int:
        tower = self.towers.text[side]
        return min(self.specs[side].max_len, int(tower.bert_model.config.max_position_embeddings))

    def _text_tower(self, side: str) -> TextTower:
        if side not in SIDES:
            raise InputError(f"side must be 'query' or 'document', not {side!r}")
        if side in self.towers.text:
            return self.towers.text[side]
        if side in self.towers.dense_sides:
            raise ModalityError(
                f"the {side} tower of {self.name!r} is a dense DPR tower: it has no vocabulary "
                "weights for Lexlens to show"
            )
        raise ModalityError(
            f"the {side} tower of {self.name!r} encodes images, not text: use it on images"
        )

    @torch.inference_mode()
    def encode_texts(
        self, texts: list[str], side: str = "query", *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode with the query (``encoder_q``) or document (``encoder_p``) text tower.

        With ``keep_units=False`` the max is taken on packed logits before ``elu1p``
        (:meth:`TextTower.pooled`): the same vector without the ``[B, T, |V|]`` rows.
        """
        tower = self._text_tower(side)
        check_texts(texts)
        max_len = self._text_max_len(side)
        # The published cross-modal text tower pads every text to max_len and max-pools
        # over all positions, [PAD] included; the vdr tower's single-text forward has no
        # padding, so padding rows are left out there.
        pad_to_max = tower.kind == "vdr_crossmodal_text"
        normalization = "l2" if tower.normalize else "none"
        pad_id = int(self.tokenizer.pad_token_id or 0)
        out: list[LexicalEncoding] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            batch = tokenize_batch(self.tokenizer, chunk, max_len)
            ids, mask = batch.input_ids, batch.attention_mask
            if pad_to_max and ids.shape[1] < max_len:
                extra = max_len - ids.shape[1]
                ids = F.pad(ids, (0, extra), value=pad_id)
                mask = F.pad(mask, (0, extra), value=0)
            ids_d, mask_d = ids.to(self.device), mask.to(self.device)
            if keep_units:
                rows = tower(ids_d, mask_d).float()  # [B, T, |V|]
            else:
                pooled_positions = (
                    torch.ones_like(mask_d, dtype=torch.bool) if pad_to_max else mask_d.bool()
                )
                pooled = tower.pooled(ids_d, mask_d, pooled_positions).float()  # [B, |V|]
            for b in range(len(chunk)):
                n = int(mask[b].sum())
                token_ids = ids[b, :n].tolist()
                units = self.tokenizer.convert_ids_to_tokens(token_ids)
                unit_rows = rows[b, :n] if keep_units else None
                notes: tuple[str, ...] = ()
                if pad_to_max and n < max_len:
                    # All padding positions as one unit: their elementwise max.
                    if unit_rows is not None:
                        unit_rows = torch.cat([unit_rows, rows[b, n:].amax(dim=0, keepdim=True)])
                    units = [*units, "[PAD]"]
                    token_ids = [*token_ids, pad_id]
                    notes = (
                        f"{max_len - n} padding positions take part in the max pool (as in "
                        "the published cross-modal text tower); they are the unit '[PAD]'",
                    )
                out.append(
                    self._encoding(
                        unit_rows if unit_rows is not None else pooled[b : b + 1],
                        keep_units,
                        units=units,
                        normalization=normalization,
                        input_ids=token_ids,
                        truncated=batch.truncated[b],
                        notes=notes,
                    )
                )
        return out

    @torch.inference_mode()
    def encode_images(
        self, images: list[Image.Image], *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode with the image tower: shorter side to ``resolution``, centre crop, ViT."""
        from lexlens.models.images import image_notes  # heavy: loads PIL

        tower = self.towers.image
        if tower is None:
            raise ModalityError(f"encoder {self.name!r} has no image tower (text-only checkpoint)")
        if isinstance(images, (str, bytes)) or not hasattr(images, "__len__"):
            raise InputError("pass a list of PIL images")
        if len(images) == 0:
            raise InputError("no images given")
        g = tower.grid
        units = [f"r{r}c{c}" for r in range(g) for c in range(g)]
        out: list[LexicalEncoding] = []
        for start in range(0, len(images), self.image_batch_size):
            chunk = images[start : start + self.image_batch_size]
            views = [pixels(image, tower.resolution) for image in chunk]
            boxes = [box for _, box in views]
            batch = torch.stack([x for x, _ in views]).to(self.device)
            rows = tower(batch).float()  # [B, g*g, 27623]
            for b, image in enumerate(chunk):
                notes = image_notes(image)
                if boxes[b] != (0.0, 0.0, 1.0, 1.0):
                    notes = (*notes, "the VDR ViT sees only the centre square of the image")
                out.append(
                    self._encoding(
                        rows[b],
                        keep_units,
                        units=units,
                        normalization="l2",
                        grid=(g, g),
                        crop_box=boxes[b],
                        notes=notes,
                    )
                )
        return out

    @staticmethod
    def _encoding(
        rows: torch.Tensor, keep_units: bool, *, normalization: str, **kwargs: Any
    ) -> LexicalEncoding:
        pooled = rows.amax(dim=0)
        if normalization == "l2":
            pooled = F.normalize(pooled, dim=0)
        return LexicalEncoding(
            weights=pooled.cpu().numpy().astype(np.float32, copy=False),
            unit_weights=rows.cpu().numpy().astype(np.float32, copy=False) if keep_units else None,
            normalization=normalization,
            **kwargs,
        )
