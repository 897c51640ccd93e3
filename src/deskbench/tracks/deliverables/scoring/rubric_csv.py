"""Human rubric grades and QC actions as CSV, for SMEs working in a spreadsheet.

Grades CSV: task_id, system, attempt, response, grader, DI, DI_justification, AR,
AR_justification, RF, RF_justification, EP, EP_justification, FD, FD_justification, comment,
best. `export_template` writes one row per ok episode with the scores empty and `response` its
number ("Response 2": the run's systems in name order), the number a comment's "Response N" /
"RN" refers to (the SME's best pick, §4.4, scoring/rubric_best.py); an import refuses a row whose
number is no longer its system's (a system was added since the export). `best` is "yes" when the
grader declares this the best response to its task (it comes before the comments); empty or
"no" otherwise. Both columns are optional (a file made before them still imports).

QC CSV: task_id, system, attempt, target, action, score, justification, reason, reviewer
(target DI..FD, verifier:<id> or row; action confirm, edit or reject; "ok" and "return" are
read as confirm and reject). C.6 star ratings are rows with target stars:verifiers or
stars:DI .. stars:FD, action rate and score 1-5. The optional columns check and finding come
from the QC worksheet (`qc_worksheet`, `deskbench rubric qc-sheet`: one line per finding of the
Appendix C checks, a proposed action filled in where a check proposes one); they are not
recorded, and a worksheet line whose action is left empty is skipped. Each action reviews the episode's primary grade
at import time (it is bound to it, see rubric_qc): a later regrade makes it stale. A reviewer
who is the grade's grader is refused (`rubric_qc_actions.self_review`, the web app's rule).

An import reads the whole file first: any bad row raises a UserError of one line naming the
file, the line, the column, the problem and the fix, and nothing is written. Rows naming an
episode the run does not hold are errors.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import ValidationError

from deskbench.errors import UserError
from deskbench.runs.store import Episode
from deskbench.tracks.deliverables.grades import GradeStore, Key
from deskbench.tracks.deliverables.scoring.rubric import CriterionGrade, RubricGrade
from deskbench.tracks.deliverables.scoring.rubric_best import number_of, numbering
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import (
    ACTION_ALIASES,
    STAR_TARGETS,
    QCAction,
    qc_problem,
    self_review,
    target_kind,
)
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, DeliverableSubmission, DeliverableTask

__all__ = ["GRADE_COLUMNS", "QC_COLUMNS", "export_template", "import_grades", "import_qc", "qc_worksheet",
           "read_grades_csv", "read_qc_csv"]

GRADE_COLUMNS = ["task_id", "system", "attempt", "response", "grader",
                 *[c for code in RUBRIC_CODES for c in (code, f"{code}_justification")], "comment", "best"]
QC_COLUMNS = ["task_id", "system", "attempt", "target", "action", "score", "justification", "reason", "reviewer",
              "check", "finding"]
OPTIONAL_COLUMNS = {"best", "response", "check", "finding"}  # a file made before a column existed still imports


class _Bad(Exception):
    def __init__(self, column: str, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.column, self.problem, self.fix = column, problem, fix


def _error(path: Path, line: int, column: str, problem: str, fix: str) -> UserError:
    return UserError(f"{path}: line {line}, column {column}: {problem}; {fix}")


def _rows(path: Path, columns: list[str], kind: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(first line, row) for each non-blank row, after checking the header."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file; give the path of a {kind} CSV") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8; save the {kind} CSV as UTF-8 (CSV UTF-8 in Excel)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror}); give a readable {kind} CSV") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise UserError(f"{path}: line 1: no header row; start the file with: {','.join(columns)}")
        header = [h.strip() for h in header]
        for h in header:
            if h not in columns:
                raise _error(path, 1, h or "(empty)", "unknown column",
                             f"use the columns {','.join(columns)} (see 'deskbench rubric export')")
            if header.count(h) > 1:
                raise _error(path, 1, h, "the column appears twice", "keep one")
        for c in columns:
            if c not in header and c not in OPTIONAL_COLUMNS:
                raise _error(path, 1, c, "missing column", f"add it to the header ({','.join(columns)})")
        last = reader.line_num
        for raw in reader:
            start, last = last + 1, reader.line_num
            if not any(cell.strip() for cell in raw):
                continue
            if len(raw) > len(header):
                raise _error(path, start, str(len(header) + 1), f"the row has {len(raw)} cells, the header "
                             f"{len(header)}", "quote cells holding commas, or remove the extra cells")
            row = dict.fromkeys(columns, "") | {h: (raw[i] if i < len(raw) else "") for i, h in enumerate(header)}
            if "check" in columns and row["check"].strip() and not row["action"].strip():
                continue  # a QC worksheet line (qc_worksheet) the reviewer did not act on
            yield start, row
    except csv.Error as exc:
        raise _error(path, reader.line_num, "-", f"malformed CSV ({exc})", "fix the quoting") from None


def _attempt(value: str) -> int:
    value = value.strip()
    if not value:
        return 0
    if not value.isdigit():
        raise _Bad("attempt", f"'{value}' is not an attempt number", "give 0, 1, 2, ... (empty means 0)")
    return int(value)


def _episode(row: dict[str, str], episodes: Mapping[Key, Episode]) -> tuple[Key, Episode]:
    for col in ("task_id", "system"):
        if not row[col].strip():
            raise _Bad(col, "empty", f"give the episode's {col} (see 'deskbench rubric export')")
    key = (row["task_id"].strip(), row["system"].strip(), _attempt(row["attempt"]))
    ep = episodes.get(key)
    if ep is None:
        known_task = any(k[0] == key[0] for k in episodes)
        column = "system" if known_task else "task_id"
        raise _Bad(column, f"no episode task_id={key[0]} system={key[1]} attempt={key[2]} in the run",
                   "copy task_id, system and attempt from 'deskbench rubric export'")
    if ep.status != "ok" or not isinstance(ep.submission, DeliverableSubmission):
        raise _Bad("task_id", f"episode {key[0]}/{key[1]}/{key[2]} ended with status {ep.status}",
                   "only ok deliverables episodes are graded; remove the row")
    return key, ep


def _score(row: dict[str, str], column: str, allowed: tuple[int, ...], empty_ok: bool) -> int | None:
    value = row[column].strip()
    if not value:
        if empty_ok:
            return None
        raise _Bad(column, "missing score", f"give {', '.join(map(str, allowed))}")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number.is_integer() or int(number) not in allowed:
        raise _Bad(column, f"'{value}' is not a valid score", f"give {', '.join(map(str, allowed))}")
    return int(number)


_YES, _NO = {"yes", "y", "true", "1", "x", "best"}, {"", "no", "n", "false", "0"}


def _best(value: str) -> bool:
    v = value.strip().lower()
    if v in _YES:
        return True
    if v in _NO:
        return False
    raise _Bad("best", f"'{value.strip()}' is not yes or no",
               "write yes on the best response of the task, leave it empty otherwise")


def _response(value: str, system: str, responses: list[str]) -> None:
    """The row's `response` ("Response N", or N) must be its system's number in the run now: a
    comment's "Response N" is read under that numbering (rubric_best.py)."""
    value = value.strip()
    if not value:
        return
    digits = value.lower().removeprefix("response").strip(" -#:")
    n = number_of(system, responses)
    if not digits.isdigit():
        raise _Bad("response", f"'{value}' is not a response number", "keep what the export wrote (Response N)")
    if int(digits) != n:
        raise _Bad("response", f"says Response {digits}, but {system} is Response {n} of this run "
                   f"({', '.join(f'{i}: {s}' for i, s in enumerate(responses, 1))}); a system was added since the "
                   "export", "export the template again and renumber any \"Response N\" in the comments")


