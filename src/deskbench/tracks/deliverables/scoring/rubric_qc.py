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

The action and its validation are in rubric_qc_actions.py, the row after QC in
rubric_qc_final.py, the F1 check in rubric_score0.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tracks.deliverables.scoring.rubric import RubricGrade, unnegated
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import STAR_TARGETS, QCAction
from deskbench.tracks.deliverables.scoring.rubric_qc_checks import (
    check_a,
    check_b,
    check_c,
    citation_findings,
    outcome,
    priority_findings,
)
from deskbench.tracks.deliverables.scoring.rubric_qc_citations import CitationCheck
from deskbench.tracks.deliverables.scoring.rubric_qc_final import (
    FinalGrade,
    RowStatus,
    VerifierOverride,
)
from deskbench.tracks.deliverables.scoring.rubric_score0 import score0_mismatches
from deskbench.tracks.deliverables.scoring.verifier_base import VerifierResult
from deskbench.tracks.deliverables.tasks import (
    RUBRIC_CODES,
    DeliverableSubmission,
    DeliverableTask,
    RubricCriterion,
)

__all__ = [
    "apply_qc",
    "placeholder_outputs",
]

MAX_VERIFIER_EDITS = 3  # C.1: more than three verifier edits on a row -> Reject/Return


# -- placeholders (C.1) --------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"^\W*(?:todo|tbd|tbc|placeholder|lorem ipsum.*|to be (?:completed|added|written)"
                          r"|coming soon|\[?insert [^\]]*\]?|n/?a|xxx+)\W*$", re.I)


def placeholder_outputs(task: DeliverableTask, submission: DeliverableSubmission, outputs: Path | None) -> list[str]:
    """The required output files that were produced but are placeholders: empty, not openable,
    no text, or text that is only a placeholder word (TODO, TBD, lorem ipsum, [insert ...]).
    `outputs`: the episode's files folder as runs/outputs.py confines it."""
    from deskbench.runs.outputs import output_file
    from deskbench.tracks.deliverables.scoring.office import UnreadableFile, read_output

    produced = {f.name for f in submission.files}
    out = []
    for req in task.required_outputs:
        path = output_file(outputs, req.name)
        if req.name not in produced or path is None:
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
    task: DeliverableTask | None = None,
    citations: Sequence[CitationCheck] | None = None,
    file_decisions: Mapping[str, Sequence[VerifierResult]] | None = None,
) -> FinalGrade:
    """The row after QC (rules R1-R3 and flags F1-F3 of the module docstring).

    `actions` are this row's, oldest first (other episodes' are ignored); those that reviewed
    another grade (QCAction.reviews) are stale: not applied, listed in `stale_qc` and flagged.
    `verifier_results` are the automatic verifier results; `verifier_ids` the task's verifier
    ids (for the missing-score trigger); `required_outputs` / `produced_files` /
    `placeholder_files` the C.1 output-file trigger (give produced_files to check it).
    `task` turns on the Appendix C checks (rubric_qc_checks.py): C.2's priority verifiers (with
    verifier results), C.3's findings from `citations` (rubric_qc_citations.validate_citations),
    check B on DI; `file_decisions` are the final-answer verifiers run on the output files."""
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
    justifications: dict[str, str] = {c: grade.criteria[c].justification for c in RUBRIC_CODES}
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

    # C.2: the verifiers QC re-derives (required: an explicit confirm or edit each)
    priority = priority_findings(task, verifier_results, grade.scores, file_decisions) if task is not None else []
    rederive = [f.target for f in priority
                if f.target not in latest or latest[f.target].action not in ("confirm", "edit")]

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
    elif uncovered or rederive:
        status = "pending"
        if uncovered:
            flags.append(f"pending: score-0 cells without an explicit QC confirm or edit: {', '.join(uncovered)}")
        if rederive:
            flags.append(f"pending: C.2 verifiers to re-derive without an explicit QC confirm or edit: "
                         f"{', '.join(t.removeprefix('verifier:') for t in rederive)}")
    else:
        status = "reviewed"
    final_zeros: list[str] = [c for c in RUBRIC_CODES if scores[c] == 0]
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
    mismatched = list(dict.fromkeys(f.target for f in check_a(scores, justifications, mismatches, rubric)))
    if len(mismatched) >= 2:  # C.1: multiple meta-criteria with score-justification mismatches (check A)
        returns.append(f"score-justification mismatches on {', '.join(mismatched)}")
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

    # F3: the Appendix C checks (C.2 above; C.3, C.4 A-C), each finding with what QC did about it
    # found on the grade as graded and the automatic verifier results (what QC was handed), so a
    # finding stays listed after QC acted on it, with what it did as its outcome
    primary_cells: dict[str, str] = {c: grade.criteria[c].justification for c in RUBRIC_CODES}
    found_a = check_a(grade.scores, primary_cells, score0_mismatches(grade, rubric), rubric)
    found_c3 = (citation_findings(task, citations, verifier_results)
                if task is not None and citations is not None else [])
    found_b = check_b(task, verifier_results, grade.scores, citations or ())
    found_c = check_c(grade.scores, grade.comment)
    before = {r.id: r.status for r in verifier_results or []}
    checks = [f.model_copy(update={"outcome": outcome(f, latest, grade.scores, before)})
              for f in [*priority, *found_c3, *found_a, *found_b, *found_c]]
    for f in checks:
        if f.check == "C.4A" and grade.scores.get(f.target) == 0:
            continue  # flagged above as a score-0 mismatch (F1) while it stands
        if f.check in ("C.3", "C.4A", "C.4B", "C.4C") and f.outcome == "open":
            proposed = f" (proposed: {f.action} {f.target}" + (f" to {f.score}" if f.score is not None else "") + ")" \
                if f.action else ""
            flags.append(f.finding if f.check in ("C.4B", "C.4C") else f"{f.check}: {f.finding}{proposed}")

    accept: bool | None
    if status == "returned":
        accept = None  # R2: a returned row is re-annotated before anything is decided
    elif final_zeros:
        accept = False  # R3: any 0 rejects, whatever V is
    elif v is None:
        accept = None
    else:
        accept = mean >= 2.5 and v >= 80.0
    return out.model_copy(update={"flags": flags, "accept": accept, "status": status, "return_reasons": reasons,
                                  "checks": checks})
