"""`ds4 agent`: flags and start-up (docs/agent.md).

The engine loads in the main thread (a bad model is an error before any screen is
drawn); the worker thread then brings the session to the system prompt and serves the
UI (or, with --non-interactive, the one task).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ds4.apps import flag_types
from ds4.apps.agent.channel import AgentChannel, AgentTraceFile
from ds4.apps.agent.worker import AgentWorker
from ds4.apps.cli_command import add_sampling_flags, add_think_flags, read_prompt
from ds4.apps.cli_generate import sampling, think_mode
from ds4.apps.engine_flags import (
    add_backend_flags,
    add_distributed_flags,
    add_model_flag,
    app_options,
    engine_options,
    scripted_flags_problem,
)
from ds4.apps.flag_types import INT_MAX, MAX_CTX, DefaultsHelpFormatter
from ds4.apps.options import DEFAULT_AGENT_CTX, DEFAULT_PREFILL_CHUNK, AgentOptions
from ds4.domain.agent.core import AgentSettings
from ds4.domain.agent.transcript import DEFAULT_SYSTEM
from ds4.domain.chat import THINK_MAX_MIN_CONTEXT
from ds4.domain.errors import Ds4Error

HOME_ENV = "DS4_AGENT_HOME"
EPILOG = f"""saved sessions (/save, /list, /switch) and the input history live in
${HOME_ENV} (default ~/.ds4/agent, created 0700). Keys and commands: /help inside the
agent, or docs/agent.md."""


class AgentFailedError(Ds4Error):
    """The worker could not start (a runtime failure, not a usage error)."""

    exit_code = 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "agent",
        formatter_class=DefaultsHelpFormatter,
        help="terminal coding agent: the model reads, edits and runs code here",
        description="A coding agent in the terminal, with the model in this process: it "
        "reads, searches, writes and edits files and runs commands in the working "
        "directory, asking before anything that changes something.",
        epilog=EPILOG,
    )
    add_model_flag(p)
    add_backend_flags(p, scripted=True)
    add_distributed_flags(p)
    p.add_argument(
        "-c",
        "--ctx",
        type=flag_types.int_in(2, MAX_CTX),
        default=DEFAULT_AGENT_CTX,
        help=f"context size in tokens (2..{MAX_CTX}); compaction keeps a long session in it",
    )
    p.add_argument(
        "-n",
        "--tokens",
        type=flag_types.int_in(1, INT_MAX),
        default=50_000,
        help=f"max generated tokens per assistant reply (1..{INT_MAX})",
    )
    p.add_argument(
        "--prefill-chunk",
        type=flag_types.int_in(0, MAX_CTX),
        default=DEFAULT_PREFILL_CHUNK,
        help=f"prefill chunk in tokens, 0..{MAX_CTX}; Ctrl+C stops a prefill at the next "
        "chunk (0: one pass)",
    )
    task = p.add_mutually_exclusive_group()
    task.add_argument("-p", "--prompt", metavar="TEXT", help="the first task, sent when ready")
    task.add_argument(
        "--prompt-file", type=flag_types.input_file, metavar="F", help="the first task from file F"
    )
    p.add_argument(
        "--non-interactive",
        action="store_true",
        help="no terminal UI: run the task (-p, --prompt-file, else all of stdin) to its "
        "answer, print the answer on stdout, progress on stderr; exit 0 on success",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="approve every write, edit, command and page visit without asking (careful)",
    )
    p.add_argument(
        "--confirm-timeout",
        type=flag_types.float_in(1, 3600),
        default=10.0,
        metavar="SECONDS",
        help="an unanswered yes/no question is a no after this long (1..3600)",
    )
    p.add_argument(
        "--edit-upto",
        action="store_true",
        help="let edit's old text use the anchored head [upto] tail form",
    )
    p.add_argument(
        "--no-web", action="store_true", help="do not offer the visit_page tool (headless Chromium)"
    )
    p.add_argument(
        "--chdir",
        "--cwd",
        dest="chdir",
        type=flag_types.existing_dir,
        metavar="DIR",
        help="the working directory the tools see (default: the current directory)",
    )
    p.add_argument(
        "-sys", "--system", default=DEFAULT_SYSTEM, help='extra system text ("" for none)'
    )
    add_think_flags(p)
    add_sampling_flags(p)
    p.add_argument(
        "--trace",
        type=flag_types.output_file,
        metavar="FILE",
        help="append time-stamped records of prompts, tokens, tool calls and compactions "
        "(default: off)",
    )
    p.set_defaults(run=run_agent, agent_parser=p)


def _task(args: argparse.Namespace) -> str | None:
    if args.prompt is not None or args.prompt_file is not None:
        return read_prompt(args)
    if not args.non_interactive:
        return None
    if sys.stdin.isatty():
        raise Ds4Error("--non-interactive needs a task: -p TEXT, --prompt-file F or stdin")
    text = sys.stdin.read()
    if not text.strip():
        raise Ds4Error("--non-interactive: the task read from stdin is empty")
    return text


def run_agent(args: argparse.Namespace) -> int:
    from ds4.apps.bootstrap import bootstrap_agent, load_engine, model_path

    problem = scripted_flags_problem(args)
    if problem is not None:
        args.agent_parser.error(problem)
    interactive = not args.non_interactive
    if interactive and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise Ds4Error("ds4 agent needs a terminal; without one use --non-interactive -p TEXT")
    task = _task(args)
    model = model_path(args.backend, args.model)
    settings = AgentSettings(
        max_tokens=args.tokens,
        sampling=sampling(args),
        mode=think_mode(args),
        system=args.system,
        edit_upto=args.edit_upto,
        auto_approve=args.yes,
    )
    home = agent_home()
    options = app_options(
        AgentOptions,
        engine_options(args, model),
        ctx=args.ctx,
        prefill_chunk=args.prefill_chunk,
        settings=settings,
        web=not args.no_web,
        home=str(home),
        cwd=args.chdir or str(Path.cwd()),
    )
    if args.think_mode == "max" and args.ctx < THINK_MAX_MIN_CONTEXT:
        print(
            f"ds4 agent: warning: --think-max needs --ctx >= {THINK_MAX_MIN_CONTEXT}; "
            f"ctx={args.ctx} uses normal thinking instead",
            file=sys.stderr,
        )
    if args.yes:
        print(
            "ds4 agent: warning: --yes: every write, edit, command and page visit runs "
            "without asking",
            file=sys.stderr,
        )
    engine = load_engine(options)
    trace = AgentTraceFile(args.trace) if args.trace else None
    channel = AgentChannel(
        confirm_seconds=args.confirm_timeout, ask=interactive, notices=interactive, trace=trace
    )
    channel.trace(
        f"agent worker start ctx={args.ctx} backend={args.backend} model={model} trace={args.trace}"
    )
    worker = AgentWorker(lambda ch: bootstrap_agent(options, ch, engine=engine), channel)
    try:
        if not interactive:
            from ds4.apps.agent.worker import run_headless

            assert task is not None
            return run_headless(channel, worker, task)
        from ds4.apps.agent.tui import AgentScreen

        screen = AgentScreen(channel, home / "history", first_task=task)
        worker.start()
        try:
            code = screen.run()
        finally:
            channel.stop()
            worker.join(timeout=10)
        if channel.failure is not None:
            raise AgentFailedError(channel.failure)
        return code
    finally:
        if trace is not None:
            trace.close()


def agent_home() -> Path:
    """$DS4_AGENT_HOME, else ~/.ds4/agent; created with mode 0700 when missing."""
    named = os.environ.get(HOME_ENV)
    home = Path(named) if named else Path.home() / ".ds4" / "agent"
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise Ds4Error(f"cannot create the agent directory {home}: {exc.strerror}") from None
    if not home.is_dir():
        raise Ds4Error(f"the agent directory {home} is not a directory")
    return home
