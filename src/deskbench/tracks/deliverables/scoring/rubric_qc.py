"""The annotation QC protocol (the consulting DRA paper, Appendix C) over a primary rubric grade.

A QC reviewer records, per row (episode), actions on its cells: a criterion (DI, AR, RF, EP,
FD), a verifier ("verifier:<id>") or the row itself ("row").

- Confirm: the primary score stands (on a cell), or the row was reviewed and stands (on "row").
- Edit: the exact replacement: a score (0-3 for a criterion, 0/1 for a verifier), for a
  criterion a complete replacement justification, and always a one-line auditable reason.
- Reject (or Return): the row is not salvageable by surgical edit; only on "row", with a reason.
- Rate (C.6 star ratings): six holistic ratings recorded post-QC, 1-5 stars, on the targets
  "stars:verifiers" (one combined rating across all verifiers) and "stars:DI" .. "stars:FD".
  They never change a score, V or ACCEPT (the paper keeps them as a per-cell covariate), but
  they are the reviewer's record of having looked at the row, so they count as QC of it.

The reviewer is never the grader (QC is a second person's check, Appendix C): `self_review` is
the one rule, used by the web QC form and the CSV import.

Each action is bound to the grade it reviewed: that grade's grader and created_at (`grader`,
`graded_at`; a grade is identified by its episode, grader and created_at, which every save path
stamps anew, so a regrade is a new grade). An action reviewing another grade (an earlier one by
the same grader, replaced since, or another grader's) is STALE for a grade: not applied to it,
reported in `FinalGrade.stale_qc` and flagged. An action stored before the binding existed has
neither field (a legacy row); GradeStore binds it, from the timestamps, to the grade that was
primary when it was recorded (see tracks/deliverables/grades.py); an unbound action handed to `apply_qc`
directly counts as reviewing the grade when it was recorded at or after that grade.

`apply_qc` turns a grade and its actions into a `FinalGrade`. What it does falls in two kinds:

RULES (they change what the row says):
  R1. The latest action per target wins; an Edit overwrites the primary score and
      justification verbatim; a verifier Edit replaces the automatic pass/fail (kept with its
      reason in `verifier_overrides`) and V is recomputed.
  R2. The latest row action decides Reject: a rejected row is "returned" (ACCEPT undecided).
      A row QC has acted on is also returned, with the reasons in `return_reasons`, when a C.1
      trigger about the grade fires (F2's first group): it goes back to its grader for a
      regrade and no longer counts as reviewed; the regrade is a new grade to QC.
  R3. Score-0 rule (C.5): any criterion at 0 rejects under ACCEPT (accept is False). A row with
      QC actions is "reviewed" only when every 0 cell (primary or edited) has an explicit
      Confirm or Edit; otherwise it is "pending" with a flag naming the cells. A row with no QC
      action is "unreviewed".

FLAGS (advice for the reviewer; they never change a score or the status):
  F1. Score-0 mismatch (C.5, C.4 check A): a 0 whose justification uses the wording of the
      score-1 anchor and none of the score-0 wording (`score0_mismatches`); the canonical
      action is Edit to 1.
  F2. C.1 Reject triggers evaluated mechanically. About the grade, so a regrade can clear them
      (they return a QC'd row, R2; on a row without QC they are flagged "should be returned"):
      more than three verifier edits on the row; verifier scores missing; two or more criteria
      with score-0 mismatches; a fabricated citation reported by QC (a reason or an edited
      justification: C.3 says it is surfaced to the grader, not silently corrected). About the
      episode, which no regrade can change (a required output file missing or a placeholder;
      a fabricated citation the grader's own justification already names): flagged "should be
      returned" only, for the reviewer to decide. Returning those automatically would return
      the row after every regrade and drop exactly the failing responses out of VRS and ACCEPT,
      while the paper counts every response (Table 6: output files produced by 10-90%).
  F3. C.4 check B: Execution Precision against the numeric verifiers' pass rate (a high rate
      with EP 0/1, or a low one with EP 3).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deskbench.runs.store import now
from deskbench.tasks.analytics import OutputFileRecord
from deskbench.tasks.deliverables import (
    RUBRIC_CODES,
    TABLE_19,
    DeliverableSubmission,
    DeliverableTask,
    RubricCriterion,
)
from deskbench.tracks.deliverables.scoring.rubric import RubricGrade, Source, unnegated
from deskbench.tracks.deliverables.scoring.verifier_base import Status, VerifierResult

__all__ = [
    "FinalGrade",
    "QCAction",
    "QCActionKind",
    "RowStatus",
    "Score0Mismatch",
    "VerifierOverride",
    "STAR_TARGETS",
    "apply_qc",
    "placeholder_outputs",
    "qc_problem",
    "score0_mismatches",
    "self_review",
]

QCActionKind = Literal["confirm", "edit", "reject", "rate"]
RowStatus = Literal["unreviewed", "pending", "reviewed", "returned"]
ACTION_ALIASES = {"confirm": "confirm", "ok": "confirm", "edit": "edit", "reject": "reject", "return": "reject",
                  "rate": "rate", "star": "rate", "stars": "rate"}
MAX_VERIFIER_EDITS = 3  # C.1: more than three verifier edits on a row -> Reject/Return
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


def qc_problem(target: str, action: str, score: int | None, justification: str,
               reason: str) -> tuple[str, str, str] | None:
    """The first problem of an action as (column, problem, fix), or None when it is valid."""
    kind = target_kind(target)
    if kind is None:
        return ("target", f"'{target}' is not a target",
                "use DI, AR, RF, EP, FD, verifier:<id>, row, or stars:verifiers / stars:DI .. stars:FD")
    if action not in ("confirm", "edit", "reject", "rate"):
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


class VerifierOverride(BaseModel):
    """A QC edit of a verifier: the final pass/fail replaces the automatic one."""

    id: str
    automatic: Status | None  # None when the automatic result was not available
    final: Literal["pass", "fail"]
    reason: str
    reviewer: str


class Score0Mismatch(BaseModel):
    code: str
    score1_wording: list[str]  # the score-1 phrases found in the justification
    anchor: str  # the criterion's score-1 anchor


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
    declared_best: bool = False  # the grader's declared best response of its task (§4.4)
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

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.system, self.attempt)


# -- score-0 mismatches (C.5) ------------------------------------------------------------------

_SCORE1: dict[str, list[str]] = {
    "DI": [r"multiple (?:factual |data )?(?:errors|inaccuracies|mistakes)", r"several (?:factual )?errors",
           r"a few (?:factual )?errors", r"vague (?:citations?|sourcing|references)",
           r"(?:one|two|1|2|1-2|a couple of) unauthori[sz]ed sources?", r"unauthori[sz]ed sources?"],
    "AR": [r"gaps? in (?:the )?(?:logic|reasoning)", r"logical gaps?", r"no evidence[- ]backed",
           r"not evidence[- ]backed", r"miss(?:es|ed|ing)? (?:the |some |key )?interdependenc\w*",
           r"miss(?:es|ed|ing)? (?:some |a |the )?key variables?"],
    "RF": [r"scope creep", r"\b(?:50|55|60|50-60|50 to 60)\s?% relevant", r"partly relevant",
           r"some (?:tangential|off[- ]topic|out[- ]of[- ]scope) (?:content|material|sections?)"],
    "EP": [r"off by (?:about |roughly |around |~)?\d+(?:\.\d+)?\s?%", r"correct (?:approach|method)",
           r"partial unit normali[sz]ation", r"gaps? in (?:the )?methodology"],
    "FD": [r"partial(?:ly)? (?:format )?complian\w*", r"partial format", r"lack(?:s|ing)? (?:of )?specificity",
           r"not specific enough", r"recommendations? (?:are|is) (?:vague|generic)"],
}
"""Score-1 wording per criterion (Table 19's score-1 cells and their usual paraphrases)."""

_SCORE0_COMMON = [r"fabricat\w*", r"invent(?:ed|s|ing)\b", r"hallucinat\w*", r"unusable", r"ignor(?:es|ed|ing)\b",
                  r"illogical", r"self[- ]contradict\w*", r"dominated by noise", r"fundamental\w*",
                  r"forbidden", r"black[- ]box", r"wrong units?", r"no inference", r"fails? to identify",
                  r"no adherence", r"truncated", r"malformed", r"nonsens\w*"]
"""Score-0 wording (Table 19's score-0 cells): any of it keeps a 0 from being called a mismatch."""


def _rx(phrases: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in phrases), re.I)


