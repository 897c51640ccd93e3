"""The released corpus's verifiers, read as the authors' code reads them (`deskbench fetch dra`).

The consulting DRA release keeps each task's verifiers as one cell of prose ("V1: ... V2 - ...").
The authors' pipeline (github tanm-ast-deccan/dra-response-gen, src/verifier_parser.py and
src/verifier_grammar.py) reads that cell in two steps, and so does this module, rule for rule:

1. Split on the numbering. A record opens at a line that starts with `V<n>` (any case, spaces
   allowed, a split child's letter kept: V3a, V3b), then an optional `:`, `-` or other dash, `|`, `.` or `)`); only when the cell has no
   such opener, a bare `<n>` followed by prose opens one (so "2.8 months" in a body does not).
   The parse is CLEAN only when the numbers run 1, 2, 3 ... without a gap, no record is empty and
   nothing but a header line ("Verifiers", "Prompt-specific verifiers", ...) precedes the first;
   otherwise it is UNCERTAIN, with the reasons, and is kept for a person to check.
2. Read each record's target clause off its text: an optional `FAIL IF ...` tail is set aside;
   with an `=`, the clause after the LAST `=` that yields a target is read (a verifier often shows
   its working): a quoted string, a number with a `(+/- band)` (a `%` band on a value that is not
   itself a percentage is relative), an upper-case decision token, a range ("between 800 and 900",
   "290-310" with an en dash or "to"), or a bare number (whole numbers exact; others get a 0.5%
   band); two values after the `=` are a "multi" clause with no single target, an `=` that yields
   nothing is "unreadable". Without an `=`, only an explicit "must be / must equal <number>"
   counts, and never in a negated sentence ("must NOT be 67.5" is a trap guard, not a target) or on
   a structural count ("exactly 7 rows"); anything else is a presence check.

deskbench then turns each record into one verifier spec (verifier_specs.py), keeping the
verifier count the paper's V divides by (`spec_for`): a string target a `regex_present`; a numeric
target a mechanical `numeric` check only where the prompt itself tells the agent to write the
verifier's label (a label the agent was not given would leave a right figure under other words
unobservable); everything else an `llm_check` for `--judge` (or a QC reviewer), its criterion the
verifier's text with the frozen target and the authors' grading rule, as their scorer asks its
LLM grader. The paper's SMEs read every response; a judge is deskbench's nearest automatic reader.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

from deskbench.tracks.deliverables.verifier_specs import Unit

DASHES = "\u002d\u2010\u2011\u2012\u2013\u2014\u2212"
_OPEN_V = re.compile(rf"(?:^|\n)[ \t]*[\"'\u201c\u2018]?[Vv][ \t]*(\d{{1,3}})([a-z](?![A-Za-z]))?[ \t]*"
                     rf"(?:[{re.escape(DASHES)}]|[:|.)])?[ \t]*")
_OPEN_BARE = re.compile(r"(?:^|\n)[ \t]*(\d{1,3})[.)]?[ \t]+(?=[^\d\s.,)])")
_HEADER = re.compile(r"^\s*(?:verifiers?|prompt[- ]specific verifiers?|cost calculations?|id\s+condition)\b", re.I)

Status = Literal["clean", "uncertain", "empty"]


@dataclass(frozen=True)
class Record:
    """One verifier of the cell: its number (with the letter of a split child, "V3a"), and its
    statement (whitespace collapsed)."""

    index: int
    text: str
    suffix: str = ""

    @property
    def label(self) -> str:
        return f"{self.index}{self.suffix}"


@dataclass
class ProseParse:
    records: list[Record] = field(default_factory=list)
    status: Status = "clean"
    reasons: list[str] = field(default_factory=list)


def split_verifiers(cell: str | None) -> ProseParse:
    """The numbered records of a Verifiers cell, with CLEAN/UNCERTAIN/EMPTY as step 1 says."""
    text = unicodedata.normalize("NFKC", cell or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if text[:1] in "\"'\u201c\u201d\u2018\u2019" and text:
        text = text[1:]
    if not text.strip():
        return ProseParse(status="empty", reasons=["the cell is empty"])
    padded = "\n" + text
    opener = _OPEN_V if _OPEN_V.search(padded) else _OPEN_BARE
    found = list(opener.finditer(padded))
    if not found:
        return ProseParse(status="uncertain", reasons=["no numbered verifier found"])
    records = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(padded)
        body = re.sub(r"[ \t]{2,}", " ", re.sub(r"\s*\n\s*", " ", padded[m.end():end])).strip()
        suffix = (m.group(2) or "") if opener is _OPEN_V else ""
        records.append(Record(int(m.group(1)), body, suffix))
    reasons = []
    numbers = list(dict.fromkeys(r.index for r in records))  # V3a, V3b: one number, split
    labels = [r.label for r in records]
    if numbers != list(range(1, len(numbers) + 1)) or len(set(labels)) < len(labels) or \
            [r.index for r in records] != sorted(r.index for r in records):
        reasons.append(f"numbering is not 1..{len(numbers)} without gaps: {labels}")
    empty = [r.label for r in records if not r.text]
    if empty:
        reasons.append(f"empty verifier text at {empty}")
    lead = padded[:found[0].start()].strip()
    if lead and not _HEADER.search(lead) and not re.fullmatch(rf"[\s|{re.escape(DASHES)}]*", lead):
        reasons.append(f"text before the first verifier: {lead[:60]!r}")
    return ProseParse(records, "uncertain" if reasons else "clean", reasons)


# ---- step 2: the target clause ------------------------------------------------------------------

TargetKind = Literal["numeric", "string", "decision", "presence"]
_CUR = r"(?:[$\u20b9\u20ac\u00a3]|Rs\.?|INR|USD|EUR|GBP)"
_UNIT = r"%|pp|x\b|mln\b|mn\b|bn\b|cr\b|crore|lakh|lacs?|days?|hours?|units?|/kg|/hr|kWh\S*"
_NUM = r"[\d,]+\.?\d*"
_BANDED = re.compile(
    rf"=\s*(?P<neg1>-)?\s*{_CUR}?\s*\(?\s*(?P<neg2>-)?\s*{_CUR}?\s*(?P<val>{_NUM})\s*\)?\s*(?P<unit>{_UNIT})?"
    rf"\s*\(\s*(?:\+/-|\u00b1)\s*{_CUR}?\s*(?P<band>{_NUM})\s*(?P<bunit>{_UNIT})?\s*\)", re.I)
_BARE = re.compile(rf"=\s*(?P<neg1>-)?\s*{_CUR}?\s*\(?\s*(?P<neg2>-)?\s*(?P<val>{_NUM})\s*\)?\s*(?P<unit>{_UNIT})?(?!\d)",
                   re.I)
_RANGE_UNIT = r"(?:%|pp|mln|mn\b|cr\b|crore|lakh)?"
_RANGE = re.compile(
    rf"(?:(?:in\s+the\s+range\s+of|between|range\s*:?|roughly|approximately|approx\.?)\s*[$\u20b9\u20ac\u00a3]?\s*"
    rf"(?P<lo>{_NUM})\s*{_RANGE_UNIT}\s*(?:\u2013|\u2014|-|to|and)"
    rf"|[$\u20b9\u20ac\u00a3]?\s*(?P<lo2>{_NUM})\s*{_RANGE_UNIT}\s*(?:\u2013|\u2014|\s+to\s+))\s*"
    rf"[$\u20b9\u20ac\u00a3]?\s*(?P<hi>{_NUM})\s*(?P<unit>%|pp|mln|bn|cr\b|crore|lakh|days?|units?)?", re.I)
_STRING = re.compile(r'=\s*"(?P<val>[^"]+)"')
_DECISION = re.compile(r"=\s*(?P<val>[A-Z][A-Z0-9_/\-. ]{1,38}?)\s*(?:[.;,]|$)")
_FAIL_IF = re.compile(r"FAIL\s+IF\s+(?P<cond>.+)$", re.I | re.S)
_VALUE_TOKEN = re.compile(r"[$₹€£]\s*[\d,]+\.?\d*|[\d,]+\.?\d*\s*(?:%|pp|mln|bn|cr\b|crore|lakh|days?|hours?|units?)",
                          re.I)
_NEGATED = re.compile(r"\b(?:not|never|avoid|reject|exclude|do\s+not|must\s+not|don't|cannot|no\s+longer|excluding|"
                      r"without)\b", re.I)
_MUST_BE = re.compile(rf"\bmust\s+(?:be|equal|equals)\s+(?:approximately\s+|about\s+|~\s*|a\s+|the\s+|exactly\s+)?"
                      rf"(?P<val>-?{_NUM})\s*(?P<unit>%|pp|USD(?:/[A-Za-z]+)?|EUR|GBP|/[A-Za-z]+|percent)?", re.I)
_COUNT_NOUN = re.compile(r"^\s*(?:rows?|columns?|cols?|sections?|items?|lines?|entries|checks?|fields?|bullets?|"
                         r"steps?|tables?|cells?|pages?|decimals?|places?)\b", re.I)
DEFAULT_REL_BAND = 0.005  # a fractional target stated without a band


@dataclass(frozen=True)
class Target:
    """What a verifier's text asserts: its kind, the value (and band) or the range, the unit as
    written, and how it was read (`form`: numeric, numeric_range, numeric_no_band, must_be,
    string, decision, presence, multi, unreadable)."""

    kind: TargetKind
    form: str
    value: float | str | None = None
    tol: float = 0.0
    range: tuple[float, float] | None = None
    unit: str = ""
    fail_if: str = ""


def _float(text: str | None) -> float | None:
    try:
        return float((text or "").replace(",", ""))
    except ValueError:
        return None


def _band(v: float) -> float:
    """Whole numbers (counts, FTE) stay exact; fractional ones get the default relative band."""
    return 0.0 if abs(v - round(v)) < 1e-9 else max(abs(v) * DEFAULT_REL_BAND, 1e-6)


def _values_after_equals(text: str) -> int:
    tail = text[text.find("=") + 1:].split(". ")[0]
    tail = re.sub(r"\(\s*(?:\+/-|\u00b1)[^)]*\)", " ", tail)  # the band belongs to the one target
    return len(_VALUE_TOKEN.findall(tail))


def _clause(text: str) -> Target | None:
    """One `=` clause, or None when nothing in it is a target."""
    if _values_after_equals(text) >= 2 and not _STRING.search(text):
        return Target("presence", "multi")
    if m := _STRING.search(text):
        return Target("string", "string", m.group("val"))
    if m := _BANDED.search(text):
        v, band = _float(m.group("val")), _float(m.group("band")) or 0.0
        unit, bunit = (m.group("unit") or "").strip(), (m.group("bunit") or "").strip().lower()
        if v is not None:
            if bunit == "%" and unit.lower() not in ("%", "pp"):
                band = abs(v) * band / 100.0  # "= 15,967.90 Mn (+/- 1%)": 1% of the value
            if m.group("neg1") or m.group("neg2") or re.search(r"=\s*\(", text):
                v = -abs(v)
            return Target("numeric", "numeric", v, band, unit=unit or bunit)
    if (m := _DECISION.search(text)) and not re.fullmatch(rf"{_CUR}\s*{_NUM}\s*\S*", m.group("val").strip()):
        return Target("decision", "decision", m.group("val").strip())  # "= USD 300" is an amount, not a decision
    if (m := _RANGE.search(text[text.find("=") + 1:])) is not None:
        lo, hi = _float(m.group("lo") or m.group("lo2")), _float(m.group("hi"))
        if lo is not None and hi is not None and hi > lo:
            return Target("numeric", "numeric_range", (lo + hi) / 2, (hi - lo) / 2, (lo, hi), (m.group("unit") or ""))
    if m := _BARE.search(text):
        v = _float(m.group("val"))
        if v is not None:
            if m.group("neg1") or m.group("neg2") or re.search(r"=\s*[^\d(]*\(\s*-", text):
                v = -abs(v)
            return Target("numeric", "numeric_no_band", v, _band(v), unit=(m.group("unit") or "").strip())
    return None


def read_target(text: str) -> Target:
    """The target one verifier's text states (step 2 of the module's docstring)."""
    t = (text or "").strip()
    fail_if = ""
    if m := _FAIL_IF.search(t):
        fail_if = " ".join(m.group("cond").split())
        t = t[:m.start()].rstrip()
    if "=" not in t:
        m = _MUST_BE.search(t)
        if m and not _NEGATED.search(t) and not _COUNT_NOUN.match(t[m.end("val"):]):
            v = _float(m.group("val"))
            if v is not None:
                return Target("numeric", "must_be", v, _band(v), unit=(m.group("unit") or ""), fail_if=fail_if)
        return Target("presence", "presence", fail_if=fail_if)
    starts = [i for i, ch in enumerate(t) if ch == "="]
    for i in reversed(starts[1:]):  # the last `=` first: earlier ones start the working
        if (got := _clause(t[i:])) is not None:
            return _with_fail_if(got, fail_if)
    got = _clause(t)
    return _with_fail_if(got, fail_if) if got is not None else Target("presence", "unreadable", fail_if=fail_if)


def _with_fail_if(target: Target, fail_if: str) -> Target:
    return Target(target.kind, target.form, target.value, target.tol, target.range, target.unit, fail_if)


# ---- deskbench's spec for one record ------------------------------------------------------------

UNITS: dict[str, Unit | None] = {  # a target's unit as written -> verifier_specs.Unit (pp: points, none)
    "%": "percent", "pp": None, "cr": "crore", "crore": "crore", "lakh": "lakh", "lac": "lakh", "lacs": "lakh",
    "mn": "million", "mln": "million", "bn": "billion"}


def numeric_fields(target: Target, value_key: str) -> dict[str, Any]:
    """A numeric target's figure as a verifier spec (value_key "expected") or a golden solution's
    value (value_key "value") states it: its range, or the value under value_key with its abs_tol;
    and its unit where verifier_specs has one."""
    fields: dict[str, Any] = {}
    if target.range is not None:
        fields["range"] = list(target.range)
    else:
        fields[value_key] = target.value
        fields["abs_tol"] = target.tol
    unit = UNITS.get(target.unit.lower().rstrip("."))
    if unit is not None:
        fields["unit"] = unit
    return fields


_LEAD = re.compile(r"^(?:the|a|an|correct|correctly|response|states?|reports?|computes?|calculates?|derived?|"
                   r"final|total\s+of)\s+", re.I)


def subject(text: str) -> str | None:
    """The verifier's name for its figure: the words before its first `=` (or its "must be"), without a lead-in
    ("Correct ...", "Response states ...") or a parenthesis, at most its last six words; None when
    nothing label-like is left."""
    head = text.split("=", 1)[0] if "=" in text else re.split(r"\bmust\s+(?:be|equals?)\b", text, maxsplit=1, flags=re.I)[0]
    head = re.split(r"[:;]|\s[-\u2013\u2014]\s", head)[-1]
    head = re.sub(r"\([^)]*\)", " ", head)
    head = re.sub(r"[^\w%/&.' -]", " ", head).strip(" .-")
    words = head.split()
    while words and _LEAD.match(words[0] + " "):
        words.pop(0)
    words = words[-6:]
    label = " ".join(words).strip(" .")
    return label if len(label) >= 3 and re.search(r"[A-Za-z]", label) and not re.fullmatch(r"[\d.,\s]+", label) \
        else None


def frozen(target: Target) -> str:
    """The target as the authors' grader is told it ("expected ... within ..."), or "" for none."""
    if target.kind == "numeric" and target.range is not None:
        return f"a value from {target.range[0]:g} to {target.range[1]:g}{(' ' + target.unit) if target.unit else ''}"
    if target.kind == "numeric" and isinstance(target.value, float):
        unit = f" {target.unit}" if target.unit else ""
        return f"{target.value:g}{unit}" + (f" (+/- {target.tol:g})" if target.tol else " (exact)")
    if target.kind in ("string", "decision") and isinstance(target.value, str):
        return f'"{target.value}" (the same {"decision" if target.kind == "decision" else "text"}, any case)'
    return ""


