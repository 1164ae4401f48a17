"""`KvFiles`: save sessions to, and restore them from, a directory of `.kv` files.

The server's disk KV cache (kvcache.disk_cache.DiskCache over the directory store,
docs/kv-cache.md): each file is the session's payload keyed by the text its tokens
spell, checksummed, written atomically, evicted by the same policy when the
directory outgrows its budget. Loading picks the longest file whose key is a prefix
of the text asked for, so a library and `ds4 server --kv-disk-dir` on the same model
can share a directory.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ds4.apps import wiring
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import KvcFlags, SaveReason
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.tools import ToolReplayMemory
from ds4.ports.tokenizer import Tokenizer

if TYPE_CHECKING:
    from ds4.lib._session import Session

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
