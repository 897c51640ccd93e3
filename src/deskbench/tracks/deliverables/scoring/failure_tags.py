"""Failure-mode tags over rubric justifications (the consulting DRA paper, §4.6 and Table 11).

Six tags: noise_inclusion, fabricated_data, cascading_math_errors, missing_section,
no_files_read, tech_failure. A cell is one criterion justification of one episode; a cell may
carry zero or more tags. Two taggers:

- `regex_tags`: deterministic, the patterns in PATTERNS (case-insensitive; a match negated in
  its clause, e.g. "no fabricated figures", does not count):
    noise_inclusion       noise, filler, padding, off-topic, irrelevant, tangential, scope
                          creep/drift, out-of-scope, forbidden/prohibited content, verbose
    fabricated_data       fabricat*, invented, hallucinat*, made-up, unsupported figures or
                          claims, not found in the sources/files, values estimated or assumed
                          in place of the data
    cascading_math_errors calculation/arithmetic/math errors, miscalculat*, wrong total or
                          figure, cascad*, propagat*, carried through, compounding, off by N,
                          unit errors or wrong units, double counting
    missing_section       missing/absent/omitted section, heading, table, slide, sheet or
                          part; truncated; incomplete deliverable
    no_files_read         could not / unable to read, open, parse or access (the files);
                          unreadable; did not read/use the input files; files never opened
    tech_failure          refusal, timeout/timed out, crash, context window/length, no output,
                          empty response, API/tool/server error, content policy, rate limit
- `llm_tag_cells`: an LLM classifier (ask_json, the six tags as an enum), one call per cell.

`tag_counts` aggregates as Table 11 does: per system, a tag counts once per (system, task) if
any of the five criterion justifications of that task (any attempt) carries it. `jaccard`
compares two taggers per tag over the cells both tagged.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from pydantic import BaseModel
from rich.markup import escape
from rich.table import Table

from deskbench.models.types import ChatModel, Message
from deskbench.scoring.json_reply import ask_json
from deskbench.tracks.deliverables.scoring import rubric_prompts as P
from deskbench.tracks.deliverables.scoring.rubric import unnegated
from deskbench.tracks.deliverables.scoring.rubric_qc_final import FinalGrade
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

# the grades' keys (task, system, attempt or any other) are not read: only their values
_K = TypeVar("_K")

__all__ = ["PATTERNS", "TAGS", "CellKey", "LlmTagging", "Tag", "TagCounts", "cell_texts", "jaccard",
           "llm_tag_cells", "regex_tags", "tag_cells", "tag_counts"]

Tag = Literal["noise_inclusion", "fabricated_data", "cascading_math_errors", "missing_section", "no_files_read",
              "tech_failure"]
TAGS: tuple[Tag, ...] = ("noise_inclusion", "fabricated_data", "cascading_math_errors", "missing_section",
                         "no_files_read", "tech_failure")
CellKey = tuple[str, str, int, str]
"""(task_id, system, attempt, criterion code)"""

_FILES = r"(?:the |its |any |all )?(?:input |provided |source |supplied |attached )?(?:files?|data|documents?|workbooks?|spreadsheets?|inputs?|corpus)"

PATTERNS: dict[Tag, re.Pattern[str]] = {
    "noise_inclusion": re.compile(
        r"\bnoise\b|\bnoisy\b|\bfiller\b|\bpadd(?:ing|ed)\b|off[- ]topic|irrelevant|tangential|scope (?:creep|drift)"
        r"|out[- ]of[- ]scope|(?:forbidden|prohibited|excluded) (?:content|narrative|material|analysis|topics?)"
        r"|\bverbose\b|unnecessary (?:detail|content|narrative|material)|boilerplate", re.I),
    "fabricated_data": re.compile(
        r"fabricat\w*|\binvent(?:ed|s|ing)\b|hallucinat\w*|made[- ]up|unsupported (?:figures?|numbers?|claims?|data)"
        r"|not (?:present|found|in) (?:in )?the (?:source|input|provided)? ?(?:files?|documents?|sources?|data)"
        r"|(?:estimated|assumed|guessed) (?:values?|figures?|numbers?|data) (?:instead|in place)"
        r"|substitut\w* (?:invented|estimated|assumed|placeholder)", re.I),
    "cascading_math_errors": re.compile(
        r"(?:calculation|computation(?:al)?|arithmetic|math(?:ematical)?|numerical|rounding) (?:errors?|mistakes?)"
        r"|miscalculat\w*|wrong (?:totals?|sums?|figures?|numbers?|results?)|cascad\w*|propagat\w*"
        r"|carried (?:through|forward|into)|compound(?:ing|ed) (?:errors?|mistakes?)|off by \d"
        r"|unit (?:errors?|mismatch\w*|conversion errors?)|wrong units?|double[- ]count\w*", re.I),
    "missing_section": re.compile(
        r"\bmissing\b[^.;\n]{0,40}\b(?:sections?|headings?|tables?|slides?|sheets?|parts?|components?|recommendations?)\b"
        r"|\b(?:sections?|headings?|tables?|slides?|sheets?)\b[^.;\n]{0,30}\b(?:missing|absent|omitted|not included)\b"
        r"|\bomit(?:s|ted|ting)?\b[^.;\n]{0,40}\b(?:sections?|tables?|slides?|sheets?|headings?)\b|\btruncat\w*"
        r"|incomplete (?:deliverable|memo|report|output|file)", re.I),
    "no_files_read": re.compile(
        r"(?:could not|couldn'?t|unable to|failed to|cannot|can'?t) (?:be )?(?:read|open|pars|access|load)\w*"
        r"|unreadable|not readable|did(?:n'?t| not) (?:read|open|use|consult|look at) " + _FILES
        + r"|never (?:read|opened|used) " + _FILES + r"|(?:files?|inputs?) (?:were|was) (?:not|never) (?:read|opened)"
        r"|ignor(?:ed|es|ing) the (?:input |provided |supplied )?(?:files?|data|documents?)", re.I),
    "tech_failure": re.compile(
        r"\brefus(?:ed|al|es|ing)\b|time[ds]? ?out|timed out|\bcrash\w*|context[- ](?:window|length|limit)"
        r"|no output|empty (?:response|output|reply)|(?:api|server|tool|runtime|code[- ]execution) errors?"
        r"|exception|traceback|content[- ]policy|rate[- ]limit\w*|failed to (?:run|produce|generate|complete)", re.I),
}
"""The deterministic tagger's patterns (see the module docstring)."""


