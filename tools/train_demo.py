"""Train the shipped demo model (models/demo.gguf, models/demo-mtp.gguf) from scratch.

    python tools/train_demo.py [--seed 4] [--steps N] [--mtp-steps M] [--out models]

A small DeepSeek V4 (tools/demo/shape.py) learns to continue passages of *I promessi
sposi* as chat answers and to make one read_file tool round trip (docs/demo-model.md).
`--init models/demo.gguf --agent-mix` fine-tunes a shipped model on `ds4 agent` turns
instead (tools/demo/agent_dialogues.py; docs/demo-model.md "The agent fine-tune").
Needs the oracle extra (torch, transformers, safetensors); nothing here is imported by
the ds4 package. Everything is decided by --seed: the data cuts and their order come
from numpy generators keyed by it, torch runs one thread with deterministic algorithms,
so a rerun with the same torch build on the same kind of CPU writes the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from ds4.apps import wiring  # noqa: E402
from ds4.apps.cli import main as ds4_main  # noqa: E402
from tools.demo import agent_eval, evaluate, export, train_loop, warm_start  # noqa: E402
from tools.demo.agent_dialogues import AgentRenderer  # noqa: E402
from tools.demo.batches import Batch, make_batches  # noqa: E402
from tools.demo.check_logits import check  # noqa: E402
from tools.demo.check_weights import max_differences  # noqa: E402
from tools.demo.dataset import AGENT_MIX, DEFAULT_TEXT, Corpus, build_corpus  # noqa: E402
from tools.demo.reference_torch import all_logits, load_reference  # noqa: E402
from tools.demo.torch_model import DemoModel  # noqa: E402
from tools.demo.vocab import install_hash_routes, row_index, seen_tokens  # noqa: E402

EPOCHS = 3  # data cuts generated (and cycled through); fixed so --steps never changes them
SCRIPT = "tools/train_demo.py"


def batch_stream(
    corpus: Corpus, row_of: np.ndarray, budget: int, seed: int, first_epoch: int
) -> Iterator[Batch]:
    epoch = first_epoch
    while True:
        rng = np.random.default_rng([seed, 31337, epoch])
        yield from make_batches(corpus.epochs[epoch % EPOCHS], row_of, budget, rng)
        epoch += 1


def token_digest(corpus: Corpus) -> str:
    h = hashlib.sha256()
    for examples in corpus.epochs:
        for e in examples:
            h.update(e.ids.tobytes())
            h.update(e.weights.tobytes())
    return h.hexdigest()


def run_summary(steps: int, log: train_loop.RunLog) -> dict[str, float]:
    return {
        "steps": steps,
        "tokens": log.tokens,
        "seconds": round(log.seconds),
        "final_loss": round(log.recent_loss(), 4),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python tools/train_demo.py", description=__doc__)
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--steps", type=int, default=640, help="main-model optimizer steps")
    p.add_argument("--mtp-steps", type=int, default=150, help="MTP-block optimizer steps")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per batch")
    p.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    p.add_argument("--out", type=Path, default=REPO / "models", help="where demo*.gguf go")
    p.add_argument("--work", type=Path, default=REPO / "build" / "demo", help="checkpoint dir")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: reproducible)")
    p.add_argument("--no-check", action="store_true", help="skip the engine-vs-torch check")
    p.add_argument(
        "--init", type=Path, default=None,
        help="warm start from this demo.gguf (and the demo-mtp.gguf next to it)",
    )  # fmt: skip
    p.add_argument(
        "--agent-mix", action="store_true",
        help="train on the agent fine-tune's data (tools/demo/dataset.py AgentMix)",
    )  # fmt: skip
    p.add_argument(
        "--probe-every", type=int, default=0, help="copy probe interval in steps (0: only the end)"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    t0 = time.perf_counter()
    tokenizer = wiring.tokenizer(None)
    corpus = build_corpus(
        tokenizer, args.text, EPOCHS, args.seed, AGENT_MIX if args.agent_mix else None
    )
    seen = seen_tokens(corpus.epochs)
    if args.init is not None:  # keep every row the warm start has
        seen = np.union1d(seen, warm_start.rows_of(args.init))
    vocab = tokenizer.vocab_size
    row_of = row_index(seen, vocab)
    model = DemoModel(len(seen), args.seed)
    install_hash_routes(model, seen, args.seed)
    init = ""
    if args.init is not None:
        fresh = warm_start.load(
            model, seen, args.init, args.init.with_name("demo-mtp.gguf"), args.seed
        )
        digest = hashlib.sha256(args.init.read_bytes()).hexdigest()
        init = f"{args.init.name} sha256:{digest}"
        print(f"warm start from {init}: {fresh} new token rows", file=sys.stderr)
    print(f"data ready: {len(seen)} token rows, {time.perf_counter() - t0:.0f}s", file=sys.stderr)

    renderer = AgentRenderer(tokenizer)
    probes: list[dict[str, object]] = []

    def probe(step: int) -> None:
        short = agent_eval.score(model, renderer, corpus.agent_held_out, row_of, 60, args.seed)
        full = agent_eval.score(model, renderer, corpus.agent_held_out[:4], row_of, None, args.seed)
        for label, s in (("tail 60", short), ("full prompt", full)):
            print(f"copy probe step {step} {s.line(label)}", file=sys.stderr, flush=True)
        probes.append({"step": step, "tail60": short.__dict__, "full4": full.__dict__})

    skip = ("hf.model.embed_tokens.", "hf.lm_head.", "mtp.")
    params = [p for n, p in model.named_parameters() if not n.startswith(skip)]
    stream = batch_stream(corpus, row_of, args.batch_tokens, args.seed, 0)
    main_log = train_loop.run(
        model, params, lambda: stream, train_loop.Schedule(args.steps, args.lr),
        train_loop.main_loss, "main", probe, args.probe_every,
    )  # fmt: skip
    final_copy = None
    if args.agent_mix:  # 16 held-out requests, each with the whole system prompt
        final_copy = agent_eval.score(
            model, renderer, corpus.agent_held_out[:16], row_of, None, args.seed
        )
        print(final_copy.line("held-out agent requests, whole system prompt"), file=sys.stderr)
    config = export.config_json(model)
    hub = export.snap(export.main_hub(model, seen), config)
    export.load_main(model, hub, seen)

    mtp_stream = batch_stream(corpus, row_of, args.batch_tokens, args.seed, EPOCHS)
    mtp_log = train_loop.run(
        model, list(model.mtp.parameters()), lambda: mtp_stream,
        train_loop.Schedule(args.mtp_steps, args.lr), train_loop.mtp_loss, "mtp",
    )  # fmt: skip
    hub.update(export.snap(export.mtp_hub(model), config))
    checkpoint = args.work / "ds4-demo"
    export.write_checkpoint(hub, config, checkpoint)

    reference = load_reference(checkpoint)
    quality = evaluate.measure(
        lambda ids: all_logits(reference, ids), corpus.held_out, corpus.novel_train, vocab
    )
    for line in quality.lines():
        print(line, file=sys.stderr)
    meta = {
        "train_script": SCRIPT,
        "train_seed": str(args.seed),
        "train_data": f"{args.text.name} sha256:{corpus.text_sha256}",
        "train_tokens_sha256": token_digest(corpus),
        "train_steps": f"{args.steps} main + {args.mtp_steps} mtp, {args.batch_tokens} "
        f"tokens per batch, lr {args.lr}",
        "train_software": f"torch {torch.__version__}, transformers {transformers.__version__}",
        "train_rows": f"{len(seen)} of {vocab} tokens have rows; the others are zero",
        "heldout_ce": f"{quality.model_ce:.3f} nats/token (unigram {quality.unigram_ce:.3f})",
    }
    if final_copy is not None:
        meta["agent_copy"] = (
            f"{final_copy.calls_exact}/{final_copy.tasks} held-out agent calls exact "
            f"(write {final_copy.writes_exact}/{final_copy.write_tasks}), teacher-forced arg-max"
        )
    if init:
        meta["train_init"] = init
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "demo.gguf"
    flags = [f"--meta={k}={v}" for k, v in meta.items()]
    code = ds4_main(["gguf", "convert", "--hf", str(checkpoint), "--out", str(out),
                     "--quant", export.QUANT, "--threads", "1", "--quiet", *flags])  # fmt: skip
    if code:
        return code

    report: dict[str, object] = {
        "main": run_summary(args.steps, main_log),
        "mtp": run_summary(args.mtp_steps, mtp_log),
        "quality": quality.__dict__,
        "copy_probes": probes,
        "agent_copy": None if final_copy is None else final_copy.__dict__,
        "meta": meta,
    }
    mtp_out = args.out / "demo-mtp.gguf"
    report["stored_weights_max_diff"] = max_differences(checkpoint, [out, mtp_out])
    if not args.no_check:
        seqs = [[int(t) for t in e.ids] for e in corpus.held_out[:4]]
        agreements = check(checkpoint, out, seqs)
        for a in agreements:
            print(a.line(), file=sys.stderr)
        report["logits"] = [a.__dict__ for a in agreements]
    report["wall_seconds"] = round(time.perf_counter() - t0)
    (args.work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
