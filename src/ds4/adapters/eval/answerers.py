"""The CaseAnswerer port's two adapters: the in-process engine session, and an
OpenAI-compatible server over HTTP (docs/eval.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from ds4.domain.dsml.syntax import THINK_CLOSE
from ds4.domain.engine.cancel import CancelCheck, CancelledError
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.eval.prompts import NATURAL, CasePrompt, ThinkCloser
from ds4.domain.eval.traces import ThinkClose
from ds4.domain.generation.events import Finished, ReasoningDelta, TextDelta
from ds4.domain.generation.loop import TurnSettings, decode_turn, prefill
from ds4.ports.case_answerer import Answer, AnswerFinish, AnswerLimits, AnswerObserver
from ds4.ports.compute import ModelRunner
from ds4.ports.tokenizer import Tokenizer

# --- The in-process engine ------------------------------------------------------------
# The CaseAnswerer on the in-process engine: one session, reused across cases (the
# shared system prompt stays in the state), prefill then the decode loop with the
# reply-budget closer as its steer hook (docs/reference/eval.md §3-4).


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


# --- An OpenAI-compatible endpoint ----------------------------------------------------
# The CaseAnswerer on an OpenAI-compatible server: POST {url}/v1/chat/completions with
# stream on, the case's system and user prompt as two messages (docs/eval.md
# "Endpoints").
#
# The output is rebuilt in the engine's raw form so extraction and traces are the same:
# `reasoning_content` deltas, then `</think>` once the answer begins, then `content`.
# What a remote server cannot do is not pretended: the reply-budget closes are the
# server's business (only a natural close is recorded), prompt and generated token
# counts are the server's `usage`, and the context is unknown (nothing is skipped).

CHAT_PATH = "/chat/completions"


def chat_url(base: str) -> str:
    """`http://host:8000`, `.../v1` or the full `.../v1/chat/completions`."""
    url = base.rstrip("/")
    if url.endswith(CHAT_PATH):
        return url
    if not url.endswith("/v1"):
        url += "/v1"
    return url + CHAT_PATH


def _error_text(response: httpx.Response) -> str:
    try:
        body = json.loads(response.read())
    except ValueError:
        return response.reason_phrase or "error"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.reason_phrase or "error"


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if isinstance(chunk, dict):
            yield chunk


class _Stream:
    """The state of one streamed answer."""

    def __init__(self, observer: AnswerObserver) -> None:
        self.observer = observer
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.chunks = 0
        self.reasoning_chunks = 0
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}

    def take(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            text = delta.get("content")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                self.reasoning_chunks += 1
                self.observer.reasoning(thought)
            if isinstance(text, str) and text:
                self.content.append(text)
                self.observer.text(text)
            if (isinstance(thought, str) and thought) or (isinstance(text, str) and text):
                self.chunks += 1
                self.observer.tokens(self.chunks)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])

    def output(self) -> str:
        reasoning, content = "".join(self.reasoning), "".join(self.content)
        if not reasoning:
            return content
        ended = bool(content) or self.finish == "stop"
        return reasoning + ("</think>" + content if ended else "")

    def usage_count(self, name: str, fallback: int) -> int:
        value = self.usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else fallback

    def reasoning_tokens(self) -> int:
        details = self.usage.get("completion_tokens_details")
        value = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return self.reasoning_chunks


class EndpointUnreachableError(Ds4Error):
    """`--endpoint` names no server that answers: the run fails before its first case
    instead of reporting every case as an error or PENDING."""

    exit_code = 1


class EndpointAnswerer:
    def __init__(
        self,
        url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = chat_url(url)
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=min(timeout, 30.0))
        )

    @property
    def ctx(self) -> int | None:
        return None

    @property
    def backend(self) -> str:
        return "endpoint"

    def check_reachable(self) -> None:
        """One GET of the chat URL: any HTTP reply (405 included) proves a server is
        there; a transport error (refused, unresolvable, timed out) is the run's end."""
        try:
            self._client.get(self.url, timeout=httpx.Timeout(10.0)).close()
        except httpx.TransportError as error:
            raise EndpointUnreachableError(
                f"--endpoint {self.url}: no server answers ({error or type(error).__name__})"
            ) from None

    def prompt_tokens(self, prompt: CasePrompt) -> int | None:
        return None

    def body(self, prompt: CasePrompt, limits: AnswerLimits) -> dict[str, object]:
        s = limits.sampling
        return {
            "model": self._model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": limits.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "thinking": {"type": "enabled" if prompt.think_mode.thinking else "disabled"},
        }

    def answer(
        self,
        prompt: CasePrompt,
        limits: AnswerLimits,
        observer: AnswerObserver,
        cancel: CancelCheck,
    ) -> Answer:
        stream = _Stream(observer)
        finish: AnswerFinish = "stop"
        try:
            with self._client.stream("POST", self.url, json=self.body(prompt, limits)) as reply:
                if reply.status_code != 200:
                    message = f"HTTP {reply.status_code} from {self.url}: {_error_text(reply)}"
                    return Answer("", 0, 0, "error", error=message)
                for chunk in _events(reply):
                    if cancel():
                        finish = "cancelled"
                        break
                    stream.take(chunk)
        except httpx.HTTPError as error:
            return Answer(stream.output(), 0, stream.chunks, "error", error=f"{self.url}: {error}")
        if finish != "cancelled" and stream.finish == "length":
            finish = "length"
        output = stream.output()
        close = None
        if stream.reasoning and output.find("</think>") >= 0:
            index = stream.reasoning_tokens() + 1
            close = ThinkClose(NATURAL, index, limits.max_tokens - index + 1, 0)
        return Answer(
            output,
            stream.usage_count("prompt_tokens", 0),
            stream.usage_count("completion_tokens", stream.chunks),
            finish,
            close,
        )

    def close(self) -> None:
        self._client.close()
