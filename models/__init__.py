"""Encoders: one contract (``lexlens.models.base``), one file per family, a registry."""

from lexlens.models.base import (
    Capability,
    DenseEncoder,
    DifferentiableEncoder,
    Encoder,
    EncoderCard,
    EncoderLoadError,
    FeatureLexicalEncoder,
    InputError,
    LexicalEncoder,
    LexicalEncoding,
    LexlensError,
    ModalityError,
    Needs,
    QuantisedEncoder,
    pick_device,
    pool_units,
)
from lexlens.models.registry import available_encoders, encoder_card, load_encoder

__all__ = [
    "Capability",
    "DenseEncoder",
    "DifferentiableEncoder",
    "Encoder",
    "EncoderCard",
    "EncoderLoadError",
    "FeatureLexicalEncoder",
    "InputError",
    "LexicalEncoder",
    "LexicalEncoding",
    "LexlensError",
    "ModalityError",
    "Needs",
    "QuantisedEncoder",
    "available_encoders",
    "encoder_card",
    "load_encoder",
    "pick_device",
    "pool_units",
]
