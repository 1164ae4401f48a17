"""Room in the open-file limit for --max-connections (ADR 0044).

Every connection is a file descriptor; so are the model file, KV cache files, the
trace and the event loop's own. When the soft limit leaves less than the cap plus
FD_RESERVE, it is raised toward the hard limit; if even that is too low the server
refuses to start, rather than let accept() fail under load.
"""

from __future__ import annotations

import resource

from ds4.domain.errors import Ds4Error

FD_RESERVE = 64


def ensure_fd_room(max_connections: int) -> None:
    needed = max_connections + FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return
    raise Ds4Error(
        f"--max-connections {max_connections} needs {needed} open files, but the limit is "
        f"{hard} (ulimit -n); lower --max-connections or raise the limit"
    )
