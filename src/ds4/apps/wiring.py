"""Which adapter serves each port: one small factory per port.

With bootstrap.py and backends.py (the compute port: one spec per backend) this is the
composition root, and the only apps code that imports ds4.adapters
(tests/unit/test_layering.py checks it). Adapters load lazily, so a
command pays only for what it uses.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

import numpy as np
import numpy.typing as npt

from ds4.domain.convert.plan import Chunk, PlannedTensor
from ds4.domain.errors import Ds4Error
from ds4.domain.eval.case_schema import CaseSet
from ds4.domain.gguf.records import MetaValue
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.shards import Shard
from ds4.ports.agent import Browser, SessionIndex, Shell, Workspace
from ds4.ports.constraint import ConstraintCompiler
from ds4.ports.kv_store import KVStore
from ds4.ports.model_file import Checkpoint, Dequantizer, ModelFile, Quantizer
from ds4.ports.model_hub import ModelHub
from ds4.ports.response_archive import ResponseArchive
from ds4.ports.system import Clock, MemoryRoom, Pacer, RandomSource, Timer
from ds4.ports.tokenizer import Tokenizer
from ds4.ports.vision import ImageDecoder, VisionEncoder

if TYPE_CHECKING:
    from ds4.adapters.eval.answerers import EndpointAnswerer
    from ds4.adapters.eval.files import EvalTraceFile
    from ds4.adapters.quant.imatrix_file import Imatrix
    from ds4.adapters.tokenizer.vocabulary import TokenizerBackend, Vocabulary

DequantBackend = Literal["native", "numpy"]

# ---- model files -----------------------------------------------------------------


@dataclass(frozen=True)
class OpenedModel:
    """A main-model GGUF, mapped and validated once; tokenizer, runner and the KV
    model tag all read this one mapping."""

    file: ModelFile
    hparams: DeepSeekV4HParams


def open_model_file(path: str, *, prefetch: bool = False) -> ModelFile:
    """The GGUF as it is (no model validation: `gguf inspect` reports the problems)."""
    from ds4.adapters.gguf.reader import GGUFFile

    return GGUFFile(path, prefetch=prefetch)


def open_model(path: str, *, shards: Sequence[str] = ()) -> OpenedModel:
    """Open and validate a main-model GGUF (Ds4Error naming every problem); with
    `shards`, the layer-shard files of one model opened as one (`path` unused:
    docs/distributed.md#layer-shard-files)."""
    if shards:
        from ds4.adapters.gguf.shard_set import load_shard_set

        shard_set, hp = load_shard_set(shards)
        return OpenedModel(shard_set, hp)
    from ds4.adapters.gguf.model_files import load_model

    model, hparams = load_model(path)
    return OpenedModel(model, hparams)


# ---- tokenizer -------------------------------------------------------------------


def tokenizer(
    source: str | None = None, backend: TokenizerBackend = "native", *, gguf_only: bool = False
) -> Tokenizer:
    """A tokenizer on its own: from a GGUF's metadata, a tokenizer.json, or (None) the
    official one. gguf_only: `source` names a model, so anything but a GGUF is an error.
    (With a model already open, use tokenizer_from_model: no second open.)"""
    from ds4.adapters.tokenizer.vocabulary import is_tokenizer_json, load_tokenizer_json
    from ds4.domain.model.validation import file_kind, mtp_as_model_error

    # Not a tokenizer.json: the GGUF reader refuses it with the line inspect prints.
    if source is not None and (gguf_only or not is_tokenizer_json(source)):
        model_file = open_model_file(source)
        try:
            if file_kind(model_file.tensors) == "mtp":
                raise Ds4Error(mtp_as_model_error(source))
            return tokenizer_from_model(model_file, backend)
        finally:
            model_file.close()
    return _build_tokenizer(load_tokenizer_json(source), backend)


def tokenizer_from_model(model: ModelFile, backend: TokenizerBackend = "native") -> Tokenizer:
    """The tokenizer embedded in an open model's `tokenizer.ggml.*` metadata."""
    from ds4.adapters.tokenizer.vocabulary import vocabulary_from_gguf_metadata

    return _build_tokenizer(vocabulary_from_gguf_metadata(model.metadata), backend)


def _build_tokenizer(vocab: Vocabulary, backend: TokenizerBackend) -> Tokenizer:
    from ds4.adapters.tokenizer.vocabulary import build_tokenizer

    return build_tokenizer(vocab, backend)


def constraint_compiler(tokenizer: Tokenizer) -> ConstraintCompiler:
    """Reply grammars over `tokenizer`'s vocabulary (llguidance; its view of the
    vocabulary is built once per tokenizer, at the first grammar)."""
    from ds4.adapters.constraint.llguidance import LlguidanceCompiler

    return LlguidanceCompiler(tokenizer)


def tokenizer_records(tokenizer_json: str | None = None) -> dict[str, MetaValue]:
    """The `tokenizer.ggml.*` GGUF records of a tokenizer.json (None: the official one)."""
    from ds4.adapters.tokenizer.vocabulary import load_tokenizer_json, tokenizer_metadata

    return tokenizer_metadata(load_tokenizer_json(tokenizer_json))


# ---- quantization and conversion -------------------------------------------------


def dequantizer(backend: DequantBackend = "native") -> Dequantizer:
    if backend == "numpy":
        from ds4.adapters.quant.numpy_codec import NumpyDequantizer

        return NumpyDequantizer()
    from ds4.adapters.quant.native_codec import NativeDequantizer

    return NativeDequantizer()


def quantizer(backend: DequantBackend = "native", threads: int | None = None) -> Quantizer:
    """Native by default, on every core (the bytes do not depend on the thread count)."""
    if backend == "numpy":
        from ds4.adapters.quant.numpy_codec import NumpyQuantizer

        return NumpyQuantizer()
    from ds4.adapters.quant.native_codec import NativeQuantizer

    return NativeQuantizer(threads=threads or os.cpu_count() or 1)


# ---- images in (docs/vision.md) ------------------------------------------------------


def vision_encoder(path: str, backend: DequantBackend = "native") -> VisionEncoder:
    """The reference encoder over a validated deepseek4v mmproj file (`--vision FILE`)."""
    from ds4.adapters.compute.reference.vision import ReferenceVisionEncoder
    from ds4.adapters.gguf.vision_files import load_vision

    model, hp = load_vision(path)
    try:
        return ReferenceVisionEncoder(model, hp, dequantizer(backend))
    finally:
        model.close()  # the weights are decoded copies; the mapping can go


def image_decoder() -> ImageDecoder:
    """PNG / JPEG bytes to pixels (Pillow)."""
    from ds4.adapters.vision.pillow_decoder import PillowDecoder

    return PillowDecoder()


def open_checkpoint(directory: str | os.PathLike[str]) -> Checkpoint:
    from ds4.adapters.checkpoint import SafetensorsCheckpoint

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


def write_model(
    path: Path,
    metadata: Mapping[str, MetaValue],
    plans: Iterable[PlannedTensor],
    produce: Callable[[PlannedTensor], Iterable[Chunk]],
    quantizer: Quantizer,
    *,
    progress: Callable[[PlannedTensor], None] | None = None,
) -> Path:
    """Write a model GGUF tensor by tensor; the file appears at `path` only when complete."""
    from ds4.adapters.gguf.writer import write_model as write

    return write(path, metadata, plans, produce, quantizer, progress=progress)


def write_shard(
    model: ModelFile, shard: Shard, path: Path, progress: Callable[[int], None]
) -> Path:
    """One layer-shard file of `model` (ds4 gguf split); it appears only when complete."""
    from ds4.adapters.gguf.splitter import write_shard as write

    return write(model, shard, path, progress)


@contextmanager
def atomic_write(path: Path) -> Iterator[BinaryIO]:
    """A binary handle whose file appears at `path` only if the block succeeds."""
    from ds4.adapters.files import atomic_write as write

    with write(path) as handle:
        yield handle


# ---- the server's world ----------------------------------------------------------


def random_source() -> RandomSource:
    """Unpredictable bytes for tool ids and unseeded sampling (the OS CSPRNG)."""
    from ds4.adapters.system import SystemRandom

    return SystemRandom()


def memory_room() -> MemoryRoom:
    """The memory this process may use: MemAvailable, its cgroup's and RLIMIT_AS's room."""
    from ds4.adapters.system import SystemMemory

    return SystemMemory()


def pacer() -> Pacer:
    from ds4.adapters.system import SystemClock

    return SystemClock()


def system_clock() -> Clock:
    from ds4.adapters.system import SystemClock

    return SystemClock()


def kv_store(directory: str, log: Callable[[str], None]) -> KVStore:
    """The disk KV cache's files in a local directory (created 0700)."""
    from ds4.adapters.storage.kv_disk_store import DiskKVStore

    return DiskKVStore(directory, log=log)


def response_archive(kv_directory: str, log: Callable[[str], None]) -> ResponseArchive:
    """Stored Responses records on disk, beside the KV files (DIR/responses)."""
    from ds4.adapters.storage.response_files import SUBDIRECTORY, ResponseFiles

    return ResponseFiles(Path(kv_directory) / SUBDIRECTORY, log=log)


def kv_disk_usage(directory: str) -> Callable[[], int]:
    """Bytes of the checkpoint files in the disk KV cache directory, read when called
    (the /metrics gauge; safe beside the worker's own KVStore)."""
    from ds4.adapters.storage.kv_disk_store import kv_files_bytes

    return lambda: kv_files_bytes(directory)


# ---- ds4 eval ----------------------------------------------------------------------


def eval_case_files(paths: Sequence[str], fmt: str = "auto") -> CaseSet:
    """Cases from files (our JSONL, or a public benchmark's format; docs/eval.md)."""
    from ds4.adapters.eval.files import read_case_files

    return read_case_files(paths, fmt)


def eval_trace_bytes(path: str) -> bytes:
    """A trace file's bytes (Ds4Error, exit 2, when it cannot be read)."""
    from ds4.adapters.eval.files import MAX_CASE_FILE
    from ds4.adapters.files import read_limited

    try:
        return read_limited(path, MAX_CASE_FILE)
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise Ds4Error(f"cannot read trace {path}: {reason}") from None


def eval_trace_file(path: str) -> EvalTraceFile:
    """The --trace file, written as the run goes and put in place when it ends."""
    from ds4.adapters.eval.files import EvalTraceFile

    return EvalTraceFile(path)


def endpoint_answerer(
    url: str, *, model: str, api_key: str | None, timeout: float
) -> EndpointAnswerer:
    """ds4 eval against an OpenAI-compatible server (--endpoint)."""
    from ds4.adapters.eval.answerers import EndpointAnswerer

    return EndpointAnswerer(url, model=model, api_key=api_key, timeout=timeout)


def system_timer() -> Timer:
    from ds4.adapters.system import SystemClock

    return SystemClock()


def eval_text_file(path: str) -> str:
    """A case file's text (Ds4Error naming the file when it cannot be read)."""
    from ds4.adapters.eval.files import read_text

    return read_text(path)


# ---- the agent's world -----------------------------------------------------------


def agent_workspace(root: str) -> Workspace:
    """The agent's files, rooted at the working directory."""
    from ds4.adapters.agent.tools import LocalWorkspace

    return LocalWorkspace(root)


def agent_shell(cwd: str) -> Shell:
    """The agent's bash jobs (/bin/sh -c, own process group, output to a temp file)."""
    from ds4.adapters.agent.tools import LocalShell

    return LocalShell(cwd)


def agent_browser() -> Browser:
    """visit_page's headless Chromium (started on first use; Playwright imported then)."""
    from ds4.adapters.agent.tools import ChromiumBrowser

    return ChromiumBrowser()


def agent_session_index(directory: str) -> SessionIndex:
    """The JSON records of the agent's saved sessions (directory created 0700)."""
    from ds4.adapters.agent.session_index import JsonSessionIndex

    return JsonSessionIndex(directory)


# ---- the model hub ---------------------------------------------------------------


def model_hub(token: str | None) -> ModelHub:
    """`ds4 pull`'s hub: huggingface_hub against HF_ENDPOINT (a mirror) when set, else
    huggingface.co; `token` None leaves it to HF_TOKEN and the token cache."""
    from ds4.adapters.model_hub import HuggingFaceHub

    return HuggingFaceHub(token=token, endpoint=os.environ.get("HF_ENDPOINT"))
