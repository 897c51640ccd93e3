"""Office readers and the consulting paper's normalisation, on files made in each test."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from docx import Document as DocxDocument
from openpyxl import Workbook, load_workbook
from pptx import Presentation
from pptx.util import Inches

from deskbench.corpus.csvread import decode, sniff_delimiter
from deskbench.corpus.headers import detect_header
from deskbench.corpus.office import (
    NormalisedPart,
    UnreadableFile,
    normalise,
    read_document,
    read_slides,
    read_spreadsheet,
    to_text,
)
from deskbench.corpus.sheets import render_value, to_tsv
from deskbench.corpus.xlvalues import ExcelError, Unevaluated
from deskbench.errors import UserError


def _formula_book(path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = "Data"
    ws.append(["Item", "Qty", "Price", "Total"])
    for i, (qty, price) in enumerate([(2, 1.5), (3, 2.25), (1, 10)], start=2):
        ws.append([f"item {i}", qty, price, f"=B{i}*C{i}"])
    ws["F1"], ws["F2"] = "=SUM(D2:D4)", "=ROUND(AVERAGE(D2:D4),2)"
    ws["F3"], ws["F4"] = '=IF(F1>10,"big","small")', "=MIN(B2:B4)+MAX(B2:B4)+COUNT(A2:C4)+COUNTA(A1:A9)"
    ws["F5"], ws["F6"] = "=F1/0", "=XLOOKUP(1,B2:B4,C2:C4)"
    ws["F7"], ws["F8"] = "=F6+1", "=ROUND(2.5,0)+ROUND(-2.5,0)+10%"
    ws["F9"] = '=SUMIF(B2:B4,">1",D2:D4)&"|"&COUNTIF(A2:A4,"item*")'
    other = wb.create_sheet("Other Sheet")
    other["A1"] = "=Data!F1*2"
    other["A2"] = "='Other Sheet'!A1+SUM(Data!B:B)"
    other["A3"] = "=A4"
    other["A4"] = "=A3"
    wb.save(path)


def test_formulas_without_cached_values_are_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "f.xlsx"
    _formula_book(path)
    assert load_workbook(path, data_only=True)["Data"]["D2"].value is None  # openpyxl caches nothing
    book = read_spreadsheet(path)
    data, other = book.sheets
    assert [data.cell(f"D{r}") for r in (2, 3, 4)] == [3, 6.75, 10]
    assert data.cell("F1") == 19.75 and data.cell("F2") == 6.58 and data.cell("F3") == "big"
    assert data.cell("F4") == 1 + 3 + 6 + 4
    assert data.cell("F5") == ExcelError("#DIV/0!")
    assert data.cell("F8") == 3 - 3 + 0.1  # half away from zero, as Excel
    assert data.cell("F9") == "9.75|3"
    unevaluated = data.cell("F6")
    assert isinstance(unevaluated, Unevaluated) and "XLOOKUP" in unevaluated.reason
    assert isinstance(data.cell("F7"), Unevaluated)  # depends on F6: marked, never empty
    assert other.cell("A1") == 39.5 and other.cell("A2") == 45.5
    assert isinstance(other.cell("A3"), Unevaluated) and "circular" in other.cell("A4").reason
    assert book.notes and "could not be evaluated" in book.notes[0]
    assert "#UNEVALUATED =XLOOKUP" in to_tsv(data)


def test_cached_values_are_used(tmp_path: Path) -> None:
    """A workbook saved by Excel holds cached values: they win over evaluation."""
    path = tmp_path / "cached.xlsx"
    _formula_book(path)
    # Write a cached value into the sheet XML, as Excel would: <c r="D2"><f>B2*C2</f><v>999</v></c>
    import zipfile

    with zipfile.ZipFile(path) as zin:
        items = {n: zin.read(n) for n in zin.namelist()}
    sheet = items["xl/worksheets/sheet1.xml"].decode()
    sheet = sheet.replace("<f>B2*C2</f><v></v>", "<f>B2*C2</f><v>999</v>").replace(
        "<f>B2*C2</f><v />", "<f>B2*C2</f><v>999</v>")
    assert "<v>999</v>" in sheet, sheet[:2000]
    items["xl/worksheets/sheet1.xml"] = sheet.encode()
    with zipfile.ZipFile(path, "w") as zout:
        for name, data in items.items():
            zout.writestr(name, data)
    data = read_spreadsheet(path).sheets[0]
    assert data.cell("D2") == 999
    assert data.cell("F1") == 999 + 6.75 + 10  # computed from the cached dependency


def test_plain_workbook_keeps_types_and_dates(tmp_path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = "Sales"
    ws["A1"] = "Quarterly sales"  # a title line above the table
    ws.append([])
    ws.append(["Region", "Date", "Revenue", "Share"])
    ws.append(["North", datetime(2024, 1, 31), 1200.5, 0.25])
    ws.append(["South", datetime(2024, 2, 29, 12, 30), 800, 0.1 + 0.2])
    wb.save(tmp_path / "s.xlsx")
    sheet = read_spreadsheet(tmp_path / "s.xlsx").sheets[0]
    assert (sheet.header_row, sheet.header_depth) == (3, 1)
    tsv = to_tsv(sheet)
    assert tsv.splitlines()[0] == "# sheet: Sales; header_row: 3; header_depth: 1; rows: 5; cols: 4"
    assert tsv.splitlines()[4] == "North\t2024-01-31\t1200.5\t0.25"
    assert tsv.splitlines()[5] == "South\t2024-02-29 12:30:00\t800\t0.3"
    assert dict(sheet.cells())["C4"] == 1200.5


def test_merged_two_row_header_stays_visible(tmp_path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = "Schools"
    ws.append(["Region", "High schools", None, "Total"])
    ws.append([None, "General", "Vocational", None])
    ws.merge_cells("A1:A2")
    ws.merge_cells("B1:C1")
    ws.merge_cells("D1:D2")
    for region, g, v in (("Region 1", 500, 300), ("Region 4", 800, 200)):
        ws.append([region, g, v, g + v])
    wb.save(tmp_path / "m.xlsx")
    sheet = read_spreadsheet(tmp_path / "m.xlsx").sheets[0]
    assert (sheet.header_row, sheet.header_depth) == (1, 2)
    assert sheet.merged == ("A1:A2", "B1:C1", "D1:D2")
    lines = to_tsv(sheet).splitlines()
    assert lines[0].startswith("# sheet: Schools; header_row: 1; header_depth: 2;")
    assert lines[1] == "Region\tHigh schools\tHigh schools\tTotal"
    assert lines[2] == "Region\tGeneral\tVocational\tTotal"
    assert lines[4] == "Region 4\t800\t200\t1000"


def test_header_detection_cases() -> None:
    assert detect_header([["Region", 2022, 2023], ["North", 1, 2]]) == (1, 1)  # years as headers
    assert detect_header([[1, 2], [3, 4]]) == (None, 0)
    assert detect_header([["Name", "City"], ["Ann", "Oslo"]]) == (1, 1)  # no numbers anywhere
    assert detect_header([]) == (None, 0)
    title = [["Report", "Report", "Report"], ["A", "B", "C"], [1, 2, 3]]
    assert detect_header(title, [(1, 1, 3, 1)]) == (2, 1)  # a merged banner is a title


def test_csv_cp1252_semicolon_decimal_comma(tmp_path: Path) -> None:
    path = tmp_path / "preise.csv"
    path.write_bytes("Artikel;Preis;Menge\nCafé crème;1,50;3\nRésumé;2,75;10\n".encode("cp1252"))
    book = read_spreadsheet(path)
    assert (book.encoding, book.delimiter, book.file_type) == ("cp1252", ";", "csv")
    sheet = book.sheets[0]
    assert sheet.name == "preise" and sheet.header_row == 1
    assert sheet.rows[1] == ["Café crème", "1,50", 3]  # decimal comma stays text
    assert sheet.rows[2] == ["Résumé", "2,75", 10]


def test_csv_gb18030_and_utf16(tmp_path: Path) -> None:
    text = "地区,销售额,利润\n华东,1200,300\n华南,800,150\n"
    (tmp_path / "cn.csv").write_bytes(text.encode("gb18030"))
    book = read_spreadsheet(tmp_path / "cn.csv")
    assert book.encoding == "gb18030" and book.sheets[0].rows[1] == ["华东", 1200, 300]
    (tmp_path / "u16.csv").write_bytes(("id\tname\n007\tÅsa\n").encode("utf-16"))
    book = read_spreadsheet(tmp_path / "u16.csv")
    assert (book.encoding, book.delimiter) == ("utf-16", "\t")
    assert book.sheets[0].rows == [["id", "name"], ["007", "Åsa"]]  # zero-padded code stays text
    (tmp_path / "bom.csv").write_bytes("a|b\n1|2\n".encode("utf-8-sig"))
    book = read_spreadsheet(tmp_path / "bom.csv")
    assert (book.encoding, book.delimiter, book.sheets[0].rows) == ("utf-8-sig", "|", [["a", "b"], [1, 2]])


def test_decode_and_sniff_edges() -> None:
    assert decode("naïve".encode("utf-16-le"))[1] == "utf-16-le"
    assert decode(b"plain")[1] == "utf-8"
    assert decode(bytes([0x81, 0x8D, 0x41]))[1] == "latin-1"  # undefined in cp1252
    assert sniff_delimiter("one column\nonly\n") == ","
    assert sniff_delimiter('name;note\nA;"x, y"\nB;"z, w"\n') == ";"
    assert sniff_delimiter("k|v\n1,5|2\n2,5|3\n") == "|"


def test_docx_headings_and_table(tmp_path: Path) -> None:
    doc = DocxDocument()
    doc.add_heading("Market Review", level=1)
    doc.add_paragraph("Demand grew in every region.")
    doc.add_heading("Figures", level=2)
    table = doc.add_table(rows=3, cols=3)
    for r, row in enumerate([["Region", "2023", "2024"], ["North", "10", "10"], ["Total", "", ""]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(2, 1).merge(table.cell(2, 2)).text = "20"
    doc.save(str(tmp_path / "memo.docx"))
    blocks = read_document(tmp_path / "memo.docx")
    assert [(b.text, b.level) for b in blocks[:3]] == [
        ("Market Review", 1), ("Demand grew in every region.", 0), ("Figures", 2)]
    assert blocks[3].cells == ("Region", "2023", "2024")
    assert blocks[4].text == "North | 10 | 10"  # equal neighbours are not merged cells
    assert blocks[5].cells == ("Total", "20")
    text = to_text(tmp_path / "memo.docx")
    assert text.startswith("# Market Review\nDemand grew in every region.\n## Figures\nRegion | 2023 | 2024\n")


def test_pptx_titles_body_and_notes(tmp_path: Path) -> None:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Investment Goal"
    slide.placeholders[1].text_frame.text = "Grow share\nCut cost"
    slide.notes_slide.notes_text_frame.text = "Say the number slowly."
    second = prs.slides.add_slide(prs.slide_layouts[6])  # blank: no title
    shape = second.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(4), Inches(1))
    for (r, c), text in {(0, 0): "KPI", (0, 1): "Value", (1, 0): "NPS", (1, 1): "42"}.items():
        shape.table.cell(r, c).text = text
    prs.save(str(tmp_path / "deck.pptx"))
    slides = read_slides(tmp_path / "deck.pptx")
    assert [s.title for s in slides] == ["Investment Goal", ""]
    assert [b.text for b in slides[0].blocks] == ["Grow share", "Cut cost"]
    assert slides[0].notes == "Say the number slowly."
    assert slides[1].blocks[1].cells == ("NPS", "42")
    assert to_text(tmp_path / "deck.pptx") == (
        "# Slide 1: Investment Goal\nGrow share\nCut cost\nNotes: Say the number slowly.\n\n"
        "# Slide 2\nKPI | Value\nNPS | 42\n")


def test_normalise_parts_and_errors(tmp_path: Path) -> None:
    _formula_book(tmp_path / "f.xlsx")
    parts = normalise(tmp_path / "f.xlsx")
    assert [(p.kind, p.name, p.header_row) for p in parts] == [("sheet", "Data", 1), ("sheet", "Other Sheet", None)]
    assert parts[0].text.startswith("# sheet: Data; header_row: 1;")
    (tmp_path / "n.md").write_text("# Note\nhello\n")
    assert normalise(tmp_path / "n.md") == [NormalisedPart(tmp_path / "n.md", "document", "n.md", "# Note\nhello\n")]
    (tmp_path / "broken.xlsx").write_bytes(b"not a zip")
    with pytest.raises(UnreadableFile, match="broken.xlsx: does not open as xlsx"):
        normalise(tmp_path / "broken.xlsx")
    (tmp_path / "old.xls").write_bytes(b"\xd0\xcf\x11\xe0")
    with pytest.raises(UnreadableFile, match=r"no reader for \.xls; save it as \.xlsx"):
        normalise(tmp_path / "old.xls")
    with pytest.raises(UserError, match="no such file"):
        read_spreadsheet(tmp_path / "absent.csv")


def test_normalise_pdf_pages(tmp_path: Path) -> None:
    from deskbench.generate.pdfs import PageSpec, write_pdf

    path = tmp_path / "r.pdf"
    write_pdf(path, [PageSpec("Revenue", ["Revenue grew by twelve percent in the northern region."]),
                     PageSpec("Costs", ["Costs fell by three percent across every division."])])
    [part] = normalise(path)
    assert part.text.startswith("--- page 1 ---\n") and "twelve percent" in part.text
    assert part.text.index("--- page 2 ---") < part.text.index("three percent")


def test_render_value() -> None:
    assert [render_value(v) for v in (None, True, 54.0, 0.83, 1e20, ExcelError("#N/A"))] == [
        "", "TRUE", "54", "0.83", "1e+20", "#N/A"]


def test_deliverable_reader_sees_computed_formulas(tmp_path: Path) -> None:
    """tracks/deliverables/scoring/office.py reads through the corpus readers: an agent's openpyxl-written workbook
    is checked on its formulas' values, not on empty cells."""
    from deskbench.tracks.deliverables.scoring.office import read_output, xlsx_cell

    _formula_book(tmp_path / "out.xlsx")
    doc = read_output(tmp_path / "out.xlsx")
    assert doc.workbook is not None
    assert xlsx_cell(doc.workbook, "Data!F1") == (19.75, "Data!F1")
    assert xlsx_cell(doc.workbook, "Data!F5") == ("#DIV/0!", "Data!F5")
    assert "item 2 | 2 | 1.5 | 3" in doc.text
    assert "#UNEVALUATED =XLOOKUP(1,B2:B4,C2:C4)" in doc.text


def test_text_of_an_infinite_or_nan_float_is_num_not_a_crash() -> None:
    """`&` and CONCATENATE of a number Excel cannot hold: its #NUM!, as arithmetic gives (text_of
    once raised TypeError formatting the error value as a number)."""
    from deskbench.corpus.xlvalues import binary, text_of

    assert [text_of(x) for x in (float("inf"), float("-inf"), float("nan"))] == ["#NUM!"] * 3
    assert text_of(2.5) == "2.5" and text_of(3.0) == "3" and text_of(0.1 + 0.2) == "0.3"
    assert binary("&", "x", float("inf")) == "x#NUM!"
