"""Docs name only things that exist: README.md and docs/**/*.md against the tree.

What is checked, in each doc outside fenced code blocks:
- every backticked span, by its form:
  - a path (a `/` and a file extension, `a/b/` ending in a slash, a first part that is a
    top-level folder of the repository or a package of src/ds4, or a bare file name with
    a source extension such as `loop.py`): it must exist relative to the repository root,
    the doc's folder or src/ds4, or end a path of the tree (`reference/forward.py`).
    `*`, `{a,b}`, `<placeholder>`, `...` and `…` are wildcards; `:12` and `:12-14` after a
    path are dropped; `path.py::Name` also needs the word `Name` in that file, and
    `pkg/module.attr` the word `attr` in `pkg/module.py`;
  - a module path (`ds4.x.y`, `python -m bench.x`): a module or package of that name, any
    rest a word in it (`ds4.lib.open_model`). A `ds4.` name outside every module of ours
    (no `ds4.<top>` module) passes when it is quoted in the source: logger names such as
    `ds4.kvcache`, metadata keys such as `ds4.convert.tool` (and `ds4.convert.x` when
    `"ds4.convert.` is);
  - a Class (CamelCase of three or more characters with a lowercase letter, `Session`) or
    a function (`name()`, `name(args)`): a `class`/`def`/top-level assignment in src/,
    tests/, tools/ or bench/, or an identifier of the C sources in native/;
  - `Class.attr`: the class exists and `attr` is defined in its body (def, field, `self.`)
    or a base class's; `module.attr`, where `module` is the stem of exactly one module in
    src/ds4 that no package (nor a tensor-name head, TENSOR_HEADS) shares: a word of it;
  - a `ds4_` identifier (C functions, metric names; `ds4_x_*` a prefix) and, outside the
    specs of OWN_NOTATION, a snake_case identifier (`prepare_job`, JSON fields): a word of
    the source (Python or C, strings included); `_suffix` may end such a word;
  - a span with spaces (a command, a message) is split and each word checked as a path,
    so the script in `bench/x.py --flag` is checked and the flags are not;
- every relative Markdown link target, relative to the doc;
- unquoted words of the prose that start with a top-level folder (`src/`, `tests/`, ...)
  or a package of src/ds4 (`domain/`, `wire/`, ...) and name a file (with an extension).
Inside fenced code blocks only paths (words starting with a top-level folder) and module
paths (`python -m x.y`, `from ds4.x import a, b`, `import ds4.x`) are checked.

Exempt, by rule rather than by name:
- forms that are no name of this tree: CLI flags (`--ctx`), env vars (`DS4_MODEL`, `$X`),
  JSON values with punctuation, GGUF keys and tensor names (dotted lowercase forms whose
  head is no module of ours), ALL_CAPS constants and placeholders (`MODEL.gguf`, `DIR`),
  shell commands other than their path words, URLs and host names, absolute, `~` and `$`
  paths and `./name` (the user's machine), formulas (spans with operators), build
  outputs (GENERATED, GENERATED_MODULES);
- the user's and the program's files: bare names without a source extension
  (`config.json`, `answer.txt`), paths under a folder the program writes (OUTPUT_DIRS)
  or an ALL_CAPS placeholder (`CHECKPOINT_DIR/config.json`), and placeholder paths whose
  first part is no folder of the tree (`sessions/<id>.json`);
- a name struck through, ~~`OldName`~~: a removed name mentioned as history, or an
  alternative that was not built (ADRs say what was there before);
- an ADR whose header (the lines before its first `## ` heading) has a line starting
  `Status: superseded by ADR NNNN` (or `Status: superseded by issue NN`), followed by
  what replaced it: it records a decision that no longer holds. An ADR that is only
  amended keeps `Status: accepted (...)` and names the amending ADR after it, and is
  checked like any doc;
- docs/reference/citations.md, which maps the planning specs' old names on purpose.

Names from outside projects (SDK classes, HF transformers, ggml notation, HTTP headers,
API values ds4 never writes) and the few prose words that look like names are listed in
EXTERNAL and EXTERNAL_PATHS below, each group with where it comes from; add to them
rather than loosening a rule. A failure lists `doc:line: `name`` per missing name.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "ds4"
CODE_TOPS = ("src", "tests", "tools", "bench")
PROSE_TOPS: tuple[str, ...] = ("src", "tests", "tools", "bench", "native", "docs")
PROSE_TOPS += ("adapters", "apps", "domain", "ports", "wire", "lib")
SKIPPED_PARTS = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
SKIPPED_PARTS |= {".hypothesis", "node_modules"}
# Build outputs: absent from a fresh clone, named by docs as what `make` produces.
GENERATED = ("build", "dist", "src/ds4/_vulkan_spirv", "native/build/_gen", "tools/gpu/bundle")
EXEMPT_DOCS = {"docs/reference/citations.md"}
# A bare file name (no folder) is checked when it has one of these: source files of the tree.
# Other bare names (`MODEL.gguf`, `config.json`, `answer.txt`) are the user's files.
SOURCE_EXTS = {".py", ".c", ".h", ".comp", ".glsl", ".sh"}

EXTERNAL = {
    # Python standard library, prometheus, ray
    "TypeError", "CollectorRegistry", "ObjectRef",
    # OpenAI / Anthropic SDKs and their stream event names
    "APIStatusError", "ResponseCustomToolCallInputDeltaEvent",
    # HF transformers
    "DeepseekV4Config", "DeepseekV4ForCausalLM", "state_dict",
    # numpy / ggml notation in docs/reference/formats.md and docs/reference/model.md
    "astype", "to_f16", "make_qkx2", "make_qkx3",
    # HTTP header names
    "Host", "Origin",
    # example text: a token's text in docs/reference/chat-and-dsml.md
    "Hello",
    # Claude Code's tool name; GPQA's CSV column
    "Bash", "Subdomain",
    # API values ds4 reads or documents but never writes (OpenAI, Anthropic, Codex tools)
    "content_filter", "model_context_window_exceeded", "pause_turn", "is_error",
    "parallel_tool_calls", "google_search", "multi_agent_v1", "write_stdin",
    # packaging and server libraries: setuptools' cffi hook, wheel tags, uvicorn's option
    "cffi_modules", "manylinux_2_34", "manylinux_2_34_x86_64", "limit_concurrency",
}  # fmt: skip
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
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()  # its examples are no names
    for rel in sorted(tree()):
        if rel.split("/")[0] in tops and rel.endswith(exts) and rel != this:
            try:
                out[rel] = (ROOT / rel).read_text(encoding="utf-8")
            except (UnicodeDecodeError, IsADirectoryError):
                continue
    return out


def python_sources() -> dict[str, str]:
    return _sources(CODE_TOPS, (".py",))


def native_sources() -> dict[str, str]:
    return _sources(("native",), (".c", ".h", ".comp", ".glsl"))


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
    for text in native_sources().values():
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


GLOB_PART = re.compile(r"\.\.\.|[*…]|<[^>/]*>|\{[\w,]*\}")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, last = [], 0
    for m in GLOB_PART.finditer(pattern):
        out.append(re.escape(pattern[last : m.start()]))
        part = m.group(0)
        if part.startswith("{"):
            out.append("(?:" + "|".join(map(re.escape, part[1:-1].split(","))) + ")")
        else:
            out.append(r"[^/]*")
        last = m.end()
    out.append(re.escape(pattern[last:]))
    return re.compile("".join(out) + "/?")


def _wild(text: str) -> bool:
    return GLOB_PART.search(text) is not None


def path_exists(path: str, doc_dir: str) -> bool:
    """Relative to the root, the doc's folder or src/ds4, or the end of a path of the tree."""
    path = path.removeprefix("./").rstrip("/")
    if not _wild(path):
        for base in ("", doc_dir, "src/ds4"):
            if _normal(f"{base}/{path}") in tree():
                return True
        return any(r.endswith("/" + path) for r in tree())
    pattern = _glob_regex(path)
    return any(
        pattern.fullmatch(rel) or any(pattern.fullmatch(rel[i + 1 :]) for i in _slashes(rel))
        for rel in tree()
    )


