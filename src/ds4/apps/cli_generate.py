"""`ds4 cli` one-shot runs: load the model, prefill, generate or dump, report rates."""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Never, TextIO

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from ds4.apps import wiring
from ds4.apps.bootstrap import default_model_path, load_engine
from ds4.apps.engine_flags import engine_options
from ds4.domain.chat import (
    BOS,
    MAX_PREFIX,
    PrefixTurn,
    ThinkMode,
    assistant_prefix,
    effective_think_mode,
    parse_prefix_file,
    render_closed_turns,
)
from ds4.domain.engine.cancel import CancelledError
from ds4.domain.engine.duty_cycle import DutyCycle
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import (
    Finished,
    GenerationEvent,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
)
from ds4.domain.generation.loop import (
    TurnSettings,
    cut_by_context,
    decode_tokens,
    decode_turn,
    prefill,
)
from ds4.domain.sampling import SamplingParams, StepLogprobs, argmax, seed_from_bytes
from ds4.domain.speculative import MtpDrafter
from ds4.ports.tokenizer import Tokenizer


def model_path(args: argparse.Namespace) -> str:
    """bootstrap.default_model_path: the server's rule too."""
    return default_model_path(args.model)


def sampling(args: argparse.Namespace) -> SamplingParams:
    seed = args.seed  # 1..2^64-1 when given (flag_types)
    if seed is None:
        seed = seed_from_bytes(wiring.random_source().token_bytes(8))
    return SamplingParams(
        temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=seed
    )


def open_session(args: argparse.Namespace) -> tuple[EngineSession, Tokenizer, DutyCycle | None]:
    """The live session, the tokenizer and the session's duty cycle (--power)."""
    if args.ctx < 2:
        raise Ds4Error(f"--ctx {args.ctx} is too small (at least 2 tokens)")
    engine = load_engine(engine_options(args, model_path(args)), ctx=args.ctx)
    return engine.new_session(args.ctx, chunk=args.chunk), engine.tokenizer, engine.duty


def draft_summary(session: EngineSession) -> str | None:
    """The MTP line of the run's summary (None without --mtp)."""
    drafter = session.drafter
    if not isinstance(drafter, MtpDrafter):
        return None
    s = drafter.stats
    return (
        f"ds4: mtp: {s.accepted} of {s.proposed} drafted tokens accepted "
        f"({100 * s.acceptance:.1f} %) in {s.blocks} verified blocks"
    )


def check_fits(ids: list[int], ctx: int) -> None:
    if len(ids) >= ctx:
        raise Ds4Error(
            f"prompt has {len(ids)} tokens; --ctx {ctx} needs room for at least one more"
        )


def _prefill_with_meter(session: EngineSession, ids: list[int], interrupt: Interrupt) -> None:
    meter = PrefillMeter()
    try:
        for progress in prefill(session, ids, cancel=interrupt):
            meter.update(progress)
    finally:
        meter.close()


def run_one_shot(args: argparse.Namespace, text: str | None) -> int:
    session, tokenizer, _ = open_session(args)
    ids = prompt_tokens(args, tokenizer, text)
    check_fits(ids, session.ctx)
    interrupt, meter, watch = Interrupt(), PrefillMeter(), Stopwatch()
    with interrupt.armed(second_press_exits=True):
        try:
            if args.dump_logits is not None:
                logits = session.all_logits(
                    ids, progress=lambda d, t: meter.update(PrefillProgress(d, t)), cancel=interrupt
                )
                meter.close()
                dump_logits(args.dump_logits, logits)
            else:
                _prefill_with_meter(session, ids, interrupt)
        except CancelledError:
            print("\nds4: prefill interrupted", file=sys.stderr)
            return 0
        watch.prefill_done(len(ids))
        if args.dump_logprobs is not None:
            dump_logprobs(
                args.dump_logprobs,
                session,
                tokenizer,
                prompt_tokens=len(ids),
                max_steps=args.tokens,
                top_k=args.logprobs_top_k,
                cancel=interrupt,
            )
            return 0
        generated = _generate(args, session, tokenizer, ids, interrupt) if args.tokens else 0
    print(watch.summary(generated), file=sys.stderr)
    mtp = draft_summary(session)
    if mtp is not None:
        print(mtp, file=sys.stderr)
    return 0


