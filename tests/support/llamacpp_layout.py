"""Rewrite our main + MTP GGUFs into llama.cpp's MTP layout (docs/llamacpp.md).

Written from llama.cpp's description of the layout (its converter's `--mtp` output and
its loader), independently of ds4.domain.model.nextn, so the tests check the reader
against the layout rather than against itself: `blk.N.*` for the block, the e/h
projections side by side in one `blk.N.nextn.eh_proj` (the e inputs first),
`nextn.enorm`/`hnorm`/`shared_head_norm`, the HC head as the root `output_hc_*`, and
`block_count` = N + 1 with `nextn_predict_layers` = 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.gguf.records import MetaValue, ValueType

ARCH = "deepseek4"
_MTP_EXTRAS = {
    "enorm.weight": "nextn.enorm.weight",
    "hnorm.weight": "nextn.hnorm.weight",
    "norm.weight": "nextn.shared_head_norm.weight",
}
_TRUNK_COPIES = ("token_embd.weight", "output_norm.weight", "output.weight")


def _metadata(main: GGUFFile, n_layer: int) -> dict[str, MetaValue]:
    out = dict(main.metadata)
    out[f"{ARCH}.block_count"] = MetaValue(ValueType.UINT32, n_layer + 1)
    out[f"{ARCH}.nextn_predict_layers"] = MetaValue(ValueType.UINT32, 1)
    ratios = out[f"{ARCH}.attention.compress_ratios"]
    clamps = out[f"{ARCH}.swiglu_clamp_exp"]
    out[f"{ARCH}.attention.compress_ratios"] = MetaValue(
        ValueType.ARRAY, [*list(ratios.items() or [])[:n_layer], 0], ratios.item_type
    )
    last = list(clamps.items() or [])[:n_layer]
    clamp_key = f"{ARCH}.swiglu_clamp_exp"
    out[clamp_key] = MetaValue(ValueType.ARRAY, [*last, last[-1]], clamps.item_type)
    return out


def _mtp_tensors(mtp: GGUFFile, n_layer: int, own_head: bool) -> dict[str, tuple[str, object]]:
    """llama.cpp name -> (how, payload) for the block."""
    blk = f"blk.{n_layer}."
    out: dict[str, tuple[str, object]] = {}
    for name in mtp.tensors:
        rest = name[len("mtp.0.") :]
        if rest in ("e_proj.weight", "h_proj.weight"):
            continue
        if rest.startswith("hc_head_"):
            if own_head:
                out["output_hc_" + rest[len("hc_head_") :]] = ("copy", name)
            continue
        out[blk + _MTP_EXTRAS.get(rest, rest)] = ("copy", name)
    out[blk + "nextn.eh_proj.weight"] = ("eh", None)
    return out


def write_llamacpp_mtp(main_path: Path, mtp_path: Path, out: Path, *, with_trunk: bool) -> Path:
    """with_trunk=False: llama.cpp's MTP-only file (the block's own HC head as
    output_hc_*, plus copies of the embedding, output norm and output matrix);
    True: the whole main model with the block as its last layer (one HC head: the main
    model's, which llama.cpp's MTP graph then uses)."""
    with GGUFFile(main_path) as main, GGUFFile(mtp_path) as mtp:
        n_layer = int(main.metadata[f"{ARCH}.block_count"].value)  # type: ignore[arg-type]
        e, h = mtp.tensors["mtp.0.e_proj.weight"], mtp.tensors["mtp.0.h_proj.weight"]
        assert e.ggml_type == h.ggml_type
        plan: dict[str, tuple[str, object]] = {}
        trunk = list(main.tensors) if with_trunk else list(_TRUNK_COPIES)
        for name in trunk:
            plan[name] = ("main", name)
        plan |= _mtp_tensors(mtp, n_layer, own_head=not with_trunk)
        writer = GGUFWriter(out)
        for key, value in _metadata(main, n_layer).items():
            if key != "general.alignment":
                writer.add_metadata(key, value)
        for name, (how, src) in plan.items():
            if how == "eh":
                writer.add_tensor(name, (e.dims[0] * 2, e.dims[1]), e.ggml_type)
            else:
                info = (main if how == "main" else mtp).tensors[str(src)]
                writer.add_tensor(name, info.dims, info.ggml_type)
        for name, (how, src) in plan.items():
            if how == "eh":
                rows = np.concatenate([mtp.raw(e.name), mtp.raw(h.name)], axis=-1)
                writer.write_tensor(name, rows)
            else:
                writer.write_tensor(name, (main if how == "main" else mtp).raw(str(src)))
        return writer.finish()
