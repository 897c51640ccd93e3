"""Page model and reportlab renderers for the generated docqa collection.

A page is a title and a list of blocks (running text, tables with colour-only cells, label:value
forms, checkbox groups, colour legends, two-column articles). Every block can report its height
before drawing, so planted injections are only added where they fit and nothing is ever cut off
(a cut-off fact would silently break an answer). Checkbox states and colour levels are drawn as
graphics only: the text layer never says which box is ticked or what a cell's level is.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reportlab import rl_config
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas

from deskbench.generate.pdfs import scan_image

WIDTH: float
HEIGHT: float
WIDTH, HEIGHT = LETTER  # reportlab is untyped: its page size reads as Any
MARGIN = 60.0
TOP = HEIGHT - MARGIN
BOTTOM = MARGIN + 20.0  # room for the footer
TEXT_W = WIDTH - 2 * MARGIN
SCAN_DPI = 200

COLOURS: dict[str, tuple[float, float, float]] = {
    "green": (0.18, 0.62, 0.31),
    "amber": (0.96, 0.68, 0.16),
    "red": (0.84, 0.21, 0.19),
    "blue": (0.20, 0.40, 0.75),
}


class LayoutOverflow(RuntimeError):
    """A page's blocks do not fit: a generator bug, since dropping content would lose facts."""


@dataclass
class Para:
    text: str
    size: float = 11.0
    hidden: bool = False  # white on white: in the text layer, invisible on the page


@dataclass
class Heading:
    text: str


@dataclass
class Table:
    rows: list[list[str]]
    colours: dict[tuple[int, int], str] = field(default_factory=dict)  # (row, col) -> colour name
    widths: tuple[float, ...] = ()  # relative column widths; equal if empty
    notes: list[str] = field(default_factory=list)  # full-width rows under the table


@dataclass
class Form:
    fields: list[tuple[str, str]]


@dataclass
class CheckGroup:
    label: str
    options: list[str]
    ticked: list[str]


@dataclass
class Legend:
    title: str
    items: list[tuple[str, str]]  # (colour name, level text)


@dataclass
class Columns:
    articles: list[tuple[str, str]]  # (headline, body), flowed into two balanced columns


Block = Para | Heading | Table | Form | CheckGroup | Legend | Columns


@dataclass
class Page:
    title: str
    blocks: list[Block] = field(default_factory=list)
    footer: str = ""
    scanned: bool = False
    noise_seed: int = 0


def wrap(text: str, width: float, font: str = "Helvetica", size: float = 11.0) -> list[str]:
    """Greedy word wrap by real glyph widths (character counts overflow with wide letters)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if line and stringWidth(candidate, font, size) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


ROW_H = 18.0
COL_GAP = 18.0
COL_W = (TEXT_W - COL_GAP) / 2


def _column_lines(articles: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(font, text) lines of all articles, in reading order; '' text marks a gap."""
    out: list[tuple[str, str]] = []
    for head, body in articles:
        out += [("Helvetica-Bold", line) for line in wrap(head, COL_W, "Helvetica-Bold", 11)]
        out += [("Helvetica", line) for line in wrap(body, COL_W, "Helvetica", 10)]
        out.append(("", ""))
    return out


