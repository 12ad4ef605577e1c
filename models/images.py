"""Image input for every image encoder: open, check, orient, convert, preprocess.

Pillow and torch only (torchvision is not a dependency). Every failure a user can cause
(missing file, not an image, truncated data, an image too large to decode safely, an
unsupported mode) raises :class:`~models.base.InputError` with one line naming the input.

Pipeline of :func:`load_image`:

1. read the bytes (a path, raw bytes or a binary file object);
2. ``Image.open`` reads only the header: the pixel count is checked against
   :data:`MAX_PIXELS` *before* any pixel is decoded (a decompression bomb never allocates);
3. decode fully (a truncated file is an error, never silently half-loaded);
4. animated images keep their first frame (a note says so);
5. EXIF orientation is applied (``ImageOps.exif_transpose``);
6. :func:`to_rgb` converts any mode to 8-bit RGB (transparency composited on white).

Notes for the user (first frame kept, 16-bit rescaled, ...) travel in
``image.info["lexlens_notes"]`` (a tuple of strings); encoders copy them into
``LexicalEncoding.notes``.
"""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from lexlens.models.base import InputError

if TYPE_CHECKING:
    import torch

#: Largest image (width × height) Lexlens decodes: 80 MP, about a 10,000 × 8,000 photo.
#: Checked from the header, before decoding, so a decompression bomb costs nothing.
MAX_PIXELS = 80_000_000
#: Largest file read (bytes).
MAX_FILE_BYTES = 200 * 1024 * 1024
#: Key of the notes tuple in ``PIL.Image.Image.info``.
NOTES_KEY = "lexlens_notes"

ImageSource = str | Path | bytes | bytearray | BinaryIO


def image_notes(image: Image.Image) -> tuple[str, ...]:
    """Notes :func:`load_image` attached to ``image`` (empty for other images)."""
    notes = image.info.get(NOTES_KEY, ())
    return tuple(notes) if isinstance(notes, (tuple, list)) else ()


def _with_notes(image: Image.Image, notes: list[str]) -> Image.Image:
    image.info[NOTES_KEY] = tuple(dict.fromkeys(list(image_notes(image)) + notes))
    return image


