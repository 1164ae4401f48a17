"""The published DeepSeek V4 GGUF files `ds4 pull NAME` fetches, and the pure part of a
pull: which files are missing, how many bytes they need, which file ./ds4flash.gguf
points at afterwards (docs/pull.md).

The names and file names are those of ds4's C project's download_model.sh, all in the
Hugging Face repository `antirez/deepseek-v4-gguf`. The exact sizes and sha256 hashes
are not written here: the hub reports them at pull time and the pull verifies against
them. `approx_gb` is the "about N GB on disk" the C project's script states, shown by
`ds4 pull list` when the hub is not asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ds4.domain.errors import Ds4Error
from ds4.ports.model_hub import HubFile

HUB_REPO = "antirez/deepseek-v4-gguf"

LINK_NAME = "ds4flash.gguf"
"""The default model file of `ds4 server`, `ds4 cli` and `ds4 bench` (in the working
directory); a pull of a main model points it at the file fetched."""


@dataclass(frozen=True)
class CatalogEntry:
    """One `ds4 pull NAME`: the files it fetches from HUB_REPO, and whether it is a
    main model (./ds4flash.gguf then points at its one file) or a part: the MTP block,
    a PRO layer half."""

    name: str
    files: tuple[str, ...]
    main_model: bool
    about: str
    approx_gb: float


_PRO_Q4_LOW = "DeepSeek-V4-Pro-Q4K-Layers00-30.gguf"
_PRO_Q4_HIGH = "DeepSeek-V4-Pro-Q4K-Layers-31-output.gguf"

MODEL_CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        "q2-imatrix",
        ("DeepSeek-V4-Flash-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix.gguf",),
        True,
        "Flash, 2-bit routed experts; for 96 and 128 GB RAM machines",
        81,
    ),
    CatalogEntry(
        "q2-q4-imatrix",
        (
            "DeepSeek-V4-Flash-Layers37-42Q4KExperts-OtherExpertLayersIQ2XXSGateUp-Q2KDown"
            "-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix-fixed.gguf",
        ),
        True,
        "Flash, 2-bit routed experts with 4-bit ones in the last 6 layers; 128 GB machines",
        98,
    ),
    CatalogEntry(
        "q4-imatrix",
        (
            "DeepSeek-V4-Flash-Q4KExperts-F16HC-F16Compressor-F16Indexer-Q8Attn-Q8Shared"
            "-Q8Out-chat-v2-imatrix.gguf",
        ),
        True,
        "Flash, 4-bit routed experts; for 256 GB RAM machines or more",
        153,
    ),
    CatalogEntry(
        "pro-q2-imatrix",
        ("DeepSeek-V4-Pro-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-Instruct-imatrix.gguf",),
        True,
        "PRO, 2-bit routed experts, one file; for 512 GB RAM machines",
        430,
    ),
    CatalogEntry(
        "mtp",
        ("DeepSeek-V4-Flash-MTP-Q4K-Q8_0-F32.gguf",),
        False,
        "the Flash MTP block for speculative decoding (--mtp FILE)",
        3.5,
    ),
    CatalogEntry(
        "pro-q4-layers00-30",
        (_PRO_Q4_LOW,),
        False,
        "PRO Q4, layers 0..30 (the coordinator's half of a two-machine run)",
        426,
    ),
    CatalogEntry(
        "pro-q4-layers31-output",
        (_PRO_Q4_HIGH,),
        False,
        "PRO Q4, layers 31..output (the worker's half of a two-machine run)",
        412,
    ),
    CatalogEntry(
        "pro-q4-split",
        (_PRO_Q4_LOW, _PRO_Q4_HIGH),
        False,
        "both PRO Q4 halves",
        838,
    ),
)


def catalog_entry(name: str) -> CatalogEntry:
    for entry in MODEL_CATALOG:
        if entry.name == name:
            return entry
    names = ", ".join(e.name for e in MODEL_CATALOG)
    raise Ds4Error(f"unknown model name {name!r}; one of: {names} (or list)")


# ---- the plan of one pull --------------------------------------------------------------


@dataclass(frozen=True)
class PullPlan:
    """What one pull does. `verify`: files on disk with the hub's size, whose hash is
    still to check; `fetch`: files missing, or on disk with another size (`damaged`
    names those, so the user is told); `link`: the file ./ds4flash.gguf points at after,
    or None."""

    entry: CatalogEntry
    files: tuple[HubFile, ...]
    verify: tuple[HubFile, ...]
    fetch: tuple[HubFile, ...]
    damaged: tuple[str, ...]
    link: str | None

    @property
    def bytes_to_fetch(self) -> int:
        return sum(f.size for f in self.fetch)

    def refetch(self, names: tuple[str, ...]) -> PullPlan:
        """The plan after hashing: `names` (files whose hash is not the hub's) move
        from `verify` to `fetch`."""
        moved = tuple(f for f in self.verify if f.path in names)
        return replace(
            self,
            verify=tuple(f for f in self.verify if f.path not in names),
            fetch=self.fetch + moved,
            damaged=self.damaged + tuple(f.path for f in moved),
        )


def plan_pull(
    entry: CatalogEntry, listing: Mapping[str, HubFile], on_disk: Mapping[str, int]
) -> PullPlan:
    """`listing`: the hub's files by path; `on_disk`: the size of each of the entry's
    files already in the download directory (absent when there is none)."""
    files: list[HubFile] = []
    for path in entry.files:
        found = listing.get(path)
        if found is None:
            raise Ds4Error(f"{HUB_REPO} on the hub has no file {path} (for {entry.name})")
        files.append(found)
    verify = tuple(f for f in files if on_disk.get(f.path) == f.size)
    fetch = tuple(f for f in files if on_disk.get(f.path) != f.size)
    damaged = tuple(f.path for f in fetch if f.path in on_disk)
    link = entry.files[0] if entry.main_model else None
    return PullPlan(entry, tuple(files), verify, fetch, damaged, link)


def space_needed(plan: PullPlan, resumable: Mapping[str, int]) -> int:
    """Bytes the download directory must still have free: what is fetched, less what
    interrupted downloads of those files already hold (they resume)."""
    return sum(max(f.size - resumable.get(f.path, 0), 0) for f in plan.fetch)


def require_space(needed: int, free: int, where: str) -> None:
    if needed > free:
        raise Ds4Error(
            f"not enough disk space in {where}: the pull needs {gib(needed)} free, "
            f"{gib(free)} is; free some space or pass --dir on a larger disk"
        )


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"
