"""Read a produced deliverable (markdown, docx, xlsx, pptx, json) into one shape for verifiers.

Every format becomes an ordered list of blocks (headings with a level, and text lines; a table
row is one line with cells joined by " | " so a label and its figure stay on one line) plus the
format's own sections: docx/markdown headings, xlsx sheet names, pptx slide titles, JSON keys.
Opening docx/pptx/xlsx is corpus/office.py's job (one reader for inputs and outputs); this module
only shapes what it reads for verifiers. `read_output` reads in a limited worker process (guarded:
a file over a limit raises FileTooLarge, which the verifiers report as unobservable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openpyxl.workbook.workbook import Workbook

from deskbench.corpus.office import UnreadableFile, guarded
from deskbench.corpus.sheets import load_values
from deskbench.corpus.textdocs import Block, read_docx, read_pptx
from deskbench.untrusted.limits import FileLimitError, LimitExceeded, current_limits

__all__ = ["Block", "Document", "UnreadableFile", "json_at", "markdown_document", "read_output", "xlsx_cell"]


@dataclass
class Document:
    """A deliverable as verifiers see it."""

    blocks: list[Block]
    sections: list[str]
    workbook: Workbook | None = None
    data: Any = None  # parsed JSON
    raw: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks)

    @property
    def headings(self) -> list[Block]:
        return [b for b in self.blocks if b.level > 0]

    def section_text(self, title: str) -> str | None:
        """Body text under the first heading containing `title` (case-insensitive), up to the
        next heading of the same or a higher level; None if no such heading."""
        wanted = title.casefold()
        for i, block in enumerate(self.blocks):
            if block.level > 0 and wanted in block.text.casefold():
                body: list[str] = []
                for nxt in self.blocks[i + 1 :]:
                    if 0 < nxt.level <= block.level:
                        break
                    body.append(nxt.text)
                return "\n".join(body)
        return None


_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_BOLD_LINE = re.compile(r"^\s*\*\*(.+?)\*\*\s*:?\s*$")


def markdown_document(text: str) -> Document:
    """Markdown: `#` headings (and a line that is wholly bold, read as a level-3 heading)."""
    blocks: list[Block] = []
    for line in text.splitlines():
        m = _MD_HEADING.match(line)
        if m:
            blocks.append(Block(m.group(2).strip(), len(m.group(1))))
            continue
        b = _MD_BOLD_LINE.match(line)
        if b:
            blocks.append(Block(b.group(1).strip(), 3))
        elif line.strip():
            row = line.strip()
            if row.startswith("|"):
                cells = [c.strip() for c in row.strip("|").split("|")]
                if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
                    continue
                row = " | ".join(cells)
            blocks.append(Block(row))
    return Document(blocks=blocks, sections=[b.text for b in blocks if b.level], raw=text)


def _docx(path: Path) -> Document:
    blocks = read_docx(path)
    return Document(blocks=blocks, sections=[b.text for b in blocks if b.level])


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _xlsx(path: Path) -> Document:
    """Cached values, and computed ones for formula cells saved without (openpyxl's outputs)."""
    wb, _ = load_values(path)
    blocks: list[Block] = []
    cap = current_limits().cells
    dense = sum(ws.max_row * ws.max_column for ws in wb.worksheets)
    if dense > cap:  # iter_rows walks the grid up to the last cell: one at XFD1048576 is 17 billion
        raise FileLimitError(LimitExceeded(what="cells", limit=cap, observed=dense))
    for ws in wb.worksheets:
        blocks.append(Block(ws.title, 1))
        for row in ws.iter_rows(values_only=True):
            cells = [_cell_text(v) for v in row]
            while cells and not cells[-1]:
                cells.pop()
            if any(cells):
                blocks.append(Block(" | ".join(cells)))
    return Document(blocks=blocks, sections=list(wb.sheetnames), workbook=wb)


def _pptx(path: Path) -> Document:
    blocks: list[Block] = []
    titles: list[str] = []
    for slide in read_pptx(path):
        titles.append(slide.title)
        if slide.title:
            blocks.append(Block(slide.title, 1))
        blocks.extend(slide.blocks)
    return Document(blocks=blocks, sections=titles)


def _json(path: Path) -> Document:
    raw = path.read_text(encoding="utf-8")
    data = json.loads(raw)
    keys = list(data) if isinstance(data, dict) else []
    return Document(blocks=[Block(line) for line in raw.splitlines() if line.strip()],
                    sections=keys, data=data, raw=raw)


def _text(path: Path) -> Document:
    return markdown_document(path.read_text(encoding="utf-8", errors="replace"))


READERS: dict[str, Callable[[Path], Document]] = {
    ".docx": _docx,
    ".xlsx": _xlsx,
    ".pptx": _pptx,
    ".json": _json,
    ".md": _text,
    ".txt": _text,
    ".csv": _text,
}


def read_output(path: Path) -> Document:
    """`path` read by its extension's reader; UnreadableFile when it does not open."""
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise UnreadableFile(f"no reader for {path.suffix or 'files without an extension'}")
    return guarded(path, path.suffix.lower().lstrip("."), reader)


def xlsx_cell(wb: Workbook, ref: str) -> tuple[Any, str] | None:
    """The value at "Sheet!B3" and a description; None if the sheet is absent."""
    sheet, _, coord = ref.rpartition("!")
    sheet = sheet.strip("'")
    if sheet not in wb.sheetnames:
        return None
    return wb[sheet][coord].value, f"{sheet}!{coord}"


def json_at(data: Any, dotted: str) -> tuple[bool, Any]:
    """(found, value) at a dotted path ("annual_metrics.absolute_savings", "rows.0.name")."""
    node = data
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node
