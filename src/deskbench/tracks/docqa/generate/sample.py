"""A small sample corpus (for the runtime and transcript benchmarks and the lexical agent's
tests): a town's documents, one of them scanned.

Documents form clusters as in MADQA §2.1 (two years of the same annual report), mix running text
and tables, and include an image-only page that only OCR can read.
"""

from __future__ import annotations

from pathlib import Path

from deskbench.generate.pdfs import PageSpec, rasterize_pdf, write_pdf

SAMPLE_QUERIES: tuple[str, ...] = (
    "library renovation",
    '"capital projects" AND 2023',
    "parks NOT 2022",
    "perm*",
    "salmon OR risotto",
    "culvert",  # appears only on the scanned page: found through OCR
    "budget NOT",  # malformed on purpose: shows the error an agent receives
)


def _annual_report(year: int, parks: str, library: str, roads: str, note: str) -> list[PageSpec]:
    return [
        PageSpec(
            title=f"Town of Riverton Annual Report {year}",
            paragraphs=[
                f"This report summarises the finances and operations of the Town of Riverton for "
                f"fiscal year {year}. The council adopted the budget in March {year - 1}.",
                note,
            ],
            footer=f"Riverton Annual Report {year}",
        ),
        PageSpec(
            title="Capital Projects",
            paragraphs=[
                "Capital projects are funded from the capital reserve and state grants. "
                "Amounts are in thousands of dollars."
            ],
            table=[
                ["Project", "Department", "Budget", "Spent"],
                ["Library renovation", "Culture", library, library],
                ["Riverside parks upgrade", "Parks", parks, parks],
                ["Road resurfacing", "Public Works", roads, roads],
            ],
            footer=f"Riverton Annual Report {year}",
        ),
        PageSpec(
            title="Staffing",
            paragraphs=[
                f"At the end of {year} the town employed 214 full-time staff. Overtime in public "
                "works fell after two snow ploughs were replaced."
            ],
            footer=f"Riverton Annual Report {year}",
        ),
    ]


def build_sample_corpus(out: Path) -> list[Path]:
    """Write the sample PDFs into `out` (byte-identical on every run) and return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    files = [
        write_pdf(out / "riverton-annual-report-2022.pdf", _annual_report(
            2022, "310", "1,250", "880",
            "The library renovation started in September; the parks upgrade was postponed.")),
        write_pdf(out / "riverton-annual-report-2023.pdf", _annual_report(
            2023, "640", "420", "910",
            "The library renovation was completed in June and the parks upgrade began.")),
        write_pdf(out / "harbor-bistro-menu.pdf", [PageSpec(
            title="Harbor Bistro - Dinner Menu",
            table=[
                ["Dish", "Description", "Price"],
                ["Cedar-plank salmon", "with fennel and lemon", "$26"],
                ["Wild mushroom risotto", "arborio, parmesan, thyme", "$21"],
                ["Harbor chowder", "clams, potato, bacon", "$12"],
            ],
            footer="Prices include service. Vegetarian dishes are marked in the printed menu.",
        )]),
        write_pdf(out / "building-permit-BP-1043.pdf", [PageSpec(
            title="Building Permit BP-1043",
            table=[
                ["Field", "Value"],
                ["Applicant", "Marta Okafor"],
                ["Address", "18 Mill Lane, Riverton"],
                ["Work", "Rear extension, single storey"],
                ["Permit issued", "2023-04-11"],
                ["Inspector", "J. Lindqvist"],
            ],
            paragraphs=["This permit expires twelve months after issue unless work has started."],
        )]),
    ]
    minutes = write_pdf(out / ".council-minutes-text.pdf", [PageSpec(
        title="Council Minutes - 14 February 2023",
        paragraphs=[
            "Present: Mayor Alvarez and five councillors. The council approved the replacement "
            "of the Hollow Creek culvert at a cost of 185 thousand dollars.",
            "The motion to extend library opening hours was deferred to the March meeting.",
        ],
    )])
    files.append(rasterize_pdf(minutes, out / "council-minutes-2023-02-scan.pdf", dpi=200, noise_seed=7))
    minutes.unlink()
    return files