def _slashes(rel: str) -> Iterator[int]:
    return (i for i, ch in enumerate(rel) if ch == "/")


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
SNAKE = re.compile(r"_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
DOTTED = re.compile(rf"{IDENT}(?:\.{IDENT})+")
LINE_REF = re.compile(r":\d+(?:-\d+)?$")
EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")
TOPS: tuple[str, ...] = ("src", "tests", "tools", "bench", "native", "docs", "examples", "data")
TOPS += ("models", "evals", ".ci")
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
    head = word.split("/", 1)[0]
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
            with contextlib.suppress(UnicodeDecodeError, IsADirectoryError):
                texts.append((ROOT / rel).read_text(encoding="utf-8"))
    return texts


# Specs that define their own pseudo-code names (`rmsnorm_plain`) or describe HF's code:
# snake_case words there are not checked (paths, modules and classes still are).
OWN_NOTATION = ("docs/reference", "docs/oracle")


def check_span(span: str, doc_dir: str) -> list[str]:
    """The names in one backticked span that do not exist (empty when all do)."""
    span = span.strip()
    if not span or span in EXTERNAL:
        return []
    call = CALL.fullmatch(span)
    if call and " " not in call.group(1):
        return [] if _check_name(call.group(1), called=True, doc_dir=doc_dir) else [span]
    if " " in span:
        if re.fullmatch(r"[\w./*-]+ §.*", span):
            return check_span(span.split(" ")[0], doc_dir)
        words = span.split()
        missing = []
        for i, word in enumerate(words):
            after_m = i > 1 and words[i - 2 : i] in (["python", "-m"], ["python3", "-m"])
            if after_m and re.fullmatch(r"\w+(\.\w+)+", word):
                if not module_exists(word):
                    missing.append(word)
            elif _is_path(word) and not check_path(word, doc_dir):
                missing.append(word)
        return missing
    if _is_path(span.split("::")[0]):
        return [] if check_path(span, doc_dir) else [span]
    return [] if _check_name(span, called=False, doc_dir=doc_dir) else [span]


def _check_name(text: str, *, called: bool, doc_dir: str = "") -> bool:
    """True when `text` is no name of ours or names something that exists."""
    if text in EXTERNAL:
        return True
    if text.startswith(GENERATED_MODULES):
        return True
    if text.startswith("ds4.") or text == "ds4":
        if text == "ds4" or module_exists(text):
            return True
        # under a module of ours it is that module's attribute; else a logger name or key
        return not module_exists(".".join(text.split(".")[:2])) and quoted_in_source(text)
    if re.fullmatch(r"ds4_[\w*]+", text):
        if "*" in text:
            pattern = _glob_regex(text)
            return any(pattern.fullmatch(w) for w in source_words())
        return text in source_words()
    if DOTTED.fullmatch(text):
        head, attr = text.split(".")[:2]
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
    if SNAKE.fullmatch(text) and not doc_dir.startswith(OWN_NOTATION):
        if text.startswith("_"):  # a name's suffix: `_hit_rate` of `ds4_expert_cache_hit_rate`
            return text[1:] in source_words() or any(w.endswith(text) for w in source_words())
        return text in source_words()
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
            external = "://" in target or target.startswith("mailto:")
            if target and not external and _normal(f"{doc_dir}/{target}") not in tree():
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


SYNTHETIC = """\
Real: `TurnLexer`, `TurnLexer.force_think_close`, `decode_turn()`, `ds4.lib.open_model`,
`domain/generation/lexer.py::TurnLexer`, `lexer.py`, `ds4_fw_layers_forward`, `prepare_job`,
`bench/serving_bench.py --sessions 4`, [the ADRs](adr/0001-layering.md).
Not names: `--ctx 4096`, `DS4_MODEL`, `MODEL.gguf`, `~/.ds4/agent`, `max_tokens: 32000`,
`https://example.com/x.py`, `sessions/<id>.json`, `2·sigmoid`, ~~`DsmlStreamDecoder`~~ (history).
Renamed: `DsmlStreamDecoder`, `TurnLexer.no_such_member`, `no_such_function()`,
`domain/generation/tool_stream.py`, `lexer.py::NoSuchThing`, `ds4.lib.open_modle`,
`ds4_fw_no_such_call`, `no_such_snake_name`, [gone](no-such-page.md).
```
python -m bench.serving_bench
python -m bench.no_such_bench
from ds4.lib import open_model, no_such_export
tests/unit/no_such_test.py and `NotCheckedInFences`
```
"""


def test_the_scanner_finds_a_renamed_name() -> None:
    found = scan(SYNTHETIC, "docs/synthetic.md")
    assert [(m.line, m.name) for m in found] == [
        (6, "DsmlStreamDecoder"),
        (6, "TurnLexer.no_such_member"),
        (6, "no_such_function()"),
        (7, "domain/generation/tool_stream.py"),
        (7, "lexer.py::NoSuchThing"),
        (7, "ds4.lib.open_modle"),
        (8, "ds4_fw_no_such_call"),
        (8, "no_such_snake_name"),
        (8, "no-such-page.md"),
        (11, "bench.no_such_bench"),
        (12, "ds4.lib.no_such_export"),
        (13, "tests/unit/no_such_test.py"),
    ]
    assert str(found[0]) == "docs/synthetic.md:6: `DsmlStreamDecoder`"


def test_a_superseded_adr_is_exempt_and_an_accepted_one_is_not() -> None:
    body = "\n\n## Context\nIt used `DsmlStreamDecoder`.\n"
    accepted = "# ADR 0099: x\n\nStatus: accepted (2026-12-01)" + body
    gone = "# ADR 0099: x\n\nStatus: superseded by ADR 0100 (2026-12-02): see `TurnLexer`." + body
    assert [m.name for m in scan(accepted, "docs/adr/0099-x.md")] == ["DsmlStreamDecoder"]
    assert scan(gone, "docs/adr/0099-x.md") == []
