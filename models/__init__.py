"""Encoders: one contract (``models.base``), one file per family, a registry."""

from models.base import (
    Encoder,
    EncoderLoadError,
    InputError,
    LexicalEncoding,
    LexlensError,
    ModalityError,
    pick_device,
    pool_units,
)
from models.registry import available_encoders, load_encoder

__all__ = [
    "Encoder",
    "EncoderLoadError",
    "InputError",
    "LexicalEncoding",
    "LexlensError",
    "ModalityError",
    "available_encoders",
    "load_encoder",
    "pick_device",
    "pool_units",
]
