"""Hostile files for the fault suite (issue 22), generated at test time and small on disk.

Office bombs are written part by part with zipfile (deflate shrinks millions of identical rows
or paragraphs to a few hundred KB); PDFs are written object by object with a correct xref so
pdfium opens them without repair. tests/runs/test_hostile_files.py and
benchmarks/bench_hostile_files.py share these.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

_CONTENT_TYPES_XLSX = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    "</Types>")
_ROOT_RELS_XLSX = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="xl/workbook.xml"/></Relationships>')
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets></sheets></workbook>')
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"></Relationships>')
_SHEET_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
               '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>')
_SHEET_TAIL = "</sheetData></worksheet>"


def _xlsx(path: Path, rows: list[str] | None = None, *, n_rows: int = 0, per_sheet: int = 1_000_000) -> Path:
    """A workbook whose one sheet's XML is `rows` (row elements) or, streamed, `n_rows` rows of
    one number each over as many sheets of `per_sheet` rows as it takes (Excel's sheets end at
    1,048,576 rows)."""
    counts = [len(rows or [])] if rows is not None else [
        min(per_sheet, n_rows - i) for i in range(0, max(n_rows, 1), per_sheet)]
    names = [f"Sheet{i}" for i in range(1, len(counts) + 1)]
    types = "".join(f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="application/'
                    f'vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>' for i in range(1, len(names) + 1))
    sheets = "".join(f'<sheet name="{n}" sheetId="{i}" r:id="rId{i}"/>' for i, n in enumerate(names, start=1))
    rels = "".join(f'<Relationship Id="rId{i}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                   f'relationships/worksheet" Target="worksheets/sheet{i}.xml"/>' for i in range(1, len(names) + 1))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES_XLSX.replace("</Types>", types + "</Types>"))
        zf.writestr("_rels/.rels", _ROOT_RELS_XLSX)
        zf.writestr("xl/workbook.xml", _WORKBOOK.replace("<sheets></sheets>", f"<sheets>{sheets}</sheets>"))
        zf.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS.replace("</Relationships>", rels + "</Relationships>"))
        for i, count in enumerate(counts, start=1):
            with zf.open(f"xl/worksheets/sheet{i}.xml", "w", force_zip64=True) as fh:
                fh.write(_SHEET_HEAD.encode())
                if rows is not None:
                    fh.write("".join(rows).encode())
                else:
                    row = b"<row><c><v>1</v></c></row>"  # no r= attributes: readers count rows and cells
                    left = count
                    while left:
                        n = min(left, 100_000)
                        fh.write(row * n)
                        left -= n
                fh.write(_SHEET_TAIL.encode())
    return path


def xlsx_whole_sheet_sum(path: Path) -> Path:
    """The issue's 4.9 KB probe: a header, a formula over every cell below it (A3:XFD1048576,
    17 billion cells) saved without a cached value, and a few numbers."""
    rows = ['<row r="1"><c r="A1" t="inlineStr"><is><t>total</t></is></c></row>',
            '<row r="2"><c r="A2"><f>SUM(A3:XFD1048576)</f></c></row>']
    rows += [f'<row r="{r}"><c r="A{r}"><v>{r}</v></c></row>' for r in range(3, 8)]
    return _xlsx(path, rows)


def xlsx_small_total(path: Path) -> Path:
    """A reference for the formula probe: the header and the right total as a number."""
    rows = ['<row r="1"><c r="A1" t="inlineStr"><is><t>total</t></is></c></row>',
            '<row r="2"><c r="A2"><v>25</v></c></row>']
    rows += [f'<row r="{r}"><c r="A{r}"><v>{r}</v></c></row>' for r in range(3, 8)]
    return _xlsx(path, rows)


def xlsx_rows_bomb(path: Path, n_rows: int = 3_000_000) -> Path:
    """A workbook of `n_rows` one-cell rows, 1M a sheet (3M rows: ~200 KB on disk, ~80 MB of XML)."""
    return _xlsx(path, n_rows=n_rows)


_CONTENT_TYPES_DOCX = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>")
_ROOT_RELS_DOCX = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="word/document.xml"/></Relationships>')
_DOC_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
             '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')
_DOC_TAIL = "</w:body></w:document>"


def docx_paragraphs(path: Path, n_paragraphs: int, *, styled: bool = False) -> Path:
    """A docx of `n_paragraphs` one-letter paragraphs (3M: ~300 KB on disk, ~100 MB of XML).
    `styled`: inside python-docx's own blank document (a 350 KB styles part, as Word's files
    carry), where looking up each paragraph's style is what costs (40k: ~40 KB on disk)."""
    para = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        if styled:
            import io

            import docx

            blank = io.BytesIO()
            docx.Document().save(blank)
            with zipfile.ZipFile(blank) as template:
                for info in template.infolist():
                    if info.filename != "word/document.xml":
                        zf.writestr(info.filename, template.read(info))
        else:
            zf.writestr("[Content_Types].xml", _CONTENT_TYPES_DOCX)
            zf.writestr("_rels/.rels", _ROOT_RELS_DOCX)
        with zf.open("word/document.xml", "w", force_zip64=True) as fh:
            fh.write(_DOC_HEAD.encode())
            left = n_paragraphs
            while left:
                n = min(left, 100_000)
                fh.write(para * n)
                left -= n
            fh.write(_DOC_TAIL.encode())
    return path


