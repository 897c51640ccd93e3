"""Analytics' item outcome, on its own scorer (tracks/analytics/scoring/analytics.py `score_run`):
score = the item's score (0/1 for qa and files, S = 0.7 C + 0.3 R for charts); correct = score == 1
for qa and files; for charts C == 1 (every rubric item of Listing 3 satisfied), the same line
`deskbench calibrate sample` draws for a chart, because S mixes in readability R, which no reference
decides (S >= 1 would also need a perfect R; S >= 0.7 would pass a chart with C = 1 and R = 0 and
one with C = 0.9, R = 0.4 alike). Unscored when the evaluator could not decide (no judge, a failed
judge call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore

DEFINITION = ("score = the evaluator's score (0/1 for qa and files, S = 0.7 C + 0.3 R for charts); correct = "
              "score 1 for qa and files, C = 1 for charts; undecided items (no judge, a failed call) are unscored")
"""How an item's score and binary outcome are defined, in words (`compare` and its page show it)."""


def chart_correct(item: AnalyticsItemScore) -> bool:
    """A chart is correct when its correctness C is 1 (see the module docstring)."""
    return item.correctness is not None and item.correctness >= 1.0 - 1e-9


def item_correct(item: AnalyticsItemScore) -> bool | None:
    """The binary outcome of a scored item (None when unscored): a chart's C = 1, else a score of 1."""
    if item.status != "scored" or item.score is None:
        return None
    return chart_correct(item) if item.category == "visualization" else item.score >= 1.0 - 1e-9


def analytics_outcomes(items: Sequence[AnalyticsItemScore]) -> list[ItemOutcome]:
    out = []
    for i in items:
        if i.status != "scored" or i.score is None:
            out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="unscored",
                                   answer=i.answer))
            continue
        out.append(ItemOutcome(task_id=i.task_id, attempt=i.attempt, system=i.system, status="scored",
                               score=min(1.0, max(0.0, float(i.score))), correct=item_correct(i), answer=i.answer))
    return out


def analytics_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges, score_run

    judges = options.scorer if isinstance(options.scorer, AnalyticsJudges) else AnalyticsJudges()
    return analytics_outcomes(asyncio.run(score_run(store, system, judges, concurrency=options.concurrency)))