def _generate(
    args: argparse.Namespace,
    session: EngineSession,
    tokenizer: Tokenizer,
    ids: list[int],
    interrupt: Interrupt,
) -> int:
    if args.prompt_tokens is not None:
        # Raw ids: no chat protocol, just the text of each token as it comes.
        decoder = tokenizer.streaming_decoder()
        count = 0
        eos = tokenizer.special.eos
        for token in decode_tokens(session, sampling(args), args.tokens, eos=eos, cancel=interrupt):
            sys.stdout.write(decoder.feed(token))
            sys.stdout.flush()
            count += 1
        tail = decoder.flush()
        if count:
            sys.stdout.write(tail + "\n")
        return count
    settings = TurnSettings(
        sampling=sampling(args),
        max_tokens=args.tokens,
        thinking=prompt_thinks(args, ids, tokenizer),
    )
    printer = EventPrinter()
    events = decode_turn(session, tokenizer, settings, prompt_tokens=len(ids), cancel=interrupt)
    count = 0
    for event in events:
        printer.show(event)
        if isinstance(event, Finished):
            count = event.usage.completion_tokens
            warn_if_cut_by_context(event, args.tokens, session.ctx)
            if event.finish == "error":  # the engine failed mid-turn: not a normal end
                raise GenerationFailedError(
                    f"generation failed after {count} tokens: {event.error}"
                )
    return count


class GenerationFailedError(Ds4Error):
    """The engine failed while decoding (e.g. a distributed worker was lost)."""

    exit_code = 1


# ---- cli output ----------------------------------------------------------------------
# What `ds4 cli` shows while it works: streamed text, prefill progress, timings, Ctrl+C.


_DIM, _RESET = "\x1b[90m", "\x1b[0m"


class Interrupt:
    """Ctrl+C as a cancel flag: the first press stops generation at the next token,
    a second press (in one-shot mode) interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    @contextmanager
    def armed(self, *, second_press_exits: bool) -> Iterator[None]:
        self.requested = False

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if self.requested and second_press_exits:
                raise KeyboardInterrupt
            self.requested = True

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


class PrefillMeter:
    """A tqdm bar on a terminal, one line per chunk otherwise; silent for one chunk."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._bar: tqdm[Never] | None = None

    def update(self, event: PrefillProgress) -> None:
        if self._bar is None and event.done == event.total:
            return  # one chunk: nothing worth a bar
        if not self._stream.isatty():
            pct = 100.0 * event.done / max(event.total, 1)
            print(
                f"processing {event.total} input tokens: {event.done}/{event.total} ({pct:.0f}%)",
                file=self._stream,
            )
            return
        bar = self._bar
        if bar is None:
            bar = tqdm(
                total=event.total, desc="prefill", unit="tok", file=self._stream, leave=False
            )
            self._bar = bar
        bar.update(event.done - bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Stopwatch:
    """Prefill and decode rates for the summary line (docs/reference/cli-and-bench.md §2)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.prefill_end: float | None = None
        self.prefilled = 0

    def prefill_done(self, evaluated: int) -> None:
        if self.prefill_end is None:
            self.prefill_end = time.perf_counter()
            self.prefilled = evaluated

    def summary(self, generated: int) -> str:
        end = time.perf_counter()
        prefill_end = self.prefill_end if self.prefill_end is not None else end
        prefill = self.prefilled / max(prefill_end - self.start, 1e-9)
        decode = generated / max(end - prefill_end, 1e-9)
        return f"ds4: prefill: {prefill:.2f} t/s, generation: {decode:.2f} t/s"


def warn_if_cut_by_context(finished: Finished, max_tokens: int, ctx: int) -> None:
    """One stderr line when the context, not -n, ended the reply."""
    if cut_by_context(finished, max_tokens):
        print(
            f"ds4: the reply stopped at the context limit (--ctx {ctx}); a larger --ctx "
            "gives longer replies",
            file=sys.stderr,
        )


class EventPrinter:
    """Reasoning dimmed on a terminal, a newline where the answer starts."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self._out = out
        self._color = out.isatty()
        self._in_reasoning = False
        self._ended_with_newline = True

    def _write(self, text: str) -> None:
        if text:
            self._out.write(text)
            self._out.flush()
            self._ended_with_newline = text.endswith("\n")

    def show(self, event: GenerationEvent) -> None:
        if isinstance(event, ReasoningDelta):
            if not self._in_reasoning:
                self._in_reasoning = True
                self._write(_DIM if self._color else "")
            self._write(event.text)
        elif isinstance(event, TextDelta):
            self._end_reasoning()
            self._write(event.text)
        elif isinstance(event, Finished):
            self.end()

    def end(self) -> None:
        """The turn is over: reset the colour, end the line."""
        self._end_reasoning()
        if not self._ended_with_newline:
            self._write("\n")

    def _end_reasoning(self) -> None:
        if self._in_reasoning:
            self._in_reasoning = False
            if self._color:
                self._out.write(_RESET)
            self._write("\n" if not self._ended_with_newline else "")


# ---- cli dumps -----------------------------------------------------------------------
# `--dump-logits` (.npy) and `--dump-logprobs` (JSON, docs/reference/cli-and-bench.md
# §3), written atomically.


MAX_LOGPROBS_TOP_K = 128


def write_atomically(path: str, data: bytes) -> None:
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).replace(target)
    except OSError as exc:
        raise Ds4Error(f"cannot write {path}: {exc.strerror or exc}") from None


