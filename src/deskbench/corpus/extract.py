"""Page text from one PDF: the text layer, or OCR where the text layer is missing or garbage.

Runs inside worker processes (pdfium is not thread-safe; ingest runs each file under the
untrusted-file limits), so everything here is picklable and free of corpus state: a path in, an
`ExtractResult` out. A MemoryError is never caught here: it is the worker's memory verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Literal, get_args

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from deskbench.corpus.ocr import OCR_DPI, OcrEngine, OcrUnavailable, make_engine
from deskbench.search.analyzer import normalize_text
from deskbench.untrusted.worker import progress

OcrMode = Literal["never", "auto", "always"]
OCR_MODES: tuple[OcrMode, ...] = get_args(OcrMode)

MIN_PRINTABLE_CHARS = 20
"""A text layer with fewer printable characters than this is treated as missing."""

MIN_VECTOR_PATHS = 200
"""Pages drawn as many vector paths (text converted to outlines) are OCR'd like image pages."""


@dataclass
class ExtractedPage:
    page: int
    text: str
    source: Literal["text_layer", "ocr"]
    error: str | None = None


@dataclass
class ExtractResult:
    """What a worker returns: pages, or a one-line reason the whole file failed."""

    path: str
    pages: list[ExtractedPage] = field(default_factory=list)
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OcrSettings:
    mode: OcrMode = "auto"
    engine: str = "auto"
    lang: str = "eng"


_VISIBLE = re.compile(r"[^\s\x00-\x1f\x7f-\x9f\ufffd]")
_NON_SPACE = re.compile(r"\S")
_UNREADABLE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd\ue000-\uf8ff]")


def printable_count(text: str) -> int:
    """Characters a reader would see: not white space, control characters or U+FFFD."""
    return len(_VISIBLE.findall(text))


def has_printable(text: str, n: int) -> bool:
    """At least n printable characters; stops reading once it has seen them."""
    return sum(1 for _ in islice(_VISIBLE.finditer(text), n)) >= n


def is_garbage(text: str) -> bool:
    """A text layer that is present but unreadable: mostly replacement, control or private-use chars."""
    if _UNREADABLE.search(text) is None:
        return False
    return len(_UNREADABLE.findall(text)) / len(_NON_SPACE.findall(text)) > 0.3


def needs_ocr(text: str, n_images: int, n_paths: int) -> bool:
    """MADQA-style rule: OCR a page whose text layer is empty or garbage while it shows something."""
    if is_garbage(text):
        return True
    shows_something = n_images > 0 or n_paths >= MIN_VECTOR_PATHS
    return printable_count(text) < MIN_PRINTABLE_CHARS and shows_something


def describe_open_error(path: Path, exc: Exception) -> str:
    """Turn a pdfium load failure into one line saying what is wrong and what to do."""
    msg = str(exc)
    if "password" in msg.lower():
        return "encrypted PDF (needs a password); decrypt it (e.g. qpdf --decrypt) and ingest again"
    if "format" in msg.lower():
        return "malformed PDF (pdfium: data format error); repair it (e.g. qpdf in.pdf out.pdf) and ingest again"
    if "security" in msg.lower():
        return "PDF uses an unsupported security handler; remove the encryption and ingest again"
    return f"could not open PDF ({msg.strip() or type(exc).__name__})"


def sniff(path: Path) -> str | None:
    """Reject files that cannot be PDFs before pdfium sees them; None means 'looks like a PDF'."""
    try:
        size = path.stat().st_size
        if size == 0:
            return "empty file (0 bytes)"
        with path.open("rb") as fh:
            head = fh.read(1024)
    except OSError as exc:
        return f"unreadable file ({exc.strerror or exc})"
    if b"%PDF-" not in head:
        return "not a PDF (no %PDF- header in the first 1024 bytes)"
    return None


