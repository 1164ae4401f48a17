"""The server's checkpoint decisions (KvCheckpoints) over a fake engine and a byte
tokenizer: cold geometry, frontier suppression, exact-position saves, disk loads
with the suffix tokenized, KTM round trips, the tool-call guard while decoding."""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.support.fake_compute import FakeComputeSession
from tests.unit.generation.byte_tokenizer import ByteTokenizer

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.apps.server_command import register
from ds4.domain.dsml.calls import ToolCall
from ds4.domain.engine.session import Session
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import TensorInfo, meta_u32
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kvc_header import KvcFlags, SaveReason
from ds4.domain.kvcache.model_identity import model_tag_for
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.model.tiny_shapes import DEFAULT_TINY_SHAPE, TINY_SHAPES
from ds4.domain.serving.eval_watch import EvalWatch
from ds4.domain.serving.kv_checkpoints import KvCheckpoints
from ds4.domain.tools.replay_memory import ToolReplayMemory

TOK = ByteTokenizer()
USER, ASSISTANT = TOK.special.user, TOK.special.assistant
OPTS = KvCacheOptions(
    budget_bytes=0,
    min_tokens=8,
    cold_max_tokens=200,
    continued_interval_tokens=16,
    boundary_trim_tokens=2,
    boundary_align_tokens=8,
)


class Clock:
    def now(self) -> int:
        return 1_700_000_000


class Random:
    def token_bytes(self, n: int) -> bytes:
        return bytes(range(n))


def make(tmp: Path, opts: KvCacheOptions = OPTS) -> tuple[KvCheckpoints, list[str]]:
    log: list[str] = []
    disk = DiskCache(DiskKVStore(tmp), Clock(), opts, quant_bits=2, model_tag=5, log=log.append)
    memory = ToolReplayMemory(Random())
    return KvCheckpoints(disk, TOK, memory, log=log.append), log


def session_at(text: str, ctx: int = 256) -> Session:
    session = Session(EvalWatch(FakeComputeSession(ctx=ctx)))
    session.sync(TOK.encode(text))
    return session


def test_cold_length_prefers_the_chat_anchor_then_trims_and_aligns(tmp_path: Path) -> None:
    kv, _ = make(tmp_path)
    system = TOK.encode("<｜begin▁of▁sentence｜>system prompt here")  # 28 tokens
    prompt = [*system, USER, *TOK.encode("question"), ASSISTANT]
    assert kv.cold_length(prompt) == len(system)  # the User marker itself is excluded
    plain = TOK.encode("x" * 43)
    assert kv.cold_length(plain) == 40  # 43 - 2 trimmed, aligned down to 8
    assert kv.cold_length(TOK.encode("x" * 7)) == 0  # under min_tokens
    assert kv.cold_length(TOK.encode("x" * 201)) == 0  # over cold_max
    off, _ = make(tmp_path / "off", KvCacheOptions(**{**OPTS.__dict__, "cold_max_tokens": 0}))
    assert off.cold_length(plain) == 0


def test_a_cold_cut_on_a_frontier_suppresses_the_continued_save(tmp_path: Path) -> None:
    kv, _ = make(tmp_path)
    assert kv.suppress_continued(32) == 0 and kv.last_store == 32
    assert kv.suppress_continued(40) == 32 and kv.last_store == 32  # 40 is no frontier