def read_grades_csv(path: Path, episodes: Mapping[Key, Episode],
                    systems: list[str] | None = None) -> list[RubricGrade]:
    """Every row as a human RubricGrade stamped with its episode; UserError on the first bad row.
    `systems`: the run's systems (the response numbering; default: the episodes' systems)."""
    responses = numbering(systems if systems is not None else (k[1] for k in episodes))
    grades: list[RubricGrade] = []
    seen: dict[tuple[str, str, int, str], int] = {}
    for line, row in _rows(path, GRADE_COLUMNS, "grades"):
        try:
            key, ep = _episode(row, episodes)
            _response(row["response"], key[1], responses)
            grader = row["grader"].strip()
            if not grader:
                raise _Bad("grader", "empty", "give the SME's name or id")
            if (key + (grader,)) in seen:
                raise _Bad("grader", f"repeats the row of line {seen[key + (grader,)]} (same episode and grader)",
                           "keep one row per episode and grader")
            seen[key + (grader,)] = line
            criteria = {}
            for code in RUBRIC_CODES:
                score = _score(row, code, (0, 1, 2, 3), empty_ok=False)
                assert score is not None  # empty_ok=False: an empty cell raised
                text = row[f"{code}_justification"].strip()
                if not text:
                    raise _Bad(f"{code}_justification", "empty justification",
                               f"justify the {code} score (a 0 above all)")
                criteria[code] = CriterionGrade(code=code, score=score, justification=text)
            grades.append(RubricGrade(task_id=key[0], system=key[1], attempt=key[2], grader=grader,
                                      source="human", criteria=criteria, comment=row["comment"].strip(),
                                      declared_best=_best(row["best"]), responses=responses,
                                      episode_stamp=ep.finished_at))
        except _Bad as bad:
            raise _error(path, line, bad.column, bad.problem, bad.fix) from None
    return grades


