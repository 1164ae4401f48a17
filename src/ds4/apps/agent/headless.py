"""`ds4 agent --non-interactive`: one task, no terminal UI (docs/agent.md).

The worker's output (thinking, tool lines, results) streams to stderr, without colour
when stderr is not a terminal; confirmations are refused unless --yes approved
everything; the final answer goes to stdout. Exit 0 when the task ran to its answer,
1 when the engine failed, 130 when interrupted.
"""

from __future__ import annotations

import re
import sys
import threading

from ds4.apps.agent.channel import AgentChannel
from ds4.apps.agent.worker import AgentWorker
from ds4.domain.agent.screen import AgentState

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def run_headless(channel: AgentChannel, worker: AgentWorker, prompt: str) -> int:
    changed = threading.Event()
    channel.on_change = changed.set
    color = sys.stderr.isatty()
    interrupted = submitted = False

    def flush() -> None:
        text = channel.take_output()
        if text:
            sys.stderr.write(text if color else _SGR.sub("", text))
            sys.stderr.flush()

    worker.start()
    try:
        while worker.is_alive():
            try:
                changed.wait(0.2)
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True
                channel.interrupt()
            changed.clear()
            flush()
            if worker.failed is not None:
                break
            if not channel.busy and channel.status().state is not AgentState.STARTING:
                if submitted:
                    break
                submitted = channel.submit(prompt)
    finally:
        channel.stop()
        worker.join(timeout=10)
        flush()
    status = channel.status()
    if worker.failed is not None or status.state is AgentState.ERROR:
        print(f"ds4 agent: error: {worker.failed or status.error}", file=sys.stderr)
        return 1
    if interrupted:
        return 130
    answer = channel.answer_text
    sys.stdout.write(answer if answer.endswith("\n") or not answer else answer + "\n")
    return 0
