"""A deterministic >= 1 MB mixed corpus for comparing our tokenizer with HF `tokenizers`.

Italian prose from data/promessi_sposi.txt, interleaved with generated text
that stresses the pre-tokenizer: several scripts (RTL, Indic, CJK, Hangul), emoji and
ZWJ sequences, combining marks, exotic digits and white space, code, JSON, digit
runs, random code points, and every added token of the vocabulary dropped mid-text.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

PROSE = Path(__file__).resolve().parents[3] / "data" / "promessi_sposi.txt"

WORDS = {
    "en": "the quick brown fox jumps over lazy dog while thinking about tokenizers",
    "de": "Straße Größe über Mädchen schön Fußgänger Äpfel Übermut öffentlich",
    "fr": "élève garçon façon où déjà naïve cœur Noël français l'été",
    "es": "¿Qué? ¡Hola! niño mañana corazón acción pingüino",
    "ru": "Привет мир быстрая коричневая лиса прыгает через ленивую собаку",
    "el": "Γειά σου κόσμε αλφάβητο ελληνικά ψυχή",
    "ar": "مرحبا بالعالم اللغة العربية جميلة جدا ١٢٣ ٤٥٦٧",
    "he": "שלום עולם עברית כתובה מימין לשמאל",
    "hi": "नमस्ते दुनिया हिन्दी भाषा क्षत्रिय ९८७६",
    "th": "สวัสดีชาวโลก ภาษาไทย",
    "zh": "你好世界，这是一个测试。我们喜欢分词器！",
    "ja": "こんにちは世界、カタカナとひらがな。ゲーム・データ゠テスト",
    "ko": "안녕하세요 세계 한국어 토크나이저",
    "vi": "Tiếng Việt có nhiều dấu: ệ ộ ữ ẫ",
}

EMOJI = [
    "👍",
    "👨\u200d👩\u200d👧\u200d👦",
    "🏳️\u200d🌈",
    "👋🏽",
    "🇮🇹🇯🇵",
    "❤️",
    "🧑\u200d💻",
    "1️⃣",
    "😀😃😄",
]

ODD = [
    "e\u0301",
    "a\u0308\u0323",
    "Z\u0351\u0352\u0357\u0358",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\u2029",
    "\u200b",
    "\ufeff",
    "\u200e",
    "\u202e",
    "\u0085",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\x00",
    "\x7f",
    "½",
    "²",
    "Ⅻ",
    "１２３",
    "٣",
    "〇",
    "«»",
    "“”",
    "—",
    "…",
    "•",
    "™",
    "€",
    "¿",
    ".»",
    "。\n",
    "»\n\n",
    "\r\n",
    "\r\r\n",
    "\t\t",
    " \n \n",
    "゠",
    "ー",
    "゙",
    "・",
]

CODE = [
    "def f(x: int) -> int:\n    return x * 2  # double\n\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] << 2;\n}\n",
    "const s = `hello ${name}`;\nconsole.log(s?.length ?? 0);\n",
    'fn main() { let v: Vec<u8> = vec![1, 2, 3]; println!("{:?}", v); }\n',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    '<div class="x">&amp; &lt;tag&gt;</div>\n',
    "    if (a&&b||!c) { return -1; }\r\n",
    "x=1;y=22;z=333;w=4444;v=55555\n",
]


def _whitespace_run(rng: random.Random) -> str:
    pool = [" ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\r"]
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))


def _random_code_point(rng: random.Random) -> str:
    while True:
        low, high = rng.choice([(0, 0x7F), (0x80, 0x2FFF), (0x3000, 0xFFFF), (0x10000, 0x10FFFF)])
        cp = rng.randint(low, high)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _json_blob(rng: random.Random) -> str:
    def value(depth: int) -> object:
        kind = rng.randint(0, 5 if depth < 3 else 2)
        if kind == 0:
            return rng.randint(-(10**12), 10**12)
        if kind == 1:
            return rng.choice(WORDS[rng.choice(list(WORDS))].split())
        if kind == 2:
            return rng.random() * 1000
        if kind == 3:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {f"k{rng.randint(0, 99)}": value(depth + 1) for _ in range(rng.randint(0, 4))}

    return json.dumps(value(0), ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))


def _generated_chunk(rng: random.Random, added: Sequence[str]) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(5, 30)):
        kind = rng.randint(0, 9)
        if kind <= 2:
            words = WORDS[rng.choice(list(WORDS))].split()
            parts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
        elif kind == 3:
            parts.append(rng.choice(EMOJI))
        elif kind == 4:
            parts.append(rng.choice(ODD))
        elif kind == 5:
            parts.append(rng.choice(CODE))
        elif kind == 6:
            parts.append(_json_blob(rng))
        elif kind == 7:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 25))))
        elif kind == 8:
            parts.append(_whitespace_run(rng))
        else:
            parts.append("".join(_random_code_point(rng) for _ in range(rng.randint(1, 8))))
        parts.append(rng.choice(["", " ", "\n", "", ""]))
    return "".join(parts)


def build_corpus(added_tokens: Sequence[str], min_bytes: int = 1_100_000, seed: int = 4) -> str:
    """Prose paragraphs and generated chunks, with each added token appearing mid-text."""
    rng = random.Random(seed)
    paragraphs = PROSE.read_text(encoding="utf-8").split("\n\n")
    pending = list(added_tokens)
    rng.shuffle(pending)
    out: list[str] = []
    size = 0
    index = 0
    while size < min_bytes or pending:
        if index % 2 == 0 and paragraphs:
            chunk = paragraphs[(index // 2) % len(paragraphs)] + "\n\n"
        else:
            chunk = _generated_chunk(rng, added_tokens)
        cuts = sorted(rng.randint(0, len(chunk)) for _ in range(min(len(pending), 3)))
        pieces, start = [], 0
        for cut in cuts:  # all cuts in the original chunk: no token lands inside another
            pieces += [chunk[start:cut], pending.pop()]
            start = cut
        chunk = "".join([*pieces, chunk[start:]])
        out.append(chunk)
        size += len(chunk.encode("utf-8"))
        index += 1
    return "".join(out)


TRICKY = [
    "",
    " ",
    "\n",
    "  \n\n  y",
    "x  \n\n  y",
    "foo.\n\n bar",
    "    int x = 12345;\n\n",
    "Hello world!",
    "a你好",
    " 你好",
    "日本語のテキスト",
    "«Ciao»\n\nE poi.»",
    ".»",
    " ٣",
    "１２３４",
    "½²³",
    "\u00a0\u00a0x",
    "\u3000\u3000x",
    "x\u2028y",
    "\t\tx",
    "e\u0301\u0301\u0301",
    " \u0301a",
    "\u0301",
    "👨\u200d👩\u200d👧",
    "\u200d\u200d",
    "<think>",
    "</think>x<think>",
    "<｜/table>｜DSML｜",
    "｜DSML｜｜DSML｜",
    "<｜User｜><｜Assistant｜>",
    "<｜begin▁of▁sentence｜>",
    "<<think>>",
    "<｜tool▁calls▁begin｜>",
    "<|EOT|>",
    "<dsml:x</dsml:",
    "ゲーム・データ゠テスト",
    "゙゚゛゜ゝゞゟ",
    "\x00\x01\x1f\x7f",
    "\r\n\r\n",
    "a\r\rb",
    "!!!\n\n\n",
    " !!!",
    "  !!!",
    "'s 're 've",
    "0123456789",
    "a1b22c333d4444",
    " " * 257,
    "\n" * 100,
    "x" * 1000,
    "ab" * 500,
    "\U0010ffff\U000e0001",
]