def _count_objects(page: pdfium.PdfPage) -> tuple[int, int]:
    images = paths = 0
    for obj in page.get_objects(max_depth=2):
        if obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE:
            images += 1
        elif obj.type == pdfium_c.FPDF_PAGEOBJ_PATH:
            paths += 1
    return images, paths


def _text_layer(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        # get_text_range keeps word boundaries that get_text_bounded merges in tables ("2,839" + "5").
        return str(textpage.get_text_range()).replace("\r\n", "\n").replace("\r", "\n")
    finally:
        textpage.close()


def _ocr(page: pdfium.PdfPage, engine: OcrEngine) -> str:
    bitmap = page.render(scale=OCR_DPI / 72, grayscale=True)
    try:
        return engine.recognize(bitmap.to_pil())
    finally:
        bitmap.close()


class _LazyEngine:
    """Create the OCR engine only when a page needs it, and remember if it cannot be made."""

    def __init__(self, settings: OcrSettings) -> None:
        self.settings = settings
        self._engine: OcrEngine | None = None
        self.unavailable: str | None = None

    def get(self) -> OcrEngine | None:
        if self._engine is None and self.unavailable is None:
            try:
                self._engine = make_engine(self.settings.engine, self.settings.lang)
            except OcrUnavailable as exc:
                self.unavailable = str(exc)
        return self._engine


_ENGINES: dict[OcrSettings, _LazyEngine] = {}


def extract_pdf(path: str, settings: OcrSettings) -> ExtractResult:
    """Extract every page of one PDF. Never raises for a bad file: the reason goes in `error`."""
    result = ExtractResult(path=path)
    p = Path(path)
    reason = sniff(p)
    if reason:
        result.error = reason
        return result
    try:
        pdf = pdfium.PdfDocument(p)
    except MemoryError:
        raise
    except Exception as exc:  # pdfium raises PdfiumError; anything else is also a bad file
        result.error = describe_open_error(p, exc)
        return result
    engine = _ENGINES.setdefault(settings, _LazyEngine(settings))
    try:
        n_pages = len(pdf)
        if n_pages == 0:
            result.error = "PDF has no pages"
            return result
        for index in range(n_pages):
            page = _extract_page(pdf, index, settings, engine)
            page.text = normalize_text(page.text)
            result.pages.append(page)
            progress()  # the worker's time limit is per page: OCR of a long scan is not cut off
    finally:
        pdf.close()
    if engine.unavailable and any(pg.error and "OCR" in pg.error for pg in result.pages):
        result.warnings.append(engine.unavailable)
    return result


def _extract_page(
    pdf: pdfium.PdfDocument, index: int, settings: OcrSettings, engine: _LazyEngine
) -> ExtractedPage:
    number = index + 1
    try:
        page = pdf[index]
    except MemoryError:
        raise
    except Exception as exc:
        return ExtractedPage(number, "", "text_layer", f"unreadable page ({exc})")
    try:
        layer_error: str | None = None
        try:
            text = _text_layer(page)
        except MemoryError:
            raise
        except Exception as exc:
            text, layer_error = "", f"text layer unreadable ({exc})"
        if settings.mode == "never":
            return ExtractedPage(number, text, "text_layer", layer_error)
        if settings.mode == "auto" and layer_error is None:
            # Counting page objects walks them in Python: only do it when the text is short.
            if has_printable(text, MIN_PRINTABLE_CHARS) and not is_garbage(text):
                return ExtractedPage(number, text, "text_layer", None)
            images, paths = _count_objects(page)
            if not needs_ocr(text, images, paths):
                return ExtractedPage(number, text, "text_layer", None)
        ocr = engine.get()
        if ocr is None:
            return ExtractedPage(number, text, "text_layer", "needs OCR but no OCR engine is available")
        try:
            return ExtractedPage(number, _ocr(page, ocr), "ocr", None)
        except MemoryError:
            raise
        except Exception as exc:
            return ExtractedPage(number, text, "text_layer", f"OCR failed ({exc})")
    finally:
        page.close()
