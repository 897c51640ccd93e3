"""Verifiers of values: a figure (with units and tolerance), a decision line, a regex present
or absent. A numeric figure is located by a label, a workbook cell or a JSON path."""

from __future__ import annotations

import re
from typing import Any

from deskbench.scoring.numbers import UNIT_SCALE, ParsedNumber, find_numbers, to_unit
from deskbench.tracks.deliverables.scoring.office import Document, json_at, xlsx_cell
from deskbench.tracks.deliverables.scoring.verifier_base import VerifierContext, VerifierResult
from deskbench.tracks.deliverables.scoring.verifier_base import result as _res
from deskbench.tracks.deliverables.scoring.verifier_base import where as _where
from deskbench.tracks.deliverables.verifier_specs import (
    DecisionLineSpec,
    NumericSpec,
    RegexAbsentSpec,
    RegexPresentSpec,
)

DEFAULT_REL_TOL = 1e-3


# ---- numeric -------------------------------------------------------------------------------


def _as_number(value: Any) -> ParsedNumber | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return ParsedNumber(float(value), str(value), None, 0, 0)
    numbers = find_numbers(str(value))
    return numbers[0] if numbers else None


def _label_in_workbook(doc: Document, spec: NumericSpec) -> tuple[ParsedNumber, str] | None:
    assert doc.workbook is not None and spec.label is not None
    wanted = spec.label.casefold()
    hits: list[tuple[ParsedNumber, str]] = []
    for ws in doc.workbook.worksheets:
        for row in ws.iter_rows():
            for i, cell in enumerate(row):
                if isinstance(cell.value, str) and wanted in cell.value.casefold():
                    found = [
                        (n, f"{ws.title}!{c.coordinate} beside {cell.value!r}")
                        for c in row[i + 1 :]
                        if (n := _as_number(c.value)) is not None
                    ]
                    if len(found) > spec.index:
                        hits.append(found[spec.index])
    if not hits:
        return None
    return hits[-1] if spec.occurrence == "last" else hits[0]


def _label_in_text(doc: Document, spec: NumericSpec) -> tuple[ParsedNumber, str] | None:
    assert spec.label is not None
    pattern = re.compile(re.escape(spec.label), re.IGNORECASE)
    lines = [b.text for b in doc.blocks]
    hits: list[tuple[ParsedNumber, str]] = []
    for i, line in enumerate(lines):
        for m in pattern.finditer(line):
            after = find_numbers(line[m.end() :])
            context = line
            if not after and i + 1 < len(lines):
                after = find_numbers(lines[i + 1])
                context = f"{line} / {lines[i + 1]}"
            if len(after) > spec.index:
                hits.append((after[spec.index], context))
                break
    if not hits:
        return None
    return hits[-1] if spec.occurrence == "last" else hits[0]


def _locate(doc: Document, spec: NumericSpec) -> tuple[ParsedNumber, str] | str:
    if spec.cell is not None:
        if doc.workbook is None:
            return f"cell {spec.cell} asked for, but {_where(spec)} is not a workbook"
        got = xlsx_cell(doc.workbook, spec.cell)
        if got is None:
            return f"sheet of {spec.cell} not in {_where(spec)}"
        n = _as_number(got[0])
        return (n, f"{got[1]} = {got[0]!r}") if n else f"{got[1]} holds no number ({got[0]!r})"
    if spec.json_path is not None:
        if doc.data is None:
            return f"{_where(spec)} holds no JSON to read {spec.json_path} from"
        found, value = json_at(doc.data, spec.json_path)
        if not found:
            return f"{spec.json_path} not found in {_where(spec)}"
        n = _as_number(value)
        return (n, f"{spec.json_path} = {value!r}") if n else f"{spec.json_path} is not a number"
    hit = _label_in_workbook(doc, spec) if doc.workbook is not None else _label_in_text(doc, spec)
    return hit or f"label {spec.label!r} with a figure after it not found in {_where(spec)}"


def verify_numeric(spec: NumericSpec, ctx: VerifierContext) -> VerifierResult:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("unobservable", doc)
    located = _locate(doc, spec)
    if isinstance(located, str):
        return _res("unobservable", located)
    number, context = located
    unit = f" {spec.unit}" if spec.unit else ""
    if spec.range is not None:
        lo, hi = spec.range

        def ok(v: float) -> bool:
            return lo <= v <= hi

        want = f"in [{lo:g}, {hi:g}]{unit}"
    else:
        expected = spec.expected
        assert expected is not None
        tol = max(spec.abs_tol or 0.0, abs(expected) * (spec.rel_tol or 0.0))
        if spec.abs_tol is None and spec.rel_tol is None:
            tol = abs(expected) * DEFAULT_REL_TOL

        def ok(v: float) -> bool:
            return abs(v - expected) <= tol + 1e-12

        want = f"{expected:g}{unit} ± {tol:g}"
    candidates = _readings(number, spec.unit)
    value = next((v for v in candidates if ok(v)), candidates[0])
    return _res("pass" if ok(value) else "fail", f"read {value:g}{unit} (want {want}) at: {context}")


def _readings(number: ParsedNumber, unit: str | None) -> list[float]:
    """The figure in `unit`. A bare figure (no scale word) may be written in `unit` already
    (a table headed "INR Cr") or in ones ("$9,972,000"): both readings are tried."""
    value = to_unit(number, unit)
    if number.scale_word is None and unit not in (None, "one", "percent"):
        return [value, number.value / UNIT_SCALE[unit]]
    return [value]


# ---- decision line, regex ------------------------------------------------------------------

_DECORATION = re.compile(r"^[\s>*_`#-]+|[\s*_`]+$")


def verify_decision_line(spec: DecisionLineSpec, ctx: VerifierContext) -> VerifierResult:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return _res("unobservable", doc)
    text = doc.raw if doc.raw else doc.text
    lines = [_DECORATION.sub("", line) for line in text.splitlines()]
    decisions = [line for line in lines if line.startswith(spec.prefix)]
    if not decisions:
        return _res("fail", f"no line in {_where(spec)} starts with {spec.prefix!r}")
    last = " ".join(decisions[-1].split())
    ok = last == " ".join(spec.expected.split())
    return _res("pass" if ok else "fail", f"decision line: {last!r} (want {spec.expected!r})")


def _search(spec: RegexPresentSpec | RegexAbsentSpec, ctx: VerifierContext) -> re.Match[str] | str:
    doc = ctx.document(spec.file)
    if isinstance(doc, str):
        return doc
    text = doc.raw or doc.text
    flags = re.IGNORECASE if spec.ignore_case else 0
    m = re.search(spec.pattern, text, flags)
    return m if m else ""


def _span(m: re.Match[str]) -> str:
    s = m.string
    return f"…{s[max(0, m.start() - 60) : m.end() + 60]}…"


def verify_regex_present(spec: RegexPresentSpec, ctx: VerifierContext) -> VerifierResult:
    m = _search(spec, ctx)
    if isinstance(m, str) and m:
        return _res("unobservable", m)
    if not m:
        return _res("fail", f"/{spec.pattern}/ not found in {_where(spec)}")
    assert isinstance(m, re.Match)
    return _res("pass", f"found {m.group(0)!r}: {_span(m)}")


def verify_regex_absent(spec: RegexAbsentSpec, ctx: VerifierContext) -> VerifierResult:
    m = _search(spec, ctx)
    if isinstance(m, str) and m:
        return _res("unobservable", m)
    if not m:
        return _res("pass", f"/{spec.pattern}/ absent from {_where(spec)}")
    assert isinstance(m, re.Match)
    return _res("fail", f"found {m.group(0)!r}: {_span(m)}")