def block_height(block: Block) -> float:
    """Vertical space a block takes, as drawn by `_draw_block`."""
    if isinstance(block, Para):
        return len(wrap(block.text, TEXT_W, size=block.size)) * (block.size + 4) + 8
    if isinstance(block, Heading):
        return 22.0
    if isinstance(block, Table):
        notes = sum(len(wrap(n, TEXT_W - 8, size=9)) * 12 + 8 for n in block.notes)
        return len(block.rows) * ROW_H + notes + 12
    if isinstance(block, Form):
        return len(block.fields) * 20.0 + 8
    if isinstance(block, CheckGroup):
        return 40.0
    if isinstance(block, Legend):
        return 18.0 + len(block.items) * 16 + 8
    lines = _column_lines(block.articles)
    return ((len(lines) + 1) // 2) * 13.0 + 8


def page_fits(page: Page) -> bool:
    return TOP - 30 - sum(block_height(b) for b in page.blocks) >= BOTTOM


def _draw_block(c: canvas.Canvas, block: Block, y: float) -> float:
    if isinstance(block, Para):
        c.setFont("Helvetica", block.size)
        if block.hidden:
            c.setFillColorRGB(1, 1, 1)
        for line in wrap(block.text, TEXT_W, size=block.size):
            c.drawString(MARGIN, y, line)
            y -= block.size + 4
        c.setFillColorRGB(0, 0, 0)
        return y - 8
    if isinstance(block, Heading):
        c.setFont("Helvetica-Bold", 13)
        c.drawString(MARGIN, y, block.text)
        return y - 22
    if isinstance(block, Table):
        return _draw_table(c, block, y)
    if isinstance(block, Form):
        for label, value in block.fields:
            c.setFont("Helvetica-Bold", 10)
            c.drawString(MARGIN, y, f"{label}:")
            c.setFont("Helvetica", 11)
            c.drawString(MARGIN + 150, y, value)
            c.setLineWidth(0.4)
            c.line(MARGIN + 146, y - 4, WIDTH - MARGIN, y - 4)
            y -= 20
        return y - 8
    if isinstance(block, CheckGroup):
        c.setFont("Helvetica-Bold", 10)
        c.drawString(MARGIN, y, block.label)
        x, yy = MARGIN + 4, y - 18
        for option in block.options:
            c.setLineWidth(0.8)
            c.rect(x, yy - 2, 10, 10, stroke=1, fill=0)
            if option in block.ticked:  # a drawn tick: two strokes, no glyph in the text layer
                c.setLineWidth(1.6)
                c.line(x + 2, yy + 3, x + 4.5, yy)
                c.line(x + 4.5, yy, x + 9, yy + 8)
            c.setFont("Helvetica", 10)
            c.drawString(x + 15, yy, option)
            x += 30 + stringWidth(option, "Helvetica", 10)
        return y - 40
    if isinstance(block, Legend):
        c.setFont("Helvetica-Bold", 10)
        c.drawString(MARGIN, y, block.title)
        y -= 18
        for colour, text in block.items:
            c.setFillColorRGB(*COLOURS[colour])
            c.rect(MARGIN + 4, y - 3, 22, 11, stroke=0, fill=1)
            c.setFillColorRGB(0, 0, 0)
            c.setFont("Helvetica", 10)
            c.drawString(MARGIN + 34, y, text)
            y -= 16
        return y - 8
    return _draw_columns(c, block, y)


def _draw_table(c: canvas.Canvas, table: Table, y: float) -> float:
    ncols = max(len(r) for r in table.rows)
    rel = table.widths or tuple(1.0 for _ in range(ncols))
    total = sum(rel)
    xs = [MARGIN]
    for w in rel:
        xs.append(xs[-1] + TEXT_W * w / total)
    top = y + 13
    for r, row in enumerate(table.rows):
        if r == 0:
            c.setFillColorRGB(0.88, 0.88, 0.88)
            c.rect(MARGIN, y - 5, TEXT_W, ROW_H, stroke=0, fill=1)
            c.setFillColorRGB(0, 0, 0)
        for i, cell in enumerate(row):
            colour = table.colours.get((r, i))
            if colour:  # the value is the colour alone: no text in the cell
                c.setFillColorRGB(*COLOURS[colour])
                c.rect(xs[i] + 3, y - 3, xs[i + 1] - xs[i] - 6, ROW_H - 4, stroke=0, fill=1)
                c.setFillColorRGB(0, 0, 0)
            elif cell:
                c.setFont("Helvetica-Bold" if r == 0 else "Helvetica", 9 if r == 0 else 10)
                c.drawString(xs[i] + 4, y, cell)
        c.setLineWidth(0.4)
        c.line(MARGIN, y - 5, WIDTH - MARGIN, y - 5)
        y -= ROW_H
    for x in xs:
        c.line(x, top, x, y + ROW_H - 5)
    c.line(MARGIN, top, WIDTH - MARGIN, top)
    for note in table.notes:
        lines = wrap(note, TEXT_W - 8, size=9)
        h = len(lines) * 12 + 8
        c.rect(MARGIN, y + ROW_H - 5 - h, TEXT_W, h, stroke=1, fill=0)
        c.setFont("Helvetica", 9)
        yy = y + ROW_H - 5 - 13
        for line in lines:
            c.drawString(MARGIN + 4, yy, line)
            yy -= 12
        y -= h
    return y - 12


def _draw_columns(c: canvas.Canvas, block: Columns, y: float) -> float:
    lines = _column_lines(block.articles)
    half = (len(lines) + 1) // 2
    for col, chunk in enumerate((lines[:half], lines[half:])):
        x, yy = MARGIN + col * (COL_W + COL_GAP), y
        for font, text in chunk:
            if text:
                c.setFont(font, 11 if font.endswith("Bold") else 10)
                c.drawString(x, yy, text)
            yy -= 13
    c.setLineWidth(0.3)
    c.line(MARGIN + COL_W + COL_GAP / 2, y + 10, MARGIN + COL_W + COL_GAP / 2, y - half * 13 + 6)
    return y - half * 13 - 8


def draw_page(c: canvas.Canvas, page: Page) -> None:
    """Draw one page as vector text and graphics; raise LayoutOverflow rather than cut content."""
    if not page_fits(page):
        raise LayoutOverflow(f"page {page.title!r} does not fit")
    c.setFont("Helvetica-Bold", 16)
    c.drawString(MARGIN, TOP, page.title)
    y = TOP - 30
    for block in page.blocks:
        y = _draw_block(c, block, y)
    if page.footer:
        c.setFont("Helvetica-Oblique", 8)
        c.drawString(MARGIN, MARGIN / 2, page.footer)


def _scanned_png(page: Page) -> bytes:
    """The page drawn alone, rendered to a noisy greyscale image (what a scanner produces)."""
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=LETTER, invariant=1, pageCompression=1)
    draw_page(c, page)
    c.showPage()
    c.save()
    image = scan_image(buf.getvalue(), 0, dpi=SCAN_DPI, noise_seed=page.noise_seed)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def render_document(path: Path, title: str, pages: Sequence[Page],
                    on_page: Callable[[], None] | None = None) -> Path:
    """Write one PDF; scanned pages become images with no text layer. Byte-identical per input.

    Streams are written binary (no ASCII85): reportlab's pure-Python ASCII85 encoder was a third
    of the generator's time on scanned pages. The setting is restored afterwards.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = rl_config.useA85
    rl_config.useA85 = 0
    try:
        c = canvas.Canvas(str(path), pagesize=LETTER, invariant=1, pageCompression=1)
        c.setTitle(title)
        c.setAuthor("deskbench")
        for page in pages:
            if page.scanned:
                png = _scanned_png(page)
                c.drawImage(ImageReader(io.BytesIO(png)), 0, 0, width=WIDTH, height=HEIGHT)
            else:
                draw_page(c, page)
            c.showPage()
            if on_page:
                on_page()
        c.save()
    finally:
        rl_config.useA85 = saved
    return path
