"""The CaseAnswerer on the in-process engine: one session, reused across cases (the
shared system prompt stays in the state), prefill then the decode loop with the
reply-budget closer as its steer hook (docs/reference/eval.md §3-4)."""

from __future__ import annotations

from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.engine.cancel import CancelCheck, CancelledError
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.eval.prompts import CasePrompt
from ds4.domain.eval.think_close import ThinkCloser
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta
from ds4.domain.generation.loop import TurnSettings, decode_turn, prefill
from ds4.ports.case_answerer import Answer, AnswerFinish, AnswerLimits, AnswerObserver
from ds4.ports.compute import ModelRunner
from ds4.ports.tokenizer import Tokenizer


class EngineAnswerer:
    def __init__(
        self, tokenizer: Tokenizer, runner: ModelRunner, *, backend: str, chunk: int = 0
    ) -> None:
        self._tokenizer = tokenizer
        self._runner = runner
        self._backend = backend
        self._chunk = chunk
        self._session: EngineSession | None = None
        self._encoded: dict[str, list[int]] = {}

    @property
    def ctx(self) -> int | None:
        return None if self._session is None else self._session.ctx

    @property
    def backend(self) -> str:
        return self._backend

    def open(self, ctx: int) -> None:
        """Allocate the session every case runs in."""
        self._session = EngineSession.over(self._runner.new_session(ctx), chunk=self._chunk)

    def close(self) -> None:
        self._session = None

    def encode(self, prompt: CasePrompt) -> list[int]:
        text = prompt.rendered()
        ids = self._encoded.get(text)
        if ids is None:
            ids = self._encoded[text] = self._tokenizer.encode(text)
        return ids

    def prompt_tokens(self, prompt: CasePrompt) -> int | None:
        return len(self.encode(prompt))

    def answer(
        self,
        prompt: CasePrompt,
        limits: AnswerLimits,
        observer: AnswerObserver,
        cancel: CancelCheck,
    ) -> Answer:
        session = self._session
        if session is None:
            raise Ds4Error("the eval session is not open")
        ids = self.encode(prompt)
        tokenizer = self._tokenizer
        thinking = bool(ids) and ids[-1] == tokenizer.special.think_open
        closer = None
        if thinking:
            closer = ThinkCloser(tokenizer.encode(THINK_CLOSE), limits.reply, limits.max_tokens)
        try:
            for progress in prefill(session, ids, cancel=cancel):
                observer.prefill(progress.done, progress.total)
        except CancelledError:
            return Answer("", len(ids), 0, "cancelled")
        except Ds4Error as error:
            return Answer("", len(ids), 0, "error", error=f"prefill failed: {error}")
        settings = TurnSettings(
            sampling=limits.sampling, max_tokens=limits.max_tokens, thinking=thinking
        )
        count = 0

        def on_token(_token: int) -> None:
            nonlocal count
            count += 1
            observer.tokens(count)

        finished: Finished | None = None
        for event in decode_turn(
            session,
            tokenizer,
            settings,
            prompt_tokens=len(ids),
            cancel=cancel,
            on_token=on_token,
            steer=closer,
        ):
            if isinstance(event, ReasoningDelta):
                observer.reasoning(event.text)
            elif isinstance(event, TextDelta):
                observer.text(event.text)
            elif isinstance(event, Finished):
                finished = event
        assert finished is not None  # decode_turn always ends with Finished
        generated = len(finished.tokens)
        close = None if closer is None else closer.finish(finished.text, generated)
        finish: AnswerFinish = "stop"
        if finished.finish in ("length", "cancelled", "error"):
            finish = finished.finish
        return Answer(finished.text, len(ids), generated, finish, close, finished.error)
