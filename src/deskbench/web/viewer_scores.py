"""Per-episode scores for the episode viewer, never through the network: each episode shows the
latest scoring stored in its run (`deskbench score` or `run` keep what they computed, judges'
verdicts included: runs/scorings.py) that covered it, naming it; an episode no stored scoring
covers (the run was never scored, or the episode or its grade changed since) is scored offline
by the track's default scorer (no judge) and labelled so.

A stored item and an offline one are shown by the same per-track function (docqa's ItemScore with
its outcome and error-class rules, analytics' and deliverables' item scores), the stored one read
back from its `--items-out` row, so no rule is written twice. A track without an entry (a plugin's)
is scored with `Track.outcomes` and shows no details. Anything that cannot be decided is
"unscored" with the reason, never "wrong"."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
from deskbench.runs.current_scorings import current_items
from deskbench.runs.scorings import Scoring, StoredItem
from deskbench.runs.store import RunStore

if TYPE_CHECKING:
    from deskbench.tracks.docqa.tasks import ItemScore
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore

Key = tuple[str, int]  # (task id, attempt)
CONCURRENCY = 4  # offline scorers: file comparisons, verifiers; no judge calls


OFFLINE_SHORT = "the track's default scorer, offline (no judge)"
OFFLINE = "the track's default scorer, offline (no judge): no stored scoring covers it (run 'deskbench score')"


class EpisodeScore(BaseModel):
    """What the viewer shows about one episode's score."""

    source: str = OFFLINE  # which scoring produced it: a stored one by number, settings and time, or offline
    stored: bool = False  # from a scoring stored in the run
    scoring: int | None = None  # that scoring's number
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

# what a score is computed from, by table (-> its rows' time column): a write to any of them makes
# the viewer score again (RunStore.stamp); a track adds its own tables
STAMPED: dict[str, str | None] = {"tasks": None, "episodes": "finished_at", "scorings": "created"}
TRACK_STAMPED: dict[str, dict[str, str | None]] = {
    "deliverables": {"rubric_grades": "created_at", "rubric_failures": "created_at", "rubric_qc": "created_at"}}


def stamp(store: RunStore) -> tuple[object, ...]:
    """Changes whenever anything a score of this run is computed from is written."""
    return store.stamp({**STAMPED, **TRACK_STAMPED.get(store.track(), {})})
Scorer = Callable[[RunStore, str], Scores]
"""(store, system) -> every episode's score of that system."""


def _from_outcome(o: ItemOutcome) -> EpisodeScore:
    return _with_outcome(EpisodeScore(), o)


def _with_outcome(shown: EpisodeScore, o: ItemOutcome) -> EpisodeScore:
    """`shown` with the outcome's status, score and correct (the track's own converter decided them)."""
    if o.status != "scored":
        return shown.model_copy(update={"why_unscored": "the track's scorer could not decide it offline"})
    return shown.model_copy(update={"status": "scored", "score": o.score, "correct": o.correct})


def docqa_shown(item: ItemScore, answer: Sequence[str] | None) -> EpisodeScore:
    """A docqa item: its metrics, the judge's verdict and reasoning, and MADQA H.3's error class
    of a wrong item (tracks/docqa/taxonomy.py)."""
    from deskbench.tracks.docqa.taxonomy import classify, is_incorrect, says_not_found

    shown = EpisodeScore()
    shown.metrics = {"accuracy": item.accuracy, "decided by": item.accuracy_source, "ANLS*": round(item.anls, 4),
                     "exact": item.exact, "Page F1": round(item.page_f1, 4), "Doc F1": round(item.doc_f1, 4)}
    answers = list(answer) if answer is not None else None
    if is_incorrect(item):
        shown.error_class = classify(item, answers)
        if says_not_found(answers):
            shown.metrics["says not found"] = True
    if item.judge_verdict:
        shown.metrics["judge verdict"] = item.judge_verdict
    if item.judge_issue:
        shown.metrics["judge's main issue"] = item.judge_issue
    if item.judge_reasoning:
        shown.reasoning.append(("answer judge", item.judge_reasoning))
    return shown


def docqa_scores(store: RunStore, system: str) -> Scores:
    """ANLS* >= 0.5 (docqa's default, no judge) for every attempt, as `deskbench score` scores
    attempt 0 and the attempts block scores the others."""
    from deskbench.runs.runner import run_submissions
    from deskbench.tracks.docqa.humans import tasks_scored
    from deskbench.tracks.docqa.outcomes import docqa_outcomes
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all

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
            shown = _with_outcome(docqa_shown(item, answers.get(item.id)), outcome)
            if shown.status == "unscored":
                shown.why_unscored = item.judge_error or "not scored"
            out[(item.id, attempt)] = shown
    return out


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
    return shown


def analytics_scores(store: RunStore, system: str) -> Scores:
    """AIDABench's evaluators without a model: deskbench's deterministic fallbacks (stated value,
    the spreadsheet comparator); charts and anything only a judge decides stay unscored."""
    from deskbench.tracks.analytics.outcomes import analytics_outcomes
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsJudges, score_run

    items = asyncio.run(score_run(store, system, AnalyticsJudges(), concurrency=CONCURRENCY))
    out: Scores = {}
    for item, outcome in zip(items, analytics_outcomes(items), strict=True):
        shown = _with_outcome(analytics_shown(item), outcome)
        if shown.status == "unscored":
            shown.why_unscored = item.reason or f"{item.source}: no judge given"
        out[(item.task_id, item.attempt)] = shown
    return out


