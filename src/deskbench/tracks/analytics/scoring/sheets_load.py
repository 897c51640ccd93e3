"""Reading xlsx/xlsm/csv outputs into one table per sheet, for the spreadsheet comparator.

A model's output file is whatever its code wrote: a title row above the header, trailing blank
rows, a CSV in a European dialect. Loading therefore finds the header row (the first non-empty
row, skipping a one-cell title row; or the row that best matches the reference's header when the
reference is known), drops blank rows and columns, and keeps the file's row numbers so a failure
can point at a real row.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbench.corpus.xlvalues import ExcelError, Unevaluated

if TYPE_CHECKING:
    import pandas as pd

EXCEL_SUFFIXES = (".xlsx", ".xlsm")
CSV_SUFFIXES = (".csv", ".tsv")
READABLE_SUFFIXES = EXCEL_SUFFIXES + CSV_SUFFIXES  # the formats the comparator reads
HEADER_WINDOW = 10  # a header further down than the 10th non-empty row is not a header

_LEADING_ZERO = re.compile(r"^[+-]?0\d")  # "007": an identifier, not the number 7
_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")


class UnreadableSheet(ValueError):
    """The file does not open as a spreadsheet; the message says why, in one line."""


@dataclass
class Table:
    """One sheet: unique column labels, object-dtype cells, and where each data row was."""

    name: str
    frame: pd.DataFrame
    rownums: list[int] = field(default_factory=list)  # 1-based row of each data row in the file
    header_row: int = 0  # 1-based; 0 when the sheet is empty
    from_csv: bool = False  # a CSV has no sheet name of its own (its name is the file's stem)

    @property
    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    def values(self, column: str) -> list[Any]:
        return list(self.frame[column].tolist())


def norm_label(text: str, *, loose: bool = False) -> str:
    """Header/sheet name as compared: case- and whitespace-insensitive; `loose` also treats _ and - as spaces."""
    t = str(text).casefold()
    if loose:
        t = t.replace("_", " ").replace("-", " ")
    return " ".join(t.split())


def blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip())


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).upper()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == datetime.min.time() else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return " ".join(str(value).split())


def _width(row: list[Any]) -> int:
    """Index past the last non-blank cell."""
    for i in range(len(row) - 1, -1, -1):
        if not blank(row[i]):
            return i + 1
    return 0


def _filled(row: list[Any]) -> int:
    return sum(1 for v in row if not blank(v))


def _header_index(rows: list[list[Any]], hint: set[str] | None) -> int | None:
    """Row index of the header: the reference's header (by overlap) if given, else the first
    non-empty row unless it is a one-cell title above a wider table."""
    nonempty = [i for i, r in enumerate(rows) if _width(r)][:HEADER_WINDOW]
    if not nonempty:
        return None
    first = nonempty[0]
    if _filled(rows[first]) == 1 and any(_filled(rows[i]) > 1 for i in nonempty[1:]):
        first = next(i for i in nonempty[1:] if _filled(rows[i]) > 1)
    if hint:
        def overlap(i: int) -> int:
            return sum(1 for v in rows[i] if not blank(v) and norm_label(_label(v), loose=True) in hint)

        best = max(nonempty, key=lambda i: (overlap(i), -i))
        if overlap(best) > overlap(first):
            return best
    return first


def build_table(name: str, rows: list[list[Any]], hint: set[str] | None = None) -> Table:
    """Header detection, blank-row and blank-column removal, unique column labels."""
    import pandas as pd  # about 0.8 s: paid when a sheet is compared, not by whoever imports the scorer

    head = _header_index(rows, hint)
    if head is None:
        return Table(name=name, frame=pd.DataFrame(), rownums=[], header_row=0)
    data = [(i + 1, r) for i, r in enumerate(rows[head + 1:], start=head + 1) if _width(r)]
    width = max([_width(rows[head])] + [_width(r) for _, r in data])
    header = list(rows[head]) + [None] * (width - len(rows[head]))
    keep = [c for c in range(width)
            if not blank(header[c]) or any(c < len(r) and not blank(r[c]) for _, r in data)]
    labels: list[str] = []
    seen: Counter[str] = Counter()
    for c in keep:
        label = _label(header[c]) if not blank(header[c]) else f"(column {c + 1})"
        seen[norm_label(label)] += 1
        labels.append(label if seen[norm_label(label)] == 1 else f"{label} ({seen[norm_label(label)]})")
    cells = [[r[c] if c < len(r) else None for c in keep] for _, r in data]
    frame = pd.DataFrame(cells, columns=labels, dtype=object) if cells else pd.DataFrame(columns=labels, dtype=object)
    return Table(name=name, frame=frame, rownums=[n for n, _ in data], header_row=head + 1)


def _cell(value: Any, *, decimal_comma: bool) -> Any:
    """A cell as the comparator reads it: formula errors and unevaluated formulas as their text,
    decimal-comma numbers in ';' CSV files as numbers (corpus readers keep those as text)."""
    if isinstance(value, ExcelError | Unevaluated):
        return str(value)
    if decimal_comma and isinstance(value, str):
        text = value.strip()
        if _DECIMAL_COMMA.match(text) and not _LEADING_ZERO.match(text):
            return float(text.replace(",", "."))
    return value


def read_rows(path: Path) -> list[tuple[str, list[list[Any]]]]:
    """(sheet name, raw rows) for every sheet, through corpus/office (one reader for the whole
    harness: formulas without cached values computed, csv encoding and delimiter sniffed); a CSV
    is one sheet named after the file."""
    from deskbench.corpus.office import UnreadableFile, read_spreadsheet

    if not path.is_file():
        raise UnreadableSheet(f"{path} does not exist or is not a file")
    suffix = path.suffix.lower()
    if suffix == ".xls":
        raise UnreadableSheet(f"{path.name} is a legacy .xls workbook; save it as .xlsx")
    if suffix not in READABLE_SUFFIXES:
        raise UnreadableSheet(f"{path.name}: not a spreadsheet (.xlsx, .xlsm or .csv)")
    try:
        book = read_spreadsheet(path)
    except UnreadableFile as exc:
        raise UnreadableSheet(str(exc)) from None
    comma = book.delimiter == ";"
    return [(sheet.name, [[_cell(v, decimal_comma=comma) for v in row] for row in sheet.rows])
            for sheet in book.sheets]


def load_tables(path: Path, hints: Iterable[str] = ()) -> list[Table]:
    """Every sheet of `path` as a Table. `hints`: the reference's header labels, which pick the
    prediction's header row when the first non-empty row is not it."""
    hint = {norm_label(h, loose=True) for h in hints} or None
    tables = [build_table(name, rows, hint) for name, rows in read_rows(path)]
    for t in tables:
        t.from_csv = path.suffix.lower() in CSV_SUFFIXES
    return tables
