"""The row after QC (`FinalGrade`), what apply_qc returns and the score-0 check reads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from deskbench.tracks.deliverables.scoring.rubric import Source
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import QCAction
from deskbench.tracks.deliverables.scoring.verifier_base import Status, VerifierResult

__all__ = ["CHECKS", "CheckName", "FinalGrade", "QCFinding", "RowStatus", "VerifierOverride"]

RowStatus = Literal["unreviewed", "pending", "reviewed", "returned"]


CheckName = Literal["C.2", "C.3", "C.4A", "C.4B", "C.4C"]
CHECKS: tuple[CheckName, ...] = ("C.2", "C.3", "C.4A", "C.4B", "C.4C")


class QCFinding(BaseModel):
    """One finding of one Appendix C check on a row, the action it proposes (if any), and what
    QC did about it."""

    check: CheckName
    target: str  # verifier:<id>, a criterion code, or row
    finding: str
    required: bool = False  # C.2: the target needs an explicit confirm or edit before the row is reviewed
    action: Literal["edit", "reject", "confirm"] | None = None  # the proposed action
    score: int | None = None  # its score (a verifier 0/1, a criterion 0-3)
    reason: str = ""  # its one-line reason
    outcome: str = "open"  # open | confirmed | edited: A -> B | returned


class VerifierOverride(BaseModel):
    """A QC edit of a verifier: the final pass/fail replaces the automatic one."""

    id: str
    automatic: Status | None  # None when the automatic result was not available
    final: Literal["pass", "fail"]
    reason: str
    reviewer: str


class FinalGrade(BaseModel):
    """A row after QC: final scores and justifications, verifier overrides, status, flags."""

    task_id: str
    system: str
    attempt: int
    grader: str
    source: Source
    episode_stamp: str
    graded_at: str
    scores: dict[str, int]
    justifications: dict[str, str]
    primary_scores: dict[str, int]
    comment: str = ""
    declared_best: bool = False  # the SME's declared best response of its task (§4.4; rubric_best.py)
    best_source: Literal["column", "comment"] | None = None  # where the task's pick was read
    best_evidence: str = ""  # the text it was read from, or why the task has no pick
    status: RowStatus
    edits: list[QCAction] = Field(default_factory=list)
    returned: QCAction | None = None  # the reviewer's explicit Reject/Return
    return_reasons: list[str] = Field(default_factory=list)  # why the row is returned (explicit or C.1)
    stars: dict[str, int] = Field(default_factory=dict)  # C.6: STAR_TARGETS -> 1-5, the latest per target
    qc_actions: int = 0  # actions applied
    stale_qc: list[QCAction] = Field(default_factory=list)  # this row's actions that reviewed another grade
    verifiers: list[VerifierResult] | None = None  # final results (overrides applied)
    verifier_overrides: list[VerifierOverride] = Field(default_factory=list)
    v: float | None = None  # verifier pass rate (percent) after overrides
    mean: float
    zeros: list[str] = Field(default_factory=list)
    accept: bool | None = None  # Eq. 3; None when V is unknown or the row was returned
    flags: list[str] = Field(default_factory=list)
    checks: list[QCFinding] = Field(default_factory=list)  # the Appendix C checks' findings (rubric_qc_checks)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.system, self.attempt)
