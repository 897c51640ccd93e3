"""Sensitivity of Kuiper to the effort measure (MADQA Appendix E.4, Tables 11 and 12).

For each system, four effort measures per item, "where available":
  steps             the item's effort as the leaderboard's Kuiper reads it (the submission's steps,
                    iterations or searches, else the tool calls in its trajectory)
  tokens_total      input + output tokens of the episode ("sum of input and output tokens")
  tokens_generated  output tokens only
  time              wall-clock seconds of the episode ("execution time"), else the seconds its
                    submission reports (an imported RLM prediction's execution_time)
Table 11: Spearman rho between every two measures over the system's items; Table 12: Kuiper under
each measure, with binary correctness (accuracy >= 0.5, as F.3 defines it), equal efforts as one
block (scoring.calibration's default).

The items are those with an answer (status "scored"). A measure is computable for a system only
when every such item has it (tokens: a count above 0 in the episode's usage, else in the
submission's; time: an episode whose end is after its start): Kuiper over the subset that happens
to have it would be a different statistic. Otherwise, or when every item has the same value (a
fixed budget: Kuiper would be 0 and Spearman undefined), the entry says "not computable: <why>"
and is never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.analysis.stats import spearman
from deskbench.runs.store import Episode
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.scored import (
    CORRECT_AT,
    ScoredSystem,
    accuracy,
    episode_seconds,
    is_correct,
)
from deskbench.tracks.docqa.scoring.calibration import kuiper
from deskbench.tracks.docqa.tasks import DocQASubmission, ItemScore


def _tokens(ep: Episode | None, which: str) -> float | None:
    """Tokens from the episode's usage, else the submission's (an imported prediction file)."""
    if ep is None:
        return None
    usages: list[Any] = [ep.usage]
    if isinstance(ep.submission, DocQASubmission) and ep.submission.usage is not None:
        usages.append(ep.submission.usage)
    for u in usages:
        n = u.output_tokens if which == "generated" else u.input_tokens + u.output_tokens
        if n > 0:
            return float(n)
    return None


def _seconds(ep: Episode | None) -> float | None:
    """The episode's wall-clock time, else the time the submission reports (the RLM baseline's
    execution_time in an imported prediction file)."""
    if ep is None:
        return None
    seconds = episode_seconds(ep)
    if seconds is None and isinstance(ep.submission, DocQASubmission) and ep.submission.usage is not None:
        seconds = ep.submission.usage.seconds or None
    return seconds


@dataclass(frozen=True)
class Measure:
    title: str  # the paper's column name
    definition: str
    missing: str  # what an item without it lacks, for the "not computable" line
    value: Callable[[ItemScore, Episode | None], float | None]


MEASURES: dict[str, Measure] = {
    "steps": Measure("Steps", "the item's steps (submission's steps, iterations or searches; else tool calls)",
                     "a step count", lambda i, ep: i.effort),
    "tokens_total": Measure("Tokens (Total)", "input + output tokens of the episode", "token counts",
                            lambda i, ep: _tokens(ep, "total")),
    "tokens_generated": Measure("Tokens (Gen.)", "output tokens of the episode", "output token counts",
                                lambda i, ep: _tokens(ep, "generated")),
    "time": Measure("Time", "wall-clock seconds from the episode's start to its end (else the seconds the "
                    "submission reports)", "timings", lambda i, ep: _seconds(ep)),
}


class MeasureKuiper(BaseModel):
    measure: str
    n: int  # items that have this measure
    kuiper: float | None  # in items (the paper's unit); None when not computable
    reason: str | None  # "not computable: ..." when kuiper is None


class MeasurePair(BaseModel):
    a: str
    b: str
    rho: float | None  # Spearman, ties averaged; None when not computable
    n: int
    reason: str | None


class SystemEffort(BaseModel):
    system: str
    n: int  # items with an answer
    accuracy: float | None  # the leaderboard's accuracy (over every scored item)
    kuiper: list[MeasureKuiper]  # one per measure, in MEASURES order
    spearman: list[MeasurePair]  # every pair of measures, in MEASURES order


class EffortReport(BaseModel):
    correct_at: float
    measures: dict[str, str]  # name -> definition
    systems: list[SystemEffort]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def _values(system: ScoredSystem, name: str) -> tuple[list[float], list[float], str | None]:
    """(efforts, binary correctness, reason) of one measure; reason set when not computable."""
    items = [i for i in system.items if i.status == "scored" and i.accuracy is not None]
    m = MEASURES[name]
    if not items:
        return [], [], "not computable: no answered items"
    values = [m.value(i, system.episodes.get(i.id)) for i in items]
    lacking = sum(v is None for v in values)
    if lacking == len(items):
        return [], [], f"not computable: no {m.missing} stored"
    if lacking:
        return [], [], f"not computable: no {m.missing} for {lacking} of {len(items)} items"
    if len(set(values)) < 2:  # as the leaderboard: a fixed budget says nothing about calibration
        return [], [], f"not computable: every item has the same {name} ({values[0]:g})"
    return [float(v) for v in values if v is not None], [1.0 if is_correct(i) else 0.0 for i in items], None


def system_effort(system: ScoredSystem) -> SystemEffort:
    columns = {name: _values(system, name) for name in MEASURES}
    ks = []
    for name, (effort, correct, reason) in columns.items():
        value = None
        if reason is None:
            k = kuiper(effort, correct)
            reason = f"not computable: {k.reason}" if k.reason else None
            value = None if k.reason else k.value
        ks.append(MeasureKuiper(measure=name, n=len(effort), kuiper=value, reason=reason))
    pairs = []
    for a, b in combinations(MEASURES, 2):
        (xa, _, ra), (xb, _, rb) = columns[a], columns[b]
        why = f"{a}: {ra}" if ra else f"{b}: {rb}" if rb else None
        rho = None
        if why is None:
            r = spearman(xa, xb).rho
            if not math.isnan(r):
                rho = r
            else:
                why = "not computable: a measure is constant or there are fewer than 2 items"
        pairs.append(MeasurePair(a=a, b=b, rho=rho, n=len(xa), reason=why))
    answered = sum(i.status == "scored" and i.accuracy is not None for i in system.items)
    return SystemEffort(system=system.label, n=answered, accuracy=accuracy(system.items), kuiper=ks, spearman=pairs)


def effort_report(systems: Sequence[ScoredSystem]) -> EffortReport:
    return EffortReport(correct_at=CORRECT_AT, measures={k: m.definition for k, m in MEASURES.items()},
                        systems=[system_effort(s) for s in systems])


def load_effort(run_dirs: Sequence[Path], pool_humans: bool = False, judging: Judging | None = None) -> EffortReport:
    from deskbench.tracks.docqa.analysis.scored import load_scored

    judging = judging or Judging()
    report = effort_report(load_scored(run_dirs, pool_humans, judging))
    report.scoring = judging.summary()
    return report


def effort_figure(report: EffortReport) -> Any:
    """Table 12 as grouped bars: Kuiper per system under each measure; a measure that is not
    computable for a system gets no bar and an "n/a" mark."""
    from matplotlib.patches import Patch

    from deskbench.analysis.plotting import pyplot

    fig, ax = pyplot().subplots(figsize=(max(6.0, 1.6 * len(report.systems) + 2), 4))
    names = list(MEASURES)
    colors = ["#4878a8", "#e07b39", "#59a14f", "#b07aa1"]
    width = 0.8 / len(names)
    top = max((k.kuiper for s in report.systems for k in s.kuiper if k.kuiper is not None), default=1.0)
    for j in range(len(names)):
        xs, hs = [], []
        for i, s in enumerate(report.systems):
            pos = i + (j - (len(names) - 1) / 2) * width
            value = s.kuiper[j].kuiper
            if value is None:
                ax.text(pos, 0.02 * top, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color="#777")
            else:
                xs.append(pos)
                hs.append(value)
        ax.bar(xs, hs, width, color=colors[j % len(colors)])
    ax.set_xlim(-0.6, len(report.systems) - 0.4)
    ax.set_ylim(0, 1.15 * top)
    ax.set_xticks(range(len(report.systems)), [s.system for s in report.systems], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("Kuiper (items)")
    ax.set_title("Kuiper by effort measure (n/a: not computable)", fontsize=10)
    ax.legend(handles=[Patch(color=colors[j % len(colors)], label=MEASURES[n].title) for j, n in enumerate(names)],
              fontsize=8)
    fig.tight_layout()
    return fig
