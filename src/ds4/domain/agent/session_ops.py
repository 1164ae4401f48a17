"""/save, /switch, /del, /strip and /list over the session library
(docs/agent.md "Sessions"). A switch restores the engine state from the KV file, so
nothing is evaluated again; a stripped session is rebuilt by prefilling its text."""

from __future__ import annotations

from ds4.domain.agent.core import AgentCore, Conversation
from ds4.domain.agent.history import DEFAULT_TURNS, history_text
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.session_meta import listing_text
from ds4.domain.agent.status import AgentState
from ds4.domain.errors import Ds4Error


class SessionOps:
    def __init__(self, core: AgentCore) -> None:
        self.core = core

    def _library(self) -> SessionLibrary:
        if self.core.library is None:
            raise Ds4Error("saved sessions are not available")
        return self.core.library

    def save(self) -> str:
        c = self.core
        library = self._library()
        conv = c.conv
        if conv.title is None or conv.session_id is None:
            raise Ds4Error("nothing to save")
        c.report(state=AgentState.SAVING)
        try:
            c.sync()  # the transcript's closing EOS is evaluated here
            text = c.tokenizer.decode(conv.tokens)
            record = library.save(
                session_id=conv.session_id,
                title=conv.title,
                created_at=conv.created_at,
                now=c.io.now(),
                tokens=len(conv.tokens),
                text=text,
                payload=c.session.payload(),
            )
        finally:
            c.report(state=AgentState.IDLE)
        conv.dirty = False
        return f"saved session {record.id[:8]} ({record.tokens} tokens)"

    def listing(self) -> str:
        library = self._library()
        return listing_text(library.records(), self.core.io.now(), library.sizes())

    def session_ids(self) -> list[str]:
        return [] if self.core.library is None else [r.id for r in self.core.library.records()]

    def switch(self, prefix: str) -> str:
        c = self.core
        library = self._library()
        record = library.find(prefix)
        loaded = library.load(record)
        user = c.tokenizer.special.user
        if loaded.payload:
            c.session.load_payload(loaded.payload)
            tokens = list(c.session.tokens)
            if len(tokens) != record.tokens:
                c.session.invalidate()
                raise Ds4Error("KV payload token count mismatch")
            prefilled = 0
            how = "restored from its KV file"
        else:
            c.io.notice(f"rebuilding stripped session {record.id[:8]} from rendered text...")
            tokens = c.encode(loaded.text)
            prefilled = c.sync(tokens)
            how = "rebuilt from text"
        system_len = tokens.index(user) if user in tokens else len(tokens)
        c.conv = Conversation(
            tokens,
            system_len,
            title=record.title,
            created_at=record.created_at,
            session_id=record.id,
            datetime_told=True,
            seen_at=len(tokens),
        )
        library.touch(record, c.io.now())
        c.report(state=AgentState.IDLE, last_prefill=prefilled)
        head = (
            f"switched to session {record.id[:8]} ({len(tokens)} tokens, {how}, "
            f"{prefilled} tokens prefilled)\n"
        )
        return head + self.history(DEFAULT_TURNS)

    def delete(self, prefix: str) -> str:
        library = self._library()
        record = library.find(prefix)
        library.delete(record)
        return f"deleted session {record.id[:8]}"

    def strip(self, prefix: str) -> str:
        c = self.core
        library = self._library()
        record = library.find(prefix)
        stripped = library.strip(record, lambda text: len(c.encode(text)), c.io.now())
        return f"stripped session {record.id[:8]} ({stripped.tokens} tokens)"

    def history(self, n: int) -> str:
        c = self.core
        conversation = c.tokenizer.decode(c.conv.tokens[c.conv.system_len :])
        return history_text(conversation, n)