_SCORE1_RX = {code: _rx(p) for code, p in _SCORE1.items()}
_SCORE0_RX = _rx(_SCORE0_COMMON)


def _anchor_clauses(anchor: str) -> list[str]:
    """Short clauses of an anchor ("Multiple factual errors; vague citations") as phrases."""
    out = []
    for clause in re.split(r"[;.]", anchor):
        words = clause.strip().split()
        if 2 <= len(words) <= 5:
            out.append(re.escape(" ".join(words)).replace(r"\ ", r"\s+"))
    return out


def _cells(grade: RubricGrade | FinalGrade) -> dict[str, tuple[int, str]]:
    if isinstance(grade, RubricGrade):
        return {c: (grade.criteria[c].score, grade.criteria[c].justification) for c in RUBRIC_CODES}
    return {c: (grade.scores[c], grade.justifications[c]) for c in RUBRIC_CODES}


def score0_mismatches(grade: RubricGrade | FinalGrade,
                      rubric: Sequence[RubricCriterion] | None = None) -> list[Score0Mismatch]:
    """FLAG (F1): each 0 whose justification describes Score-1 behaviour.

    Score-1 wording is the criterion's list above plus the short clauses of the task rubric's
    score-1 anchor; score-0 wording is the common list plus the short clauses of the score-0
    anchor. A 0 is a mismatch when its justification has (un-negated) score-1 wording and no
    (un-negated) score-0 wording. Deterministic; it advises, the QC reviewer decides."""
    anchors = {c.code: c.anchors for c in rubric} if rubric else {}
    out = []
    for code, (score, text) in _cells(grade).items():
        if score != 0:
            continue
        cells = anchors.get(code) or dict(enumerate(TABLE_19[code][1]))  # type: ignore[index]
        one = _rx(_SCORE1[code] + _anchor_clauses(cells[1]))
        zero = _rx(_SCORE0_COMMON + _anchor_clauses(cells[0]))
        found = unnegated(one, text)
        if found and not unnegated(zero, text):
            out.append(Score0Mismatch(code=code, score1_wording=sorted({f.lower() for f in found}),
                                      anchor=cells[1]))
    return out


