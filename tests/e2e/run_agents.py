"""Real coding agents against `ds4 server --backend scripted`: one tool-using turn each.

Opt-in (needs npm and the registry; not collected by pytest, the name has no test_
prefix). Installs `@anthropic-ai/claude-code`, `@openai/codex` and `opencode-ai`
into a scratch directory (their native binaries come as optional dependencies), then
for each agent starts a scripted server on a free loopback port and runs one
non-interactive turn in a scratch project holding a marker file:

  1. the scripted model calls the agent's own shell tool (`ls`);
  2. the agent runs it and sends the result back;
  3. the scripted model answers with FINAL_ANSWER.

PASS when the agent exits 0, prints FINAL_ANSWER, and the server's trace shows a
tool result carrying the marker file name (so the tool really ran and its output
came back through the protocol). Prints PASS/FAIL per agent; exit status 1 if any
failed.

    .venv/bin/python tests/e2e/run_agents.py                 # temp install
    .venv/bin/python tests/e2e/run_agents.py --agents-dir /tmp/agents --only codex
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("@anthropic-ai/claude-code", "@openai/codex", "opencode-ai")
BINARIES = ("claude", "codex", "opencode")
MARKER = "ds4-e2e-marker.txt"
FINAL_ANSWER = "The project holds one marker file."
PROMPT = "List the files in the current directory."
AGENT_TIMEOUT = 240
D = "｜DSML｜"


def tool_call(name: str, **params: str) -> str:
    body = "".join(
        f'<{D}parameter name="{k}" string="true">{v}</{D}parameter>\n' for k, v in params.items()
    )
    return f'\n\n<{D}tool_calls>\n<{D}invoke name="{name}">\n{body}</{D}invoke>\n</{D}tool_calls>'


def turn(tool: str, **params: str) -> list[str]:
    """The two scripted model outputs: reasoning + a tool call, then the answer.
    The prompt already ends with <think>, so outputs start inside the reasoning."""
    return [
        "I will list the files.</think>Listing the files." + tool_call(tool, **params),
        "The listing came back.</think>" + FINAL_ANSWER,
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ds4_command() -> list[str]:
    script = Path(sys.executable).with_name("ds4")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ds4"]


@dataclass
class Server:
    url: str
    trace: Path
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_server(work: Path, name: str, outputs: list[str]) -> Server:
    script = work / f"{name}-script.json"
    script.write_text(json.dumps(outputs, ensure_ascii=False), encoding="utf-8")
    trace = work / f"{name}-trace.txt"
    port = free_port()
    command = [*ds4_command(), "server", "--backend", "scripted", "--script", str(script)]
    command += ["--port", str(port), "--ctx", "65536", "--trace", str(trace)]
    log = (work / f"{name}-server.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ds4 server exited early; see {log.name}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return Server(url, trace, process)
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise RuntimeError("ds4 server did not start")


def install(agents: Path) -> None:
    if all((agents / "node_modules" / ".bin" / b).exists() for b in BINARIES):
        return
    agents.mkdir(parents=True, exist_ok=True)
    print(f"installing {' '.join(PACKAGES)} into {agents} ...", flush=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(agents), *PACKAGES],
        check=True,
    )


def project(work: Path, name: str) -> Path:
    root = work / f"{name}-project"
    root.mkdir()
    (root / MARKER).write_text("marker\n", encoding="utf-8")
    return root


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    return env


@dataclass
class Run:
    command: list[str]
    cwd: Path
    env: dict[str, str]


def claude(bin_dir: Path, work: Path, server: Server) -> Run:
    env = base_env(work / "claude-home")
    env |= {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "none",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    command = [str(bin_dir / "claude"), "-p", PROMPT, "--output-format", "json"]
    command += ["--model", "deepseek-v4-flash", "--allowedTools", "Bash"]
    return Run(command, project(work, "claude"), env)


def codex(bin_dir: Path, work: Path, server: Server) -> Run:
    home = work / "codex-home"
    env = base_env(work / "codex-user")
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "deepseek-v4-flash"\n'
        'model_provider = "ds4"\n\n'
        "[model_providers.ds4]\n"
        'name = "ds4"\n'
        f'base_url = "{server.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "DS4_API_KEY"\n',
        encoding="utf-8",
    )
    env |= {"CODEX_HOME": str(home), "DS4_API_KEY": "none"}
    command = [str(bin_dir / "codex"), "exec", "--skip-git-repo-check"]
    command += ["--dangerously-bypass-approvals-and-sandbox", PROMPT]
    return Run(command, project(work, "codex"), env)


def opencode_config(main: Server, title: Server) -> dict[str, object]:
    def provider(name: str, server: Server) -> dict[str, object]:
        return {
            "npm": "@ai-sdk/openai-compatible",
            "name": name,
            "options": {"baseURL": server.url + "/v1", "apiKey": "none"},
            "models": {"deepseek-v4-flash": {"name": "DeepSeek V4 Flash", "tool_call": True}},
        }

    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"ds4": provider("ds4", main), "ds4-title": provider("ds4 title", title)},
        "model": "ds4/deepseek-v4-flash",
        # the title request runs concurrently with the turn; its own server keeps the
        # turn's scripted outputs in order whichever request arrives first
        "small_model": "ds4-title/deepseek-v4-flash",
        "autoupdate": False,
        "share": "disabled",
    }


def check(result: subprocess.CompletedProcess[str], trace: Path) -> list[str]:
    problems = []
    if result.returncode != 0:
        problems.append(f"exit status {result.returncode}")
    if FINAL_ANSWER not in result.stdout:
        problems.append("final answer not printed")
    text = trace.read_text(encoding="utf-8", errors="replace") if trace.exists() else ""
    if not re.search(rf"<tool_result>(?:(?!</tool_result>).)*{re.escape(MARKER)}", text, re.S):
        problems.append("no tool result with the marker file reached the server")
    return problems


def run_agent(
    name: str, bin_dir: Path, work: Path, make: Callable[[Path, Path, Server], Run]
) -> bool:
    servers: list[Server] = []
    try:
        tool, params = TOOLS[name]
        server = start_server(work, name, turn(tool, **params))
        servers.append(server)
        run = make(bin_dir, work, server)
        if name == "opencode":
            title = start_server(work, "opencode-title", ["A title.</think>Listing files"])
            servers.append(title)
            config = json.dumps(opencode_config(server, title), indent=2)
            (run.cwd / "opencode.json").write_text(config, encoding="utf-8")
        result = subprocess.run(
            run.command,
            cwd=run.cwd,
            env=run.env | {"PWD": str(run.cwd)},  # opencode takes its project from $PWD
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT,
        )
        (work / f"{name}-stdout.txt").write_text(result.stdout, encoding="utf-8")
        (work / f"{name}-stderr.txt").write_text(result.stderr, encoding="utf-8")
        problems = check(result, server.trace)
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        problems = [str(error)]
    finally:
        for s in servers:
            s.stop()
    print(f"{'PASS' if not problems else 'FAIL'} {name}" + "".join(f"\n  {p}" for p in problems))
    return not problems


def opencode(bin_dir: Path, work: Path, server: Server) -> Run:
    env = base_env(work / "opencode-home")
    env |= {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
    command = [str(bin_dir / "opencode"), "run", PROMPT]
    return Run(command, project(work, "opencode"), env)


# the shell tool each agent offers, with the arguments the scripted model passes
TOOLS: dict[str, tuple[str, dict[str, str]]] = {
    "claude": ("Bash", {"command": "ls", "description": "List files"}),
    "codex": ("exec_command", {"cmd": "ls"}),
    "opencode": ("bash", {"command": "ls", "description": "List files"}),
}
AGENTS: dict[str, Callable[[Path, Path, Server], Run]] = {
    "claude": claude,
    "codex": codex,
    "opencode": opencode,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents-dir", type=Path, help="npm install prefix (default: temp)")
    parser.add_argument("--only", default=",".join(AGENTS), help="comma-separated agents")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    if shutil.which("npm") is None and args.agents_dir is None:
        print("FAIL npm not found")
        return 1
    work = Path(tempfile.mkdtemp(prefix="ds4-agents-"))
    agents = args.agents_dir or work / "agents"
    try:
        install(agents)
        bin_dir = agents / "node_modules" / ".bin"
        results = [
            run_agent(name, bin_dir, work, AGENTS[name]) for name in args.only.split(",") if name
        ]
    finally:
        if args.keep:
            print(f"scratch kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
