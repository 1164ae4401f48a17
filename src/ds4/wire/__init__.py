"""The API wire formats at the edge (docs/adr/0048-wire-formats-at-the-edge.md).

OpenAI Chat Completions, Completions and Responses and Anthropic Messages, one module
per API (chat, completions, anthropic, responses_request + responses_reply): its
request bodies to domain GenerationRequests (one decode per body), and served events
to JSON bodies and SSE frames. What every parser shares is requests.py, what every
reply shares (error statuses, SSE framing, usage, the reply context) replies.py; the
APIS table (apis.py) holds one row per API (routes, parser, reply and stream mappers,
error shape) for the HTTP adapter to read. Pure like the domain; only the HTTP adapter
and the apps import it (tests/unit/test_layering.py).
"""
