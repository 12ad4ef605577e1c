"""Image input: loading, size limits, modes, orientation, and edge images through the encoder."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from lexlens.models.base import InputError
from lexlens.models.images import (
    MAX_PIXELS,
    center_crop,
    image_notes,
    load_image,
    resize_center_crop,
    to_rgb,
    to_tensor,
)
from tests.helpers import skimage_path


def _png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width × height`` with a tiny (incomplete) IDAT: ~100 bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    idat = zlib.compress(b"\x00" * (width + 1) * 4)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _jpeg_of_chelsea() -> bytes:
    buf = io.BytesIO()
    Image.open(skimage_path("chelsea.png")).convert("RGB").save(buf, "JPEG", quality=90)
    return buf.getvalue()


# --- clear errors -------------------------------------------------------------------------


def test_truncated_jpeg_is_an_error_not_half_an_image():
    data = _jpeg_of_chelsea()
    assert load_image(data).size == (451, 300)  # the complete file loads
    with pytest.raises(InputError, match="truncated"):
        load_image(data[: len(data) // 2], name="cut.jpg")


def test_text_file_renamed_png(tmp_path):
    path = tmp_path / "notes.png"
    path.write_text("this is not an image\n" * 20)
    with pytest.raises(InputError, match="not an image") as info:
        load_image(path)
    assert "notes.png" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("size", [(20_000, 20_000), (10_000, 8_500)])
def test_huge_image_rejected_before_decoding(size):
    data = _png_header_only(*size)
    assert len(data) < 200_000  # the test itself allocates nothing big
    with pytest.raises(InputError, match="too large") as info:
        load_image(data, name="bomb.png")
    assert f"{size[0] * size[1]:,}" in str(info.value)
    assert size[0] * size[1] > MAX_PIXELS


def test_missing_empty_and_directory(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_image(tmp_path / "nope.png")
    with pytest.raises(InputError, match="directory"):
        load_image(tmp_path)
    with pytest.raises(InputError, match="empty"):
        load_image(b"")
    with pytest.raises(InputError):
        load_image(12345)  # type: ignore[arg-type]


# --- correct results for unusual images -----------------------------------------------------


def test_one_pixel_image():
    image = load_image(_png_bytes(Image.new("RGB", (1, 1), (10, 20, 30))))
    assert image.size == (1, 1) and image.getpixel((0, 0)) == (10, 20, 30)


def test_animated_gif_keeps_first_frame_with_a_note():
    frames = [Image.new("RGB", (16, 16), c) for c in [(255, 0, 0), (0, 0, 255), (0, 255, 0)]]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50)
    image = load_image(buf.getvalue())
    assert image.mode == "RGB"
    red, green, blue = image.getpixel((8, 8))
    assert red > 200 and green < 50 and blue < 50
    assert any("first frame" in n and "3 frames" in n for n in image_notes(image))


def test_cmyk_jpeg_converted():
    buf = io.BytesIO()
    Image.new("CMYK", (16, 16), (0, 255, 255, 0)).save(buf, "JPEG", quality=95)  # no cyan → red
    assert Image.open(io.BytesIO(buf.getvalue())).mode == "CMYK"
    red, green, blue = load_image(buf.getvalue()).getpixel((8, 8))
    assert red > 240 and green < 15 and blue < 15


def test_16bit_greyscale_png_rescaled():
    values = np.array([[0, 257 * 100], [65535, 257 * 7]], dtype=np.uint16)
    data = _png_bytes(Image.fromarray(values))
    assert Image.open(io.BytesIO(data)).mode.startswith("I")
    image = load_image(data)
    assert image.mode == "RGB"
    got = np.asarray(image)[:, :, 0]
    assert got.tolist() == [[0, 100], [255, 7]]
    assert any("16-bit" in n for n in image_notes(image))


def test_transparency_composited_on_white():
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    rgba.putpixel((0, 0), (0, 0, 255, 255))
    rgba.putpixel((1, 0), (0, 0, 0, 128))
    image = load_image(_png_bytes(rgba))
    assert image.getpixel((2, 2)) == (255, 255, 255)  # fully transparent → white
    assert image.getpixel((0, 0)) == (0, 0, 255)  # opaque keeps its colour
    assert image.getpixel((1, 0)) == (127, 127, 127)  # half black over white
    palette = Image.new("P", (4, 4), 1)
    palette.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    palette.info["transparency"] = 1
    assert load_image(_png_bytes(palette)).getpixel((0, 0)) == (255, 255, 255)


def test_greyscale_and_la_modes():
    assert to_rgb(Image.new("L", (2, 2), 77)).getpixel((0, 0)) == (77, 77, 77)
    assert to_rgb(Image.new("1", (2, 2), 1)).getpixel((0, 0)) == (255, 255, 255)
    la = load_image(_png_bytes(Image.new("LA", (2, 2), (0, 255))))
    assert la.getpixel((0, 0)) == (0, 0, 0)


def test_exif_orientation_respected():
    stored = Image.new("RGB", (40, 20), (255, 0, 0))
    stored.paste((0, 0, 255), (20, 0, 40, 20))  # left red, right blue
    exif = stored.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display": left edge goes to the top
    buf = io.BytesIO()
    stored.save(buf, "JPEG", exif=exif, quality=95)
    image = load_image(buf.getvalue())
    assert image.size == (20, 40)
    assert image.getpixel((10, 5))[0] > 200 and image.getpixel((10, 35))[2] > 200


def test_path_bytes_and_file_object_agree():
    path = skimage_path("coffee.png")
    a = np.asarray(load_image(path))
    b = np.asarray(load_image(path.read_bytes()))
    with open(path, "rb") as handle:
        c = np.asarray(load_image(handle))
    assert np.array_equal(a, b) and np.array_equal(a, c)


# --- preprocessing helpers ------------------------------------------------------------------


def test_to_tensor_normalises():
    image = Image.new("RGB", (3, 2), (255, 0, 51))
    tensor = to_tensor(image, (0.5, 0.0, 0.1), (0.5, 1.0, 0.1))
    assert tuple(tensor.shape) == (3, 2, 3)
    assert np.allclose(tensor[:, 0, 0].numpy(), [1.0, 0.0, 1.0], atol=1e-6)


def test_center_crop_box_is_in_original_fractions():
    image = Image.new("RGB", (600, 300))
    crop, box = resize_center_crop(image, 224)
    assert crop.size == (224, 224)
    assert box == pytest.approx((0.25, 0.0, 0.75, 1.0), abs=0.005)
    square, full = center_crop(Image.new("RGB", (50, 50)), 50)
    assert square.size == (50, 50) and full == (0.0, 0.0, 1.0, 1.0)


# --- unusual images through the default encoder ---------------------------------------------


def test_edge_images_encode(effnet):
    frames = [Image.new("RGB", (16, 16), c) for c in [(255, 0, 0), (0, 0, 255)]]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:])
    cmyk = io.BytesIO()
    Image.new("CMYK", (30, 20), (0, 128, 255, 0)).save(cmyk, "JPEG")
    sixteen = _png_bytes(
        Image.fromarray((np.arange(64 * 64).reshape(64, 64) * 16).astype(np.uint16))
    )
    images = [
        load_image(_png_bytes(Image.new("RGB", (1, 1), (200, 30, 30)))),
        load_image(gif.getvalue()),
        load_image(cmyk.getvalue()),
        load_image(sixteen),
        load_image(_png_bytes(Image.new("RGBA", (5, 9), (0, 255, 0, 100)))),
    ]
    encodings = effnet.encode_images(images)
    assert len(encodings) == len(images)
    for enc in encodings:
        assert enc.weights.shape == (len(effnet.vocab),)
        assert np.isfinite(enc.weights).all() and enc.weights.max() > 0
        assert enc.unit_weights.shape[0] == enc.grid[0] * enc.grid[1]
    assert encodings[0].grid == (7, 7)
    assert any("first frame" in n for n in encodings[1].notes)
    assert any("tiny image" in n for n in encodings[0].notes)


def test_aspect_ratio_gives_non_square_grid(effnet):
    photo = load_image(skimage_path("chelsea.png"))
    wide = photo.resize((448, 224))
    tall = photo.resize((150, 300))
    very_wide = photo.resize((900, 100))
    enc_wide, enc_tall, enc_very = effnet.encode_images([wide, tall, very_wide])
    assert enc_wide.grid == (7, 14) and enc_tall.grid == (14, 7)
    assert enc_wide.units[:2] == ["r0c0", "r0c1"] and len(enc_wide.units) == 98
    assert enc_very.grid == (7, 14) and any("squeezed" in n for n in enc_very.notes)
    assert enc_wide.crop_box == (0.0, 0.0, 1.0, 1.0)


def test_non_image_to_encoder_is_clear(effnet):
    with pytest.raises(InputError, match="PIL image"):
        effnet.encode_images(["chelsea.png"])
    with pytest.raises(InputError, match="no images"):
        effnet.encode_images([])


# --- the CLI image path, end to end ---------------------------------------------------------


def test_cli_terms_image_and_box(cli, tmp_path):
    """A box over the cat (its cells listed in the JSON), then a non-image."""
    import json

    photo = str(skimage_path("chelsea.png"))
    done = cli(
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        photo,
        "--box",
        "0.1,0.1,0.9,0.9",
        "--json",
        "--top",
        "5",
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["encoder"] == "efficientnet-lite0-lexical"
    assert payload["input"]["box"] == [0.1, 0.1, 0.9, 0.9]
    # chelsea.png is 451×300: a 7×11 grid. Cells at least half inside 0.1..0.9: rows 1..5
    # (row 0 spans 0..0.143, 0.3 of it inside) and columns 1..9 (column 1 spans
    # 0.091..0.182, 0.9 inside; column 10 spans 0.909..1, none inside): 5 × 9 cells.
    assert payload["input"]["grid"] == [7, 11]
    assert len(payload["input"]["cells"]) == 45 and payload["input"]["cells"][0] == "r1c1"
    assert {"cat", "cats"} & {t["token"] for t in payload["terms"]}

    fake = tmp_path / "fake.png"
    fake.write_text("not an image")
    bad = cli("terms", "--encoder", "efficientnet-lite0-lexical", "--image", str(fake))
    assert bad.returncode == 2 and "not an image" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
