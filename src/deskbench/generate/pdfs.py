"""Small building blocks for generated PDFs: text pages and 'scanned' (image-only) pages.

Output is byte-identical for the same input (reportlab's invariant mode), so generated corpora
and their content hashes are reproducible.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image, ImageFilter
from reportlab.lib.pagesizes import LETTER
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

MARGIN = 72


@dataclass
class PageSpec:
    """One page: a title, paragraphs of running text and an optional table."""

    title: str
    paragraphs: Sequence[str] = ()
    table: Sequence[Sequence[str]] = ()
    footer: str = ""
    extra: dict[str, str] = field(default_factory=dict)


def _wrap(text: str, width_chars: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if len(line) + len(word) + 1 > width_chars and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return lines


def draw_page(c: canvas.Canvas, spec: PageSpec) -> None:
    width, height = LETTER
    y = height - MARGIN
    c.setFont("Helvetica-Bold", 16)
    c.drawString(MARGIN, y, spec.title)
    y -= 28
    c.setFont("Helvetica", 11)
    for para in spec.paragraphs:
        for line in _wrap(para, 88):
            if y < MARGIN + 40:
                break
            c.drawString(MARGIN, y, line)
            y -= 15
        y -= 8
    if spec.table:
        ncols = max(len(r) for r in spec.table)
        col_w = (width - 2 * MARGIN) / ncols
        for r, row in enumerate(spec.table):
            if y < MARGIN + 40:
                break
            c.setFont("Helvetica-Bold" if r == 0 else "Helvetica", 10)
            for i, cell in enumerate(row):
                c.drawString(MARGIN + i * col_w + 4, y, cell)
            c.line(MARGIN, y - 4, width - MARGIN, y - 4)
            y -= 18
    if spec.footer:
        c.setFont("Helvetica-Oblique", 8)
        c.drawString(MARGIN, MARGIN / 2, spec.footer)
    c.showPage()


def write_pdf(path: Path, pages: Sequence[PageSpec], title: str = "") -> Path:
    """Write a text-layer PDF; the same pages always give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    c = canvas.Canvas(str(path), pagesize=LETTER, invariant=1, pageCompression=1)
    c.setTitle(title or path.stem)
    c.setAuthor("deskbench")
    for spec in pages:
        draw_page(c, spec)
    c.save()
    return path


def rasterize_pdf(src: Path, dst: Path, dpi: int = 200, noise_seed: int | None = None) -> Path:
    """Render every page of `src` to an image and wrap the images in a new PDF with no text layer.

    This is what a scanner produces: only OCR can read the result. With `noise_seed`, speckle
    and a slight blur make it look scanned, deterministically.
    """
    pdf = pdfium.PdfDocument(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    c = canvas.Canvas(str(dst), pagesize=LETTER, invariant=1)
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            width, height = page.get_size()
            image = page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")
            page.close()
            if noise_seed is not None:
                image = _speckle(image, random.Random(noise_seed + index))
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            c.setPageSize((width, height))
            c.drawImage(ImageReader(io.BytesIO(buf.getvalue())), 0, 0, width=width, height=height)
            c.showPage()
    finally:
        pdf.close()
    c.save()
    return dst


def _speckle(image: Image.Image, rng: random.Random) -> Image.Image:
    image = image.filter(ImageFilter.GaussianBlur(radius=0.6))
    px = image.load()
    assert px is not None
    for _ in range(image.width * image.height // 400):
        x, y = rng.randrange(image.width), rng.randrange(image.height)
        px[x, y] = rng.choice((0, 96, 255))
    return image


def scan_image(pdf: bytes | Path, index: int = 0, dpi: int = 200, noise_seed: int | None = None) -> Image.Image:
    """One page of a PDF as a greyscale 'scan' (speckle and blur with `noise_seed`).

    Used to build documents where only some pages are scanned: the caller draws the image in
    place of the page, so only OCR can read that page.
    """
    doc = pdfium.PdfDocument(pdf)
    try:
        page = doc[index]
        image: Image.Image = page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")
        page.close()
    finally:
        doc.close()
    if noise_seed is not None:
        image = _speckle(image, random.Random(noise_seed))
    return image
