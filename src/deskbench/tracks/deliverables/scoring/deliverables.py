"""Score deliverables episodes: verifiers (V), the rubric grade, and the paper's aggregates.

One item per (task, system, attempt). The verifier layer always scores (it needs no person):
V with its pass / fail / unobservable counts, and each embedded trap as avoided, fallen into or
unobservable. The rubric layer comes from the run's grades (LLM grader, human CSV, QC applied);
an episode without a usable grade is *ungraded*: its VRS and ACCEPT are None and it is counted
apart, never as a zero. One exception, by rule: an episode that delivered nothing (no response
text, no file: a refusal, a timeout, a crash) is an unusable artifact, and gets 0 on every
criterion (Table 19's Score-0 anchors: "unusable output", "no inference attempted") with the
grader "auto:no-deliverable", unless a person or model graded it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from deskbench.runs.store import Episode
from deskbench.scoring.judge_log import episode
from deskbench.tracks.deliverables.scoring.verifiers import (
    AsyncLlmJudge,
    VerifierResult,
    arun_verifiers,
    verifier_pass_rate,
)
from deskbench.tracks.deliverables.scoring.vrs import (
    accept,
    auto_reject,
    reasoning_mean,
    vrs_relaxed,
    vrs_strict,
)
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, DeliverableSubmission, DeliverableTask

TrapOutcome = Literal["avoided", "fell", "unobservable"]
NO_DELIVERABLE = "auto:no-deliverable"


class TrapResult(BaseModel):
    id: str
    kind: str
    outcome: TrapOutcome
    verifiers: list[str]


class GradeInput(BaseModel):
    """What scoring needs of a final (QC-applied) grade."""

    scores: dict[str, int]
    grader: str
    status: str = "unreviewed"  # unreviewed | pending | reviewed | returned
    verifier_overrides: dict[str, Literal["pass", "fail"]] = Field(default_factory=dict)
    return_reasons: list[str] = Field(default_factory=list)  # why a returned grade went back
    stars: dict[str, int] = Field(default_factory=dict)  # C.6 star ratings (QC), never a score
    declared_best: bool = False  # the grader's declared best response of the task (§4.4)


class GradedFigures(NamedTuple):
    """A graded item's reasoning mean (R̄, 0..3) and VRS (0..100)."""

    rbar: float
    vrs_strict: float
    vrs_relaxed: float


class DeliverableItemScore(BaseModel):
    task_id: str
    system: str
    attempt: int = 0
    prompt_class: str
    status: str  # the episode's: ok / error / limit
    error: str | None = None
    verifiers: list[VerifierResult]
    v: float  # 0..100, unobservable counted as failed
    passed: int
    failed: int
    unobservable: int
    judged: int
    traps: list[TrapResult] = Field(default_factory=list)
    required_files: list[str] = Field(default_factory=list)
    files_produced: list[str] = Field(default_factory=list)
    scores: dict[str, int] | None = None  # None = ungraded
    grader: str | None = None
    grade_status: str | None = None  # unreviewed | pending | reviewed | returned (QC, Appendix C)
    return_reasons: list[str] = Field(default_factory=list)
    stars: dict[str, int] = Field(default_factory=dict)  # C.6: "verifiers", DI..FD -> 1-5
    declared_best: bool = False
    reasoning_mean: float | None = None
    vrs_relaxed: float | None = None
    vrs_strict: float | None = None
    accept: bool | None = None
    auto_reject: bool | None = None
    cost_usd: float | None = 0.0  # the episode's; None: unknown (it called a model without a price)
    cost_known: bool = True  # always cost_usd is not None

    def model_post_init(self, context: object, /) -> None:
        if self.cost_usd is None or not self.cost_known:
            self.cost_usd, self.cost_known = None, False

    @property
    def graded(self) -> bool:
        return self.scores is not None

    def graded_scores(self) -> dict[str, int]:
        """A graded item's criterion scores (a ValueError for an ungraded one: check `graded`)."""
        if self.scores is None:
            raise ValueError(f"{self.system} / {self.task_id}: not graded, no criterion scores")
        return self.scores

    def figures(self) -> GradedFigures:
        """A graded item's R̄ and VRS, set with its scores (a ValueError for an ungraded one)."""
        if self.reasoning_mean is None or self.vrs_strict is None or self.vrs_relaxed is None:
            raise ValueError(f"{self.system} / {self.task_id}: not graded, no R̄ or VRS")
        return GradedFigures(self.reasoning_mean, self.vrs_strict, self.vrs_relaxed)

    @property
    def files_ok(self) -> bool | None:
        """All required output files produced (None when the task requires none)."""
        if not self.required_files:
            return None
        return set(self.required_files) <= set(self.files_produced)