def read_qc_csv(path: Path, episodes: Mapping[Key, Episode], tasks: Mapping[str, DeliverableTask],
                graded: Mapping[Key, RubricGrade]) -> list[QCAction]:
    """Every row as a QCAction bound to its episode's grade in `graded` (the primary current
    grade per episode: QC reviews a grade, so a row for an ungraded episode is an error)."""
    actions: list[QCAction] = []
    for line, row in _rows(path, QC_COLUMNS, "QC"):
        try:
            key, _ = _episode(row, episodes)
            if key not in graded:
                raise _Bad("task_id", f"episode {key[0]}/{key[1]}/{key[2]} has no current grade to review",
                           "import or grade it first ('deskbench rubric import' or 'grade')")
            target = row["target"].strip()
            if target.upper() in RUBRIC_CODES:
                target = target.upper()
            elif target.lower() == "row":
                target = "row"
            elif target.lower().startswith("stars:"):
                name = target[len("stars:"):].strip()
                target = "stars:" + next((t for t in STAR_TARGETS if t.lower() == name.lower()), name)
            kind = target_kind(target)
            if kind == "verifier":
                vid = target.removeprefix("verifier:").strip()
                task = tasks.get(key[0])
                ids = [v.id for v in task.verifiers] if task else []
                if vid not in ids:
                    raise _Bad("target", f"task {key[0]} has no verifier '{vid}'",
                               f"use one of: {', '.join('verifier:' + i for i in ids)}")
            raw_action = row["action"].strip().lower()
            if raw_action not in ACTION_ALIASES:
                raise _Bad("action", f"'{row['action'].strip()}' is not an action" if raw_action else "empty",
                           "use confirm, edit, reject or rate (ok and return are accepted)")
            action = ACTION_ALIASES[raw_action]
            allowed = (0, 1) if kind == "verifier" else (1, 2, 3, 4, 5) if kind == "stars" else (0, 1, 2, 3)
            score = _score(row, "score", allowed, empty_ok=True)
            reviewer = row["reviewer"].strip()
            problem = qc_problem(target, action, score, row["justification"].strip(), row["reason"].strip())
            if problem:
                raise _Bad(*problem)
            if not reviewer:
                raise _Bad("reviewer", "empty", "give the QC reviewer's name or id")
            reviewed = graded[key]
            own = self_review(reviewer, reviewed.grader)
            if own:
                raise _Bad("reviewer", own, "have a second person review it, under their own name")
            try:
                actions.append(QCAction(task_id=key[0], system=key[1], attempt=key[2], target=target,
                                        action=action, score=score,
                                        justification=row["justification"].strip(), reason=row["reason"].strip(),
                                        reviewer=reviewer, grader=reviewed.grader, graded_at=reviewed.created_at))
            except ValidationError as exc:  # qc_problem above catches what the model checks
                raise _Bad("-", str(exc.errors()[0]["msg"]), "fix the row") from None
        except _Bad as bad:
            raise _error(path, line, bad.column, bad.problem, bad.fix) from None
    return actions