def regex_tags(text: str) -> frozenset[Tag]:
    """The tags whose pattern matches `text` un-negated."""
    return frozenset(t for t in TAGS if unnegated(PATTERNS[t], text))


def cell_texts(final_grades: Mapping[_K, FinalGrade]) -> dict[CellKey, str]:
    """Every criterion justification of every row, keyed (task_id, system, attempt, code)."""
    return {(g.task_id, g.system, g.attempt, c): g.justifications[c]
            for g in final_grades.values() for c in RUBRIC_CODES}


Tagger = Callable[[str], Iterable[str]] | Mapping[CellKey, Iterable[str]]


def tag_cells(final_grades: Mapping[_K, FinalGrade], tagger: Tagger) -> dict[CellKey, frozenset[str]]:
    """Each cell's tags: `tagger` called on the justification, or looked up when it is a
    mapping of precomputed cell tags (a cell it lacks is untagged)."""
    texts = cell_texts(final_grades)
    if callable(tagger):
        return {k: frozenset(tagger(t)) for k, t in texts.items()}
    return {k: frozenset(tagger.get(k, ())) for k in texts}


class TagCounts(BaseModel):
    """Table 11: per system, the (system, task) pairs of which any justification carries a tag."""

    tagger: str
    systems: list[str]
    tasks: dict[str, int]  # graded tasks per system (the denominator)
    counts: dict[str, dict[str, int]]  # system -> tag -> count
    total: dict[str, int]  # tag -> sum over systems
    cells: int  # justifications tagged
    tagged_cells: int  # ... with at least one tag


