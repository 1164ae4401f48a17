"""The generated i-quant grids (tools/gen_iq_grids.py) are gguf-py's, in the Python module
and the C header alike, and regenerating them changes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import gguf.quants
import numpy as np
import pytest

from ds4.domain.gguf import iq_grid_types, iq_grids

ROOT = Path(__file__).resolve().parents[3]
CASES = [
    ("IQ2XS", "IQ2_XS", iq_grid_types.GRID_IQ2XS),
    ("IQ3XXS", "IQ3_XXS", iq_grid_types.GRID_IQ3XXS),
    ("IQ3S", "IQ3_S", iq_grid_types.GRID_IQ3S),
]


@pytest.mark.parametrize(("name", "cls", "unpacked"), CASES, ids=[c[1] for c in CASES])
def test_grid_is_gguf_pys(name: str, cls: str, unpacked: np.ndarray) -> None:
    ref = getattr(gguf.quants, cls)
    ref.init_grid()
    want = np.asarray(ref.grid).reshape(unpacked.shape)
    assert np.array_equal(unpacked, want)
    header = (ROOT / "native/common/ds4_iq_grids.h").read_text()
    body = re.search(rf"DS4_{name}_GRID\[\d+\] = \{{(.*?)\}};", header, re.S)
    assert body
    c_values = [int(v, 16) for v in re.findall(r"0x([0-9a-f]+)", body.group(1))]
    assert c_values == list(getattr(iq_grids, f"{name}_GRID"))


def test_regenerating_changes_nothing(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools/gen_iq_grids.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    tables = {n: (w, gen.packed_grid(c, w)) for n, c, w in gen.GRIDS}
    assert gen.python_module(tables) == (ROOT / "src/ds4/domain/gguf/iq_grids.py").read_text()
    assert gen.c_header(tables) == (ROOT / "native/common/ds4_iq_grids.h").read_text()