def trap_results(task: DeliverableTask, results: list[VerifierResult], *,
                 nothing_delivered: bool = False) -> list[TrapResult]:
    """Fell / avoided / unobservable per trap. Nothing delivered is unobservable: the agent did
    not take the lure, it did not get that far (its verifiers fail all the same)."""
    by_id = {r.id: r.status for r in results}
    out = []
    for trap in task.traps:
        statuses = [by_id.get(v, "unobservable") for v in trap.verifiers]
        outcome: TrapOutcome = ("unobservable" if nothing_delivered else "fell" if "fail" in statuses else
                                "unobservable" if "unobservable" in statuses else "avoided")
        out.append(TrapResult(id=trap.id, kind=trap.kind, outcome=outcome, verifiers=trap.verifiers))
    return out


def _outputs_dir(run_dir: Path, episode: Episode) -> Path | None:
    """The episode's files folder, only inside its own folder (runs/outputs.py)."""
    from deskbench.runs.outputs import episode_outputs

    return episode_outputs(run_dir, episode) if isinstance(episode.submission, DeliverableSubmission) else None


NOTHING_DELIVERED = "nothing delivered (no response text, no files): every check of the deliverable fails"


def delivered_nothing(sub: DeliverableSubmission | None) -> bool:
    return sub is None or nothing_in(sub.response, has_files=bool(sub.files))


def nothing_in(response: str, *, has_files: bool) -> bool:
    """No response text and no output file: the deliverable was not delivered."""
    return not response.strip() and not has_files


async def verify_deliverable(task: DeliverableTask, response: str, outputs: Path | None, *, delivered: bool,
                             judge: AsyncLlmJudge | None = None) -> list[VerifierResult]:
    """The task's verifiers on a response and its output files. A deliverable that was not
    delivered fails them all: run on an empty text, the checks that a lure is absent would pass
    and give a non-delivery credit in V (and in the relaxed VRS, 0.5 V)."""
    if not delivered:
        return [VerifierResult(id=v.id, kind=v.kind, status="fail", evidence=NOTHING_DELIVERED)
                for v in task.verifiers]
    return await arun_verifiers(task.verifiers, response, outputs, judge=judge)


async def score_episode(task: DeliverableTask, episode: Episode, run_dir: Path, *,
                        grade: GradeInput | None = None, judge: AsyncLlmJudge | None = None) -> DeliverableItemScore:
    sub = episode.submission if isinstance(episode.submission, DeliverableSubmission) else None
    nothing = delivered_nothing(sub)
    results = await verify_deliverable(task, sub.response if sub else "", _outputs_dir(run_dir, episode),
                                       delivered=not nothing, judge=judge)
    if grade is not None and grade.verifier_overrides:  # QC edits of a verifier replace its outcome
        results = [r.model_copy(update={"status": grade.verifier_overrides[r.id],
                                        "evidence": f"QC edit: {grade.verifier_overrides[r.id]} (was {r.status}: {r.evidence})"})
                   if r.id in grade.verifier_overrides else r for r in results]
    rate = verifier_pass_rate(results)
    if grade is None and nothing:
        grade = GradeInput(scores=dict.fromkeys(RUBRIC_CODES, 0), grader=NO_DELIVERABLE, status="reviewed")
    item = DeliverableItemScore(
        task_id=task.id, system=episode.system, attempt=episode.attempt, prompt_class=task.prompt_class,
        status=episode.status, error=episode.error, verifiers=results, v=rate.v, passed=rate.passed,
        failed=rate.failed, unobservable=rate.unobservable, judged=rate.judged,
        traps=trap_results(task, results, nothing_delivered=nothing),
        required_files=[o.name for o in task.required_outputs],
        files_produced=[f.name for f in sub.files] if sub else [], cost_usd=episode.usage.cost_usd,
        cost_known=episode.usage.cost_known)
    if grade is not None and grade.status != "returned":
        s = grade.scores
        item = item.model_copy(update={
            "scores": s, "grader": grade.grader, "grade_status": grade.status, "stars": grade.stars,
            "declared_best": grade.declared_best,
            "reasoning_mean": reasoning_mean(s), "vrs_relaxed": vrs_relaxed(rate.v, s),
            "vrs_strict": vrs_strict(rate.v, s), "accept": accept(rate.v, s), "auto_reject": auto_reject(s)})
    elif grade is not None:
        item = item.model_copy(update={"grader": grade.grader, "grade_status": grade.status,
                                       "return_reasons": grade.return_reasons})
    return item


async def score_episodes(tasks: Mapping[str, DeliverableTask], episodes: list[Episode], run_dir: Path, *,
                         grades: Mapping[tuple[str, str, int], GradeInput] | None = None,
                         judge: AsyncLlmJudge | None = None, concurrency: int = 8) -> list[DeliverableItemScore]:
    """Every episode whose task is known, `concurrency` at a time (judged checks call a model)."""
    slots = asyncio.Semaphore(concurrency)
    grades = grades or {}

    async def one(ep: Episode) -> DeliverableItemScore:
        async with slots:
            with episode(ep.task_id, ep.system, ep.attempt):  # its llm_check calls, kept when `score` records
                return await score_episode(tasks[ep.task_id], ep, run_dir,
                                           grade=grades.get((ep.task_id, ep.system, ep.attempt)), judge=judge)

    return list(await asyncio.gather(*(one(ep) for ep in episodes if ep.task_id in tasks)))
