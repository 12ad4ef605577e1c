"""Reading checkpoints safely: errors name the file, the key and both shapes.

The order of checks keeps a bad checkpoint cheap to refuse:

1. ``read_config`` (:mod:`lexlens.models.config_files`, no torch): config.json readable
   (permissions) and a JSON object;
2. ``check_sizes`` (the same module): no absurd size in the config (a hidden size of a
   million would allocate terabytes);
3. ``tensor_shapes``: the weight file's header only (no tensor data read) against the
   shapes a meta-device build of the config implies (no memory allocated);
4. ``read_state_dict``: the tensors, refusing NaN or Inf;
5. then the model is built for real and loaded.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lexlens.models.base import EncoderLoadError
from lexlens.models.config_files import first_line


def _load_error(path: Path, exc: Exception) -> EncoderLoadError:
    if "Weights only load failed" in str(exc):
        return EncoderLoadError(
            f"{path}: refused: the pickle holds Python objects, not only tensors "
            "(Lexlens never unpickles arbitrary code)"
        )
    if isinstance(exc, PermissionError) or (isinstance(exc, OSError) and exc.strerror):
        return EncoderLoadError(f"{path}: cannot read it ({exc.strerror or exc})")
    return EncoderLoadError(f"{path}: not a readable state dict ({first_line(exc)})")


def _torch_load(path: Path) -> Any:
    """``torch.load`` of tensors only, memory-mapped when the file format allows it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as exc:
        if "mmap" not in str(exc):
            raise
    return torch.load(path, map_location="cpu", weights_only=True)  # legacy (non-zip) format


def _state_of(obj: Any, path: Path) -> dict[str, Any]:
    """The flat state dict in a loaded object (unwrapping ``{"state_dict": …}``)."""
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not obj:
        raise EncoderLoadError(f"{path}: holds a {type(obj).__name__}, not a state dict of tensors")
    bad = [k for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise EncoderLoadError(f"{path}: entry {bad[0]!r} is not a tensor: not a state dict")
    return obj


def tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape, from the file's header (no tensor data is read).

    safetensors: the JSON header via ``safe_open(...).get_slice(k).get_shape()``; a PyTorch
    ``.bin``: ``torch.load(mmap=True, weights_only=True)``, which maps the data lazily.
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open  # heavy: safetensors loads on first use

            with safe_open(str(path), framework="pt") as fh:
                shapes = {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}  # noqa: SIM118
            if not shapes:
                raise EncoderLoadError(f"{path}: holds no tensors")
        else:
            state = _state_of(_torch_load(path), path)
            shapes = {k: tuple(v.shape) for k, v in state.items()}
    except EncoderLoadError:
        raise
    except Exception as exc:  # corrupt file, refused pickle, truncated archive, permissions …
        raise _load_error(path, exc) from None
    return {modern_name(k): v for k, v in shapes.items()}


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A flat ``{name: tensor}`` from safetensors or a plain PyTorch state dict.

    ``.bin`` files load with ``weights_only=True``: a pickle of arbitrary objects is
    refused rather than executed. A tensor holding NaN or Inf is refused, naming it.
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file  # heavy: safetensors loads on first use

            state = load_file(str(path), device="cpu")
        else:
            state = _torch_load(path)
    except Exception as exc:
        raise _load_error(path, exc) from None
    state = {modern_name(k): v for k, v in _state_of(state, path).items()}
    check_finite(state.items(), path)
    return state


def check_finite(named: Any, source: Path) -> None:
    """Refuse the first floating tensor of ``(name, tensor)`` pairs holding NaN or Inf."""
    for key, tensor in named:
        floating = tensor.is_floating_point() or tensor.is_complex()
        if floating and tensor.numel() and not bool(torch.isfinite(tensor).all()):
            raise EncoderLoadError(
                f"{source}: tensor {key!r} holds NaN or Inf values: the weights are corrupt"
            )


def modern_name(key: str) -> str:
    """TF-era checkpoints call LayerNorm parameters gamma/beta; PyTorch says weight/bias."""
    if "LayerNorm." in key or key.startswith("LayerNorm"):
        if key.endswith(".gamma"):
            return key[: -len("gamma")] + "weight"
        if key.endswith(".beta"):
            return key[: -len("beta")] + "bias"
    return key


def no_init() -> contextlib.AbstractContextManager:
    """transformers' context that skips random initialisation (loading fills every weight).

    It lives in ``transformers.initialization`` from 5.0, in ``modeling_utils`` before.
    """
    where = (
        "transformers.initialization"
        if importlib.util.find_spec("transformers.initialization")
        else "transformers.modeling_utils"
    )
    return importlib.import_module(where).no_init_weights()


def shared_groups(module: nn.Module) -> dict[str, set[str]]:
    """For each state-dict key, every key naming the same tensor (tied weights)."""
    by_id: dict[int, set[str]] = {}
    named = list(module.named_parameters(remove_duplicate=False))
    named += list(module.named_buffers(remove_duplicate=False))
    for name, tensor in named:
        by_id.setdefault(id(tensor), set()).add(name)
    return {name: group for group in by_id.values() for name in group}


def check_header(
    module: nn.Module,
    shapes: dict[str, tuple[int, ...]],
    source: Path,
    *,
    optional: tuple[str, ...] = (),
) -> None:
    """Compare a (meta-device) module's tensors with a file header, before any allocation.

    A key in both with different shapes, or a key the module needs that the file lacks
    (unless a tied key is present, or it ends with one of ``optional``), is refused.
    """
    expected = module.state_dict()
    for key, tensor in expected.items():
        if key in shapes and tuple(shapes[key]) != tuple(tensor.shape):
            raise EncoderLoadError(
                f"{source}: tensor {key!r} has shape {tuple(shapes[key])}, "
                f"the config expects {tuple(tensor.shape)}"
            )
    groups = shared_groups(module)
    missing = [
        k
        for k in expected
        if k not in shapes
        and not k.endswith(optional)
        and not any(alias in shapes for alias in groups.get(k, ()))
    ]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise EncoderLoadError(f"{source}: missing tensor {missing[0]!r}{more}")


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
