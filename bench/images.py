"""Images: batched vs single encoding, a patch group's terms vs one encoding, a word cloud.

Choosing a patch group re-pools rows the encoding already holds, and the page redraws
clouds on every change: both must stay far below one encoding (the Images page relies on
it). Every goal is a ratio measured in this run, or a wall time as a user meets it.
"""

from __future__ import annotations


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
    from bench.run import figure, timed
    from lexlens.analysis.core.words import Term
    from lexlens.analysis.lexical.patches import box_to_patches
    from lexlens.analysis.lexical.terms import terms_of_encoding
    from lexlens.analysis.render.plots import cloud_layout, render_cloud
    from lexlens.models import load_encoder

    encoder = load_encoder("efficientnet-lite0-lexical")
    images = _images(16)
    encoder.encode_images(images[:2])  # warm-up
    batched = timed(lambda: encoder.encode_images(images), repeat=2)
    single = timed(lambda: [encoder.encode_images([im]) for im in images], repeat=2)

    encoding = encoder.encode_images(images[:1])[0]
    one_encoding = timed(lambda: encoder.encode_images(images[:1]), repeat=3)
    box = (0.0, 0.0, 0.5, 1.0)
    group = box_to_patches(encoding.grid, box)
    group_time = timed(lambda: terms_of_encoding(encoder, encoding, top=20, box=box), repeat=20)
    whole = terms_of_encoding(encoder, encoding, top=20)
    shown = [Term(r["token"], r["weight"], r["index"]) for r in whole.merged_terms]
    cloud_time = timed(lambda: render_cloud(cloud_layout(shown)), repeat=5)
    return [
        figure(
            "images_batched_over_single",
            single / batched,
            "x",
            goal=(">=", 1.0),
            measured_with="best of 2: 16 photos at 448×300 in one call vs one call each",
            details={
                "encoder": encoder.name,
                "grid": list(encoding.grid),
                "batched_images_per_s": len(images) / batched,
                "single_images_per_s": len(images) / single,
            },
        ),
        figure(
            "patch_group_terms_vs_one_encoding",
            one_encoding / group_time,
            "x",
            goal=(">=", 10.0),
            measured_with="best of 20: TermsResult of a box (raw + merged views, provenance) "
            "vs best of 3 single-image encodings",
            details={
                "patches_in_group": len(group),
                "group_terms_ms": group_time * 1e3,
                "one_encoding_ms": one_encoding * 1e3,
            },
        ),
        figure(
            "word_cloud_1600x900_ms",
            cloud_time * 1e3,
            "ms",
            goal=("<=", 300.0),
            measured_with="best of 5: proportional layout + render of the image's 20 merged "
            "terms at 1600×900",
            details={"words": len(shown)},
        ),
    ]