# -- placeholders (C.1) --------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"^\W*(?:todo|tbd|tbc|placeholder|lorem ipsum.*|to be (?:completed|added|written)"
                          r"|coming soon|\[?insert [^\]]*\]?|n/?a|xxx+)\W*$", re.I)


def placeholder_outputs(task: DeliverableTask, submission: DeliverableSubmission, run_dir: Path) -> list[str]:
    """The required output files that were produced but are placeholders: empty, not openable,
    no text, or text that is only a placeholder word (TODO, TBD, lorem ipsum, [insert ...])."""
    from deskbench.tracks.deliverables.scoring.office import UnreadableFile, read_output

    base = run_dir / submission.files_dir
    produced = {f.name for f in submission.files}
    out = []
    for req in task.required_outputs:
        path = base / req.name
        if req.name not in produced or not path.is_file():
            continue  # missing, not a placeholder: apply_qc names it as missing
        try:
            text = read_output(path).text.strip()
        except UnreadableFile:
            out.append(req.name)
            continue
        if not text or _PLACEHOLDER.match(text) or all(_PLACEHOLDER.match(line) for line in text.splitlines()):
            out.append(req.name)
    return out


# -- apply_qc -----------------------------------------------------------------------------

_FABRICATED_CITATION = re.compile(r"fabricat\w*\W+(?:\w+\W+){0,2}(?:citations?|sources?|quot\w*|references?|urls?)",
                                  re.I)


def _names(files: Sequence[str | OutputFileRecord] | None) -> list[str] | None:
    if files is None:
        return None
    return [f.name if isinstance(f, OutputFileRecord) else f for f in files]


