#!/usr/bin/env bash
# Cross-compile the native CPU kernels for aarch64 and run tools/cross/neon_check.c under
# qemu-user: NEON (baseline and SDOT tables) against the scalar kernels, and the matmul
# dispatch. Runs on an x86-64 host. Needs:
#   apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
# Usage: tools/cross/neon_check.sh [build-dir]   (default: a fresh temporary directory)
# The driver runs twice: on QEMU's default CPU ("max", which reports SDOT) and on a
# Cortex-A53 model (no SDOT), so both tables and both dispatch outcomes are exercised.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cc="${CC_AARCH64:-aarch64-linux-gnu-gcc}"
qemu="${QEMU_AARCH64:-qemu-aarch64}"
sysroot="${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}"
for tool in "$cc" "$qemu"; do
    command -v "$tool" >/dev/null || { echo "neon_check: $tool not found" >&2; exit 2; }
done

if [[ $# -ge 1 ]]; then
    out="$1"
    mkdir -p "$out"
else
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
flags=(-O2 -std=c11 -Wall -Wextra -Werror -ffp-contract=off -fno-fast-math -pthread
       -D_GNU_SOURCE -I"$root/native/cpu" -I"$root/native/common")
objs=()
for src in "$root"/native/cpu/*.c "$root/tools/cross/neon_check.c"; do
    obj="$out/$(basename "${src%.c}").o"
    "$cc" "${flags[@]}" -c "$src" -o "$obj"
    objs+=("$obj")
done
"$cc" -pthread "${objs[@]}" -o "$out/neon_check" -lm

status=0
for cpu in max cortex-a53; do
    echo "== qemu-aarch64 -cpu $cpu"
    "$qemu" -L "$sysroot" -cpu "$cpu" "$out/neon_check" || status=1
done
exit "$status"
