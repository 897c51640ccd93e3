"""Numeric route and query parameters of every web app: one parser, so a number in a URL or a
form is ASCII digits of bounded length within a range, and anything else is a 400 naming the
parameter. Why: `int()` of a 5,000-digit string raises past Python's 4,300-digit limit (a 500),
`str.isdigit()` accepts "²" that `int()` refuses (a 500), and a 30-digit number reaches SQLite
as an overflow (a 500). FastAPI's own `int` parameters answer 422 with the whole input echoed;
routes take the text and parse it here instead."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException

MAX_DIGITS = 9
"""No count, page, attempt or position of a run needs more; 9 digits parse in constant time."""
HIGHEST = 10**MAX_DIGITS - 1


def parse_number(raw: str | None, *, low: int = 0, high: int = HIGHEST) -> int | None:
    """`raw` as an int in [low, high], or None. Only ASCII digits, at most MAX_DIGITS of them:
    no sign, no spaces, no "²"."""
    text = raw or ""
    if not (0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if low <= value <= high else None


def whole_number(raw: str | None, what: str, *, low: int = 0, high: int = HIGHEST) -> int:
    """`raw` as an int in [low, high]; otherwise HTTP 400 "<what> must be a whole number from
    <low> to <high>"."""
    value = parse_number(raw, low=low, high=high)
    if value is None:
        raise HTTPException(400, f"{what} must be a whole number from {low} to {high}")
    return value


def _position(n: str) -> int:
    return whole_number(n, "n (the number in the path)", low=1)


Position = Annotated[int, Depends(_position)]
"""A 1-based number in a route's path, `{n}` (`/q/{n}`, `/calibration/{n}`), parsed by whole_number."""
