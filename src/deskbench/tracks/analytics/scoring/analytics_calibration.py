"""Calibration items from analytics runs (AIDABench §3.3.4: each evaluator is validated against
expert annotations; the paper reports agreement above 95% for the QA and file evaluators and
above 90% for charts). The workflow is the docqa one (scoring/judge_calibration.py): sample,
label, compute; this module only turns analytics episodes into CalibrationItems.

Which episodes: attempt 0 of every system (as for docqa), ended "ok" with a submission, scored
by the analytics scorer (scoring/analytics.score_episode) with the judges the flags give, the
same ones `deskbench score` builds (cli_analytics). An item carries the verdict of the evaluator
that decided it (AnalyticsItemScore.source): the Listing 2 judge with --judge (the deterministic
check without one: "numeric" / "exact"), the chart judges, the File Judge or the comparator.
Episodes no evaluator looked at (no final answer, no chart, no output file, an agent error: the
scorer's source "episode") are not items: a judge cannot agree or disagree on them. Items an
evaluator left unscored keep verdict None and are not sampled (as docqa's).

The verdict per category, binary as a person labels it:
- qa: the score, 0 or 1 (Listing 2 is binary).
- file_generation: the score, 0 or 1 (pass / fail, from the File Judge or the comparator).
- visualization: 1 when the correctness judge (Listing 3) found every rubric item satisfied
  (C = 1), else 0. The chart score S = 0.7 C + 0.3 R is soft and R (Listing 4, eight readability
  dimensions) is about looks, not data; what a person can label as right or wrong from the image
  and the rubric is whether the chart shows every rubric item, i.e. C = 1. Listing 3 returns only
  the count of satisfied items, not which, so agreement per rubric item cannot be computed from
  the judge's output. Readability is not calibrated. S and C are kept in the item.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from deskbench.errors import UserError, is_one_of
from deskbench.runs.store import Episode
from deskbench.scoring.judge_calibration import VERDICT_SOURCES, CalibrationItem, open_named_runs
from deskbench.tracks.analytics.scoring.analytics import (
    AnalyticsItemScore,
    AnalyticsJudges,
    _output_paths,
    find_output_sheet,
    score_episode,
)
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask, Category

CHART_RULE = ("a chart's verdict is 1 when the correctness judge (Listing 3) finds every rubric item satisfied "
              "(C = 1), else 0; readability (R) is not calibrated")


def _judge_name(score: AnalyticsItemScore, judges: AnalyticsJudges) -> str:
    """Who decided the item: the judge model's id, or the deterministic evaluator's name."""
    if score.source == "judge" and judges.qa is not None:
        return judges.qa.id
    if score.source == "chart_judge" and judges.chart is not None:
        return judges.chart.id
    if score.source in ("file_judge", "file_judge_deferred") and judges.file is not None:
        return judges.file.model.id
    return {"numeric": "qa deterministic check", "exact": "qa deterministic check",
            "comparator": "file comparator"}.get(score.source, score.source)


def _verdict(score: AnalyticsItemScore) -> float | None:
    if score.status != "scored" or score.score is None:
        return None
    if score.category == "visualization":
        return None if score.correctness is None else float(score.correctness >= 1.0)
    return float(score.score)


def to_item(task: AnalyticsTask, ep: Episode, score: AnalyticsItemScore, run_dir: Path, tasks_dir: Path,
            judges: AnalyticsJudges) -> CalibrationItem | None:
    """The calibration item of a scored episode; None when no evaluator decided it."""
    from deskbench.tracks.analytics.scoring.analytics_qa import _reference_text
    from deskbench.tracks.analytics.scoring.charts import find_chart

    sub = ep.submission
    if score.source == "episode" or not isinstance(sub, AnalyticsSubmission):
        return None
    if not is_one_of(score.source, VERDICT_SOURCES):
        raise ValueError(f"{task.id}: {score.source!r} is not an evaluator a calibration item names")
    paths = _output_paths(ep, run_dir)
    chart = output = reference_file = None
    if task.category == "visualization":
        found = find_chart(paths, instruction=task.instruction, name=task.chart_file)
        chart = str(found.resolve()) if found else None
    elif task.category == "file_generation" and task.reference_file is not None:
        found = find_output_sheet(task, paths)
        output = str(found.resolve()) if found else None
        reference_file = str((tasks_dir / task.reference_file.path).resolve())
    return CalibrationItem(
        id=f"{run_dir.name}/{ep.system}/{task.id}", task_id=task.id, run=run_dir.name, system=ep.system,
        question=task.instruction, track="analytics", category=task.category,
        reference=_reference_text(task) if task.category == "qa" else None, key_points=list(task.key_points),
        answer=sub.answer, chart_path=chart, output_file=output, reference_file=reference_file,
        judge_score=score.score, chart_correctness=score.correctness,
        judge_verdict=_verdict(score), verdict_source=score.source,
        judge=_judge_name(score, judges), judge_reason=score.reason or None)


def analytics_items(run_dirs: Sequence[Path], judges: AnalyticsJudges, *, system: str | None = None,
                    category: Category | None = None, concurrency: int = 8) -> tuple[list[CalibrationItem], Counter[str]]:
    """Every attempt-0 episode of the analytics runs, scored, as calibration items (stable
    order), and the count of episodes left out by why ("no evaluator": the episode ended without
    anything to judge)."""
    jobs: list[tuple[AnalyticsTask, Episode, Path, Path]] = []
    for run_dir, store in open_named_runs(run_dirs):
        tasks = {t.id: t for t in store.tasks_of(AnalyticsTask)}
        tasks_file = store.meta("tasks_file")
        if not isinstance(tasks_file, str):
            raise UserError(f"{run_dir} does not record its tasks file; run 'deskbench run' on it again")
        for ep in sorted(store.episodes(system), key=lambda e: (e.system, e.task_id)):
            task = tasks.get(ep.task_id)
            if ep.attempt != 0 or task is None or (category is not None and task.category != category):
                continue
            jobs.append((task, ep, run_dir, Path(tasks_file).parent))
        store.close()
    skipped: Counter[str] = Counter()
    slots = asyncio.Semaphore(concurrency)

    async def one(task: AnalyticsTask, ep: Episode, run_dir: Path, tasks_dir: Path) -> AnalyticsItemScore | None:
        if ep.status != "ok" or not isinstance(ep.submission, AnalyticsSubmission):
            return None  # nothing to judge: not scored at all (no judge call)
        async with slots:
            return await score_episode(task, ep, run_dir, tasks_dir, judges)

    async def go() -> list[AnalyticsItemScore | None]:
        return list(await asyncio.gather(*(one(*job) for job in jobs)))

    items: list[CalibrationItem] = []
    for (task, ep, run_dir, tasks_dir), score in zip(jobs, asyncio.run(go()) if jobs else [], strict=True):
        item = None if score is None else to_item(task, ep, score, run_dir, tasks_dir, judges)
        if item is None:
            skipped["no evaluator"] += 1
        else:
            items.append(item)
    if not items:
        where = ", ".join(str(d) for d in run_dirs)
        raise UserError(f"no analytics answer an evaluator decided in {where}"
                        f"{f' for system {system!r}' if system else ''}{f' in category {category}' if category else ''}; "
                        "run 'deskbench run' first")
    return sorted(items, key=lambda i: i.id), skipped
