"""One POST request: read the body, parse and prepare it off the event loop, queue the
job, then answer as JSON or SSE while watching for the client to go away.

A disconnect (the ASGI server reports it as soon as the socket closes) sets the
job's cancel flag, which the worker honours at the next chunk or token boundary,
also while the job is still queued. SSE keepalive comments go out after
`keepalive_seconds` of silence on the wire, whatever the worker is doing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from ds4.adapters.http.access_log import request_record
from ds4.adapters.http.guard import Receive, Scope, Send, header, send_error, send_json
from ds4.adapters.http.inference_worker import Job, JobFailed, JobOutput
from ds4.adapters.http.large_bodies import is_large
from ds4.adapters.http.server_state import HttpConfig, ServerState
from ds4.domain.chat import with_prefix
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.generation.events import Finished, PrefillProgress
from ds4.domain.serving.generation_request import Api, GenerationRequest
from ds4.domain.serving.prepare import PreparedJob, prepare_job
from ds4.domain.serving.served_events import PromptReady
from ds4.wire.count_tokens import count_tokens_body
from ds4.wire.errors import stream_error_frame
from ds4.wire.parsed_request import ParsedRequest
from ds4.wire.replies import reply_body, reply_context, stream_mapper
from ds4.wire.reply_context import ReplyContext
from ds4.wire.sse import KEEPALIVE

Parser = Callable[[bytes], ParsedRequest]


class _ClientGoneError(Exception):
    pass


class _BodyRefusedError(Exception):
    """The body is refused before it was read to the end (413, 408): the answer closes
    the connection, so the rest of the body is never waited for."""

    def __init__(self, error: RequestError) -> None:
        super().__init__(error.message)
        self.error = error


async def _read_body(scope: Scope, receive: Receive, config: HttpConfig) -> bytes:
    """The whole body, within --max-body-mb, --idle-timeout between chunks and
    --body-timeout in all (ADR 0044)."""
    limit = config.max_body_bytes
    too_large = _BodyRefusedError(
        RequestError(f"request body larger than {limit} bytes", ErrorKind.TOO_LARGE)
    )
    declared = header(scope, b"content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise too_large
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.body_timeout
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - loop.time()
        stalled = remaining > config.idle_timeout  # which limit a timeout here means
        wait = config.idle_timeout if stalled else max(remaining, 0.0)
        try:
            message = await asyncio.wait_for(receive(), timeout=wait)
        except TimeoutError:
            if stalled:
                reason = f"no request body data for {config.idle_timeout:g} s"
            else:
                reason = f"request body not complete after {config.body_timeout:g} s"
            raise _BodyRefusedError(RequestError(reason, ErrorKind.TIMEOUT)) from None
        if message["type"] == "http.disconnect":
            raise _ClientGoneError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _watch_disconnect(receive: Receive, job: Job) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            job.cancel.set()
            return


# The per-request MTP opt-out (docs/mtp.md): a header, so every API takes it alike.
MTP_HEADER = b"x-ds4-mtp"
_MTP_VALUES = {"on": True, "1": True, "true": True, "off": False, "0": False, "false": False}


def _speculation_choice(scope: Scope, parsed: ParsedRequest) -> ParsedRequest:
    value = header(scope, MTP_HEADER)
    if value is None:
        return parsed
    choice = _MTP_VALUES.get(value.strip().lower())
    if choice is None:
        raise RequestError(f"X-DS4-MTP: {value.strip()!r} is not on or off")
    if choice:
        return parsed
    return replace(parsed, generation=replace(parsed.generation, speculative=False))


def _prepare(state: ServerState, request: GenerationRequest) -> PreparedJob:
    # --prefix-file: the turns go before a conversation, not before a raw completion
    if state.prefix and request.api is not Api.COMPLETIONS:
        request = replace(request, messages=with_prefix(request.messages, state.prefix))
    with state.memory_lock:
        return prepare_job(
            request,
            state.tokenizer,
            state.memory,
            state.config.ctx,
            state.bindings,
            longest_token=state.longest_token,
        )


async def handle_count_tokens(
    state: ServerState, scope: Scope, receive: Receive, send: Send
) -> None:
    """POST /v1/messages/count_tokens: parse, render and tokenize off the event loop;
    the worker is not involved."""
    try:
        large = is_large(header(scope, b"content-length"))
        async with state.large_bodies.turn(large):
            body = await _read_body(scope, receive, state.config)
            reply = await state.large_bodies.run(
                large, count_tokens_body, body, state.tokenizer, state.config.ctx,
                state.longest_token,
            )  # fmt: skip
    except _ClientGoneError:
        return
    except _BodyRefusedError as refused:
        await send_error(send, scope, refused.error, Api.ANTHROPIC, close=True)
        return
    except RequestError as error:
        await send_error(send, scope, error, Api.ANTHROPIC)
        return
    await send_json(send, 200, reply)


async def handle_post(
    state: ServerState, api: Api, parse: Parser, scope: Scope, receive: Receive, send: Send
) -> None:
    loop = asyncio.get_running_loop()
    outputs: asyncio.Queue[JobOutput] = asyncio.Queue()
    record = request_record(scope)  # the access line's tokens, cache source, times

    def deliver(output: JobOutput) -> None:
        record.observe(output)
        loop.call_soon_threadsafe(outputs.put_nowait, output)

    try:
        large = is_large(header(scope, b"content-length"))
        async with state.large_bodies.turn(large):
            body = await _read_body(scope, receive, state.config)
            parsed = await state.large_bodies.run(large, parse, body)
            parsed = _speculation_choice(scope, parsed)
            del body  # up to --max-body-mb, not needed while rendering and tokenizing
            prepared = await state.large_bodies.run(large, _prepare, state, parsed.generation)
        job = Job(prepared, deliver, on_token=record.on_token)
        state.inference.submit(job)
    except _ClientGoneError:
        return
    except _BodyRefusedError as refused:
        await send_error(send, scope, refused.error, api, close=True)
        return
    except RequestError as error:  # a bad body, a prompt too long, shutdown begun
        await send_error(send, scope, error, api)
        return
    ctx = reply_context(parsed, next(state.sequence), int(state.clock()), state.random)
    watcher = asyncio.create_task(_watch_disconnect(receive, job))
    try:
        if parsed.generation.stream:
            await _stream(state, api, ctx, outputs, scope, send)
        else:
            await _json(scope, api, ctx, outputs, send)
    finally:
        job.cancel.set()  # no-op once finished; stops the worker if we left early
        watcher.cancel()


async def _json(
    scope: Scope, api: Api, ctx: ReplyContext, outputs: asyncio.Queue[JobOutput], send: Send
) -> None:
    while True:
        output = await outputs.get()
        if isinstance(output, JobFailed):
            await send_error(send, scope, output.error(), api)
            return
        if isinstance(output, Finished):
            if output.finish == "cancelled":
                error = RequestError("request cancelled", ErrorKind.UNAVAILABLE)
                await send_error(send, scope, error, api)
                return
            await send_json(send, 200, reply_body(api, ctx, output))
            return


async def _stream(
    state: ServerState,
    api: Api,
    ctx: ReplyContext,
    outputs: asyncio.Queue[JobOutput],
    scope: Scope,
    send: Send,
) -> None:
    """The SSE head goes out with the first event or keepalive, so a job the worker
    refuses (409: live continuation state gone) still gets its HTTP status."""
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    loop = asyncio.get_running_loop()
    keepalive = state.config.keepalive_seconds
    last_write = loop.time()
    head_sent = False

    async def write(frames: list[bytes]) -> None:
        nonlocal last_write, head_sent
        if not head_sent:
            head_sent = True
            await send({"type": "http.response.start", "status": 200, "headers": headers})
        if frames:
            await send({"type": "http.response.body", "body": b"".join(frames), "more_body": True})
            last_write = loop.time()

    mapper = stream_mapper(api, ctx)
    opened = False
    while True:
        wait = max(0.0, keepalive - (loop.time() - last_write))
        try:
            output = await asyncio.wait_for(outputs.get(), timeout=wait)
        except TimeoutError:
            await write([KEEPALIVE])
            continue
        if isinstance(output, JobFailed):
            if output.refused and not head_sent:
                await send_error(send, scope, output.error(), api)
                return
            frame = stream_error_frame(output.message, output.kind, anthropic=api is Api.ANTHROPIC)
            await write([frame])
            break
        if isinstance(output, PrefillProgress):
            if not head_sent:
                await write([])
            continue
        frames: list[bytes] = []
        if not opened:
            opened = True
            frames += mapper.open(output if isinstance(output, PromptReady) else None)
        if not isinstance(output, PromptReady):
            frames += mapper.feed(output)
        await write(frames)
        if isinstance(output, Finished):
            break
    await send({"type": "http.response.body", "body": b"", "more_body": False})