GRADING = ("Pass only if the response states a value that meets the expected one (a value rounded within the "
           "tolerance passes; where it offers several, the one it commits to counts); a value it does not state, "
           "or states differently, fails. A trap figure cited only to reject it is not a use of it.")


def spec_for(record: Record, target: Target, prompt: str = "") -> dict[str, Any]:
    """One verifier spec (as task.yaml data) for one record: a mechanical check where it is as
    reliable as a reader, the verifier's text for a judge otherwise.

    - a string target: `regex_present` (the text, any case: the authors' grader's exact match);
    - a numeric target whose label (the words before its `=`) the prompt itself asks the agent to
      write, without a FAIL-IF condition: `numeric` at that label, with the band or range;
    - anything else: `llm_check` whose criterion is the verifier's text, and, for a numeric or
      decision target, the frozen expected value and the authors' grading rule (their scorer hands
      its LLM grader the same: the verifier, its frozen target, pass only on a stated match)."""
    vid = f"V{record.label}"
    description = f"{vid}: {record.text}"
    if target.kind == "string" and isinstance(target.value, str) and not target.fail_if:
        return {"kind": "regex_present", "id": vid, "description": description,
                "pattern": rf"(?<!\w){re.escape(target.value)}(?!\w)"}
    label = subject(record.text) if target.kind == "numeric" and not target.fail_if else None
    if label is not None and isinstance(target.value, float) and label.casefold() in prompt.casefold():
        return {"kind": "numeric", "id": vid, "description": description, "label": label,
                **numeric_fields(target, "expected")}
    expected = frozen(target)
    criterion = record.text if not expected else f"{record.text}\nExpected: {expected}. {GRADING}"
    return {"kind": "llm_check", "id": vid, "description": description, "criterion": criterion}
