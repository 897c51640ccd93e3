"""Task constraints read from an instruction, checked on a sheet (AIDABench §3.3.3, Stage 3).

Only high-yield constraints with unambiguous wording are recognised (the paper: "avoid heavy
NLP"): deduplication, sorting, filters against a number or a quoted value, and top-K. Anything
else is not guessed. A recognised constraint is applied to a sheet only if the reference sheet
satisfies it: a reference that violates it means the wording was misread, not that every
prediction is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from deskbench.tracks.analytics.scoring.sheets_load import Table, norm_label
from deskbench.tracks.analytics.scoring.sheets_values import (
    Norm,
    Percent,
    close,
    column_kind,
    normalise_column,
    show,
)

Op = Literal[">", ">=", "<", "<=", "=", "!="]
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10, "twenty": 20}
_K = r"(?P<k>\d+|" + "|".join(WORDS) + r")"
_END = (r"(?=\s*(?:[,;:\n]|\.(?:\s|$)|$)|\s+(?:and|then|keep|keeping|with|in|from|so|to|where|for|"
        r"desc\w*|asc\w*|highest|largest|lowest|smallest|biggest|newest|oldest|most|least|high|low|"
        r"decreasing|increasing|alphabetical\w*|a-z|z-a)\b)")
_COL = r"(?:the\s+)?(?P<col>[\w'(][\w ()%/&'.-]*?)"
_GENERIC = {"rows", "row", "records", "record", "entries", "entry", "lines", "line", "values", "data", "items"}

SORT_RE = re.compile(r"\b(?:sort(?:ed)?|order(?:ed)?|rank(?:ed)?|arrange(?:d)?)\s+(?:them\s+|it\s+|rows\s+)?"
                     r"(?:by|on)\s+" + _COL + _END, re.I)
SORT_OF_RE = re.compile(r"\bin\s+(?P<dir>descending|ascending|decreasing|increasing)\s+order\s+of\s+" + _COL + _END, re.I)
DESC_RE = re.compile(r"\b(?:desc\w*|decreasing|(?:highest|largest|biggest|most|newest|latest)(?:\s+\w+)?\s+first|"
                     r"high(?:est)?\s+to\s+low(?:est)?|largest\s+to\s+smallest|most\s+recent\s+first|z\s*-\s*a)\b", re.I)
ASC_RE = re.compile(r"\b(?:asc\w*|increasing|(?:lowest|smallest|least|oldest|earliest)(?:\s+\w+)?\s+first|"
                    r"low(?:est)?\s+to\s+high(?:est)?|smallest\s+to\s+largest|a\s*-\s*z|alphabetical\w*)\b", re.I)
DEDUP_RES = (
    re.compile(r"\b(?:remove|drop|delete|eliminate)\s+(?:any\s+|all\s+|the\s+)?duplicate\s+"
               r"(?P<col>[\w][\w ()%/&'.-]*?)\s+(?:rows|records|entries|lines|values)\b", re.I),
    re.compile(r"\b(?:remove|drop|delete|eliminate|exclude|without)\s+(?:any\s+|all\s+|the\s+)?duplicat\w*"
               r"(?:\s+(?:rows|records|entries)?\s*(?:based\s+on|by|on|using|of|in)\s+" + _COL + _END + r")?", re.I),
    re.compile(r"\bduplicate\s+(?P<col>[\w][\w ()%/&'.-]*?)\s+(?:rows|records|entries|lines)\s+"
               r"(?:are\s+|were\s+|should\s+be\s+|must\s+be\s+)?(?:removed|dropped|deleted|eliminated)", re.I),
    re.compile(r"\bde-?dup\w*(?:\s+(?:the\s+)?(?:rows|records|data)?\s*(?:based\s+on|by|on|using)\s+" + _COL + _END + r")?", re.I),
    re.compile(r"\bno\s+duplicat\w*(?:\s+" + _COL + _END + r")?", re.I),
    re.compile(r"\bunique\s+" + _COL + _END, re.I),
    re.compile(r"\bone\s+row\s+(?:per|for\s+each|for\s+every)\s+" + _COL + _END, re.I),
)
_SYMBOL_OPS: dict[str, Op] = {">=": ">=", "≥": ">=", "<=": "<=", "≤": "<=", "!=": "!=", "<>": "!=",
                              "==": "=", "=": "=", ">": ">", "<": "<"}
_WORD_OPS: tuple[tuple[str, Op], ...] = (
    (r"at\s+least|no\s+less\s+than|not\s+less\s+than|greater\s+than\s+or\s+equal\s+to", ">="),
    (r"at\s+most|no\s+more\s+than|not\s+more\s+than|less\s+than\s+or\s+equal\s+to", "<="),
    (r"is\s+not|not\s+equal\s+to|other\s+than", "!="),
    (r"greater\s+than|more\s+than|above|over|exceed(?:s|ing)?|higher\s+than", ">"),
    (r"less\s+than|fewer\s+than|below|under|lower\s+than", "<"),
    (r"equals?|equal\s+to|is", "="),
)
_SYM_ALT = "|".join(re.escape(o) for o in sorted(_SYMBOL_OPS, key=len, reverse=True))
_WORD_ALT = "|".join(f"(?:{alt})" for alt, _ in _WORD_OPS)
_VALUE = r"(?P<val>'[^']*'|\"[^\"]*\"|“[^”]*”|‘[^’]*’|[-+]?[$€£₹]?\d[\d,]*(?:\.\d+)?%?)"
FILTER_RE = re.compile(
    r"\b(?P<neg>exclude|remove|drop|only|keep|include|select|filter(?:ed)?(?:\s+(?:to|for))?)\s+(?:only\s+)?(?:the\s+)?"
    r"(?:\w+\s+)?(?:where|with|whose|for\s+which|in\s+which|that\s+have|having)\s+(?:the\s+|a\s+|an\s+)?"
    r"(?P<col>[\w'(][\w ()%/&'.-]*?)(?:\s*(?P<sym>" + _SYM_ALT + r")|\s+(?:are\s+)?(?P<word>" + _WORD_ALT + r"))\s*"
    + _VALUE, re.I)
TOPK_RES = (re.compile(r"\b(?P<dir>top|bottom)[\s-]*" + _K + r"\b", re.I),
            re.compile(r"\b(?:the\s+)" + _K + r"\s+(?P<dir>highest|largest|biggest|best|lowest|smallest|worst)\b", re.I))
_NEGATE: dict[str, Op] = {">": "<=", ">=": "<", "<": ">=", "<=": ">", "=": "!=", "!=": "="}
# a row order asked for without a column the sort constraints could name (or with one they did
# not recognise): "highest first", "rank", "top 5", "A-Z", 降序, 从高到低, 前10名. Column order
# ("columns in this order") is structure, not row order: no bare "order" here.
ORDER_RES = (
    re.compile(r"\b(?:sort(?:ed|ing|s)?|rank(?:ed|ing|s)?|(?:order(?:ed)?|arrange(?:d)?)\s+(?:them\s+|it\s+|the\s+rows\s+|rows\s+)?(?:by|on|from))\b", re.I),
    re.compile(r"\b(?:ascending|descending|increasing\s+order|decreasing\s+order|reverse\s+order|"
               r"chronological(?:ly|\s+order)|alphabetical(?:ly|\s+order)?|a\s*-\s*z|z\s*-\s*a)\b", re.I),
    re.compile(r"\b(?:highest|largest|biggest|most|lowest|smallest|least|newest|latest|oldest|earliest)(?:\s+\w+)?\s+first\b", re.I),
    re.compile(r"\b(?:high(?:est)?|large(?:st)?|most|low(?:est)?|small(?:est)?|least|new(?:est)?|old(?:est)?)\s+to\s+"
               r"(?:high(?:est)?|large(?:st)?|most|low(?:est)?|small(?:est)?|least|new(?:est)?|old(?:est)?)\b", re.I),
    re.compile(r"\b(?:top|bottom)[\s-]*(?:\d+|" + "|".join(WORDS) + r")\b", re.I),
    re.compile(r"排序|升序|降序|倒序|顺序排列|排名|排列|[从由](?:高|低|大|小|多|少|早|晚|新|旧)到(?:高|低|大|小|多|少|早|晚|新|旧)"
               r"|前\s*(?:\d+|[一二三四五六七八九十]+)\s*(?:名|位|个|条|项)"),
)


@dataclass(frozen=True)
class Constraint:
    kind: Literal["dedup", "sort", "filter", "top_k"]
    column: str | None = None  # as the instruction names it
    descending: bool = False
    op: Op | None = None
    value: float | str | None = None
    k: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "dedup":
            return f"dedup({self.column or 'all columns'})"
        if self.kind == "sort":
            return f"sort({self.column}, {'descending' if self.descending else 'ascending'})"
        if self.kind == "filter":
            shown = f"{self.value:g}" if isinstance(self.value, float) else repr(self.value)
            return f"filter({self.column} {self.op} {shown})"
        return f"top_k({self.k})"


def _col(text: str | None) -> str | None:
    if not text:
        return None
    t = re.sub(r"^(?:the|a|an|each|every)\s+", "", text.strip(), flags=re.I)
    t = re.sub(r"\s+(?:column|field|values?|is|are)$", "", t, flags=re.I).strip(" '")
    return None if not t or t.casefold() in _GENERIC else t


def _number(text: str) -> float | None:
    t = text.replace(",", "").lstrip("$€£₹").rstrip("%")
    try:
        return float(t)
    except ValueError:
        return None


def extract_constraints(texts: Sequence[str]) -> list[Constraint]:
    """Every recognised constraint in the instruction and key points, first mention wins."""
    found: list[Constraint] = []

    def add(c: Constraint) -> None:
        if c.kind == "dedup":  # one dedup: a keyed one wins over "all columns"
            if any(f.kind == "dedup" and (f.column or c.column is None) for f in found):
                return
            found[:] = [f for f in found if f.kind != "dedup"]
        if c not in found:
            found.append(c)

    for text in texts:
        for m in SORT_RE.finditer(text):
            tail = re.split(r"[;\n]|\.(?:\s|$)", text[m.end("col"):m.end("col") + 30])[0]
            desc = DESC_RE.search(tail)
            asc = ASC_RE.search(tail)
            col = _col(m.group("col"))
            if col:
                add(Constraint("sort", col, descending=bool(desc and (not asc or desc.start() < asc.start()))))
        for m in SORT_OF_RE.finditer(text):
            if col := _col(m.group("col")):
                add(Constraint("sort", col, descending=m.group("dir").lower() in ("descending", "decreasing")))
        for rx in DEDUP_RES:
            for m in rx.finditer(text):
                add(Constraint("dedup", _col(m.groupdict().get("col"))))
        for m in FILTER_RE.finditer(text):
            if m.group("sym"):
                op = _SYMBOL_OPS[m.group("sym")]
            else:
                op = next(o for alt, o in _WORD_OPS if re.fullmatch(alt, m.group("word"), re.I))
            raw = m.group("val")
            value: float | str | None = raw[1:-1] if raw[0] in "'\"“‘" else _number(raw)
            col = _col(m.group("col"))
            if value is None or col is None:
                continue
            if m.group("neg").lower() in ("exclude", "remove", "drop"):
                op = _NEGATE[op]
            add(Constraint("filter", col, op=op, value=value))
        for rx in TOPK_RES:
            for m in rx.finditer(text):
                k = m.group("k").lower()
                add(Constraint("top_k", k=int(k) if k.isdigit() else WORDS[k]))
    return found


def order_phrase(texts: Sequence[str]) -> str | None:
    """The words asking for a row order that no recognised sort constraint accounts for, or None.

    Why: a sort the comparator recognised ("sorted by revenue, highest first") makes row order
    matter only on the sheet whose column it names; an order asked for in other words (a Chinese
    instruction, "categories A-Z", "top 5") names no column the comparator can tie it to, so it
    makes row order matter on every sheet: the reference's order is the one asked for."""
    for text in texts:
        masked = text
        for rx in (SORT_RE, SORT_OF_RE):
            for m in rx.finditer(text):
                if _col(m.group("col")) is None:
                    continue
                tail = re.split(r"[;\n]|\.(?:\s|$)", text[m.end("col"):m.end("col") + 30])[0]
                end = m.end("col") + len(tail)
                masked = masked[:m.start()] + " " * (end - m.start()) + masked[end:]
        for rx in ORDER_RES:
            if asked := rx.search(masked):
                return asked.group(0)
    return None