def tag_counts(final_grades: Mapping[_K, FinalGrade], tagger: Tagger, *, name: str = "") -> TagCounts:
    cells = tag_cells(final_grades, tagger)
    pairs: dict[tuple[str, str], set[str]] = {}
    for g in final_grades.values():
        pairs.setdefault((g.system, g.task_id), set())
    for (task, system, _attempt, _code), tags in cells.items():
        pairs[(system, task)].update(tags)
    systems = sorted({s for s, _ in pairs})
    counts: dict[str, dict[str, int]] = {s: {t: sum(t in tags for (s2, _), tags in pairs.items() if s2 == s) for t in TAGS} for s in systems}
    return TagCounts(
        tagger=name or ("regex" if tagger is regex_tags else "custom"),
        systems=systems,
        tasks={s: sum(s2 == s for s2, _ in pairs) for s in systems},
        counts=counts,
        total={t: sum(counts[s][t] for s in systems) for t in TAGS},
        cells=len(cells),
        tagged_cells=sum(bool(t) for t in cells.values()),
    )


def jaccard(a: Mapping[CellKey, Iterable[str]], b: Mapping[CellKey, Iterable[str]]) -> dict[str, float | None]:
    """Per tag, |A and B| / |A or B| over the cells both taggers tagged (A, B: the cells carrying
    the tag); None when neither tagger gave the tag to any cell. Key "mean": the mean over the
    tags that have a value."""
    common = set(a) & set(b)
    out: dict[str, float | None] = {}
    for t in TAGS:
        sa = {k for k in common if t in set(a[k])}
        sb = {k for k in common if t in set(b[k])}
        union = sa | sb
        out[t] = len(sa & sb) / len(union) if union else None
    values = [v for v in out.values() if v is not None]
    out["mean"] = sum(values) / len(values) if values else None
    return out


class _TagReply(BaseModel):
    tags: list[Tag]


_TAG_SCHEMA = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string",
                                                                                   "enum": list(TAGS)}}},
               "required": ["tags"], "additionalProperties": False}


@dataclass
class LlmTagging:
    """The LLM tagger's cell tags, and the cells it could not tag (with why)."""

    tags: dict[CellKey, frozenset[str]] = field(default_factory=dict)
    failed: dict[CellKey, str] = field(default_factory=dict)


async def llm_tag_cells(model: ChatModel, final_grades: Mapping[_K, FinalGrade], *,
                        concurrency: int = 4) -> LlmTagging:
    """One ask_json call per distinct (criterion, justification); temperature 0."""
    texts = cell_texts(final_grades)
    distinct = sorted({(k[3], t) for k, t in texts.items()})
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(code: str, text: str) -> tuple[frozenset[str] | None, str]:
        async with slots:
            reply = await ask_json(model, [
                Message(role="system", content=P.TAGGER_SYSTEM),
                Message(role="user", content=P.TAGGER_USER.format(code=code, text=json.dumps(text, ensure_ascii=False))),
            ], _TagReply, response_schema=_TAG_SCHEMA, shape='{"tags": [zero or more of the six tags]}')
        if reply.value is None:
            return None, reply.error or "no valid reply"
        return frozenset(reply.value.tags), ""

    answers = await asyncio.gather(*(one(c, t) for c, t in distinct))
    by_text = dict(zip(distinct, answers, strict=True))
    out = LlmTagging()
    for k, t in texts.items():
        tags, error = by_text[(k[3], t)]
        if tags is None:
            out.failed[k] = error
        else:
            out.tags[k] = tags
    return out


def tag_table(r: TagCounts, agreement: Mapping[str, float | None] | None = None) -> Table:
    """Table 11 as printed by `rubric tags` and `score`: a row per tag, a column per system."""
    table = Table(title=f"Table 11: failure tags ({escape(r.tagger)}), (system, task) pairs")
    table.add_column("tag")
    for s in r.systems:
        table.add_column(f"{escape(s)} (n={r.tasks[s]})", justify="right")
    table.add_column("total", justify="right")
    if agreement is not None:
        table.add_column("jaccard", justify="right")
    for t in TAGS:
        row = [t, *(str(r.counts[s][t]) for s in r.systems), str(r.total[t])]
        if agreement is not None:
            j = agreement[t]
            row.append("–" if j is None else f"{j:.2f}")
        table.add_row(*row)
    return table
