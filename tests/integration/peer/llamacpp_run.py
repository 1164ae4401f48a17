"""Run a GGUF in llama.cpp (the peer) through llama-cpp-python's ctypes binding.

    python llamacpp_run.py MODEL OUT.npz --tokens 0,15,... [--text T] [--greedy N]

Writes OUT.npz with `logits` [n_tokens, n_vocab] (float32, the logits after each
prompt token), `greedy` (N ids decoded greedily after the prompt) and, with --text,
`text_ids` (llama.cpp's tokenization of T, no BOS, special tokens parsed). Run as a
subprocess by the peer tests: llama.cpp reports some misfits with an abort (a failed
GGML_ASSERT), which must end this process, not the test run. Only the binding's
low-level module is imported (its package `__init__` pulls in the high-level API and
its extra dependencies, which nothing here needs).

Environment: DS4_LLAMACPP_BINDING (the directory holding the binding's `llama_cpp`
package) and LLAMA_CPP_LIB_PATH (the directory holding libllama.so); the test sets both
(docs/llamacpp.md).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np


def _binding() -> Any:
    root = Path(os.environ["DS4_LLAMACPP_BINDING"])
    package = types.ModuleType("llama_cpp")
    package.__path__ = [str(root / "llama_cpp")]
    sys.modules["llama_cpp"] = package
    return importlib.import_module("llama_cpp.llama_cpp")  # the ctypes declarations only


def _quiet(lc: Any) -> Any:
    """llama.cpp's log to nowhere but errors (kept alive: ctypes holds a raw pointer)."""

    def sink(level: int, text: bytes, _user: object) -> None:
        if level >= 4:  # GGML_LOG_LEVEL_ERROR
            sys.stderr.write(text.decode("utf-8", "replace"))

    callback = lc.llama_log_callback(sink)
    lc.llama_log_set(callback, ctypes.c_void_p(0))
    return callback


class Peer:
    def __init__(self, lc: Any, model_path: Path, n_ctx: int) -> None:
        self.lc = lc
        lc.llama_backend_init()
        mparams = lc.llama_model_default_params()
        # Off: llama.cpp's CPU weight repacking takes a non-F32 attn_output_a, whose
        # grouped (3-D, permuted) product it then cannot run: an abort at context
        # creation on our tiny shapes (docs/llamacpp.md).
        mparams.use_extra_bufts = False
        self.model = lc.llama_model_load_from_file(str(model_path).encode(), mparams)
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {model_path}")
        cparams = lc.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_ctx
        cparams.n_ubatch = n_ctx
        cparams.n_threads = cparams.n_threads_batch = 1
        self.ctx = lc.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise SystemExit(f"llama.cpp could not make a context for {model_path}")
        self.vocab = lc.llama_model_get_vocab(self.model)
        self.n_vocab = lc.llama_vocab_n_tokens(self.vocab)
        self.pos = 0

    def tokenize(self, text: str) -> list[int]:
        data = text.encode()
        room = len(data) + 16
        out = (self.lc.llama_token * room)()
        n = self.lc.llama_tokenize(self.vocab, data, len(data), out, room, False, True)
        if n < 0:
            raise SystemExit(f"llama.cpp tokenize needs {-n} slots")
        return list(out[:n])

    def decode(self, ids: list[int]) -> np.ndarray:
        """Evaluate ids after the current state; the logits after each one."""
        lc = self.lc
        batch = lc.llama_batch_init(len(ids), 0, 1)
        try:
            for i, token in enumerate(ids):
                batch.token[i] = token
                batch.pos[i] = self.pos + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = True
            batch.n_tokens = len(ids)
            rc = lc.llama_decode(self.ctx, batch)
            if rc != 0:
                raise SystemExit(f"llama_decode returned {rc}")
            rows = [
                np.ctypeslib.as_array(lc.llama_get_logits_ith(self.ctx, i), (self.n_vocab,))
                for i in range(len(ids))
            ]
            self.pos += len(ids)
            return np.array(rows, dtype=np.float32)
        finally:
            lc.llama_batch_free(batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokens", required=True, help="comma-separated prompt ids")
    parser.add_argument("--text", default=None)
    parser.add_argument("--greedy", type=int, default=0)
    parser.add_argument("--ctx", type=int, default=512)
    args = parser.parse_args(argv)
    lc = _binding()
    keep = _quiet(lc)
    peer = Peer(lc, args.model, args.ctx)
    prompt = [int(t) for t in args.tokens.split(",")]
    logits = peer.decode(prompt)
    greedy: list[int] = []
    last = logits[-1]
    for _ in range(args.greedy):
        token = int(np.argmax(last))
        greedy.append(token)
        last = peer.decode([token])[-1]
    arrays: dict[str, Any] = {"logits": logits, "greedy": np.array(greedy, np.int64)}
    if args.text:
        arrays["text_ids"] = np.array(peer.tokenize(args.text), np.int64)
    np.savez(args.out, **arrays)
    del keep
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