def resolve_column(name: str, columns: Sequence[str]) -> str | None:
    """The table column an instruction's wording names: exact, singular/plural, then whole-word containment."""
    want = norm_label(name, loose=True)
    normed = {c: norm_label(c, loose=True) for c in columns}
    for c, n in normed.items():
        if n in (want, want.rstrip("s"), want + "s"):
            return c
    pattern = re.compile(r"(?<!\w)" + re.escape(want.rstrip("s")) + r"s?(?!\w)")
    inside = [c for c, n in normed.items() if pattern.search(n)]
    if inside:
        return min(inside, key=lambda c: (len(c), columns.index(c)))
    return None


def _sort_key(v: Norm) -> tuple[int, float | str]:
    if isinstance(v, Percent):
        return (0, v.value)
    if isinstance(v, float):
        return (0, v)
    return (1, str(v).casefold())


def _compare(cell: Norm, op: Op, value: float | str) -> bool:
    if cell is None:
        return op == "!="
    if isinstance(value, str):
        same = str(cell).casefold() == " ".join(value.split()).casefold()
        if op in ("=", "!="):
            return same == (op == "=")
        return False
    num = cell.value if isinstance(cell, Percent) else cell
    if not isinstance(num, float):
        return op == "!="
    if op in ("=", "!="):
        return close(num, value) == (op == "=")
    return {">": num > value and not close(num, value), ">=": num >= value or close(num, value),
            "<": num < value and not close(num, value), "<=": num <= value or close(num, value)}[op]


