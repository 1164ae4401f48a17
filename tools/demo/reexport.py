"""Write a shipped demo model again through today's converter, weights unchanged.

    python -m tools.demo.reexport --gguf models/demo.gguf --out build/reexport

Reads demo.gguf and the demo-mtp.gguf beside it into the torch model (warm_start.py),
writes the checkpoint and converts it with `ds4 gguf convert --quant q8` and the
file's own `ds4.convert.train_*` provenance, so the new files carry whatever metadata
the writer emits now (e.g. the llama.cpp keys, docs/reference/formats.md); then
every tensor is compared with the checkpoint (check_weights.py: expected 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ds4.apps import wiring
from ds4.apps.cli import main as ds4_main
from tools.demo import export, warm_start
from tools.demo.check_weights import max_differences
from tools.demo.torch_model import DemoModel
from tools.demo.vocab import install_hash_routes

_OWN = ("ds4.convert.tool", "ds4.convert.source", "ds4.convert.quant_preset")


def provenance(path: Path) -> dict[str, str]:
    meta = wiring.open_model_file(str(path)).metadata
    return {
        k.removeprefix("ds4.convert."): str(v.value)
        for k, v in meta.items()
        if k.startswith("ds4.convert.") and k not in _OWN
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.demo.reexport")
    p.add_argument("--gguf", type=Path, required=True, help="the demo.gguf to read")
    p.add_argument("--out", type=Path, required=True, help="directory for the new files")
    args = p.parse_args(argv)
    seed = int(provenance(args.gguf)["train_seed"])
    seen = warm_start.rows_of(args.gguf)
    model = DemoModel(len(seen), seed)
    install_hash_routes(model, seen, seed)
    warm_start.load(model, seen, args.gguf, args.gguf.with_name("demo-mtp.gguf"), seed)
    config = export.config_json(model)
    hub = export.snap(export.main_hub(model, seen), config)
    hub.update(export.snap(export.mtp_hub(model), config))
    checkpoint = args.out / "ds4-demo"  # the directory name becomes general.name
    export.write_checkpoint(hub, config, checkpoint)
    out = args.out / "demo.gguf"
    flags = [f"--meta={k}={v}" for k, v in provenance(args.gguf).items()]
    code = ds4_main(["gguf", "convert", "--hf", str(checkpoint), "--out", str(out),
                     "--quant", export.QUANT, "--threads", "1", "--quiet", *flags])  # fmt: skip
    if code:
        return code
    for name, worst in max_differences(checkpoint, [out, out.with_name("demo-mtp.gguf")]).items():
        print(f"{name}: max |stored - checkpoint| = {worst:g}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
