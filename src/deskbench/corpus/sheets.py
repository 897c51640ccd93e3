"""Spreadsheets as typed grids: `Sheet` (rows of cell values addressed by A1 coordinates, merged
ranges expanded, a detected header) and `Spreadsheet` (the workbook around them), read from
xlsx/xlsm here and from csv/tsv in csvread.py; plus the annotated TSV of the consulting paper.

Coordinates are the file's own: `rows[0][0]` is A1 whatever the used range, so a row number in
the TSV, the header index and the auxiliary summary all agree with what Excel shows.
Header rows are 1-based sheet row numbers for the same reason.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

from openpyxl import load_workbook
from openpyxl.utils.cell import get_column_letter, range_boundaries
from openpyxl.workbook.workbook import Workbook
from openpyxl.worksheet.worksheet import Worksheet

from deskbench.corpus.headers import detect_header
from deskbench.corpus.xlvalues import ExcelError, Unevaluated
from deskbench.corpus.xlworkbook import evaluate_missing
from deskbench.untrusted.limits import FileLimitError, LimitExceeded, current_limits

CellValue = str | int | float | bool | datetime | date | time | timedelta | ExcelError | Unevaluated | None


@dataclass
class Sheet:
    """One grid. `header_row` is the 1-based row of the first header row (None: none found) and
    `header_depth` how many header rows there are (2 for a grouped header over sub-headers)."""

    name: str
    rows: list[list[CellValue]]
    header_row: int | None = None
    header_depth: int = 0
    merged: tuple[str, ...] = ()
    kind: str = "worksheet"  # or "chartsheet" (no cells)

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def n_cols(self) -> int:
        return max((len(r) for r in self.rows), default=0)

    def cell(self, a1: str) -> CellValue:
        """The value at `a1` ("B3"); None outside the grid."""
        m = re.fullmatch(r"\$?([A-Za-z]{1,3})\$?(\d+)", a1)
        if m is None:
            raise ValueError(f"not an A1 reference: {a1!r}")
        col = range_boundaries(m.group(1).upper() + "1")[0] - 1
        row = int(m.group(2)) - 1
        if row < len(self.rows) and col < len(self.rows[row]):
            value: CellValue = self.rows[row][col]
            return value
        return None

    def cells(self) -> Iterator[tuple[str, CellValue]]:
        """Non-empty cells in reading order (row by row) with their A1 coordinates."""
        for r, row in enumerate(self.rows, start=1):
            for c, value in enumerate(row, start=1):
                if not is_empty(value):
                    yield f"{get_column_letter(c)}{r}", value


@dataclass
class Spreadsheet:
    """A workbook (or a csv as a one-sheet workbook) with its sheet order and active sheet."""

    path: Path
    file_type: str  # "xlsx", "xlsm", "csv", "tsv"
    sheets: list[Sheet]
    active: str
    encoding: str | None = None  # csv only
    delimiter: str | None = None  # csv only
    notes: list[str] = field(default_factory=list)

    @property
    def sheet_names(self) -> list[str]:
        return [s.name for s in self.sheets]

    def sheet(self, name: str) -> Sheet:
        return next(s for s in self.sheets if s.name == name)


def is_empty(value: CellValue) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def render_value(value: CellValue) -> str:
    """A cell value as text: the underlying value, not its display format (0.83, not 83.00%);
    floats to 15 significant digits so binary noise (0.30000000000000004) disappears."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    return str(value)


def _has_formulas(path: Path) -> bool:
    """Whether any worksheet XML holds a formula (<f>): skips a second full load when none does."""
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.startswith("xl/worksheets/") and name.endswith(".xml"):
                with zf.open(name) as fh:
                    tail = b""
                    while chunk := fh.read(1 << 20):
                        if re.search(rb"<(?:\w+:)?f[ >/]", tail + chunk):
                            return True
                        tail = chunk[-16:]
    return False


def load_values(path: Path) -> tuple[Workbook, dict[tuple[str, int, int], CellValue]]:
    """The workbook with cached values (data_only) and, for formula cells that have none,
    computed values (an `Unevaluated` where the evaluator cannot). The computed values are also
    written into the returned workbook (errors and unevaluated cells as their text) so readers
    of the Workbook object see them."""
    values = load_workbook(path, data_only=True)
    computed: dict[tuple[str, int, int], CellValue] = {}
    if _has_formulas(path):
        computed = evaluate_missing(path, values)
        for (sheet, row, col), value in computed.items():
            plain = str(value) if isinstance(value, ExcelError | Unevaluated) else value
            values[sheet].cell(row=row, column=col).value = plain
    return values, computed