def dump_logits(path: str, logits: npt.NDArray[np.float32]) -> None:
    """float32 [n_prompt_tokens, n_vocab]: the logits after every prompt position."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(logits, dtype=np.float32))
    write_atomically(path, buffer.getvalue())


def _json_text(raw: bytes) -> str:
    """docs/reference/cli-and-bench.md §3 escaping: invalid UTF-8 writes every byte >= 0x80 as
    \\u00XX."""
    try:
        chars = raw.decode("utf-8")
        high_as_escape = False
    except UnicodeDecodeError:
        chars = raw.decode("latin-1")
        high_as_escape = True
    out = ['"']
    for ch in chars:
        cp = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif cp < 0x20 or (high_as_escape and cp >= 0x80):
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _token(tokenizer: Tokenizer, token: int) -> str:
    raw = tokenizer.token_bytes(token)
    return f'{{"id":{token},"text":{_json_text(raw)},"bytes":[{",".join(map(str, raw))}]}}'


def _g9(value: float) -> str:
    return f"{value:.9g}" if math.isfinite(value) else "null"


def logprobs_step(
    tokenizer: Tokenizer, step: int, logits: npt.NDArray[np.float32], top_k: int
) -> tuple[str, int]:
    """One step's JSON and the selected (argmax) token."""
    selected = argmax(logits)
    entries = [
        f'{{"token":{_token(tokenizer, entry.id)},"logit":{_g9(entry.logit)},'
        f'"logprob":{_g9(entry.logprob)}}}'
        for entry in StepLogprobs(logits).top(top_k)
    ]
    body = (
        f'{{"step":{step},"selected":{_token(tokenizer, selected)},'
        f'"top_logprobs":[{",".join(entries)}]}}'
    )
    return body, selected


