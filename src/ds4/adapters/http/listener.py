"""The listening socket, bound before the model loads so that a taken port or a bad
address is one line and an exit status, not a traceback after minutes of loading.

The socket is bound but not yet listening: connections are refused until uvicorn
calls listen(), instead of waiting in the backlog while the model loads.
"""

from __future__ import annotations

import socket

from ds4.domain.errors import Ds4Error


class ListenError(Ds4Error):
    """The server cannot listen on the address it was given (exit 1,
    docs/adr/0044-server-exposure-and-limits.md)."""

    exit_code = 1


def bind_listener(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        raise ListenError(f"cannot listen on {host}:{port}: {_reason(error)}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {_reason(error)}") from None
    return sock


def _reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__
