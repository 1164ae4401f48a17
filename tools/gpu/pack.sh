#!/usr/bin/env bash
# Prepare, on a machine WITH package access, what tools/gpu/run_checks.sh needs on a GPU
# machine that has only the NVIDIA driver: compiled SPIR-V, the Vulkan loader, and wheels
# for numpy/cffi/pytest. Writes tools/gpu/bundle/ (git-ignored); copy the whole tree over.
# Usage: tools/gpu/pack.sh [PYTHON]   (PYTHON: the interpreter version the GPU machine runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-python3}
BUNDLE=tools/gpu/bundle
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib" "$BUNDLE/wheels"
command -v glslc >/dev/null || { echo "pack: glslc is needed to compile the shaders" >&2; exit 1; }
python3 - <<'PYEOF'
import runpy
from pathlib import Path
compile_shaders = runpy.run_path("native/build/vulkan_shaders.py")["compile_shaders"]
why = compile_shaders(Path("src/ds4/_vulkan_spirv"))
raise SystemExit(f"pack: {why}" if why else 0)
PYEOF
loader=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/ {print $NF; exit}')
[ -n "$loader" ] || { echo "pack: no libvulkan.so.1 here (apt-get install libvulkan1)" >&2; exit 1; }
cp -L "$loader" "$BUNDLE/lib/libvulkan.so.1"
ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
"$PY" -m pip download --quiet --only-binary=:all: --python-version "$ver" \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --dest "$BUNDLE/wheels" numpy cffi pytest
echo "pack: wrote $BUNDLE (loader, wheels for CPython $ver) and src/ds4/_vulkan_spirv"
