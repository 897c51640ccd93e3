"""Office files written byte-identically for a given seed.

openpyxl stamps docProps/core.xml with the save time, and zip entries carry their write time;
both are pinned here (core.xml dates rewritten to FIXED_TIME, every zip entry dated FIXED_TIME)
so two runs with one seed hash the same.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from openpyxl.workbook.workbook import Workbook

FIXED_TIME = datetime(2024, 1, 1, 0, 0, 0)
_STAMP = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")
_CORE_DATES = re.compile(rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)")
AUTHOR = "deskbench generator"


def normalize_zip(path: Path) -> None:
    """Rewrite the zip at `path` with fixed entry dates and pinned core.xml timestamps."""
    with zipfile.ZipFile(path) as zin:
        entries = [(info.filename, zin.read(info.filename)) for info in zin.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in entries:
            if name == "docProps/core.xml":
                data = _CORE_DATES.sub(lambda m: m.group(1) + _STAMP.encode() + m.group(3), data)
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)
    path.write_bytes(buf.getvalue())


def save_workbook(wb: Workbook, path: Path) -> Path:
    wb.properties.creator = AUTHOR
    wb.properties.lastModifiedBy = AUTHOR
    wb.properties.created = FIXED_TIME
    wb.properties.modified = FIXED_TIME
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    normalize_zip(path)
    return path


def save_docx(doc: Any, path: Path) -> Path:
    """A python-docx Document saved with pinned core properties."""
    return _save_opc(doc, path)


def save_pptx(prs: Any, path: Path) -> Path:
    """A python-pptx Presentation saved with pinned core properties."""
    return _save_opc(prs, path)


def _save_opc(package: Any, path: Path) -> Path:
    """docx and pptx share the OPC core properties: pin them, save, normalise the zip."""
    props = package.core_properties
    props.author = AUTHOR
    props.last_modified_by = AUTHOR
    props.created = FIXED_TIME
    props.modified = FIXED_TIME
    props.revision = 1
    path.parent.mkdir(parents=True, exist_ok=True)
    package.save(str(path))
    normalize_zip(path)
    return path


def write_csv(
    path: Path,
    rows: Sequence[Sequence[Any]],
    *,
    delimiter: str = ",",
    encoding: str = "utf-8",
) -> Path:
    """Rows as CSV with "\\n" line ends in `encoding` (latin-1 files are part of the test)."""
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    writer.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue().encode(encoding))
    return path


def decimal_comma(value: float, decimals: int = 2) -> str:
    """12.5 -> "12,50": how a semicolon-delimited (European) CSV writes numbers."""
    return f"{value:.{decimals}f}".replace(".", ",")


def new_docx() -> Any:
    from docx import Document

    return Document()


def add_table(doc: Any, rows: Sequence[Sequence[Any]], *, style: str | None = "Table Grid") -> Any:
    """A docx table from rows (first row the header)."""
    table = doc.add_table(rows=len(rows), cols=len(rows[0]))
    if style:
        table.style = style
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.cell(r, c).text = str(value)
    return table
