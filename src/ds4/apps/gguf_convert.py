"""`ds4 gguf convert`: a DeepSeek V4 checkpoint directory to ds4 GGUF (and MTP GGUF)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4 import __version__
from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import INT_MAX, MAX_THREADS, DefaultsHelpFormatter
from ds4.domain.convert.checkpoint_sources import (
    ImportanceLookup,
    SourceIndex,
    check_complete,
    chunks,
    index_sources,
)
from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.convert.plan import (
    QUANT_PRESETS,
    PlannedTensor,
    QuantPlan,
    check_plan_fits,
    meta_flags,
    provenance_metadata,
    quant_plan,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, meta_str
from ds4.domain.model.catalog import TensorSpec, model_tensors, mtp_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams, hparams_metadata
from ds4.ports.model_file import Checkpoint


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tools.add_parser(
        "convert",
        formatter_class=DefaultsHelpFormatter,
        help="convert a DeepSeek V4 checkpoint (official or HF naming) to GGUF",
        description="Convert a DeepSeek V4 checkpoint directory (config.json + safetensors, in "
        "the official release's naming with FP8/FP4 weights, or as transformers' "
        "save_pretrained writes it) to a ds4 GGUF, tensor by tensor with bounded memory. "
        "MTP weights, when present, go to a separate MTP GGUF.",
    )
    p.add_argument(
        "--hf",
        type=flag_types.existing_dir,
        required=True,
        metavar="DIR",
        help="checkpoint directory",
    )
    p.add_argument(
        "--out",
        type=flag_types.output_file,
        required=True,
        help="output GGUF path (written atomically; its directory must exist)",
    )
    p.add_argument("--quant", choices=QUANT_PRESETS, default="q2", help="tensor type mixture")
    p.add_argument(
        "--q4-last-layers",
        type=flag_types.int_in(0, INT_MAX),
        default=None,
        help="with --quant q2-q4: final layers with Q4_K experts (default: a quarter)",
    )
    p.add_argument(
        "--mtp-out",
        type=flag_types.output_file,
        default=None,
        help="MTP GGUF path (default: OUT with -mtp before the extension; written only when "
        "the checkpoint has MTP weights)",
    )
    p.add_argument(
        "--imatrix",
        type=flag_types.input_file,
        default=None,
        help="importance matrix (.dat) for quantization",
    )
    p.add_argument(
        "--imatrix-strict",
        action="store_true",
        help="fail when a quantized tensor has no imatrix entry (default: quantize it unweighted)",
    )
    p.add_argument(
        "--tokenizer",
        type=flag_types.input_file,
        metavar="JSON",
        default=None,
        help="tokenizer.json to embed (default: DIR/tokenizer.json, else the official one)",
    )
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra provenance string stored as ds4.convert.KEY, repeatable (default: none)",
    )
    p.add_argument(
        "--threads",
        type=flag_types.int_in(1, MAX_THREADS),
        default=None,
        help=f"quantizer threads, 1..{MAX_THREADS} (default: cores)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run_convert)


def _importance_lookup(path: str | None, strict: bool) -> ImportanceLookup:
    if path is None:
        return lambda *_: None
    imatrix = wiring.read_imatrix(path)

    def lookup(
        gguf_name: str, stored: str, expert: int | None, n_experts: int, ncols: int
    ) -> npt.NDArray[np.float32] | None:
        values = wiring.imatrix_entry(imatrix, gguf_name, stored, expert, n_experts, ncols)
        if values is None and strict:
            raise Ds4Error(f"imatrix has no entry for {gguf_name} (--imatrix-strict)")
        return values

    return lookup


def _plans(
    specs: list[TensorSpec], index: SourceIndex, qplan: QuantPlan, hp: DeepSeekV4HParams
) -> list[PlannedTensor]:
    present = [s for s in specs if not s.optional or index.has(s.name)]
    check_plan_fits(qplan, present, hp)
    plans = [PlannedTensor(s.name, s.dims, qplan.tensor_type(s, hp)) for s in present]
    check_complete(index, plans, hp.n_expert)
    return plans


def _write(
    path: Path,
    metadata: dict[str, MetaValue],
    plans: list[PlannedTensor],
    ckpt: Checkpoint,
    index: SourceIndex,
    args: argparse.Namespace,
) -> None:
    importance = _importance_lookup(args.imatrix, args.imatrix_strict)
    with flag_types.progress_bar(
        len(plans), quiet=args.quiet, desc=path.name, unit="tensor"
    ) as bar:

        def advance(_: PlannedTensor) -> None:
            bar.update(1)

        wiring.write_model(
            path,
            metadata,
            plans,
            lambda plan: chunks(ckpt, index, plan, importance),
            wiring.quantizer(threads=args.threads),
            progress=advance,
        )
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {len(plans)} tensors)")


def default_mtp_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}-mtp{out.suffix or '.gguf'}")


def run_convert(args: argparse.Namespace) -> int:
    source = Path(args.hf)
    ckpt = wiring.open_checkpoint(source)
    try:
        hp = hparams_from_config(ckpt.config)
        index = index_sources(ckpt.tensors)
        qplan = quant_plan(args.quant, hp, args.q4_last_layers)
        plans = _plans(model_tensors(hp), index, qplan, hp)
        mtp_plans = _plans(mtp_tensors(hp), index, qplan, hp) if index.has_mtp() else []
        tokenizer = args.tokenizer
        if tokenizer is None and (source / "tokenizer.json").is_file():
            tokenizer = str(source / "tokenizer.json")
        extra = meta_flags(args.meta)
        if args.imatrix:
            extra["imatrix"] = Path(args.imatrix).name
        metadata: dict[str, MetaValue] = {
            "general.name": meta_str(f"DeepSeek-V4 ({source.name})"),
            **hparams_metadata(hp),
            **wiring.tokenizer_records(tokenizer),
            **provenance_metadata(
                __version__, f"{index.naming}:{source.name}", args.quant, **extra
            ),
        }
        _write(Path(args.out), metadata, plans, ckpt, index, args)
        if mtp_plans:
            mtp_path = Path(args.mtp_out) if args.mtp_out else default_mtp_path(Path(args.out))
            mtp_meta = {k: v for k, v in metadata.items() if not k.startswith("tokenizer.")}
            mtp_meta["general.name"] = meta_str(f"DeepSeek-V4 MTP ({source.name})")
            _write(mtp_path, mtp_meta, mtp_plans, ckpt, index, args)
    finally:
        ckpt.close()
    return 0
