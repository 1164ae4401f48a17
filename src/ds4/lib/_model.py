"""`open_model` and `Model`: a validated model file with its tokenizer and runner, and
the `KvFiles` directory its sessions are saved to.

A thin face over the composition root: bootstrap.load_engine opens and validates the
GGUF once and builds the tokenizer and the compute backend over that one mapping,
exactly as `ds4 cli` and `ds4 server` do.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ds4.apps import backends, bootstrap, wiring
from ds4.apps.flag_types import MAX_CTX, MAX_THREADS, model_file_problem
from ds4.apps.options import EngineOptions
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import KvcFlags, SaveReason
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.tools import ToolReplayMemory
from ds4.lib._session import Session, int_in
from ds4.ports.tokenizer import SpecialTokenIds, Tokenizer

DEFAULT_CTX = 4096
DEFAULT_KV_BUDGET_MB = 4096
MAX_KV_BUDGET_MB = 1 << 30  # 1 PiB: any larger number is a typo, not a budget


def open_model(
    path: str | os.PathLike[str] | None = None,
    *,
    backend: str | None = None,
    numerics: str = "ds4",
    threads: int | None = None,
) -> Model:
    """Open and validate a DeepSeek V4 GGUF (Ds4Error naming every problem).

    path: the model file; None takes the rule of `ds4 cli` and `ds4 server`
    ($DS4_MODEL, else ./ds4flash.gguf, else the demo model of a source checkout).
    backend: "cpu" (native kernels; the default where they are built), "reference"
    (numpy) or "vulkan" (the whole forward and the KV state on a Vulkan GPU,
    docs/vulkan.md). numerics: "ds4", "exact" (cpu only) or "fp32". threads: the cpu
    backend's kernel threads (default: every core).
    """
    if path is None:
        chosen = bootstrap.default_model_path(None)
    else:
        chosen = os.fspath(path)
        problem = model_file_problem(Path(chosen))
        if problem is not None:
            raise Ds4Error(f"model file {problem}")
    if threads is not None:
        int_in("threads", threads, 1, MAX_THREADS)
    engine = bootstrap.load_engine(
        EngineOptions(
            chosen,
            backend=backend or backends.default_backend(),
            numerics=numerics,
            threads=threads,
        )
    )
    return Model(chosen, engine)


class Model:
    """An open model: tokenizer, compute backend and the mapped weights.

    Build it with `open_model`. Close it (or use `with`) to release the mapping once
    no session is in use.
    """

    def __init__(self, path: str, engine: bootstrap.Engine) -> None:
        self._path = path
        self._engine = engine

    @property
    def path(self) -> str:
        return self._path

    @property
    def vocab_size(self) -> int:
        return self._engine.tokenizer.vocab_size

    @property
    def special(self) -> SpecialTokenIds:
        """The ids of BOS, EOS, the turn markers, <think>, </think> and the DSML marker."""
        return self._engine.tokenizer.special

    def tokenize(self, text: str) -> list[int]:
        """Ids for `text` exactly as given: special strings (BOS, the turn markers,
        <think>) become their single tokens wherever they occur; no BOS is added."""
        if not isinstance(text, str):
            raise Ds4Error(f"tokenize needs a str, not {type(text).__name__}")
        return self._engine.tokenizer.encode(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of `ids` (bytes that are not UTF-8 become U+FFFD)."""
        vocab = self.vocab_size
        for index, token in enumerate(ids):
            if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < vocab:
                raise Ds4Error(f"ids[{index}] = {token!r} is not a token id (vocab {vocab})")
        return self._engine.tokenizer.decode(ids)

    def new_session(self, ctx: int = DEFAULT_CTX, *, chunk: int = 0) -> Session:
        """A fresh, empty session of `ctx` tokens (2..1048576). chunk: the prefill
        chunk in tokens, where cancellation and progress are checked (0: one chunk)."""
        int_in("ctx", ctx, 2, MAX_CTX)
        int_in("chunk", chunk, 0, MAX_CTX)
        live = self._engine.runner.new_session(ctx)
        return Session(live, EngineSession.over(live, chunk=chunk), self._engine.tokenizer)

    def kv_files(
        self,
        directory: str | os.PathLike[str],
        *,
        budget_mb: int = DEFAULT_KV_BUDGET_MB,
        min_tokens: int = 1,
    ) -> KvFiles:
        """The `.kv` checkpoint files of `directory` (created 0700 if missing), in the
        format and with the checks of the server's disk KV cache. budget_mb: the
        directory's size limit (0: none), kept by evicting the least useful files;
        min_tokens: shorter sessions are not saved."""
        int_in("budget_mb", budget_mb, 0, MAX_KV_BUDGET_MB)
        int_in("min_tokens", min_tokens, 1, MAX_CTX)
        options = KvCacheOptions(budget_bytes=budget_mb << 20, min_tokens=min_tokens)
        return KvFiles(
            os.fspath(directory),
            options,
            quant_bits=self._engine.runner.routed_quant_bits,
            model_tag=self._engine.model_tag(),
            tokenizer=self._engine.tokenizer,
        )

    def close(self) -> None:
        """Release the mapping (it stays while arrays that view it are alive)."""
        if self._engine.model is not None:
            self._engine.model.file.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ds4.lib.Model {self._path!r}>"


