"""Attribution: Page F1 and Doc F1 between the cited and the gold evidence units (MADQA F.2).

Both are F1 over *unique* units: citing a page twice neither helps nor hurts. Page F1 demands the
exact (document, page); Doc F1 only the document, so the gap between them shows "last-mile"
navigation failures (right file, wrong page).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable
from typing import TypeVar

H = TypeVar("H", bound=Hashable)


def f1(cited: Collection[H], gold: Collection[H]) -> float:
    """F1 of the unique cited units against the unique gold units.

    No citation scores 0 (the paper's rule: P = 0). An empty gold set also scores 0: MADQA
    guarantees |gold| >= 1, so an item without evidence cannot be scored as correctly attributed."""
    cited_set, gold_set = set(cited), set(gold)
    if not cited_set or not gold_set:
        return 0.0
    hits = len(cited_set & gold_set)
    if hits == 0:
        return 0.0
    precision = hits / len(cited_set)
    recall = hits / len(gold_set)
    return 2 * precision * recall / (precision + recall)


def page_f1(citations: Iterable[tuple[str, int | str | None]], evidence: Iterable[tuple[str, int]]) -> float:
    """Page F1: units are (document, page) pairs, so the page must be exactly right. A citation
    without a page (kept only in official mode) is no page unit, as in the official evaluator."""
    return f1({c for c in citations if c[1] is not None}, set(evidence))


def doc_f1(citations: Iterable[tuple[str, int | str | None]], evidence: Iterable[tuple[str, int]]) -> float:
    """Doc F1: units are document names, so any page of the right document counts."""
    return f1({doc for doc, _ in citations}, {doc for doc, _ in evidence})