def dump_logprobs(
    path: str,
    session: EngineSession,
    tokenizer: Tokenizer,
    *,
    prompt_tokens: int,
    max_steps: int,
    top_k: int,
    cancel: Callable[[], bool],
) -> int:
    """Greedy continuation with the top-k alternatives at each step; returns steps written."""
    if not 1 <= top_k <= MAX_LOGPROBS_TOP_K:
        raise Ds4Error(f"--logprobs-top-k {top_k} is not in 1..{MAX_LOGPROBS_TOP_K}")
    k = top_k
    steps: list[str] = []
    logits = session.logits()
    eos = tokenizer.special.eos
    budget = max(0, min(max_steps, session.ctx - session.pos))
    for step in range(budget):
        if cancel():
            break
        body, selected = logprobs_step(tokenizer, step, logits, k)
        steps.append(body)
        if selected == eos or step + 1 == budget:
            break
        logits = session.eval(selected)
    head = f'{{"source":"ds4","prompt_tokens":{prompt_tokens},"ctx":{session.ctx},"top_k":{k},'
    text = head + '"steps":[\n' + ",\n".join(steps) + "\n]}\n"
    write_atomically(path, text.encode())
    return len(steps)


# ---- cli prompt ----------------------------------------------------------------------
# `ds4 cli` prompts: text or a token-id file to the ids the model sees
# (docs/reference/cli-and-bench.md §1).


DEFAULT_SYSTEM = "You are a helpful assistant"


def think_mode(args: argparse.Namespace) -> ThinkMode:
    requested = ThinkMode(args.think_mode) if args.think_mode else ThinkMode.HIGH
    return effective_think_mode(requested, args.ctx)


def transcript_head(system: str, mode: ThinkMode) -> str:
    """BOS, the Think-Max prefix when that mode is on, the system text."""
    return BOS + (MAX_PREFIX if mode is ThinkMode.MAX else "") + system


def prefix_turns(args: argparse.Namespace) -> tuple[PrefixTurn, ...]:
    """The --prefix-file turns (none without the flag)."""
    path = getattr(args, "prefix_file", None)
    if path is None:
        return ()
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read prefix file {path}: {exc.strerror}") from None
    return parse_prefix_file(data, path)


def conversation_head(system: str, mode: ThinkMode, prefix: tuple[PrefixTurn, ...]) -> str:
    """The transcript before the live user turn: head, then the prefix turns."""
    return transcript_head(system, mode) + render_closed_turns(prefix, mode)


def user_turn(text: str, mode: ThinkMode) -> str:
    return "<｜User｜>" + text + assistant_prefix(mode)


def chat_prompt(
    text: str, system: str, mode: ThinkMode, prefix: tuple[PrefixTurn, ...] = ()
) -> str:
    """A prompt that starts with BOS is an already rendered transcript, used as is."""
    if text.startswith(BOS):
        if prefix:
            raise Ds4Error("--prefix-file needs a plain prompt, not a rendered transcript")
        return text
    return conversation_head(system, mode, prefix) + user_turn(text, mode)


def read_token_file(path: str, vocab_size: int) -> list[int]:
    """A JSON list of token ids; every id must exist in the vocabulary."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read token file {path}: {exc.strerror}") from None
    try:
        ids = json.loads(raw)
    except ValueError:
        raise Ds4Error(f"{path}: not JSON (expected a list of token ids)") from None
    if not isinstance(ids, list) or not all(type(i) is int for i in ids):
        raise Ds4Error(f"{path}: expected a JSON list of integer token ids")
    for index, token in enumerate(ids):
        if not 0 <= token < vocab_size:
            raise Ds4Error(
                f"{path}: token id {token} at index {index} is out of range (vocab {vocab_size})"
            )
    if not ids:
        raise Ds4Error(f"{path}: the token list is empty")
    return ids


def prompt_tokens(args: argparse.Namespace, tokenizer: Tokenizer, text: str | None) -> list[int]:
    if args.prompt_tokens is not None:
        return read_token_file(args.prompt_tokens, tokenizer.vocab_size)
    assert text is not None
    return tokenizer.encode(chat_prompt(text, args.system, think_mode(args), prefix_turns(args)))


def prompt_thinks(args: argparse.Namespace, ids: list[int], tokenizer: Tokenizer) -> bool:
    """Whether generation starts inside reasoning: the prompt ends with <think>."""
    return bool(ids) and ids[-1] == tokenizer.special.think_open