# ---- `.kv` files: save sessions to, and restore them from, a directory ---------------
# The server's disk KV cache (kvcache.disk_cache.DiskCache over the directory store,
# docs/kv-cache.md): each file is the session's payload keyed by the text its tokens
# spell, checksummed, written atomically, evicted by the same policy when the
# directory outgrows its budget. Loading picks the longest file whose key is a prefix
# of the text asked for, so a library and `ds4 server --kv-disk-dir` on the same model
# can share a directory.


log = logging.getLogger("ds4.kvcache")


class KvFiles:
    """A `.kv` file directory for one model. Get one from `Model.kv_files`."""

    def __init__(
        self,
        directory: str,
        options: KvCacheOptions,
        *,
        quant_bits: int,
        model_tag: int,
        tokenizer: Tokenizer,
    ) -> None:
        self._tokenizer = tokenizer
        self.directory = directory
        self._cache = DiskCache(
            wiring.kv_store(directory, log.info),
            wiring.system_clock(),
            options,
            quant_bits=quant_bits,
            model_tag=model_tag,
            log=log.info,
        )

    def save(
        self,
        session: Session,
        text: str | None = None,
        *,
        tool_memory: ToolReplayMemory | None = None,
    ) -> bool:
        """Write the session's whole state keyed by `text` (default: the text of its
        tokens; give the prompt you rendered when you have it). With tool_memory, the
        sampled DSML blocks that occur in the text travel in the file too. False when
        skipped: shorter than min_tokens, or larger than the whole budget."""
        key = self._tokenizer.decode(session.tokens) if text is None else text
        trailer = b"" if tool_memory is None else tool_memory.ktm_trailer(key)
        return self._cache.save(
            session._live_session(), key.encode(), SaveReason.UNKNOWN, trailer=trailer
        )

    def load(
        self, session: Session, text: str, *, tool_memory: ToolReplayMemory | None = None
    ) -> int:
        """Restore the longest saved state whose key is a prefix of `text`; return its
        token count (0: none found, the session is left alone). A file that fails its
        checks is set aside, never loaded. With tool_memory, the file's DSML blocks are
        remembered again. Then prefill the whole prompt: only the rest is evaluated."""
        loaded = self._cache.load(session._live_session(), text.encode())
        if loaded is None:
            return 0
        if tool_memory is not None and loaded.flags & KvcFlags.KTM_TRAILER:
            tool_memory.load_ktm(loaded.trailer)
        return loaded.tokens

    def __len__(self) -> int:
        """How many usable files the directory holds."""
        return len(self._cache.store.entries())
