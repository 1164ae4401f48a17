"""ImageDecoder over Pillow: PNG and JPEG only, sizes checked from the header before the
pixels are decoded, a truncated or damaged file refused in one line."""

from __future__ import annotations

import io
import warnings

import numpy as np

from ds4.domain.vision.preprocess import MAX_PIXELS, ImageError, RGBImage, check_image_size

FORMATS = ("PNG", "JPEG")


class PillowDecoder:
    def decode(self, data: bytes) -> RGBImage:
        from PIL import Image, UnidentifiedImageError

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(io.BytesIO(data), formats=FORMATS) as img:
                    check_image_size(*img.size)
                    img.load()
                    rgb = img.convert("RGB")
        except UnidentifiedImageError:
            raise ImageError("image is not a PNG or JPEG file") from None
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            # Pillow's own guard, which fires on opening, before our size check can
            raise ImageError(f"image exceeds {MAX_PIXELS} pixels ({exc})") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise ImageError(f"image cannot be decoded: {exc}") from None
        return RGBImage(np.asarray(rgb, dtype=np.uint8).copy())
