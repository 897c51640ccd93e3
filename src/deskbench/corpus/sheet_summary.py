"""AIDABench's auxiliary spreadsheet summary (Appendix F, Listing 6): a token-efficient JSON of a
workbook's metadata and a sparse cell map of its active sheet, given to the agent as context.

The shape is the listing's, key for key: fileName, fileType, sheetNames, sheets[{sheetName,
sheetType, cells{A1: text}}] (the active sheet only), mode, ActiveSheet. Cell values are the
underlying values as text (a cell shown as 83.00% is "0.83"). The listing names four omission
modes; they run in its order over the whole active sheet and `mode` lists all four, as the
listing does, whether or not one changed anything on this sheet (`mode` names the rules the map
was made by, not what it lost). Which ones did change something is `cell_map`'s second value,
kept out of the JSON so the agent sees the listing's object key for key:

1. "Delete empty cell": empty cells in the used range are left out of the map.
2. "Omit the longer content and replace it with...": text over `max_chars` is cut and ends "...".
3. "Omit lines with the same structure": after `max_same_rows` consecutive rows with the same
   structure (which columns are filled, with which type), further such rows are dropped.
4. "Omit later lines": the map stops after `max_cells` cells, mid-row if need be.

Defaults reproduce the listing: a 100 x 16 sheet gives its header, two full data rows and two
cells of the third (50 cells). The JSON is compact (no spaces after separators, non-ASCII kept as
is: fewer tokens than the listing's pretty print or \\u escapes) and deterministic: the same file
always gives the same bytes. Leaving the summary out (the paper's ablation) is the caller's switch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, time, timedelta
from pathlib import Path
from typing import Any

from openpyxl.utils.cell import get_column_letter

from deskbench.corpus.office import SPREADSHEET_SUFFIXES, UnreadableFile, read_spreadsheet
from deskbench.corpus.sheets import CellValue, Sheet, Spreadsheet, is_empty, render_value

MODE_EMPTY = "Delete empty cell"
MODE_LONG = "Omit the longer content and replace it with..."
MODE_SAME = "Omit lines with the same structure"
MODE_LATER = "Omit later lines"
MODES = (MODE_EMPTY, MODE_LONG, MODE_SAME, MODE_LATER)
LISTING_MODE = ", ".join(MODES)  # Listing 6's "mode", verbatim

SHEET_TYPES = {"worksheet": "ReadOnlyWorksheet", "chartsheet": "Chartsheet"}
"""The listing reports openpyxl's read-only worksheet class; chart sheets have no cells."""

INTRO = ("Spreadsheet summaries (JSON, one line per file; the cell map covers the active sheet only "
         "and may be cut by the omission rules \"mode\" names):")


@dataclass(frozen=True)
class SummaryBudget:
    max_cells: int = 50
    max_chars: int = 50
    max_same_rows: int = 3


Row = list[tuple[str, str]]  # (A1, text) of a row's non-empty cells


def _kind(value: CellValue) -> str:
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int | float):
        return "n"
    if isinstance(value, date | time | timedelta):
        return "d"
    return "s" if isinstance(value, str) else "e"


def _rows(sheet: Sheet) -> tuple[list[Row], list[tuple[Any, ...]], bool]:
    """Non-empty cells row by row, each row's structure, and whether any empty cell was dropped."""
    width = sheet.n_cols
    rows: list[Row] = []
    shapes: list[tuple[Any, ...]] = []
    dropped = False
    for r, values in enumerate(sheet.rows, start=1):
        filled = [(c, v) for c, v in enumerate(values, start=1) if not is_empty(v)]
        dropped = dropped or len(filled) < width
        if filled:
            rows.append([(f"{get_column_letter(c)}{r}", render_value(v)) for c, v in filled])
            shapes.append(tuple((c, _kind(v)) for c, v in filled))
    return rows, shapes, dropped


def _truncate(rows: list[Row], max_chars: int) -> bool:
    changed = False
    for row in rows:
        for i, (a1, text) in enumerate(row):
            if len(text) > max_chars:
                row[i] = (a1, text[:max_chars] + "...")
                changed = True
    return changed


def _same_structure(rows: list[Row], shapes: list[tuple[Any, ...]], keep: int) -> tuple[list[Row], bool]:
    kept: list[Row] = []
    run = 0
    for i, row in enumerate(rows):
        run = run + 1 if i and shapes[i] == shapes[i - 1] else 1
        if run <= keep:
            kept.append(row)
    return kept, len(kept) < len(rows)


def _budget(rows: list[Row], max_cells: int) -> tuple[dict[str, str], bool]:
    flat: Iterator[tuple[str, str]] = (cell for row in rows for cell in row)
    cells: dict[str, str] = {}
    for a1, text in flat:
        if len(cells) == max_cells:
            return cells, True
        cells[a1] = text
    return cells, False


def cell_map(sheet: Sheet, budget: SummaryBudget = SummaryBudget()) -> tuple[dict[str, str], list[str]]:
    """The sparse cell map of `sheet` and the omission modes applied, in the listing's order."""
    rows, shapes, dropped_empty = _rows(sheet)
    modes = [MODE_EMPTY] if dropped_empty else []
    if _truncate(rows, budget.max_chars):
        modes.append(MODE_LONG)
    rows, dropped_same = _same_structure(rows, shapes, budget.max_same_rows)
    if dropped_same:
        modes.append(MODE_SAME)
    cells, cut = _budget(rows, budget.max_cells)
    if cut:
        modes.append(MODE_LATER)
    return cells, modes


def summary(book: Spreadsheet, budget: SummaryBudget = SummaryBudget()) -> dict[str, Any]:
    """Listing 6's object for a workbook (or a csv as a one-sheet workbook)."""
    active = book.sheet(book.active)
    cells, _applied = cell_map(active, budget)
    return {
        "fileName": book.path.name,
        "fileType": book.file_type,
        "sheetNames": book.sheet_names,
        "sheets": [{"sheetName": active.name, "sheetType": SHEET_TYPES[active.kind], "cells": cells}],
        "mode": LISTING_MODE,
        "ActiveSheet": active.name,
    }


def to_json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def summarise_file(path: Path, budget: SummaryBudget = SummaryBudget()) -> str:
    """One spreadsheet's summary as compact JSON; UnreadableFile if it does not open."""
    return to_json(summary(read_spreadsheet(path), budget))


def summarise(paths: Sequence[Path], budget: SummaryBudget = SummaryBudget()) -> str:
    """The block to prepend to an agent's prompt: one JSON line per spreadsheet input, in the
    order given (other files skipped; one that does not open gets {"fileName", "error"}).
    "" when there is no spreadsheet."""
    lines: list[str] = []
    for path in paths:
        if path.suffix.lower() not in SPREADSHEET_SUFFIXES:
            continue
        try:
            lines.append(summarise_file(path, budget))
        except UnreadableFile as exc:
            lines.append(to_json({"fileName": path.name, "error": str(exc).replace(str(path), path.name)}))
    return "\n".join([INTRO, *lines]) + "\n" if lines else ""
