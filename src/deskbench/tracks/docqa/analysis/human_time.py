"""People's response time against accuracy (MADQA §5.2: "Humans answered questions in a median time
of 2 minutes (mean 3.3 minutes), with 50% of responses falling between 1-4 minutes ... questions
answered in under one minute achieve 86%, while those requiring over ten minutes - 68%").

Response time: from opening the question to submitting the answer (the episode's start and end,
which `deskbench serve` records). Per human system (human:NAME, human-oracle:NAME or their pooled
rows): median, mean and quartiles in minutes, mean accuracy in time bins (minutes, closed below:
<1, 1-2, 2-4, 4-10, 10+; the paper quotes the first and the last), and Spearman rho between time
and accuracy. Agents are not analysed here (their time is one of the effort measures of
`analyse effort`). An answer without a recorded time is counted in `untimed`, never as 0 minutes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from deskbench.analysis.stats import spearman
from deskbench.errors import UserError
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.scored import ScoredSystem, episode_seconds
from deskbench.tracks.docqa.humans import is_human

BINS: tuple[tuple[str, float, float | None], ...] = (
    ("<1", 0.0, 1.0), ("1-2", 1.0, 2.0), ("2-4", 2.0, 4.0), ("4-10", 4.0, 10.0), ("10+", 10.0, None))


class TimeBin(BaseModel):
    bin: str  # minutes
    n: int
    accuracy: float | None


class HumanTime(BaseModel):
    system: str
    n: int  # answers with a time
    untimed: int  # answers without one
    median_minutes: float | None
    mean_minutes: float | None
    q1_minutes: float | None  # 25th percentile (linear interpolation)
    q3_minutes: float | None
    bins: list[TimeBin]
    spearman_rho: float | None  # time vs accuracy; None when undefined
    reason: str | None  # "not computable: ..." when no answer has a time


class HumanTimeReport(BaseModel):
    systems: list[HumanTime]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def time_bin(minutes: float) -> str:
    for label, lo, hi in BINS:
        if minutes >= lo and (hi is None or minutes < hi):
            return label
    raise ValueError(f"negative response time {minutes}")


def human_time(system: ScoredSystem) -> HumanTime:
    answered = [(i.id, acc) for i in system.items if i.status == "scored" and (acc := i.accuracy) is not None]
    timed = [(s / 60, float(acc)) for item_id, acc in answered
             if (ep := system.episodes.get(item_id)) is not None and (s := episode_seconds(ep)) is not None]
    bins = [TimeBin(bin=label, n=len(accs), accuracy=sum(accs) / len(accs) if accs else None)
            for label, *_ in BINS
            for accs in [[a for m, a in timed if time_bin(m) == label]]]
    if not timed:
        return HumanTime(system=system.label, n=0, untimed=len(answered), median_minutes=None, mean_minutes=None,
                         q1_minutes=None, q3_minutes=None, bins=bins, spearman_rho=None,
                         reason="not computable: no answer has a recorded time")
    minutes = np.array([m for m, _ in timed])
    rho = spearman(minutes, [a for _, a in timed]).rho
    return HumanTime(
        system=system.label, n=len(timed), untimed=len(answered) - len(timed),
        median_minutes=float(np.median(minutes)), mean_minutes=float(minutes.mean()),
        q1_minutes=float(np.percentile(minutes, 25)), q3_minutes=float(np.percentile(minutes, 75)),
        bins=bins, spearman_rho=None if math.isnan(rho) else rho, reason=None)


def human_time_report(systems: Sequence[ScoredSystem]) -> HumanTimeReport:
    """The human systems among `systems` (none: an empty report)."""
    return HumanTimeReport(systems=[human_time(s) for s in systems if is_human(s.system)])


def load_human_time(run_dirs: Sequence[Path], pool_humans: bool = False,
                    judging: Judging | None = None) -> HumanTimeReport:
    from deskbench.tracks.docqa.analysis.scored import load_scored

    judging = judging or Judging()
    report = human_time_report(load_scored(run_dirs, pool_humans, judging))
    report.scoring = judging.summary()
    if not report.systems:
        raise UserError("the runs hold no human episodes (human:NAME or human-oracle:NAME); "
                        "people answer through 'deskbench serve'")
    return report


def human_time_figure(report: HumanTimeReport) -> Any:
    """Mean accuracy per response-time bin, one group of bars per person (or pooled row)."""
    from deskbench.analysis.plotting import pyplot

    fig, ax = pyplot().subplots(figsize=(7, 4))
    labels = [b[0] for b in BINS]
    shown = [s for s in report.systems if s.reason is None]
    width = 0.8 / max(len(shown), 1)
    for k, s in enumerate(shown):
        xs = [j + (k - (len(shown) - 1) / 2) * width for j, b in enumerate(s.bins) if b.accuracy is not None]
        ys = [100 * (b.accuracy or 0.0) for b in s.bins if b.accuracy is not None]
        med = "-" if s.median_minutes is None else f"{s.median_minutes:.1f}"
        ax.bar(xs, ys, width, label=f"{s.system} (n={s.n}, median {med} min)")
        for x, b in zip(xs, [b for b in s.bins if b.accuracy is not None], strict=True):
            ax.text(x, 100 * (b.accuracy or 0.0) + 1, f"n={b.n}", ha="center", fontsize=7)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("response time (minutes)")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 110)
    ax.set_title("Human response time and accuracy")
    if shown:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
