"""`ds4 server`: OpenAI Chat/Completions/Responses and Anthropic Messages over HTTP.

Model choice when -m is not given: $DS4_MODEL, then ./ds4flash.gguf, else the small
demo model shipped in the repository (models/demo.gguf, docs/demo-model.md), so that
`make serve` answers on a fresh checkout. The rule is bootstrap.default_model_path,
shared with `ds4 cli`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

from ds4.apps import wiring
from ds4.apps.help_format import DefaultsHelpFormatter
from ds4.apps.server_options import ServerOptions
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.policy import KvCacheOptions

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "server",
        formatter_class=DefaultsHelpFormatter,
        help="serve OpenAI and Anthropic compatible APIs for coding agents",
        description="Serve /v1/chat/completions, /v1/completions, /v1/responses and "
        "/v1/messages (plus GET /v1/models and /health) from one local model.",
    )
    p.add_argument(
        "-m",
        "--model",
        metavar="GGUF",
        help="model file (default: $DS4_MODEL, else ./ds4flash.gguf, else models/demo.gguf, "
        "the small demo model shipped in the repository)",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for the LAN)")
    p.add_argument("--port", type=_positive, default=8000, help="TCP port")
    p.add_argument("-c", "--ctx", type=_positive, default=32768, help="context size in tokens")
    p.add_argument(
        "-n",
        "--tokens",
        type=_positive,
        default=393216,
        help="default max_tokens when a request sets no limit",
    )
    p.add_argument(
        "--backend",
        choices=("cpu", "reference", "scripted"),
        default=wiring.default_backend(),
        help="compute backend: cpu (native kernels), reference (numpy), or scripted, which "
        "plays back --script outputs (for client tests)",
    )
    p.add_argument(
        "-t",
        "--threads",
        type=_positive,
        default=None,
        help="cpu backend threads (default: every core)",
    )
    p.add_argument(
        "--script",
        metavar="FILE",
        help="with --backend scripted: JSON list of raw model outputs, one per request",
    )
    p.add_argument(
        "--script-token-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --backend scripted: pause per generated token",
    )
    p.add_argument("--api-key", help="require this key (Authorization: Bearer or x-api-key)")
    p.add_argument("--cors", action="store_true", help="send CORS headers")
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="log rendered prompts, cache decisions, generated text and parser events",
    )
    p.add_argument(
        "--prefill-chunk", type=int, default=0, help="prefill chunk in tokens (0: engine choice)"
    )
    p.add_argument(
        "--tool-memory-max-ids",
        type=_positive,
        default=100_000,
        help="tool ids kept in RAM for exact DSML replay",
    )
    p.add_argument(
        "--disable-exact-dsml-tool-replay",
        action="store_true",
        help="render tool-call history canonically instead of replaying sampled DSML",
    )
    _register_kv_cache(p)
    p.set_defaults(run=run_server)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a non-negative integer")
    return value


def _register_kv_cache(p: argparse.ArgumentParser) -> None:
    """The disk KV cache flags (formats.md §7.1)."""
    d = KvCacheOptions()
    g = p.add_argument_group("disk KV cache")
    g.add_argument(
        "--kv-disk-dir",
        metavar="DIR",
        help="keep prompt prefixes as <sha1>.kv files here (created 0700); default: disabled",
    )
    g.add_argument(
        "--kv-disk-space-mb",
        "--kv-cache-budget-mb",
        dest="kv_disk_space_mb",
        type=_non_negative,
        default=d.budget_bytes >> 20,
        metavar="MIB",
        help="disk budget; the lowest-scoring files are evicted beyond it (0: the default)",
    )
    g.add_argument(
        "--kv-cache-min-tokens",
        type=_positive,
        default=d.min_tokens,
        help="shortest prefix worth a file",
    )
    g.add_argument(
        "--kv-cache-cold-max-tokens",
        type=_non_negative,
        default=d.cold_max_tokens,
        help="longest prompt that gets a cold save on a full miss (0: no cold saves)",
    )
    g.add_argument(
        "--kv-cache-continued-interval-tokens",
        type=_non_negative,
        default=d.continued_interval_tokens,
        help="save the live state every this many tokens, aligned (0: never)",
    )
    g.add_argument(
        "--kv-cache-boundary-trim-tokens",
        type=_non_negative,
        default=d.boundary_trim_tokens,
        help="tokens a cold save leaves off the end of the prompt",
    )
    g.add_argument(
        "--kv-cache-boundary-align-tokens",
        type=_non_negative,
        default=d.boundary_align_tokens,
        help="cold and continued saves cut at multiples of this (0: no alignment)",
    )
    g.add_argument(
        "--kv-cache-reject-different-quant",
        action="store_true",
        help="never load a checkpoint written with other routed-expert quant bits",
    )


def kv_cache_options(args: argparse.Namespace) -> KvCacheOptions:
    budget_mb = args.kv_disk_space_mb or KvCacheOptions().budget_bytes >> 20
    return KvCacheOptions(
        budget_bytes=budget_mb << 20,
        min_tokens=args.kv_cache_min_tokens,
        cold_max_tokens=args.kv_cache_cold_max_tokens,
        continued_interval_tokens=args.kv_cache_continued_interval_tokens,
        boundary_trim_tokens=args.kv_cache_boundary_trim_tokens,
        boundary_align_tokens=args.kv_cache_boundary_align_tokens,
        reject_different_quant=args.kv_cache_reject_different_quant,
    )


def _show_kv_cache_log() -> None:
    """KV cache decisions (stores, hits, evictions, removed files) go to stderr."""
    logger = logging.getLogger("ds4.kvcache")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("ds4 server: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # the HTTP stack's root handler would print it again


def client_snippet(url: str, api_key: str | None) -> str:
    """Ready-to-paste clients. The prompt is the opening of *I promessi sposi*, what the
    shipped demo model was trained to continue (docs/demo-model.md); max_tokens bounds
    a model that does not stop."""
    key = api_key or "none"
    return (
        "Try it:\n"
        f"  curl {url}/v1/chat/completions -H 'Content-Type: application/json' "
        f"-H 'Authorization: Bearer {key}' "
        '-d \'{"model":"deepseek-v4-flash","max_tokens":200,'
        '"messages":[{"role":"user","content":"Quel ramo del lago di Como"}]}\'\n'
        '  python -c "from openai import OpenAI; '
        f"c = OpenAI(base_url='{url}/v1', api_key='{key}'); "
        "print(c.chat.completions.create(model='deepseek-v4-flash', max_tokens=200, "
        "messages=[{'role': 'user', 'content': 'Quel ramo del lago di Como'}])"
        '.choices[0].message.content)"\n'
        f"  Claude Code: ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={key} claude\n"
    )


def run_server(args: argparse.Namespace) -> int:
    # The HTTP stack (Litestar) loads only when a server actually starts.
    from ds4.apps.bootstrap import bootstrap_server, default_model_path, is_shipped_demo

    host = "127.0.0.1" if args.host == "localhost" else args.host
    if args.backend == "scripted":
        model, demo = args.model, False
        if args.script is None:
            raise Ds4Error("--backend scripted needs --script FILE")
    else:
        model = default_model_path(args.model)
        demo = is_shipped_demo(model)
    options = ServerOptions(
        model=model,
        backend=args.backend,
        threads=args.threads,
        script=args.script,
        script_token_delay=args.script_token_delay,
        ctx=args.ctx,
        tokens=args.tokens,
        api_key=args.api_key,
        cors=args.cors,
        check_host=host in LOOPBACK,
        tool_memory_max_ids=args.tool_memory_max_ids,
        exact_tool_replay=not args.disable_exact_dsml_tool_replay,
        prefill_chunk=args.prefill_chunk,
        kv_disk_dir=args.kv_disk_dir,
        kv_cache=kv_cache_options(args),
    )
    with ExitStack() as stack:
        trace: TextIO | None = None
        if args.trace:
            try:
                trace = stack.enter_context(Path(args.trace).open("w", encoding="utf-8"))
            except OSError as error:
                raise Ds4Error(f"cannot open trace file {args.trace}: {error}") from None
        if args.kv_disk_dir:
            _show_kv_cache_log()
        built = bootstrap_server(options, trace)
        url = f"http://{host}:{args.port}"
        label = "scripted outputs" if args.backend == "scripted" else model
        if demo:
            label = f"{model} (the small demo model: docs/demo-model.md)"
        print(f"ds4 server: model {label}, ctx {args.ctx}", file=sys.stderr)
        print(f"ds4 server: listening on {url}", file=sys.stderr)
        print(client_snippet(url, args.api_key), file=sys.stderr)
        built.serve(host, args.port)
    return 0
