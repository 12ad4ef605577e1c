"""Published VDR checkpoints: what ``config.json`` says about each tower.

A checkpoint directory holds ``config.json`` and ``model.safetensors`` or
``pytorch_model.bin``: the state dict of a bi-encoder whose towers live under the prefixes
``encoder_q.`` (queries) and ``encoder_p.`` (documents / images). Each tower's dict in
``config.json`` names its ``type`` and may carry BERT fields (``hidden_size``, …) or image
fields (``resolution``, ``patch_size``, ``width``, ``layers``, ``heads``); absent ones are
bert-base-uncased and ViT-B/32 at 224 px.

Texts are cut at the tower's own ``max_len`` (default 256; a shared encoder uses the longer
of the two); the top-level ``max_len`` is not read by the published towers. ``dpr`` towers
are dense ([CLS] vectors), not lexical: Lexlens cannot read them.

This module only reads configuration (as Hugging Face's ``configuration_*`` modules never
import ``modeling_*``): the towers are in :mod:`lexlens.models.vdr_towers`, and building
and loading them in :mod:`lexlens.models.vdr_load`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.models.base import EncoderLoadError
from lexlens.models.config_files import check_sizes
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB

TEXT_TYPES = ("vdr", "vdr_crossmodal_text")
IMAGE_TYPES = ("vdr_crossmodal_image",)
DENSE_TYPES = ("dpr",)
KNOWN_TYPES = TEXT_TYPES + IMAGE_TYPES + DENSE_TYPES
SIDES = {"query": "encoder_q", "document": "encoder_p"}

#: Default of ``shift_vocab_num`` in the published ``VDREncoderConfig`` (drops ids 0..998:
#: [PAD], [unused*], [UNK], [CLS], [SEP], [MASK]); a tower dict may set another value (1000).
DEFAULT_SHIFT = 999
#: Default ``max_len`` of the published text encoder configs (the top-level ``max_len`` of
#: config.json is not read by the published towers).
DEFAULT_MAX_LEN = 256

# The 27,623 output dimensions of the cross-modal model: every bert-base-uncased id except
# 0-998 ([PAD], [unused*], [UNK], [CLS], [SEP], [MASK]), 1067-1995 (single non-ASCII
# characters), 29644-30521 (the ## forms of single characters) and 93 further ids.
_EXCLUDED_RANGES = ((0, 998), (1067, 1995), (29644, 30521))
_EXCLUDED_IDS = frozenset(
    (
        3186,
        6362,
        7030,
        7737,
        8157,
        8229,
        10260,
        10325,
        10701,
        11622,
        11722,
        11871,
        12744,
        13714,
        14150,
        14157,
        14241,
        14498,
        14534,
        14608,
        15290,
        15297,
        15394,
        15414,
        15915,
        16177,
        16198,
        16415,
        16856,
        17004,
        17110,
        17149,
        17432,
        17499,
        17814,
        18107,
        18199,
        18511,
        18728,
        18818,
        18947,
        19109,
        19110,
        19259,
        19310,
        19433,
        19579,
        19704,
        19865,
        20190,
        21853,
        21932,
        22192,
        22543,
        22646,
        22919,
        22972,
        23305,
        23432,
        23483,
        23673,
        23742,
        23925,
        24102,
        24824,
        24830,
        24833,
        24967,
        25160,
        25529,
        25573,
        25799,
        26133,
        26306,
        26444,
        26789,
        26812,
        27392,
        27432,
        27688,
        27708,
        27807,
        27813,
        27904,
        27944,
        28182,
        28598,
        28995,
        29113,
        29128,
        29155,
        29275,
        29436,
    )
)
VALID_TOKEN_IDS: tuple[int, ...] = tuple(
    i
    for i in range(BERT_UNCASED_VOCAB)
    if i not in _EXCLUDED_IDS and not any(lo <= i <= hi for lo, hi in _EXCLUDED_RANGES)
)
assert len(_EXCLUDED_IDS) == 93 and len(VALID_TOKEN_IDS) == 27623

#: ``BertConfig`` fields a tower dict may carry (absent ones: bert-base-uncased).
BERT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "pad_token_id",
    "position_embedding_type",
)
#: Image fields and their ViT-B/32 @ 224 px defaults (``VDRImageEncoderConfig``).
VIT_DEFAULTS = {"resolution": 224, "patch_size": 32, "width": 768, "layers": 12, "heads": 12}


@dataclass
class TowerSpec:
    """What config.json says about one tower."""

    prefix: str  # "encoder_q" or "encoder_p"
    kind: str
    fields: dict[str, Any]
    max_len: int = DEFAULT_MAX_LEN
    topk: int | None = None

    @property
    def norm(self) -> bool:
        """The tower dict's ``norm`` (``VDREncoderConfig.norm``, default False)."""
        return bool(self.fields.get("norm", False))


def tower_specs(config: dict, config_file: Path) -> tuple[dict[str, TowerSpec], bool]:
    """Parse ``encoder_q`` / ``encoder_p`` of config.json; returns specs by side."""
    shared = bool(config.get("shared_encoder", False))
    specs: dict[str, TowerSpec] = {}
    for side, key in SIDES.items():
        entry = config.get(key)
        if entry is None and shared and side == "document":
            continue
        if not isinstance(entry, dict):
            raise EncoderLoadError(f"{config_file}: '{key}' must be an object with a 'type'")
        kind = entry.get("type")
        if kind not in KNOWN_TYPES:
            raise EncoderLoadError(
                f"{config_file}: {key}.type is {kind!r}, not a VDR encoder type "
                f"({', '.join(KNOWN_TYPES)})"
            )
        max_len = entry.get("max_len", DEFAULT_MAX_LEN)
        if isinstance(max_len, bool) or not isinstance(max_len, int) or not 2 <= max_len <= 8192:
            raise EncoderLoadError(f"{config_file}: {key}.max_len must be an integer in 2..8192")
        check_sizes(entry, config_file, f"{key}.")
        topk = entry.get("topk")
        specs[side] = TowerSpec(key, kind, entry, max_len, topk if isinstance(topk, int) else None)
    if shared:
        # Published BiEncoder: encoder_p *is* encoder_q, with the longer of the two max_len.
        query = specs["query"]
        if "document" in specs:
            query.max_len = max(query.max_len, specs["document"].max_len)
        specs["document"] = query
    return specs, shared
