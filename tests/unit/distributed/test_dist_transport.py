"""The hidden-state encodings of --dist-activation-bits (32 as is, bfloat16 rounded to
nearest even, int8 with a float32 scale per row), the bytes they take against the
documented formula, and the --dist-trace line's text form."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.domain.dist_transport import (
    ACTIVATION_BITS,
    HopRecord,
    bytes_per_token,
    check_bits,
    decode,
    encode,
    hop_gaps,
    parse_trace_line,
    trace_line,
)
from ds4.domain.errors import Ds4Error


def streams(tokens: int = 5, n_hc: int = 4, n_embd: int = 64) -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((tokens, n_hc, n_embd)).astype(np.float32)
    return x * np.float32(10.0) ** rng.integers(-3, 4, (tokens, n_hc, 1)).astype(np.float32)


def test_32_bits_carries_the_float32_rows_unchanged() -> None:
    x = streams()
    back = decode(encode(x, 32))
    assert back.dtype == np.float32 and np.array_equal(back.view(np.uint32), x.view(np.uint32))
    assert back is not x  # a new array the worker may overwrite


def test_16_bits_is_bfloat16_rounded_to_nearest_even() -> None:
    one = 1.0
    half_ulp = 2.0**-8  # bfloat16 keeps 7 fraction bits
    x = np.array(
        [one, one + half_ulp, one + 3 * half_ulp, -2.5, 0.0, np.inf, -np.inf, np.nan, 3e38],
        dtype=np.float32,
    )
    packed = encode(x, 16)
    assert packed.data.dtype == np.uint16
    assert packed.data[0] == 0x3F80
    back = decode(packed)
    assert back[1] == one  # a tie goes to the even neighbour, 1.0
    assert back[2] == one + 4 * half_ulp  # a tie between odd 1+2^-7 and even 1+2^-6
    assert back[3] == -2.5 and back[4] == 0.0
    assert back[5] == np.inf and back[6] == -np.inf and np.isnan(back[7])
    assert np.isfinite(back[8]) and abs(back[8] - x[8]) <= x[8] * 2.0**-8  # no overflow
    y = streams()
    rel = np.abs(decode(encode(y, 16)) - y) / np.abs(y)
    assert rel.max() <= 2.0**-8  # half a bfloat16 ulp, relative


def test_8_bits_is_int8_with_one_scale_per_row() -> None:
    x = streams()
    x[1, 2] = 0.0  # a zero row decodes to zeros
    packed = encode(x, 8)
    assert packed.data.dtype == np.int8 and packed.data.shape == x.shape
    assert packed.scales is not None and packed.scales.shape == x.shape[:2]
    assert np.array_equal(packed.scales, (np.abs(x).max(axis=-1) / 127).astype(np.float32))
    back = decode(packed)
    assert np.all(np.abs(back - x) <= packed.scales[..., None] * 0.5 * (1 + 1e-6))
    assert np.all(back[1, 2] == 0.0)
    peak = np.abs(x).argmax(axis=-1)
    at_peak = np.abs(np.take_along_axis(packed.data, peak[..., None], -1))[..., 0]
    assert np.all((at_peak == 127) | (packed.scales == 0))  # each row's peak is exact


@pytest.mark.parametrize("bits", ACTIVATION_BITS)
def test_the_payload_takes_the_documented_bytes_per_token(bits: int) -> None:
    tokens, n_hc, n_embd = 7, 4, 128
    packed = encode(streams(tokens, n_hc, n_embd), bits)
    assert packed.nbytes == tokens * bytes_per_token(n_hc, n_embd, bits)
    # DeepSeek V4 Flash: 64 KiB, 32 KiB, 16,400 B (docs/distributed.md)
    assert bytes_per_token(4, 4096, bits) == {32: 65536, 16: 32768, 8: 16400}[bits]


def test_other_bit_widths_are_refused() -> None:
    with pytest.raises(Ds4Error, match="activation bits 4: use 32, 16 or 8"):
        check_bits(4)
    with pytest.raises(Ds4Error, match="use 32, 16 or 8"):
        encode(streams(), 12)


def test_a_trace_line_parses_back_to_its_record() -> None:
    record = HopRecord(3, "decode", 0, 45, 1, 1, "layers 2-3", 0.000412, 0.0012, 0.0003,
                       2048, 1024)  # fmt: skip
    line = trace_line(record)
    assert line.startswith("ds4 dist-trace: pass=3 op=decode")
    fields = parse_trace_line(line)
    assert fields["to"] == "layers:2-3" and fields["hop"] == "1"
    assert float(fields["eval_ms"]) == pytest.approx(0.412)
    assert float(fields["wait_ms"]) == pytest.approx(1.2)
    assert int(fields["bytes_in"]) == 2048 and int(fields["bytes_out"]) == 1024
    with pytest.raises(Ds4Error, match="not a dist-trace line"):
        parse_trace_line("ds4: something else")
    with pytest.raises(Ds4Error, match="lacks bytes_out"):
        parse_trace_line(line.rsplit(" ", 1)[0])


def test_transfer_gaps_start_when_the_input_is_ready_and_the_worker_free() -> None:
    # range 0 waits for its previous call to end (at 1.5) before the piece can start
    gaps = hop_gaps(1.0, starts=[1.6, 2.3], ends=[2.0, 2.5], idle_since=[1.5, 0.0])
    assert gaps == pytest.approx([0.1, 0.3])
    assert hop_gaps(5.0, [4.9], [5.2], [0.0]) == [0.0]  # clock skew: clamped
