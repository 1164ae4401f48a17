"""Encode images with llama.cpp's mtmd library (the peer's libmtmd.so) through ctypes.

    python mtmd_run.py MMPROJ IMAGES.npz OUT.npz --n-embd N

IMAGES.npz holds img0, img1, ... ([h, w, 3] uint8). They are tokenized as one prompt of
image chunks only (no text model: mtmd takes none for image-only prompts), so each
image's lead padding follows from the tokens before it, and each chunk is encoded on
the CPU with flash attention off (it casts K and V to F16). OUT.npz gets emb0, emb1,
... ([n_tokens, n_embd] float32). A subprocess of the peer vision test: a failed
GGML_ASSERT aborts this process, not the test run.

Environment: LLAMA_CPP_LIB_PATH, the directory holding libmtmd.so (docs/vision.md §6).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

import numpy as np

_c = ctypes
CHUNK_IMAGE = 1
FLASH_ATTN_DISABLED = 0


class ContextParams(ctypes.Structure):
    """struct mtmd_context_params (tools/mtmd/mtmd.h at 0c1e570)."""

    _fields_ = [
        ("use_gpu", _c.c_bool), ("device", _c.c_void_p), ("print_timings", _c.c_bool),
        ("n_threads", _c.c_int), ("image_marker", _c.c_char_p), ("media_marker", _c.c_char_p),
        ("flash_attn_type", _c.c_int), ("warmup", _c.c_bool), ("image_min_tokens", _c.c_int),
        ("image_max_tokens", _c.c_int), ("cb_eval", _c.c_void_p),
        ("cb_eval_user_data", _c.c_void_p), ("batch_max_tokens", _c.c_int32),
        ("progress_callback", _c.c_void_p), ("progress_callback_user_data", _c.c_void_p),
    ]  # fmt: skip


class InputPart(ctypes.Structure):
    _fields_ = [("text", _c.c_void_p), ("bitmap", _c.c_void_p)]


def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(Path(os.environ["LLAMA_CPP_LIB_PATH"]) / "libmtmd.so"))
    signatures = {
        "mtmd_context_params_default": ([], ContextParams),
        "mtmd_init_from_file": ([_c.c_char_p, _c.c_void_p, ContextParams], _c.c_void_p),
        "mtmd_free": ([_c.c_void_p], None),
        "mtmd_bitmap_init": ([_c.c_uint32, _c.c_uint32, _c.c_char_p], _c.c_void_p),
        "mtmd_bitmap_free": ([_c.c_void_p], None),
        "mtmd_input_chunks_init": ([], _c.c_void_p),
        "mtmd_input_chunks_size": ([_c.c_void_p], _c.c_size_t),
        "mtmd_input_chunks_get": ([_c.c_void_p, _c.c_size_t], _c.c_void_p),
        "mtmd_input_chunks_free": ([_c.c_void_p], None),
        "mtmd_input_chunk_get_type": ([_c.c_void_p], _c.c_int),
        "mtmd_input_chunk_get_n_tokens": ([_c.c_void_p], _c.c_size_t),
        "mtmd_tokenize_from_parts": (
            [_c.c_void_p, _c.c_void_p, _c.POINTER(_c.POINTER(InputPart)), _c.c_size_t, _c.c_bool],
            _c.c_int32,
        ),
        "mtmd_encode_chunk": ([_c.c_void_p, _c.c_void_p], _c.c_int32),
        "mtmd_get_output_embd": ([_c.c_void_p], _c.POINTER(_c.c_float)),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mmproj", type=Path)
    ap.add_argument("images", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--n-embd", type=int, required=True)
    args = ap.parse_args()
    lib = _library()
    params = lib.mtmd_context_params_default()
    params.use_gpu, params.print_timings, params.warmup = False, False, False
    params.n_threads, params.flash_attn_type = 2, FLASH_ATTN_DISABLED
    ctx = lib.mtmd_init_from_file(str(args.mmproj).encode(), None, params)
    if not ctx:
        print(f"mtmd_init_from_file failed on {args.mmproj}", file=sys.stderr)
        return 1
    data = np.load(args.images)
    images = [np.ascontiguousarray(data[f"img{i}"], dtype=np.uint8) for i in range(len(data.files))]
    bitmaps = [lib.mtmd_bitmap_init(im.shape[1], im.shape[0], im.tobytes()) for im in images]
    parts = [InputPart(None, bm) for bm in bitmaps]
    ptrs = (_c.POINTER(InputPart) * len(parts))(*[_c.pointer(p) for p in parts])
    chunks = lib.mtmd_input_chunks_init()
    rc = lib.mtmd_tokenize_from_parts(ctx, chunks, ptrs, len(parts), False)
    if rc != 0:
        print(f"mtmd_tokenize_from_parts returned {rc}", file=sys.stderr)
        return 1
    out: dict[str, np.ndarray] = {}
    for i in range(lib.mtmd_input_chunks_size(chunks)):
        chunk = lib.mtmd_input_chunks_get(chunks, i)
        if lib.mtmd_input_chunk_get_type(chunk) != CHUNK_IMAGE:
            continue
        n = lib.mtmd_input_chunk_get_n_tokens(chunk)
        if lib.mtmd_encode_chunk(ctx, chunk) != 0:
            print(f"mtmd_encode_chunk failed on chunk {i}", file=sys.stderr)
            return 1
        flat = np.ctypeslib.as_array(lib.mtmd_get_output_embd(ctx), shape=(n * args.n_embd,))
        out[f"emb{len(out)}"] = flat.reshape(n, args.n_embd).copy()
    np.savez(args.out, **out)  # type: ignore[arg-type]
    lib.mtmd_input_chunks_free(chunks)
    for bm in bitmaps:
        lib.mtmd_bitmap_free(bm)
    lib.mtmd_free(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
