"""GET /metrics: the Prometheus text exposition (docs/adr/0046-observability.md).

It sits behind the guard like every route but /health: open without --api-key, and
with one it needs the key (Prometheus sends it with `authorization` or
`bearer_token` in its scrape config). Rendering runs on a pool thread, because the
KV disk gauge lists the cache directory.
"""

from __future__ import annotations

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler

from ds4.adapters.http.metrics import CONTENT_TYPE, ServerMetrics

METRICS_PATH = "/metrics"


def metrics_route(metrics: ServerMetrics) -> HTTPRouteHandler:
    @get(METRICS_PATH, sync_to_thread=True)
    def scrape() -> Response[bytes]:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return scrape
