"""The one place that writes a benchmark's table into README.md, between its markers
(<!-- bench:NAME --> ... <!-- /bench:NAME -->)."""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def update_readme(name: str, header: str, table: str, readme: Path = README) -> bool:
    """Replace the block's content with the header line and the table; False (and a note on
    stderr) when the README has no such block."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = readme.read_text()
    if begin not in text or end not in text:
        print(f"{readme} has no {begin} block; table not written there", file=sys.stderr)
        return False
    head, rest = text.split(begin, 1)
    readme.write_text(f"{head}{begin}\n{header}\n\n{table}\n{end}{rest.split(end, 1)[1]}")
    return True
