"""Per-item rules of the report: error classes (MADQA H.3), refusals, and accuracy at a step
budget (MADQA Figure 9). Pure functions over scored items, so each rule is tested alone."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from deskbench.report.models import ERROR_CLASSES, ErrorClass
from deskbench.tasks.docqa import ItemScore

# Whole answers (lower case, punctuation dropped) that say "no answer" rather than give one.
REFUSALS = frozenset({
    "", "not found", "unknown", "n a", "na", "no answer", "not available", "not specified",
    "not mentioned", "not stated", "cannot be determined", "cannot determine", "i don t know",
    "i do not know", "insufficient information", "no information", "not applicable",
})
# Answers that begin like an apology for not finding the answer.
REFUSAL_PREFIXES = ("not found", "unable to", "i could not", "i couldn t", "i cannot", "i can t",
                    "could not find", "cannot find", "no relevant", "the answer is not", "there is no information")

RULES = {
    "refusal": "the episode ended in an error or a limit, or the answer is empty or says it found nothing "
               "(e.g. 'not found', 'unknown', 'I could not find ...'); checked first",
    "retrieval": "Doc F1 = 0: no cited document holds evidence",
    "navigation": "Doc F1 > 0 but Page F1 = 0: an evidence document, but no evidence page, was cited",
    "comprehension": "Page F1 > 0: an evidence page was cited, yet the answer is wrong",
}


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def is_refusal(answer: Sequence[str]) -> bool:
    """True for an empty answer or one that only says nothing was found."""
    text = _normal(" ".join(answer))
    return text in REFUSALS or text.startswith(REFUSAL_PREFIXES)


def is_incorrect(item: ItemScore) -> bool:
    """Missing answers count as incorrect; unscored ones (a failed judge call) are left out."""
    return item.status == "missing" or (item.accuracy is not None and item.accuracy < 0.5)


def classify(item: ItemScore, answer: Sequence[str] | None) -> ErrorClass:
    """The one error class of an incorrect item; `answer` is None when there was no submission."""
    if item.status == "missing" or answer is None or is_refusal(answer):
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
