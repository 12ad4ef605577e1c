"""Sample images the pages offer: scikit-image's photos (when it is installed), then the
images drawn for Lexlens (packaged in ``data/images``)."""

from __future__ import annotations

from pathlib import Path

from lexlens.analysis.core.samples import sample_path

PHOTOS = ("chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg", "motorcycle_left.png")
#: The label of the sample a page starts with.
DEFAULT_SAMPLE = "chelsea (scikit-image)"


def sample_images() -> dict[str, Path]:
    """``{label: path}``: ``"chelsea (scikit-image)"``…, then ``"NAME (drawn sample)"``."""
    found: dict[str, Path] = {}
    try:
        import skimage  # optional: scikit-image

        folder = Path(skimage.__file__).parent / "data"
        for name in PHOTOS:
            if (folder / name).exists():
                found[f"{Path(name).stem} (scikit-image)"] = folder / name
    except ImportError:
        pass
    for path in sorted(sample_path("images").glob("*.png")):
        found[f"{path.stem} (drawn sample)"] = path
    return found
