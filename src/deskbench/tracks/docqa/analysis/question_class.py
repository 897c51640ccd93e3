"""The E.2 question classes of MADQA's guessability analysis (Appendix E.2), as deterministic
patterns; guessability.py splits the guess agent's accuracy by them and classify_model.py asks a
model (Prompt 2), falling back to these. A module of its own so that neither imports the other.

The classes follow the E.2 classification prompt, in its order, as deterministic patterns:
1. yes_no: the answer has to be Yes or No. With a gold answer: some acceptable answer is the single
   word yes or no. Without one: the question opens with an auxiliary verb ("Is", "Does", "Did", ...)
   and lists no two options.
2. binary_choice: the question explicitly states exactly two options to pick from ("Which is larger:
   A or B?", "Is it X or Y?", "A vs. B"). "or" in fixed phrases ("or more", "or not", "and/or",
   "greater than or equal") offers no option, and "A, B, or C" offers three.
3. other: everything else (facts, names, dates, values: answered by recall, not by chance).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

QuestionClass = Literal["yes_no", "binary_choice", "other"]
CLASSES: tuple[QuestionClass, ...] = ("yes_no", "binary_choice", "other")

_AUXILIARY = re.compile(
    r"^\s*(?:is|are|was|were|am|do|does|did|has|have|had|can|could|will|would|shall|should|may|might|must)\b",
    re.IGNORECASE,
)
# "or" that does not join two options: "or more", "or not", "greater than or equal to", "(or ...)".
_FIXED_OR = re.compile(
    r"\bor\s+(?:not|more|less|fewer|greater|higher|lower|above|below|later|earlier|so|otherwise|else|equal|any)\b"
    r"|\(\s*or\b|/or\b|\bor/",
    re.IGNORECASE,
)
_OR = re.compile(r"\bor\b", re.IGNORECASE)
_VERSUS = re.compile(r"\b(?:vs\.?|versus)(?=\s)", re.IGNORECASE)
# Three or more options: "A, B, or C" (a comma right before "or", after an earlier comma).
_THREE_WAY = re.compile(r",[^,?:;]+,\s*or\b", re.IGNORECASE)
_YES_NO = frozenset({"yes", "no"})


def _offers_two_options(question: str) -> bool:
    """Exactly two options are spelled out: one choosing 'or' (or 'vs') and no three-way list."""
    text = _FIXED_OR.sub(" ", question)
    if _THREE_WAY.search(text):
        return False
    return len(_OR.findall(text)) + len(_VERSUS.findall(text)) == 1


def _is_yes_no_answer(variants: Sequence[Sequence[str]]) -> bool:
    return any(len(v) == 1 and v[0].strip().strip(".!").strip().lower() in _YES_NO for v in variants)


def classify_question(question: str, answer_variants: Sequence[Sequence[str]] | None = None) -> QuestionClass:
    """The E.2 class of a question; the gold answer, when given, decides yes/no as in the prompt."""
    two_options = _offers_two_options(question)
    if answer_variants is not None:
        if _is_yes_no_answer(answer_variants):
            return "yes_no"
    elif _AUXILIARY.match(question) and not two_options:
        return "yes_no"
    return "binary_choice" if two_options else "other"
