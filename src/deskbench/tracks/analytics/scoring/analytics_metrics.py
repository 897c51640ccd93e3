"""AIDABench's metrics over scored episodes (§4.1, Table 1, Table 2, Appendices G and H).
pass@1, pass@k and avg@k are computed in scoring/attempts.py, shared with the other tracks.

- pass@1: the first attempt's score, averaged over tasks;
- pass@k: the best of k attempts per task (for charts the best soft score), averaged over tasks;
- avg@k: the mean of the k attempts per task, averaged over tasks (the ablations' statistic);
- pass^k (deskbench's, not the paper's): every attempt correct, tau-bench's estimator
  (scoring/attempts.py), a chart correct when C = 1; the consistency of qa tasks' final values;
- overall = the mean over all tasks, so categories weigh by their task counts (this reproduces
  Table 1's overall pass@3 from its per-category numbers);
- by category, by difficulty (easy <= 6 steps, medium 7-12, hard >= 13), mean input and output
  tokens (apart: Appendix H's per-task ranges are output-sized; input grows with every round)
  and rounds, and the bad-case error categories among failed episodes, as counts and as Figure
  4's shares (each error category's share of a category's bad cases);
- Table 2's summary ablation: Δ = avg@k(w/o summary) − avg@k(w/ summary), overall and per
  category, for a `[no-summary]` system beside its full-setting twin (summary_ablation).

Unscored episodes (an evaluator could not decide) are left out of every mean and counted; a
task none of whose attempts was scored is left out of that task's means and counted. pass@k is
marked incomplete when some task has fewer than k scored attempts.

`protocol` says, per evaluator, whether the paper's protocol produced the numbers or deskbench's
fallback did (scoring/analytics.analytics_score_protocol, from the scorer's options).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from deskbench.runs.protocol import ProtocolNote
from deskbench.scoring.attempts import Attempt, Reliability, attempt_metrics
from deskbench.tracks.analytics.scoring.analytics import (
    ERROR_CATEGORIES,
    AnalyticsItemScore,
    ErrorCategory,
)


class PassMetrics(BaseModel):
    n_tasks: int  # tasks with at least one scored attempt
    pass1: float | None
    pass1_ci: tuple[float, float] | None = None
    passk: float | None
    avgk: float | None
    k: int
    complete: bool  # every task had k scored attempts
    mean_tokens: float | None = None  # input + output
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    mean_rounds: float | None = None
    reliability: Reliability | None = None  # pass^k (a success: correct, a chart's C = 1), consistency of qa answers


class SummaryAblation(BaseModel):
    """Table 2 for one system: avg@k with the summary and Δ = w/o − w/ (negative: removing the
    summary hurts). Groups: "overall" and each category both systems have."""

    with_summary: str  # the full-setting system
    without_summary: str  # the [no-summary] system this is attached to
    k_with: int
    k_without: int  # the paper's Δ is avg@3 against avg@3
    avg_with: dict[str, float | None]
    delta: dict[str, float | None]


class AnalyticsScoreReport(BaseModel):
    system: str
    k: int
    n_tasks: int
    n_episodes: int
    n_unscored: int
    missing: list[str] = Field(default_factory=list)  # "task#attempt" with no episode
    overall: PassMetrics
    by_category: dict[str, PassMetrics]
    by_difficulty: dict[str, PassMetrics]
    errors: dict[str, dict[ErrorCategory, int]]  # category -> error category -> failed episodes
    # Figure 4: category -> error category -> share of that category's failed episodes (None: none failed)
    error_shares: dict[str, dict[ErrorCategory, float | None]] = Field(default_factory=dict)
    summary_ablation: SummaryAblation | None = None  # on a [no-summary] system whose twin was scored too
    glyph_failures: int = 0
    sources: dict[str, int] = Field(default_factory=dict)  # which evaluator decided, how often
    protocol: list[ProtocolNote] = Field(default_factory=list)  # which protocol each evaluator followed


def _failed(item: AnalyticsItemScore) -> bool:
    return item.status == "scored" and item.score is not None and item.score < 1


def pass_metrics(items: Sequence[AnalyticsItemScore], k: int) -> PassMetrics:
    from deskbench.tracks.analytics.outcomes import item_correct

    m = attempt_metrics([Attempt(it.task_id, it.attempt, it.score, item_correct(it), it.answer)  # pass@k's one home
                         for it in items], k)
    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    return PassMetrics(
        n_tasks=m.n_tasks, pass1=m.pass1, pass1_ci=m.pass1_ci, passk=m.passk, avgk=m.avgk, k=k, complete=m.complete,
        mean_tokens=mean([float(it.tokens) for it in items]),
        mean_input_tokens=mean([float(it.input_tokens) for it in items]),
        mean_output_tokens=mean([float(it.output_tokens) for it in items]),
        mean_rounds=mean([float(it.rounds) for it in items]), reliability=m.reliability)


def _grouped(items: Sequence[AnalyticsItemScore], key: Callable[[AnalyticsItemScore], str],
             k: int) -> dict[str, PassMetrics]:
    groups: dict[str, list[AnalyticsItemScore]] = defaultdict(list)
    for it in items:
        groups[key(it)].append(it)
    return {name: pass_metrics(groups[name], k) for name in sorted(groups)}


def summarize_analytics(items: Sequence[AnalyticsItemScore], *, system: str, k: int,
                        task_ids: Sequence[str], protocol: Sequence[ProtocolNote] = ()) -> AnalyticsScoreReport:
    present = {(it.task_id, it.attempt) for it in items}
    missing = [f"{t}#{a}" for a in range(k) for t in task_ids if (t, a) not in present]
    errors: dict[str, dict[ErrorCategory, int]] = {}
    for cat in sorted({it.category for it in items}):
        counts = Counter(it.error_category for it in items
                         if it.category == cat and _failed(it) and it.error_category)
        errors[cat] = {e: counts.get(e, 0) for e in ERROR_CATEGORIES}
    return AnalyticsScoreReport(
        system=system, k=k, n_tasks=len(task_ids), n_episodes=len(items),
        n_unscored=sum(it.status == "unscored" for it in items), missing=missing,
        overall=pass_metrics(items, k),
        by_category=_grouped(items, lambda it: it.category, k),
        by_difficulty=_grouped(items, lambda it: it.difficulty, k),
        errors=errors,
        error_shares={cat: error_shares(counts) for cat, counts in errors.items()},
        glyph_failures=sum(it.glyph_check == "fail" for it in items),
        sources=dict(sorted(Counter(it.source for it in items).items())),
        protocol=list(protocol),
    )


def error_shares(counts: dict[ErrorCategory, int]) -> dict[ErrorCategory, float | None]:
    """Figure 4's composition: each error category's share of the bad cases it counts."""
    total = sum(counts.values())
    return {e: (counts.get(e, 0) / total if total else None) for e in ERROR_CATEGORIES}


_AGENT_TAGS = re.compile(r"^(?P<agent>[^\[:]+)\[(?P<tags>[^\]]*)\](?P<rest>:.*)$")
NO_SUMMARY = "no-summary"


def full_setting_twin(system: str) -> str | None:
    """The name of the same system with the summary (`analyst-agent[no-summary,x]:m` ->
    `analyst-agent[x]:m`); None when `system` is not a [no-summary] one."""
    m = _AGENT_TAGS.match(system)
    if m is None:
        return None
    tags = [t for t in m["tags"].split(",") if t]
    if NO_SUMMARY not in tags:
        return None
    rest = [t for t in tags if t != NO_SUMMARY]
    return m["agent"] + (f"[{','.join(rest)}]" if rest else "") + m["rest"]


def _minus(a: float | None, b: float | None) -> float | None:
    """a - b, None when either is missing."""
    return None if a is None or b is None else a - b


def summary_ablation(without: AnalyticsScoreReport, with_: AnalyticsScoreReport) -> SummaryAblation:
    """Table 2's row: avg@k of the full setting and Δ = avg@k(w/o) − avg@k(w/), per group."""
    def groups(r: AnalyticsScoreReport) -> dict[str, PassMetrics]:
        return {"overall": r.overall, **r.by_category}

    w, wo = groups(with_), groups(without)
    names = [g for g in w if g in wo]
    delta = {g: _minus(wo[g].avgk, w[g].avgk) for g in names}
    return SummaryAblation(with_summary=with_.system, without_summary=without.system, k_with=with_.k,
                           k_without=without.k, avg_with={g: w[g].avgk for g in names}, delta=delta)


def attach_summary_ablations(reports: Sequence[AnalyticsScoreReport]) -> None:
    """Give every [no-summary] report whose full-setting twin is among `reports` its Table 2 row."""
    by_name = {r.system: r for r in reports}
    for r in reports:
        twin = full_setting_twin(r.system)
        if twin is not None and twin in by_name:
            r.summary_ablation = summary_ablation(r, by_name[twin])
