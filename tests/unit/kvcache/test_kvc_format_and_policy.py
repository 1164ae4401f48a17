"""KVC header bytes and the disk-cache policy (docs/reference/formats.md §9.2, §10)."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4.domain.kvcache.kv_file import (
    HEADER_SIZE,
    KvcFlags,
    KvcHeader,
    SaveReason,
    cache_key_name,
    decode_header,
    parse_cache_name,
)
from ds4.domain.kvcache.policy import (
    ANCHOR_SCORE_FACTOR,
    CacheEntry,
    KvCacheOptions,
    chat_anchor,
    continued_target,
    entry_score,
    eviction_victims,
    find_prefix_entry,
    store_len,
)


def header(**kw: object) -> KvcHeader:
    base: dict[str, object] = dict(
        quant_bits=2, reason=SaveReason.CONTINUED, flags=KvcFlags.CHECKSUM, tokens=1000, hits=0,
        ctx=4096, model_tag=0, created_at=1000, last_used=1000, payload_bytes=10,
    )  # fmt: skip
    base.update(kw)
    return KvcHeader(**base)  # type: ignore[arg-type]


def test_header_layout_is_byte_exact() -> None:
    h = header(reason=SaveReason.COLD, flags=KvcFlags.KTM_TRAILER, tokens=7, hits=3, ctx=9,
               model_tag=0xA1B2C3D4, created_at=11, last_used=12, payload_bytes=13)  # fmt: skip
    raw = h.encode()
    assert len(raw) == HEADER_SIZE
    assert raw[:8] == b"KVC\x01\x02\x01\x01\x00"
    assert struct.unpack_from("<IIII", raw, 8) == (7, 3, 9, 0xA1B2C3D4)
    assert struct.unpack_from("<QQQ", raw, 24) == (11, 12, 13)
    assert decode_header(raw) == h


@pytest.mark.parametrize(
    "patch",
    [(0, b"KVD"), (3, b"\x02"), (4, b"\x03"), (8, b"\x00\x00\x00\x00")],
    ids=["magic", "version", "quant", "no-tokens"],
)
def test_unusable_headers_are_rejected(patch: tuple[int, bytes]) -> None:
    raw = bytearray(header().encode())
    offset, value = patch
    raw[offset : offset + len(value)] = value
    assert decode_header(bytes(raw)) is None


def test_unknown_reason_reads_as_unknown() -> None:
    raw = bytearray(header().encode())
    raw[5] = 42
    decoded = decode_header(bytes(raw))
    assert decoded is not None and decoded.reason is SaveReason.UNKNOWN


@given(st.binary(max_size=200))
def test_file_names_are_sha1_of_the_key(text: bytes) -> None:
    name = cache_key_name(text)
    assert name == hashlib.sha1(text).hexdigest() + ".kv"
    assert parse_cache_name(name) == name[:40]
    assert parse_cache_name(name.upper().replace(".KV", ".kv")) == name[:40]


@pytest.mark.parametrize(
    "name", ["x.kv", "a" * 40 + ".txt", "g" * 40 + ".kv", "../" + "a" * 37 + ".kv"]
)
def test_foreign_names_do_not_qualify(name: str) -> None:
    assert parse_cache_name(name) is None


def test_store_len_trims_and_aligns() -> None:
    opts = KvCacheOptions()
    assert store_len(5000, opts) == 4096  # 5000 - 32 aligned down to 2048
    assert store_len(2100, opts) == 2048


def test_store_len_falls_back_to_the_whole_prompt() -> None:
    opts = KvCacheOptions()
    assert store_len(600, opts) == 600
    assert store_len(500, opts) == 500
    assert store_len(3000, KvCacheOptions(boundary_align_tokens=0)) == 2968


def test_chat_anchor_and_continued_frontiers() -> None:
    user, assistant = 7, 8
    tokens = [1] * 600 + [user] + [1] * 50 + [user] + [1] * 10 + [assistant] + [user]
    assert chat_anchor(tokens, user, assistant, 512) == 651
    assert chat_anchor(tokens, user, assistant, 700) == 0
    opts = KvCacheOptions()
    assert opts.continued_step == 10240
    assert continued_target(10240, 0, opts)
    assert not continued_target(10240, 10240, opts)
    assert not continued_target(10241, 0, opts)


def entry(sha: str, *, size: int = 1000, **kw: object) -> CacheEntry:
    return CacheEntry(sha, header(**kw), text_bytes=10, file_size=size)


def test_score_favours_dense_recent_and_anchor_files() -> None:
    now = 100_000
    plain = entry("a" * 40, tokens=1000)
    dense = entry("b" * 40, tokens=2000)
    hit_recent = entry("c" * 40, tokens=1000, hits=4, last_used=now)
    hit_old = entry("d" * 40, tokens=1000, hits=4, last_used=now - 10 * 21600)
    hit_halved = entry("f" * 40, tokens=1000, hits=4, last_used=now - 21600)
    anchor = entry("e" * 40, tokens=1000, reason=SaveReason.COLD)
    s = {
        e.sha[0]: entry_score(e, now)
        for e in (plain, dense, hit_recent, hit_old, hit_halved, anchor)
    }
    assert s["b"] == 2 * s["a"]
    assert s["c"] == pytest.approx(5 * s["a"])
    assert s["d"] == s["a"]  # 4 hits ten half-lives ago decay below 0.01: no boost
    assert s["f"] == pytest.approx(3 * s["a"])  # one half-life: 2 effective hits
    assert s["e"] == ANCHOR_SCORE_FACTOR * s["a"]
    assert entry_score(plain, now, protected=plain.sha) == float("inf")


def test_eviction_removes_lowest_scores_until_it_fits() -> None:
    now = 50_000
    es = [entry("a" * 40, tokens=100), entry("b" * 40, tokens=300), entry("c" * 40, tokens=200)]
    victims = eviction_victims(es, budget=2000, now=now)
    assert [v.sha[0] for v in victims] == ["a"]
    assert [v.sha[0] for v in eviction_victims(es, budget=2000, now=now, protected="a" * 40)] == [
        "c"
    ]
    assert eviction_victims(es, budget=0, now=now) == []  # 0 = unlimited
    # Room for an incoming file: evict before writing.
    assert len(eviction_victims(es, budget=3000, now=now, incoming_bytes=1500)) == 2


def test_eviction_penalises_the_prefix_the_new_file_extends() -> None:
    now = 50_000
    old = entry("a" * 40, tokens=300)
    other = entry("b" * 40, tokens=200)
    victims = eviction_victims(
        [old, other], budget=2000, now=now, incoming_bytes=500,
        pending_key=b"hello world", key_of={old.sha: b"hello"},
    )  # fmt: skip
    assert [v.sha for v in victims] == [old.sha]


def test_lookup_takes_the_longest_matching_prefix() -> None:
    prompt = b"<sys>hello<user>how are you"
    opts = KvCacheOptions(min_tokens=1)

    def e(text: bytes, **kw: object) -> CacheEntry:
        return CacheEntry(hashlib.sha1(text).hexdigest(), header(**kw), len(text), 100)

    short, long_, wrong = e(b"<sys>hello"), e(b"<sys>hello<user>"), e(b"<sys>hellx<user>")
    assert find_prefix_entry([short, long_, wrong], prompt, quant_bits=2, ctx=4096,
                             model_tag=0, opts=opts) == long_  # fmt: skip
    big_ctx = e(b"<sys>hello<user>how", ctx=8192)
    other_model = e(b"<sys>hello<user>how ", model_tag=5)
    found = find_prefix_entry([short, big_ctx, other_model], prompt, quant_bits=2, ctx=4096,
                              model_tag=6, opts=opts)  # fmt: skip
    assert found == short
    q4 = e(b"<sys>hello<user>how a", quant_bits=4)
    strict = KvCacheOptions(min_tokens=1, reject_different_quant=True)
    assert find_prefix_entry([q4], prompt, quant_bits=2, ctx=4096, model_tag=0, opts=opts) == q4
    assert find_prefix_entry([q4], prompt, quant_bits=2, ctx=4096, model_tag=0, opts=strict) is None
