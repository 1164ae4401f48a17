"""The sources table: where the public data sets the readers understand come from and
under what terms (docs/eval.md "Sources"). A case file can add rows of its own
(`"record": "source"` lines); those win over these."""

from __future__ import annotations

from ds4.domain.eval.cases import SourceInfo

KNOWN_SOURCES: tuple[SourceInfo, ...] = (
    SourceInfo(
        "GPQA",
        "CC BY 4.0",
        "https://github.com/idavidrein/gpqa",
        "graduate-level physics, chemistry and biology; multiple choice with 4 choices",
    ),
    SourceInfo(
        "GPQA Diamond",
        "CC BY 4.0",
        "https://github.com/idavidrein/gpqa",
        "the GPQA subset most experts answer right and most non-experts wrong",
    ),
    SourceInfo(
        "SuperGPQA",
        "ODC-BY",
        "https://huggingface.co/datasets/m-a-p/SuperGPQA",
        "broad professional knowledge; multiple choice with up to 10 choices",
    ),
    SourceInfo(
        "AIME",
        "MIT (mirror)",
        "https://huggingface.co/datasets/opencompass/AIME2025",
        "American Invitational Mathematics Examination problems; integer answers 0..999",
    ),
    SourceInfo(
        "MMLU-Pro",
        "MIT",
        "https://huggingface.co/datasets/TIGER-Lab/MMLU-Pro",
        "multi-discipline multiple choice with up to 10 choices",
    ),
)


def source_table(declared: dict[str, SourceInfo]) -> dict[str, SourceInfo]:
    """The known rows, overridden and extended by a case set's own."""
    table = {info.name: info for info in KNOWN_SOURCES}
    table.update(declared)
    return table
