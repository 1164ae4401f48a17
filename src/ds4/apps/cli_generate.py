"""`ds4 cli` one-shot runs: load the model, prefill, generate or dump, report rates."""

from __future__ import annotations

import argparse
import sys

from ds4.apps import wiring
from ds4.apps.bootstrap import default_model_path, load_engine
from ds4.apps.cli_dumps import dump_logits, dump_logprobs
from ds4.apps.cli_output import (
    EventPrinter,
    Interrupt,
    PrefillMeter,
    Stopwatch,
    warn_if_cut_by_context,
)
from ds4.apps.cli_prompt import prompt_thinks, prompt_tokens
from ds4.apps.distributed_flags import distributed_options
from ds4.apps.engine_flags import steering_request
from ds4.apps.ssd_flags import streaming_options
from ds4.domain.engine.cancel import CancelledError
from ds4.domain.engine.duty_cycle import DutyCycle
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished, PrefillProgress
from ds4.domain.generation.loop import TurnSettings, decode_tokens, decode_turn, prefill
from ds4.domain.sampling import SamplingParams, seed_from_bytes
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
    streaming = streaming_options(args)
    engine = load_engine(
        model_path(args),
        backend=args.backend,
        numerics=args.numerics,
        threads=args.threads,
        streaming=streaming,
        repack_experts=args.repack_experts,
        distributed=distributed_options(args),
        log=lambda line: print(f"ds4: distributed {line}", file=sys.stderr),
        mtp=args.mtp,
        mtp_draft=args.mtp_draft,
        power=args.power,
        steering=steering_request(args),
    )
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
        generated = _generate(args, session, tokenizer, ids, interrupt)
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
