#!/usr/bin/env bash
# Build the peer llama.cpp the interoperability tests run against (docs/llamacpp.md):
# the llama.cpp vendored in the llama-cpp-python 0.3.36 sdist on PyPI (commit 0c1e570),
# cmake Release, GGML_NATIVE=ON, shared libraries, into a cache outside the repository.
#
#   tools/peer/build_llamacpp.sh [CACHE]      # CACHE: $DS4_PEER_CACHE, else ~/.cache/ds4/peer
#
# Leaves CACHE/llama_cpp_python-0.3.36/ (the unpacked sdist: vendor/llama.cpp with its
# convert_hf_to_gguf.py and gguf-py, and the ctypes binding llama_cpp/) and
# CACHE/llama.cpp-build/bin/ (libllama.so, llama-bench, llama-quantize, llama-tokenize,
# libmtmd.so and llama-mtmd-cli for the vision test, docs/vision.md).
# Running it again reuses what is there. Needs pip, cmake, a C++17 compiler; no network
# after the one download.
set -euo pipefail

VERSION=0.3.36
CACHE=${1:-${DS4_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ds4/peer}}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
SRC="$CACHE/llama_cpp_python-$VERSION"
BUILD="$CACHE/llama.cpp-build"

mkdir -p "$CACHE"
if [ ! -d "$SRC/vendor/llama.cpp" ]; then
    "$PYTHON" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE"
    tar -xzf "$CACHE/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE"
fi
cmake -S "$SRC/vendor/llama.cpp" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
    > "$CACHE/cmake-config.log"
cmake --build "$BUILD" -j "$JOBS" --target llama llama-bench llama-quantize llama-tokenize \
    llama-mtmd-cli \
    > "$CACHE/build.log"
echo "peer llama.cpp $VERSION built: $BUILD/bin (export DS4_PEER_CACHE=$CACHE for the tests)"
