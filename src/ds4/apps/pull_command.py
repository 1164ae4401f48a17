"""`ds4 pull NAME`: the published DeepSeek V4 GGUF files into ./gguf/ (docs/pull.md).

The names are MODEL_CATALOG's (domain/model_catalog.py); the hub is the ModelHub port
(wiring.model_hub). A pull lists the repository (sizes and sha256 as the hub reports
them), checks what is already on disk (size, then sha256, remembered in a stamp under
DIR/.cache/ds4/ so a verified file is not hashed again), refuses to start when the disk
cannot hold what is missing, fetches each missing or damaged file (resuming an
interrupted download), verifies it, and for a main model points ./ds4flash.gguf at it
(a symlink made under a temporary name and renamed over the old one)."""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from pathlib import Path

from ds4.apps import wiring
from ds4.apps.flag_types import DefaultsHelpFormatter
from ds4.domain.errors import Ds4Error
from ds4.domain.model_catalog import (
    HUB_REPO,
    LINK_NAME,
    MODEL_CATALOG,
    PullPlan,
    catalog_entry,
    gib,
    plan_pull,
    require_space,
    space_needed,
)
from ds4.ports.model_hub import HubFile, ModelHub

DEFAULT_DIR = "gguf"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    names = ", ".join(e.name for e in MODEL_CATALOG)
    pull = sub.add_parser(
        "pull",
        formatter_class=DefaultsHelpFormatter,
        help="download a published DeepSeek V4 GGUF (ds4 pull list shows the names)",
        description=f"Download one of the published GGUF files of {HUB_REPO} from the "
        "Hugging Face Hub into --dir, resuming an interrupted download and verifying sizes "
        "and sha256 against the hub; a main model also becomes ./ds4flash.gguf, the default "
        "model of `ds4 server` and `ds4 cli` (docs/pull.md). HF_ENDPOINT selects a mirror.",
    )
    pull.add_argument("name", metavar="NAME", help=f"list, or one of: {names}")
    pull.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                      help="download directory")  # fmt: skip
    pull.add_argument("--token", default=None, metavar="T",
                      help="Hugging Face token (default: HF_TOKEN, else the token cache "
                      "that `hf auth login` writes, else none)")  # fmt: skip
    pull.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.name == "list":
        print_catalog()
        return 0
    entry = catalog_entry(args.name)
    hub = wiring.model_hub(args.token)
    plan = pull(hub, entry.name, Path(args.dir), progress=sys.stderr.isatty())
    if plan.link is not None:
        print(f"./{LINK_NAME} -> {Path(args.dir) / plan.link}; next: ds4 server")
    elif entry.name == "mtp":
        print(f"MTP block ready: ds4 server --mtp {Path(args.dir) / entry.files[0]}")
    else:
        print(f"PRO layer files in {args.dir}/ (docs/distributed.md); ./{LINK_NAME} unchanged")
    return 0


def print_catalog() -> None:
    print(f"{'NAME':<24} {'DISK':>9}  FILES (from {HUB_REPO}; exact sizes at pull time)")
    for e in MODEL_CATALOG:
        main = "  (becomes ./ds4flash.gguf)" if e.main_model else ""
        print(f"{e.name:<24} {f'~{e.approx_gb:g} GB':>9}  {e.about}{main}")
        for name in e.files:
            print(f"{'':<36}{name}")


def pull(hub: ModelHub, name: str, directory: Path, *, progress: bool) -> PullPlan:
    """The whole pull of one catalog name; returns the plan it carried out."""
    entry = catalog_entry(name)
    listing = {f.path: f for f in hub.list_files(HUB_REPO)}
    on_disk = {p: (directory / p).stat().st_size for p in entry.files if (directory / p).is_file()}
    plan = plan_pull(entry, listing, on_disk)
    for path in plan.damaged:
        _say(f"{path}: {on_disk[path]} bytes on disk, the hub has {listing[path].size}; "
             "fetching it again")  # fmt: skip
    bad = tuple(f.path for f in plan.verify if not _verified(directory, f))
    for path in bad:
        _say(f"{path}: damaged (sha256 is not the hub's); fetching it again")
    plan = plan.refetch(bad)
    for f in plan.files:
        if f not in plan.fetch:
            _say(f"{f.path}: already here, verified")
    if not plan.fetch:
        _link(directory, plan.link)
        return plan
    directory.mkdir(parents=True, exist_ok=True)
    resumable = {
        f.path: hub.resumable_bytes(str(directory), f.path)
        for f in plan.fetch
        if f.path not in plan.damaged
    }
    require_space(space_needed(plan, resumable), shutil.disk_usage(directory).free, str(directory))
    for f in plan.fetch:
        held = resumable.get(f.path, 0)
        resume = f", resuming at {gib(held)}" if held else ""
        _say(f"fetching {f.path} ({gib(f.size)}{resume})")
        force = f.path in plan.damaged
        hub.download(HUB_REPO, f.path, str(directory), force=force, progress=progress)
        if not _verified(directory, f):
            _say(f"{f.path}: damaged after download (size or sha256 is not the hub's); "
                 "fetching it again")  # fmt: skip
            hub.download(HUB_REPO, f.path, str(directory), force=True, progress=progress)
            if not _verified(directory, f):
                raise Ds4Error(
                    f"{directory / f.path}: downloaded twice and still not the hub's "
                    "size and sha256; check the disk and the mirror (HF_ENDPOINT)"
                )
    _link(directory, plan.link)
    return plan


def _verified(directory: Path, f: HubFile) -> bool:
    """The file has the hub's size and (when the hub gives one) its sha256. A hash
    once checked is remembered with the file's size and mtime, so a second pull
    does not read 80 GB again."""
    path = directory / f.path
    try:
        info = path.stat()
    except FileNotFoundError:
        return False
    if info.st_size != f.size:
        return False
    if f.sha256 is None:
        return True
    stamp = directory / ".cache" / "ds4" / f"{f.path}.sha256"
    expected = f"{f.sha256} {info.st_size} {info.st_mtime_ns}\n"
    try:
        if stamp.read_text(encoding="ascii") == expected:
            return True
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    _say(f"verifying {f.path} (sha256 of {gib(f.size)})")
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    if digest != f.sha256.lower():
        stamp.unlink(missing_ok=True)
        return False
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(expected, encoding="ascii")
    return True


def _link(directory: Path, file: str | None) -> None:
    """./ds4flash.gguf -> DIR/FILE, replaced atomically (a symlink made under a
    temporary name, renamed over the old one); a regular file there is never replaced."""
    if file is None:
        return
    link = Path(LINK_NAME)
    if link.exists() and not link.is_symlink():
        raise Ds4Error(
            f"./{LINK_NAME} is a regular file, not a link; move it away and run the "
            f"pull again to point it at {directory / file}"
        )
    tmp = Path(f".{LINK_NAME}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(directory / file)
    tmp.replace(link)


def _say(line: str) -> None:
    print(f"ds4 pull: {line}", file=sys.stderr, flush=True)
