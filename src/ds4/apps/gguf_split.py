"""`ds4 gguf split --layers 0-30,31-output IN OUT_PREFIX`: one layer-shard GGUF per
range, for `--distributed` workers that should map only their own layers
(docs/distributed.md#layer-shard-files; the rules are domain/model/shards.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import DefaultsHelpFormatter
from ds4.domain.errors import Ds4Error
from ds4.domain.kvcache.kv_file import model_tag_for
from ds4.domain.model.shards import parse_shard_layers, shard_file_name, shards_for


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    split = tools.add_parser(
        "split",
        formatter_class=DefaultsHelpFormatter,
        help="write one layer-shard GGUF per layer range (for --distributed workers)",
        description="Split a model GGUF into layer-shard files, one per range of --layers: "
        "each holds its layers' tensors byte for byte (the first also the token embedding, "
        "the last the output head) and the whole model's metadata, plus ds4.split.* keys "
        "naming its part. Run them with --distributed ... --layer-files FILE,FILE "
        "(docs/distributed.md). Files are written atomically: OUT_PREFIX-layers00-30.gguf, "
        "OUT_PREFIX-layers31-output.gguf, ...",
    )
    split.add_argument(
        "--layers",
        required=True,
        metavar="A-B,...,C-output",
        help="the ranges, inclusive and in order, covering every layer once; `output` is "
        "the last layer together with the output head (e.g. 0-30,31-output)",
    )
    split.add_argument("file", type=flag_types.model_file, help="the whole model GGUF")
    split.add_argument(
        "out_prefix",
        metavar="OUT_PREFIX",
        help="path prefix of the shard files (its directory must exist)",
    )
    split.add_argument("--quiet", action="store_true", help="no progress bar")
    split.set_defaults(run=run_split)


def run_split(args: argparse.Namespace) -> int:
    prefix = Path(args.out_prefix)
    if not prefix.parent.is_dir():
        raise Ds4Error(f"{args.out_prefix}: directory {prefix.parent} does not exist")
    if not prefix.name:
        raise Ds4Error(f"{args.out_prefix!r}: give a file name prefix, not a directory")
    opened = wiring.open_model(args.file)
    model, hp = opened.file, opened.hparams
    try:
        ranges = parse_shard_layers(args.layers, hp.n_layer)
        tag = model_tag_for(hp, model.metadata, model.tensors.values())
        shards = shards_for(ranges, hp.n_layer, tag)
        targets = [prefix.with_name(shard_file_name(prefix.name, s)) for s in shards]
        source = Path(args.file).resolve()
        for target in targets:
            if target.resolve() == source:
                raise Ds4Error(f"{target} is the input file: choose another OUT_PREFIX")
        sizes = [
            sum(info.nbytes for name, info in model.tensors.items() if s.holds(name))
            for s in shards
        ]
        with flag_types.progress_bar(
            sum(sizes), quiet=args.quiet, desc="split", unit="B"
        ) as bar:  # tqdm shows a bar on a terminal only

            def advance(n: int) -> None:
                bar.update(n)

            for shard, target in zip(shards, targets, strict=True):
                wiring.write_shard(model, shard, target, advance)
        for shard, target, size in zip(shards, targets, sizes, strict=True):
            print(f"wrote {target} (layers {shard.label()}, {size / 2**30:.2f} GiB of tensors)")
    finally:
        model.close()
    return 0
