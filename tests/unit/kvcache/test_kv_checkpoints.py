"""The server's checkpoint decisions (KvCheckpoints) over a fake engine and a byte
tokenizer: cold geometry, frontier suppression, exact-position saves, disk loads
with the suffix tokenized, KTM round trips, the tool-call guard while decoding."""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled
from tests.unit.generation.byte_tokenizer import ByteTokenizer

from ds4.adapters.storage.kv_disk_store import DiskKVStore
from ds4.apps.server_command import register
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.engine.session import EngineSession
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import TensorInfo, meta_u32
from ds4.domain.kvcache.disk_cache import DiskCache
from ds4.domain.kvcache.kv_file import KvcFlags, SaveReason, model_tag_for
from ds4.domain.kvcache.policy import KvCacheOptions
from ds4.domain.model.presets import DEFAULT_TINY_SHAPE, TINY_SHAPES
from ds4.domain.serving.checkpoints import KvCheckpoints
from ds4.domain.tools import ToolReplayMemory

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


def session_at(text: str, ctx: int = 256, chunk: int = 0) -> EngineSession:
    session = EngineSession(FakeComputeSession(ctx=ctx), chunk=chunk)
    if text:
        prefilled(session, TOK.encode(text))
    return session


def run_prefill(kv: KvCheckpoints, session: EngineSession, text: str, *, cold: bool) -> int:
    """KvCheckpoints.prefill to its end; the reused token count."""
    events = kv.prefill(session, TOK.encode(text), cold=cold, cancel=lambda: False)
    while True:
        try:
            next(events)
        except StopIteration as done:
            return int(done.value)


def saved(kv: KvCheckpoints) -> list[tuple[SaveReason, int]]:
    return sorted((e.header.reason, e.header.tokens) for e in kv.disk.store.entries())


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


def test_prefill_saves_continued_frontiers_after_every_chunk(tmp_path: Path) -> None:
    kv, _ = make(tmp_path)
    session = session_at("", chunk=8)
    assert run_prefill(kv, session, "y" * 40, cold=False) == 0
    assert saved(kv) == [(SaveReason.CONTINUED, 16), (SaveReason.CONTINUED, 32)]
    run_prefill(kv, session, "y" * 50, cold=False)  # 48 is new; 16 and 32 are not redone
    assert saved(kv) == [(SaveReason.CONTINUED, n) for n in (16, 32, 48)]


def test_a_cold_cut_on_a_frontier_is_written_once_as_cold(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    session = session_at("", chunk=8)
    run_prefill(kv, session, "x" * 35, cold=True)  # cut: 35 - 2 trimmed, aligned to 32
    # the frontier mark moves to the cut before prefilling, so 16 is passed unsaved too
    # (docs/reference/server.md §4.4: the cold frontier is "marked as already stored")
    assert saved(kv) == [(SaveReason.COLD, 32)]
    assert not any("reason=continued" in line for line in log)


def test_a_failed_cold_save_gives_its_frontier_back(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    session = session_at("", chunk=1)  # every position is a chunk boundary
    head = "x" * 31
    run_prefill(kv, session, head + "é" + "x" * 3, cold=True)  # the cut splits the é
    assert saved(kv) == [] and "inside a UTF-8 character" in log[-1]
    run_prefill(kv, session, head + "y" * 9, cold=False)  # rewinds to 31, passes 32 again
    assert saved(kv) == [(SaveReason.CONTINUED, 32)]  # the mark went back to 0


def test_a_prompt_under_min_tokens_logs_why_it_is_not_saved(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    run_prefill(kv, session_at(""), "x" * 7, cold=True)
    assert saved(kv) == []
    assert log == [
        "kv cache not saved: prompt has 7 tokens, under min_tokens=8 (--kv-cache-min-tokens)"
    ]
    log.clear()
    run_prefill(kv, session_at(""), "x" * 9, cold=True)  # long enough: no such line
    assert not any("not saved" in line for line in log)


def test_store_requires_the_live_state_at_exactly_n(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    session = session_at("abcdefghijklmnopqrst")
    assert not kv.store(session, SaveReason.COLD, 16)
    assert "live checkpoint is at 20, not 16" in log[-1]
    assert kv.store(session, SaveReason.COLD, 20)
    assert not kv.store(session_at("abc"), SaveReason.EVICT, 3)  # under min_tokens
    (entry,) = kv.disk.store.entries()
    assert entry.header.tokens == 20 and entry.header.reason is SaveReason.COLD


def test_a_key_ending_inside_a_utf8_character_is_not_stored(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    session = session_at("abcdefghij")
    prefilled(session, [*session.tokens, *"é".encode()[:1]])
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
    session = session_at("")
    prompt = saved + "<｜end▁of▁sentence｜><｜User｜>thanks"
    hit = fresh.load(session, prompt)
    assert hit is not None and hit.loaded == len(TOK.encode(saved)) and hit.tool_ids == 1
    assert list(hit.tokens) == TOK.encode(prompt)  # stored ids + the suffix's own tokens
    assert fresh.memory.ktm_entries(saved) == [("call_1", block)]
    assert "kv cache hit text" in fresh_log[-1]
    assert fresh.load(session_at(""), prompt, more_than=999) is None


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


def decode(kv: KvCheckpoints, session: EngineSession, text: str, *, tools_active: bool) -> None:
    """What decode_turn does with the callback: evaluate a token, then call it."""
    on_token = kv.continued_saver(session, tools_active=tools_active)
    for token in TOK.encode(text):
        session.eval(token)
        on_token(token)


def test_decoding_saves_frontiers_until_a_tool_call_starts(tmp_path: Path) -> None:
    kv, log = make(tmp_path)
    decode(kv, session_at("p" * 10), "a" * 6 + "<｜DSML｜tool_calls>" + "b" * 20, tools_active=True)
    stored = [line for line in log if "reason=continued" in line]
    assert len(stored) == 1 and "tokens=16" in stored[0]  # 32 came after the marker
    fresh = KvCheckpoints(kv.disk, TOK, kv.memory, log=log.append)  # a new conversation
    decode(fresh, session_at("p" * 10), "a" * 30, tools_active=False)
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
