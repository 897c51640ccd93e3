"""Per-item rules of the report: error classes (MADQA H.3), and accuracy at a step budget (MADQA
Figure 9). Pure functions over scored items, so each rule is tested alone.

The four classes are the paper's (Appendix H.3), for incorrect items only (accuracy < 0.5):

1. refusal (the paper's "No Answer / Refusal"): the system returned an empty response: no
   submission (an episode that ended in an error or a limit), no answer item, or only empty ones
   (the official evaluator's empty-prediction rule; whitespace counts as empty). Checked first:
   an empty response rarely cites anything, so checked after retrieval it would all but vanish,
   while the paper counts 12.6% of errors as refusals (Table 17).
2. retrieval: Doc F1 = 0;  3. navigation: Doc F1 > 0, Page F1 = 0;  4. comprehension: Page F1 > 0.

An answer that *says* it found nothing ("Not found.", "I could not find ...") is not empty: the
paper classes it by its citations like any other wrong answer. deskbench still flags such answers,
under its own name, `says_not_found`: a tag on top of the four classes, not a fifth class.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from deskbench.tracks.docqa.tasks import ItemScore

# Whole answers (lower case, punctuation dropped) that say "no answer" rather than give one.
NOT_FOUND_ANSWERS = frozenset({
    "not found", "unknown", "n a", "na", "no answer", "not available", "not specified",
    "not mentioned", "not stated", "cannot be determined", "cannot determine", "i don t know",
    "i do not know", "insufficient information", "no information", "not applicable",
})
# Answers that begin like an apology for not finding the answer.
NOT_FOUND_PREFIXES = ("not found", "unable to", "i could not", "i couldn t", "i cannot", "i can t",
                      "could not find", "cannot find", "no relevant", "the answer is not", "there is no information")

RULES = {
    "refusal": "an empty response: the episode ended in an error or a limit, or the answer has no "
               "non-empty item; checked first",
    "retrieval": "Doc F1 = 0: no cited document holds evidence",
    "navigation": "Doc F1 > 0 but Page F1 = 0: an evidence document, but no evidence page, was cited",
    "comprehension": "Page F1 > 0: an evidence page was cited, yet the answer is wrong",
}

ErrorClass = Literal["retrieval", "navigation", "comprehension", "refusal"]
ERROR_CLASSES: tuple[ErrorClass, ...] = ("retrieval", "navigation", "comprehension", "refusal")  # the report's order


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


SAYS_NOT_FOUND_RULE = ("a non-empty answer that only says nothing was found (e.g. 'not found', 'unknown', "
                       "'I could not find ...'); a tag within the four classes, not a class of its own")


def is_refusal(answer: Sequence[str] | None) -> bool:
    """The paper's refusal: an empty response (no submission, no item, or only blank items)."""
    return answer is None or all(not a.strip() for a in answer)


def says_not_found(answer: Sequence[str] | None) -> bool:
    """A non-empty answer that only says nothing was found (deskbench's tag, not a paper class)."""
    if is_refusal(answer):
        return False
    text = _normal(" ".join(answer or []))
    return text in NOT_FOUND_ANSWERS or text.startswith(NOT_FOUND_PREFIXES)


def is_incorrect(item: ItemScore) -> bool:
    """Missing answers count as incorrect; unscored ones (a failed judge call) are left out."""
    return item.status == "missing" or (item.accuracy is not None and item.accuracy < 0.5)


def classify(item: ItemScore, answer: Sequence[str] | None) -> ErrorClass:
    """The one error class of an incorrect item; `answer` is None when there was no submission."""
    if item.status == "missing" or is_refusal(answer):
        return "refusal"
    if item.doc_f1 == 0:
        return "retrieval"
    if item.page_f1 == 0:
        return "navigation"
    return "comprehension"


def decompose(
    items: Sequence[ItemScore], answers: Mapping[str, Sequence[str]]
) -> dict[ErrorClass, list[str]]:
    """Ids of the incorrect items in each class, in item order."""
    out: dict[ErrorClass, list[str]] = {cls: [] for cls in ERROR_CLASSES}
    for item in items:
        if is_incorrect(item):
            out[classify(item, answers.get(item.id))].append(item.id)
    return out


def not_found_ids(items: Sequence[ItemScore], answers: Mapping[str, Sequence[str]]) -> list[str]:
    """Ids of the incorrect items whose (non-empty) answer says nothing was found, in item order."""
    return [i.id for i in items if is_incorrect(i) and i.status != "missing" and says_not_found(answers.get(i.id))]


def budget_curve(
    items: Sequence[ItemScore], steps: Mapping[str, int], budgets: Sequence[int]
) -> list[float]:
    """Accuracy at each step limit N: an item earns its accuracy at N only if its episode took at
    most N steps; one that needed more (or has no answer) counts as incorrect. Unscored items are
    left out, as in the leaderboard, so the last point equals the leaderboard's accuracy."""
    n = sum(i.status != "unscored" for i in items)
    if n == 0:
        return [0.0 for _ in budgets]
    out = []
    for limit in budgets:
        total = sum(i.accuracy or 0.0 for i in items
                    if i.status == "scored" and i.id in steps and steps[i.id] <= limit)
        out.append(total / n)
    return out
