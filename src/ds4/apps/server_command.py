"""`ds4 server`: OpenAI Chat/Completions/Responses and Anthropic Messages over HTTP.

Model choice when -m is not given: $DS4_MODEL, then ./ds4flash.gguf, else the small
demo model shipped in the repository (models/demo.gguf, docs/demo-model.md), so that
`make serve` answers on a fresh checkout. The rule is bootstrap.default_model_path,
shared with `ds4 cli`.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

from ds4.apps import backends, flag_types
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
    app_options,
    distributed_options,
    engine_options,
    scripted_flags_problem,
)
from ds4.apps.flag_types import INT_MAX, MAX_CTX, DefaultsHelpFormatter
from ds4.apps.options import (
    DEFAULT_KV_MEM_MIB,
    DEFAULT_PREFILL_CHUNK,
    MAX_SESSIONS,
    ServerOptions,
)
from ds4.apps.server_logging import LOG_FORMATS, configure_server_logging
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.serving.response_store import (
    DEFAULT_STORED_MIB,
    DEFAULT_STORED_RESPONSES,
    MAX_STORED_MIB,
    MAX_STORED_RESPONSES,
)
from ds4.wire.requests import is_loopback_host


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "server",
        formatter_class=DefaultsHelpFormatter,
        help="serve OpenAI and Anthropic compatible APIs for coding agents",
        description="Serve /v1/chat/completions, /v1/completions, /v1/responses and "
        "/v1/messages (plus GET /v1/models, /health and the Prometheus /metrics) from one "
        "local model.",
    )
    add_model_flag(p)
    p.add_argument(
        "--host",
        type=flag_types.host,
        default="127.0.0.1",
        help="bind address; loopback (127.0.0.0/8, ::1, localhost) also refuses foreign "
        "Host headers; 0.0.0.0 for the LAN (then set --api-key)",
    )
    p.add_argument("--port", type=flag_types.int_in(1, 65535), default=8000, help="TCP port")
    p.add_argument(
        "-c",
        "--ctx",
        type=flag_types.int_in(2, MAX_CTX),
        default=32768,
        help=f"context size in tokens (2..{MAX_CTX})",
    )
    p.add_argument(
        "-n",
        "--tokens",
        type=flag_types.int_in(1, INT_MAX),
        default=393216,
        help=f"default max_tokens when a request sets no limit (1..{INT_MAX})",
    )
    add_backend_flags(p, scripted=True)
    add_numerics_flag(p)
    add_ssd_streaming_flags(p)
    add_repack_flag(p)
    p.add_argument(
        "--api-key",
        type=flag_types.api_key,
        help="require this key (Authorization: Bearer or x-api-key; UTF-8, compared in "
        "constant time); default: no key",
    )
    p.add_argument(
        "--cors",
        action="store_true",
        help="send CORS headers and serve browser pages of any origin (default: requests "
        "from another origin's page, and text/plain bodies, are refused)",
    )
    p.add_argument(
        "--trace",
        type=flag_types.output_file,
        metavar="FILE",
        help="log rendered prompts, cache decisions, generated text and parser events "
        "(default: off)",
    )
    p.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="stderr log lines (one access line per request, KV cache decisions, "
        "warnings): text (`ds4 server: access k=v ...`) or json (one object per line, "
        "stable field names; docs/adr/0046-observability.md)",
    )
    p.add_argument(
        "--prefill-chunk",
        type=flag_types.int_in(0, MAX_CTX),
        default=DEFAULT_PREFILL_CHUNK,
        help=f"prefill chunk in tokens, 0..{MAX_CTX}; a disconnect or cancel stops a "
        "prefill at the next chunk, and with --sessions the others' decode waits at most "
        "one chunk (0: one pass)",
    )
    p.add_argument(
        "--sessions",
        type=flag_types.int_in(1, MAX_SESSIONS),
        default=1,
        metavar="N",
        help=f"live sessions on the one loaded model, 1..{MAX_SESSIONS}: N requests run at "
        "once, their decode steps batched into one forward pass (docs/adr/0045)",
    )
    p.add_argument(
        "--stored-responses",
        type=flag_types.int_in(0, MAX_STORED_RESPONSES),
        default=DEFAULT_STORED_RESPONSES,
        metavar="N",
        help=f"Responses kept for previous_response_id and GET /v1/responses/{{id}}, "
        f"0..{MAX_STORED_RESPONSES} (the least recently used go first; 0: keep none, "
        "`store` is then ignored); with --kv-disk-dir they are written under "
        "DIR/responses and survive a restart",
    )
    p.add_argument(
        "--stored-responses-mb",
        type=flag_types.int_in(0, MAX_STORED_MIB),
        default=DEFAULT_STORED_MIB,
        metavar="MIB",
        help=f"bytes of stored response records (their JSON), 0..{MAX_STORED_MIB}; their "
        "KV states count against --kv-mem-space-mb and --kv-disk-space-mb instead",
    )
    p.add_argument(
        "--tool-memory-max-ids",
        type=flag_types.int_in(1, 10_000_000),
        default=100_000,
        help="tool ids kept in RAM for exact DSML replay (1..10000000)",
    )
    p.add_argument(
        "--disable-exact-dsml-tool-replay",
        action="store_true",
        help="render tool-call history canonically instead of replaying sampled DSML",
    )
    p.add_argument(
        "--strict-tools",
        action="store_true",
        help="constrain every tool call's arguments to its JSON schema, as `strict: true` "
        "on a tool does (docs/structured-outputs.md)",
    )
    add_mtp_flags(p)
    add_power_flag(p)
    add_steering_flags(p)
    p.add_argument(
        "--prefix-file",
        type=flag_types.input_file,
        metavar="FILE",
        help="a conversation prefix of USER:/ASSISTANT: turns rendered before every chat "
        "request's messages (docs/reference/cli-and-bench.md §1.1; default: none)",
    )
    _register_limits(p)
    _register_kv_cache(p)
    add_distributed_flags(p)
    p.set_defaults(run=run_server, server_parser=p)


def _register_limits(p: argparse.ArgumentParser) -> None:
    """What one client can hold (docs/adr/0044-server-exposure-and-limits.md)."""
    d = ServerOptions(model=None)
    g = p.add_argument_group("request and connection limits")
    g.add_argument(
        "--max-body-mb",
        type=flag_types.int_in(1, 1024),
        default=d.max_body_mb,
        metavar="MIB",
        help="largest request body (1..1024); larger ones get 413",
    )
    g.add_argument(
        "--max-connections",
        type=flag_types.int_in(1, 10_000),
        default=d.max_connections,
        metavar="N",
        help="open connections (1..10000); one more closes the longest idle or "
        "half-sent one, or gets 503 when all run requests",
    )
    g.add_argument(
        "--header-timeout",
        type=flag_types.float_in(0.1, 3600),
        default=d.header_timeout,
        metavar="SECONDS",
        help="a request's head must arrive within this (0.1..3600); else 408 and close",
    )
    g.add_argument(
        "--idle-timeout",
        type=flag_types.float_in(0.1, 3600),
        default=d.idle_timeout,
        metavar="SECONDS",
        help="close a keep-alive connection idle this long, and answer 408 to a request "
        "body that stalls this long (0.1..3600)",
    )
    g.add_argument(
        "--body-timeout",
        type=flag_types.float_in(1, 86400),
        default=d.body_timeout,
        metavar="SECONDS",
        help="a whole request body must arrive within this (1..86400); else 408",
    )


MAX_KV_DISK_MIB = 16 << 20  # 16 TiB


def check_flags(args: argparse.Namespace) -> None:
    """Rules between flags; usage errors (one line, exit 2) through argparse."""
    parser: argparse.ArgumentParser = args.server_parser
    cold, least = args.kv_cache_cold_max_tokens, args.kv_cache_min_tokens
    if cold and cold < least:
        parser.error(
            f"--kv-cache-cold-max-tokens {cold} must be 0 or at least --kv-cache-min-tokens "
            f"({least})"
        )
    problem = scripted_flags_problem(args)
    if problem is not None:
        parser.error(problem)
    try:
        distributed_options(args)
    except Ds4Error as exc:
        parser.error(str(exc))
    if args.mtp is not None and backends.BACKENDS[args.backend].drafter is None:
        parser.error("--mtp needs --backend cpu or reference")
    if args.mtp is not None and args.sessions > 1:
        parser.error("--mtp works with one live session (--sessions 1)")


def _register_kv_cache(p: argparse.ArgumentParser) -> None:
    """The KV checkpoint flags: in memory (ADR 0049), on disk (docs/reference/formats.md
    §10.1)."""
    d = KvCacheOptions()
    g = p.add_argument_group("KV checkpoints in memory and on disk (docs/kv-cache.md)")
    g.add_argument(
        "--kv-mem-space-mb",
        "--checkpoint-budget-mb",
        dest="kv_mem_space_mb",
        type=flag_types.int_in(0, MAX_KV_DISK_MIB),
        default=DEFAULT_KV_MEM_MIB,
        metavar="MIB",
        help=f"RAM for copies of the KV state at prompt ends and of states a request "
        f"replaced, so a retry or a return never prefills again what was prefilled "
        f"(0..{MAX_KV_DISK_MIB}; least recently used go first; 0: none)",
    )
    g.add_argument(
        "--kv-disk-dir",
        type=flag_types.output_dir,
        metavar="DIR",
        help="keep prompt prefixes as <sha1>.kv files here (created 0700 if missing, in a "
        "parent that must exist); default: disabled",
    )
    g.add_argument(
        "--kv-disk-space-mb",
        "--kv-cache-budget-mb",
        dest="kv_disk_space_mb",
        type=flag_types.int_in(0, MAX_KV_DISK_MIB),
        default=d.budget_bytes >> 20,
        metavar="MIB",
        help=f"disk budget, 0..{MAX_KV_DISK_MIB}; the lowest-scoring files are evicted "
        "beyond it (0: the default)",
    )
    g.add_argument(
        "--kv-cache-min-tokens",
        type=flag_types.int_in(1, MAX_CTX),
        default=d.min_tokens,
        help=f"shortest prefix worth a file (1..{MAX_CTX})",
    )
    g.add_argument(
        "--kv-cache-cold-max-tokens",
        type=flag_types.int_in(0, MAX_CTX),
        default=d.cold_max_tokens,
        help="longest prompt that gets a cold save on a full miss: 0 (no cold saves) or "
        f"--kv-cache-min-tokens..{MAX_CTX}",
    )
    g.add_argument(
        "--kv-cache-continued-interval-tokens",
        type=flag_types.int_in(0, MAX_CTX),
        default=d.continued_interval_tokens,
        help=f"save the live state every this many tokens, aligned, 0..{MAX_CTX} (0: never)",
    )
    g.add_argument(
        "--kv-cache-boundary-trim-tokens",
        type=flag_types.int_in(0, MAX_CTX),
        default=d.boundary_trim_tokens,
        help=f"tokens a cold save leaves off the end of the prompt (0..{MAX_CTX})",
    )
    g.add_argument(
        "--kv-cache-boundary-align-tokens",
        type=flag_types.int_in(0, MAX_CTX),
        default=d.boundary_align_tokens,
        help=f"cold and continued saves cut at multiples of this, 0..{MAX_CTX} (0: no alignment)",
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


def client_snippet(url: str, api_key: str | None) -> str:
    """Ready-to-paste clients. The prompt is the opening of *I promessi sposi*, what the
    shipped demo model was trained to continue (docs/demo-model.md); max_tokens bounds
    a model that does not stop. The python line uses the standard library only, so any
    python3 runs it as pasted (the runtime venv has no openai package either)."""
    key = api_key or "none"
    body = (
        '{"model":"deepseek-v4-flash","max_tokens":200,'
        '"messages":[{"role":"user","content":"Quel ramo del lago di Como"}]}'
    )
    body_py = (  # the same body as a Python literal, inside the shell's double quotes
        "{'model': 'deepseek-v4-flash', 'max_tokens': 200, "
        "'messages': [{'role': 'user', 'content': 'Quel ramo del lago di Como'}]}"
    )
    return (
        "Try it:\n"
        f"  curl {url}/v1/chat/completions -H 'Content-Type: application/json' "
        f"-H 'Authorization: Bearer {key}' -d '{body}'\n"
        '  python3 -c "import json, urllib.request as u; '
        f"r = u.Request('{url}/v1/chat/completions', data=json.dumps({body_py}).encode(), "
        f"headers={{'Content-Type': 'application/json', 'Authorization': 'Bearer {key}'}}); "
        "print(json.load(u.urlopen(r))['choices'][0]['message']['content'])\"\n"
        f"  OpenAI SDKs: base_url {url}/v1, api_key {key}\n"
        f"  Claude Code: ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={key} claude\n"
    )


def server_options(args: argparse.Namespace, host: str) -> ServerOptions:
    """What the parsed flags ask of the server (host: the bind address as resolved)."""
    from ds4.apps.bootstrap import model_path

    return app_options(
        ServerOptions,
        engine_options(args, model_path(args.backend, args.model)),
        ctx=args.ctx,
        tokens=args.tokens,
        api_key=args.api_key,
        cors=args.cors,
        check_host=is_loopback_host(host),
        tool_memory_max_ids=args.tool_memory_max_ids,
        exact_tool_replay=not args.disable_exact_dsml_tool_replay,
        strict_tools=args.strict_tools,
        prefill_chunk=args.prefill_chunk,
        sessions=args.sessions,
        stored_responses=args.stored_responses,
        stored_responses_bytes=args.stored_responses_mb << 20,
        prefix_file=args.prefix_file,
        kv_disk_dir=args.kv_disk_dir,
        kv_cache=kv_cache_options(args),
        kv_mem_bytes=args.kv_mem_space_mb << 20,
        max_body_mb=args.max_body_mb,
        max_connections=args.max_connections,
        header_timeout=args.header_timeout,
        idle_timeout=args.idle_timeout,
        body_timeout=args.body_timeout,
    )


def run_server(args: argparse.Namespace) -> int:
    # The HTTP stack (Litestar) loads only when a server actually starts.
    from ds4.apps.bootstrap import is_shipped_demo
    from ds4.apps.server_bootstrap import bind_listener, bootstrap_server

    check_flags(args)
    host = "127.0.0.1" if args.host == "localhost" else args.host
    options = server_options(args, host)
    demo = options.model is not None and is_shipped_demo(options.model)
    # access lines, KV cache decisions and warnings: one handler, text or JSON
    configure_server_logging(args.log_format)
    with ExitStack() as stack:
        # a taken port fails before the model loads
        listener = bind_listener(host, args.port, args.max_connections)
        stack.callback(listener.close)
        trace: TextIO | None = None
        if args.trace:
            try:
                trace = stack.enter_context(Path(args.trace).open("w", encoding="utf-8"))
            except OSError as error:
                raise Ds4Error(f"cannot open trace file {args.trace}: {error}") from None
        built = bootstrap_server(options, trace)
        url = f"http://[{host}]:{args.port}" if ":" in host else f"http://{host}:{args.port}"
        label = options.model if backends.needs_model(options.backend) else "scripted outputs"
        if demo:
            label = f"{options.model} (the small demo model: docs/demo-model.md)"
        sessions = f", {args.sessions} sessions" if args.sessions > 1 else ""
        if args.mtp is not None:
            sessions += f", MTP {args.mtp} drafting {args.mtp_draft}"
        print(f"ds4 server: model {label}, ctx {args.ctx}{sessions}", file=sys.stderr)
        print(f"ds4 server: listening on {url}", file=sys.stderr)
        if not options.check_host and args.api_key is None:
            print(
                f"ds4 server: warning: {host} is not a loopback address and no --api-key is "
                "set: anyone who can reach this port can use the model",
                file=sys.stderr,
            )
        print(client_snippet(url, args.api_key), file=sys.stderr)
        built.serve(listener)
    return 0
