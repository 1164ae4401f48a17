#!/usr/bin/env bash
# Build and run bench/native/kernel_loop.c against the working tree's kernels; with a git
# revision argument, that revision's AVX-512 Q2_K row kernel is compiled in under another
# name and timed next to the new ones. Usage: bench/native/kernel_loop.sh [REV] [REPS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
flags=(-O2 -std=c11 -ffp-contract=off -fno-fast-math -pthread -D_GNU_SOURCE
       -I"$root/native/cpu" -I"$root/native/common")
srcs=(cpu_dot_avx512.c cpu_dot_avx2.c cpu_dot_scalar.c cpu_tables.c cpu_actquant.c
      cpu_actquant_avx512.c cpu_matmul.c cpu_pool.c cpu_scratch.c cpu_q2k_x8.c
      cpu_q2k_x8_avx512.c cpu_tile_f16.c cpu_tile_iq2.c)
objs=()
for s in "${srcs[@]}"; do
    gcc "${flags[@]}" -c "$root/native/cpu/$s" -o "$out/${s%.c}.o"
    objs+=("$out/${s%.c}.o")
done
extra=()
if [[ $# -ge 1 ]]; then
    git -C "$root" show "$1:native/cpu/cpu_dot_avx512.c" > "$out/old_avx512.c"
    gcc "${flags[@]}" -Dds4_dot_avx512_q2_k=old_dot_avx512_q2_k \
        -Dds4_tile_avx512_q8_0=old_tile_avx512_q8_0 -Dds4_rows_avx512_q2_k=old_rows_q2_k \
        -Dds4_rows_avx512_q8_0=old_rows_q8_0 -c "$out/old_avx512.c" -o "$out/old.o"
    objs+=("$out/old.o")
    extra=(-DOLD_REV)
fi
gcc "${flags[@]}" "${extra[@]}" "$root/bench/native/kernel_loop.c" "${objs[@]}" -o "$out/kernel_loop" -lm
"$out/kernel_loop" "${2:-300}"
