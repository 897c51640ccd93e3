"""Cheap checks made before a parser sees an untrusted file: they read the zip directory and
stream the XML once counting elements (bounded memory, stopping at the limit), so a bomb is
refused in a second with a verdict naming the count instead of being parsed until a cap stops it.

A check raises FileLimitError; `OFFICE_CHECKS` picks the check by file suffix.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from deskbench.untrusted.limits import (
    MB,
    FileLimitError,
    FileLimits,
    LimitExceeded,
    LimitName,
    current_limits,
)

RATIO_FLOOR = 8 * MB
"""A member is judged by its compression ratio only when it inflates past this: small parts of
real files compress 100x and more (styles, empty sheets)."""

_CELL = re.compile(rb"<(?:\w+:)?c[\s>/]")
_PARAGRAPH = re.compile(rb"<(?:\w+:)?p[\s>/]")
_TABLE_ROW = re.compile(rb"<(?:\w+:)?tr[\s>/]")
_SLIDE = re.compile(r"ppt/slides/slide\d+\.xml$")


def _over(what: LimitName, limit: float, observed: float, subject: str, detail: str = "") -> FileLimitError:
    return FileLimitError(LimitExceeded(what=what, limit=limit, observed=observed,
                                        subject=subject, detail=detail))


def check_zip(path: Path, limits: FileLimits | None = None) -> zipfile.ZipFile:
    """The zip opened after its directory passed: member count, total inflated size and each
    large member's inflation ratio. Not a zip: zipfile's own error (the reader reports it)."""
    limits = limits or current_limits()
    zf = zipfile.ZipFile(path)
    try:
        infos = zf.infolist()
        if len(infos) > limits.zip_members:
            raise _over("zip_members", limits.zip_members, len(infos), str(path))
        total = sum(i.file_size for i in infos)
        if total > limits.zip_inflated_mb * MB:
            raise _over("zip_inflated", limits.zip_inflated_mb, round(total / MB), str(path))
        for info in infos:
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > RATIO_FLOOR and ratio > limits.zip_ratio:
                raise _over("zip_ratio", limits.zip_ratio, round(ratio), str(path), info.filename)
    except BaseException:
        zf.close()
        raise
    return zf


def count_elements(zf: zipfile.ZipFile, names: list[str], patterns: list[re.Pattern[bytes]],
                   stop: int) -> tuple[int, str]:
    """Occurrences of `patterns` in the members `names`, streamed, and "" or "at least " when it
    stopped past `stop` with more left to read (the count is then a lower bound). The inflated
    stream is read as it comes (zipfile checks sizes and CRC): one pass of decompression, no tree."""
    count = 0
    for i, name in enumerate(names):
        with zf.open(name) as fh:
            tail = b""
            while chunk := fh.read(1 << 20):
                data = tail + chunk
                cut = data.rfind(b"<")
                cut = len(data) if cut < 0 or len(data) - cut > 64 else cut
                body, tail = data[:cut], data[cut:]
                count += sum(len(p.findall(body)) for p in patterns)
                if count > stop:
                    if fh.read(1) or i < len(names) - 1:
                        return count, "at least "
                    return count + sum(len(p.findall(tail)) for p in patterns), ""
            count += sum(len(p.findall(tail)) for p in patterns)
    return count, ""


def _worksheets(zf: zipfile.ZipFile) -> list[str]:
    return [n for n in zf.namelist() if n.startswith("xl/worksheets/") and n.endswith(".xml")]


def check_xlsx(path: Path, limits: FileLimits | None = None) -> None:
    """A workbook's cells (every worksheet) against the cell limit."""
    limits = limits or current_limits()
    with check_zip(path, limits) as zf:
        try:
            cells, bound = count_elements(zf, _worksheets(zf), [_CELL], limits.cells)
        except (zlib.error, zipfile.BadZipFile, EOFError):
            return  # a broken stream: the reader reports it in its own words
    if cells > limits.cells:
        raise _over("cells", limits.cells, cells, str(path), bound)


def check_docx(path: Path, limits: FileLimits | None = None) -> None:
    """A document's paragraphs and table rows (body, headers, footers, notes) against the limit."""
    limits = limits or current_limits()
    with check_zip(path, limits) as zf:
        _check_paragraphs(zf, "word/", path, limits)


def check_pptx(path: Path, limits: FileLimits | None = None) -> None:
    """A presentation's slides, and the paragraphs on them, against the limits."""
    limits = limits or current_limits()
    with check_zip(path, limits) as zf:
        slides = [n for n in zf.namelist() if _SLIDE.match(n)]
        if len(slides) > limits.slides:
            raise _over("slides", limits.slides, len(slides), str(path))
        _check_paragraphs(zf, "ppt/", path, limits)


def _check_paragraphs(zf: zipfile.ZipFile, folder: str, path: Path, limits: FileLimits) -> None:
    """The paragraphs and table rows of the XML parts under `folder` against the limit (a part
    that does not inflate is left to the parser, which says so)."""
    parts = [n for n in zf.namelist() if n.startswith(folder) and n.endswith(".xml")]
    try:
        found, bound = count_elements(zf, parts, [_PARAGRAPH, _TABLE_ROW], limits.paragraphs)
    except (zlib.error, zipfile.BadZipFile, EOFError):
        return
    if found > limits.paragraphs:
        raise _over("paragraphs", limits.paragraphs, found, str(path), bound)


OFFICE_CHECKS: dict[str, Callable[[Path, FileLimits | None], None]] = {
    ".xlsx": check_xlsx,
    ".xlsm": check_xlsx,
    ".docx": check_docx,
    ".pptx": check_pptx,
}


def check_office(path: Path, limits: FileLimits | None = None) -> None:
    """The check for `path`'s suffix; nothing for other files."""
    check = OFFICE_CHECKS.get(path.suffix.lower())
    if check is not None:
        check(path, limits)


def page_pixels(width_pt: float, height_pt: float, dpi: float) -> float:
    """Pixels of a page rendered at `dpi` (72 points to the inch)."""
    return width_pt * height_pt * (dpi / 72) ** 2


def check_page_pixels(width_pt: float, height_pt: float, dpi: float, subject: str,
                      limits: FileLimits | None = None) -> None:
    """Refuse a render whose bitmap would pass the page-image limit (a 14,400 pt page at 110 dpi
    is 484 megapixels: ~2 GB of bitmap before encoding)."""
    limits = limits or current_limits()
    pixels = page_pixels(width_pt, height_pt, dpi)
    if pixels > limits.page_megapixels * 1e6:
        w, h = round(width_pt * dpi / 72), round(height_pt * dpi / 72)
        raise _over("page_pixels", limits.page_megapixels, round(pixels / 1e6), subject,
                    f"{width_pt:,.0f} x {height_pt:,.0f} pt at {dpi:g} dpi is {w:,} x {h:,} px, "
                    f"{pixels / 1e6:,.0f} megapixels")
