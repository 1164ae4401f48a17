"""The Litestar application: GET routes, the POST routes of every row of the APIS table
(ds4.wire.apis) plus count_tokens, error shapes, lifecycle; and what one POST request
does (POST routes, below).

POST routes are raw ASGI handlers because they stream, watch for disconnects and
answer errors in their API's own shape; the GET routes are plain handlers. Unknown
paths answer 404 `unknown endpoint` in the OpenAI shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, cast

import anyio.to_thread
from litestar import Litestar, Request, Response, delete, get
from litestar.exceptions import HTTPException
from litestar.handlers import asgi
from litestar.params import FromPath

from ds4.adapters.http.access_log import observed, request_record
from ds4.adapters.http.guard import (
    ASGIApp,
    Receive,
    Scope,
    Send,
    guarded,
    header,
    send_error,
    send_json,
)
from ds4.adapters.http.inference_worker import Job, JobFailed, JobOutput, is_large
from ds4.adapters.http.metrics import METRICS_PATH, metrics_route
from ds4.adapters.http.server_state import HttpConfig, ServerState
from ds4.domain.chat import with_prefix
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.generation.events import Finished, PrefillProgress
from ds4.domain.serving.exchange import GenerationRequest, PromptReady
from ds4.domain.serving.prepare import PreparedJob, prepare_job
from ds4.wire.anthropic import count_tokens_body
from ds4.wire.apis import APIS, ApiSpec, api_of_path, error_body
from ds4.wire.replies import (
    KEEPALIVE,
    MODEL_ALIASES,
    ReplyContext,
    http_status,
    model_list,
    model_object,
)
from ds4.wire.requests import ParsedRequest
from ds4.wire.responses_state import (
    deleted_body,
    kept,
    not_found,
    response_record,
    resume_stored,
)
from ds4.wire.tokenize import (
    DETOKENIZE_PATH,
    TOKENIZE_PATH,
    TOKENIZER_INFO_PATH,
    detokenize_body,
    tokenize_body,
    tokenizer_info_body,
)

# Each API's POST routes, from the APIS table (ds4.wire.apis).
POST_ROUTES: dict[str, ApiSpec] = {path: spec for spec in APIS.values() for path in spec.paths}
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
STORED_RESPONSE_PATH = "/v1/responses/{response_id:str}"  # GET, DELETE
# The `api` label of the access log and of /metrics; a key ending in "/" is a prefix.
ROUTE_LABELS = {
    **{path: spec.api.value for path, spec in POST_ROUTES.items()},
    COUNT_TOKENS_PATH: "count_tokens",
    TOKENIZER_INFO_PATH: "tokenizer",
    TOKENIZE_PATH: "tokenizer",
    DETOKENIZE_PATH: "tokenizer",
    "/v1/models": "models",
    "/v1/models/": "models",
    "/v1/responses/": "stored-responses",
    "/health": "health",
    METRICS_PATH: "metrics",
}


def _json(body: bytes, status: int = 200) -> Response[bytes]:
    return Response(body, status_code=status, media_type="application/json")


def _post_only(path: str, handle: ASGIApp) -> object:
    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            error = RequestError(
                f"{scope['method']} not allowed on {path}", ErrorKind.METHOD_NOT_ALLOWED
            )
            await send_error(send, scope, error)
            return
        await handle(scope, receive, send)

    return asgi(path, name=f"post {path}", copy_scope=False)(route)


def _post_handler(state: ServerState, path: str, spec: ApiSpec) -> object:
    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        await handle_post(state, spec, scope, receive, send)

    return _post_only(path, handle)


def _count_tokens_handler(state: ServerState) -> object:
    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        await handle_count_tokens(state, scope, receive, send)

    return _post_only(COUNT_TOKENS_PATH, handle)


def _tokenizer_handler(state: ServerState, path: str) -> object:
    """POST /tokenize and /detokenize (wire/tokenize.py), off the event loop."""

    def answer(body: bytes) -> bytes:
        if path == TOKENIZE_PATH:
            return tokenize_body(body, state.tokenizer, state.config.ctx, state.longest_token)
        return detokenize_body(body, state.tokenizer)

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            large = is_large(header(scope, b"content-length"))
            async with state.large_bodies.turn(large):
                body = await _read_body(scope, receive, state.config)
                reply = await state.large_bodies.run(large, answer, body)
        except _ClientGoneError:
            return
        except _BodyRefusedError as refused:
            await send_error(send, scope, refused.error, close=True)
            return
        except RequestError as error:
            await send_error(send, scope, error)
            return
        await send_json(send, 200, reply)

    return _post_only(path, handle)


def _framework_error(exc: Exception) -> RequestError:
    """Litestar's own refusals (GET routes only: the POST routes are raw ASGI): an
    unknown path or method is an unknown endpoint, any other client error a bad
    request, anything else an internal error."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status in (404, 405):
        return RequestError("unknown endpoint", ErrorKind.NOT_FOUND)
    if 400 <= status < 500:
        return RequestError("bad request")
    return RequestError("internal server error", ErrorKind.INTERNAL)


def _error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    error = _framework_error(exc)
    return _json(error_body(error, api_of_path(request.url.path)), http_status(error.kind))


