"""The QC reviewer's action (Appendix C) and the rules that validate it, apart from apply_qc that applies it."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deskbench.errors import is_one_of
from deskbench.runs.store import now
from deskbench.tracks.deliverables.scoring.rubric import RubricGrade
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

__all__ = [
    "ACTION_ALIASES",
    "QCAction",
    "QCActionKind",
    "QC_ACTIONS",
    "STAR_TARGETS",
    "qc_action",
    "qc_problem",
    "self_review",
    "target_kind",
]

QCActionKind = Literal["confirm", "edit", "reject", "rate"]
QC_ACTIONS: tuple[QCActionKind, ...] = get_args(QCActionKind)
ACTION_ALIASES: dict[str, QCActionKind] = {"confirm": "confirm", "ok": "confirm", "edit": "edit", "reject": "reject", "return": "reject",
                  "rate": "rate", "star": "rate", "stars": "rate"}
STAR_TARGETS = ("verifiers", *RUBRIC_CODES)  # C.6: one combined rating across verifiers, one per criterion
STARS = (1, 2, 3, 4, 5)  # the paper does not give the scale; deskbench uses the usual 1-5 stars


def target_kind(target: str) -> Literal["criterion", "verifier", "row", "stars"] | None:
    if target in RUBRIC_CODES:
        return "criterion"
    if target == "row":
        return "row"
    if target.startswith("verifier:") and target.removeprefix("verifier:").strip():
        return "verifier"
    if target.startswith("stars:") and target.removeprefix("stars:") in STAR_TARGETS:
        return "stars"
    return None


def self_review(reviewer: str, grader: str) -> str | None:
    """Why `reviewer` may not QC a grade by `grader` (None: they may). QC is a second person's
    review (Appendix C: a second SME from a non-overlapping pool); names are compared without
    case or surrounding spaces, so "Ana " does not review "ana"'s grade."""
    if reviewer.strip().casefold() == grader.strip().casefold():
        return f"QC is a second person's review: {reviewer.strip()} graded this episode"
    return None


def qc_action(action: str) -> QCActionKind:
    """An action `qc_problem` accepted, as its kind (a ValueError for one it refuses)."""
    if not is_one_of(action, QC_ACTIONS):
        raise ValueError(f"'{action}' is not an action; use confirm, edit, reject or rate")
    return action


def qc_problem(target: str, action: str, score: int | None, justification: str,
               reason: str) -> tuple[str, str, str] | None:
    """The first problem of an action as (column, problem, fix), or None when it is valid."""
    kind = target_kind(target)
    if kind is None:
        return ("target", f"'{target}' is not a target",
                "use DI, AR, RF, EP, FD, verifier:<id>, row, or stars:verifiers / stars:DI .. stars:FD")
    if not is_one_of(action, QC_ACTIONS):
        return ("action", f"'{action}' is not an action", "use confirm, edit, reject (return) or rate")
    if "\n" in reason or "\r" in reason:
        return ("reason", "the reason spans several lines", "write a one-line reason")
    if (kind == "stars") != (action == "rate"):
        if kind == "stars":
            return ("action", f"{target} takes a star rating", "use action rate with a score of 1-5 stars")
        return ("target", f"rate applies to a star target, not to {target}",
                "use stars:verifiers or stars:DI .. stars:FD")
    if action == "rate":
        if score is None:
            return ("score", "a star rating has no stars", "give 1, 2, 3, 4 or 5")
        if score not in STARS:
            return ("score", f"{score} is not a star rating", "give 1, 2, 3, 4 or 5")
        return None
    if action == "reject":
        if kind != "row":
            return ("target", f"reject applies to the row, not to {target}",
                    "give target row (or edit the cell)")
        if not reason.strip():
            return ("reason", "a reject has no reason", "say in one line why the row is returned")
        if score is not None:
            return ("score", "a reject carries no score", "leave score empty")
        return None
    if action == "confirm":
        if score is not None:
            return ("score", "a confirm keeps the primary score", "leave score empty, or use edit")
        return None
    if kind == "row":  # edit
        return ("action", "a row cannot be edited", "edit a cell (DI..FD or verifier:<id>) or reject the row")
    if score is None:
        want = "0-3" if kind == "criterion" else "0 or 1"
        return ("score", "an edit has no replacement score", f"give the corrected score ({want})")
    if kind == "criterion" and not 0 <= score <= 3:
        return ("score", f"{score} is not a criterion score", "give 0, 1, 2 or 3")
    if kind == "verifier" and score not in (0, 1):
        return ("score", f"{score} is not a verifier score", "give 0 (fail) or 1 (pass)")
    if kind == "criterion" and not justification.strip():
        return ("justification", "an edit of a criterion has no replacement justification",
                "write the complete replacement justification matching the rubric cell")
    if not reason.strip():
        return ("reason", "an edit has no reason", "give a one-line auditable reason")
    return None


class QCAction(BaseModel):
    """One QC reviewer's action on one cell or on the row of an episode (append-only)."""

    model_config = ConfigDict(extra="forbid")
    task_id: str = Field(min_length=1)
    system: str = Field(min_length=1)
    attempt: int = Field(default=0, ge=0)
    target: str
    action: QCActionKind
    score: int | None = None
    justification: str = ""
    reason: str = ""
    reviewer: str = Field(min_length=1)
    created_at: str = Field(default_factory=now)
    # the reviewed grade: its grader and created_at (None on a legacy row, recorded before QC
    # actions were bound; the grade store binds those from the timestamps)
    grader: str | None = None
    graded_at: str | None = None
    id: int | None = None  # set by the grade store (the order of the log)

    @model_validator(mode="after")
    def _valid(self) -> QCAction:
        problem = qc_problem(self.target, self.action, self.score, self.justification, self.reason)
        if problem:
            column, what, fix = problem
            raise ValueError(f"{column}: {what}; {fix}")
        if (self.grader is None) != (self.graded_at is None):
            raise ValueError("grader, graded_at: the reviewed grade is named by both or by neither")
        return self

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.system, self.attempt)

    @property
    def bound(self) -> bool:
        return self.grader is not None

    def bind(self, grade: RubricGrade) -> QCAction:
        """This action, reviewing `grade`."""
        return self.model_copy(update={"grader": grade.grader, "graded_at": grade.created_at})

    def reviews(self, grade: RubricGrade) -> bool:
        """Whether this action reviewed `grade` (same episode, grader and created_at); an
        unbound action: whether it was recorded at or after the grade."""
        if self.key != grade.key:
            return False
        if self.grader is None:
            return self.created_at >= grade.created_at
        return (self.grader, self.graded_at) == (grade.grader, grade.created_at)

    def reviewed(self) -> str:
        """The reviewed grade, for messages."""
        return f"{self.grader}'s grade of {self.graded_at}" if self.bound else "a grade no longer stored"

