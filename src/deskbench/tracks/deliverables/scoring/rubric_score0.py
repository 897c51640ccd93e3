"""The score-0 mismatch flag (F1; C.5, C.4 check A): a 0 whose justification reads as a score-1, kept apart from apply_qc."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from pydantic import BaseModel

from deskbench.tracks.deliverables.scoring.rubric import RubricGrade, unnegated
from deskbench.tracks.deliverables.scoring.rubric_qc_final import FinalGrade
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, TABLE_19, RubricCode, RubricCriterion

__all__ = ["Score0Mismatch", "score0_mismatches"]


class Score0Mismatch(BaseModel):
    code: str
    score1_wording: list[str]  # the score-1 phrases found in the justification
    anchor: str  # the criterion's score-1 anchor


_SCORE1: dict[str, list[str]] = {
    "DI": [r"multiple (?:factual |data )?(?:errors|inaccuracies|mistakes)", r"several (?:factual )?errors",
           r"a few (?:factual )?errors", r"vague (?:citations?|sourcing|references)",
           r"(?:one|two|1|2|1-2|a couple of) unauthori[sz]ed sources?", r"unauthori[sz]ed sources?"],
    "AR": [r"gaps? in (?:the )?(?:logic|reasoning)", r"logical gaps?", r"no evidence[- ]backed",
           r"not evidence[- ]backed", r"miss(?:es|ed|ing)? (?:the |some |key )?interdependenc\w*",
           r"miss(?:es|ed|ing)? (?:some |a |the )?key variables?"],
    "RF": [r"scope creep", r"\b(?:50|55|60|50-60|50 to 60)\s?% relevant", r"partly relevant",
           r"some (?:tangential|off[- ]topic|out[- ]of[- ]scope) (?:content|material|sections?)"],
    "EP": [r"off by (?:about |roughly |around |~)?\d+(?:\.\d+)?\s?%", r"correct (?:approach|method)",
           r"partial unit normali[sz]ation", r"gaps? in (?:the )?methodology"],
    "FD": [r"partial(?:ly)? (?:format )?complian\w*", r"partial format", r"lack(?:s|ing)? (?:of )?specificity",
           r"not specific enough", r"recommendations? (?:are|is) (?:vague|generic)"],
}
"""Score-1 wording per criterion (Table 19's score-1 cells and their usual paraphrases)."""

_SCORE0_COMMON = [r"fabricat\w*", r"invent(?:ed|s|ing)\b", r"hallucinat\w*", r"unusable", r"ignor(?:es|ed|ing)\b",
                  r"illogical", r"self[- ]contradict\w*", r"dominated by noise", r"fundamental\w*",
                  r"forbidden", r"black[- ]box", r"wrong units?", r"no inference", r"fails? to identify",
                  r"no adherence", r"truncated", r"malformed", r"nonsens\w*"]
"""Score-0 wording (Table 19's score-0 cells): any of it keeps a 0 from being called a mismatch."""


def _rx(phrases: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in phrases), re.I)


_SCORE1_RX = {code: _rx(p) for code, p in _SCORE1.items()}
_SCORE0_RX = _rx(_SCORE0_COMMON)


def _anchor_clauses(anchor: str) -> list[str]:
    """Short clauses of an anchor ("Multiple factual errors; vague citations") as phrases."""
    out = []
    for clause in re.split(r"[;.]", anchor):
        words = clause.strip().split()
        if 2 <= len(words) <= 5:
            out.append(re.escape(" ".join(words)).replace(r"\ ", r"\s+"))
    return out


def _cells(grade: RubricGrade | FinalGrade) -> dict[str, tuple[int, str]]:
    if isinstance(grade, RubricGrade):
        return {c: (grade.criteria[c].score, grade.criteria[c].justification) for c in RUBRIC_CODES}
    return {c: (grade.scores[c], grade.justifications[c]) for c in RUBRIC_CODES}


def score0_mismatches(grade: RubricGrade | FinalGrade,
                      rubric: Sequence[RubricCriterion] | None = None) -> list[Score0Mismatch]:
    """FLAG (F1): each 0 whose justification describes Score-1 behaviour.

    Score-1 wording is the criterion's list above plus the short clauses of the task rubric's
    score-1 anchor; score-0 wording is the common list plus the short clauses of the score-0
    anchor. A 0 is a mismatch when its justification has (un-negated) score-1 wording and no
    (un-negated) score-0 wording. Deterministic; it advises, the QC reviewer decides."""
    anchors: dict[str, dict[int, str]] = {c.code: c.anchors for c in rubric} if rubric else {}
    out = []
    for code, (score, text) in _cells(grade).items():
        if score != 0:
            continue
        cells = anchors.get(code) or dict(enumerate(TABLE_19[cast(RubricCode, code)][1]))
        one = _rx(_SCORE1[code] + _anchor_clauses(cells[1]))
        zero = _rx(_SCORE0_COMMON + _anchor_clauses(cells[0]))
        found = unnegated(one, text)
        if found and not unnegated(zero, text):
            out.append(Score0Mismatch(code=code, score1_wording=sorted({f.lower() for f in found}),
                                      anchor=cells[1]))
    return out
