"""QUANT_FORMATS: every GGML tensor type ds4 handles, and what each must provide.

One `QuantFormat` row per type names, as plain facts, the pieces that type needs
across the tree, so the validator, `ds4 gguf inspect`, the codecs and the CPU kernel
wrappers read one list instead of keeping their own:

- `ggml_type`: the GGML id; block geometry (values and bytes per block) comes from
  `ggml_types.BLOCK_GEOMETRY`, the gguf-py mirror every GGUF reader needs for all types.
- `kind`: WEIGHT (loaded from a GGUF and used in products: every piece), SOURCE (a
  checkpoint float type the converter reads and the CPU kernels accept, never loaded:
  codecs and CPU kernels only), INDEX (an integer table read raw: loader roles only).
- `roles`: the tensor roles the loader's validator accepts the type for
  (`domain/model/catalog.py` reads `allowed_types`).
- `activation`: what the integer dots quantize x to first ("q8_0", "q8_k"; "f32" for
  the float dots), on the CPU and in the Vulkan _q8 shaders.
- `encodes`: whether ds4 also writes the type (numpy and native quantizers); False for
  types ds4 only reads (the i-quants IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XS: gguf-py
  has no quantizer for them either), whose
  native quantize module need not know them.
- `importance`: whether the quantizer uses an importance vector ("unused",
  "optional", or "required": then uniform importance is synthesized when none is given).
- `cpu`: the native CPU dot kernels (native/cpu): the type's slot in `ds4_dot_table`
  (cpu_internal.h) and per instruction set the C functions that fill the slot, then
  any row/tile kernels `cpu_matmul.c` picks for the type. AVX-512's table starts as a
  copy of AVX2's, so its slot names AVX2's function where no AVX-512 one replaces it;
  NEON names the baseline then the SDOT one.
- `vulkan_shaders`: the matvec shaders, as stems of native/vulkan/<stem>.comp (each
  built to <stem>.spv and <stem>.sg.spv by native/build/vulkan_shaders.py).

The implementations are bound elsewhere by the same name: the numpy codecs in
`ds4.adapters.quant.numpy_codec.NUMPY_CODECS`, the native codecs in
native/quant/ds4_quant.c and native/quantize/ds4_quantize.c, the kernels and shaders
in native/. `missing_pieces` compares a row with what was found in the tree, and
tests/unit/quant/test_quant_formats.py runs it on every row.

Adding a type (Q3_K, Q6_K, IQ4_XS, ...): add its row below; bind its numpy
codec in NUMPY_CODECS; add its native dequantize/quantize cases; give it a
ds4_dot_table slot with a kernel per instruction set; write its matvec shaders; then
run the test above, which names every piece still missing. Three places still name
their types themselves and need the new one too: the numpy reference dots
(domain/engine_math/quant_dots.py, used by the reference backend and the kernel
oracle), the Vulkan adapter's type -> shader maps, and the converter's quant presets
(domain/convert/plan.py), which pick a type per tensor role.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType


class Role(Enum):
    """What a tensor is to the model; the validator allows a type per role."""

    VECTOR = "vector"  # norms, HC scale/base, sinks, router bias: F32
    FLOAT = "float"  # HC fn, router, compressor, indexer, embedding: F16 (or BF16/F32;
    # llama-quantize's presets also put Q8_0 and the K-quants on all but the router)
    # attention, shared expert, LM head: Q8_0, Q2_K..Q6_K (or F16/BF16/F32)
    PROJECTION = "projection"
    EXPERT = "expert"  # routed experts: IQ2_XXS / Q2_K..Q6_K / MXFP4 (or Q8_0/F16/BF16/F32)
    INDEX = "index"  # token-id -> expert-id table: I32


class FormatKind(Enum):
    WEIGHT = "weight"  # loaded from a GGUF and multiplied: every piece
    SOURCE = "source"  # a checkpoint's float type: codecs and CPU kernels, no roles
    INDEX = "index"  # an integer table read raw: loader roles only


Activation = Literal["f32", "q8_0", "q8_k"]
Importance = Literal["unused", "optional", "required"]
ISA = Literal["scalar", "avx2", "avx512", "neon"]
ISAS: tuple[ISA, ...] = ("scalar", "avx2", "avx512", "neon")

# The native/cpu files that define each instruction set's kernels (AVX-512 reuses
# AVX2's table where it has no kernel of its own; NEON's quantized dots are one header
# included twice, baseline and SDOT).
CPU_KERNEL_SOURCES: dict[ISA, tuple[str, ...]] = {
    "scalar": ("cpu_dot_scalar.c", "cpu_dot_kquant_scalar.h", "cpu_dot_iquant_scalar.c"),
    "avx2": ("cpu_dot_avx2.c", "cpu_tile_iq2.c", "cpu_dot_kquant_avx2.h", "cpu_dot_iquant_avx2.c"),
    "avx512": (
        "cpu_dot_avx2.c",
        "cpu_dot_avx512.c",
        "cpu_tile_iq2.c",
        "cpu_tile_f16.c",
        "cpu_dot_kquant_avx2.h",
        "cpu_dot_iquant_avx2.c",
    ),
    "neon": (
        "cpu_dot_neon.c",
        "cpu_dot_neon_quant.h",
        "cpu_dot_neon_kquant.h",
        "cpu_dot_neon_iquant.h",
    ),
}


@dataclass(frozen=True)
class CpuKernels:
    slot: str  # the ds4_dot_table field
    scalar: tuple[str, ...]
    avx2: tuple[str, ...]
    avx512: tuple[str, ...]
    neon: tuple[str, ...]

    def for_isa(self, isa: ISA) -> tuple[str, ...]:
        names: tuple[str, ...] = getattr(self, isa)
        return names


@dataclass(frozen=True)
class QuantFormat:
    ggml_type: GGMLType
    kind: FormatKind
    roles: frozenset[Role] = frozenset()
    importance: Importance = "unused"
    activation: Activation = "f32"  # what x is quantized to for the dot (CPU, Vulkan _q8)
    cpu: CpuKernels | None = None
    vulkan_shaders: tuple[str, ...] = ()
    encodes: bool = True  # ds4 writes it too (False: read-only, decoded and multiplied)

    @property
    def name(self) -> str:
        """The key every implementation binding uses (the GGMLType member name)."""
        return self.ggml_type.name

    @property
    def type_id(self) -> int:
        return int(self.ggml_type)

    @property
    def block_elements(self) -> int:
        return BLOCK_GEOMETRY[self.ggml_type].elements

    @property
    def block_bytes(self) -> int:
        return BLOCK_GEOMETRY[self.ggml_type].nbytes

    @property
    def has_codec(self) -> bool:
        """Decoded to and encoded from float32 by ds4 (numpy and native)."""
        return self.kind is not FormatKind.INDEX

    @property
    def quantized(self) -> bool:
        """Stored as scaled blocks, not one float per value."""
        return self.block_elements > 1


def _cpu(slot: str, *, sdot: bool = True, **extra: tuple[str, ...]) -> CpuKernels:
    """The common case: the same dot_<slot> in the scalar and AVX2 tables (AVX-512
    inheriting AVX2's) and NEON's, a baseline and an SDOT one for the integer dots;
    `extra` replaces an instruction set's list."""
    dot = f"dot_{slot}"
    neon: tuple[str, ...] = (f"{dot}_base", f"{dot}_sdot") if sdot else (dot,)
    base: dict[str, tuple[str, ...]] = {
        "scalar": (dot,),
        "avx2": (dot,),
        "avx512": (dot,),
        "neon": neon,
    }
    base.update(extra)
    return CpuKernels(slot, base["scalar"], base["avx2"], base["avx512"], base["neon"])


_R = Role
QUANT_FORMATS: tuple[QuantFormat, ...] = (
    QuantFormat(
        GGMLType.F32, FormatKind.WEIGHT,
        frozenset({_R.VECTOR, _R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        cpu=_cpu("f32", sdot=False), vulkan_shaders=("matvec_f32",),
    ),
    QuantFormat(
        GGMLType.F16, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        cpu=_cpu("f16", sdot=False, avx512=("dot_f16", "ds4_tile_avx512_f16")),
        vulkan_shaders=("matvec_f16",),
    ),
    QuantFormat(
        GGMLType.BF16, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        cpu=_cpu("bf16", sdot=False), vulkan_shaders=("matvec_bf16",),
    ),
    QuantFormat(
        GGMLType.Q8_0, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_0",
        cpu=_cpu("q8_0", avx512=("dot_q8_0", "ds4_rows_avx512_q8_0", "ds4_tile_avx512_q8_0")),
        vulkan_shaders=("matvec_q8_0", "matvec_q8_0_q8"),
    ),
    QuantFormat(
        GGMLType.Q2_K, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        importance="optional",
        activation="q8_k",
        cpu=_cpu("q2_k", avx512=("ds4_dot_avx512_q2_k", "ds4_rows_avx512_q2_k")),
        vulkan_shaders=("matvec_q2_k", "matvec_q2_k_q8"),
    ),
    QuantFormat(
        GGMLType.Q4_K, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        importance="optional",
        activation="q8_k", cpu=_cpu("q4_k"), vulkan_shaders=("matvec_q4_k", "matvec_q4_k_q8"),
    ),
    QuantFormat(
        GGMLType.IQ2_XXS, FormatKind.WEIGHT, frozenset({_R.EXPERT}), importance="required",
        activation="q8_k",
        cpu=_cpu("iq2_xxs", avx2=("dot_iq2_xxs", "ds4_tile_avx2_iq2_xxs"),
                 avx512=("ds4_dot_avx512_iq2_xxs", "ds4_tile_avx512_iq2_xxs")),
        vulkan_shaders=("matvec_iq2_xxs", "matvec_iq2_xxs_q8"),
    ),
    QuantFormat(
        GGMLType.MXFP4, FormatKind.WEIGHT, frozenset({_R.EXPERT}), activation="q8_0",
        cpu=_cpu("mxfp4", avx512=("ds4_dot_avx512_mxfp4",)),
        vulkan_shaders=("matvec_mxfp4", "matvec_mxfp4_q8"),
    ),
    QuantFormat(GGMLType.I32, FormatKind.INDEX, frozenset({_R.INDEX})),
    # The llama-quantize K-quant presets (Q2_K .. Q6_K) put these on every 2-D weight
    # but the router: projections (attention, shared expert, LM head), routed experts and
    # the float-role matrices (HC fn, compressor, indexer, embedding).
    QuantFormat(
        GGMLType.Q3_K, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_k", cpu=_cpu("q3_k"), vulkan_shaders=("matvec_q3_k", "matvec_q3_k_q8"),
    ),
    QuantFormat(
        GGMLType.Q5_K, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        importance="optional", activation="q8_k", cpu=_cpu("q5_k"),
        vulkan_shaders=("matvec_q5_k", "matvec_q5_k_q8"),
    ),
    QuantFormat(
        GGMLType.Q6_K, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_k", cpu=_cpu("q6_k"), vulkan_shaders=("matvec_q6_k", "matvec_q6_k_q8"),
    ),
    QuantFormat(
        GGMLType.IQ4_NL, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_0", encodes=False,
        cpu=_cpu("iq4_nl", scalar=("ds4_dot_scalar_iq4_nl",), avx2=("ds4_dot_avx2_iq4_nl",),
                 avx512=("ds4_dot_avx2_iq4_nl",)),
        vulkan_shaders=("matvec_iq4_nl", "matvec_iq4_nl_q8"),
    ),
    QuantFormat(
        GGMLType.IQ4_XS, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_k", encodes=False,
        cpu=_cpu("iq4_xs", scalar=("ds4_dot_scalar_iq4_xs",), avx2=("ds4_dot_avx2_iq4_xs",),
                 avx512=("ds4_dot_avx2_iq4_xs",)),
        vulkan_shaders=("matvec_iq4_xs", "matvec_iq4_xs_q8"),
    ),
    QuantFormat(
        GGMLType.IQ2_XS, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_k", encodes=False,
        cpu=_cpu("iq2_xs", scalar=("ds4_dot_scalar_iq2_xs",), avx2=("ds4_dot_avx2_iq2_xs",),
                 avx512=("ds4_dot_avx2_iq2_xs",)),
        vulkan_shaders=("matvec_iq2_xs", "matvec_iq2_xs_q8"),
    ),
    QuantFormat(
        GGMLType.IQ3_XXS, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_k", encodes=False,
        cpu=_cpu("iq3_xxs", scalar=("ds4_dot_scalar_iq3_xxs",), avx2=("ds4_dot_avx2_iq3_xxs",),
                 avx512=("ds4_dot_avx2_iq3_xxs",)),
        vulkan_shaders=("matvec_iq3_xxs", "matvec_iq3_xxs_q8"),
    ),
    QuantFormat(
        GGMLType.IQ3_S, FormatKind.WEIGHT, frozenset({_R.FLOAT, _R.PROJECTION, _R.EXPERT}),
        activation="q8_k", encodes=False,
        cpu=_cpu("iq3_s", scalar=("ds4_dot_scalar_iq3_s",), avx2=("ds4_dot_avx2_iq3_s",),
                 avx512=("ds4_dot_avx2_iq3_s",)),
        vulkan_shaders=("matvec_iq3_s", "matvec_iq3_s_q8"),
    ),
)  # fmt: skip

FORMATS_BY_TYPE: dict[GGMLType, QuantFormat] = {f.ggml_type: f for f in QUANT_FORMATS}

# Types ds4 turns into float32 and back (numpy and native codecs).
DEQUANTIZABLE: frozenset[GGMLType] = frozenset(f.ggml_type for f in QUANT_FORMATS if f.has_codec)
# Those ds4 also writes (the rest it only reads).
ENCODABLE: frozenset[GGMLType] = frozenset(
    f.ggml_type for f in QUANT_FORMATS if f.has_codec and f.encodes
)
# Weight types the native CPU products take, and those whose activation is Q8_K.
CPU_MATMUL_TYPES: frozenset[GGMLType] = frozenset(f.ggml_type for f in QUANT_FORMATS if f.cpu)
Q8K_ACTIVATION_TYPES: frozenset[GGMLType] = frozenset(
    f.ggml_type for f in QUANT_FORMATS if f.cpu and f.activation == "q8_k"
)


def allowed_types(role: Role) -> frozenset[GGMLType]:
    """The types the validator accepts for a tensor of this role."""
    return frozenset(f.ggml_type for f in QUANT_FORMATS if role in f.roles)


@dataclass(frozen=True)
class FoundPieces:
    """What the tree provides, gathered by the caller (tests read the sources and the
    built modules): the input of `missing_pieces`."""

    numpy_codecs: frozenset[str]  # format names bound in NUMPY_CODECS
    native_geometry: Mapping[str, Mapping[int, tuple[int, int]]]  # codec module -> id -> (n, bytes)
    cpu_geometry: Mapping[int, tuple[int, int]]  # id -> (n, bytes) the CPU kernels report
    cpu_slots: Mapping[ISA, Mapping[str, tuple[str, ...]]]  # isa -> slot -> kernels
    shader_sources: frozenset[str]  # stems of native/vulkan/*.comp
    spirv: frozenset[str] | None  # built .spv file names; None when not built


def missing_pieces(fmt: QuantFormat, found: FoundPieces) -> list[str]:
    """Every piece `fmt`'s kind requires that the tree lacks or disagrees with."""
    out: list[str] = []
    weight = fmt.kind is FormatKind.WEIGHT
    if fmt.kind is FormatKind.SOURCE and fmt.roles:
        out.append("a source type must not be accepted by the loader (roles)")
    elif fmt.kind is not FormatKind.SOURCE and not fmt.roles:
        out.append("loader roles (none listed)")
    if fmt.has_codec:
        out += _codec_gaps(fmt, found)
    if fmt.kind is not FormatKind.INDEX:
        out += _cpu_gaps(fmt, found)
    if weight:
        out += _shader_gaps(fmt, found)
    return out


def _codec_gaps(fmt: QuantFormat, found: FoundPieces) -> list[str]:
    out = []
    if fmt.name not in found.numpy_codecs:
        out.append("numpy codec (NUMPY_CODECS)")
    geometry = (fmt.block_elements, fmt.block_bytes)
    for module, table in found.native_geometry.items():
        if module == "ds4._native_quantize" and not fmt.encodes:
            continue  # read-only: the quantize module need not know it
        got = table.get(fmt.type_id)
        if got != geometry:
            out.append(f"native codec in {module} (block {got}, expected {geometry})")
    return out


def _cpu_gaps(fmt: QuantFormat, found: FoundPieces) -> list[str]:
    if fmt.cpu is None:
        return ["native CPU dot kernels (cpu)"]
    out = []
    geometry = (fmt.block_elements, fmt.block_bytes)
    if found.cpu_geometry.get(fmt.type_id) != geometry:
        out.append(f"ds4_cpu_row_bytes does not know the type (expected {geometry})")
    for isa in ISAS:
        want = fmt.cpu.for_isa(isa)
        got = found.cpu_slots.get(isa, {}).get(fmt.cpu.slot, ())
        if not want or want != got:
            out.append(f"{isa} CPU kernels: listed {list(want)}, native has {list(got)}")
    return out


def _shader_gaps(fmt: QuantFormat, found: FoundPieces) -> list[str]:
    if not fmt.vulkan_shaders:
        return ["Vulkan matvec shaders (vulkan_shaders)"]
    out = []
    if fmt.activation != "f32" and not any(s.endswith("_q8") for s in fmt.vulkan_shaders):
        out.append(f"Vulkan integer-dot shader (a matvec_*_q8 over {fmt.activation} activations)")
    for stem in fmt.vulkan_shaders:
        if stem not in found.shader_sources:
            out.append(f"Vulkan shader source native/vulkan/{stem}.comp")
        elif found.spirv is not None:
            out += [
                f"built SPIR-V {spv}"
                for spv in (f"{stem}.spv", f"{stem}.sg.spv")
                if spv not in found.spirv
            ]
    return out
