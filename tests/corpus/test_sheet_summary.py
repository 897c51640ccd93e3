"""The auxiliary spreadsheet summary reproduces AIDABench Appendix F, Listing 6."""

from __future__ import annotations

import json
from pathlib import Path

from openpyxl import Workbook

from deskbench.corpus.office import read_spreadsheet
from deskbench.corpus.sheet_summary import (
    INTRO,
    MODE_EMPTY,
    MODE_LATER,
    MODE_LONG,
    MODE_SAME,
    SummaryBudget,
    cell_map,
    summarise,
    summarise_file,
)

HEADERS = ["Related Business Segment", "Project Name", "Project ID", "Start Time", "Project Cost (10k CNY)",
           "Total Project Revenue (10k CNY)", "Project ROI"] + [f"Dimension {i}" for i in range(1, 10)]

# Listing 6, verbatim: its cell map and mode string.
LISTING_CELLS = json.loads(
    '{"A1": "Related Business Segment", "B1": "Project Name", "C1": "Project ID", "D1": "Start Time", '
    '"E1": "Project Cost (10k CNY)", "F1": "Total Project Revenue (10k CNY)", "G1": "Project ROI", '
    '"H1": "Dimension 1", "I1": "Dimension 2", "J1": "Dimension 3", "K1": "Dimension 4", "L1": "Dimension 5", '
    '"M1": "Dimension 6", "N1": "Dimension 7", "O1": "Dimension 8", "P1": "Dimension 9", '
    '"A2": "Related Business Segment 1", "B2": "Project Name 1", "C2": "Project ID 1", "D2": "2026Q4", '
    '"E2": "27.02", "F2": "53.74", "G2": "0.83", "H2": "18.34", "I2": "0", "J2": "0", "K2": "0", "L2": "0", '
    '"M2": "0", "N2": "16.23", "O2": "17.17", "P2": "0", "A3": "Related Business Segment 1", '
    '"B3": "Project Name 2", "C3": "Project ID 2", "D3": "2026Q4", "E3": "61.91", "F3": "68.26", '
    '"G3": "0.21", "H3": "41.08", "I3": "4.31", "J3": "13.16", "K3": "0", "L3": "0", "M3": "16.71", '
    '"N3": "0", "O3": "0", "P3": "0", "A4": "Related Business Segment 1", "B4": "Project Name 3"}')
LISTING_MODE = ("Delete empty cell, Omit the longer content and replace it with..., "
                "Omit lines with the same structure, Omit later lines")


def _revenue_workbook(path: Path) -> None:
    """Figure 5's Revenue_Calculation_Details.xlsx: 100 rows x 16 columns, ROI formatted as a
    percent. Rows 2-3 carry the listing's values; later rows are made up. `mode` names all four
    rules whatever the sheet; ours has an empty cell and a long text (rows 57 and 80) so that
    all four also apply."""
    wb = Workbook()
    ws = wb.active
    ws.title = "Project Revenue Details"
    ws.append(HEADERS)
    ws.append(["Related Business Segment 1", "Project Name 1", "Project ID 1", "2026Q4", 27.02, 53.74, 0.83,
               18.34, 0, 0, 0, 0, 0, 16.23, 17.17, 0])
    ws.append(["Related Business Segment 1", "Project Name 2", "Project ID 2", "2026Q4", 61.91, 68.26, 0.21,
               41.08, 4.31, 13.16, 0, 0, 16.71, 0, 0, 0])
    for n in range(3, 100):
        segment = 1 + (n - 1) // 30
        dims = [round((n * 7 + d * 13) % 40 * 1.07, 2) if (n + d) % 3 else 0 for d in range(9)]
        ws.append([f"Related Business Segment {segment}", f"Project Name {n}", f"Project ID {n}",
                   f"{2026 + n % 2}Q{1 + n % 4}", round(10 + n * 0.61, 2), round(30 + n * 1.1, 2),
                   round(0.2 + n % 10 / 10, 2), *dims])
    ws["I57"] = None
    ws["B80"] = "Project Name 79 - a name long enough to be cut in the summary map"
    for row in range(2, 101):
        ws[f"G{row}"].number_format = "0.00%"
    wb.save(path)


def test_listing_6_reproduced(tmp_path: Path) -> None:
    path = tmp_path / "Revenue_Calculation_Details.xlsx"
    _revenue_workbook(path)
    text = summarise_file(path)
    obj = json.loads(text)
    assert list(obj) == ["fileName", "fileType", "sheetNames", "sheets", "mode", "ActiveSheet"]
    assert obj["fileName"] == "Revenue_Calculation_Details.xlsx" and obj["fileType"] == "xlsx"
    assert obj["sheetNames"] == ["Project Revenue Details"] == [obj["ActiveSheet"]]
    [sheet] = obj["sheets"]
    assert list(sheet) == ["sheetName", "sheetType", "cells"]
    assert (sheet["sheetName"], sheet["sheetType"]) == ("Project Revenue Details", "ReadOnlyWorksheet")
    assert list(sheet["cells"].items()) == list(LISTING_CELLS.items())  # same cells, same order
    assert obj["mode"] == LISTING_MODE
    assert _applied(path) == [MODE_EMPTY, MODE_LONG, MODE_SAME, MODE_LATER]
    assert text.startswith('{"fileName":"Revenue_Calculation_Details.xlsx","fileType":"xlsx",')
    assert summarise_file(path) == text  # deterministic
    _revenue_workbook(tmp_path / "again.xlsx")
    assert summarise_file(tmp_path / "again.xlsx") == text.replace(
        "Revenue_Calculation_Details.xlsx", "again.xlsx")


