"""Docs name only things that exist: README.md and docs/**/*.md against the tree.

What is checked, in each doc outside fenced code blocks:
- every backticked span, by its form:
  - a path (a `/` with a file extension or a trailing `/`, a first part that is a top-level
    entry of the repository or a package of src/ds4, or a bare file name with a source
    extension such as `loop.py`): it must exist relative to the repository root, the doc's
    folder or src/ds4, or end a path in the tree (`reference/forward.py`). `*`, `{a,b}`,
    `<placeholder>` and `…` are wildcards; `:12`, `:12-14` and ` §3` after a path are
    dropped; `path.py::Name` also needs `Name` in that file;
  - a module path (`ds4.x.y`, `python -m bench.x`): a module or package of that name, any
    rest a word in it (`ds4.lib.open_model`); a `ds4.` name that is no module passes when
    the quoted string is in the source (logger names such as `ds4.kvcache`, metadata keys);
  - a Class (CamelCase, `Session`), a function (`name()`, `name(args)`), `Class.attr` or
    `module.attr` (where `module` is the stem of exactly one module in src/ds4 and no package
    shares it): `Class`/`name` is a `class`/`def`/top-level assignment in src/, tests/,
    tools/ or bench/, or an identifier of the C sources in native/; `.attr` is defined in
    that class's body (or a base class's), or is a word of that module;
  - a `ds4_` identifier (C functions, metric names): a word of the source;
  - a span with spaces (a command, a message) is split and each word checked as above, so
    the script in `bench/x.py --flag` is checked and the flags are not;
- every relative Markdown link target, relative to the doc;
- unquoted words of the prose that start with `src/`, `tests/`, `tools/`, `bench/`,
  `native/` or `docs/` and name a file (with an extension).
Inside fenced code blocks only paths (words starting with those top-level folders) and
module paths (`python -m x.y`, `from ds4.x import a, b`, `import ds4.x`) are checked.

Exempt, by rule rather than by name:
- forms that are no name of this tree: CLI flags (`--ctx`), env vars (`DS4_MODEL`, `$X`),
  JSON fields and values, GGUF keys and tensor names (lowercase dotted forms whose head is no
  module of ours), ALL_CAPS constants and placeholders (`MODEL.gguf`, `CHECKPOINT_DIR`,
  `DIR`), shell commands other than their path words, URLs and hosts, absolute paths and
  `~`/`$` paths (the user's machine), formulas (spans with operators), single letters;
- runtime paths that the program writes, with a placeholder and a first part that is no
  folder of the tree (`sessions/<id>.json`, `official/<id>.official.json`);
- an ADR whose header (the lines before its first `## ` heading) has a line
  `Status: superseded by ADR NNNN ...` (or `... by issue NN ...`): it records a decision
  that no longer holds and may name what was there then;
- docs/reference/citations.md, which maps the planning specs' old names on purpose.

Names from outside projects (SDK classes, ggml/llama.cpp, HF transformers, the standard
library, numpy/torch) and the few prose words that look like class names are listed in
EXTERNAL below, each with where it comes from; add to it rather than loosening a rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "ds4"
CODE_TOPS = ("src", "tests", "tools", "bench")
PROSE_TOPS = ("src", "tests", "tools", "bench", "native", "docs")
SKIPPED_PARTS = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
SKIPPED_PARTS |= {".hypothesis", "node_modules"}
# Build outputs: absent from a fresh clone, named by docs as what `make` produces.
GENERATED = ("build", "dist", "src/ds4/_vulkan_spirv", "native/build/_gen", "tools/gpu/bundle")
EXEMPT_DOCS = {"docs/reference/citations.md"}
# A bare file name (no folder) is checked when it has one of these: source files of the tree.
# Other bare names (`MODEL.gguf`, `config.json`, `answer.txt`) are the user's files.
SOURCE_EXTS = {".py", ".c", ".h", ".comp", ".glsl", ".sh"}

EXTERNAL = {
    # Python standard library, numpy, torch, msgspec, cffi, asyncio, prometheus, uvicorn
    "TypeError",
    "CollectorRegistry",
    "ObjectRef",  # ray
    # OpenAI / Anthropic SDKs and wire event names
    "APIStatusError",
    "ResponseCustomToolCallInputDeltaEvent",
    # HF transformers
    "DeepseekV4Config",
    "DeepseekV4ForCausalLM",
    "state_dict",
    # numpy / ggml notation in docs/reference/formats.md and model.md
    "astype",
    "to_f16",
    "make_qkx2",
    "make_qkx3",
    # HTTP header names
    "Host",
    "Origin",
    # example text: a token's text in docs/reference/chat-and-dsml.md
    "Hello",
    # Claude Code's tool name; GPQA's CSV column
    "Bash",
    "Subdomain",
}
# Paths of other projects: HF transformers, the Vulkan SDK; prose shorthand for tensor names.
EXTERNAL_PATHS = {
    "transformers/conversion_mapping.py",
    "conversion_mapping.py",
    "vulkan/vulkan.h",
    "gate/up/down_exps.data",
}
# Heads of GGUF keys and tensor names (`head.weight`, `indexer.proj`), which read like a
# `module.attr` of ours where a module shares the name.
TENSOR_HEADS = {"attn", "ffn", "blk", "indexer", "head", "mtp", "model", "tokenizer", "output"}
# Folders the program writes (a vector set's `official/`, the agent's `sessions/`, the KV
# store's `quarantine/`): paths under them are the user's files, not the tree's.
OUTPUT_DIRS = {"official", "sessions", "kv", "quarantine", "prompts"}
# Extension modules that the build compiles (native/build/*_build.py), absent from a clone.
GENERATED_MODULES = ("ds4._native_",)


@dataclass(frozen=True)
class Missing:
    doc: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: `{self.name}`"


# -- the tree ---------------------------------------------------------------------------


def _skipped(rel: Path) -> bool:
    if SKIPPED_PARTS.intersection(rel.parts) or any(p.endswith(".egg-info") for p in rel.parts):
        return True
    text = rel.as_posix()
    return any(text == g or text.startswith(g + "/") for g in GENERATED)


@cache
def tree() -> frozenset[str]:
    """Every file and folder of the repository, relative, as posix strings."""
    out: set[str] = set()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if not _skipped(rel):
            out.add(rel.as_posix())
    return frozenset(out)


@cache
def _sources(tops: tuple[str, ...], exts: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for rel in sorted(tree()):
        if rel.split("/")[0] in tops and rel.endswith(exts):
            try:
                out[rel] = (ROOT / rel).read_text(encoding="utf-8")
            except (UnicodeDecodeError, IsADirectoryError):
                continue
    return out


def python_sources() -> dict[str, str]:
    return _sources(CODE_TOPS, (".py",))


def native_sources() -> dict[str, str]:
    return _sources(("native", "src"), (".c", ".h", ".comp", ".glsl", ".py"))


DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:class|def)[ \t]+(\w+)", re.M)
TOP_ASSIGN = re.compile(r"^(?:type[ \t]+)?(\w+)[ \t]*(?::[^=\n]*)?=", re.M)
WORD = re.compile(r"[A-Za-z_]\w*")


@cache
def defined_names() -> frozenset[str]:
    names: set[str] = set()
    for text in python_sources().values():
        names.update(DEF.findall(text))
        names.update(TOP_ASSIGN.findall(text))
    return frozenset(names)


@cache
def native_words() -> frozenset[str]:
    words: set[str] = set()
    for rel, text in native_sources().items():
        if not rel.endswith(".py"):
            words.update(WORD.findall(text))
    return frozenset(words)


@cache
def source_words() -> frozenset[str]:
    words: set[str] = set(native_words())
    for text in python_sources().values():
        words.update(WORD.findall(text))
    return frozenset(words)


@cache
def class_bodies() -> dict[str, list[tuple[list[str], str]]]:
    """Class name -> [(base names, body text)] for every class in the Python sources."""
    head = re.compile(r"^([ \t]*)class[ \t]+(\w+)(?:\[[^\]]*\])?(?:\(([^)]*)\))?", re.M)
    out: dict[str, list[tuple[list[str], str]]] = {}
    for text in python_sources().values():
        lines = text.splitlines()
        for m in head.finditer(text):
            indent = len(m.group(1))
            start = text.count("\n", 0, m.start()) + 1
            body = []
            for line in lines[start:]:
                if line.strip() and len(line) - len(line.lstrip()) <= indent:
                    break
                body.append(line)
            bases = [b.split(".")[-1].split("[")[0] for b in WORD.findall(m.group(3) or "")]
            out.setdefault(m.group(2), []).append((bases, "\n".join(body)))
    return out


def has_attr(cls: str, attr: str, seen: frozenset[str] = frozenset()) -> bool:
    member = re.compile(
        rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{attr}\b|^[ \t]*{attr}[ \t]*[:=]"
        rf"|self\.{attr}\b",
        re.M,
    )
    for bases, body in class_bodies().get(cls, []):
        if member.search(body):
            return True
        if any(has_attr(b, attr, seen | {cls}) for b in bases if b not in seen):
            return True
    return False


@cache
def module_stems() -> dict[str, list[str]]:
    """File stem -> module files under src/ds4, for `module.attr` forms."""
    out: dict[str, list[str]] = {}
    for rel in python_sources():
        if rel.startswith("src/ds4/"):
            out.setdefault(Path(rel).stem, []).append(rel)
    return out


@cache
def package_names() -> frozenset[str]:
    return frozenset(Path(r).name for r in tree() if r.startswith("src/ds4/") and "." not in r)


# -- checks of one form -----------------------------------------------------------------


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*" or ch == "…":
            out.append(r"[^/]*")
        elif pattern.startswith("...", i):
            out.append(r"[^/]*")
            i += 2
        elif ch == "<":
            end = pattern.find(">", i)
            if end < 0:
                out.append(re.escape(ch))
            else:
                out.append(r"[^/]*")
                i = end
        elif ch == "{":
            end = pattern.find("}", i)
            alts = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(re.escape(a) for a in alts) + ")")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + "/?")


def _wild(text: str) -> bool:
    return any(c in text for c in "*<{…") or "..." in text


def path_exists(path: str, doc_dir: str) -> bool:
    path = path.removeprefix("./")
    bases = ["", doc_dir + "/" if doc_dir else "", "src/ds4/"]
    if not _wild(path):
        for base in bases:
            rel = (Path(base) / path).as_posix() if base else path.rstrip("/")
            if _normal(rel) in tree():
                return True
        suffix = "/" + path.rstrip("/")
        return any(r.endswith(suffix) for r in tree())
    pattern = _glob_regex(path.rstrip("/"))
    for rel in tree():
        for base in bases:
            if base and not rel.startswith(base):
                continue
            if pattern.fullmatch(rel[len(base) :]):
                return True
        for i in range(len(rel)):
            if rel[i] == "/" and pattern.fullmatch(rel[i + 1 :]):
                return True
    return False


def _normal(rel: str) -> str:
    parts: list[str] = []
    for part in rel.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def module_exists(dotted: str) -> bool:
    """`ds4.x.y[.attr]`, `bench.x`, `tools.demo.x`: a module or package, then words in it."""
    parts = dotted.split(".")
    base = ROOT / "src" if parts[0] == "ds4" else ROOT
    for cut in range(len(parts), 0, -1):
        stem = base.joinpath(*parts[:cut])
        pattern = _glob_regex(stem.relative_to(ROOT).as_posix())
        found = [r for r in tree() if pattern.fullmatch(r) or pattern.fullmatch(r[:-3])]
        files = [r for r in found if r.endswith(".py") and not r.endswith("/__init__.py")]
        files += [r + "/__init__.py" for r in found if r + "/__init__.py" in tree()]
        if not files:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        return any(
            re.search(rf"\b{re.escape(rest[0])}\b", (ROOT / f).read_text(encoding="utf-8"))
            for f in files
        )
    return False


def quoted_in_source(text: str) -> bool:
    """A logger name or metadata key; `a.b.*` or `a.b.c` also pass on a quoted `"a.b.`."""
    needles = [rf"[\"']{re.escape(text)}[\"']"]
    if text.count(".") >= 2:
        needles.append(rf"[\"']{re.escape(text.rsplit('.', 1)[0])}\.")
    return any(re.search(n, t) for n in needles for t in python_sources().values())


def name_exists(name: str) -> bool:
    if name in EXTERNAL:
        return True
    if _wild(name):
        pattern = _glob_regex(name)
        return any(pattern.fullmatch(n) for n in defined_names() | native_words())
    return name in defined_names() or name in native_words()


def attr_exists(owner: str, attr: str) -> bool:
    if owner in EXTERNAL or f"{owner}.{attr}" in EXTERNAL:
        return True
    if owner in class_bodies():
        return has_attr(owner, attr)
    files = module_stems().get(owner, [])
    return any(re.search(rf"\b{re.escape(attr)}\b", python_sources()[f]) for f in files)


# -- classifying a span -----------------------------------------------------------------

CAMEL = re.compile(r"_?[A-Z](?=[A-Za-z0-9]*[a-z])[A-Za-z0-9]{2,}")
IDENT = r"[A-Za-z_]\w*"
CALL = re.compile(rf"({IDENT}(?:\.{IDENT})*)\((.*)\)")
DOTTED = re.compile(rf"{IDENT}(?:\.{IDENT})+")
LINE_REF = re.compile(r":\d+(?:-\d+)?$")
EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")
TOPS = ("src", "tests", "tools", "bench", "native", "docs", "examples", "data", "models")
TOPS += ("evals", ".ci")
PKG_TOPS = ("adapters", "apps", "domain", "ports", "wire", "lib", "presets")


def _is_path(word: str) -> bool:
    if word.startswith(("-", "@", "$", "~", "/", "http:", "https:")) or "://" in word:
        return False
    if re.search(r"[=|()+^·,;\"'\[\]]", re.sub(r"\{[\w,]*\}", "x", word)):
        return False
    head, slash, rest = word.partition("/")
    if not slash:
        ext = EXT.search(word)
        return ext is not None and ext.group(0) in SOURCE_EXTS
    if head == "." and "/" not in rest:
        return False  # `./ds4flash.gguf`: a file in the user's folder
    if "." in head and head not in (".ci", "..", "."):
        return False  # a host name
    if head in TOPS or head in PKG_TOPS or head in ("..", "."):
        return True
    last = word.rstrip("/").rsplit("/", 1)[-1]
    if _wild(word) and "." not in last:
        return False
    if word.endswith("/"):
        return "/" in word.rstrip("/")  # `kv/`, `quarantine/`: folders the program makes
    return bool(EXT.search(last))


def _runtime_path(word: str) -> bool:
    """A path the program writes at run time or the user names: `official/config.json`,
    `sessions/<id>.json`, `DIR/x.json`."""
    head = word.split("/")[0]
    if head in OUTPUT_DIRS or re.fullmatch(r"[A-Z][A-Z0-9_]*", head):
        return True
    return _wild(word) and head not in TOPS and head not in PKG_TOPS and "/" in word


def check_path(word: str, doc_dir: str) -> bool:
    word = LINE_REF.sub("", word)
    path, _, name = word.partition("::")
    path = LINE_REF.sub("", path)
    if path in EXTERNAL_PATHS or path.startswith(GENERATED):
        return True
    if _runtime_path(path):
        return True
    if not path_exists(path, doc_dir):
        module, dot, attr = path.rpartition(".")
        if not dot or "/" in attr or not path_exists(module + ".py", doc_dir):
            return False
        path, name = module + ".py", attr  # `generation/loop.prefill`: a module's attribute
    if not name:
        return True
    target = CALL.fullmatch(name)
    short = (target.group(1) if target else name).split(".")[0]
    found = _path_texts(path, doc_dir)
    return any(re.search(rf"\b{re.escape(short)}\b", t) for t in found)


def _path_texts(path: str, doc_dir: str) -> list[str]:
    suffix = "/" + path
    texts = []
    for rel in tree():
        if rel == path or rel.endswith(suffix) or rel == f"{doc_dir}/{path}":
            try:
                texts.append((ROOT / rel).read_text(encoding="utf-8"))
            except (UnicodeDecodeError, IsADirectoryError):
                pass
    return texts


def check_span(span: str, doc_dir: str) -> list[str]:
    """The names in one backticked span that do not exist (empty when all do)."""
    span = span.strip()
    if not span or span in EXTERNAL:
        return []
    call = CALL.fullmatch(span)
    if call and " " not in call.group(1):
        return [] if _check_name(call.group(1), called=True) else [span]
    if " " in span:
        if re.fullmatch(r"[\w./*-]+ §.*", span):
            return check_span(span.split(" ")[0], doc_dir)
        words = span.split()
        missing = []
        for i, word in enumerate(words):
            if i > 1 and words[i - 2 : i] in (["python", "-m"], ["python3", "-m"]) and re.fullmatch(r"\w+(\.\w+)+", word):
                if not module_exists(word):
                    missing.append(word)
            elif _is_path(word) and not check_path(word, doc_dir):
                missing.append(word)
        return missing
    if _is_path(span.split("::")[0]):
        return [] if check_path(span, doc_dir) else [span]
    return [] if _check_name(span, called=False) else [span]


def _check_name(text: str, *, called: bool) -> bool:
    """True when `text` is no name of ours or names something that exists."""
    if text in EXTERNAL:
        return True
    if text.startswith(GENERATED_MODULES):
        return True
    if text.startswith("ds4.") or text == "ds4":
        return text == "ds4" or module_exists(text) or quoted_in_source(text)
    if re.fullmatch(r"ds4_[\w*]+", text):
        if "*" in text:
            pattern = _glob_regex(text)
            return any(pattern.fullmatch(w) for w in source_words())
        return text in source_words()
    if DOTTED.fullmatch(text):
        head, attr = text.split(".")[0], text.split(".")[1]
        if CAMEL.fullmatch(head):
            return name_exists(head) and attr_exists(head, attr)
        stems = module_stems().get(head, [])
        if len(stems) == 1 and head not in package_names() | TENSOR_HEADS:
            return attr_exists(head, attr)
        return True
    if not re.fullmatch(IDENT, text):
        return True
    if called or CAMEL.fullmatch(text):
        return name_exists(text)
    return True


# -- scanning a doc ---------------------------------------------------------------------

SPAN = re.compile(r"(~~)?(`+)(.+?)\2(~~)?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PROSE_PATH = re.compile(rf"(?<![\w/`.-])((?:{'|'.join(PROSE_TOPS)})/[\w./*{{}},-]*\w)")
FENCE_PATH = re.compile(rf"(?<![\w/.~-])((?:{'|'.join(TOPS)})/[\w./-]*\w)")
FENCE_MODULE = re.compile(
    r"python3? -m ((?:ds4|bench|tools)(?:\.\w+)+)|^\s*(?:from|import) (ds4(?:\.\w+)*)"
    r"(?: import ([\w, ()]+))?"
)
SUPERSEDED = re.compile(r"^Status: superseded by (?:ADR \d{4}|issue \d+)\b", re.M)


def superseded(text: str) -> bool:
    header = text.split("\n## ", 1)[0]
    return bool(SUPERSEDED.search(header))


def _fence_misses(line: str, doc_dir: str) -> Iterator[str]:
    for m in FENCE_PATH.finditer(line):
        if _is_path(m.group(1)) and not check_path(m.group(1), doc_dir):
            yield m.group(1)
    for m in FENCE_MODULE.finditer(line):
        module = m.group(1) or m.group(2)
        if not module_exists(module):
            yield module
            continue
        for name in re.findall(IDENT, m.group(3) or ""):
            if m.group(2) and not module_exists(f"{module}.{name}"):
                yield f"{module}.{name}"


def scan(text: str, doc: str = "docs/x.md") -> list[Missing]:
    """Every name in one doc's text that does not exist in the tree."""
    if doc in EXEMPT_DOCS or (doc.startswith("docs/adr/") and superseded(text)):
        return []
    doc_dir = str(Path(doc).parent).replace(".", "") if "/" in doc else ""
    found = []
    fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence:
            found += [Missing(doc, number, n) for n in _fence_misses(line, doc_dir)]
            continue
        for m in SPAN.finditer(line):
            if not (m.group(1) and m.group(4)):  # ~~`old`~~: a name of the past, on purpose
                found += [Missing(doc, number, n) for n in check_span(m.group(3), doc_dir)]
        prose = SPAN.sub("", line)
        for m in LINK.finditer(prose):
            target = m.group(1).split("#")[0]
            if target and "://" not in target and not target.startswith("mailto:"):
                if _normal(f"{doc_dir}/{target}") not in tree():
                    found.append(Missing(doc, number, target))
        for m in PROSE_PATH.finditer(LINK.sub("", prose)):
            word = m.group(1).rstrip(".,")
            if EXT.search(word) and not check_path(word, doc_dir):
                found.append(Missing(doc, number, word))
    return found


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_docs_name_only_what_exists() -> None:
    missing = []
    for path in docs():
        rel = path.relative_to(ROOT).as_posix()
        missing += scan(path.read_text(encoding="utf-8"), rel)
    assert not missing, "docs name things that do not exist:\n" + "\n".join(map(str, missing))