def check(c: Constraint, table: Table, columns: Sequence[str]) -> str | None:
    """The violation of `c` in `table` (one line naming the row), or None when it holds.

    `columns`: the sheet's column the constraint names (sort, filter, keyed dedup), or for
    dedup over whole rows the columns compared with the reference (an added index column
    would make every row unique)."""
    if c.kind == "top_k":
        return None if table.n_rows == c.k else f"top-{c.k} asks for {c.k} rows, sheet '{table.name}' has {table.n_rows}"
    cols = [normalise_column(table.values(x), column_kind(table.values(x))) for x in columns]
    if c.kind == "dedup":
        seen: dict[tuple[Norm, ...], int] = {}
        for i, r in enumerate(zip(*cols, strict=True)):
            if r in seen:
                what = f"'{columns[0]}' = {show(r[0])}" if c.column else "an identical row"
                return (f"duplicates remain in sheet '{table.name}': row {table.rownums[i]} repeats {what} "
                        f"(first at row {table.rownums[seen[r]]})")
            seen[r] = i
        return None
    column, vals = columns[0], cols[0]
    if c.kind == "sort":
        present = [(i, v) for i, v in enumerate(vals) if v is not None]
        for (i, a), (j, b) in zip(present, present[1:], strict=False):
            ka, kb = _sort_key(a), _sort_key(b)
            if isinstance(ka[1], float) and isinstance(kb[1], float) and close(ka[1], kb[1]):
                continue
            if (kb > ka) if c.descending else (kb < ka):
                return (f"sheet '{table.name}' is not sorted by '{column}' "
                        f"{'descending' if c.descending else 'ascending'}: row {table.rownums[i]} ({show(a)}) "
                        f"comes before row {table.rownums[j]} ({show(b)})")
        return None
    assert c.op is not None and c.value is not None
    for i, v in enumerate(vals):
        if not _compare(v, c.op, c.value):
            return f"sheet '{table.name}' row {table.rownums[i]} breaks {c.label}: '{column}' is {show(v)}"
    return None
