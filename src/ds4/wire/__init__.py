"""The API wire formats at the edge (docs/adr/0048-wire-formats-at-the-edge.md).

OpenAI Chat Completions, Completions and Responses and Anthropic Messages: request
bodies to domain GenerationRequests (*_request.py, one decode per body), served
events to JSON bodies and SSE frames (*_reply.py, sse.py), error kinds to HTTP
statuses and each API's error body (errors.py). Pure like the domain; only the HTTP
adapter and the apps import it (tests/unit/test_layering.py).
"""
