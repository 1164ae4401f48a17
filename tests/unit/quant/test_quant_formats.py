"""QUANT_FORMATS: every listed GGML type has every piece its kind requires.

The facts are gathered from the tree (the numpy codec bindings, the built native
modules, the native/cpu kernel tables, native/vulkan and the built SPIR-V) and handed
to `missing_pieces`; a synthetic row shows the checker names what a format lacks.
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from pathlib import Path

import pytest

from ds4 import _native_cpu, _native_quant, _native_quantize  # type: ignore[attr-defined]
from ds4.adapters.quant.numpy_codec import NUMPY_CODECS
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.quant_formats import (
    CPU_KERNEL_SOURCES,
    FORMATS_BY_TYPE,
    ISA,
    ISAS,
    QUANT_FORMATS,
    FormatKind,
    FoundPieces,
    QuantFormat,
    Role,
    allowed_types,
    missing_pieces,
)
from ds4.domain.model.catalog import ALLOWED_TYPES

ROOT = Path(__file__).resolve().parents[3]
NATIVE_CPU = ROOT / "native" / "cpu"
SHADERS = ROOT / "native" / "vulkan"
SPIRV = ROOT / "src" / "ds4" / "_vulkan_spirv"


def _table_initializer(text: str, name: str) -> list[str]:
    match = re.search(rf"ds4_dot_table {name} = \{{(.*?)\}};", text, re.S)
    assert match, f"no {name} initializer"
    return [part.strip() for part in match.group(1).split(",") if part.strip()]


@cache
def native_cpu_slots() -> dict[ISA, dict[str, tuple[str, ...]]]:
    """isa -> ds4_dot_table slot -> (the slot's kernel(s), then the row/tile kernels
    cpu_matmul.c picks for the type), read from the C sources."""
    header = (NATIVE_CPU / "cpu_internal.h").read_text()
    struct = re.search(r"typedef struct \{\s*ds4_dot_fn ([^;]*);\s*\} ds4_dot_table;", header)
    assert struct, "ds4_dot_table not found in cpu_internal.h"
    fields = [f.strip() for f in struct.group(1).split(",")]

    def table(file: str, name: str) -> list[str]:
        entries = _table_initializer((NATIVE_CPU / file).read_text(), name)
        assert len(entries) == len(fields), f"{name} fills {len(entries)} of {len(fields)} slots"
        return entries

    neon = zip(table("cpu_dot_neon.c", "ds4_dots_neon"),
               table("cpu_dot_neon.c", "ds4_dots_neon_sdot"), strict=True)  # fmt: skip
    slots: dict[ISA, dict[str, tuple[str, ...]]] = {
        "scalar": {
            f: (k,)
            for f, k in zip(fields, table("cpu_dot_scalar.c", "ds4_dots_scalar"), strict=True)
        },
        "avx2": {
            f: (k,) for f, k in zip(fields, table("cpu_dot_avx2.c", "ds4_dots_avx2"), strict=True)
        },
        "neon": {f: (b,) if b == s else (b, s) for f, (b, s) in zip(fields, neon, strict=True)},
    }
    matmul = (NATIVE_CPU / "cpu_matmul.c").read_text()
    slots["avx512"] = dict(slots["avx2"])  # build_avx512_table starts from AVX2's
    for slot, getter in re.findall(r"dots_avx512\.(\w+) = (\w+)\(\);", matmul):
        slots["avx512"][slot] = (getter,)
    picks = r"if \(table == &(dots_avx512|ds4_dots_avx2) && type == T_(\w+)\) return (\w+)\(\);"
    for table_name, type_name, kernel in re.findall(picks, matmul):
        isa: ISA = "avx512" if table_name == "dots_avx512" else "avx2"
        slot = type_name.lower()
        slots[isa][slot] = (*slots[isa][slot], kernel)
    return slots


@cache
def found_pieces() -> FoundPieces:
    quant, quantize, cpu = _native_quant.lib, _native_quantize.lib, _native_cpu.lib
    spirv = {p.name for p in SPIRV.glob("*.spv")} if (SPIRV / "BUILT").exists() else None
    return FoundPieces(
        numpy_codecs=frozenset(NUMPY_CODECS),
        native_geometry={
            "ds4._native_quant": {
                int(t): (int(quant.ds4_block_elements(int(t))), int(quant.ds4_block_bytes(int(t))))
                for t in GGMLType
            },
            "ds4._native_quantize": {
                int(t): (g.elements, int(quantize.ds4_quantize_row_bytes(int(t), g.elements)))
                for t, g in BLOCK_GEOMETRY.items()
            },
        },
        cpu_geometry={
            int(t): (g.elements, int(cpu.ds4_cpu_row_bytes(int(t), g.elements)))
            for t, g in BLOCK_GEOMETRY.items()
        },
        cpu_slots=native_cpu_slots(),
        shader_sources=frozenset(p.stem for p in SHADERS.glob("*.comp")),
        spirv=None if spirv is None else frozenset(spirv),
    )


@pytest.mark.parametrize("fmt", QUANT_FORMATS, ids=lambda f: f.name)
def test_every_listed_format_has_every_piece(fmt: QuantFormat) -> None:
    assert missing_pieces(fmt, found_pieces()) == []


def test_every_numpy_codec_binding_names_a_listed_format() -> None:
    assert set(NUMPY_CODECS) == {f.name for f in QUANT_FORMATS if f.has_codec}


def test_every_native_cpu_slot_belongs_to_a_listed_format() -> None:
    listed = {f.cpu.slot for f in QUANT_FORMATS if f.cpu}
    for isa in ISAS:
        assert set(native_cpu_slots()[isa]) == listed, isa


def _defined_in(name: str, text: str) -> bool:
    """A C function definition of `name`, also through the macros that define kernels
    (HALF_DOT(name, ...), NEON_NAME(stem) expanding to stem_base / stem_sdot)."""
    stem = re.sub(r"_(base|sdot)$", "", name)
    return bool(
        re.search(rf"\b{name}\s*\(", text)
        or re.search(rf"\(\s*{name}\s*,", text)
        or (stem != name and re.search(rf"NEON_NAME\({stem}\)\s*\(", text))
    )


@pytest.mark.parametrize("isa", ISAS)
def test_named_kernels_are_defined_in_their_instruction_sets_sources(isa: ISA) -> None:
    text = "\n".join((NATIVE_CPU / f).read_text() for f in CPU_KERNEL_SOURCES[isa])
    for fmt in QUANT_FORMATS:
        for name in fmt.cpu.for_isa(isa) if fmt.cpu else ():
            assert _defined_in(name, text), f"{fmt.name}: {isa} kernel {name} is not defined"


def test_the_validator_accepts_exactly_the_table_roles() -> None:
    assert {role: allowed_types(role) for role in Role} == ALLOWED_TYPES
    g = GGMLType
    read_only = {g.IQ4_NL, g.IQ4_XS, g.IQ2_XS, g.IQ3_XXS, g.IQ3_S}  # the i-quants, all three roles
    today = {
        Role.VECTOR: {g.F32},
        Role.FLOAT: {g.F16, g.BF16, g.F32, g.Q8_0, g.Q2_K, g.Q3_K, g.Q4_K, g.Q5_K, g.Q6_K}
        | read_only,
        Role.PROJECTION: {g.Q8_0, g.Q2_K, g.Q3_K, g.Q4_K, g.Q5_K, g.Q6_K, g.F16, g.BF16, g.F32}
        | read_only,
        Role.EXPERT: {
            g.IQ2_XXS,
            g.Q2_K,
            g.Q3_K,
            g.Q4_K,
            g.Q5_K,
            g.Q6_K,
            g.MXFP4,
            g.Q8_0,
            g.F16,
            g.BF16,
            g.F32,
        }
        | read_only,
        Role.INDEX: {g.I32},
    }
    assert today == ALLOWED_TYPES


def test_rows_are_keyed_once_per_type() -> None:
    assert len(FORMATS_BY_TYPE) == len(QUANT_FORMATS)


# --- the checker on synthetic rows


def test_a_new_weight_format_without_its_pieces_is_reported_piece_by_piece() -> None:
    bare = QuantFormat(GGMLType.Q4_0, FormatKind.WEIGHT, frozenset({Role.EXPERT}))
    gaps = missing_pieces(bare, found_pieces())
    assert "numpy codec (NUMPY_CODECS)" in gaps
    assert any(g.startswith("native codec in ds4._native_quant ") for g in gaps)
    assert any(g.startswith("native codec in ds4._native_quantize ") for g in gaps)
    assert "native CPU dot kernels (cpu)" in gaps
    assert "Vulkan matvec shaders (vulkan_shaders)" in gaps


def test_one_missing_piece_is_the_one_reported() -> None:
    q4k, found = FORMATS_BY_TYPE[GGMLType.Q4_K], found_pieces()
    no_codec = dataclasses.replace(found, numpy_codecs=found.numpy_codecs - {"Q4_K"})
    assert missing_pieces(q4k, no_codec) == ["numpy codec (NUMPY_CODECS)"]
    no_shader = dataclasses.replace(found, shader_sources=found.shader_sources - {"matvec_q4_k"})
    assert missing_pieces(q4k, no_shader) == ["Vulkan shader source native/vulkan/matvec_q4_k.comp"]
    built = dataclasses.replace(found, spirv=frozenset({"matvec_q4_k.spv", "matvec_q4_k.sg.spv"}))
    assert missing_pieces(q4k, built) == [
        "built SPIR-V matvec_q4_k_q8.spv", "built SPIR-V matvec_q4_k_q8.sg.spv"
    ]  # fmt: skip
    f32_only = dataclasses.replace(q4k, vulkan_shaders=("matvec_q4_k",))
    assert missing_pieces(f32_only, found) == [
        "Vulkan integer-dot shader (a matvec_*_q8 over q8_k activations)"
    ]
    assert q4k.cpu is not None
    wrong_neon = dataclasses.replace(q4k, cpu=dataclasses.replace(q4k.cpu, neon=("dot_q4_k",)))
    assert [g.split(":")[0] for g in missing_pieces(wrong_neon, found)] == ["neon CPU kernels"]


def test_loader_roles_follow_the_kind() -> None:
    found = found_pieces()
    no_roles = dataclasses.replace(FORMATS_BY_TYPE[GGMLType.Q8_0], roles=frozenset())
    assert missing_pieces(no_roles, found) == ["loader roles (none listed)"]
    loaded_source = dataclasses.replace(
        FORMATS_BY_TYPE[GGMLType.BF16], kind=FormatKind.SOURCE, roles=frozenset({Role.FLOAT})
    )
    assert missing_pieces(loaded_source, found) == [
        "a source type must not be accepted by the loader (roles)"
    ]
    assert missing_pieces(QuantFormat(GGMLType.I16, FormatKind.INDEX), found) == [
        "loader roles (none listed)"
    ]
