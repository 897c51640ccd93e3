"""analytics (AIDABench) in the episode viewer (Track.viewer_views): an instruction with its
reference answer, chart spec or reference file and key points; an answer with its output files;
each item's score with what decided it (the chart's C and R, each judge's reasoning). Offline,
AIDABench's evaluators run without a model: deskbench's deterministic fallbacks (a stated value,
the spreadsheet comparator); charts and anything only a judge decides stay unscored."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from deskbench.contract.viewer import (
    AnswerView,
    EpisodeScore,
    FileView,
    Scores,
    TaskView,
    ViewerViews,
)
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore

CONCURRENCY = 4  # offline scorers: file comparisons; no judge calls


def analytics_shown(item: AnalyticsItemScore) -> EpisodeScore:
    """An analytics item: what decided it, the chart's C and R, each judge's reasoning."""
    shown = EpisodeScore(error_class=item.error_category)
    shown.metrics = {"score": item.score, "decided by": item.source, "category": item.category,
                     "difficulty": item.difficulty}
    if item.correctness is not None:
        shown.metrics.update({"chart correctness C": item.correctness, "readability R": item.readability})
    if item.glyph_check:
        shown.metrics["glyph check"] = item.glyph_check
    if item.judge_error:
        shown.metrics["judge error"] = item.judge_error
    if item.reason:
        shown.reasoning.append((item.source, item.reason))
    for who, why in item.judge_reasons.items():
        if why and why != item.reason:
            shown.reasoning.append((f"{item.source}: {who}", why))
    if item.file_judge is not None and item.file_judge.reason and item.file_judge.reason != item.reason:
        shown.reasoning.append(("File Judge", item.file_judge.reason))
    for o in item.outputs:  # a task asking for several files: each file's verdict
        verdict = "unscored" if o.score is None else ("pass" if o.score >= 1 else "fail")
        shown.reasoning.append((f"{o.output_name} ({o.source})", f"{verdict}: {o.reason}"))
    return shown


class AnalyticsViews(ViewerViews):
    def task(self, task: BaseModel) -> TaskView | None:
        if not isinstance(task, AnalyticsTask):
            return None
        t = task
        gold = [g for g in (t.answer, f"{t.answer_value} {t.answer_unit or ''}".strip() if t.answer_value is not None
                            else None) if g]
        if t.chart is not None:
            gold.append(f"a {t.chart.chart_type} chart: {t.chart.model_dump_json()}")
        gold += [f"a file {o.output_name} like {o.path}" for o in t.outputs]
        if t.chart_file:
            gold.append(f"a chart saved as {t.chart_file}")
        return TaskView(question=t.instruction, gold=gold + [f"key point: {k}" for k in t.key_points],
                        facts=[("category", t.category), ("difficulty steps", str(t.difficulty_steps)),
                               ("inputs", ", ".join(t.inputs))] + ([("computation", t.computation)] if t.computation else []))

    def answer(self, submission: BaseModel) -> AnswerView | None:
        if not isinstance(submission, AnalyticsSubmission):
            return None
        s = submission
        return AnswerView(answer=[s.answer] if s.answer else [],
                          files=[FileView(n=n, name=f.name, size=f.size) for n, f in enumerate(s.files)])

    def scores(self, store: RunStore, system: str) -> Scores:
        from deskbench.tracks.analytics.outcomes import analytics_outcomes
        from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges, score_run

        items = asyncio.run(score_run(store, system, AnalyticsJudges(), concurrency=CONCURRENCY))
        out: Scores = {}
        for item, outcome in zip(items, analytics_outcomes(items), strict=True):
            shown = analytics_shown(item).with_outcome(outcome)
            if shown.status == "unscored":
                shown.why_unscored = item.reason or f"{item.source}: no judge given"
            out[(item.task_id, item.attempt)] = shown
        return out

    def stored(self, row: Mapping[str, Any]) -> EpisodeScore:
        from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore

        return analytics_shown(AnalyticsItemScore.model_validate(row))


VIEWS = AnalyticsViews()
