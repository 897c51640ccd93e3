"""Metrics over k attempts of every task, for any track (one home: analytics_metrics and the
docqa attempts block both read them from here).

- pass@1: the first attempt's score, averaged over tasks (with a bootstrap 95% CI);
- pass@k: the best of a task's k attempts, averaged over tasks;
- avg@k: the mean of a task's k attempts, averaged over tasks;
- per-attempt accuracy: attempt a's mean score over the tasks scored at attempt a, and the
  spread across attempts: the sample standard deviation (ddof = 1) of those k accuracies
  (None with fewer than two), how much a single run's number moves from run to run.

A score is a number in [0, 1] (1 correct; analytics charts and judged partial answers in
between) or None: unscored (an evaluator could not decide), left out of every mean and never
counted wrong. Attempts >= k are ignored. A task none of whose first k attempts was scored is
left out of pass@k and avg@k; `complete` says every task had k scored attempts.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel

from deskbench.analysis.stats import bootstrap_mean_ci


class AttemptMetrics(BaseModel):
    k: int
    n_tasks: int  # tasks with at least one scored attempt among the first k
    pass1: float | None
    pass1_ci: tuple[float, float] | None = None
    passk: float | None
    avgk: float | None
    complete: bool  # every task had k scored attempts
    per_attempt: list[float | None]  # attempt a's mean score, a = 0 .. k-1 (None: none scored)
    spread: float | None  # sample std of per_attempt; None with fewer than two attempts scored


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def attempt_metrics(scores: Iterable[tuple[str, int, float | None]], k: int) -> AttemptMetrics:
    """`scores`: (task id, attempt, score or None) of every stored episode; a (task, attempt)
    given twice keeps the last."""
    by_task: dict[str, dict[int, float | None]] = defaultdict(dict)
    for task_id, attempt, score in scores:
        by_task[task_id][attempt] = score
    firsts: list[float] = []
    bests: list[float] = []
    avgs: list[float] = []
    per: list[list[float]] = [[] for _ in range(k)]
    complete = True
    for attempts in by_task.values():
        scored = [(a, s) for a, s in sorted(attempts.items()) if a < k and s is not None]
        first = attempts.get(0)
        if first is not None:
            firsts.append(first)
        if len(scored) < k:
            complete = False
        for a, s in scored:
            per[a].append(s)
        if scored:
            values = [s for _, s in scored]
            bests.append(max(values))
            avgs.append(sum(values) / len(values))
    per_attempt = [_mean(xs) for xs in per]
    known = [x for x in per_attempt if x is not None]
    return AttemptMetrics(
        k=k, n_tasks=len(bests), pass1=_mean(firsts), pass1_ci=bootstrap_mean_ci(firsts) if firsts else None,
        passk=_mean(bests), avgk=_mean(avgs), complete=complete and bool(bests), per_attempt=per_attempt,
        spread=statistics.stdev(known) if len(known) > 1 else None)
