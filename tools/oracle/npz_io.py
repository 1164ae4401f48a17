"""Byte-reproducible .npz files.

``numpy.savez_compressed`` stamps each member with the current time, so two runs differ in
bytes. This writer fixes the timestamp, member order and compression level; the result
loads with ``numpy.load(path, allow_pickle=False)``.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_npz(path: Path, arrays: Mapping[str, npt.NDArray[np.generic]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compresslevel=6)
    tmp.replace(path)
