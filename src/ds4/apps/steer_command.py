"""`ds4 steer build|sweep`: directional steering directions from contrast prompts, and
greedy outputs over a range of scales (docs/steering.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ds4.apps import flag_types, wiring
from ds4.apps.bootstrap import Engine, load_engine
from ds4.apps.cli_generate import DEFAULT_SYSTEM, chat_prompt, model_path
from ds4.apps.engine_flags import add_engine_flags, engine_options
from ds4.apps.flag_types import DefaultsHelpFormatter, read_utf8
from ds4.domain.chat import ThinkMode
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished
from ds4.domain.generation.loop import TurnSettings, generate
from ds4.domain.sampling import GREEDY
from ds4.domain.steering.build import (
    COMPONENTS,
    DirectionInfo,
    build_directions,
    capture_prompts,
    prompt_lines,
)
from ds4.domain.steering.directions import (
    MAX_SCALE,
    Steering,
    directions_from_bytes,
)
from ds4.ports.compute import Component, Steerable

DEFAULT_SCALES = "-2,-1,-0.5,0,0.5,1,2"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    steer = sub.add_parser(
        "steer",
        help="build directional-steering directions and sweep their scale",
        description="Directional steering (docs/steering.md): `build` captures one "
        "component's output per layer for contrast prompts and writes a direction file; "
        "`sweep` prints greedy outputs over a range of scales.",
    )
    tools = steer.add_subparsers(dest="steer_command", metavar="TOOL", required=True)
    build = tools.add_parser(
        "build",
        formatter_class=DefaultsHelpFormatter,
        help="a direction file from target and contrast prompts",
        description="Per layer: normalize(mean(good) - mean(bad)) of the chosen component's "
        "output at each prompt's last position; written as OUT.json (metadata) and the raw "
        "f32 file beside it (same name, .f32).",
    )
    _model_flags(build)
    build.add_argument("--good-file", type=flag_types.input_file, required=True, metavar="F",
                       help="target prompts, one per line (# starts a comment)")  # fmt: skip
    build.add_argument("--bad-file", type=flag_types.input_file, required=True, metavar="F",
                       help="contrast prompts, one per line; pairs = the shorter list")  # fmt: skip
    build.add_argument("--out", type=flag_types.output_file, required=True, metavar="OUT.json",
                       help="metadata JSON; the directions go to OUT.f32")  # fmt: skip
    build.add_argument("--ctx", type=flag_types.int_in(2, 1 << 20), default=512,
                       help="session size per prompt (2..1048576)")  # fmt: skip
    build.add_argument("--system", default=DEFAULT_SYSTEM, help="system text of every prompt")
    build.add_argument("--component", choices=COMPONENTS, default="ffn_out",
                       help="which sublayer output to capture")  # fmt: skip
    build.add_argument("--think", action="store_true", help="render prompts in thinking mode")
    build.add_argument("--pair-normalize", action="store_true",
                       help="normalize(mean_i normalize(good_i - bad_i)) instead")  # fmt: skip
    build.add_argument("--no-orthogonalize", action="store_true",
                       help="keep the component along the contrast mean")  # fmt: skip
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    build.set_defaults(run=run_build)

    sweep = tools.add_parser(
        "sweep",
        formatter_class=DefaultsHelpFormatter,
        help="greedy outputs of each prompt at each FFN scale",
        description="For each prompt and FFN scale: `PROMPT: ...`, `FFN scale: ...`, then the "
        "greedy answer with the direction applied at that scale.",
    )
    _model_flags(sweep)
    sweep.add_argument("--direction", type=flag_types.input_file, required=True,
                       metavar="FILE.f32", help="the direction file")  # fmt: skip
    sweep.add_argument("--prompts", type=flag_types.input_file, required=True, metavar="F",
                       help="prompts, one per line (# starts a comment)")  # fmt: skip
    sweep.add_argument("--scales", default=DEFAULT_SCALES,
                       help="comma-separated FFN scales, each in -100..100")  # fmt: skip
    sweep.add_argument("--tokens", type=flag_types.int_in(1, 1 << 20), default=160,
                       help="max tokens per answer")  # fmt: skip
    sweep.add_argument("--ctx", type=flag_types.int_in(2, 1 << 20), default=4096,
                       help="session size (2..1048576)")  # fmt: skip
    sweep.add_argument("--attn-scale", type=flag_types.float_in(-MAX_SCALE, MAX_SCALE),
                       default=0.0, help="attention scale at every step, -100..100")  # fmt: skip
    sweep.add_argument("--system", default=DEFAULT_SYSTEM, help="system text of every prompt")
    sweep.add_argument("--nothink", action="store_true", help="answer without thinking")
    sweep.set_defaults(run=run_sweep, sweep_parser=sweep)


def _model_flags(parser: argparse.ArgumentParser) -> None:
    add_engine_flags(parser)  # -m, --backend, --threads, --numerics


def _engine(args: argparse.Namespace) -> Engine:
    return load_engine(engine_options(args, model_path(args)))


def _read_prompts(path: str) -> list[str]:
    text = read_utf8(path)
    return prompt_lines(text, path)


def run_build(args: argparse.Namespace) -> int:
    good, bad = _read_prompts(args.good_file), _read_prompts(args.bad_file)
    out = Path(args.out)
    f32 = out.with_suffix(".f32")
    engine = _engine(args)
    mode = ThinkMode.HIGH if args.think else ThinkMode.NONE
    component: Component = args.component
    pairs = min(len(good), len(bad))
    with flag_types.progress_bar(2 * pairs, quiet=args.quiet, desc="capture", unit="prompt") as bar:
        captures = [
            capture_prompts(
                engine.runner, engine.tokenizer, prompts[:pairs],
                lambda text: chat_prompt(text, args.system, mode),
                ctx=args.ctx, component=component, done=lambda: bar.update(1),
            )
            for prompts in (good, bad)
        ]  # fmt: skip
    directions = build_directions(
        captures[0],
        captures[1],
        pair_normalize=args.pair_normalize,
        orthogonalize=not args.no_orthogonalize,
    )
    info = DirectionInfo(
        shape=(directions.shape[0], directions.shape[1]),
        component=component,
        thinking=args.think,
        pair_normalize=args.pair_normalize,
        orthogonalize=not args.no_orthogonalize,
        good_file=args.good_file,
        bad_file=args.bad_file,
        model=model_path(args),
        pairs=pairs,
    )
    with wiring.atomic_write(out) as handle:
        handle.write((info.json() + "\n").encode("utf-8"))
    with wiring.atomic_write(f32) as handle:
        handle.write(directions.astype("<f4").tobytes())
    print(f"ds4 steer: wrote {out} and {f32} ({pairs} pairs, {component})", file=sys.stderr)
    return 0


def parse_scales(text: str) -> list[float]:
    try:
        scales = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise Ds4Error(f"--scales {text!r}: expected numbers separated by commas") from None
    bad = [s for s in scales if not -MAX_SCALE <= s <= MAX_SCALE]
    if not scales or bad:
        raise Ds4Error(f"--scales {text!r}: give 1 or more scales, each in -100..100")
    return scales


def run_sweep(args: argparse.Namespace) -> int:
    scales = parse_scales(args.scales)
    prompts = _read_prompts(args.prompts)
    engine = _engine(args)
    runner, hp = engine.runner, engine.runner.hparams
    if not isinstance(runner, Steerable):
        raise Ds4Error("directional steering needs --backend cpu or reference")
    try:
        data = Path(args.direction).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read {args.direction}: {exc.strerror}") from None
    directions = directions_from_bytes(data, args.direction, hp.n_layer, hp.n_embd)
    mode = ThinkMode.NONE if args.nothink else ThinkMode.HIGH
    settings = TurnSettings(GREEDY, max_tokens=args.tokens, thinking=mode.thinking)
    for prompt in prompts:
        print(f"PROMPT: {prompt}")
        ids = engine.tokenizer.encode(chat_prompt(prompt, args.system, mode))
        for scale in scales:
            runner.steer(Steering(directions, args.attn_scale, scale))
            session = engine.new_session(args.ctx)
            text = ""
            for event in generate(session, ids, engine.tokenizer, settings):
                if isinstance(event, Finished):
                    text = event.text
            print(f"FFN scale: {scale:g}")
            print(text.strip())
            print()
            sys.stdout.flush()
    runner.steer(None)
    return 0
