"""Stage 1 of the spreadsheet comparator (AIDABench §3.3.3): structure index and sheet pairing.

How strictly the structure is read (Listing 5, Stage 1): "If the question specifies strict
requirements on header/column order/output format/file structure, enforce strict matching ...
Otherwise, use a relaxed comparison: allow row/column reordering, allow extra columns (as long as
they do not affect the requested outputs)". `read_structure` reads the instruction (and key
points), in English and Chinese, that way:

- strict, when it sets a column order ("in this order", "依次为", "column order"), an exact header
  or column count ("exactly 4 columns", "the header row must be exactly"), column positions
  ("column A holds ...", "第一列为"), or a layout ("the same format as the template", "保持原格式"):
  the same sheets, the same columns in the same order, the same row count, and no text where the
  reference holds numbers or dates;
- relaxed otherwise, in particular when it only names the columns wanted ("with the columns
  Region, Total", "列名为…", "包含以下列"): naming a column asks for it, not for its position nor
  against other columns. Sheets pair by name (or by position when one is left on each side),
  columns align by name, extra columns and any column order pass. Two narrower rules stay in
  relaxed mode because the instruction states them: sheets it names must be there (by name), and
  "only these columns" / "no other columns" / "只保留" forbids columns the reference lacks.

The sample row positions for Stage 2 are chosen here, once (Listing 5: head/middle/tail plus a
seeded random draw).
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
_COLS = r"(?:columns?|headers?|header\s+row|fields?)"
_ORDINAL = r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|\d+(?:st|nd|rd|th))"
STRICT_PATTERNS = (
    # an exact count or an exact header
    re.compile(r"\bexactly\s+" + _WORDNUM + r"\s+(?:columns?|sheets?)\b", re.I),
    re.compile(r"\b(?:exact|identical)\s+(?:same\s+)?(?:structure|layout|template|columns|headers?|header\s+row)\b", re.I),
    re.compile(r"\b" + _COLS + r"\s+(?:must|should|shall)\s+(?:be|read|match)\s+exactly\b", re.I),
    # a column order
    re.compile(r"\b" + _COLS + r"\b[^.;]{0,60}?\bin\s+(?:exactly\s+)?(?:this|that|the\s+(?:same|following|given|"
               r"listed|specified|original|above|below))\s+order\b", re.I),
    re.compile(r"\bin\s+(?:this|the\s+following)\s+order\s*:", re.I),
    re.compile(r"\b" + _COLS + r"\s+in\s+order\b", re.I),
    re.compile(r"\b(?:column|field|header)\s+order\b(?!\s*(?:id|no\b|number|date|#|key|code|status|line|amount))"
               r"|\border\s+of\s+(?:the\s+)?" + _COLS, re.I),  # "column order", not "the column Order ID"
    # column positions: "column A holds", "the first column is", "columns B to D"
    re.compile(r"\b(?i:columns?)\s+[A-Z](?:\s*(?i:-|to|through)\s*[A-Z])?\s+(?i:holds?|contains?|is|are|should|must|"
               r"shows?|has|have)\b|\b(?i:in|into)\s+(?i:columns?)\s+[A-Z]\b(?!\w)"),  # Excel letters: capitals
    re.compile(r"\b(?:the\s+)?" + _ORDINAL + r"\s+column\s+(?:is|must|should|holds?|contains?|shows?|=|:)", re.I),
    # a layout: a template, the source's format
    re.compile(r"\b(?:match(?:es|ing)?|follow(?:s|ing)?|according\s+to|as\s+in|use)\s+the\s+(?:template|layout|"
               r"reference\s+format|given\s+format)\b", re.I),
    re.compile(r"\b(?:same|original|existing|source(?:'s)?)\s+(?:(?:file|table|sheet|workbook|spreadsheet|output|overall)\s+)?"
               r"(?:layout|format(?:ting)?|structure|template)\s+(?:as|of)\b|\bkeep(?:ing)?\s+(?:the\s+)?(?:original|existing|same)\s+(?:layout|format|structure)\b", re.I),
    # the same in Chinese: 按以下顺序, 依次为, 列顺序, A列为, 第一列为, 与模板一致, 保持原格式, 表头完全一致
    re.compile(r"按(?:照)?(?:以下|如下|下列|此|该|给定|指定|原(?:有|表)?的?)?(?:的)?(?:列|字段)?顺序"),
    re.compile(r"依次(?:为|是|排列|：|:)"),
    re.compile(r"(?:列|字段|表头)(?:的)?(?:顺序|次序)"),
    re.compile(r"(?<![A-Za-z])[A-Z]\s*列(?:为|是|填|放|写|：|:)"),
    re.compile(r"第[一二三四五六七八九十\d]+列(?:为|是|填|放|写|：|:)"),
    re.compile(r"(?:与|和|同|按)(?:模板|模版|原表|原文件|源文件|参考文件|示例)[^。；;]{0,8}(?:一致|相同|格式|结构)"),
    re.compile(r"保持(?:原|原有|原始|原来)(?:表|表格|文件|工作表)?的?(?:格式|结构|布局|样式)"),
    re.compile(r"(?:表头|列名)[^。；;]{0,6}(?:完全|严格)(?:一致|相同|匹配)"),
    re.compile(r"(?:只能|只有|仅有|恰好|正好)\s*(?:\d+|[一二三四五六七八九十])\s*列"),
)
SHEET_NAME_PATTERNS = (
    re.compile(r"\bsheets?\s+(?:named|called|titled)\b|\b(?:named|called|titled)\s+sheets?\b", re.I),
    re.compile(r"\bsheet\s+names?\s*(?:is|are|=|:|should|must)", re.I),
    re.compile(r"\b[Ss]heets?\s+(?:['\"“‘][^'\"”’]{1,40}['\"”’]|[A-Z][\w]*)"),  # sheet Orders, sheet "Q1 totals"
    re.compile(r"(?:工作表|sheet)\s*(?:名称?|命名)\s*(?:为|是|：|:)|命名为[^。；;]{0,12}(?:工作表|sheet)", re.I),
)
ONLY_COLUMNS_PATTERNS = (
    re.compile(r"\bonly\s+(?:the\s+)?(?:following\s+|these\s+|those\s+|\d+\s+|[a-z]+\s+)?(?:columns?|fields?)\b"
               r"|\b(?:keep|retain|include|output)\s+only\s+(?:the\s+)?(?!rows?\b|records?\b|lines?\b)[^.;:]{0,40}?\bcolumns?\b"
               r"|\bno\s+(?:other|extra|additional|further)\s+" + _COLS + r"\b"
               r"|\b(?:remove|delete|drop)\s+(?:all\s+)?(?:the\s+)?(?:other|remaining)\s+" + _COLS + r"\b"
               r"|\bexactly\s+(?:these|the\s+following|those)\s+" + _COLS + r"\b", re.I),
    re.compile(r"(?:只|仅)(?:保留|包含|输出|需要|要)[^。；;，,]{0,40}?(?:列|字段)"
               r"|(?:删除|去掉|删去)(?:其他|其余|多余)的?(?:列|字段)|(?:不要|不得|不能|不包含)(?:其他|其余|多余|额外)的?(?:列|字段)"),
)


@dataclass(frozen=True)
class StructureRule:
    """How Stage 1 reads one task's structure: strict or relaxed, and why (the phrase that
    decided), with the two narrower rules a relaxed reading still keeps."""

    strict: bool
    why: str
    sheet_names: str | None = None  # relaxed: the phrase naming sheets (they must be there, by name)
    only_columns: str | None = None  # relaxed: the phrase forbidding columns beyond the reference's
    text: str = ""  # the instruction and key points, casefolded: which reference sheets it names

    def names_sheet(self, name: str) -> bool:
        """Does the instruction name this reference sheet (so a relaxed match still needs it by name)?"""
        return bool(self.sheet_names) and norm_label(name) in " ".join(self.text.split())


def _first(patterns: Sequence[re.Pattern[str]], texts: Sequence[str]) -> str | None:
    for text in texts:
        for rx in patterns:
            if m := rx.search(text):
                return m.group(0)
    return None


def detect_strict(texts: Sequence[str]) -> str | None:
    """The phrase that makes the instruction prescribe an exact structure (an order, an exact
    header or count, column positions, a layout), or None."""
    return _first(STRICT_PATTERNS, texts)


def read_structure(texts: Sequence[str], *, strict: bool | None = None) -> StructureRule:
    """Strict or relaxed from the instruction and key points (`strict` given: the task's own
    decision, e.g. made at import or by its author, which wins)."""
    phrase = detect_strict(texts)
    sheets, only = _first(SHEET_NAME_PATTERNS, texts), _first(ONLY_COLUMNS_PATTERNS, texts)
    text = "\n".join(texts).casefold()
    if strict is not None:
        why = "set by the task" + (f" (the instruction says {phrase!r})" if strict and phrase else "")
        return StructureRule(strict, why, None if strict else sheets, None if strict else only, text)
    if phrase:
        return StructureRule(True, f"the instruction says {phrase!r}", text=text)
    return StructureRule(False, "no order, exact header or layout prescribed (naming columns asks for them, not "
                                "for their order nor against others: Listing 5's relaxed mode)", sheets, only, text)


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


def _pair_sheets(refs: list[Table], preds: list[Table], rule: StructureRule) -> list[tuple[Table, Table]] | str:
    """Reference sheets paired with prediction sheets, or why they cannot be. Strict: the same
    sheet names, no more, no fewer. Relaxed: by name (loosely), a reference sheet the instruction
    names must be found by its name; one left on each side pair up; other prediction sheets pass."""
    no_names = any(t.from_csv for t in refs + preds)  # a CSV has no sheet name
    strict_names = rule.strict and not no_names
    named = [] if rule.strict or no_names else [r for r in refs if rule.names_sheet(r.name)]
    if not strict_names and not named and len(refs) == len(preds) == 1:
        return [(refs[0], preds[0])]

    def norm(name: str) -> str:
        return norm_label(name, loose=not rule.strict)

    by_name = {norm(p.name): p for p in preds}
    pairs = [(r, by_name[norm(r.name)]) for r in refs if norm(r.name) in by_name]
    left_r = [r for r in refs if norm(r.name) not in by_name]
    left_p = [p for p in preds if all(p is not q for _, q in pairs)]
    if strict_names:
        if left_r or left_p:
            return (f"sheets differ: expected {[r.name for r in refs]}, got {[p.name for p in preds]} "
                    "(the instruction prescribes the structure)")
        return pairs
    if missing := [r for r in named if any(r is x for x in left_r)]:
        return (f"sheet '{missing[0].name}' is missing (prediction sheets: {[p.name for p in preds]}; "
                f"the instruction names it: {rule.sheet_names!r})")
    if len(left_r) == 1 and len(left_p) == 1:
        pairs.append((left_r[0], left_p[0]))
    elif left_r:
        return f"sheet '{left_r[0].name}' is missing (prediction sheets: {[p.name for p in preds]})"
    return pairs


def _align(r: Table, p: Table, rule: StructureRule) -> list[tuple[str, str]] | str:
    if rule.strict:
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
    if rule.only_columns:
        used = {pc for _, pc in cols}
        extra = [c for c in p.columns if c not in used]
        if extra:
            return (f"sheet '{r.name}': column '{extra[0]}' is not asked for (the instruction says "
                    f"{rule.only_columns!r}; expected columns {r.columns}, got {p.columns})")
    return cols


def structure(refs: list[Table], preds: list[Table], rule: StructureRule, sample_n: int, seed: int) -> list[Pair] | str:
    """Stage 1: the sheets paired and their columns aligned under `rule`, or the first mismatch."""
    strict = rule.strict
    refs, preds = [t for t in refs if t.columns], [t for t in preds if t.columns]
    if not refs:
        return "the reference is empty: there is nothing to compare against"
    if not preds:
        return "the prediction has no sheet with data"
    paired = _pair_sheets(refs, preds, rule)
    if isinstance(paired, str):
        return paired
    pairs: list[Pair] = []
    for r, p in paired:
        cols = _align(r, p, rule)
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
