"""What a response schema costs (docs/structured-outputs.md): the token mask's time per
token and the decode rate, with and without a schema, side by side.

    python -m bench.constrained_bench                  # the demo model
    python -m bench.constrained_bench --flash 2        # and a Flash-shaped file too

The same chat prompt (thinking off) is decoded greedily to --tokens tokens, once free
and once under a JSON schema whose values stay bounded but never close early (an
array of up to --tokens small integers), so both runs decode the same number of
tokens. The mask time is the llguidance call alone (TokenConstraint.allowed); the
sampler's unpacking of the mask is part of the decode rate. --flash N writes (once,
under --dir) a Flash-shaped file of N layers with random weights and the real
129 280-token vocabulary (bench/flash_gguf.py), so the mask covers Flash's whole
vocabulary and the step costs a real head.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
from bench.flash_gguf import flash_prefix, write_model

from ds4.apps import wiring
from ds4.apps.bootstrap import load_engine, shipped_demo_model
from ds4.apps.options import EngineOptions
from ds4.domain.chat import SystemMessage, ThinkMode, UserMessage, render_chat
from ds4.domain.generation.events import Finished
from ds4.domain.generation.loop import TurnSettings, generate
from ds4.domain.sampling import GREEDY
from ds4.ports.constraint import Grammar, TokenConstraint


class TimedConstraint:
    """A constraint that records how long each mask takes."""

    def __init__(self, inner: TokenConstraint) -> None:
        self.inner = inner
        self.mask_seconds: list[float] = []

    def allowed(self) -> npt.NDArray[np.int32]:
        start = time.perf_counter()
        mask = self.inner.allowed()
        self.mask_seconds.append(time.perf_counter() - start)
        return mask

    def advance(self, token: int) -> bool:
        return self.inner.advance(token)

    @property
    def complete(self) -> bool:
        return self.inner.complete


def schema(tokens: int) -> str:
    return json.dumps(
        {
            "type": "object",
            "properties": {
                "values": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 99},
                    "minItems": tokens,
                }
            },
            "required": ["values"],
            "additionalProperties": False,
        }
    )


def run(model: str, tokens: int, threads: int | None) -> dict[str, float]:
    engine = load_engine(
        EngineOptions(model, backend="cpu", threads=threads), ctx=4096, plan_log=None
    )
    messages = (SystemMessage("You answer in JSON."), UserMessage("List some numbers."))
    prompt = engine.tokenizer.encode(render_chat(messages, (), ThinkMode.NONE))
    compiler = wiring.constraint_compiler(engine.tokenizer)
    start = time.perf_counter()
    compiler.compile(Grammar("json_schema", schema(tokens), "bench"))  # the vocabulary's view
    first_compile = time.perf_counter() - start
    start = time.perf_counter()
    constraint = TimedConstraint(compiler.compile(Grammar("json_schema", schema(tokens), "b")))
    compile_seconds = time.perf_counter() - start
    row: dict[str, float] = {"vocabulary_s": first_compile, "compile_ms": compile_seconds * 1e3}
    for label, guide in (("free", None), ("schema", constraint)):
        session = engine.new_session(4096)
        settings = TurnSettings(sampling=GREEDY, max_tokens=tokens, constraint=guide)
        start = time.perf_counter()
        done = None
        first = None
        for event in generate(session, prompt, engine.tokenizer, settings):
            if first is None and not type(event).__name__.startswith("Prefill"):
                first = time.perf_counter()
            done = event
        end = time.perf_counter()
        assert isinstance(done, Finished)
        made = done.usage.completion_tokens
        row[f"{label}_tokens"] = made
        row[f"{label}_tok_s"] = made / max(end - (first or start), 1e-9)
    masks = constraint.mask_seconds
    row["mask_ms_mean"] = statistics.fmean(masks) * 1e3 if masks else 0.0
    row["mask_ms_max"] = max(masks) * 1e3 if masks else 0.0
    return row


def flash_file(directory: Path, layers: int) -> Path:
    path = directory / f"flash-{layers}-layers-vocab.gguf"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_model(tmp, flash_prefix(layers, n_expert=8), 1, tokenizer=wiring.tokenizer_records())
        tmp.rename(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64, help="tokens per run (1..2048)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--flash", type=int, default=0, metavar="LAYERS",
        help="also a Flash-shaped file of LAYERS layers (1..43; 0: skip)",
    )  # fmt: skip
    parser.add_argument("--dir", default="/tmp/ds4-constrained-bench", help="where it goes")
    args = parser.parse_args()
    if not 1 <= args.tokens <= 2048:
        parser.error("--tokens: use 1..2048")
    if not 0 <= args.flash <= 43:
        parser.error("--flash: use 0..43 layers")
    models = [("demo", str(shipped_demo_model()))]
    if args.flash:
        models.append((f"flash x{args.flash}", str(flash_file(Path(args.dir), args.flash))))
    head = (
        f"{'model':<10} {'vocab s':>8} {'compile ms':>10} {'free tok/s':>11} "
        f"{'schema tok/s':>13} {'mask ms/tok':>12} {'mask max ms':>12}"
    )
    print(head)
    for name, path in models:
        r = run(path, args.tokens, args.threads)
        print(
            f"{name:<10} {r['vocabulary_s']:>8.2f} {r['compile_ms']:>10.2f} "
            f"{r['free_tok_s']:>11.1f} {r['schema_tok_s']:>13.1f} "
            f"{r['mask_ms_mean']:>12.3f} {r['mask_ms_max']:>12.3f}"
            f"   ({r['free_tokens']:.0f} / {r['schema_tokens']:.0f} tokens)"
        )


if __name__ == "__main__":
    main()
