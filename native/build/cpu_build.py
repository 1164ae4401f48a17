"""cffi builder for ds4._native_cpu (run by the package build, never at import)."""

from pathlib import Path

from cffi import FFI

ffibuilder = FFI()


def public_declarations(*headers: str) -> str:
    """The headers' declarations for cffi: the same text the C compiler reads, minus
    preprocessor lines (cffi does not run the preprocessor), so the two cannot drift."""
    root = Path(__file__).resolve().parents[2]
    lines: list[str] = []
    for header in headers:
        text = (root / header).read_text(encoding="utf-8")
        lines += [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return "\n".join(lines)


HEADERS = (
    "native/cpu/ds4_cpu.h",
    "native/cpu/ds4_forward.h",
    "native/cpu/ds4_seq.h",
    "native/cpu/ds4_scratch.h",
    "native/cpu/ds4_expert_cache.h",
)

ffibuilder.cdef(public_declarations(*HEADERS))
ffibuilder.set_source(
    "ds4._native_cpu",
    "".join(f'#include "{Path(h).name}"\n' for h in HEADERS),
    sources=[
        "native/cpu/cpu_actquant.c",
        "native/cpu/cpu_actquant_avx512.c",
        "native/cpu/cpu_dot_scalar.c",
        "native/cpu/cpu_dot_avx2.c",
        "native/cpu/cpu_dot_avx512.c",
        "native/cpu/cpu_dot_neon.c",
        "native/cpu/cpu_dot_iquant_scalar.c",
        "native/cpu/cpu_dot_iquant_avx2.c",
        "native/cpu/cpu_matmul.c",
        "native/cpu/cpu_moe.c",
        "native/cpu/cpu_pool.c",
        "native/cpu/cpu_probe.c",
        "native/cpu/cpu_q2k_x8.c",
        "native/cpu/cpu_q2k_x8_avx512.c",
        "native/cpu/cpu_scratch.c",
        "native/cpu/cpu_tables.c",
        "native/cpu/cpu_tile_f16.c",
        "native/cpu/cpu_tile_iq2.c",
        "native/cpu/expert_cache.c",
        "native/cpu/fwd_attn.c",
        "native/cpu/fwd_ffn.c",
        "native/cpu/fwd_layer.c",
        "native/cpu/fwd_matmul.c",
        "native/cpu/fwd_mtp.c",
        "native/cpu/fwd_ops.c",
        "native/cpu/fwd_seq.c",
        "native/cpu/fwd_topk.c",
        "native/cpu/fwd_vec.c",
    ],
    include_dirs=["native/cpu", "native/common"],
    # No contraction and no fast-math: the scalar kernels must round exactly like the
    # numpy reference. SIMD code asks for AVX2/FMA (x86-64) or SDOT (aarch64) per function
    # (target attributes), so one build runs on any CPU of its architecture and picks the
    # kernels at run time.
    extra_compile_args=[
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-ffp-contract=off",
        "-fno-fast-math",
        "-pthread",
        "-D_GNU_SOURCE",
    ],
    extra_link_args=["-pthread"],
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
