"""Office files in: the one place that opens xlsx/xlsm, csv/tsv, docx, pptx (and a PDF's pages,
through extract.py) for every track, and the consulting paper's input normalisation (xlsx ->
annotated TSV per sheet with its header row, docx/pptx/pdf -> plain text).

The readers live in leaf modules (sheets.py, csvread.py, headers.py, textdocs.py, and the formula
evaluator in xlformula.py/xlcalc.py); this module picks one by extension and turns whatever a
broken file makes the libraries raise into `UnreadableFile`, a user error naming the file.
Every read runs in a worker process under the untrusted-file limits (deskbench/untrusted), after
the cheap checks for its format; a file over a limit raises `FileTooLarge` (an UnreadableFile
that carries the verdict).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar, cast

from deskbench.corpus.csvread import read_csv
from deskbench.corpus.sheets import Sheet, Spreadsheet, read_xlsx, to_tsv
from deskbench.corpus.textdocs import Block, Slide, blocks_text, read_docx, read_pptx, slides_text
from deskbench.errors import UserError
from deskbench.untrusted import FileLimitError, LimitExceeded, call_limited
from deskbench.untrusted.checks import check_office

SPREADSHEET_SUFFIXES = frozenset({".xlsx", ".xlsm", ".csv", ".tsv"})
DOCUMENT_SUFFIXES = frozenset({".docx", ".pptx", ".pdf", ".txt", ".md"})

T = TypeVar("T")


class UnreadableFile(UserError):
    """The file is missing, of a kind we have no reader for, or does not open as its format."""


class FileTooLarge(UnreadableFile, FileLimitError):
    """The file is over one of the untrusted-file limits; `verdict` says which."""

    def __init__(self, verdict: LimitExceeded) -> None:
        FileLimitError.__init__(self, verdict)


def guarded(path: Path, kind: str, read: Callable[[Path], T]) -> T:
    """`read(path)` in a limited worker (read: a module-level function), with any failure of a
    corrupt file reported as UnreadableFile and a limit hit as FileTooLarge."""
    if not path.is_file():
        raise UnreadableFile(f"{path}: no such file")
    try:
        return cast(T, call_limited(_checked_read, path, kind, read, subject=str(path)))
    except FileTooLarge:
        raise
    except FileLimitError as exc:
        raise FileTooLarge(exc.verdict.about(str(path))) from None


def _checked_read(path: Path, kind: str, read: Callable[[Path], T]) -> T:
    """In the worker: the format's cheap checks, then the reader."""
    try:
        check_office(path)
        return read(path)
    except (UnreadableFile, FileLimitError, MemoryError):
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, UnicodeDecodeError) as exc:
        raise UnreadableFile(f"{path}: does not open as {kind} ({type(exc).__name__}: {exc}); "
                             f"re-save it as {kind}") from exc
    except Exception as exc:  # the office libraries raise many kinds on a corrupt file
        raise UnreadableFile(f"{path}: does not open as {kind} ({type(exc).__name__}: {exc}); "
                             f"re-save it as {kind}") from exc


def _unsupported(path: Path) -> UnreadableFile:
    suffix = path.suffix.lower() or "files without an extension"
    hint = "; save it as .xlsx" if suffix == ".xls" else (
        "; save it as .docx" if suffix == ".doc" else ("; save it as .pptx" if suffix == ".ppt" else ""))
    return UnreadableFile(f"{path}: no reader for {suffix}{hint}")


def read_spreadsheet(path: Path) -> Spreadsheet:
    """An xlsx/xlsm workbook (formulas as cached values, else computed) or a csv/tsv file."""
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        return guarded(path, suffix.lstrip("."), read_xlsx)
    if suffix in (".csv", ".tsv"):
        return guarded(path, suffix.lstrip("."), read_csv)
    raise _unsupported(path)


def read_document(path: Path) -> list[Block]:
    """A docx as ordered blocks."""
    return guarded(path, "docx", read_docx)


def read_slides(path: Path) -> list[Slide]:
    """A pptx as slides."""
    return guarded(path, "pptx", read_pptx)


def pdf_text(path: Path) -> str:
    """A PDF's page texts (text layer, OCR where needed), each under a '--- page N ---' line so
    page numbers stay citable."""
    from deskbench.corpus.extract import OcrSettings, extract_pdf

    result = extract_pdf(str(path), OcrSettings())
    if result.error:
        raise UnreadableFile(f"{path}: {result.error}")
    return "\n".join(f"--- page {p.page} ---\n{p.text}" for p in result.pages) + "\n"


def read_text(path: Path) -> str:
    """A text file, undecodable bytes replaced."""
    return path.read_text(encoding="utf-8", errors="replace")


def to_text(path: Path) -> str:
    """docx, pptx, pdf, txt/md as plain text (the consulting paper's DOCX/PPTX -> text)."""
    suffix = path.suffix.lower()
    if suffix == ".docx":
        return blocks_text(read_document(path))
    if suffix == ".pptx":
        return slides_text(read_slides(path))
    if suffix == ".pdf":
        return guarded(path, "pdf", pdf_text)
    if suffix in (".txt", ".md"):
        return guarded(path, "text", read_text)
    raise _unsupported(path)


PartKind = Literal["sheet", "document"]


@dataclass(frozen=True)
class NormalisedPart:
    """One unit of a normalised input: a sheet as annotated TSV, or a whole document as text.

    `name` is the sheet name (or the file name for documents); `header_row` the 1-based header
    row of a sheet (None for documents and sheets without a detectable header)."""

    source: Path
    kind: PartKind
    name: str
    text: str
    header_row: int | None = None
    header_depth: int = 0


def _sheet_part(path: Path, sheet: Sheet) -> NormalisedPart:
    return NormalisedPart(path, "sheet", sheet.name, to_tsv(sheet), sheet.header_row, sheet.header_depth)


def normalise(path: Path) -> list[NormalisedPart]:
    """One part per worksheet of a spreadsheet (chart sheets skipped) or one for a document."""
    suffix = path.suffix.lower()
    if suffix in SPREADSHEET_SUFFIXES:
        book = read_spreadsheet(path)
        return [_sheet_part(path, s) for s in book.sheets if s.kind == "worksheet"]
    if suffix in DOCUMENT_SUFFIXES:
        return [NormalisedPart(path, "document", path.name, to_text(path))]
    raise _unsupported(path)
