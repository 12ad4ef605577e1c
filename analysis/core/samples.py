"""The sample data Lexlens ships as package data (``lexlens/data``): sample benchmarks, the
sample photos' captions and labels, caption files and drawn images. Always found through the
installed package (a wheel or an editable checkout alike), never through a checkout path.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from lexlens.models.base import InputError

#: Sample benchmarks by name: what ``--source sample:NAME`` (and the pages) read.
SAMPLE_BENCHMARKS = {
    "imagenet_beir": "benchmarks/imagenet_beir",
    "photos_karpathy": "benchmarks/photos_karpathy/dataset_photos.json",
}
#: How a command line names a packaged sample in place of a path.
SAMPLE_PREFIX = "sample:"


def sample_path(*parts: str) -> Path:
    """A file or folder of the packaged sample data (``sample_path("photos.csv")``)."""
    path = Path(str(resources.files("lexlens").joinpath("data", *parts)))
    if not path.exists():
        raise InputError(f"the packaged sample data/{'/'.join(parts)} is missing from this install")
    return path


def sample_benchmark(name: str) -> Path:
    """The packaged sample benchmark ``name`` (``imagenet_beir``, ``photos_karpathy``)."""
    if name not in SAMPLE_BENCHMARKS:
        raise InputError(
            f"no sample benchmark {name!r}: one of {', '.join(sorted(SAMPLE_BENCHMARKS))}"
        )
    return sample_path(*SAMPLE_BENCHMARKS[name].split("/"))


def resolve_sample(source: str | Path) -> str | Path:
    """``sample:NAME`` as the packaged benchmark's path; any other source as it is."""
    if isinstance(source, str) and source.strip().startswith(SAMPLE_PREFIX):
        return sample_benchmark(source.strip()[len(SAMPLE_PREFIX) :])
    return source
