"""GGUF reader: metadata of every type, tensor directory, zero-copy views, alignment."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from tests.support.sample_gguf import SAMPLE_METADATA, write_sample

from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.gguf.writer import GGUFWriteError, GGUFWriter
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue, ValueType


def test_every_metadata_type_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "s.gguf"
    write_sample(path)
    with GGUFFile(path) as f:
        for key, want in SAMPLE_METADATA.items():
            got = f.metadata[key]
            assert got.vtype is want.vtype, key
            assert got.item_type is want.item_type, key
            if want.vtype is ValueType.FLOAT32:
                assert got.value == pytest.approx(want.value)
            else:
                assert got.value == want.value, key


def test_tensor_bytes_are_zero_copy_views(tmp_path: Path) -> None:
    path = tmp_path / "s.gguf"
    data = write_sample(path)
    with GGUFFile(path) as f:
        for name, raw in data.items():
            view = f.raw(name)
            assert view.tobytes() == raw
            assert not view.flags.writeable
            assert not view.flags.owndata  # a view into the mapping, not a copy
        assert f.tensors["tensor.q2_k"].dims == (512, 3)
        assert f.raw("tensor.q2_k").shape == (3, 2 * 84)
        assert f.raw("tensor.f32").shape == (3, 2048)


@pytest.mark.parametrize("alignment", [32, 64, 4096])
def test_alignment_is_honoured(tmp_path: Path, alignment: int) -> None:
    path = tmp_path / "s.gguf"
    data = write_sample(path, alignment=alignment)
    with GGUFFile(path) as f:
        assert f.alignment == alignment
        for name in data:
            assert f.tensors[name].offset % alignment == 0
            assert f.raw(name).tobytes() == data[name]


def test_gguf_py_reads_what_we_write(tmp_path: Path) -> None:
    path = tmp_path / "s.gguf"
    data = write_sample(path)
    reader = gguf.GGUFReader(str(path))
    by_name = {t.name: t for t in reader.tensors}
    for name, raw in data.items():
        assert bytes(np.asarray(by_name[name].data).tobytes()) == raw
    assert reader.fields["t.string"].contents() == "héllo ｜DSML｜ 🙂"


def test_we_read_what_gguf_py_writes(tmp_path: Path) -> None:
    path = tmp_path / "g.gguf"
    w = gguf.GGUFWriter(str(path), "deepseek4")
    w.add_uint32("k.u32", 7)
    w.add_array("k.nested", [[1, 2], [3]])
    w.add_string("k.s", "x")
    values = np.arange(96, dtype=np.float32).reshape(3, 32)
    w.add_tensor("w", values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with GGUFFile(path) as f:
        assert f.metadata["k.u32"] == MetaValue(ValueType.UINT32, 7)
        assert f.metadata["k.nested"].value == [[1, 2], [3]]
        assert f.tensors["w"].dims == (32, 3)
        np.testing.assert_array_equal(f.raw("w").view("<f4"), values)


def test_writer_refuses_wrong_sizes_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    writer = GGUFWriter(path)
    writer.add_tensor("a", (32,), GGMLType.Q8_0)
    with pytest.raises(GGUFWriteError, match="needs 34"), writer:
        writer.write_tensor("a", b"\0" * 33)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_writer_refuses_out_of_order_tensors(tmp_path: Path) -> None:
    writer = GGUFWriter(tmp_path / "x.gguf")
    writer.add_tensor("a", (4,), GGMLType.F32)
    writer.add_tensor("b", (4,), GGMLType.F32)
    with pytest.raises(GGUFWriteError, match="out of order"), writer:
        writer.write_tensor("b", b"\0" * 16)


def test_sparse_finish_makes_a_readable_hole(tmp_path: Path) -> None:
    path = tmp_path / "sparse.gguf"
    writer = GGUFWriter(path)
    writer.add_tensor("big", (4096, 4096), GGMLType.F32)
    writer.finish(sparse=True)
    with GGUFFile(path) as f:
        assert f.raw("big").shape == (4096, 16384)
        assert f.file_size >= 4096 * 4096 * 4
