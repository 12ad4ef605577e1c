"""``lexlens index --ray``: a local 2-CPU Ray writes the same index as the in-process build
(skipped when Ray is not installed: pip install "lexlens[ray]")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install "lexlens[ray]")')
if not hasattr(ray, "init"):  # e.g. Ray's own /tmp/ray log folder, read as a namespace package
    pytest.skip(
        "Ray is not installed (a folder named ray stands in its place)", allow_module_level=True
    )

pytestmark = pytest.mark.slow  # starting Ray and its actors takes ~20 s on 2 cores


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


def _same_index(a: Path, b: Path) -> None:
    x, y = open_index(a), open_index(b)
    for name in ("indptr", "indices"):
        assert np.array_equal(np.asarray(getattr(x, name)), np.asarray(getattr(y, name))), name
    # Weights agree to float32 rounding: batch composition and thread count change the
    # order of the network's float sums (the in-process build at another batch size does too).
    for name in ("data", "norms"):
        assert np.allclose(getattr(x, name), getattr(y, name), rtol=1e-5, atol=1e-5), name
    keep = ("id", "kind", "image", "text", "captions", "labels", "content_key", "nnz")
    assert x.meta(range(len(x)), list(keep)) == y.meta(range(len(y)), list(keep))
    assert x.manifest["encoder"] == y.manifest["encoder"]


def test_ray_build_equals_in_process_build(local_ray, tmp_path):
    """Images exercise the whole path: actors read the files, encode, gate, and report the
    unreadable one, which the driver lists as skipped."""
    from PIL import Image

    from lexlens.models import load_encoder

    skimage = pytest.importorskip("skimage")
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("chelsea.png", "coffee.png", "rocket.jpg"):
        image = Image.open(Path(skimage.__file__).parent / "data" / name).convert("RGB")
        image.thumbnail((96, 96))
        image.save(folder / Path(name).with_suffix(".png").name)
    (folder / "broken.png").write_bytes(b"not an image")
    effnet = load_encoder("efficientnet-lite0-lexical", device="cpu")
    build_index(effnet, folder, tmp_path / "here")
    on_ray = build_index(effnet, folder, tmp_path / "ray", ray="auto", batch_size=2)
    assert (on_ray.items, on_ray.encoded) == (3, 3)
    assert [Path(s.file).name for s in on_ray.skipped] == ["broken.png"]
    _same_index(tmp_path / "here", tmp_path / "ray")
