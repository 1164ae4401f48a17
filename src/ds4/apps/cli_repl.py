"""`ds4 cli` interactive chat (docs/reference/cli-and-bench.md §4): one live session, a growing
token transcript.

Every turn appends the user message and assistant prefix to the transcript, syncs
the session (the whole earlier conversation is reused), streams the answer and
closes the turn with EOS, so the KV prefix carries over from turn to turn.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory

from ds4.apps.cli_generate import (
    EventPrinter,
    Interrupt,
    PrefillMeter,
    Stopwatch,
    conversation_head,
    model_path,
    open_session,
    prefix_turns,
    sampling,
    think_mode,
    transcript_head,
    user_turn,
    warn_if_cut_by_context,
)
from ds4.apps.flag_types import MAX_CTX
from ds4.domain.chat import EOS, THINK_MAX_MIN_CONTEXT, ThinkMode, effective_think_mode
from ds4.domain.engine.cancel import CancelledError
from ds4.domain.engine.duty_cycle import MAX_POWER, MIN_POWER
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished, PrefillProgress
from ds4.domain.generation.loop import TurnSettings, generate

HELP = """commands:
  /help          this list
  /think         thinking mode high
  /think-max     thinking mode max (needs --ctx >= 393216, else high)
  /nothink       no thinking
  /ctx N         new session with N tokens of context, 2..1048576 (the conversation is kept)
  /read FILE     send the file's text as the next message
  /power N       duty cycle 1..100 % from the next evaluation on
  /quit, /exit   leave (Ctrl+D too)
Ctrl+C stops the current generation and returns to the prompt."""


# /ctx takes what --ctx takes.
MIN_CTX = 2
CTX_RANGE = f"{MIN_CTX}..{MAX_CTX}"


def ctx_argument(text: str) -> int | None:
    """/ctx N's size, or None when N is not an integer in CTX_RANGE."""
    if not text.isdigit() or not MIN_CTX <= int(text) <= MAX_CTX:
        return None
    return int(text)


class Chat:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.session, self.tokenizer, self.duty = open_session(args)
        self.mode = think_mode(args)
        self.requested = ThinkMode(args.think_mode) if args.think_mode else ThinkMode.HIGH
        self.prefix = prefix_turns(args)
        self.transcript = self.tokenizer.encode(
            conversation_head(args.system, self.mode, self.prefix)
        )
        self.interrupt = Interrupt()

    def set_mode(self, requested: ThinkMode) -> str:
        self.requested = requested
        mode = effective_think_mode(requested, self.session.ctx)
        if (mode is ThinkMode.MAX) != (self.mode is ThinkMode.MAX) and len(self.transcript) > 1:
            # The Think-Max prefix sits right after BOS: the conversation is re-rendered.
            old_head = self.tokenizer.encode(transcript_head(self.args.system, self.mode))
            new_head = self.tokenizer.encode(transcript_head(self.args.system, mode))
            self.transcript = new_head + self.transcript[len(old_head) :]
        self.mode = mode
        if requested is ThinkMode.MAX and mode is not ThinkMode.MAX:
            return f"Thinking mode: high (ctx below {THINK_MAX_MIN_CONTEXT})."
        return f"Thinking mode: {mode.value}."

    def set_power(self, text: str) -> str:
        if not text.isdigit() or not MIN_POWER <= int(text) <= MAX_POWER or self.duty is None:
            return f"usage: /power <{MIN_POWER}..{MAX_POWER}>"
        self.duty.percent = self.args.power = int(text)
        return f"Power: {self.duty.percent} %."

    def resize(self, ctx: int) -> str:
        self.args.ctx = ctx
        self.session, _, self.duty = open_session(self.args)
        # The acknowledgement names the new size first; the mode line follows because
        # think-max falls back (or comes back) with the context.
        return f"Context: {ctx} tokens (a new session; the conversation is kept). " + (
            self.set_mode(self.requested)
        )

    def turn(self, text: str) -> None:
        rollback = len(self.transcript)
        prompt = self.transcript + self.tokenizer.encode(user_turn(text, self.mode))
        settings = TurnSettings(
            sampling=sampling(self.args),
            max_tokens=self.args.tokens,
            thinking=self.mode.thinking,
        )
        printer, meter, watch = EventPrinter(), PrefillMeter(), Stopwatch()
        done: Finished | None = None
        to_evaluate = len(prompt) - self.session.common_prefix(prompt)
        with self.interrupt.armed(second_press_exits=False):
            try:
                for event in generate(
                    self.session, prompt, self.tokenizer, settings, cancel=self.interrupt
                ):
                    if isinstance(event, Finished):
                        done = event
                    if isinstance(event, PrefillProgress):
                        meter.update(event)
                        continue
                    meter.close()
                    watch.prefill_done(to_evaluate)
                    printer.show(event)
            except (Ds4Error, CancelledError) as exc:
                meter.close()
                del self.transcript[rollback:]
                print(f"ds4: prompt processing failed: {exc}", file=sys.stderr)
                return
        if done is not None and done.finish == "error":
            print(f"ds4: generation failed: {done.error}", file=sys.stderr)
        if done is None or not done.tokens:
            del self.transcript[rollback:]
            self.session.invalidate()
            return
        self.transcript = prompt + list(done.tokens) + self.tokenizer.encode(EOS)
        warn_if_cut_by_context(done, self.args.tokens, self.session.ctx)
        print(watch.summary(done.usage.completion_tokens), file=sys.stderr)


def _history_path() -> Path:
    return Path.home() / ".ds4_history"


def run_repl(args: argparse.Namespace) -> int:
    model_path(args)  # a missing model is reported before anything else
    chat = Chat(args)
    print(HELP)
    reader: PromptSession[str] = PromptSession(history=FileHistory(str(_history_path())))
    while True:
        try:
            line = reader.prompt("ds4> ").strip()
        except KeyboardInterrupt:
            continue  # Ctrl+C at the prompt clears the line
        except EOFError:
            return 0
        if not line:
            continue
        if not line.startswith("/"):
            chat.turn(line)
            continue
        command, _, rest = line.partition(" ")
        rest = rest.strip()
        if command in ("/quit", "/exit"):
            return 0
        if command == "/help":
            print(HELP)
        elif command in ("/think", "/think-max", "/nothink"):
            mode = {"/think": ThinkMode.HIGH, "/think-max": ThinkMode.MAX}.get(
                command, ThinkMode.NONE
            )
            print(chat.set_mode(mode))
        elif command == "/ctx":
            ctx = ctx_argument(rest)
            if ctx is None:
                print(f"ds4: /ctx needs a context size in {CTX_RANGE}", file=sys.stderr)
                continue
            print(chat.resize(ctx))
        elif command == "/power":
            print(chat.set_power(rest))
        elif command == "/read":
            if not rest:
                print("ds4: /read needs a file path", file=sys.stderr)
                continue
            try:
                chat.turn(Path(rest).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                print(f"ds4: cannot read {rest}: {exc}", file=sys.stderr)
        else:
            print(f"ds4: unknown command: {command}\nds4: type /help for commands", file=sys.stderr)
