"""Numbers as analysts write them: "₹1,234.5 Cr", "12.5 million", "3.4bn", "45%", "(1,200)".

Verifiers compare a response's figure with a golden one, so the figure must be read the way a
reader would: currency signs ignored, accounting parentheses negative, Indian digit grouping
("1,23,456") accepted, and scale words (crore, lakh, million, bn, thousand) turned into a
multiplier so "1,250 lakh" and "12.5 Cr" compare equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCALES: dict[str, float] = {
    "crore": 1e7,
    "crores": 1e7,
    "cr": 1e7,
    "cr.": 1e7,
    "lakh": 1e5,
    "lakhs": 1e5,
    "lac": 1e5,
    "lacs": 1e5,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "m": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "thousand": 1e3,
    "thousands": 1e3,
    "k": 1e3,
    "%": 1.0,
    "pp": 1.0,
}
"""Scale words and their multipliers ("%" and "pp" keep the value; they only mark a percentage)."""

UNIT_SCALE: dict[str, float] = {
    "one": 1.0,
    "thousand": 1e3,
    "lakh": 1e5,
    "million": 1e6,
    "crore": 1e7,
    "billion": 1e9,
    "percent": 1.0,
}
"""Units a golden value may be stated in (`unit:` in a numeric verifier)."""

_SCALE_ALT = "|".join(
    re.escape(w) for w in sorted((w for w in SCALES if w not in ("%",)), key=len, reverse=True)
)
NUMBER_RE = re.compile(
    r"(?P<open>\()?\s*"
    r"(?P<currency>₹|Rs\.?|INR|USD|US\$|\$|€|EUR|£|GBP)?\s*"
    r"(?P<sign>[-−–])?\s*"
    r"(?P<digits>\d{1,3}(?:,\d{2,3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)"
    r"(?:\s*(?P<scale>%|(?:" + _SCALE_ALT + r")(?![A-Za-z0-9])))?"
    r"(?P<close>\s*\))?",
    re.IGNORECASE,
)
_WESTERN = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_INDIAN = re.compile(r"^\d{1,2}(?:,\d{2})*,\d{3}(?:\.\d+)?$")


@dataclass(frozen=True, slots=True)
class ParsedNumber:
    """One figure found in text: `value` in ones (scale applied), where it was, and how written."""

    value: float
    raw: str
    scale_word: str | None
    start: int
    end: int

    @property
    def is_percent(self) -> bool:
        return self.scale_word in ("%", "pp")


def _digits_value(digits: str) -> float | None:
    if "," in digits and not (_WESTERN.match(digits) or _INDIAN.match(digits)):
        return None
    return float(digits.replace(",", ""))


def find_numbers(text: str) -> list[ParsedNumber]:
    """Every figure in `text`, left to right, with its scale word applied."""
    found: list[ParsedNumber] = []
    for m in NUMBER_RE.finditer(text):
        base = _digits_value(m.group("digits"))
        if base is None:
            continue
        scale_word = m.group("scale")
        key = scale_word.lower() if scale_word else None
        value = base * (SCALES[key] if key and key not in ("%", "pp") else 1.0)
        negative = bool(m.group("sign")) or bool(m.group("open") and m.group("close"))
        start = m.start("digits") if not m.group("open") or not m.group("close") else m.start()
        found.append(
            ParsedNumber(
                value=-value if negative else value,
                raw=m.group(0).strip(),
                scale_word=key,
                start=start,
                end=m.end(),
            )
        )
    return found


def parse_number(text: str) -> ParsedNumber | None:
    """The first figure in `text`, or None."""
    numbers = find_numbers(text)
    return numbers[0] if numbers else None


def to_unit(number: ParsedNumber, unit: str | None) -> float:
    """`number` in `unit` (one, thousand, lakh, million, crore, billion, percent).

    A figure written with a scale word is converted; a bare figure is assumed to be written in
    `unit` already (a table headed "INR Cr" holds bare figures in crore).
    """
    if unit is None or number.scale_word is None or number.is_percent:
        return number.value
    return number.value / UNIT_SCALE[unit]
