"""Cell normalisation for the spreadsheet comparator (AIDABench §3.3.3, Stage 2).

Two files agree when a reader would say they hold the same values: numbers within abs/rel 1e-6,
dates as ISO dates however they were written, strings with surrounding and repeated whitespace
ignored, and every spelling of "missing" the same. Each cell becomes a canonical value (None,
float, str or Percent) so rows can be hashed for order-insensitive matching; `cells_equal` then
applies the tolerance where hashing cannot.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from numbers import Real
from typing import Any, Literal, cast

from deskbench.scoring.numbers import parse_number

Kind = Literal["number", "date", "text", "empty"]
DateOrder = Literal["dmy", "mdy"]
TOL = 1e-6

NULL_STRINGS = frozenset({"", "nan", "nat", "null", "none", "n/a", "#n/a", "<na>"})
"""Spellings of a missing value (case-insensitive). "NA" is left out: it is also a region code."""

_PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_LEADING_ZERO = re.compile(r"^[+-]?0\d")
_EURO_NUMBER = re.compile(r"^[+-]?\d{1,3}(?:\.\d{3})*,\d+$|^[+-]?\d+,\d{1,2}$")
_ISO = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?"
                  r"(?:Z|[+-]\d{2}:?\d{2})?$")
_NUMERIC_DATE = re.compile(r"^(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?$")
_DAY_MONTH_NAME = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?[ -]([A-Za-z]{3,9})\.?[ ,-]+(\d{4})$")
_MONTH_NAME_DAY = re.compile(r"^([A-Za-z]{3,9})\.? (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})$")
_MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_EXCEL_EPOCH = datetime(1899, 12, 30)


@dataclass(frozen=True, slots=True)
class Percent:
    """A figure written with a percent sign, as written: "12.5%" -> 12.5. It equals 0.125 or 12.5."""

    value: float


Norm = None | float | str | Percent


def _iso(d: datetime | date) -> str:
    if isinstance(d, datetime):
        return d.date().isoformat() if d.time() == time() else d.replace(microsecond=0).isoformat()
    return d.isoformat()


_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")


def _month(name: str) -> int | None:
    n = name.casefold()
    hit = _MONTHS.get(n[:3])
    return hit if hit and (_MONTH_NAMES[hit - 1].startswith(n) or n == "sept") else None


def _make(y: int, m: int, d: int, hh: str | None = None, mm: str | None = None, ss: str | None = None) -> str | None:
    try:
        return _iso(datetime(y, m, d, int(hh or 0), int(mm or 0), int(ss or 0)))
    except ValueError:
        return None


def numeric_date_order(values: list[str]) -> DateOrder | None:
    """Whether d/m/yyyy strings in one column are day-first or month-first; None when every one is ambiguous."""
    for v in values:
        m = _NUMERIC_DATE.match(v.strip())
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if a > 12 >= b:
                return "dmy"
            if b > 12 >= a:
                return "mdy"
    return None


def parse_date(text: str, order: DateOrder = "mdy") -> str | None:
    """ISO form of a date-like string in a common format, or None."""
    s = text.strip()
    if m := _ISO.match(s):
        return _make(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5), m.group(6))
    if m := _NUMERIC_DATE.match(s):
        a, b = int(m.group(1)), int(m.group(2))
        day, month = (a, b) if order == "dmy" else (b, a)
        return _make(int(m.group(3)), month, day, m.group(4), m.group(5), m.group(6))
    if m := _DAY_MONTH_NAME.match(s):
        mon = _month(m.group(2))
        return _make(int(m.group(3)), mon, int(m.group(1))) if mon else None
    if m := _MONTH_NAME_DAY.match(s):
        mon = _month(m.group(1))
        return _make(int(m.group(3)), mon, int(m.group(2))) if mon else None
    return None


def parse_numeric_text(text: str) -> float | Percent | None:
    """A number written as text: "1,234.50", "(1,200)", "₹1,234", "12%", "12,50", "1.234,50"."""
    s = " ".join(text.split())
    if _PLAIN_NUMBER.match(s):
        return float(s)
    parsed = parse_number(s)
    if parsed is not None and parsed.raw == s:
        return Percent(parsed.value) if parsed.is_percent else parsed.value
    pct = s.endswith("%")
    body = s[:-1].strip() if pct else s
    if _EURO_NUMBER.match(body):
        value = float(body.replace(".", "").replace(",", "."))
        return Percent(value) if pct else value
    return None


def _raw_kind(value: Any) -> Kind:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "empty"
    if isinstance(value, bool):
        return "text"
    if isinstance(value, Real):
        return "number"
    if isinstance(value, (datetime, date)):
        return "date"
    s = str(value).strip()
    if s.casefold() in NULL_STRINGS:
        return "empty"
    if _PLAIN_NUMBER.match(s) and not _LEADING_ZERO.match(s):
        return "number"
    if parse_date(s) is not None or parse_date(s, "dmy") is not None:
        return "date"
    return "text"


def column_kind(values: list[Any]) -> Kind:
    """The most common kind of the non-empty cells; ties go to text (the least assuming)."""
    counts = Counter(k for k in map(_raw_kind, values) if k != "empty")
    if not counts:
        return "empty"
    top = counts.most_common()
    if len(top) > 1 and top[0][1] == top[1][1]:
        return "text"
    return top[0][0]


def normalise(value: Any, kind: Kind, order: DateOrder = "mdy") -> Norm:
    """The canonical form of one cell, given the kind of the reference column it is compared in."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (datetime, date)):
        return _iso(value)
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        return _iso(value.to_pydatetime())
    if isinstance(value, Real):
        value = float(value)
        if kind == "date" and 1 <= value < 2958466:  # an Excel serial date written without its format
            return _iso(_EXCEL_EPOCH + timedelta(days=float(value)))
        return cast(float, value) + 0.0
    if isinstance(value, timedelta):
        return str(value)
    s = " ".join(str(value).split())
    if s.casefold() in NULL_STRINGS:
        return None
    if _PLAIN_NUMBER.match(s) and not _LEADING_ZERO.match(s):
        return float(s) + 0.0
    if kind == "number":
        num = parse_numeric_text(s)
        if num is not None:
            return num
    iso = parse_date(s, order)
    return iso if iso is not None else s


