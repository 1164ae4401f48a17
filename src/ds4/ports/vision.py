"""Images in (docs/vision.md): decoding an encoded image file to pixels, and the vision
encoder that turns pixels into language-model embeddings."""

from __future__ import annotations

from typing import Protocol

from ds4.domain.vision.encoder import EncodedImage
from ds4.domain.vision.hparams import VisionHParams
from ds4.domain.vision.preprocess import RGBImage


class ImageDecoder(Protocol):
    def decode(self, data: bytes) -> RGBImage:
        """PNG or JPEG bytes to RGB pixels; ImageError (one line) for anything else,
        a truncated file, or a size outside ds4.domain.vision.preprocess's limits,
        which are checked from the header before the pixels are decoded."""
        ...


class VisionEncoder(Protocol):
    @property
    def hparams(self) -> VisionHParams: ...

    def encode(self, image: RGBImage) -> EncodedImage:
        """Preprocess and encode one image. The result does not depend on where the
        image sits in the prompt: EncodedImage.block(n_past) places it."""
        ...