def _sheet(path: Path, rows: list[list[object]]) -> Path:
    wb = Workbook()
    wb.active.title = "S"
    for row in rows:
        wb.active.append(row)
    wb.save(path)
    return path


def _summary(path: Path, **budget: int) -> dict[str, object]:
    return json.loads(summarise_file(path, SummaryBudget(**budget)))


def _applied(path: Path, **budget: int) -> list[str]:
    """The omission rules that changed something on the active sheet (not in the JSON)."""
    book = read_spreadsheet(path)
    return cell_map(book.sheet(book.active), SummaryBudget(**budget))[1]


def test_each_mode_alone(tmp_path: Path) -> None:
    """`mode` lists all four rules, as Listing 6 does, whatever the sheet; each rule alone still
    does what it says (and cell_map tells which ones changed something)."""
    plain_path = _sheet(tmp_path / "plain.xlsx", [["k", "v"], ["a", 1], [2, "b"]])
    plain = _summary(plain_path)
    assert plain["mode"] == LISTING_MODE and plain["sheets"][0]["cells"] == {  # type: ignore[index]
        "A1": "k", "B1": "v", "A2": "a", "B2": "1", "A3": "2", "B3": "b"}
    assert _applied(plain_path) == []

    empty_path = _sheet(tmp_path / "empty.xlsx", [["k", "v"], ["a", None], [2, "b"]])
    empty = _summary(empty_path)
    assert empty["mode"] == LISTING_MODE and "B2" not in empty["sheets"][0]["cells"]  # type: ignore[index]
    assert _applied(empty_path) == [MODE_EMPTY]

    long_path = _sheet(tmp_path / "long.xlsx", [["k", "v"], ["a", "x" * 80], [2, "b"]])
    long = _summary(long_path, max_chars=10)
    assert long["mode"] == LISTING_MODE and _applied(long_path, max_chars=10) == [MODE_LONG]
    assert long["sheets"][0]["cells"]["B2"] == "x" * 10 + "..."  # type: ignore[index]

    same_path = _sheet(tmp_path / "same.xlsx", [["k", "v"]] + [[f"r{i}", i] for i in range(6)])
    same = _summary(same_path)
    assert same["mode"] == LISTING_MODE and _applied(same_path) == [MODE_SAME]
    assert sorted(same["sheets"][0]["cells"]) == ["A1", "A2", "A3", "A4", "B1", "B2", "B3", "B4"]  # type: ignore[index]

    alternating = [["t", 1] if i % 2 else [1, "t"] for i in range(40)]
    later_path = _sheet(tmp_path / "later.xlsx", alternating)
    later = _summary(later_path)
    cells = later["sheets"][0]["cells"]  # type: ignore[index]
    assert later["mode"] == LISTING_MODE and len(cells) == 50 and list(cells)[-1] == "B25"
    assert _applied(later_path) == [MODE_LATER]


def test_budget_keeps_a_hundred_row_sheet_small(tmp_path: Path) -> None:
    path = _sheet(tmp_path / "wide.xlsx", [[f"h{c}" for c in range(16)]] +
                  [[f"r{r}"] + [r * c for c in range(15)] for r in range(99)])
    cells = _summary(path)["sheets"][0]["cells"]  # type: ignore[index]
    assert len(cells) == 50 and list(cells)[-1] == "B4"
    assert _applied(path, max_cells=1000) == [MODE_SAME] and _applied(path) == [MODE_SAME, MODE_LATER]


def test_csv_and_summarise_block(tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("region;revenue\nNorth;1200\nSouth;800\n", encoding="utf-8")
    (tmp_path / "memo.docx").write_bytes(b"ignored: not a spreadsheet")
    (tmp_path / "broken.xlsx").write_bytes(b"not a zip")
    obj = json.loads(summarise_file(tmp_path / "sales.csv"))
    assert (obj["fileType"], obj["sheetNames"], obj["ActiveSheet"]) == ("csv", ["sales"], "sales")
    assert obj["sheets"][0]["cells"] == {"A1": "region", "B1": "revenue", "A2": "North", "B2": "1200",
                                         "A3": "South", "B3": "800"}
    block = summarise([tmp_path / "memo.docx", tmp_path / "sales.csv", tmp_path / "broken.xlsx"])
    lines = block.splitlines()
    assert lines[0] == INTRO and len(lines) == 3
    assert json.loads(lines[1])["fileName"] == "sales.csv"
    error = json.loads(lines[2])
    assert error["fileName"] == "broken.xlsx" and "does not open as xlsx" in error["error"]
    assert str(tmp_path) not in block  # no local paths in a prompt
    assert summarise([tmp_path / "memo.docx"]) == ""


def test_active_sheet_and_unicode(tmp_path: Path) -> None:
    wb = Workbook()
    wb.active.title = "封面"
    data = wb.create_sheet("数据")
    data.append(["地区", "销售额"])
    data.append(["华东", 1200])
    wb.active = 1
    wb.save(tmp_path / "cn.xlsx")
    text = summarise_file(tmp_path / "cn.xlsx")
    assert '"sheetNames":["封面","数据"]' in text and '"ActiveSheet":"数据"' in text
    assert json.loads(text)["sheets"][0]["cells"] == {"A1": "地区", "B1": "销售额", "A2": "华东", "B2": "1200"}
    assert json.loads(text)["mode"] == LISTING_MODE
