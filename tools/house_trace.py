"""Which ds4 modules a value passes through, measured by running the real command.

Two journeys, each the ordered list of ds4 modules in which a Python function received
the value among its arguments (directly, or inside a container, dataclass or flags
namespace up to two levels down):

- ``model``: the model path from ``ds4 cli -m PATH`` until the engine answers;
- ``chat``: the content of one chat message, from the POST body reaching ``ds4 server``
  on loopback until the rendered prompt becomes token ids.

And one count: ``decode``, the Python classes whose methods stand on the stack between
``decode_turn`` and each native ``ds4_fw_*`` call while three tokens are decoded
(``--power 50`` adds the duty-cycle policy); a closure counts as the class defining it.

``python -m tools.house_trace model|chat|decode [--power N]`` prints the journey, one
module (or class) a line, and the count. It runs the shipped demo model
(models/demo.gguf) on the cpu backend; nothing is written outside a temporary directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

MARKER = "house-trace-marker-4711"
DEMO = Path("models/demo.gguf")


def _holds(value: object, needle: str, depth: int = 2) -> bool:
    """Whether ``needle`` is in value: a str/bytes/path, or one inside a container,
    dataclass or argparse namespace (``depth`` levels down, 32 items a level)."""
    if isinstance(value, str):
        return needle in value
    if isinstance(value, bytes | bytearray):
        return needle.encode() in value
    if isinstance(value, os.PathLike):
        return needle in os.fspath(value)
    if depth == 0:
        return False
    if isinstance(value, dict):
        items: list[object] = [v for pair in list(value.items())[:32] for v in pair]
    elif isinstance(value, list | tuple):
        items = list(value[:32])
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, f.name, None) for f in dataclasses.fields(value)][:32]
    elif isinstance(value, argparse.Namespace):
        items = list(vars(value).values())
    else:
        return False
    return any(_holds(item, needle, depth - 1) for item in items)


def _profiler(needle: str, seen: list[str]) -> Callable[[FrameType, str, Any], None]:
    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("ds4") or (seen and seen[-1] == module):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(_holds(frame.f_locals.get(name), needle) for name in names):
            seen.append(module)

    return profile


def _run_traced(needle: str, argv: list[str], out: Path) -> None:
    """The child: run ``ds4 ARGV`` under the profiler, write the journey on exit."""
    from ds4.apps.cli import main

    seen: list[str] = []
    profile = _profiler(needle, seen)
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        main(argv)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        out.write_text(json.dumps(seen), encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _post_chat(port: int, deadline: float) -> None:
    body = json.dumps(
        {
            "model": "deepseek-v4-flash",
            "max_tokens": 2,
            "messages": [{"role": "user", "content": f"Renzo {MARKER}"}],
        }
    ).encode()
    while True:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                reply.read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def journey(kind: str) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "journey.json"
        if kind == "model":
            needle = str(DEMO.resolve())
            argv = ["cli", "-m", needle, "-p", "Renzo", "-n", "1", "--backend", "cpu"]
            child = [sys.executable, "-m", "tools.house_trace", "--child", needle, str(out)]
            subprocess.run([*child, *argv], check=True, stdout=subprocess.DEVNULL)
        else:
            port = _free_port()
            argv = ["server", "-m", str(DEMO), "--port", str(port), "--backend", "cpu"]
            child = [sys.executable, "-m", "tools.house_trace", "--child", MARKER, str(out)]
            server = subprocess.Popen([*child, *argv], stderr=subprocess.DEVNULL)
            try:
                _post_chat(port, time.monotonic() + 120)
            finally:
                server.send_signal(2)
                server.wait(timeout=60)
        seen: list[str] = json.loads(out.read_text(encoding="utf-8"))
        return seen


def _classes_on_stack(frame: FrameType | None) -> tuple[bool, list[str]]:
    found: list[str] = []
    while frame is not None and frame.f_code.co_name != "decode_turn":
        definer = frame.f_code.co_qualname.split(".<locals>")[0]
        if "." in definer:
            found.append(definer.rsplit(".", 1)[0])
        frame = frame.f_back
    return frame is not None, found


def decode_classes(power: int | None) -> list[str]:
    """The classes a decode token crosses on its way to the native forward."""
    from ds4.apps.bootstrap import load_engine
    from ds4.apps.options import EngineOptions
    from ds4.domain.generation import loop
    from ds4.domain.sampling import SamplingParams

    engine = load_engine(EngineOptions(str(DEMO), backend="cpu", power=power))
    session = engine.new_session(256)
    ids = engine.tokenizer.encode("Quel ramo del lago di Como")
    for _ in loop.prefill(session, ids):
        pass
    crossed: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        name = getattr(arg, "__name__", "")
        if event == "c_call" and name.startswith("ds4_fw_"):
            inside, classes = _classes_on_stack(frame)
            if inside:
                crossed.update(classes)

    settings = loop.TurnSettings(max_tokens=3, sampling=SamplingParams(temperature=0.0))
    turn = loop.decode_turn(session, engine.tokenizer, settings, prompt_tokens=len(ids))
    sys.setprofile(profile)
    try:
        for _ in turn:
            pass
    finally:
        sys.setprofile(None)
    return sorted(crossed)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        _run_traced(args[1], args[3:], Path(args[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "kind", choices=["model", "chat", "decode"], help="which value to follow, or decode"
    )
    parser.add_argument(
        "--power", type=int, default=None, help="decode only: the duty cycle (default: none)"
    )
    parsed = parser.parse_args(args)
    kind = parsed.kind
    if kind == "decode":
        classes = decode_classes(parsed.power)
        print("\n".join(classes))
        print(f"decode: {len(classes)} classes between decode_turn and the native call")
        return 0
    seen = journey(kind)
    distinct = list(dict.fromkeys(seen))
    for module in distinct:
        print(module)
    print(f"{kind}: {len(distinct)} modules, {len(seen)} hand-overs between modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