def _read_bytes(source: ImageSource, name: str) -> tuple[bytes, str]:
    """The raw bytes of ``source`` and a display name for messages."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        label = name or "uploaded image"
    elif isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        label = name or str(path)
        if not path.exists():
            raise InputError(f"{label}: file not found")
        if path.is_dir():
            raise InputError(f"{label}: is a directory, not an image file")
        if not path.is_file():  # a FIFO would wait forever, a device read without end
            raise InputError(f"{label}: not a regular file (a pipe, a device or a socket)")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{label}: file too large ({size:,} bytes; limit {MAX_FILE_BYTES:,})")
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)  # the file may grow while read
        except OSError as exc:
            raise InputError(f"{label}: cannot read file ({exc.strerror or exc})") from None
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"{label}: file too large (limit {MAX_FILE_BYTES:,} bytes)")
    elif hasattr(source, "read"):
        label = name or str(getattr(source, "name", "") or "uploaded image")
        data = source.read(MAX_FILE_BYTES + 1)
        if not isinstance(data, (bytes, bytearray)):
            raise InputError(f"{label}: file object must be opened in binary mode")
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"{label}: file too large (limit {MAX_FILE_BYTES:,} bytes)")
        data = bytes(data)
    else:
        raise InputError(f"cannot read an image from a {type(source).__name__}")
    if not data:
        raise InputError(f"{label}: file is empty, not an image")
    return data, label


def _too_large(label: str, pixels: int | None) -> InputError:
    amount = f"{pixels:,} pixels" if pixels else "too many pixels"
    return InputError(
        f"{label}: image too large to decode safely ({amount}; limit {MAX_PIXELS:,}): "
        "downscale it first"
    )


def load_image(source: ImageSource, *, name: str = "") -> Image.Image:
    """Open ``source`` as an RGB image ready for any encoder (see the module docstring).

    Raises:
        InputError: missing/unreadable file, not an image, truncated data, more than
            :data:`MAX_PIXELS` pixels, or a mode that cannot be converted to RGB.
    """
    data, label = _read_bytes(source, name)
    notes: list[str] = []
    try:
        with warnings.catch_warnings():
            # Our own limit (below) is stricter than Pillow's warning threshold.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        found = re.search(r"\((\d+) pixels\)", str(exc))
        raise _too_large(label, int(found.group(1)) if found else None) from None
    except UnidentifiedImageError:
        raise InputError(
            f"{label}: not an image (Pillow cannot identify the file format)"
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise InputError(f"{label}: unreadable image ({_short(exc)})") from None

    width, height = image.size
    if width <= 0 or height <= 0:
        raise InputError(f"{label}: image has no pixels ({width}×{height})")
    if width * height > MAX_PIXELS:
        raise _too_large(label, width * height)

    frames = int(getattr(image, "n_frames", 1) or 1)
    if frames > 1:
        image.seek(0)
        notes.append(f"animated image ({frames} frames): only the first frame is analysed")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image.load()
    except Image.DecompressionBombError:
        raise _too_large(label, width * height) from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        message = _short(exc)
        if "truncated" in message.lower():
            raise InputError(f"{label}: image file is truncated (incomplete download?)") from None
        raise InputError(f"{label}: corrupt or unreadable image data ({message})") from None

    try:
        oriented = ImageOps.exif_transpose(image)
        if oriented is not None and oriented.size != image.size:
            notes.append("rotated according to its EXIF orientation")
        image = oriented if oriented is not None else image
    except Exception:  # a malformed EXIF block must not stop the analysis  # noqa: BLE001
        notes.append("EXIF orientation unreadable: image used as stored")

    try:
        rgb = to_rgb(image)
    except InputError as exc:
        raise InputError(f"{label}: {exc}") from None
    return _with_notes(rgb, notes)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def to_rgb(image: Image.Image) -> Image.Image:
    """Convert any Pillow mode to 8-bit RGB.

    Transparency (RGBA, LA, PA, palette with a transparent colour) is composited on
    white; greyscale is replicated; 16-bit and 32-bit integer/float greyscale is
    rescaled to 0..255 (a note says so); CMYK/YCbCr/LAB use Pillow's conversions.
    """
    mode = image.mode
    notes: list[str] = []
    if mode == "RGB":
        return image
    if mode == "P" and ("transparency" in image.info or image.palette.mode == "RGBA"):
        image, mode = image.convert("RGBA"), "RGBA"
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        out = Image.alpha_composite(white, rgba).convert("RGB")
        if rgba.getextrema()[3][0] < 255:
            notes.append("transparent areas composited on white")
    elif mode.startswith("I") or mode == "F":
        out = Image.fromarray(_grey_to_uint8(image, notes)).convert("RGB")
    else:
        try:
            out = image.convert("RGB")
        except (ValueError, OSError) as exc:
            raise InputError(f"cannot convert image mode {mode!r} to RGB ({_short(exc)})") from None
    out.info = {k: v for k, v in image.info.items() if k != "transparency"}
    return _with_notes(out, notes)


def _grey_to_uint8(image: Image.Image, notes: list[str]) -> np.ndarray:
    """High-bit-depth greyscale (``I;16*``, ``I``, ``F``) as uint8 0..255."""
    array = np.asarray(image, dtype=np.float64)
    if array.ndim != 2:
        array = array.reshape(image.size[1], image.size[0])
    finite = np.isfinite(array)
    if array.size and not finite.any():
        raise InputError("the image holds no pixel values (every pixel is NaN or infinite)")
    if not finite.all():
        share = 1.0 - float(finite.mean())
        notes.append(f"{share:.1%} of the pixels are NaN or infinite: drawn black")
        array = np.where(finite, array, np.nan)
    if image.mode.startswith("I;16"):
        scaled = array / 257.0
        notes.append("16-bit greyscale rescaled to 8 bits")
    elif image.mode == "F" and array.size and float(np.nanmax(array)) <= 1.0:
        scaled = array * 255.0
    else:
        top = float(np.nanmax(array)) if array.size else 0.0
        if top <= 255:
            scaled = array
        elif top <= 65535:
            scaled = array / 257.0
            notes.append("16-bit greyscale rescaled to 8 bits")
        else:
            low = float(np.nanmin(array))
            scaled = (array - low) * (255.0 / max(top - low, 1e-12))
            notes.append(f"{image.mode!r} greyscale min-max scaled to 8 bits")
    return np.clip(np.nan_to_num(scaled), 0, 255).round().astype(np.uint8)


# --- preprocessing helpers shared by encoders --------------------------------------------


def resize_shorter_side(
    image: Image.Image, size: int, resample: int = Image.Resampling.BICUBIC
) -> Image.Image:
    """Resize so the shorter side is ``size`` (aspect ratio kept; long side truncated to int)."""
    width, height = image.size
    if width <= height:
        new = (size, max(1, int(size * height / width)))
    else:
        new = (max(1, int(size * width / height)), size)
    return image if new == image.size else image.resize(new, resample=resample)


def center_crop(
    image: Image.Image, size: int
) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """Centre-crop a ``size × size`` square; returns the crop and its box in fractions.

    The box is ``(x0, y0, x1, y1)`` of ``image`` (0..1); offsets are
    ``round((side - size) / 2)`` as in the usual CLIP/torchvision centre crop.
    """
    width, height = image.size
    left = int(round((width - size) / 2.0))
    top = int(round((height - size) / 2.0))
    crop = image.crop((left, top, left + size, top + size))
    box = (left / width, top / height, (left + size) / width, (top + size) / height)
    return crop, tuple(float(min(max(v, 0.0), 1.0)) for v in box)  # type: ignore[return-value]


def resize_center_crop(
    image: Image.Image, size: int, resample: int = Image.Resampling.BICUBIC
) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """Shorter side to ``size`` then centre crop (CLIP preprocessing geometry).

    Returns the ``size × size`` RGB image and the region of the *original* image it
    shows, as ``(x0, y0, x1, y1)`` fractions (what ``LexicalEncoding.crop_box`` holds).
    """
    resized = resize_shorter_side(to_rgb(image), size, resample)
    return center_crop(resized, size)


def to_tensor(image: Image.Image, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """RGB image → normalised float32 tensor ``[3, H, W]``: ``(pixel / 255 - mean) / std``."""
    import torch  # heavy: torch loads on first use

    array = np.asarray(to_rgb(image), dtype=np.float32) / 255.0
    tensor = torch.from_numpy(array.copy()).permute(2, 0, 1)
    mean_t = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)
    return (tensor - mean_t) / std_t


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
