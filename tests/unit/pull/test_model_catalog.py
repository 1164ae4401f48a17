"""The pure part of `ds4 pull`: the name table and the plan (domain/model_catalog.py)."""

from __future__ import annotations

import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.model_catalog import (
    HUB_REPO,
    MODEL_CATALOG,
    catalog_entry,
    plan_pull,
    require_space,
    space_needed,
)
from ds4.ports.model_hub import HubFile

# The names of ds4's C project's download_model.sh, with the file each fetches.
UPSTREAM = {
    "q2-imatrix": "DeepSeek-V4-Flash-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix.gguf",
    "q2-q4-imatrix": "DeepSeek-V4-Flash-Layers37-42Q4KExperts-OtherExpertLayersIQ2XXSGateUp"
    "-Q2KDown-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix-fixed.gguf",
    "q4-imatrix": "DeepSeek-V4-Flash-Q4KExperts-F16HC-F16Compressor-F16Indexer-Q8Attn"
    "-Q8Shared-Q8Out-chat-v2-imatrix.gguf",
    "pro-q2-imatrix": "DeepSeek-V4-Pro-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-Instruct-imatrix.gguf",
    "mtp": "DeepSeek-V4-Flash-MTP-Q4K-Q8_0-F32.gguf",
    "pro-q4-layers00-30": "DeepSeek-V4-Pro-Q4K-Layers00-30.gguf",
    "pro-q4-layers31-output": "DeepSeek-V4-Pro-Q4K-Layers-31-output.gguf",
}
MAIN = {"q2-imatrix", "q2-q4-imatrix", "q4-imatrix", "pro-q2-imatrix"}


def test_the_table_has_the_c_projects_names_and_files() -> None:
    assert HUB_REPO == "antirez/deepseek-v4-gguf"
    for name, file in UPSTREAM.items():
        assert catalog_entry(name).files == (file,)
    assert catalog_entry("pro-q4-split").files == (
        UPSTREAM["pro-q4-layers00-30"],
        UPSTREAM["pro-q4-layers31-output"],
    )
    assert len({e.name for e in MODEL_CATALOG}) == len(MODEL_CATALOG)


def test_only_main_models_move_the_link() -> None:
    assert {e.name for e in MODEL_CATALOG if e.main_model} == MAIN
    for entry in MODEL_CATALOG:
        assert entry.main_model == (len(entry.files) == 1 and entry.name in MAIN)


def test_an_unknown_name_is_one_line_naming_the_choices() -> None:
    with pytest.raises(Ds4Error, match=r"unknown model name 'q3'; one of: q2-imatrix, ") as e:
        catalog_entry("q3")
    assert "\n" not in str(e.value)


def _listing(*files: HubFile) -> dict[str, HubFile]:
    return {f.path: f for f in files}


LOW = HubFile(UPSTREAM["pro-q4-layers00-30"], 100, "a" * 64)
HIGH = HubFile(UPSTREAM["pro-q4-layers31-output"], 50, "b" * 64)
Q2 = HubFile(UPSTREAM["q2-imatrix"], 300, "c" * 64)


def test_the_plan_fetches_what_is_missing_or_of_another_size() -> None:
    plan = plan_pull(catalog_entry("pro-q4-split"), _listing(LOW, HIGH, Q2), {LOW.path: 99})
    assert plan.fetch == (LOW, HIGH)
    assert plan.damaged == (LOW.path,)
    assert plan.verify == ()
    assert plan.bytes_to_fetch == 150
    assert plan.link is None


def test_a_file_of_the_right_size_is_verified_then_refetched_when_its_hash_is_wrong() -> None:
    plan = plan_pull(catalog_entry("q2-imatrix"), _listing(LOW, Q2), {Q2.path: 300})
    assert (plan.verify, plan.fetch, plan.link) == ((Q2,), (), Q2.path)
    after = plan.refetch((Q2.path,))
    assert (after.verify, after.fetch, after.damaged) == ((), (Q2,), (Q2.path,))


def test_the_link_is_for_main_models_only() -> None:
    listing = _listing(LOW, HIGH, Q2, HubFile(UPSTREAM["mtp"], 7, None))
    assert plan_pull(catalog_entry("q2-imatrix"), listing, {}).link == Q2.path
    for name in ("mtp", "pro-q4-layers00-30", "pro-q4-layers31-output", "pro-q4-split"):
        assert plan_pull(catalog_entry(name), listing, {}).link is None


def test_a_file_the_hub_lacks_is_named() -> None:
    with pytest.raises(Ds4Error, match="has no file DeepSeek-V4-Flash-IQ2XXS"):
        plan_pull(catalog_entry("q2-imatrix"), _listing(LOW), {})


def test_space_needed_counts_what_resumes_and_the_check_names_both_numbers() -> None:
    plan = plan_pull(catalog_entry("pro-q4-split"), _listing(LOW, HIGH), {})
    assert space_needed(plan, {}) == 150
    assert space_needed(plan, {LOW.path: 60}) == 90
    require_space(90, 90, "gguf")
    with pytest.raises(Ds4Error, match=r"needs 1.00 GiB free, 0.50 GiB is") as e:
        require_space(2**30, 2**29, "gguf")
    assert "\n" not in str(e.value)
