"""The one place that writes a benchmark's table into docs/benchmarks.md, between its markers
(<!-- bench:NAME --> ... <!-- /bench:NAME -->). (The tables lived in README.md before; the module
keeps its name so the benchmarks' imports stay one line.)"""

from __future__ import annotations

import sys
from pathlib import Path

TABLES = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def update_table(name: str, header: str, table: str, page: Path = TABLES) -> bool:
    """Replace the block's content with the header line and the table; False (and a note on
    stderr) when the page has no such block."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = page.read_text()
    if begin not in text or end not in text:
        print(f"{page} has no {begin} block; table not written there", file=sys.stderr)
        return False
    head, rest = text.split(begin, 1)
    page.write_text(f"{head}{begin}\n{header}\n\n{table}\n{end}{rest.split(end, 1)[1]}")
    return True
