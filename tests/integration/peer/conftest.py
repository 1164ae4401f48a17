"""The peer llama.cpp (docs/llamacpp.md): found under $DS4_PEER_CACHE (default
~/.cache/ds4/peer), as tools/peer/build_llamacpp.sh leaves it; every test here is
skipped, naming what is missing, when it is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

VERSION = "0.3.36"
RUNNER = Path(__file__).with_name("llamacpp_run.py")


def peer_cache() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ds4" / "peer"
    return Path(os.environ.get("DS4_PEER_CACHE", default))


@dataclass(frozen=True)
class PeerRun:
    logits: np.ndarray
    greedy: list[int]
    text_ids: list[int]


@dataclass(frozen=True)
class Peer:
    binding: Path  # the unpacked sdist (llama_cpp/, vendor/llama.cpp/)
    lib: Path  # the directory holding libllama.so

    @property
    def converter(self) -> Path:
        return self.binding / "vendor" / "llama.cpp" / "convert_hf_to_gguf.py"

    def run(self, model: Path, tokens: list[int], out: Path, greedy: int = 0,
            text: str | None = None) -> PeerRun:  # fmt: skip
        env = dict(os.environ, DS4_LLAMACPP_BINDING=str(self.binding),
                   LLAMA_CPP_LIB_PATH=str(self.lib))  # fmt: skip
        args = [sys.executable, str(RUNNER), str(model), str(out),
                "--tokens", ",".join(map(str, tokens)), "--greedy", str(greedy)]  # fmt: skip
        if text is not None:
            args += ["--text", text]
        result = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 0, f"llama.cpp failed on {model}:\n{result.stderr[-3000:]}"
        data = np.load(out)
        ids = data["text_ids"].tolist() if "text_ids" in data else []
        return PeerRun(data["logits"], data["greedy"].tolist(), ids)


@pytest.fixture(scope="session")
def peer() -> Peer:
    cache = peer_cache()
    binding, lib = cache / f"llama_cpp_python-{VERSION}", cache / "llama.cpp-build" / "bin"
    if not (lib / "libllama.so").is_file():
        pytest.skip(f"no peer llama.cpp build in {lib} (tools/peer/build_llamacpp.sh; "
                    "DS4_PEER_CACHE names the cache)")  # fmt: skip
    if not (binding / "llama_cpp" / "llama_cpp.py").is_file():
        pytest.skip(f"no llama-cpp-python {VERSION} binding in {binding}")
    return Peer(binding, lib)
