"""The SME's declared best response of a task (the consulting DRA paper, §4.4).

The paper compares the per-prompt VRS argmax with the SME-declared best agent (38 of 42, 90.5%)
and reads that best agent from the Comments column "by deterministic regex match of 'Response
N', 'Response - N', or 'RN'". deskbench reads it in two ways, the explicit one first:

1. the `best` column of the grades CSV (the web grading screen's checkbox): a grade that says
   yes declares its own episode the best of its task;
2. otherwise the grades' comments, by the paper's three patterns. "Response N" names the N-th
   response of the task, numbered as the grader saw them: the grades CSV export writes each
   row's number in its `response` column and the web grading screen shows it; a grade keeps the
   numbering it was made under (`RubricGrade.responses`), so a system added to the run later
   does not renumber an older comment. A grade stored without one reads the run's systems in
   name order (the export's order).

What the paper does not say, and deskbench decides: a comment naming two different responses
("Response 2 is stronger than Response 1") declares nothing (which of them is the pick is not
deterministic text matching); comments of one task's grades that name different responses
conflict and declare nothing; a number with no response of that number is not a pick. "RN"
is matched with a capital R only and not where it reads as a statistic ("R2 = 0.91", "R2 of
0.9", "R2.5"), nor inside a word or code ("R2D2", "FR2"). Each undecided task is reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["BestPick", "comment_picks", "declared_best", "number_of", "numbering"]

_NUMBER = r"(?P<n>\d{1,3})(?![.,]\d)(?![\w-])"  # a whole number, not a decimal, not a prefix of a word
_RESPONSE = re.compile(r"(?<![\w-])response\s*(?:#\s*|[-\u2013\u2014:]\s*)?" + _NUMBER, re.I)
"""'Response N' and 'Response - N' (any case; '#', ':' and the dashes too; not 'Responses 1-3')."""
_SHORT = re.compile(r"(?<![\w-])R" + _NUMBER + r"(?!\s*(?:[=\u2248:]\s*[-+]?\d|(?:of|value|score)\b))")
"""'RN' with a capital R, not a statistic ('R2 = 0.91', 'R2 of 0.9', 'R2: 0.87')."""


def comment_picks(comment: str) -> list[int]:
    """The response numbers a comment names by the paper's patterns, each once, in order."""
    found: list[tuple[int, int]] = []
    for rx in (_RESPONSE, _SHORT):
        found += [(m.start(), int(m.group("n"))) for m in rx.finditer(comment)]
    return list(dict.fromkeys(n for _, n in sorted(found)))


def numbering(systems: Iterable[str]) -> list[str]:
    """Response 1..N: the systems in name order (the grades export's order)."""
    return sorted(set(systems))


def number_of(system: str, responses: Sequence[str]) -> int | None:
    """The response number of `system` under `responses` (1-based), None when it has none."""
    return responses.index(system) + 1 if system in responses else None


class CommentGrade(BaseModel):
    """What the pick reads of one primary grade: its episode, comment, `best` column and the
    numbering its grader saw."""

    task_id: str
    system: str
    attempt: int = 0
    comment: str = ""
    declared_best: bool = False
    responses: list[str] = Field(default_factory=list)


class BestPick(BaseModel):
    """One task's (and attempt's) declared best: the system, where it was read, and why not when
    no pick could be made."""

    task_id: str
    attempt: int = 0
    system: str | None = None
    source: Literal["column", "comment"] | None = None
    evidence: str = ""  # the grader and the text the pick was read from, or why there is none


def _pick_of(g: CommentGrade, fallback: Sequence[str]) -> tuple[str | None, str]:
    """(system, note) named by one grade's comment; (None, note) when it names none or cannot."""
    numbers = comment_picks(g.comment)
    if not numbers:
        return None, ""
    responses = g.responses or list(fallback)
    if len(numbers) > 1:
        return None, (f"{g.system}'s comment names responses {', '.join(map(str, numbers))}: ambiguous, "
                      "no pick")
    n = numbers[0]
    if not 1 <= n <= len(responses):
        return None, f"{g.system}'s comment names response {n}, but the task has responses 1-{len(responses)}"
    return responses[n - 1], f"{g.system}'s comment names response {n} ({responses[n - 1]})"


def declared_best(grades: Iterable[CommentGrade], systems: Sequence[str]) -> dict[tuple[str, int], BestPick]:
    """The declared best per (task, attempt) among the given primary grades: the `best` column
    first, else the comments (module docstring). `systems`: the run's systems, the numbering of
    grades stored without one. Tasks where nobody declared anything are absent."""
    fallback = numbering(systems)
    by_task: dict[tuple[str, int], list[CommentGrade]] = {}
    for g in grades:
        by_task.setdefault((g.task_id, g.attempt), []).append(g)
    out: dict[tuple[str, int], BestPick] = {}
    for (task, attempt), gs in sorted(by_task.items()):
        gs = sorted(gs, key=lambda g: g.system)
        column = [g.system for g in gs if g.declared_best]
        if column:
            if len(column) == 1:
                out[(task, attempt)] = BestPick(task_id=task, attempt=attempt, system=column[0], source="column",
                                                evidence=f"best column on {column[0]}'s grade")
            else:
                out[(task, attempt)] = BestPick(task_id=task, attempt=attempt, source="column",
                                                evidence=f"best column on several grades: {', '.join(column)}")
            continue
        picks: dict[str, list[str]] = {}
        notes: list[str] = []
        for g in gs:
            system, note = _pick_of(g, fallback)
            if system is not None:
                picks.setdefault(system, []).append(note)
            elif note:
                notes.append(note)
        if len(picks) == 1:
            (system, why), = picks.items()
            out[(task, attempt)] = BestPick(task_id=task, attempt=attempt, system=system, source="comment",
                                            evidence="; ".join(why + notes))
        elif picks:
            out[(task, attempt)] = BestPick(task_id=task, attempt=attempt, source="comment", evidence=(
                "comments name different responses: " + "; ".join(n for ns in picks.values() for n in ns)))
        elif notes:
            out[(task, attempt)] = BestPick(task_id=task, attempt=attempt, evidence="; ".join(notes))
    return out


def best_systems(picks: Mapping[tuple[str, int], BestPick]) -> dict[tuple[str, int], str]:
    """(task, attempt) -> the picked system, for the tasks with a pick."""
    return {k: p.system for k, p in picks.items() if p.system is not None}
