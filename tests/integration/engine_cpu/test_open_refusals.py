"""Models the cpu backend cannot run are refused when they open, in one line, rather
than failing inside the native forward."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.cpu.native_layout import NativeLayout
from ds4.adapters.gguf.model_files import TensorValues, load_model
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.errors import Ds4Error


def test_hash_routing_table_with_a_bad_expert_id(tiny_q2: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    shutil.copyfile(tiny_q2, bad)
    model, hp = load_model(str(bad))
    offset = model.tensors["blk.0.ffn_gate_tid2eid.weight"].offset
    model.close()
    with bad.open("r+b") as f:
        f.seek(offset)
        f.write(np.array([hp.n_expert], dtype="<i4").tobytes())
    # the shared validator (the one `ds4 gguf inspect` runs) refuses it before the layout
    with pytest.raises(
        Ds4Error, match=r"blk\.0\.ffn_gate_tid2eid\.weight: token 0 routes to expert"
    ):
        open_cpu_runner(str(bad), numerics="fp32")


def test_more_hyper_connection_streams_than_the_native_forward_holds(tiny_q2: Path) -> None:
    model, hp = load_model(str(tiny_q2))
    weights = TensorValues(model, NativeDequantizer())
    with pytest.raises(Ds4Error, match=r"^17 hyper-connection streams: the cpu backend takes"):
        NativeLayout(model, dataclasses.replace(hp, n_hc=17), weights)
