"""Stage 1 of the spreadsheet comparator (AIDABench §3.3.3): structure index and sheet pairing.

Strict mode (the task prescribes the structure: sheet names, column names, "exactly N columns",
a template; `detect_strict`, in English and Chinese) needs the same sheets, the same columns in the
same order, the same row count and no text where the reference holds numbers or dates; tolerant
mode pairs sheets by name (or by position when one is left on each side), aligns columns by name
and allows extra columns and any column order. The sample row positions for Stage 2 are chosen
here, once (Listing 5: head/middle/tail plus a seeded random draw).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from deskbench.tracks.analytics.scoring.sheets_load import Table, norm_label
from deskbench.tracks.analytics.scoring.sheets_values import column_kind

SMALL_SHEET = 200  # Listing 5: full comparison is allowed below 200 rows
_WORDNUM = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
STRICT_PATTERNS = (
    re.compile(r"\bexactly\s+" + _WORDNUM + r"\s+(?:columns?|sheets?|rows?)\b", re.I),
    re.compile(r"\b(?:columns?|headers?)\b[^.;]{0,60}?\bin\s+(?:exactly\s+)?(?:this|that|the\s+(?:same|following|given|"
               r"listed|specified))\s+order\b", re.I),
    re.compile(r"\b(?:columns?|headers?)\s+in\s+order\b", re.I),
    re.compile(r"\bsheets?\s+(?:named|called|titled)\b", re.I),
    re.compile(r"\b(?:exact|identical)\s+(?:same\s+)?(?:structure|layout|format|template|columns|headers)\b", re.I),
    re.compile(r"\bmatch(?:es|ing)?\s+the\s+(?:template|reference\s+format)\b", re.I),
    # column names prescribed: "the columns Region, Total Units, ...", "columns named ...", "headers: ..."
    re.compile(r"\b(?:columns?|headers?)\s+(?:named\s+|called\s+|titled\s+)?(?!(?:for|with|that|which|where|of|to|"
               r"in|from|by|as|are|is|and|or)\b)['\"“‘]?[\w(][\w ()%/&'.-]{0,40}?['\"”’]?\s*,\s*['\"“‘]?[\w(]", re.I),
    re.compile(r"\b(?:columns?|headers?)\s+(?:named|called|titled|headed)\b", re.I),
    re.compile(r"\b(?:columns?|headers?)\s*:\s*['\"“‘]?\w", re.I),
    re.compile(r"\bwith\s+(?:all\s+)?(?:the\s+)?(?:original|same|source|input's|existing)\s+columns\b", re.I),
    # the same in Chinese: 列名为…, 表头：…, 包含以下列, 工作表命名为…
    re.compile(r"(?:列名|表头|字段名?)(?:分别|依次)?(?:为|是|包括|：|:)"),
    re.compile(r"(?:列|字段)(?:分别|依次)为"),
    re.compile(r"包含(?:以下|如下)(?:列|字段)"),
    re.compile(r"(?:工作表|sheet)\s*(?:名称?|命名)\s*(?:为|是|：|:)", re.I),
)


@dataclass
class Pair:
    """A reference sheet, the prediction sheet it is compared with, and how (Stage 1's output)."""

    ref: Table
    pred: Table
    columns: list[tuple[str, str]]  # (reference column, prediction column)
    positions: list[int] = field(default_factory=list)  # reference rows to compare
    full: bool = True
    extra: str = ""  # a prediction row matching no reference row (full order-insensitive comparison)

    @property
    def name(self) -> str:
        return self.ref.name


def detect_strict(texts: Sequence[str]) -> str | None:
    """The phrase that makes the instruction prescribe an exact structure, or None."""
    for text in texts:
        for rx in STRICT_PATTERNS:
            if m := rx.search(text):
                return m.group(0)
    return None


def sample_positions(n: int, sample_n: int, seed: int, salt: str) -> list[int]:
    """Head, middle, tail and seeded random rows (Listing 5), sorted; all rows when n is small."""
    if n < SMALL_SHEET or n <= 4 * sample_n:
        return list(range(n))
    mid = n // 2 - sample_n // 2
    chosen = set(range(sample_n)) | set(range(mid, mid + sample_n)) | set(range(n - sample_n, n))
    rest = [i for i in range(n) if i not in chosen]
    chosen |= set(random.Random(f"{seed}:{salt}").sample(rest, sample_n))
    return sorted(chosen)


def index_line(t: Table) -> str:
    kinds = ", ".join(f"{c}:{column_kind(t.values(c))}" for c in t.columns)
    return f"sheet '{t.name}': {t.n_rows} rows x {len(t.columns)} columns [{kinds}]"


def _pair_sheets(refs: list[Table], preds: list[Table], strict: bool) -> list[tuple[Table, Table]] | str:
    """Reference sheets paired with prediction sheets, or why they cannot be."""
    names_matter = strict and not any(t.from_csv for t in refs + preds)  # a CSV has no sheet name
    if not names_matter and len(refs) == len(preds) == 1:
        return [(refs[0], preds[0])]

    def norm(name: str) -> str:
        return norm_label(name, loose=not strict)

    by_name = {norm(p.name): p for p in preds}
    pairs = [(r, by_name[norm(r.name)]) for r in refs if norm(r.name) in by_name]
    left_r = [r for r in refs if norm(r.name) not in by_name]
    left_p = [p for p in preds if all(p is not q for _, q in pairs)]
    if names_matter:
        if left_r or left_p:
            return (f"sheets differ: expected {[r.name for r in refs]}, got {[p.name for p in preds]} "
                    "(the instruction prescribes the structure)")
        return pairs
    if len(left_r) == 1 and len(left_p) == 1:
        pairs.append((left_r[0], left_p[0]))
    elif left_r:
        return f"sheet '{left_r[0].name}' is missing (prediction sheets: {[p.name for p in preds]})"
    return pairs


def _align(r: Table, p: Table, strict: bool) -> list[tuple[str, str]] | str:
    if strict:
        want, got = [norm_label(c) for c in r.columns], [norm_label(c) for c in p.columns]
        if want != got:
            i = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got)))
            exp = r.columns[i] if i < len(want) else "(no column)"
            act = p.columns[i] if i < len(got) else "(no column)"
            return (f"sheet '{r.name}': column {i + 1} should be '{exp}', got '{act}' "
                    f"(expected columns {r.columns}, got {p.columns})")
        return list(zip(r.columns, p.columns, strict=True))
    by_name = {norm_label(c, loose=True): c for c in reversed(p.columns)}
    cols = []
    for c in r.columns:
        if norm_label(c, loose=True) not in by_name:
            return f"sheet '{r.name}': column '{c}' is missing (prediction columns: {p.columns})"
        cols.append((c, by_name[norm_label(c, loose=True)]))
    return cols


def structure(refs: list[Table], preds: list[Table], strict: bool, sample_n: int, seed: int) -> list[Pair] | str:
    refs, preds = [t for t in refs if t.columns], [t for t in preds if t.columns]
    if not refs:
        return "the reference is empty: there is nothing to compare against"
    if not preds:
        return "the prediction has no sheet with data"
    paired = _pair_sheets(refs, preds, strict)
    if isinstance(paired, str):
        return paired
    pairs: list[Pair] = []
    for r, p in paired:
        cols = _align(r, p, strict)
        if isinstance(cols, str):
            return cols
        if strict and r.n_rows != p.n_rows:
            return f"sheet '{r.name}': expected {r.n_rows} data rows, got {p.n_rows}"
        if strict:
            for rc, pc in cols:
                rk, pk = column_kind(r.values(rc)), column_kind(p.values(pc))
                if rk in ("number", "date") and pk == "text":
                    return f"sheet '{r.name}': column '{rc}' holds text, the reference holds {rk}s"
        pos = sample_positions(r.n_rows, sample_n, seed, r.name)
        pairs.append(Pair(r, p, cols, pos, full=len(pos) == r.n_rows))
    return pairs
