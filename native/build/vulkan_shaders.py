"""Compiles native/vulkan/*.comp to SPIR-V with glslc; run by the package build (setup.py).

Each shader is built twice (NAME.sg.spv with subgroup reductions, NAME.spv without) for
Vulkan 1.1; the matvec shaders also as NAME_decode (one token per workgroup), all
matvec shaders as NAME_moe (expert-indexed) and the _q8 ones as NAME_moe_grouped (by
expert). Without glslc the build still succeeds: it writes MISSING saying why, and the
Vulkan backend reports itself unavailable with that reason (docs/vulkan.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "native" / "vulkan"


def compile_shaders(out_dir: Path) -> str | None:
    """Fill out_dir with SPIR-V and a BUILT stamp; returns why not, or None on success."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.iterdir():
        old.unlink()
    glslc = os.environ.get("GLSLC") or shutil.which("glslc")
    if glslc is None:
        reason = "glslc was not found when the package was built"
        (out_dir / "MISSING").write_text(reason + "\n", encoding="utf-8")
        return reason
    for source in sorted(SOURCES.glob("*.comp")):
        # matvec kernels also get a one-token (decode) build: no token loop at all.
        shapes: list[tuple[str, list[str]]] = [("", [])]
        if source.stem.startswith("matvec_") and not source.stem.endswith("_q8"):
            shapes.append(("_decode", ["-DNT=1"]))
        if source.stem.startswith("matvec_"):  # expert-indexed (MoE) build
            shapes.append(("_moe", ["-DMOE=1"]))
        if source.stem.startswith("matvec_") and source.stem.endswith("_q8"):
            shapes.append(("_moe_grouped", ["-DMOE=1", "-DGROUPED=1"]))
        for name, defines in shapes:
            for variant, suffix in ((1, ".sg.spv"), (0, ".spv")):
                target = out_dir / (source.stem + name + suffix)
                subprocess.run(
                    [glslc, "--target-env=vulkan1.1", "-O", f"-DUSE_SUBGROUP={variant}",
                     *defines, "-Werror", str(source), "-o", str(target)],
                    check=True, timeout=300,
                )  # fmt: skip
    (out_dir / "BUILT").write_text("ok\n", encoding="utf-8")
    return None
