"""The workbook pass that fills in formula cells saved without a cached value (openpyxl never
writes one), reading every other cell's cached value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openpyxl import load_workbook
from openpyxl.utils.cell import get_column_letter
from openpyxl.workbook.workbook import Workbook
from openpyxl.worksheet.formula import ArrayFormula

from deskbench.corpus.xlcalc import FUNCTIONS
from deskbench.corpus.xlformula import CellBudget, Evaluator, Unsupported, parse
from deskbench.corpus.xlvalues import ExcelError, Unevaluated

Key = tuple[str, int, int]


def pending_formulas(path: Path, values: Workbook) -> dict[Key, str]:
    """The formula of every cell whose cached value is missing in `values` (the data_only load
    of the same file). A streaming read-only pass: half the cost of a second full load."""
    pending: dict[Key, str] = {}
    wb = load_workbook(path, read_only=True, data_only=False)
    try:
        for ws in wb.worksheets:
            cached = values[ws.title]._cells  # noqa: SLF001 - existing cells, not the full grid
            for row in ws.iter_rows():
                for cell in row:
                    if cell.data_type != "f" and not isinstance(cell.value, ArrayFormula):
                        continue
                    have = cached.get((cell.row, cell.column))
                    if have is None or have.value is None:
                        raw = cell.value
                        text = raw.text if isinstance(raw, ArrayFormula) else str(raw)
                        pending[(ws.title, cell.row, cell.column)] = text if text.startswith("=") else "=" + text
    finally:
        wb.close()
    return pending


class WorkbookCalc:
    """Computes the `pending` formula cells, reading other cells' cached values from `values`.

    Dependencies are computed on demand and memoised; a cycle, an unsupported construct or a
    dependency on an unevaluated cell gives `Unevaluated`.
    """

    def __init__(self, pending: dict[Key, str], values: Workbook) -> None:
        self.pending, self.values = pending, values
        self.titles = {name.casefold(): name for name in values.sheetnames}
        self.memo: dict[Key, Any] = {}
        self.active: set[Key] = set()
        self.budget = CellBudget()

    def run(self) -> dict[Key, Any]:
        """Every pending cell -> its computed value, in sheet order."""
        return {key: self.compute(*key) for key in self.pending}

    def max_row(self, sheet: str) -> int:
        return int(self.values[self.titles[sheet.casefold()]].max_row)

    def lookup(self, sheet: str, row: int, col: int) -> Any:
        title = self.titles.get(sheet.casefold())
        if title is None:
            return ExcelError("#REF!")
        if (title, row, col) in self.pending:
            value = self.compute(title, row, col)
            if isinstance(value, Unevaluated):
                raise Unsupported(f"depends on an unevaluated cell ({title}!{_a1(row, col)})")
            return value
        cell = self.values[title]._cells.get((row, col))  # noqa: SLF001
        if cell is None:
            return None
        return ExcelError(str(cell.value)) if cell.data_type == "e" else cell.value

    def compute(self, sheet: str, row: int, col: int) -> Any:
        key = (sheet, row, col)
        if key in self.memo:
            return self.memo[key]
        formula = self.pending[key]
        if key in self.active:
            raise Unsupported("circular reference")
        self.active.add(key)
        outer, self.budget.where = self.budget.where, f"{sheet}!{_a1(row, col)}"
        try:
            value = Evaluator(self.lookup, sheet, self.max_row, FUNCTIONS, self.budget).scalar(parse(formula))
        except Unsupported as exc:
            value = Unevaluated(formula, str(exc))
        except (RecursionError, IndexError, TypeError, ValueError, ArithmeticError) as exc:
            value = Unevaluated(formula, f"{type(exc).__name__}: {exc}")
        finally:
            self.active.discard(key)
            self.budget.where = outer
        self.memo[key] = value
        return value


def _a1(row: int, col: int) -> str:
    return f"{get_column_letter(col)}{row}"


def evaluate_missing(path: Path, values: Workbook) -> dict[Key, Any]:
    """(sheet, row, col) -> value for each formula cell of the file at `path` that holds no
    cached value; `values` is its data_only load."""
    pending = pending_formulas(path, values)
    return WorkbookCalc(pending, values).run() if pending else {}