def test_store_requires_the_live_state_at_exactly_n(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    session = session_at("abcdefghijklmnopqrst")
    assert not kv.store(session, SaveReason.COLD, 16)
    assert "live checkpoint is at 20, not 16" in log[-1]
    assert kv.store(session, SaveReason.COLD, 20) and kv.last_store == 20
    assert not kv.store(session_at("abc"), SaveReason.EVICT, 3)  # under min_tokens
    (entry,) = kv.disk.store.entries()
    assert entry.header.tokens == 20 and entry.header.reason is SaveReason.COLD


def test_a_key_ending_inside_a_utf8_character_is_not_stored(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    session = session_at("abcdefghij")
    session.sync([*session.tokens, *"é".encode()[:1]])
    assert not kv.store(session, SaveReason.EVICT, 11)
    assert "inside a UTF-8 character" in log[-1]


def test_load_appends_the_tokenized_suffix_and_imports_tool_ids(tmp_path: Path) -> None:
    kv, _ = make(tmp_path)
    block = (
        '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="ls">\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )
    kv.memory.remember((ToolCall("ls", "{}", "call_1"),), block)
    saved = "<｜User｜>list files<｜Assistant｜>" + block
    assert kv.store(session_at(saved), SaveReason.EVICT, len(TOK.encode(saved)))
    (entry,) = kv.disk.store.entries()
    assert entry.header.flags & KvcFlags.KTM_TRAILER

    _, fresh_log = make(tmp_path)
    fresh = KvCheckpoints(kv.disk, TOK, ToolReplayMemory(Random()), log=fresh_log.append)
    session = Session(EvalWatch(FakeComputeSession(ctx=256)))
    prompt = saved + "<｜end▁of▁sentence｜><｜User｜>thanks"
    hit = fresh.load(session, prompt)
    assert hit is not None and hit.loaded == len(TOK.encode(saved)) and hit.tool_ids == 1
    assert list(hit.tokens) == TOK.encode(prompt)  # stored ids + the suffix's own tokens
    assert fresh.last_store == hit.loaded
    assert fresh.memory.ktm_entries(saved) == [("call_1", block)]
    assert "kv cache hit text" in fresh_log[-1]
    assert (
        fresh.load(Session(EvalWatch(FakeComputeSession(ctx=256))), prompt, more_than=999) is None
    )


def test_tool_memory_is_imported_from_every_trailer_at_start(tmp_path: Path) -> None:
    kv, _ = make(tmp_path)
    block = "\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls>"
    kv.memory.remember((ToolCall("x", "{}", "call_9"),), block)
    kv.store(
        session_at("some history" + block),
        SaveReason.SHUTDOWN,
        len(TOK.encode("some history" + block)),
    )
    fresh = KvCheckpoints(kv.disk, TOK, ToolReplayMemory(Random()))
    assert fresh.import_tool_memory() == 1


def test_decoding_saves_frontiers_until_a_tool_call_starts(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    watch = EvalWatch(FakeComputeSession(ctx=256))
    session = Session(watch)
    session.sync(TOK.encode("p" * 10))
    watch.on_eval = kv.decode_hook(session, tools_active=True)
    for token in TOK.encode("a" * 6 + "<｜DSML｜tool_calls>" + "b" * 20):
        session.eval(token)
    stored = [line for line in log if "reason=continued" in line]
    assert len(stored) == 1 and "tokens=16" in stored[0]  # 32 came after the marker
    plain = Session(watch)
    plain.invalidate()
    plain.sync(TOK.encode("p" * 10))
    kv.last_store = 0
    watch.on_eval = kv.decode_hook(plain, tools_active=False)
    for token in TOK.encode("a" * 30):
        plain.eval(token)
    assert sum("reason=continued" in line for line in log) == 3  # 16 (kept) and 32


def test_model_tag_tracks_metadata_and_tensor_types() -> None:
    hp = TINY_SHAPES[DEFAULT_TINY_SHAPE]
    t = TensorInfo("blk.0.ffn", (4, 4), GGMLType.F32, 0, 64)
    base = model_tag_for(hp, {"ds4.convert.seed": meta_u32(0)}, [t])
    assert base == model_tag_for(hp, {"ds4.convert.seed": meta_u32(0)}, [t]) != 0
    assert base != model_tag_for(hp, {"ds4.convert.seed": meta_u32(1)}, [t])
    assert base != model_tag_for(hp, {"ds4.convert.seed": meta_u32(0)}, [
        TensorInfo("blk.0.ffn", (4, 4), GGMLType.F16, 0, 32)])  # fmt: skip
    tokenizer_only = {"ds4.convert.seed": meta_u32(0), "tokenizer.ggml.bos_token_id": meta_u32(3)}
    assert base == model_tag_for(hp, tokenizer_only, [t])


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["server", *argv])


def test_server_flags_build_the_cache_options() -> None:
    from ds4.apps.server_command import kv_cache_options

    defaults = parse()
    assert defaults.kv_disk_dir is None and kv_cache_options(defaults) == KvCacheOptions()
    args = parse("--kv-disk-dir", "/tmp/x", "--kv-cache-budget-mb", "7",
                 "--kv-cache-min-tokens", "64", "--kv-cache-cold-max-tokens", "0",
                 "--kv-cache-continued-interval-tokens", "100",
                 "--kv-cache-boundary-trim-tokens", "0", "--kv-cache-boundary-align-tokens", "0",
                 "--kv-cache-reject-different-quant")  # fmt: skip
    opts = kv_cache_options(args)
    assert opts == KvCacheOptions(7 << 20, 64, 0, 100, 0, 0, True)
    assert opts.continued_step == 100
    assert kv_cache_options(parse("--kv-disk-space-mb", "0")).budget_bytes == 4096 << 20