def _pdf(path: Path, media_box: tuple[float, float], content: bytes, *, deflate: bool = False) -> Path:
    """A one-page PDF with `content` as its content stream (optionally FlateDecode'd)."""
    stream = zlib.compress(content, 9) if deflate else content
    filt = b"/Filter /FlateDecode " if deflate else b""
    w, h = media_box
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %s %s] /Contents 4 0 R "
         b"/Resources << /Font << /F1 5 0 R >> >> >>" % (str(w).encode(), str(h).encode())),
        b"<< " + filt + b"/Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


TEXT = b"BT /F1 24 Tf 72 72 Td (Hostile page) Tj ET\n"


def pdf_content_bomb(path: Path, n_ops: int = 40_000_000) -> Path:
    """A page whose FlateDecode content stream inflates to `n_ops` tiny filled rectangles
    (40M: ~1 MB on disk, ~480 MB of operators, one path object each in pdfium)."""
    return _pdf(path, (612, 792), TEXT + b"0 0 1 1 re f\n" * n_ops, deflate=True)


def pdf_media_box(path: Path, side: float) -> Path:
    """A text page `side` points square (14,400 pt is the PDF maximum; 3,000,000 pt is not)."""
    return _pdf(path, (side, side), TEXT)


def pdf_plain(path: Path) -> Path:
    """A normal letter-size page with a line of text."""
    return _pdf(path, (612, 792), TEXT)


# -- parse functions for the worker's own tests (module level: the worker imports them by name) --

def hog_memory(step_mb: int = 16) -> None:
    """Allocate until something stops it."""
    held = []
    while True:
        held.append(bytearray(step_mb << 20))


def spin() -> None:
    """Burn CPU until something stops it."""
    while True:
        pass


def double(x: int) -> int:
    return 2 * x


def refuse(message: str) -> None:
    raise ValueError(message)


def crash() -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


def slow_steps(steps: int, pause: float) -> int:
    """`steps` steps of `pause` seconds, each reported as progress (a long OCR'd PDF)."""
    import time

    from deskbench.untrusted.worker import progress

    for _ in range(steps):
        time.sleep(pause)
        progress()
    return steps


class _Picky(Exception):
    def __init__(self, *, why: str) -> None:
        super().__init__(why)


def refuse_oddly() -> None:
    """An exception that pickles but cannot be unpickled (keyword-only arguments)."""
    raise _Picky(why="odd")
