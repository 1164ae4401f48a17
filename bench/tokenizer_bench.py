"""Tokenizer throughput: ours (native), ours (pure Python) and HF `tokenizers`, one run.

Usage: .venv/bin/python bench/tokenizer_bench.py [--file TEXT] [--python-slice BYTES]

Every tokenizer encodes the same text (default: data/promessi_sposi.txt, 1.3 MB)
and must produce the same ids. HF is timed two ways: one call on the whole text, and
the text cut into paragraphs encoded one by one (HF slows down on one huge string; the
paragraph figure is the fairer one). Ours is timed the same two ways. The pure-Python
reference runs on a slice and is reported per MB. All runs are single-threaded.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "data" / "promessi_sposi.txt"


def timed(fn: Callable[[], list[int]], repeat: int = 3) -> tuple[float, list[int]]:
    best, result = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--file", type=Path, default=DEFAULT_TEXT, help="UTF-8 text to encode")
    parser.add_argument(
        "--python-slice", type=int, default=200_000, help="bytes for the pure-Python run"
    )
    args = parser.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # keep HF single-threaded too

    from tokenizers import Tokenizer as HFTokenizer

    from ds4.adapters.tokenizer.bpe import NativeBpeTokenizer, ReferenceBpeTokenizer
    from ds4.adapters.tokenizer.vocabulary import (
        default_tokenizer_json,
        load_tokenizer_json,
    )

    text = args.file.read_text(encoding="utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    paragraphs = [p + "\n\n" for p in text.split("\n\n")]
    start = time.perf_counter()
    vocab = load_tokenizer_json()
    native = NativeBpeTokenizer(vocab)
    load_s = time.perf_counter() - start
    reference = ReferenceBpeTokenizer(vocab)
    hf = HFTokenizer.from_file(str(default_tokenizer_json()))

    def hf_whole() -> list[int]:
        ids: list[int] = hf.encode(text, add_special_tokens=False).ids
        return ids

    def hf_paragraphs() -> list[int]:
        return [i for p in paragraphs for i in hf.encode(p, add_special_tokens=False).ids]

    def ours_paragraphs() -> list[int]:
        return [i for p in paragraphs for i in native.encode(p)]

    native_s, native_ids = timed(lambda: native.encode(text))
    native_par_s, native_par_ids = timed(ours_paragraphs)
    hf_s, hf_ids = timed(hf_whole, repeat=1)
    hf_par_s, hf_par_ids = timed(hf_paragraphs, repeat=1)
    cut = args.python_slice
    head = text.encode("utf-8")[:cut].decode("utf-8", errors="ignore")
    py_s, py_ids = timed(lambda: reference.encode(head), repeat=1)
    py_mb = len(head.encode("utf-8")) / 1e6

    assert native_ids == hf_ids, "native ids differ from HF on the whole text"
    assert native_par_ids == hf_par_ids, "native ids differ from HF on paragraphs"
    assert py_ids == native.encode(head), "pure-Python ids differ from native"

    print(
        f"text: {args.file} ({mb:.2f} MB, {len(native_ids)} tokens, {len(paragraphs)} paragraphs)"
    )
    print(f"load tokenizer.json + native tables: {load_s:.2f} s")
    rows = [
        ("ours native, whole text", mb / native_s),
        ("ours native, per paragraph", mb / native_par_s),
        ("HF tokenizers, whole text", mb / hf_s),
        ("HF tokenizers, per paragraph", mb / hf_par_s),
        (f"ours pure Python ({py_mb:.2f} MB slice)", py_mb / py_s),
    ]
    for name, rate in rows:
        print(f"  {name:40s} {rate:8.2f} MB/s")
    print(f"ratio native/HF, whole text:    {hf_s / native_s:6.2f}x")
    print(f"ratio native/HF, per paragraph: {hf_par_s / native_par_s:6.2f}x")
    print(f"ratio pure Python/HF (per MB):  {(py_mb / py_s) / (mb / hf_par_s):6.2f}x")


if __name__ == "__main__":
    main()
