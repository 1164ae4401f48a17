"""Image preprocessing (docs/vision.md §2): the bicubic resample and grey padding are
byte-exact with Pillow's, the solver keeps every block within 384 tokens, and bad sizes
and files are refused in one line."""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image, ImageOps

from ds4.adapters.vision.pillow_decoder import PillowDecoder
from ds4.domain.vision.hparams import MAX_TOKENS
from ds4.domain.vision.layout import BlockLayout
from ds4.domain.vision.preprocess import (
    ImageError,
    RGBImage,
    fit_and_pad,
    plan_resize,
    resize_bicubic,
)
from ds4.domain.vision.presets import TINY_VISION_SHAPES

HP = TINY_VISION_SHAPES["tiny"]
RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ((70, 50), (112, 70)),
        ((1000, 900), (742, 672)),
        ((13, 9), (40, 31)),
        ((31, 7), (31, 90)),
        ((400, 40), (322, 42)),
        ((5, 5), (5, 1)),
    ],
)
def test_bicubic_equals_pillow(src: tuple[int, int], dst: tuple[int, int]) -> None:
    pixels = RNG.integers(0, 256, (src[1], src[0], 3), dtype=np.uint8)
    want = np.asarray(Image.fromarray(pixels).resize(dst, Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(resize_bicubic(pixels, *dst), want)


@pytest.mark.parametrize(("src", "dst"), [((70, 50), (112, 70)), ((30, 600), (42, 602)),
                                          ((3, 700), (14, 1288))])  # fmt: skip
def test_fit_and_pad_equals_imageops_pad(src: tuple[int, int], dst: tuple[int, int]) -> None:
    pixels = RNG.integers(0, 256, (src[1], src[0], 3), dtype=np.uint8)
    want = ImageOps.pad(Image.fromarray(pixels), dst, Image.Resampling.BICUBIC, (127, 127, 127))
    np.testing.assert_array_equal(fit_and_pad(pixels, *dst), np.asarray(want))


def test_a_half_pixel_offset_rounds_away_from_zero() -> None:
    """75 rows centred in 84: llama.cpp rounds the 4.5-row offset to 5 (std::round),
    Pillow's ImageOps.pad to 4 (Python's round); we follow llama.cpp."""
    pixels = RNG.integers(0, 256, (75, 599, 3), dtype=np.uint8)
    padded = fit_and_pad(pixels, 602, 84)
    assert (padded[:5] == 127).all() and (padded[80:] == 127).all()
    inner = np.asarray(Image.fromarray(pixels).resize((602, 75), Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(padded[5:80], inner)


@pytest.mark.parametrize("size", [(1, 1), (84, 84), (13, 9), (4000, 3000), (3000, 4000),
                                  (16384, 64), (64, 16384), (600, 75), (5000, 20)])  # fmt: skip
def test_solver_fits_the_token_budget(size: tuple[int, int]) -> None:
    plan = plan_resize(*size, HP)
    assert plan.width % HP.patch_size == 0 and plan.height % HP.patch_size == 0
    worst = BlockLayout(plan.grid_w, plan.grid_h, 3).n_tokens  # the largest lead
    assert worst <= MAX_TOKENS
    assert plan.grid_w == -(-plan.width // HP.cell) and plan.grid_h == -(-plan.height // HP.cell)


def test_large_images_use_most_of_the_budget() -> None:
    plan = plan_resize(4000, 3000, HP)
    assert BlockLayout(plan.grid_w, plan.grid_h, 3).n_tokens > MAX_TOKENS * 3 // 4


@pytest.mark.parametrize(
    ("size", "words"),
    [
        ((20000, 1), "a side exceeds"),
        ((1, 20000), "a side exceeds"),
        ((2000, 1), "aspect ratio"),
        ((0, 10), "empty"),
        ((10000, 10000), "more than"),
    ],
)
def test_bad_sizes_are_refused_in_one_line(size: tuple[int, int], words: str) -> None:
    with pytest.raises(ImageError) as err:
        plan_resize(*size, HP)
    message = str(err.value)
    assert words in message and f"{size[0]}x{size[1]}" in message and "\n" not in message


def _png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def test_decoder_reads_png_and_jpeg() -> None:
    pixels = RNG.integers(0, 256, (9, 13, 3), dtype=np.uint8)
    assert np.array_equal(PillowDecoder().decode(_png(pixels)).pixels, pixels)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG")
    assert PillowDecoder().decode(out.getvalue()).pixels.shape == (9, 13, 3)
    grey = Image.new("LA", (5, 4))
    out = io.BytesIO()
    grey.save(out, format="PNG")
    assert PillowDecoder().decode(out.getvalue()).pixels.shape == (4, 5, 3)


@pytest.mark.parametrize(
    ("data", "words"),
    [(b"not an image at all", "not a PNG or JPEG"), (b"GIF89a" + b"\0" * 64, "not a PNG or JPEG")],
)
def test_decoder_refuses_other_files(data: bytes, words: str) -> None:
    with pytest.raises(ImageError, match=words):
        PillowDecoder().decode(data)


def test_decoder_refuses_a_truncated_png() -> None:
    data = _png(RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    with pytest.raises(ImageError, match="cannot be decoded") as err:
        PillowDecoder().decode(data[: len(data) // 2])
    assert "\n" not in str(err.value)


def test_decoder_checks_the_size_before_decoding() -> None:
    # A 20000x1 PNG: refused from its header (the size check runs before load()).
    with pytest.raises(ImageError, match="20000x1 pixels"):
        PillowDecoder().decode(_png(np.zeros((1, 20000, 3), dtype=np.uint8)))


def test_rgb_image_checks_its_array() -> None:
    with pytest.raises(ImageError, match="uint8"):
        RGBImage(np.zeros((4, 4, 4), dtype=np.uint8))


def test_every_size_within_the_limits_gets_a_plan() -> None:
    """Log-uniform sizes within the limits: none is refused, every block fits, and a
    padded fit never rounds a side to nothing."""
    rng = np.random.default_rng(5)
    checked = 0
    while checked < 3000:
        w, h = (int(np.exp(rng.uniform(0, np.log(16384)))) for _ in range(2))
        if max(w, h) > 256 * min(w, h) or w * h > 1 << 25:
            continue
        checked += 1
        plan = plan_resize(w, h, HP)
        assert BlockLayout(plan.grid_w, plan.grid_h, 3).n_tokens <= MAX_TOKENS, (w, h)
        if not plan.stretch:
            scale = min(plan.width / w, plan.height / h)
            assert round(w * scale) >= 1 and round(h * scale) >= 1, (w, h)


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (no pixel data worth the name)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body).to_bytes(4, "big")
        return len(body).to_bytes(4, "big") + kind + body + crc

    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b"")


@pytest.mark.parametrize("size", [(60000, 60000), (16000, 16000), (20000, 1)])
def test_huge_dimensions_are_refused_from_the_header(size: tuple[int, int]) -> None:
    with pytest.raises(ImageError) as err:
        PillowDecoder().decode(_png_header(*size))
    assert "pixels" in str(err.value) and "\n" not in str(err.value)
    assert "exceeds" in str(err.value)
