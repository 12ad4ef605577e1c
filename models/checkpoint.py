"""Reading weight files safely and loading them with errors that name file, key and shapes."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from lexlens.models.base import EncoderLoadError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def find_weights(directory: Path) -> Path:
    """The weights file of a checkpoint directory (safetensors preferred)."""
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    raise EncoderLoadError(
        f"{directory} has no weights file (expected one of: {', '.join(WEIGHT_FILES)})"
    )


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A flat ``{name: tensor}`` from safetensors or a plain PyTorch state dict.

    ``.bin`` files load with ``weights_only=True``: a pickle of arbitrary objects is
    refused rather than executed.
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path), device="cpu")
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, refused pickle, truncated archive …
        if "Weights only load failed" in str(exc):
            raise EncoderLoadError(
                f"{path}: refused: the pickle holds Python objects, not only tensors "
                "(Lexlens never unpickles arbitrary code)"
            ) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EncoderLoadError(f"{path}: not a readable state dict ({first[:160]})") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not state:
        raise EncoderLoadError(
            f"{path}: holds a {type(state).__name__}, not a state dict of tensors"
        )
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise EncoderLoadError(f"{path}: entry {bad[0]!r} is not a tensor: not a state dict")
    return {_modern_name(k): v for k, v in state.items()}


def _modern_name(key: str) -> str:
    """TF-era checkpoints call LayerNorm parameters gamma/beta; PyTorch says weight/bias."""
    if "LayerNorm." in key or key.startswith("LayerNorm"):
        if key.endswith(".gamma"):
            return key[: -len("gamma")] + "weight"
        if key.endswith(".beta"):
            return key[: -len("beta")] + "bias"
    return key


def load_checked(module: nn.Module, state: dict[str, torch.Tensor], source: Path) -> None:
    """Load ``state`` into ``module``; a missing key or wrong shape raises, naming both.

    Keys missing from ``state`` are accepted only when weight tying fills them (e.g. an
    MLM decoder tied to the input embeddings). Extra keys (a pooler, say) are ignored.
    """
    expected = module.state_dict()
    for key, tensor in state.items():
        if key in expected and tuple(expected[key].shape) != tuple(tensor.shape):
            raise EncoderLoadError(
                f"{source}: tensor {key!r} has shape {tuple(tensor.shape)}, "
                f"the config expects {tuple(expected[key].shape)}"
            )
    result = module.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)
    if hasattr(module, "tie_weights"):
        module.tie_weights()
    loaded = {p.data_ptr() for k, p in module.state_dict().items() if k in state}
    missing = [
        k
        for k in result.missing_keys
        if module.state_dict()[k].data_ptr() not in loaded and not k.endswith("position_ids")
    ]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise EncoderLoadError(f"{source}: missing tensor {missing[0]!r}{more}")
