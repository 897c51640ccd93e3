"""Verifiers one kind at a time (pass, fail, unobservable), number parsing, pass rate V, and
task.yaml validation errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from docx import Document as DocxDocument
from openpyxl import Workbook
from pptx import Presentation
from pydantic import TypeAdapter

from deskbench.errors import UserError
from deskbench.scoring.numbers import find_numbers, parse_number, to_unit
from deskbench.tracks.deliverables.generate.common import lure_pattern
from deskbench.tracks.deliverables.generate.packages import generate_deliverables
from deskbench.tracks.deliverables.scoring.verifiers import (
    REGISTRY,
    VerifierResult,
    run_verifiers,
    verifier_pass_rate,
)
from deskbench.tracks.deliverables.tasks import load_package
from deskbench.tracks.deliverables.verifier_specs import VERIFIER_KINDS, VerifierSpec

SPECS = TypeAdapter(list[VerifierSpec])


def check(spec: dict[str, Any], response: str = "", outputs: Path | None = None,
          judge: Any = None) -> VerifierResult:
    return run_verifiers(SPECS.validate_python([{"id": "v", **spec}]), response, outputs,
                         judge=judge)[0]


@pytest.mark.parametrize(
    ("text", "value", "scale"),
    [
        ("₹1,234.5 Cr", 1234.5e7, "cr"),
        ("12.5 million", 12.5e6, "million"),
        ("3.4bn", 3.4e9, "bn"),
        ("45%", 45.0, "%"),
        ("(1,200)", -1200.0, None),
        ("1,23,456", 123456.0, None),
        ("Rs. 1,250 lakh", 1250e5, "lakh"),
        ("$9.9M", 9.9e6, "m"),
        ("-3.25", -3.25, None),
        ("USD 4,536,000.00", 4536000.0, None),
        ("6.8 min", 6.8, None),  # "m" of "min" is not million
    ],
)
def test_number_parsing(text: str, value: float, scale: str | None) -> None:
    n = parse_number(text)
    assert n is not None
    assert n.value == pytest.approx(value)
    assert n.scale_word == scale


def test_unit_conversion_and_bad_grouping() -> None:
    lakh = parse_number("1,250 lakh")
    assert lakh is not None and to_unit(lakh, "crore") == pytest.approx(12.5)
    assert [n.value for n in find_numbers("1,2345")] != [12345.0]  # not a valid grouping


def test_numeric_by_label_units_and_tolerance() -> None:
    spec = {"kind": "numeric", "label": "Total revenue", "expected": 12.5, "unit": "crore",
            "abs_tol": 0.01}
    assert check(spec, "Total revenue: 1,250 lakh").status == "pass"
    assert check(spec, "Total revenue: ₹12.5 Cr").status == "pass"
    assert check(spec, "Total revenue: 12.50").status == "pass"  # bare: read in the unit
    assert check(spec, "Total revenue: 125,000,000").status == "pass"  # bare: read in ones
    r = check(spec, "Total revenue: 12.6 Cr")
    assert r.status == "fail" and "12.6" in r.evidence
    r = check(spec, "Revenue was fine")
    assert r.status == "unobservable" and "not found" in r.evidence


def test_numeric_last_occurrence_range_and_index() -> None:
    text = "Draft total: 10\nTotal: 40 | 55 | 70\nTotal: 41 | 56"
    assert check({"kind": "numeric", "label": "Total:", "range": [40.5, 42]}, text).status == "pass"
    assert check({"kind": "numeric", "label": "Total:", "occurrence": "first", "index": 2,
                  "expected": 70}, text).status == "pass"
    assert check({"kind": "numeric", "label": "Total:", "range": [1, 5]}, text).status == "fail"


def test_numeric_tight_tolerance_separates_weighted_from_simple_mean() -> None:
    spec = {"kind": "numeric", "label": "Current AHT", "expected": 6.94, "abs_tol": 0.02}
    assert check(spec, "Current AHT: 6.95 min").status == "pass"
    assert check(spec, "Current AHT: 6.80 min").status == "fail"


def test_numeric_in_files(tmp_path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = "Model"
    ws.append(["Segment", "Value"])
    ws.append(["Total contribution", 123.45])
    ws.append(["Text figure", "INR 1,500 lakh"])
    wb.save(tmp_path / "m.xlsx")
    (tmp_path / "p.json").write_text(json.dumps({"a": {"b": 7.5, "s": "x"}}))
    base = {"kind": "numeric", "file": "m.xlsx"}
    assert check({**base, "label": "total contribution", "expected": 123.45}, "", tmp_path).status == "pass"
    assert check({**base, "cell": "Model!B2", "expected": 123.45}, "", tmp_path).status == "pass"
    assert check({**base, "label": "Text figure", "expected": 15, "unit": "crore"}, "",
                 tmp_path).status == "pass"
    assert check({**base, "cell": "Nope!B2", "expected": 1}, "", tmp_path).status == "unobservable"
    j = {"kind": "numeric", "file": "p.json"}
    assert check({**j, "json_path": "a.b", "expected": 7.5}, "", tmp_path).status == "pass"
    assert check({**j, "json_path": "a.zz", "expected": 7.5}, "", tmp_path).status == "unobservable"
    r = check({**base, "file": "missing.xlsx", "label": "x", "expected": 1}, "", tmp_path)
    assert r.status == "unobservable" and "not found" in r.evidence


def test_decision_line() -> None:
    spec = {"kind": "decision_line", "expected": "DECISION: SIGN FIXED CONTRACT"}
    assert check(spec, "Memo...\n**DECISION: SIGN FIXED CONTRACT**").status == "pass"
    assert check(spec, "DECISION: SIGN FIXED CONTRACT\nDECISION: USE SPOT MARKET").status == "fail"
    assert check(spec, "DECISION: sign fixed contract").status == "fail"
    r = check(spec, "We recommend the fixed contract.")
    assert r.status == "fail" and "no line" in r.evidence


def test_regex_present_absent_and_lure_pattern() -> None:
    absent = {"kind": "regex_absent", "pattern": lure_pattern("All-In Cost", 7380000, 0)}
    assert check(absent, "Spot Market All-In Cost: USD 7,380,000").status == "fail"
    assert check(absent, "Spot Market All-In Cost: USD 8,676,000").status == "pass"
    # explaining the trap on another line is not using it
    assert check(absent, "All-In Cost: 8,676,000\nthe draft gave 7,380,000").status == "pass"
    assert check(absent, "Spot Market All-In Cost: USD 7,380,000.40").status == "fail"  # cents
    # a value whose decimals are zero is not the whole part of a different figure
    headline = {"kind": "regex_absent", "pattern": lure_pattern("Top Quartile AHT", 5.0, 1)}
    for text, status in (("Top Quartile AHT: 5.6 min", "pass"), ("Top Quartile AHT: 5 min", "fail"),
                         ("Top Quartile AHT: 5.0 min", "fail"), ("Top Quartile AHT: 5.", "fail"),
                         ("Top Quartile AHT: 15.0 min", "pass")):
        assert check(headline, text).status == status, text
    present = {"kind": "regex_present", "pattern": "Mordor Intelligence"}
    assert check(present, "source: mordor intelligence 2025").status == "pass"
    assert check(present, "source: a blog").status == "fail"


SCHEMA = {"cost": {"a": "number", "b": "number"}, "decision": {"rec": "string"}}


@pytest.mark.parametrize(
    ("text", "status", "needle"),
    [
        ('{"cost": {"a": 1, "b": 2.5}, "decision": {"rec": "ACCEPT"}}', "pass", "match"),
        ('{"cost": {"b": 2.5, "a": 1}, "decision": {"rec": "ACCEPT"}}', "fail", "order"),
        ('{"cost": {"a": 1, "b": 2.5, "c": 3}, "decision": {"rec": "ACCEPT"}}', "fail", "extra"),
        ('{"cost": {"a": "1", "b": 2.5}, "decision": {"rec": "ACCEPT"}}', "fail", "not a number"),
        ('{"cost": {"a": 1, "b": 2.5,}, "decision": {"rec": "ACCEPT"}}', "fail", "not valid JSON"),
        ('{"cost": {"a": 1, "a": 1, "b": 2}, "decision": {"rec": "X"}}', "fail", "duplicate"),
        ('```json\n{"cost": {"a": 1, "b": 2}, "decision": {"rec": "X"}}\n```', "fail", "JSON"),
    ],
)
def test_json_strict(text: str, status: str, needle: str) -> None:
    r = check({"kind": "json_strict", "schema": SCHEMA}, text)
    assert r.status == status and needle in r.evidence


def test_json_strict_file_and_exact_value(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text('{"cost": {"a": 1, "b": 2}, "decision": {"rec": "REJECT"}}')
    assert check({"kind": "json_strict", "schema": SCHEMA, "file": "plan.json"}, "",
                 tmp_path).status == "pass"
    assert check({"kind": "json_strict", "schema": SCHEMA, "file": "nope.json"}, "",
                 tmp_path).status == "unobservable"
    ev = {"kind": "exact_value", "file": "plan.json", "json_path": "decision.rec"}
    assert check({**ev, "expected": "REJECT"}, "", tmp_path).status == "pass"
    assert check({**ev, "expected": "ACCEPT"}, "", tmp_path).status == "fail"


def _docx(path: Path, headings: list[str]) -> None:
    doc = DocxDocument()
    for h in headings:
        doc.add_heading(h, level=2)
        doc.add_paragraph("Body text " * 5)
    doc.save(str(path))


def test_file_sections_all_formats(tmp_path: Path) -> None:
    _docx(tmp_path / "memo.docx", ["Fixed Contract Cost", "Recommendation"])
    wb = Workbook()
    wb.active.title = "Table 1"
    wb.save(tmp_path / "t.xlsx")
    prs = Presentation()
    for title in ("Investment Goal", "Target Market"):
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = title
    prs.save(str(tmp_path / "deck.pptx"))
    (tmp_path / "broken.docx").write_bytes(b"not a zip")

    def fs(file: str, sections: list[str]) -> VerifierResult:
        return check({"kind": "file_sections", "file": file, "sections": sections}, "", tmp_path)

    assert fs("memo.docx", ["Fixed Contract Cost", "recommendation"]).status == "pass"
    assert fs("memo.docx", ["Spot Market Cost"]).status == "fail"
    assert fs("t.xlsx", ["Table 1"]).status == "pass"
    assert fs("deck.pptx", ["Investment Goal", "Target Market"]).status == "pass"
    assert fs("deck.pptx", ["Competitor Analysis"]).status == "fail"
    r = fs("broken.docx", [])
    assert r.status == "fail" and "does not open" in r.evidence
    r = fs("absent.pptx", [])
    assert r.status == "fail" and "not produced" in r.evidence


def test_word_limit_and_section_count() -> None:
    text = "# Report\n## Section A - Gaps\n" + "word " * 20 + "\n## Section B\nshort text\n"
    wl = {"kind": "word_limit", "section": "Section A"}
    assert check({**wl, "max_words": 20}, text).status == "pass"
    assert check({**wl, "max_words": 19}, text).status == "fail"
    assert check({**wl, "section": "Section C", "max_words": 5}, text).status == "unobservable"
    assert check({"kind": "section_count", "min_sections": 3, "max_sections": 3}, text).status == "pass"
    assert check({"kind": "section_count", "max_sections": 2}, text).status == "fail"


def test_llm_check_unobservable_without_judge_and_pass_rate() -> None:
    r = check({"kind": "llm_check", "criterion": "is polite"}, "hello")
    assert r.status == "unobservable" and r.judged
    judged = check({"kind": "llm_check", "criterion": "is polite"}, "hello",
                   judge=lambda criterion, text: ("hello" in text, "greets"))
    assert judged.status == "pass" and judged.judged
    results = [r, judged, VerifierResult(status="fail", evidence="x")]
    v = verifier_pass_rate(results)
    assert (v.passed, v.failed, v.unobservable, v.judged, v.total) == (1, 1, 1, 2, 3)
    assert v.v == pytest.approx(100 / 3)
    assert verifier_pass_rate([]).v == 0.0


def test_registry_covers_every_spec_kind() -> None:
    assert set(VERIFIER_KINDS) == set(REGISTRY)


@pytest.fixture()
def package(tmp_path: Path) -> Path:
    generate_deliverables(tmp_path, tasks=3, seed=11)
    return tmp_path / "dl-0003-scp"


def _break(pkg: Path, edit: Any) -> None:
    import yaml

    data = yaml.safe_load((pkg / "task.yaml").read_text())
    edit(data)
    (pkg / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.pop("golden"), "field 'golden'"),
        (lambda d: d.update(prompt_class="XYZ"), "field 'prompt_class'"),
        (lambda d: d["verifiers"][2].pop("json_path"), "field 'verifiers.2' (numeric verifier)"),
        (lambda d: d["verifiers"][1].update(kind="magic"), "field 'verifiers.1'"),
        (lambda d: d["traps"][0]["verifiers"].append("ghost"), "ghost"),
        (lambda d: d["rubric"].pop(), "DI, AR, RF, EP, FD"),
        (lambda d: d["inputs"].append("missing.csv"), "field 'inputs.3'"),
        (lambda d: d["verifiers"].append({"id": "r", "kind": "regex_absent", "pattern": "("}),
         "not a valid regular expression"),
    ],
)
def test_load_package_errors_are_one_line(package: Path, edit: Any, needle: str) -> None:
    load_package(package)  # valid as generated
    _break(package, edit)
    with pytest.raises(UserError) as err:
        load_package(package)
    message = str(err.value)
    assert "\n" not in message
    assert str(package / "task.yaml") in message
    assert needle in message


def test_load_package_bad_yaml_and_missing_file(package: Path, tmp_path: Path) -> None:
    (package / "task.yaml").write_text("id: [unclosed\n")
    with pytest.raises(UserError, match=r"task\.yaml: line \d+ invalid YAML"):
        load_package(package)
    with pytest.raises(UserError, match="no such file"):
        load_package(tmp_path / "nowhere")


# ---- citation_domains (the paper's §4.7, §4.12: o3's real-but-unrelated citations) -------------

O3_CITATIONS = """Sources:
- <https://datasheet.eeworld.com.cn/view/85833854.html>
- [SO](https://stackoverflow.com/questions/13385860)
- https://stackoverflow.com/questions/42039629.
"""


def test_citation_domains_allowed_subdomains_pass() -> None:
    spec = {"kind": "citation_domains", "allowed": ["https://www.MordorIntelligence.com/", "rbi.org.in"]}
    text = ("Market size per https://www.mordorintelligence.com/industry-reports/x and "
            "[RBI](https://dbie.rbi.org.in/page), also www.rbi.org.in/Scripts.")
    r = check(spec, text)
    assert r.status == "pass"
    assert "mordorintelligence.com" in r.evidence and "dbie.rbi.org.in" in r.evidence
    # a suffix that is not a subdomain is another site
    r = check(spec, "see https://notmordorintelligence.com/a and https://evil-rbi.org.in")
    assert r.status == "fail"
    assert "notmordorintelligence.com" in r.evidence and "evil-rbi.org.in" in r.evidence


def test_citation_domains_o3_urls_fail_on_a_closed_corpus() -> None:
    r = check({"kind": "citation_domains", "allowed": []}, O3_CITATIONS)
    assert r.status == "fail"
    assert "datasheet.eeworld.com.cn, stackoverflow.com" in r.evidence
    assert "closed corpus" in r.evidence
    r = check({"kind": "citation_domains", "allowed": ["mordorintelligence.com"]}, O3_CITATIONS)
    assert r.status == "fail" and "stackoverflow.com" in r.evidence
    # a bare www. host counts as a citation too
    r = check({"kind": "citation_domains", "allowed": []}, "per www.eeworld.com.cn (2021)")
    assert r.status == "fail" and "eeworld.com.cn" in r.evidence


def test_citation_domains_no_urls_and_require_citation() -> None:
    text = "Per the client brief (client_brief.docx), the hurdle is 30%."
    assert check({"kind": "citation_domains", "allowed": []}, text).status == "pass"
    r = check({"kind": "citation_domains", "allowed": ["rbi.org.in"], "require_citation": True}, text)
    assert r.status == "fail" and "citation is required" in r.evidence
    r = check({"kind": "citation_domains", "allowed": ["rbi.org.in"], "require_citation": True},
              "RBI data: https://rbi.org.in/x")
    assert r.status == "pass"


def test_citation_domains_spec_rejects_a_non_domain() -> None:
    with pytest.raises(ValueError, match="not a domain"):
        SPECS.validate_python([{"id": "c", "kind": "citation_domains", "allowed": ["the RBI site"]}])


def _docx_with_link(path: Path, text: str, shown: str, url: str) -> None:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml.ns import qn
    from docx.oxml.parser import OxmlElement

    doc = DocxDocument()
    doc.add_heading("Sources", level=1)
    doc.add_paragraph(text)
    para = doc.add_paragraph("Further reading: ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), doc.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
    run = OxmlElement("w:r")
    t = OxmlElement("w:t")
    t.text = shown
    run.append(t)
    link.append(run)
    para._p.append(link)
    doc.save(str(path))


def test_citation_domains_in_a_docx_output(tmp_path: Path) -> None:
    spec = {"kind": "citation_domains", "allowed": ["mordorintelligence.com"], "file": "memo.docx"}
    # the URL in the text is allowed; the hyperlink's shown text is no URL, its target is
    _docx_with_link(tmp_path / "memo.docx", "Market: https://www.mordorintelligence.com/r",
                    "pandas whitespace answer", "https://stackoverflow.com/questions/13385860")
    r = check(spec, "", tmp_path)
    assert r.status == "fail" and "stackoverflow.com" in r.evidence
    assert "mordorintelligence.com" not in r.evidence.split(";")[0]
    _docx_with_link(tmp_path / "memo.docx", "Market: https://www.mordorintelligence.com/r",
                    "the report", "https://reports.mordorintelligence.com/full")
    r = check(spec, "", tmp_path)
    assert r.status == "pass" and "reports.mordorintelligence.com" in r.evidence
    r = check({**spec, "file": "absent.docx"}, "", tmp_path)
    assert r.status == "unobservable" and "not found" in r.evidence
