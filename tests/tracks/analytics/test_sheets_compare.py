"""The deterministic spreadsheet comparator (AIDABench §3.3.3): open, structure, content, constraints."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from openpyxl import Workbook, load_workbook
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.errors import UserError
from deskbench.tracks.analytics.generate.tasks import generate_analytics
from deskbench.tracks.analytics.scoring.sheets import (
    SheetComparison,
    compare_sheets,
    compare_task_output,
)
from deskbench.tracks.analytics.scoring.sheets_constraints import extract_constraints
from deskbench.tracks.analytics.scoring.sheets_load import load_tables
from deskbench.tracks.analytics.scoring.sheets_structure import read_structure
from deskbench.tracks.analytics.scoring.sheets_values import Percent, cells_equal, normalise
from deskbench.tracks.analytics.tasks import read_tasks

HEADER = ["Region", "Units", "Revenue", "Date"]
ROWS: list[list[Any]] = [
    ["North", 120, 1520.5, datetime(2024, 1, 5)],
    ["South", 95, 980.25, datetime(2024, 2, 10)],
    ["East", 210, 2750.0, datetime(2024, 3, 15)],
    ["West", 60, 610.75, datetime(2024, 4, 20)],
    ["Central", 150, 1999.99, datetime(2024, 5, 25)],
]


def xlsx(path: Path, rows: Sequence[Sequence[Any]], header: Sequence[str] = HEADER, sheet: str = "Data",
         extra: dict[str, list[list[Any]]] | None = None) -> Path:
    wb = Workbook()
    ws = wb.active
    ws.title = sheet
    ws.append(list(header))
    for r in rows:
        ws.append(list(r))
    for name, data in (extra or {}).items():
        other = wb.create_sheet(name)
        for r in data:
            other.append(r)
    wb.save(path)
    return path


def ref(tmp_path: Path) -> Path:
    return xlsx(tmp_path / "ref.xlsx", ROWS)


def fails_at(result: SheetComparison, stage: str, *fragments: str) -> None:
    assert not result.passed and result.stage == stage, result
    for f in fragments:
        assert f in result.reason, result.reason


# -- stage 0/1 --------------------------------------------------------------------------


def test_identical_passes(tmp_path: Path) -> None:
    r = compare_sheets(ref(tmp_path), ref(tmp_path))
    assert r.passed and r.stage == "done" and r.mode == "tolerant"
    assert any("rows compared in full" in c for c in r.checked)


def test_corrupt_file_fails_at_open(tmp_path: Path) -> None:
    bad = tmp_path / "out.xlsx"
    bad.write_bytes(b"this is not a zip archive at all")
    fails_at(compare_sheets(ref(tmp_path), bad), "open", "out.xlsx", "does not open")
    empty = tmp_path / "empty.xlsx"
    Workbook().save(empty)
    fails_at(compare_sheets(ref(tmp_path), empty), "structure", "no sheet with data")
    truncated = tmp_path / "trunc.xlsx"
    truncated.write_bytes(ref(tmp_path).read_bytes()[:300])
    fails_at(compare_sheets(ref(tmp_path), truncated), "open")


def test_extra_column_is_tolerated_unless_strict(tmp_path: Path) -> None:
    wide = xlsx(tmp_path / "wide.xlsx", [[*r, "x"] for r in ROWS], header=[*HEADER, "Note"])
    assert compare_sheets(ref(tmp_path), wide).passed
    fails_at(compare_sheets(ref(tmp_path), wide, strict=True), "structure", "column 5", "Note")


def test_column_order_and_case_free_in_tolerant_mode(tmp_path: Path) -> None:
    order = [3, 2, 0, 1]
    pred = xlsx(tmp_path / "p.xlsx", [[r[i] for i in order] for r in ROWS],
                header=[" " + HEADER[i].upper() + " " for i in order], sheet="Sheet1")
    r = compare_sheets(ref(tmp_path), pred)
    assert r.passed, r.reason
    fails_at(compare_sheets(ref(tmp_path), pred, strict=True), "structure")


def test_strict_mode_detected_from_instruction(tmp_path: Path) -> None:
    pred = xlsx(tmp_path / "p.xlsx", ROWS, sheet="Results")
    assert compare_sheets(ref(tmp_path), pred, instruction="Write the totals to a workbook.").passed
    # naming the sheet asks for it by name, in relaxed mode too
    r = compare_sheets(ref(tmp_path), pred, instruction="Write one sheet named Data with these columns.")
    fails_at(r, "structure", "sheet 'Data' is missing", "the instruction names it")
    assert r.mode == "tolerant"
    r = compare_sheets(ref(tmp_path), pred, instruction="Write one sheet with the same layout as the template.")
    fails_at(r, "structure", "sheets differ")
    assert r.mode == "strict"
    fewer = xlsx(tmp_path / "few.xlsx", ROWS[:4])
    fails_at(compare_sheets(ref(tmp_path), fewer, instruction="exactly 4 columns"), "structure", "expected 5 data rows, got 4")


def test_missing_column_and_missing_sheet_fail_structure(tmp_path: Path) -> None:
    narrow = xlsx(tmp_path / "n.xlsx", [r[:3] for r in ROWS], header=HEADER[:3])
    fails_at(compare_sheets(ref(tmp_path), narrow), "structure", "column 'Date' is missing")
    two = xlsx(tmp_path / "two.xlsx", ROWS, extra={"Totals": [["k", "v"], ["a", 1]]})
    fails_at(compare_sheets(two, ref(tmp_path)), "structure", "sheet 'Totals' is missing")


def test_title_row_above_header_and_reference_header_hint(tmp_path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.append(["Regional sales report"])
    ws.append([])
    ws.append(HEADER)
    for r in ROWS:
        ws.append(r)
    wb.save(tmp_path / "titled.xlsx")
    assert compare_sheets(ref(tmp_path), tmp_path / "titled.xlsx").passed
    # a wide notes row above the header: only the reference's header finds the real one
    wb = Workbook()
    ws = wb.active
    ws.append(["prepared by", "finance", "v2", "draft"])
    ws.append(HEADER)
    for r in ROWS:
        ws.append(r)
    wb.save(tmp_path / "notes.xlsx")
    (table,) = load_tables(tmp_path / "notes.xlsx", hints=HEADER)
    assert table.columns == HEADER and table.header_row == 2 and table.rownums[0] == 3
    assert compare_sheets(ref(tmp_path), tmp_path / "notes.xlsx").passed


# -- stage 2 ------------------------------------------------------------------------------


def test_row_permutation_passes_unless_an_order_is_asked_strict_or_not(tmp_path: Path) -> None:
    shuffled = xlsx(tmp_path / "s.xlsx", [ROWS[i] for i in (2, 0, 4, 1, 3)])
    assert compare_sheets(ref(tmp_path), shuffled).passed
    # strict (the task author's override, or "exactly 4 columns"): the rows still match as a multiset
    assert compare_sheets(ref(tmp_path), shuffled, strict=True).passed
    strict = compare_sheets(ref(tmp_path), shuffled, instruction="Write one sheet with exactly 4 columns.")
    assert strict.passed and strict.mode == "strict" and "order-insensitive" in strict.checked[-2]
    r = compare_sheets(ref(tmp_path), shuffled, instruction="List the regions sorted by Date ascending.")
    fails_at(r, "content", "row 2", "column 'Region'", "expected 'North', got 'East'", "row order matters",
             "sort by Date")
    assert r.mode == "tolerant" and "sort(Date, ascending)" in r.constraints
    r = compare_sheets(ref(tmp_path), shuffled, instruction="Write exactly 4 columns, sorted by Date ascending.")
    fails_at(r, "content", "row 2", "row order matters")
    assert r.mode == "strict"


def test_strict_with_a_sort_descending_fails_on_the_wrong_order_only(tmp_path: Path) -> None:
    by_revenue = sorted(ROWS, key=lambda r: -r[2])
    reference = xlsx(tmp_path / "ref_desc.xlsx", by_revenue)
    instruction = "Write the table with exactly 4 columns, sort by Revenue descending."
    ok = compare_sheets(reference, xlsx(tmp_path / "ok.xlsx", by_revenue), instruction=instruction)
    assert ok.passed and ok.mode == "strict"
    wrong = xlsx(tmp_path / "asc.xlsx", list(reversed(by_revenue)))
    assert compare_sheets(reference, wrong, instruction="Write the table with exactly 4 columns.").passed
    fails_at(compare_sheets(reference, wrong, instruction=instruction), "content", "row order matters",
             "sort by Revenue")


@pytest.mark.parametrize("words", ["按 Revenue 降序排列。", "按收入从高到低。", "只保留前5名。", "Rank them, highest first."])
def test_order_words_without_a_recognised_sort_make_rows_positional(tmp_path: Path, words: str) -> None:
    by_revenue = sorted(ROWS, key=lambda r: -r[2])
    reference = xlsx(tmp_path / "ref_desc.xlsx", by_revenue)
    wrong = xlsx(tmp_path / "asc.xlsx", list(reversed(by_revenue)))
    fails_at(compare_sheets(reference, wrong, instruction=words), "content", "row order matters",
             "the instruction asks for an order")
    assert compare_sheets(reference, xlsx(tmp_path / "ok.xlsx", by_revenue), instruction=words).passed


# Stage 1 as Listing 5 reads instructions: strict only for an order, an exact header or count,
# column positions or a layout; naming the columns wanted is relaxed (reordering, extra columns pass)
NAMES_COLUMNS = [
    "Save out.xlsx with the columns Region, Units, Revenue, Date.",
    "Columns named Region, Units, Revenue and Date.",
    "输出文件的列名为：Region、Units、Revenue、Date。",
    "Create a summary table containing the following columns: Region, Units, Revenue, Date.",
    "Keep the columns Region, Units, Revenue and Date and save as clean.xlsx.",
    "新建一个表，包含以下列：Region、Units、Revenue、Date。",
    "Remove duplicate rows (keep the first) and save the result with the original columns.",
    "Filter the rows where Units > 50; headers: Region, Units, Revenue, Date.",
    "Add the Date of each region's first order to the table and save it as out.xlsx.",
    "汇总各地区的销量和收入，列名分别为 Region、Units、Revenue、Date。",
    # words near structure that set none: a new column's name, a value format, a row sort
    "Add a column X with the margin and keep the columns Region, Units, Revenue, Date.",
    "Write the dates in the same date format as the input file.",
    "Give every Date in the exact format YYYY-MM-DD.",
    "按 Revenue 排序，排序顺序为降序。",
    "Remove the rows whose column Order ID repeats and save the columns Region, Units, Revenue, Date.",
]
SETS_STRUCTURE = [
    ("Output the columns in this order: Region, Units, Revenue, Date.", "columns in this order"),
    ("The output must have exactly 4 columns: Region, Units, Revenue, Date.", "exactly 4 columns"),
    ("Write the header row exactly as in the template and fill in the totals.", "as in the template"),
    ("Keep the same format as the input file; only fill in the blank cells.", "Keep the same format"),
    ("Keep the original column order and replace every 'N/A' with blank.", "column order"),
    ("Column A holds the region, column B the units, column C the revenue.", "Column A holds"),
    ("The first column is Region, followed by Units, Revenue and Date.", "The first column is"),
    ("列依次为：Region、Units、Revenue、Date。", "依次为"),
    ("请按照模板格式输出，与模板一致。", "与模板一致"),
    ("保持原表格式不变，只替换错误的地区名称。", "保持原表格式"),
    ("第一列为 Region，第二列为 Units。", "第一列为"),
    ("Put the regions in column A and the units in column B.", "in column A"),
    ("Keep the same table layout as the input workbook.", "same table layout as"),
]


def moved_and_wider(tmp_path: Path) -> tuple[Path, Path]:
    moved = xlsx(tmp_path / "m.xlsx", [[r[1], r[0], r[2], r[3]] for r in ROWS],
                 header=["Units", "Region", "Revenue", "Date"])
    wider = xlsx(tmp_path / "w.xlsx", [[*r, "x"] for r in ROWS], header=[*HEADER, "Note"])
    return moved, wider


@pytest.mark.parametrize("instruction", NAMES_COLUMNS)
def test_an_instruction_that_names_the_columns_is_relaxed(tmp_path: Path, instruction: str) -> None:
    assert read_structure([instruction]).strict is False
    moved, wider = moved_and_wider(tmp_path)
    for pred in (moved, wider):  # another column order, one extra column: Listing 5's relaxed mode passes both
        r = compare_sheets(ref(tmp_path), pred, instruction=instruction)
        assert r.passed and r.mode == "tolerant", r.reason
        assert "relaxed mode" in r.checked[0]
    narrow = xlsx(tmp_path / "n.xlsx", [r[:3] for r in ROWS], header=HEADER[:3])
    fails_at(compare_sheets(ref(tmp_path), narrow, instruction=instruction), "structure", "column 'Date' is missing")


@pytest.mark.parametrize(("instruction", "phrase"), SETS_STRUCTURE)
def test_an_instruction_that_sets_order_header_or_layout_is_strict(tmp_path: Path, instruction: str, phrase: str) -> None:
    rule = read_structure([instruction])
    assert rule.strict and phrase in rule.why
    moved, wider = moved_and_wider(tmp_path)
    r = compare_sheets(ref(tmp_path), moved, instruction=instruction)
    fails_at(r, "structure", "column 1 should be 'Region', got 'Units'")
    assert r.mode == "strict" and phrase in r.checked[0]
    fails_at(compare_sheets(ref(tmp_path), wider, instruction=instruction), "structure", "column 5", "Note")
    assert compare_sheets(ref(tmp_path), ref(tmp_path), instruction=instruction).passed


@pytest.mark.parametrize("instruction", ["Keep only the Region, Units, Revenue and Date columns.",
                                         "Output these four columns and no other columns.",
                                         "只保留 Region、Units、Revenue、Date 四列。"])
def test_only_these_columns_forbids_extra_columns_but_not_another_order(tmp_path: Path, instruction: str) -> None:
    moved, wider = moved_and_wider(tmp_path)
    r = compare_sheets(ref(tmp_path), moved, instruction=instruction)
    assert r.passed and r.mode == "tolerant", r.reason
    fails_at(compare_sheets(ref(tmp_path), wider, instruction=instruction), "structure", "column 'Note' is not asked for")
    # "only" about rows is no column rule
    assert read_structure(["Keep only rows where Units is above 50."]).only_columns is None
    assert read_structure(["只保留前5名。"]).only_columns is None


def test_a_task_decision_wins_over_the_reading_and_says_why(tmp_path: Path) -> None:
    moved, _ = moved_and_wider(tmp_path)
    r = compare_sheets(ref(tmp_path), moved, instruction=NAMES_COLUMNS[0], strict=True, why="strict: the author says so")
    fails_at(r, "structure", "column 1 should be")
    assert r.checked[0] == "mode strict (strict: the author says so)"
    r = compare_sheets(ref(tmp_path), moved, instruction=SETS_STRUCTURE[0][0], strict=False)
    assert r.passed and r.mode == "tolerant" and "set by the task" in r.checked[0]


def test_float_tolerance(tmp_path: Path) -> None:
    tiny = xlsx(tmp_path / "t.xlsx", [[r[0], r[1], r[2] + 1e-9, r[3]] for r in ROWS])
    assert compare_sheets(ref(tmp_path), tiny).passed
    off = [list(r) for r in ROWS]
    off[3][2] += 1e-3
    r = compare_sheets(ref(tmp_path), xlsx(tmp_path / "o.xlsx", off))
    fails_at(r, "content", "reference row 5", "column 'Revenue'", "expected 610.75, got 610.751")


def test_dates_as_strings_and_numbers_as_text(tmp_path: Path) -> None:
    formats = ["2024-01-05", "02/10/2024", "15 March 2024", "Apr 20, 2024", "2024-05-25 00:00:00"]
    pred = [[r[0], str(r[1]), f"{r[2]:,.2f}", f] for r, f in zip(ROWS, formats, strict=True)]
    assert compare_sheets(ref(tmp_path), xlsx(tmp_path / "d.xlsx", pred)).passed
    day_first = [[*r[:3], r[3].strftime("%d/%m/%Y")] for r in ROWS]  # 20/04/2024 makes the column day-first
    assert compare_sheets(ref(tmp_path), xlsx(tmp_path / "dm.xlsx", day_first)).passed
    wrong = [[*r[:3], r[3].replace(day=1).date().isoformat()] for r in ROWS]
    fails_at(compare_sheets(ref(tmp_path), xlsx(tmp_path / "w.xlsx", wrong)), "content", "column 'Date'")


def test_null_spellings_and_whitespace_are_equal(tmp_path: Path) -> None:
    header = ["Name", "Comment", "Score"]
    base = [["a", None, 1], ["b", None, None], ["c", "ok  then", 3]]
    spelled = [["a ", "", 1], [" b", "N/A", "NULL"], ["c", "  ok then ", 3.0]]
    assert compare_sheets(xlsx(tmp_path / "r.xlsx", base, header), xlsx(tmp_path / "p.xlsx", spelled, header)).passed
    assert all(normalise(v, "text") is None for v in ("", "nan", "NaN", "null", "None", "n/a", "#N/A", float("nan")))
    assert normalise("NA", "text") == "NA"


def test_percent_and_accounting_numbers_only_where_reference_is_numeric() -> None:
    assert normalise("1,234.50", "number") == 1234.5
    assert normalise("1,234.50", "text") == "1,234.50"
    assert normalise("(1,200)", "number") == -1200.0
    assert normalise("12,5", "number") == 12.5
    assert normalise("12%", "number") == Percent(12.0)
    assert cells_equal(0.12, Percent(12.0)) and cells_equal(12.0, Percent(12.0))
    assert not cells_equal(0.13, Percent(12.0))


def test_missing_rows_fail_content_surplus_rows_fail_the_row_count(tmp_path: Path) -> None:
    less = xlsx(tmp_path / "l.xlsx", ROWS[:4])
    fails_at(compare_sheets(ref(tmp_path), less), "content", "reference row 6", "Central")
    more = xlsx(tmp_path / "m.xlsx", [*ROWS, ["Islands", 1, 2.0, datetime(2024, 6, 1)]])
    r = compare_sheets(ref(tmp_path), more)
    fails_at(r, "constraints", "expected 5 data rows, got 6", "prediction row 7", "Islands")
    assert "row count on 'Data': differs" in r.checked


def _big_rows(n: int) -> list[list[Any]]:
    rng = random.Random(7)
    return [[f"ID-{i:05d}", rng.randint(1, 500), round(rng.uniform(1, 1000), 2), datetime(2024, 1 + i % 12, 1 + i % 28)]
            for i in range(n)]


def test_large_sheet_is_sampled_and_a_corrupted_sampled_row_fails(tmp_path: Path) -> None:
    rows = _big_rows(5000)
    header = ["ID", "Units", "Price", "Date"]
    reference = xlsx(tmp_path / "big.xlsx", rows, header)
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    r = compare_sheets(reference, xlsx(tmp_path / "big_shuffled.xlsx", shuffled, header))
    assert r.passed, r.reason
    # sampled, not compared row by row: what keeps a large sheet quick (no wall-clock bound here,
    # which a loaded machine broke: 20 s were not enough at a load average of 12 on 2 cores)
    assert any("sampled" in c and "of 5000" in c for c in r.checked), r.checked
    bad = [list(x) for x in rows]
    bad[4999][1] += 1  # the last row is always in the tail sample
    r = compare_sheets(reference, xlsx(tmp_path / "big_bad.xlsx", bad, header))
    fails_at(r, "content", "ID-04999", "column 'Units'")
    # the sample is deterministic: the same seed compares the same rows
    assert compare_sheets(reference, reference, seed=3).checked == compare_sheets(reference, reference, seed=3).checked


def test_csv_and_xlsx_of_the_same_data_pass(tmp_path: Path) -> None:
    lines = [",".join(HEADER)] + [f"{r[0]},{r[1]},{r[2]},{r[3].date().isoformat()}" for r in ROWS]
    (tmp_path / "out.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert compare_sheets(ref(tmp_path), tmp_path / "out.csv").passed
    assert compare_sheets(tmp_path / "out.csv", ref(tmp_path)).passed
    european = [";".join(HEADER)] + [f"{r[0]};{r[1]};{str(r[2]).replace('.', ',')};{r[3]:%d.%m.%Y}" for r in ROWS]
    (tmp_path / "eu.csv").write_bytes(("\n".join(european) + "\n").encode("cp1252"))
    assert compare_sheets(ref(tmp_path), tmp_path / "eu.csv").passed
    assert compare_sheets(ref(tmp_path), tmp_path / "out.csv", strict=True).passed  # a csv has no sheet name


# -- stage 3 ------------------------------------------------------------------------------


def test_constraint_patterns() -> None:
    labels = [c.label for c in extract_constraints([
        "Remove duplicates, keep only rows where Units > 100 and sort by Revenue descending.",
        "List the top 5 regions; exclude rows where Region is 'West'.",
        "one row per region, in ascending order of Date.",
    ])]
    # one dedup policy: the keyed "one row per region" replaces the plain "remove duplicates"
    assert labels == ["sort(Revenue, descending)", "filter(Units > 100)", "filter(Region != 'West')",
                      "top_k(5)", "sort(Date, ascending)", "dedup(region)"]
    assert extract_constraints(["Summarise revenue by region in a workbook."]) == []


def test_duplicates_left_in_fail_constraints(tmp_path: Path) -> None:
    duped = xlsx(tmp_path / "dup.xlsx", [*ROWS, ROWS[1]])
    r = compare_sheets(ref(tmp_path), duped, instruction="Remove duplicates from the region list.")
    fails_at(r, "constraints", "duplicates remain in sheet 'Data'", "row 7 repeats an identical row", "first at row 3")
    assert r.constraints == ["dedup(all columns)"]
    keyed = [*ROWS, ["South", 96, 980.25, datetime(2024, 2, 10)]]  # a later duplicate that disagrees
    r = compare_sheets(ref(tmp_path), xlsx(tmp_path / "key.xlsx", keyed),
                       instruction="Drop duplicate Region rows (keep the first).")
    fails_at(r, "constraints", "row 7 repeats 'Region' = 'South'")
    assert r.constraints == ["dedup(Region)"]


def test_top_k_with_six_rows_fails(tmp_path: Path) -> None:
    six = xlsx(tmp_path / "six.xlsx", [*ROWS, ["Islands", 1, 2.0, datetime(2024, 6, 1)]])
    r = compare_sheets(ref(tmp_path), six, instruction="Give the top 5 regions by units.")
    fails_at(r, "constraints", "top-5 asks for 5 rows, sheet 'Data' has 6")
    assert r.constraints == ["top_k(5)"]
    assert compare_sheets(ref(tmp_path), ref(tmp_path), instruction="Give the top five regions.").passed


def test_sort_descending_violated_fails(tmp_path: Path) -> None:
    desc = sorted(ROWS, key=lambda x: -x[2])
    reference = xlsx(tmp_path / "r.xlsx", desc)
    violated = [desc[1], desc[0], *desc[2:]]
    instruction = "Sort by Revenue, highest first."
    r = compare_sheets(reference, xlsx(tmp_path / "p.xlsx", violated), instruction=instruction)
    fails_at(r, "content", "row order matters")
    # with tolerant content (no sort wording picked up for order) the constraint stage names the rows
    from deskbench.tracks.analytics.scoring.sheets_constraints import Constraint, check

    (t,) = load_tables(tmp_path / "p.xlsx")
    why = check(Constraint("sort", "Revenue", descending=True), t, ["Revenue"])
    assert why and "not sorted by 'Revenue' descending" in why and "row 2" in why


def test_filter_constraint(tmp_path: Path) -> None:
    kept = [r for r in ROWS if r[1] > 100]
    reference = xlsx(tmp_path / "r.xlsx", kept)
    r = compare_sheets(reference, reference, instruction="Keep only rows where Units > 100.")
    assert r.passed and "filter(Units > 100)" in r.constraints
    assert any("filter(Units > 100) on 'Data': holds" in c for c in r.checked)
    # a filter the reference itself breaks was misread: not applied
    r = compare_sheets(reference, reference, instruction="only rows where Units < 10")
    assert r.passed and any("not applied" in c for c in r.checked)
    from deskbench.tracks.analytics.scoring.sheets_constraints import Constraint, check

    (t,) = load_tables(ref(tmp_path))
    assert "row 3 breaks filter(Region = 'north'): 'Region' is 'South'" in (check(Constraint("filter", "Region", op="=", value="north"), t, ["Region"]) or "")


def test_unknown_constraints_are_not_guessed(tmp_path: Path) -> None:
    r = compare_sheets(ref(tmp_path), ref(tmp_path), instruction="sort by colour, keep the pivot tidy")
    assert r.passed and r.constraints == ["sort(colour, ascending)"]
    assert any("not checked" in c for c in r.checked)


# -- the generator's own reference files ---------------------------------------------------


def test_generator_references_pass_against_themselves_and_mutations_fail(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    generate_analytics(out, tasks=6, seed=11)
    tasks = [t for t in read_tasks(out / "tasks.jsonl").items if t.category == "file_generation"]
    assert {t.template for t in tasks} == {"file_region_summary", "file_clean_orders"}
    for task in tasks:
        assert task.reference_file is not None
        reference = out / task.reference_file.path
        same = compare_task_output(task, out, reference)
        assert same.passed, (task.id, same.reason)
        # the summary's key points ask for "the five columns in order"; the clean-up names its columns only
        assert same.mode == ("strict" if task.template == "file_region_summary" else "tolerant"), same.checked
        assert same.constraints
        # tolerant, from the instruction alone
        assert compare_sheets(reference, reference, instruction=task.instruction, key_points=task.key_points).passed

        mutated = tmp_path / f"{task.id}-mut.xlsx"
        shutil.copy(reference, mutated)
        wb = load_workbook(mutated)
        ws = wb.worksheets[0]
        col = next(c for c in range(1, ws.max_column + 1) if isinstance(ws.cell(row=3, column=c).value, (int, float)))
        ws.cell(row=3, column=col).value += 1
        wb.save(mutated)
        header = ws.cell(row=1, column=col).value
        fails_at(compare_task_output(task, out, mutated), "content", "row 3", f"column '{header}'")
        fails_at(compare_sheets(reference, mutated), "content", f"column '{header}'")
        text = tmp_path / f"{task.id}-text.xlsx"
        ws.cell(row=3, column=col).value = "n/a"
        for r in range(2, ws.max_row + 1):
            ws.cell(row=r, column=col).value = f"about {r}"
        wb.save(text)
        if same.mode == "strict":
            fails_at(compare_task_output(task, out, text), "structure", f"column '{header}' holds text")
        else:
            fails_at(compare_task_output(task, out, text), "content", f"column '{header}'")

        renamed = tmp_path / f"{task.id}-ren.xlsx"
        wb = load_workbook(reference)
        wb.worksheets[0].title = "Sheet1"
        wb.save(renamed)
        # the instruction names its sheets: a renamed sheet fails, strict or relaxed
        fails_at(compare_task_output(task, out, renamed), "structure",
                 "sheets differ" if same.mode == "strict" else "is missing")


# -- the command ----------------------------------------------------------------------------


def test_cli_json_and_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    reference = ref(tmp_path)
    res = runner.invoke(app, ["compare-sheets", str(reference), str(reference), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["pass"] is True and data["stage"] == "done" and isinstance(data["reason"], str)
    assert set(data) == {"pass", "stage", "reason", "mode", "checked", "constraints"}

    shuffled = xlsx(tmp_path / "s.xlsx", [ROWS[i] for i in (2, 0, 4, 1, 3)])
    res = runner.invoke(app, ["compare-sheets", str(reference), str(shuffled), "--strict", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["mode"] == "strict"  # no order asked: rows as a multiset
    res = runner.invoke(app, ["compare-sheets", str(reference), str(shuffled), "--strict", "--json",
                              "--instruction", "sorted by Date ascending"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert (data["pass"], data["stage"], data["mode"]) == (False, "content", "strict")

    res = runner.invoke(app, ["compare-sheets", str(reference), str(shuffled), "--instruction", "sorted by Date ascending"])
    assert res.exit_code == 1 and res.stdout.startswith("FAIL at content: ")
    res = runner.invoke(app, ["compare-sheets", str(reference), str(shuffled), "--tolerant"])
    assert res.exit_code == 0 and res.stdout.strip() == "PASS"

    res = runner.invoke(app, ["compare-sheets", str(reference), str(tmp_path / "missing.xlsx")])
    assert isinstance(res.exception, UserError) and "missing.xlsx does not exist" in str(res.exception)


def test_cli_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = run_cli("compare-sheets", str(ref(tmp_path)), str(tmp_path / "nope.xlsx"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "nope.xlsx" in lines[0]
    bad_ref = tmp_path / "bad.xlsx"
    bad_ref.write_text("not a workbook")
    proc = run_cli("compare-sheets", str(bad_ref), str(ref(tmp_path)))
    assert proc.returncode == 2 and "reference" in proc.stderr and "Traceback" not in proc.stderr


def test_formulas_without_cached_values_are_computed(tmp_path: Path) -> None:
    """openpyxl writes formulas with no cached value (as model code does): the comparator reads
    them through corpus/office's evaluator instead of seeing empty cells."""
    from openpyxl import Workbook

    ref_wb, out_wb = Workbook(), Workbook()
    ref_wb.active.append(["Region", "Q1", "Q2", "Total"])
    out_wb.active.append(["Region", "Q1", "Q2", "Total"])
    for i, (q1, q2) in enumerate([(10, 5), (7.5, 2.25)], start=2):
        ref_wb.active.append([f"R{i}", q1, q2, q1 + q2])
        out_wb.active.append([f"R{i}", q1, q2, f"=B{i}+C{i}"])
    ref_wb.save(tmp_path / "ref.xlsx")
    out_wb.save(tmp_path / "out.xlsx")
    assert compare_sheets(tmp_path / "ref.xlsx", tmp_path / "out.xlsx").passed
    out_wb.active["D3"] = "=B3*C3"
    out_wb.save(tmp_path / "out.xlsx")
    result = compare_sheets(tmp_path / "ref.xlsx", tmp_path / "out.xlsx")
    assert not result.passed and result.stage == "content" and "Total" in result.reason
