"""A flipped bit in a layer-0 KV row of a real cold save never changes the greedy answer
(issue 14, item 1; docs/adr/0007-kv-file-integrity.md).

The cpu backend on a tiny q2 model writes a real DSV4 checkpoint. One exponent bit of a
raw KV row of layer 0 is flipped: the checksum turns the load into a miss (the file is
quarantined). The same damage with the footer rebuilt over it, as a writer with a bug
would leave it, is refused by the payload's value checks. Both answer as a cold run.
"""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from tests.integration.server.live_server import live_server

from ds4.domain.kvcache.kv_file import (
    FOOTER_SIZE,
    HEADER_SIZE,
    PREFIX_SIZE,
    SaveReason,
    body_digest,
    decode_header,
    make_footer,
)
from ds4.domain.kvcache.policy import KvCacheOptions

OPTS = KvCacheOptions(
    budget_bytes=0, min_tokens=16, boundary_trim_tokens=0, boundary_align_tokens=16,
    continued_interval_tokens=0,
)  # fmt: skip
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant. Answer in one short sentence."},
    {"role": "user", "content": "Name a colour."},
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kvdamage") / "tiny.gguf"
    made = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--quant", "q2", "--preset",
         "tiny-2layer", "--out", str(out), "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


def ask(tmp: Path, model: Path, kv_dir: Path | None, trace: io.StringIO) -> str:
    body = {"messages": MESSAGES, "max_tokens": 8, "think": False, "temperature": 0}
    kv: dict[str, Any] = {"kv_disk_dir": str(kv_dir), "kv_cache": OPTS} if kv_dir else {}
    with live_server(tmp, ["unused"], trace=trace, backend="cpu", model=str(model), ctx=512,
                     **kv) as live:  # fmt: skip
        response = httpx.post(live.base + "/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def only_the_cold_save(kv_dir: Path) -> Path:
    """Keep the cold checkpoint (a prefix of the prompt), remove the others."""
    cold = []
    for path in kv_dir.glob("*.kv"):
        header = decode_header(path.read_bytes()[:HEADER_SIZE])
        if header is not None and header.reason is SaveReason.COLD:
            cold.append(path)
        else:
            path.unlink()
    (path,) = cold
    return path


def flip_a_layer0_kv_bit(path: Path) -> bytes:
    """Flip the top exponent bit of a value below 2 in a layer-0 raw KV row: it grows by
    2^128, to about 1e38 (what the probe of issue 14 wrote into rows) or infinity."""
    data = bytearray(path.read_bytes())
    payload = PREFIX_SIZE + int.from_bytes(data[HEADER_SIZE:PREFIX_SIZE], "little")
    h = struct.unpack_from("<13I", data, payload)
    tokens, n_layer, head_dim, vocab, rows = h[7], h[8], h[9], h[11], h[12]
    layer0 = payload + 4 * (13 + tokens + vocab + 2 * n_layer)
    row = layer0 + 4 * head_dim * (rows // 2)
    values = np.abs(np.frombuffer(bytes(data[row : row + 4 * head_dim]), "<f4"))
    at = row + 4 * int(np.argmax(np.where(values < 2, values, 0)))
    assert values[(at - row) // 4] > 0
    data[at + 3] ^= 0x40
    path.write_bytes(bytes(data))
    return bytes(data)


def reseal(path: Path) -> None:
    """Rebuild the footer over the file as it is: intact bytes, damaged values."""
    data = path.read_bytes()
    header = data[:HEADER_SIZE]
    text_end = PREFIX_SIZE + int.from_bytes(data[HEADER_SIZE:PREFIX_SIZE], "little")
    payload_bytes = int.from_bytes(data[40:48], "little")
    body = body_digest(data[PREFIX_SIZE:text_end], data[text_end : text_end + payload_bytes])
    sections = data[text_end + payload_bytes : -FOOTER_SIZE]
    path.write_bytes(data[:-FOOTER_SIZE] + make_footer(header, sections, body))


def test_a_damaged_kv_row_of_a_cold_save_leaves_the_greedy_answer_unchanged(
    tiny_model: Path, tmp_path: Path
) -> None:
    kv_dir = tmp_path / "kv"
    first = ask(tmp_path, tiny_model, kv_dir, io.StringIO())
    cold = ask(tmp_path, tiny_model, None, io.StringIO())
    assert first == cold
    path = only_the_cold_save(kv_dir)
    pristine = path.read_bytes()

    intact = io.StringIO()
    assert ask(tmp_path, tiny_model, kv_dir, intact) == cold
    assert "source=disk-text" in intact.getvalue()  # the checkpoint is used when intact

    path.write_bytes(pristine)
    flip_a_layer0_kv_bit(path)
    trace = io.StringIO()
    assert ask(tmp_path, tiny_model, kv_dir, trace) == cold
    assert "source=none" in trace.getvalue() and "kv cache quarantined" in trace.getvalue()

    path.write_bytes(pristine)
    flip_a_layer0_kv_bit(path)
    reseal(path)
    trace = io.StringIO()
    assert ask(tmp_path, tiny_model, kv_dir, trace) == cold
    log = trace.getvalue()
    assert "source=none" in log and "raw KV rows hold a value that is not a finite f16" in log
