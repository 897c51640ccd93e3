"""docx and pptx as ordered text: `Block`s (headings with a level, paragraphs, table rows) and
`Slide`s (title, body blocks, speaker notes), and their plain-text rendering.

Deliverable verifiers (tracks/deliverables/scoring/office.py) and input normalisation (office.py) both read through
here, so a document reads the same whether it is a task's input or an agent's output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Block:
    """A heading (level 1..), a paragraph (level 0) or a table row (`cells` set; `text` is the
    cells joined by " | " so a label and its figure stay on one line)."""

    text: str
    level: int = 0
    cells: tuple[str, ...] = ()


@dataclass
class Slide:
    number: int  # 1-based
    title: str
    blocks: list[Block] = field(default_factory=list)
    notes: str = ""


def table_row(cells: list[str]) -> Block:
    return Block(" | ".join(cells), 0, tuple(cells))


def _docx_level(style_name: str) -> int:
    m = re.match(r"Heading (\d)", style_name)
    return int(m.group(1)) if m else (1 if style_name == "Title" else 0)


def _docx_row_cells(row: Any) -> list[str]:
    """A table row's cells, a horizontally merged cell once (python-docx repeats it)."""
    cells: list[str] = []
    seen: list[Any] = []
    for cell in row.cells:
        if any(cell._tc is tc for tc in seen):  # noqa: SLF001 - merged cells share one <w:tc>
            continue
        seen.append(cell._tc)  # noqa: SLF001
        cells.append(cell.text.strip())
    return cells


def _paragraph_styles(doc: Any) -> tuple[dict[str, str], str]:
    """Paragraph style id -> name, and the default paragraph style's name: python-docx's
    `paragraph.style` searches the styles part with XPath on every call (40k paragraphs: 6 s)."""
    from docx.enum.style import WD_STYLE_TYPE

    names: dict[str, str] = {}
    default = ""
    for style in doc.styles:
        if style.type == WD_STYLE_TYPE.PARAGRAPH:
            names[style.style_id] = style.name or ""
            if style.element.default:
                default = style.name or ""
    return names, default


def read_docx(path: Path) -> list[Block]:
    """Paragraphs (with heading levels from the Heading N / Title styles) and table rows, in
    document order; empty paragraphs dropped."""
    from docx import Document as open_docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    doc = open_docx(str(path))
    styles, default = _paragraph_styles(doc)
    blocks: list[Block] = []
    for child in doc.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            text = Paragraph(child, doc).text.strip()
            if text:
                style_id = child.style  # the w:pStyle value; an unknown id reads as the default
                blocks.append(Block(text, _docx_level(styles.get(style_id, default) if style_id else default)))
        elif tag == "tbl":
            blocks.extend(table_row(_docx_row_cells(row)) for row in Table(child, doc).rows)
    return blocks


def _shapes(shapes: Any) -> Iterator[Any]:
    """Shapes in document order, descending into groups."""
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _slide_blocks(slide: Any, title_shape: Any) -> list[Block]:
    blocks: list[Block] = []
    for shape in _shapes(slide.shapes):
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        if shape.has_text_frame:
            blocks.extend(Block(line.strip()) for line in shape.text_frame.text.splitlines() if line.strip())
        if getattr(shape, "has_table", False) and shape.has_table:
            blocks.extend(table_row([c.text.strip() for c in row.cells]) for row in shape.table.rows)
    return blocks


def read_pptx(path: Path) -> list[Slide]:
    """Every slide: title (from the title placeholder, "" if none), text and table rows of the
    other shapes in order, and the speaker notes."""
    from pptx import Presentation

    slides: list[Slide] = []
    for number, slide in enumerate(Presentation(str(path)).slides, start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        notes = slide.notes_slide.notes_text_frame.text.strip() if slide.has_notes_slide and \
            slide.notes_slide.notes_text_frame is not None else ""
        slides.append(Slide(number, title, _slide_blocks(slide, title_shape), notes))
    return slides


def blocks_text(blocks: list[Block]) -> str:
    """Plain text: headings marked with '#' by level (the one structure worth keeping), table
    rows as cells joined by " | "."""
    return "\n".join(("#" * b.level + " " + b.text) if b.level else b.text for b in blocks) + "\n"


def slides_text(slides: list[Slide]) -> str:
    """Plain text, one section per slide: '# Slide N: title', body lines, 'Notes: ...'."""
    parts: list[str] = []
    for s in slides:
        lines = [f"# Slide {s.number}: {s.title}" if s.title else f"# Slide {s.number}"]
        lines += [b.text for b in s.blocks]
        if s.notes:
            lines.append("Notes: " + " ".join(s.notes.split()))
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
