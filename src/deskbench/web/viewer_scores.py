"""Per-episode scores for the episode viewer, through each track's own scoring path and never the
network: the viewer shows what `deskbench score RUN` (no --judge) would decide for each episode,
with the details that decided it.

A track's scorer here only calls that track's scoring functions (docqa `score_all` + its outcome
and error-class rules, analytics `score_run`, deliverables `score_run`) and converts their item
scores with the track's own outcome converters, so no rule is written twice. A track without an
entry (a plugin's) is scored with `Track.outcomes` and shows no details. Anything a scorer cannot
decide offline is "unscored" with the reason, never "wrong"."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
from deskbench.runs.store import RunStore

Key = tuple[str, int]  # (task id, attempt)
CONCURRENCY = 4  # offline scorers: file comparisons, verifiers; no judge calls


class EpisodeScore(BaseModel):
    """What the viewer shows about one episode's score."""

    status: Literal["scored", "unscored"] = "unscored"
    score: float | None = None
    correct: bool | None = None
    why_unscored: str = ""
    error_class: str | None = None  # docqa's MADQA H.3 class, analytics' error category
    metrics: dict[str, Any] = Field(default_factory=dict)  # name -> value, in the track's words
    reasoning: list[tuple[str, str]] = Field(default_factory=list)  # (who, why): a judge's or scorer's reason
    verifiers: list[dict[str, Any]] = Field(default_factory=list)  # deliverables: id, kind, status, evidence
    rubric: dict[str, int] | None = None  # deliverables: criterion -> 0-3, when graded

    @property
    def outcome(self) -> str:
        """correct / wrong / unscored: the table's filter."""
        if self.status != "scored":
            return "unscored"
        return "correct" if self.correct else "wrong"


Scores = dict[Key, EpisodeScore]
Scorer = Callable[[RunStore, str], Scores]
"""(store, system) -> every episode's score of that system."""


def _from_outcome(o: ItemOutcome) -> EpisodeScore:
    if o.status != "scored":
        return EpisodeScore(why_unscored="the track's scorer could not decide it offline")
    return EpisodeScore(status="scored", score=o.score, correct=o.correct)


def docqa_scores(store: RunStore, system: str) -> Scores:
    """ANLS* >= 0.5 (docqa's default, no judge) for every attempt, as `deskbench score` scores
    attempt 0 and the attempts block scores the others; the error class of a wrong item is
    MADQA H.3's (tracks/docqa/taxonomy.py)."""
    from deskbench.runs.runner import run_submissions
    from deskbench.tracks.docqa.humans import tasks_scored
    from deskbench.tracks.docqa.outcomes import docqa_outcomes
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all
    from deskbench.tracks.docqa.taxonomy import classify, is_incorrect, says_not_found

    attempts = sorted({a for _, a in store.done(system)})
    tasks = store.tasks()
    out: Scores = {}
    for attempt in attempts:
        subs, failed = run_submissions(store, system, attempt)
        ran = {s.id for s in subs if s.id is not None} | set(failed)
        scored = [t for t in tasks_scored(system, tasks, ran) if t.id in ran]
        items, _ = score_all(scored, subs, ScoreOptions(), errors=failed)
        answers = {s.id: s.answer for s in subs if s.id is not None}
        for item, outcome in zip(items, docqa_outcomes(items, system, attempt=attempt), strict=True):
            shown = _from_outcome(outcome)
            if shown.status == "unscored":
                shown.why_unscored = item.judge_error or "not scored"
            shown.metrics = {"accuracy": item.accuracy, "decided by": item.accuracy_source, "ANLS*": round(item.anls, 4),
                             "exact": item.exact, "Page F1": round(item.page_f1, 4), "Doc F1": round(item.doc_f1, 4)}
            if is_incorrect(item):
                shown.error_class = classify(item, answers.get(item.id))
                if says_not_found(answers.get(item.id)):
                    shown.metrics["says not found"] = True
            if item.judge_verdict:
                shown.metrics["judge verdict"] = item.judge_verdict
            if item.judge_reasoning:
                shown.reasoning.append(("answer judge", item.judge_reasoning))
            out[(item.id, attempt)] = shown
    return out


def analytics_scores(store: RunStore, system: str) -> Scores:
    """AIDABench's evaluators without a model: deskbench's deterministic fallbacks (stated value,
    the spreadsheet comparator); charts and anything only a judge decides stay unscored."""
    from deskbench.tracks.analytics.outcomes import analytics_outcomes
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges, score_run

    items = asyncio.run(score_run(store, system, AnalyticsJudges(), concurrency=CONCURRENCY))
    out: Scores = {}
    for item, outcome in zip(items, analytics_outcomes(items), strict=True):
        shown = _from_outcome(outcome)
        if shown.status == "unscored":
            shown.why_unscored = item.reason or f"{item.source}: no judge given"
        shown.error_class = item.error_category
        shown.metrics = {"score": item.score, "decided by": item.source, "category": item.category,
                         "difficulty": item.difficulty}
        if item.correctness is not None:
            shown.metrics.update({"chart correctness C": item.correctness, "readability R": item.readability})
        if item.glyph_check:
            shown.metrics["glyph check"] = item.glyph_check
        if item.reason:
            shown.reasoning.append((item.source, item.reason))
        out[(item.task_id, item.attempt)] = shown
    return out


def deliverables_scores(store: RunStore, system: str) -> Scores:
    """Deterministic verifiers (llm_check ones stay unobservable without --judge) and the run's
    rubric grades: VRS and ACCEPT when graded, else unscored."""
    from deskbench.tracks.deliverables.outcomes import deliverables_outcomes
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

    items = asyncio.run(score_run(store, systems=[system], concurrency=CONCURRENCY))
    out: Scores = {}
    for item, outcome in zip(items, deliverables_outcomes(items), strict=True):
        shown = _from_outcome(outcome)
        if shown.status == "unscored":
            shown.why_unscored = "not graded yet (grade it with 'deskbench serve --out RUNDIR')"
        shown.metrics = {"V (%)": round(item.v, 1), "verifiers passed / failed / unobservable":
                         f"{item.passed} / {item.failed} / {item.unobservable}",
                         "VRS relaxed": item.vrs_relaxed, "VRS strict": item.vrs_strict, "ACCEPT": item.accept,
                         "grade status": item.grade_status, "grader": item.grader}
        shown.verifiers = [r.model_dump() for r in item.verifiers]
        shown.rubric = item.scores
        for trap in item.traps:
            shown.metrics[f"trap {trap.id} ({trap.kind})"] = trap.outcome
        out[(item.task_id, item.attempt)] = shown
    return out


SCORERS: dict[str, Scorer] = {"docqa": docqa_scores, "analytics": analytics_scores,
                              "deliverables": deliverables_scores}


def outcome_scores(store: RunStore, system: str) -> Scores:
    """Any other track: its outcomes, on its default (no-judge) scorer."""
    from deskbench.tracks.registry import get_track

    return {(o.task_id, o.attempt): _from_outcome(o)
            for o in get_track(store.track()).outcomes(store, system, OutcomeOptions(concurrency=CONCURRENCY))}


def system_scores(store: RunStore, system: str) -> tuple[Scores, str]:
    """Every episode's score of `system`, and why none could be computed ("" when they were):
    a run the scorer cannot read (no tasks file recorded, a package folder moved) shows its
    episodes unscored with that reason instead of failing the page."""
    scorer = SCORERS.get(store.track(), outcome_scores)
    try:
        return scorer(store, system), ""
    except (UserError, OSError) as exc:
        return {}, f"could not score: {exc}"
