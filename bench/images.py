"""Image encoding throughput (batched vs one at a time) and the cost of a new patch group.

Choosing a patch group re-pools rows the encoding already holds; this measures how far
below one encoding that stays (the Images page relies on it).
"""

from __future__ import annotations

from bench.run import timed


def _images(n: int):
    """``n`` same-sized real photos (scikit-image), flipped/rotated for variety."""
    from pathlib import Path

    import skimage
    from PIL import ImageOps

    from lexlens.models.images import load_image

    data = Path(skimage.__file__).parent / "data"
    base = [load_image(data / name).resize((448, 300)) for name in ("chelsea.png", "coffee.png")]
    variants = []
    for i in range(n):
        image = base[i % 2]
        if (i // 2) % 2:
            image = ImageOps.mirror(image)
        if (i // 4) % 2:
            image = ImageOps.flip(image)
        variants.append(image)
    return variants


def run() -> list[dict]:
    from lexlens.analysis.patches import box_to_patches, pool_box, pool_patches
    from lexlens.analysis.terms import top_terms
    from lexlens.models import load_encoder

    encoder = load_encoder("efficientnet-lite0-lexical")
    images = _images(16)
    encoder.encode_images(images[:2])  # warm-up
    batched = timed(lambda: encoder.encode_images(images), repeat=2)
    single = timed(lambda: [encoder.encode_images([im]) for im in images], repeat=2)

    encoding = encoder.encode_images(images[:1])[0]
    one_encoding = timed(lambda: encoder.encode_images(images[:1]), repeat=3)
    group = box_to_patches(encoding.grid, (0.0, 0.0, 0.5, 1.0))

    def regroup() -> None:
        top_terms(pool_patches(encoding, group), encoder.vocab, k=20)

    def regroup_box() -> None:
        top_terms(pool_box(encoding, (0.25, 0.1, 0.9, 0.8)), encoder.vocab, k=20)

    group_time = timed(regroup, repeat=20)
    box_time = timed(regroup_box, repeat=20)
    return [
        {
            "name": "encode_images_batched_vs_single",
            "encoder": encoder.name,
            "n_images": len(images),
            "image_size": list(images[0].size),
            "grid": list(encoding.grid),
            "batched_images_per_s": len(images) / batched,
            "single_images_per_s": len(images) / single,
            "speedup_batched_over_single": single / batched,
        },
        {
            "name": "patch_group_terms_vs_one_encoding",
            "encoder": encoder.name,
            "grid": list(encoding.grid),
            "patches_in_group": len(group),
            "group_terms_ms": group_time * 1e3,
            "box_terms_ms": box_time * 1e3,
            "one_encoding_ms": one_encoding * 1e3,
            "encoding_over_group_ratio": one_encoding / group_time,
        },
    ]
