"""The Litestar application: GET routes, the four POST routes, error shapes, lifecycle.

POST routes are raw ASGI handlers (post_route) because they stream, watch for
disconnects and answer errors in their API's own shape; the GET routes are plain
handlers. Unknown paths answer 404 `unknown endpoint` in the OpenAI shape.
"""

from __future__ import annotations

from typing import Any, cast

from litestar import Litestar, Request, Response, get
from litestar.exceptions import HTTPException
from litestar.handlers import asgi
from litestar.params import FromPath

from ds4.adapters.http.access_log import observed
from ds4.adapters.http.guard import ASGIApp, Receive, Scope, Send, guarded, send_error
from ds4.adapters.http.metrics_route import METRICS_PATH, metrics_route
from ds4.adapters.http.post_route import handle_count_tokens, handle_post
from ds4.adapters.http.server_state import ServerState
from ds4.domain.errors import ErrorKind, RequestError
from ds4.wire.apis import APIS, ApiSpec, api_of_path, error_body
from ds4.wire.replies import MODEL_ALIASES, http_status, model_list, model_object

# Each API's POST routes, from the APIS table (ds4.wire.apis).
POST_ROUTES: dict[str, ApiSpec] = {path: spec for spec in APIS.values() for path in spec.paths}
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
# The `api` label of the access log and of /metrics; a key ending in "/" is a prefix.
ROUTE_LABELS = {
    **{path: spec.api.value for path, spec in POST_ROUTES.items()},
    COUNT_TOKENS_PATH: "count_tokens",
    "/v1/models": "models",
    "/v1/models/": "models",
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

    handlers: list[object] = [models, model, health, metrics_route(state.metrics)]
    handlers += [_post_handler(state, path, spec) for path, spec in POST_ROUTES.items()]
    handlers.append(_count_tokens_handler(state))
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