def normalise_column(values: list[Any], kind: Kind, reference: set[Norm] | None = None) -> list[Norm]:
    """A whole column, resolving d/m vs m/d once for it: from the column's own unambiguous dates,
    else (for a prediction) whichever reading matches more of the reference column."""
    strings = [v for v in values if isinstance(v, str)]
    order = numeric_date_order(strings)
    if order is not None or not any(_NUMERIC_DATE.match(s.strip()) for s in strings):
        return [normalise(v, kind, order or "mdy") for v in values]
    readings = {o: [normalise(v, kind, o) for v in values] for o in ("mdy", "dmy")}
    if reference:
        hits = {o: sum(1 for v in r if v in reference) for o, r in readings.items()}
        if hits["dmy"] > hits["mdy"]:
            return readings["dmy"]
    return readings["mdy"]


def key(value: Norm) -> Norm | tuple[str, str]:
    """A hashable form for exact row matching (numbers to 9 significant digits)."""
    if isinstance(value, float):
        return ("n", f"{value:.9g}")
    if isinstance(value, Percent):
        return ("%", f"{value.value:.9g}")
    return value


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


def cells_equal(a: Norm, b: Norm) -> bool:
    """Equality after normalisation, with the 1e-6 tolerance; "12%" equals 0.12 and 12."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Percent) and isinstance(b, Percent):
        return close(a.value, b.value)
    if isinstance(a, Percent) and isinstance(b, float):
        a, b = b, a
    if isinstance(a, float) and isinstance(b, Percent):
        return close(a, b.value / 100) or close(a, b.value)
    if isinstance(a, float) and isinstance(b, float):
        return close(a, b)
    return a == b


def show(value: Norm) -> str:
    """A cell in a failure message."""
    if value is None:
        return "(empty)"
    if isinstance(value, Percent):
        return f"{value.value:.10g}%"
    if isinstance(value, float):
        return f"{value:.10g}"
    return repr(value)
