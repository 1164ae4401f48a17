#!/usr/bin/env bash
# One command on a GPU machine (NVIDIA driver present, no package registry): the Vulkan
# agreement tests on the GPU, the matvec bandwidth bench on Flash shapes, the weight
# products of 43 Flash layers, and the whole device-resident forward on a Flash-shaped file.
# Needs: this tree with src/ds4/_vulkan_spirv built (make build, or tools/gpu/pack.sh), a
# Python with numpy + cffi + pytest (.venv, or the wheels tools/gpu/pack.sh put in
# tools/gpu/bundle/wheels), and a Vulkan loader (the system's, or bundle/lib's).
# PYTHON picks the interpreter; BENCH_ARGS, FLASH_ARGS and FORWARD_ARGS override the benches'
# flags (small ones to try it on lavapipe, e.g. FORWARD_ARGS="--layers 1 --vocab 1024
# --experts 16 --prompt-tokens 4 --decode-tokens 1 --copy-mb 64").
# Under 10 minutes; writes everything it prints to $OUT/gpu_checks.log when OUT is set.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUNDLE=tools/gpu/bundle
LOG=${OUT:-/tmp}/gpu_checks.log
exec > >(tee "$LOG") 2>&1
echo "== ds4 GPU checks $(date -u +%FT%TZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 ' && [ -f "$BUNDLE/lib/libvulkan.so.1" ]; then
    export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "using the bundled Vulkan loader"
fi
# The NVIDIA driver registers its Vulkan driver in one of these; say which one is seen.
ls /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>/dev/null | sed 's/^/icd: /'
if [ -n "${PYTHON:-}" ]; then
    PY=$PYTHON
elif [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
elif python3 -c 'import numpy, cffi, pytest' 2>/dev/null; then
    PY=python3
elif ls "$BUNDLE"/wheels/*.whl >/dev/null 2>&1; then
    python3 -m venv "$BUNDLE/venv" && "$BUNDLE/venv/bin/pip" install --quiet --no-index \
        --find-links "$BUNDLE/wheels" numpy cffi pytest || exit 1
    PY=$BUNDLE/venv/bin/python
else
    echo "no Python with numpy, cffi and pytest, and no bundle (run tools/gpu/pack.sh)"; exit 1
fi
export PYTHONPATH=src:.
"$PY" - <<'PYEOF' || exit 1
from ds4.adapters.compute.vulkan.runtime import runtime
print("vulkan device:", runtime().dev.describe())
PYEOF
status=0
# Each step's timeout is its own cap or what is left of 570 s since the start, whichever
# is less, so the whole script ends within 10 minutes however slow a step is.
budget() { local left=$((570 - SECONDS)); echo $(( left < $1 ? (left > 1 ? left : 1) : $1 )); }
echo "== agreement tests (kernels; every quant type, both reductions, edge shapes)"
timeout "$(budget 300)" "$PY" -m pytest -q -p no:cacheprovider -o addopts="" tests/unit/vulkan || status=1
if "$PY" -c 'import ds4.apps.cli, ds4._native_cpu' 2>/dev/null; then
    echo "== whole-model agreement (tiny model, --backend vulkan vs reference)"
    timeout "$(budget 300)" "$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
        tests/integration/engine_vulkan || status=1
else
    echo "== whole-model tests skipped: this Python lacks ds4's full dependencies"
fi
echo "== the whole device-resident forward, Flash-shaped (8 layers, 17.4 GB file, 2.2 GB read per decode token)"
# Writes Flash's first 8 layers (real dims, 256 experts, q2 quant mixture, real layer
# kinds, full vocabulary) to a temporary file, prefills 64 tokens, decodes 16.
# shellcheck disable=SC2086
timeout "$(budget 240)" "$PY" bench/vulkan_flash_forward_bench.py \
    ${FORWARD_ARGS:---layers 8 --prompt-tokens 64 --decode-tokens 16 --copy-mb 1024} || status=1
echo "== matvec bandwidth (Flash shapes, random weights, 2 GiB per shape cycled)"
# shellcheck disable=SC2086  # BENCH_ARGS is a word list on purpose
timeout "$(budget 300)" "$PY" bench/vulkan_matvec_bench.py ${BENCH_ARGS:---total-mb 2048 --reps 512 --copy-mb 1024} \
    || status=1
echo "== Flash-shaped weight products of whole layers (43 layers, ~7.6 GB resident)"
# shellcheck disable=SC2086
timeout "$(budget 300)" "$PY" bench/vulkan_flash_decode_bench.py ${FLASH_ARGS:---layers 43 --steps 3} \
    || status=1
if "$PY" -c 'import ds4.apps.cli' 2>/dev/null && [ -f models/demo.gguf ]; then
    echo "== the device-resident forward vs the earlier host forward (demo model, greedy)"
    timeout "$(budget 300)" "$PY" bench/vulkan_device_forward_bench.py --steps 32 --prompt-tokens 64 \
        || status=1
fi
echo "== done (status $status); log in $LOG"
exit $status
