"""Metrics over k attempts of every task, for any track (one home: analytics_metrics, the docqa
attempts block, deliverables' score and `compare` all read them from here).

- pass@1: the first attempt's score, averaged over tasks (with a bootstrap 95% CI);
- pass@k: the best of a task's k attempts, averaged over tasks (AIDABench's pass@k);
- avg@k: the mean of a task's k attempts, averaged over tasks;
- per-attempt accuracy: attempt a's mean score over the tasks scored at attempt a, and the
  spread across attempts: the sample standard deviation (ddof = 1) of those k accuracies
  (None with fewer than two), how much a single run's number moves from run to run.

Reliability (`Reliability`: whether an agent succeeds *every* time, not once in k):

- pass^k as tau-bench defines it (Yao et al. 2024, §3): for a task with n scored attempts of
  which c succeed, C(c, k) / C(n, k), the unbiased estimate of the chance that k attempts drawn
  from it all succeed, averaged over tasks. With n = k it is 1 when every attempt succeeded, else
  0. `curve` gives pass^j for j = 1 .. k (each over the tasks with at least j scored attempts);
  pass^1 is the mean per-task success rate.
- A success is the track's binary outcome (`correct`: docqa accuracy >= 0.5, analytics a full
  score or a chart with C = 1, deliverables ACCEPT), never a rounded partial score; where a
  caller gives only a score, a success is a full score (>= 1). Partial credit is what avg@k reads.
- the per-task success rate c / n, and `solved`: how many tasks (with k scored attempts)
  succeeded in exactly 0, 1, .. k of them;
- consistency: the share of tasks whose k answers agree, over the tasks with an answer known for
  each of their first k attempts (the track says what an answer is: docqa the normalised answer
  text, analytics the final value, deliverables the verifiers' outcomes); None with k < 2.

A score is a number in [0, 1] (1 correct; analytics charts and judged partial answers in
between) or None: unscored (an evaluator could not decide), left out of every mean and never
counted wrong. Attempts >= k are ignored. A task none of whose first k attempts was scored is
left out of pass@k and avg@k; `complete` says every task had k scored attempts.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel

from deskbench.analysis.stats import bootstrap_mean_ci

SUCCESS_RULE = ("a success is the track's binary outcome (correct); unscored attempts are left out, "
                "pass^k = C(c, k) / C(n, k) over a task's n scored attempts with c successes (tau-bench)")
"""How `Reliability` decides a success, in words (what score, compare and the report print)."""


@dataclass(frozen=True)
class Attempt:
    """One (task, attempt) as these metrics read it."""

    task_id: str
    attempt: int
    score: float | None  # None: unscored
    correct: bool | None = None  # the track's binary outcome; None with a score: a full score (>= 1) succeeds
    answer: str | None = None  # the answer, normalised as the track compares answers; None: not known


class TaskReliability(BaseModel):
    task_id: str
    n: int  # scored attempts among the first k
    successes: int
    rate: float  # successes / n


class Reliability(BaseModel):
    """pass^k, the per-task success rates and the consistency of answers (see the module docstring)."""

    k: int
    rule: str = SUCCESS_RULE
    n_tasks: int  # tasks with k scored attempts: pass^k's tasks
    pass_hat: float | None  # pass^k
    curve: list[float | None]  # pass^j, j = 1 .. k
    success_rate: float | None  # mean per-task success rate (= pass^1)
    solved: list[int]  # solved[c]: tasks with k scored attempts, c of them successes (c = 0 .. k)
    consistency: float | None  # share of tasks whose k answers agree; None with k < 2 or no answers
    n_consistency: int  # tasks with an answer known for each of their k attempts
    tasks: list[TaskReliability]  # every task with a scored attempt, by task id

    def line(self) -> str:
        """pass^k, the pass^j curve, the tasks solved 0..k times and the consistency in one line
        (what every track's `score` prints under its pass@k)."""
        def pct(x: float | None) -> str:
            return "–" if x is None else f"{100 * x:.1f}"

        agree = "–" if self.consistency is None else f"{pct(self.consistency)} of {self.n_consistency} tasks"
        return (f"reliability (k={self.k}): pass^{self.k} {pct(self.pass_hat)} over {self.n_tasks} tasks with "
                f"{self.k} scored attempts (every attempt correct); pass^1..{self.k} "
                f"{' '.join(pct(v) for v in self.curve)}; tasks solved 0..{self.k} times "
                f"{'/'.join(str(n) for n in self.solved)}; same answer every attempt {agree}")


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
    reliability: Reliability


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def pass_hat(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k of one task: C(c, k) / C(n, k), the chance that k of its n attempts drawn
    without replacement all succeed (0 when c < k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n, not n={n}, c={c}, k={k}")
    return math.comb(c, k) / math.comb(n, k)


def _success(a: Attempt) -> bool:
    if a.correct is not None:
        return a.correct
    return a.score is not None and a.score >= 1.0 - 1e-9


def _as_attempt(row: Attempt | tuple[str, int, float | None]) -> Attempt:
    return row if isinstance(row, Attempt) else Attempt(row[0], row[1], row[2])


def reliability(by_task: dict[str, dict[int, Attempt]], k: int) -> Reliability:
    """Reliability over the first k attempts of each task (`by_task`: task -> attempt -> Attempt)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    tasks: list[TaskReliability] = []
    curve_terms: list[list[float]] = [[] for _ in range(k)]
    solved = [0] * (k + 1)
    agree: list[bool] = []
    for task_id, attempts in sorted(by_task.items()):  # not the order episodes were stored in: a run's
        first = [attempts[a] for a in range(k) if a in attempts]  # figures are the same however it was run
        scored = [a for a in first if a.score is not None]
        n, c = len(scored), sum(_success(a) for a in scored)
        if n:
            tasks.append(TaskReliability(task_id=task_id, n=n, successes=c, rate=c / n))
            for j in range(1, n + 1):
                curve_terms[j - 1].append(pass_hat(n, c, j))
        if n == k:
            solved[c] += 1
        answers = [a.answer for a in first]
        if k > 1 and len(answers) == k and all(x is not None for x in answers):
            agree.append(len(set(answers)) == 1)
    curve = [_mean(xs) for xs in curve_terms]
    return Reliability(k=k, n_tasks=sum(solved), pass_hat=curve[k - 1], curve=curve, success_rate=curve[0],
                       solved=solved, consistency=_mean([float(x) for x in agree]), n_consistency=len(agree),
                       tasks=tasks)


def attempt_metrics(scores: Iterable[Attempt | tuple[str, int, float | None]], k: int) -> AttemptMetrics:
    """`scores`: every stored episode as an Attempt, or (task id, attempt, score or None) when
    only a score is known (a success is then a full score); a (task, attempt) given twice keeps
    the last."""
    by_task: dict[str, dict[int, Attempt]] = defaultdict(dict)
    for row in scores:
        a = _as_attempt(row)
        by_task[a.task_id][a.attempt] = a
    firsts: list[float] = []
    bests: list[float] = []
    avgs: list[float] = []
    per: list[list[float]] = [[] for _ in range(k)]
    complete = True
    for attempts in by_task.values():
        scored = [(i, a.score) for i, a in sorted(attempts.items()) if i < k and a.score is not None]
        first = attempts.get(0)
        if first is not None and first.score is not None:
            firsts.append(first.score)
        if len(scored) < k:
            complete = False
        for i, s in scored:
            per[i].append(s)
        if scored:
            values = [s for _, s in scored]
            bests.append(max(values))
            avgs.append(sum(values) / len(values))
    per_attempt = [_mean(xs) for xs in per]
    known = [x for x in per_attempt if x is not None]
    return AttemptMetrics(
        k=k, n_tasks=len(bests), pass1=_mean(firsts), pass1_ci=bootstrap_mean_ci(firsts) if firsts else None,
        passk=_mean(bests), avgk=_mean(avgs), complete=complete and bool(bests), per_attempt=per_attempt,
        spread=statistics.stdev(known) if len(known) > 1 else None, reliability=reliability(by_task, k))