def _grid(ws: Worksheet, computed: dict[tuple[str, int, int], CellValue]) -> list[list[CellValue]]:
    """Dense rows up to the last non-empty cell; merged ranges filled with their top-left value."""
    found: dict[tuple[int, int], CellValue] = {}
    for (row, col), cell in ws._cells.items():  # noqa: SLF001 - existing cells only, not max_row x max_col
        value = computed.get((ws.title, row, col), cell.value)
        if cell.data_type == "e" and isinstance(value, str):
            value = ExcelError(value)
        if not is_empty(value):
            found[(row, col)] = value
    cap = current_limits().cells
    merged = sum(r.size["rows"] * r.size["columns"] for r in ws.merged_cells.ranges)
    if merged > cap:  # a merge over a whole sheet would fill 17 billion cells
        raise FileLimitError(LimitExceeded(what="cells", limit=cap, observed=merged))
    for rng in ws.merged_cells.ranges:
        top = found.get((rng.min_row, rng.min_col))
        if top is not None:
            for row in range(rng.min_row, rng.max_row + 1):
                for col in range(rng.min_col, rng.max_col + 1):
                    found[(row, col)] = top
    if not found:
        return []
    n_rows = max(r for r, _ in found)
    n_cols = max(c for _, c in found)
    if n_rows * n_cols > cap:  # the dense grid from A1 to the last cell: one cell at XFD1048576 is 17 billion
        raise FileLimitError(LimitExceeded(what="cells", limit=cap, observed=n_rows * n_cols))
    rows: list[list[CellValue]] = [[None] * n_cols for _ in range(n_rows)]
    for (row, col), value in found.items():
        rows[row - 1][col - 1] = value
    return rows


def read_xlsx(path: Path) -> Spreadsheet:
    """An xlsx/xlsm workbook; raises the libraries' exceptions on a bad file (office.py turns
    them into UnreadableFile)."""
    wb, computed = load_values(path)
    sheets: list[Sheet] = []
    for ws in wb.worksheets + wb.chartsheets:
        if not isinstance(ws, Worksheet):
            sheets.append(Sheet(ws.title, [], kind="chartsheet"))
            continue
        rows = _grid(ws, computed)
        merged = tuple(sorted(str(r) for r in ws.merged_cells.ranges))
        header, depth = detect_header(rows, [range_boundaries(m) for m in merged])
        sheets.append(Sheet(ws.title, rows, header, depth, merged))
    order = {name: i for i, name in enumerate(wb.sheetnames)}
    sheets.sort(key=lambda s: order[s.name])
    notes = [f"{sum(isinstance(v, Unevaluated) for v in computed.values())} formula cells could not be "
             "evaluated"] if any(isinstance(v, Unevaluated) for v in computed.values()) else []
    return Spreadsheet(path, path.suffix.lower().lstrip("."), sheets, wb.active.title if wb.active else
                       sheets[0].name, notes=notes)


def _tsv_field(value: CellValue) -> str:
    """Linear TSV escaping, so a cell never breaks a row: backslash, tab, newline, CR."""
    text = render_value(value)
    return (text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r"))


def to_tsv(sheet: Sheet) -> str:
    """The consulting paper's annotated TSV: one comment line naming the sheet, its header rows
    (1-based, as Excel numbers them) and its size, then one line per sheet row from row 1, so
    line k+1 of the text is sheet row k. Merged cells repeat their value."""
    header = "none" if sheet.header_row is None else str(sheet.header_row)
    name = sheet.name.replace("\n", " ")
    lines = [f"# sheet: {name}; header_row: {header}; header_depth: {sheet.header_depth}; "
             f"rows: {sheet.n_rows}; cols: {sheet.n_cols}"]
    width = sheet.n_cols
    for row in sheet.rows:
        cells = [_tsv_field(v) for v in row] + [""] * (width - len(row))
        lines.append("\t".join(cells).rstrip("\t"))
    return "\n".join(lines) + "\n"
