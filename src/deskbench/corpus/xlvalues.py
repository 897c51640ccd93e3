"""Excel's cell values and coercions for the formula evaluator: error values, the marker for a
formula we cannot compute, number/text conversion, comparison order and the binary operators."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, cast

from openpyxl.utils.datetime import to_excel


@dataclass(frozen=True, slots=True)
class ExcelError:
    """An Excel error value such as #DIV/0!; shown as its code."""

    code: str

    def __str__(self) -> str:
        return self.code


@dataclass(frozen=True, slots=True)
class Unevaluated:
    """A formula cell with no cached value that this evaluator cannot compute."""

    formula: str
    reason: str

    def __str__(self) -> str:
        return f"#UNEVALUATED {self.formula}"


DIV0, VALUE, NA, NUM = ExcelError("#DIV/0!"), ExcelError("#VALUE!"), ExcelError("#N/A"), ExcelError("#NUM!")


def to_number(value: Any) -> float | int | ExcelError:
    """Excel's coercion of one value to a number: empty is 0, booleans 1/0, dates their serial,
    numeric text its number; other text is #VALUE!."""
    if isinstance(value, ExcelError):
        return value
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, datetime | date | time):
        return cast(float, to_excel(value))
    if isinstance(value, timedelta):
        return value.total_seconds() / 86400
    try:
        return float(str(value).strip().replace(",", "")) if str(value).strip() else VALUE
    except ValueError:
        return VALUE


def _tidy(x: float) -> float | int | ExcelError:
    if isinstance(x, float) and not math.isfinite(x):
        return NUM
    return int(x) if isinstance(x, float) and x.is_integer() and abs(x) < 1e15 else x


def arith(op: str, a: Any, b: Any) -> Any:
    x, y = to_number(a), to_number(b)
    if isinstance(x, ExcelError):
        return x
    if isinstance(y, ExcelError):
        return y
    if op == "+":
        return _tidy(x + y)
    if op == "-":
        return _tidy(x - y)
    if op == "*":
        return _tidy(x * y)
    if op == "/":
        return DIV0 if y == 0 else _tidy(x / y)
    try:
        return _tidy(float(x) ** y)
    except (OverflowError, ZeroDivisionError, TypeError):
        return NUM


def text_of(value: Any) -> str:
    """A value as `&` and CONCATENATE see it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        tidy = _tidy(value)  # an infinity or NaN is Excel's #NUM!: a sheet holds no such number
        if isinstance(tidy, ExcelError):
            return str(tidy)
        return format(tidy, ".15g") if not value.is_integer() else str(int(value))
    return str(value)


def _rank(value: Any) -> tuple[int, Any]:
    """Excel's comparison order: numbers < text (case-insensitive) < booleans."""
    if value is None:
        value = 0
    if isinstance(value, bool):
        return 2, value
    if isinstance(value, str):
        return 1, value.casefold()
    number = to_number(value)
    return 0, number


def compare(op: str, a: Any, b: Any) -> bool:
    if a is None and isinstance(b, str):
        a = ""
    if b is None and isinstance(a, str):
        b = ""
    x, y = _rank(a), _rank(b)
    return {"=": x == y, "<>": x != y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]


def binary(op: str, a: Any, b: Any) -> Any:
    for v in (a, b):
        if isinstance(v, ExcelError):
            return v
    if op == "&":
        return text_of(a) + text_of(b)
    if op in ("=", "<>", "<", ">", "<=", ">="):
        return compare(op, a, b)
    return arith(op, a, b)