def import_grades(store: GradeStore, path: Path) -> list[RubricGrade]:
    """Read the whole file, then save every grade in one transaction."""
    grades = read_grades_csv(path, store.episodes(), store.runs.systems())
    store.save_grades(grades)
    return grades


def import_qc(store: GradeStore, path: Path) -> list[QCAction]:
    """Read the whole file, then append every action in one transaction, in file order, each
    bound to its episode's primary grade now (a grade that changes meanwhile: StaleQC, a
    UserError, and nothing is written)."""
    primary, _ = store.primary()
    actions = read_qc_csv(path, store.episodes(), store.tasks(), primary)
    ids = store.add_qc(actions)
    return [a.model_copy(update={"id": i}) for a, i in zip(actions, ids, strict=True)]


def export_template(store: GradeStore, path: Path, *, system: str | None = None) -> int:
    """A grading template: one row per ok episode (scores empty); the number of rows."""
    order = {t: i for i, t in enumerate(store.tasks())}
    eps = [e for e in store.episodes(system).values()
           if e.status == "ok" and isinstance(e.submission, DeliverableSubmission)]
    eps.sort(key=lambda e: (e.system, order.get(e.task_id, len(order)), e.task_id, e.attempt))
    if not path.parent.is_dir():
        raise UserError(f"{path}: the folder {path.parent} does not exist; create it or give another -o")
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(GRADE_COLUMNS)
        responses = numbering(store.runs.systems())
        for e in eps:
            w.writerow([e.task_id, e.system, e.attempt, f"Response {number_of(e.system, responses)}"]
                       + [""] * (len(GRADE_COLUMNS) - 4))  # best: empty
    return len(eps)


def qc_worksheet(store: GradeStore, path: Path, *, system: str | None = None) -> int:
    """The QC worksheet: one QC CSV line per finding of the Appendix C checks on each episode's
    final grade (rubric_qc_checks.py), in the columns `import_qc` reads; the number of lines.

    `check` and `finding` say what was found; a proposed action's score and reason are filled in,
    its action left empty: the reviewer writes the action (edit, confirm, reject) on the lines
    they act on (and the replacement justification of a criterion edit), and the import skips the
    lines left empty. C.2's lines are the verifiers to re-derive: confirm or edit each."""
    if not path.parent.is_dir():
        raise UserError(f"{path}: the folder {path.parent} does not exist; create it or give another --output")
    finals = store.final_grades(system)
    n = 0
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(QC_COLUMNS)
        for key, final in finals.items():
            for c in final.checks:
                w.writerow([key[0], key[1], key[2], c.target, "", "" if c.score is None else c.score, "",
                            c.reason, "", c.check, f"{c.finding} [{c.outcome}]" + (
                                f" (proposed: {c.action})" if c.action else "")])
                n += 1
    return n
