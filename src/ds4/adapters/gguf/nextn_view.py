"""A GGUF holding llama.cpp's MTP layer (`blk.N.nextn.*`), seen as our MTP file.

The ModelFile the MTP drafters read (`mtp.0.*`, docs/mtp.md) over the file's own
mapping: every tensor is the file's bytes under our name, except e_proj and h_proj,
which are the two column halves of `nextn.eh_proj` -- strided views of its rows, so
nothing is copied (ds4.domain.model.nextn has the mapping and its reasons). Works on an
MTP-only file (llama.cpp's converter with --mtp) and on a full model that carries the
layer, so `--mtp` can name the main model's own file (docs/llamacpp.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.nextn import Derived, nextn_as_mtp, nextn_sources
from ds4.ports.model_file import ModelFile


class NextnMtpFile:
    """ModelFile: `model`'s MTP layer `layer` under the mtp.0.* names."""

    def __init__(self, model: ModelFile, layer: int) -> None:
        self._model = model
        self._sources = nextn_sources(layer, model.tensors)
        self._tensors, self.problems = nextn_as_mtp(layer, model.tensors)

    @property
    def path(self) -> str:
        return self._model.path

    @property
    def version(self) -> int:
        return self._model.version

    @property
    def alignment(self) -> int:
        return self._model.alignment

    @property
    def file_size(self) -> int:
        return self._model.file_size

    @property
    def metadata(self) -> Mapping[str, MetaValue]:
        return self._model.metadata

    @property
    def tensors(self) -> Mapping[str, TensorInfo]:
        return self._tensors

    def raw(self, name: str) -> npt.NDArray[np.uint8]:
        source = self._sources[name]
        if not isinstance(source, Derived):
            return self._model.raw(source)
        rows = self._model.raw(source.source)  # [d, row bytes of 2d inputs]
        half = rows.shape[-1] // 2
        return rows[:, :half] if source.half == "e" else rows[:, half:]

    def close(self) -> None:
        self._model.close()