def deliverables_shown(item: DeliverableItemScore) -> EpisodeScore:
    """A deliverables item: V, the verifiers (llm_check verdicts with their reasons), the rubric, VRS, ACCEPT."""
    shown = EpisodeScore()
    shown.metrics = {"V (%)": round(item.v, 1), "verifiers passed / failed / unobservable":
                     f"{item.passed} / {item.failed} / {item.unobservable}",
                     "VRS relaxed": item.vrs_relaxed, "VRS strict": item.vrs_strict, "ACCEPT": item.accept,
                     "grade status": item.grade_status, "grader": item.grader}
    shown.verifiers = [r.model_dump() for r in item.verifiers]
    shown.rubric = item.scores
    for trap in item.traps:
        shown.metrics[f"trap {trap.id} ({trap.kind})"] = trap.outcome
    return shown


def deliverables_scores(store: RunStore, system: str) -> Scores:
    """Deterministic verifiers (llm_check ones stay unobservable without --judge) and the run's
    rubric grades: VRS and ACCEPT when graded, else unscored."""
    from deskbench.tracks.deliverables.outcomes import deliverables_outcomes
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run

    items = asyncio.run(score_run(store, systems=[system], concurrency=CONCURRENCY))
    out: Scores = {}
    for item, outcome in zip(items, deliverables_outcomes(items), strict=True):
        shown = _with_outcome(deliverables_shown(item), outcome)
        if shown.status == "unscored":
            shown.why_unscored = "not graded yet (grade it with 'deskbench serve --out RUNDIR')"
        out[(item.task_id, item.attempt)] = shown
    return out


SCORERS: dict[str, Scorer] = {"docqa": docqa_scores, "analytics": analytics_scores,
                              "deliverables": deliverables_scores}


def outcome_scores(store: RunStore, system: str) -> Scores:
    """Any other track: its outcomes, on its default (no-judge) scorer."""
    from deskbench.contract.registry import get_track

    return {(o.task_id, o.attempt): _from_outcome(o)
            for o in get_track(store.track()).outcomes(store, system, OutcomeOptions(concurrency=CONCURRENCY))}


def _docqa_stored(row: dict[str, Any]) -> EpisodeScore:
    from pydantic import TypeAdapter

    from deskbench.tracks.docqa.tasks import ItemScore

    fields = set(ItemScore.__dataclass_fields__)
    item = TypeAdapter(ItemScore).validate_python({k: v for k, v in row.items() if k in fields})
    prediction = row.get("prediction")
    return docqa_shown(item, prediction.get("answer") if isinstance(prediction, dict) else None)


def _analytics_stored(row: dict[str, Any]) -> EpisodeScore:
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore

    return analytics_shown(AnalyticsItemScore.model_validate(row))


def _deliverables_stored(row: dict[str, Any]) -> EpisodeScore:
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore

    shown = deliverables_shown(DeliverableItemScore.model_validate(row))
    for name, said in (row.get("judge") or {}).items():  # the rubric grade's justifications
        if isinstance(said, dict) and isinstance(said.get("reasoning"), dict) and said["reasoning"]:
            shown.reasoning.append((f"{name} ({said.get('grader')})", pretty_lines(said["reasoning"])))
    return shown


def pretty_lines(values: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in values.items())


StoredView = Callable[[dict[str, Any]], EpisodeScore]
STORED_VIEWS: dict[str, StoredView] = {"docqa": _docqa_stored, "analytics": _analytics_stored,
                                       "deliverables": _deliverables_stored}
"""How a track's stored `--items-out` row is shown (read back as its item score)."""


def stored_score(track: str, scoring: Scoring, item: StoredItem) -> EpisodeScore:
    """An item of a stored scoring, as the viewer shows it: the row's details, the stored outcome."""
    view = STORED_VIEWS.get(track)
    try:
        shown = view(item.row) if view is not None else EpisodeScore()
    except ValueError:  # a row another deskbench wrote: the outcome still holds
        shown = EpisodeScore()
    return shown.model_copy(update={
        "source": scoring.label(), "stored": True, "scoring": scoring.id, "status": item.status, "score": item.score, "correct": item.correct,
        "why_unscored": item.reason if item.status != "scored" else ""})


def system_scores(store: RunStore, system: str) -> tuple[Scores, str]:
    """Every episode's score of `system`, and why none could be computed offline ("" when they
    were): the latest stored scoring that still holds for each episode, else the offline scorer's
    (a run it cannot read, e.g. a package folder moved, shows those episodes unscored with that
    reason instead of failing the page)."""
    track = store.track()
    held, stale = current_items(store, system)
    out: Scores = {key: stored_score(track, scoring, item) for key, (scoring, item) in held.items()}
    if set(out) >= store.done(system):
        return out, ""
    scorer = SCORERS.get(track, outcome_scores)
    try:
        offline = scorer(store, system)
    except (UserError, OSError) as exc:
        return out, f"could not score: {exc}"
    for key, shown in offline.items():
        if key not in out:
            note = stale[key].note() if key in stale else ""
            out[key] = shown.model_copy(update={"source": f"{OFFLINE_SHORT}: {note}" if note else OFFLINE})
    return out, ""