def apply_qc(
    grade: RubricGrade,
    actions: Sequence[QCAction],
    verifier_results: Sequence[VerifierResult] | None = None,
    *,
    rubric: Sequence[RubricCriterion] | None = None,
    verifier_ids: Sequence[str] | None = None,
    required_outputs: Sequence[str] | None = None,
    produced_files: Sequence[str | OutputFileRecord] | None = None,
    placeholder_files: Sequence[str] = (),
) -> FinalGrade:
    """The row after QC (rules R1-R3 and flags F1-F3 of the module docstring).

    `actions` are this row's, oldest first (other episodes' are ignored); those that reviewed
    another grade (QCAction.reviews) are stale: not applied, listed in `stale_qc` and flagged.
    `verifier_results` are the automatic verifier results; `verifier_ids` the task's verifier
    ids (for the missing-score trigger); `required_outputs` / `produced_files` /
    `placeholder_files` the C.1 output-file trigger (give produced_files to check it)."""
    row_actions = [a for a in actions if a.key == grade.key]
    mine = [a for a in row_actions if a.reviews(grade)]
    stale = [a for a in row_actions if not a.reviews(grade)]
    latest: dict[str, QCAction] = {}
    stars: dict[str, int] = {}
    for a in mine:
        if a.action == "rate":  # C.6: never a score; the latest rating per target
            assert a.score is not None
            stars[a.target.removeprefix("stars:")] = a.score
        else:
            latest[a.target] = a  # R1: the latest action per target wins
    scores = dict(grade.scores)
    justifications = {c: grade.criteria[c].justification for c in RUBRIC_CODES}
    edits = [a for a in latest.values() if a.action == "edit"]
    flags: list[str] = []
    if stale:
        reviewed = sorted({a.reviewed() for a in stale})
        flags.append(f"{len(stale)} stale QC action(s) not applied: they reviewed {', '.join(reviewed)}, "
                     f"not this grade ({grade.grader}'s of {grade.created_at}); QC this grade again")

    for a in edits:
        if a.target in RUBRIC_CODES:
            assert a.score is not None
            scores[a.target], justifications[a.target] = a.score, a.justification

    # verifiers
    results = list(verifier_results) if verifier_results is not None else None
    by_id = {r.id: i for i, r in enumerate(results)} if results is not None else {}
    overrides = []
    for a in edits:
        if not a.target.startswith("verifier:"):
            continue
        vid = a.target.removeprefix("verifier:")
        final: Literal["pass", "fail"] = "pass" if a.score == 1 else "fail"
        unknown = (vid not in by_id) if results is not None else False
        if unknown and not (verifier_ids is not None and vid in verifier_ids):
            flags.append(f"QC edit of unknown verifier '{vid}' ignored")
            continue
        automatic = results[by_id[vid]].status if results is not None and vid in by_id else None
        overrides.append(VerifierOverride(id=vid, automatic=automatic, final=final, reason=a.reason,
                                          reviewer=a.reviewer))
        if results is not None and vid in by_id:
            old = results[by_id[vid]]
            results[by_id[vid]] = old.model_copy(update={
                "status": final, "evidence": f"QC edit by {a.reviewer}: {a.reason} (automatic: {old.status})"})
    v = None
    if results is not None:
        v = 100.0 * sum(r.status == "pass" for r in results) / len(results) if results else 0.0

    # status (R2, R3)
    row = latest.get("row")
    returned = row if row is not None and row.action == "reject" else None
    zeros = [c for c in RUBRIC_CODES if scores[c] == 0 or grade.scores[c] == 0]
    uncovered = [c for c in zeros if c not in latest]
    status: RowStatus
    if returned is not None:
        status = "returned"
    elif not mine:
        status = "unreviewed"
    elif uncovered:
        status = "pending"
        flags.append(f"pending: score-0 cells without an explicit QC confirm or edit: {', '.join(uncovered)}")
    else:
        status = "reviewed"
    final_zeros = [c for c in RUBRIC_CODES if scores[c] == 0]
    if final_zeros:
        flags.append(f"auto-reject under ACCEPT: score 0 on {', '.join(final_zeros)}")

    # F1: mismatches on the final cells
    mean = sum(scores.values()) / len(RUBRIC_CODES)
    out = FinalGrade(
        task_id=grade.task_id, system=grade.system, attempt=grade.attempt, grader=grade.grader,
        source=grade.source, episode_stamp=grade.episode_stamp, graded_at=grade.created_at,
        scores=scores, justifications=justifications, primary_scores=dict(grade.scores), comment=grade.comment,
        declared_best=grade.declared_best, stars={t: stars[t] for t in STAR_TARGETS if t in stars}, status=status, edits=edits, returned=returned, qc_actions=len(mine), stale_qc=stale, verifiers=results,
        verifier_overrides=overrides, v=v, mean=mean, zeros=final_zeros,
    )
    mismatches = score0_mismatches(out, rubric)
    for m in mismatches:
        flags.append(f"score-0 mismatch on {m.code}: the justification describes score 1 "
                     f"({'; '.join(m.score1_wording)}); the canonical QC action is Edit to 1")

    # F2: C.1 reject triggers; those about the grade return a QC'd row (R2), the rest advise
    returns: list[str] = []  # about the grade
    advice: list[str] = []  # about the episode
    verifier_edits = [a for a in edits if a.target.startswith("verifier:")]
    if len(verifier_edits) > MAX_VERIFIER_EDITS:
        returns.append(f"{len(verifier_edits)} verifier edits (more than {MAX_VERIFIER_EDITS})")
    if verifier_ids is not None:
        have = set(by_id) if results is not None else set()
        missing = [i for i in verifier_ids if i not in have and i not in {o.id for o in overrides}]
        if missing:
            returns.append(f"missing verifier scores: {', '.join(missing)}")
    names = _names(produced_files)
    if names is not None and required_outputs:
        absent = [n for n in required_outputs if n not in names]
        if absent:
            advice.append(f"required output file missing: {', '.join(absent)}")
    placeholders = [n for n in placeholder_files if not required_outputs or n in required_outputs]
    if placeholders:
        advice.append(f"required output file is a placeholder: {', '.join(placeholders)}")
    if len(mismatches) >= 2:
        returns.append(f"score-justification mismatches on {', '.join(m.code for m in mismatches)}")
    qc_texts = [a.reason for a in mine] + [a.justification for a in edits]
    own_texts = [grade.criteria[c].justification for c in RUBRIC_CODES] + [grade.comment]
    if any(unnegated(_FABRICATED_CITATION, t) for t in qc_texts):
        returns.append("a fabricated citation is reported by QC (C.3: surfaced to the grader, not corrected)")
    elif any(unnegated(_FABRICATED_CITATION, t) for t in own_texts):
        advice.append("a fabricated citation is reported")
    reasons: list[str] = [f"QC: {returned.reason}"] if returned is not None else []
    if mine and returns:  # R2: QC acted and the grade trips C.1: back to its grader
        status = "returned"
        reasons += [f"C.1: {r}" for r in returns]
        flags.extend(f"returned to the grader (C.1): {r}" for r in returns)
    else:
        flags.extend(f"should be returned (C.1): {r}" for r in returns)
    flags.extend(f"should be returned (C.1): {r}" for r in advice)

    # F3: C.4 check B, Execution Precision against the numeric verifiers
    numeric = [r for r in results or [] if r.kind == "numeric"]
    if numeric:
        rate = sum(r.status == "pass" for r in numeric) / len(numeric)
        if rate >= 0.8 and scores["EP"] <= 1:
            flags.append(f"check B: EP {scores['EP']} with {rate:.0%} of numeric verifiers passing")
        elif rate < 0.5 and scores["EP"] == 3:
            flags.append(f"check B: EP 3 with only {rate:.0%} of numeric verifiers passing")

    accept: bool | None
    if status == "returned":
        accept = None  # R2: a returned row is re-annotated before anything is decided
    elif final_zeros:
        accept = False  # R3: any 0 rejects, whatever V is
    elif v is None:
        accept = None
    else:
        accept = mean >= 2.5 and v >= 80.0
    return out.model_copy(update={"flags": flags, "accept": accept, "status": status, "return_reasons": reasons})
