"""Encode images with llama.cpp's mtmd library (the peer's libmtmd.so) through ctypes.

    python mtmd_run.py MMPROJ IMAGES.npz OUT.npz --n-embd N [--model M --texts JSON]

IMAGES.npz holds img0, img1, ... ([h, w, 3] uint8). They are tokenized as one prompt,
image after image, each one after its text of --texts (a JSON list, one string per
image; needs --model, a text model for mtmd's tokenizer), so each image's lead padding
follows from the tokens before it. Each image chunk is encoded on the CPU with flash
attention off (it casts K and V to F16). OUT.npz gets emb0, emb1, ... ([n_tokens,
n_embd] float32) and before0, before1, ... (the prompt positions before each image). A
subprocess of the peer vision test: a failed GGML_ASSERT aborts this process, not the
test run.

Environment: LLAMA_CPP_LIB_PATH, the directory holding libmtmd.so and libllama.so, and
with --model DS4_LLAMACPP_BINDING, the directory holding llama-cpp-python's `llama_cpp`
package (docs/vision.md §6).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

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


class InputText(ctypes.Structure):
    _fields_ = [("text", _c.c_char_p), ("text_len", _c.c_size_t), ("add_special", _c.c_bool),
                ("parse_special", _c.c_bool)]  # fmt: skip


class InputPart(ctypes.Structure):
    _fields_ = [("text", _c.c_void_p), ("bitmap", _c.c_void_p)]


def _text_model(path: Path) -> Any:
    """The text model loaded through llama-cpp-python's ctypes declarations (only the
    low-level module: the package `__init__` pulls in what nothing here needs)."""
    package = types.ModuleType("llama_cpp")
    package.__path__ = [str(Path(os.environ["DS4_LLAMACPP_BINDING"]) / "llama_cpp")]
    sys.modules["llama_cpp"] = package
    lc = importlib.import_module("llama_cpp.llama_cpp")
    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(str(path).encode(), lc.llama_model_default_params())
    if not model:
        raise SystemExit(f"llama.cpp could not load {path}")
    return model


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
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--texts", default=None)
    args = ap.parse_args()
    text_model = _text_model(args.model) if args.model is not None else None
    lib = _library()
    params = lib.mtmd_context_params_default()
    params.use_gpu, params.print_timings, params.warmup = False, False, False
    params.n_threads, params.flash_attn_type = 2, FLASH_ATTN_DISABLED
    ctx = lib.mtmd_init_from_file(str(args.mmproj).encode(), text_model, params)
    if not ctx:
        print(f"mtmd_init_from_file failed on {args.mmproj}", file=sys.stderr)
        return 1
    data = np.load(args.images)
    images = [np.ascontiguousarray(data[f"img{i}"], dtype=np.uint8) for i in range(len(data.files))]
    bitmaps = [lib.mtmd_bitmap_init(im.shape[1], im.shape[0], im.tobytes()) for im in images]
    texts = [t.encode() for t in json.loads(args.texts)] if args.texts else []
    records = [InputText(t, len(t), False, True) for t in texts]
    parts = []
    for i, bm in enumerate(bitmaps):
        if i < len(records) and records[i].text_len:
            parts.append(InputPart(_c.cast(_c.pointer(records[i]), _c.c_void_p), None))
        parts.append(InputPart(None, bm))
    ptrs = (_c.POINTER(InputPart) * len(parts))(*[_c.pointer(p) for p in parts])
    chunks = lib.mtmd_input_chunks_init()
    rc = lib.mtmd_tokenize_from_parts(ctx, chunks, ptrs, len(parts), False)
    if rc != 0:
        print(f"mtmd_tokenize_from_parts returned {rc}", file=sys.stderr)
        return 1
    out: dict[str, np.ndarray] = {}
    n_past, k = 0, 0
    for i in range(lib.mtmd_input_chunks_size(chunks)):
        chunk = lib.mtmd_input_chunks_get(chunks, i)
        n = lib.mtmd_input_chunk_get_n_tokens(chunk)
        n_past += n
        if lib.mtmd_input_chunk_get_type(chunk) != CHUNK_IMAGE:
            continue
        out[f"before{k}"] = np.array(n_past - n)
        if lib.mtmd_encode_chunk(ctx, chunk) != 0:
            print(f"mtmd_encode_chunk failed on chunk {i}", file=sys.stderr)
            return 1
        flat = np.ctypeslib.as_array(lib.mtmd_get_output_embd(ctx), shape=(n * args.n_embd,))
        out[f"emb{k}"] = flat.reshape(n, args.n_embd).copy()
        k += 1
    np.savez(args.out, **out)  # type: ignore[arg-type]
    lib.mtmd_input_chunks_free(chunks)
    for bm in bitmaps:
        lib.mtmd_bitmap_free(bm)
    lib.mtmd_free(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
