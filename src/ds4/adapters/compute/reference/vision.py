"""The reference vision encoder: the numpy math of ds4.domain.vision.encoder over the
weights of an mmproj GGUF, decoded once to float32 (docs/vision.md §4)."""

from __future__ import annotations

from ds4.adapters.gguf.vision_files import vision_weights
from ds4.domain.vision.encoder import EncodedImage, encode_grid
from ds4.domain.vision.hparams import VisionHParams
from ds4.domain.vision.preprocess import RGBImage, prepare_image
from ds4.ports.model_file import Dequantizer, ModelFile


class ReferenceVisionEncoder:
    """VisionEncoder in numpy. Holds every weight as f32 (the released encoder: ~0.9 GiB
    on disk as F16, about twice that here)."""

    def __init__(self, model: ModelFile, hp: VisionHParams, dequantizer: Dequantizer) -> None:
        self._hp = hp
        self._weights = vision_weights(model, dequantizer, hp)

    @property
    def hparams(self) -> VisionHParams:
        return self._hp

    def encode(self, image: RGBImage) -> EncodedImage:
        prepared = prepare_image(image, self._hp)
        grid = encode_grid(prepared, self._weights, self._hp)
        return EncodedImage(grid, prepared.grid_w, prepared.grid_h, self._weights.sentinels)