def build_app(state: ServerState) -> ASGIApp:
    config = state.config

    @get("/v1/models", sync_to_thread=False)
    def models() -> Response[bytes]:
        limits = (config.ctx, config.default_max_tokens)
        return _json(model_list(config.model_id, config.model_name, *limits))

    @get("/v1/models/{model_id:str}", sync_to_thread=False)
    def model(model_id: FromPath[str]) -> Response[bytes]:
        if model_id not in (config.model_id, *MODEL_ALIASES):
            error = RequestError("unknown endpoint", ErrorKind.NOT_FOUND)
            return _json(error_body(error, None), http_status(error.kind))
        return _json(
            model_object(model_id, config.model_name, config.ctx, config.default_max_tokens)
        )

    @get("/health", sync_to_thread=False)
    def health() -> Response[bytes]:
        status = "stopping" if state.inference.stopping else "ok"
        return _json(b'{"status":"' + status.encode() + b'"}\n', 200 if status == "ok" else 503)

    @get(TOKENIZER_INFO_PATH, sync_to_thread=False)
    def tokenizer_info() -> Response[bytes]:
        return _json(tokenizer_info_body(state.tokenizer, config.ctx))

    @get(STORED_RESPONSE_PATH)
    async def stored_response(response_id: FromPath[str]) -> Response[bytes]:
        record = await anyio.to_thread.run_sync(state.responses.get, response_id)
        if record is None:
            error = not_found(response_id)
            return _json(error_body(error, None), http_status(error.kind))
        return _json(record.body)

    @delete(STORED_RESPONSE_PATH, status_code=200)
    async def delete_response(response_id: FromPath[str]) -> Response[bytes]:
        if not await anyio.to_thread.run_sync(state.responses.delete, response_id):
            error = not_found(response_id)
            return _json(error_body(error, None), http_status(error.kind))
        return _json(deleted_body(response_id))

    handlers: list[object] = [models, model, health, tokenizer_info, metrics_route(state.metrics)]
    handlers += [stored_response, delete_response]
    handlers += [_post_handler(state, path, spec) for path, spec in POST_ROUTES.items()]
    handlers.append(_count_tokens_handler(state))
    handlers += [_tokenizer_handler(state, path) for path in (TOKENIZE_PATH, DETOKENIZE_PATH)]
    app = Litestar(
        route_handlers=handlers,  # type: ignore[arg-type]
        exception_handlers={Exception: _error_handler},
        on_startup=[state.inference.start],
        # hooks without parameters: Litestar passes the app to any hook that takes one
        on_shutdown=[state.inference.stop_async],
        openapi_config=None,
        # no logging setup of Litestar's: it replaced the root logger's handlers, and
        # the server's own (apps/server_logging.py) would print lines twice
        logging_config=None,
    )
    return observed(guarded(cast(ASGIApp, app), config), state.metrics, ROUTE_LABELS)


# ---- POST routes -----------------------------------------------------------
# One POST request: read the body, parse and prepare it off the event loop, queue the
# job, then answer as JSON or SSE while watching for the client to go away.
#
# A disconnect (the ASGI server reports it as soon as the socket closes) sets the
# job's cancel flag, which the worker honours at the next chunk or token boundary,
# also while the job is still queued. SSE keepalive comments go out after
# `keepalive_seconds` of silence on the wire, whatever the worker is doing.


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
    if state.prefix and request.api.rules.conversation:
        request = replace(request, messages=with_prefix(request.messages, state.prefix))
    with state.memory_lock:
        return prepare_job(
            request,
            state.tokenizer,
            state.memory,
            state.config.ctx,
            state.bindings,
            longest_token=state.longest_token,
            compiler=state.constraints,
            strict_tools=state.strict_tools,
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
    except _BodyRefusedError as refused:  # the path is under /v1/messages: Anthropic's shape
        await send_error(send, scope, refused.error, close=True)
        return
    except RequestError as error:
        await send_error(send, scope, error)
        return
    await send_json(send, 200, reply)


async def handle_post(
    state: ServerState, spec: ApiSpec, scope: Scope, receive: Receive, send: Send
) -> None:
    """`spec`: the route's row of APIS (its parser, reply mappers and error shape)."""
    api = spec.api
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
            parsed = await state.large_bodies.run(large, spec.parse, body)
            parsed = _speculation_choice(scope, parsed)
            del body  # up to --max-body-mb, not needed while rendering and tokenizing
            if parsed.stored is not None:  # previous_response_id: its conversation in front
                parsed = await state.large_bodies.run(large, resume_stored, state.responses, parsed)
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
    ctx = spec.context(parsed, next(state.sequence), state.clock.now(), state.random)
    watcher = asyncio.create_task(_watch_disconnect(receive, job))

    async def keep(finished: Finished) -> None:
        """A stored response is kept before its client sees it end."""
        if kept(parsed, finished):
            record = response_record(ctx, parsed, finished, spec.reply(ctx, finished))
            await anyio.to_thread.run_sync(state.responses.put, record)

    try:
        if parsed.generation.stream:
            await _stream(state, spec, ctx, outputs, scope, send, keep)
        else:
            await _answer_json(scope, spec, ctx, outputs, send, keep)
    finally:
        job.cancel.set()  # no-op once finished; stops the worker if we left early
        watcher.cancel()


Keep = Callable[[Finished], Awaitable[None]]  # stores a finished Responses reply


async def _answer_json(
    scope: Scope,
    spec: ApiSpec,
    ctx: ReplyContext,
    outputs: asyncio.Queue[JobOutput],
    send: Send,
    keep: Keep,
) -> None:
    api = spec.api
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
            await keep(output)
            await send_json(send, 200, spec.reply(ctx, output))
            return


async def _stream(
    state: ServerState,
    spec: ApiSpec,
    ctx: ReplyContext,
    outputs: asyncio.Queue[JobOutput],
    scope: Scope,
    send: Send,
    keep: Keep,
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

    mapper = spec.stream(ctx)
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
                await send_error(send, scope, output.error(), spec.api)
                return
            frame = spec.errors.stream_frame(output.message, output.kind)
            await write([frame])
            break
        if isinstance(output, PrefillProgress):
            if not head_sent:
                await write([])
            continue
        if isinstance(output, Finished):
            await keep(output)
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
