"""A damaged `.kv` file never changes an answer (docs/adr/0007-kv-file-integrity.md).

The server graph over fakes (tests/unit/serving/fake_server.py) and a real directory:
one checkpoint is written, then a bit is flipped at one position of it (header fields,
key length and text, payload, footer). Every flip is a logged miss, the file moves into
quarantine/, and the answer and usage equal a cold run's. A file whose bytes are intact
but whose state the engine refuses is deleted, and nothing damaged is saved back.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.integration.kvcache.fake_kv_server import FIRST, OPTS, SECOND, answer, serve
from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled
from tests.unit.generation.byte_tokenizer import VOCAB
from tests.unit.serving.fake_server import TOK, FixedClock

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.domain.engine.session import EngineSession
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import (
    FOOTER_SIZE,
    HEADER_SIZE,
    PREFIX_SIZE,
    KvcFlags,
    KvcHeader,
    SaveReason,
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding one checkpoint: the first conversation, saved at shutdown."""
    kv_dir = tmp_path_factory.mktemp("pristine")
    server = serve(DiskKVStore(kv_dir))
    server.run(server.chat(FIRST))
    server.worker.shutdown()
    assert len(list(kv_dir.iterdir())) == 1
    return kv_dir


@pytest.fixture(scope="module")
def cold() -> tuple[str, int, int]:
    return answer(serve(None))


def the_file(kv_dir: Path) -> Path:
    (path,) = kv_dir.glob("*.kv")
    return path


def test_the_intact_checkpoint_is_a_hit_with_the_cold_answer(
    pristine: Path, cold: tuple[str, int, int], tmp_path: Path
) -> None:
    kv_dir = shutil.copytree(pristine, tmp_path / "kv")
    text, prompt, cached = answer(serve(DiskKVStore(kv_dir)))
    assert (text, prompt) == cold[:2] and cold[2] == 0 < cached


def positions(path: Path) -> dict[str, int]:
    """Bit positions to flip, named by what they hit."""
    data = path.read_bytes()
    text_bytes = int.from_bytes(data[HEADER_SIZE:PREFIX_SIZE], "little")
    payload = PREFIX_SIZE + text_bytes
    footer = len(data) - FOOTER_SIZE
    named = {f"header byte {i}": 8 * i + i % 8 for i in range(HEADER_SIZE)}
    named["header checksum flag"] = 8 * 6 + 3  # the file would read as one without a footer
    named |= {f"text length byte {i}": 8 * (HEADER_SIZE + i) + 1 for i in range(4)}
    named |= {"text first": 8 * PREFIX_SIZE, "text last": 8 * payload - 1}
    named |= {"payload first": 8 * payload + 2, "payload last": 8 * footer - 3}
    named |= {"payload middle": 8 * ((payload + footer) // 2) + 6}
    named |= {f"footer byte {i}": 8 * (footer + i) + (7 - i % 8) for i in range(FOOTER_SIZE)}
    return named


def test_every_flipped_bit_is_a_logged_miss_and_a_quarantined_file(
    pristine: Path, cold: tuple[str, int, int], tmp_path: Path
) -> None:
    for n, (where, bit) in enumerate(positions(the_file(pristine)).items()):
        kv_dir = shutil.copytree(pristine, tmp_path / f"kv{n}")
        path = the_file(kv_dir)
        data = bytearray(path.read_bytes())
        data[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(data))
        log: list[str] = []
        server = serve(DiskKVStore(kv_dir, log=log.append))
        assert answer(server) == cold, where
        assert server.sources() == ["none"], where
        assert any(line.startswith(f"kv cache quarantined {path.name}") for line in log), where
        (kept,) = (kv_dir / "quarantine").iterdir()
        assert kept.read_bytes() == bytes(data), where  # kept as found, for a look
        assert not path.exists(), where


def test_a_file_the_engine_refuses_is_deleted_and_no_damage_is_saved_back(
    tmp_path: Path, cold: tuple[str, int, int]
) -> None:
    """Intact bytes (the checksum holds) but an impossible state: a logged miss, the file
    deleted, and the shutdown save writes the state the cold prefill built."""
    kv_dir = tmp_path / "kv"
    store = DiskKVStore(kv_dir)
    key = TOK.decode(list(serve(None).chat(SECOND).prompt_tokens[:20])).encode()
    bad = b"FAKEDSV4" + json.dumps([10**6] * 20).encode()  # ids beyond the vocabulary
    store.write(KvcHeader(2, SaveReason.COLD, KvcFlags.CHECKSUM, 20, 0, 4096, 0, 1, 1, len(bad)),
                key, bad, b"")  # fmt: skip
    server = serve(DiskKVStore(kv_dir))
    assert answer(server) == cold
    assert "kv cache discarded" in server.trace.getvalue()
    server.worker.shutdown()
    (path,) = kv_dir.glob("*.kv")  # the shutdown save; the refused file is gone
    kv = DiskKVStore(kv_dir).read(path.name[:40])
    assert kv is not None and kv.header.reason is SaveReason.SHUTDOWN
    assert all(0 <= t < VOCAB for t in json.loads(kv.payload[len(b"FAKEDSV4") :]))


def test_a_damaged_ktm_trailer_is_never_imported(tmp_path: Path) -> None:
    """Tool ids replay exact DSML, so a trailer is verified before it reaches tool memory."""
    trailer = b"KTM\x01" + (1).to_bytes(4, "little") + b"\x02\0\0\0\x03\0\0\0idDSM"
    log: list[str] = []
    cache = DiskCache(DiskKVStore(tmp_path, log=log.append), FixedClock(), OPTS,
                      quant_bits=2, model_tag=0)  # fmt: skip
    session = EngineSession(FakeComputeSession(ctx=4096))
    prefilled(session, list(range(10)))
    assert cache.save(session, b"a key with a tool call", SaveReason.EVICT, trailer=trailer)
    assert cache.tool_trailers() == [trailer]
    path = the_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) - FOOTER_SIZE - 3] ^= 0x10  # inside the DSML bytes of the trailer
    path.write_bytes(bytes(data))
    assert cache.tool_trailers() == []
    assert any("quarantined" in line for line in log) and not path.exists()
