"""Rubric grades, grade failures and QC actions, kept in the run's own run.sqlite.

Three tables of their own (created when missing), beside the run store's:
- rubric_grades: one row per (task_id, system, attempt, grader); saving again replaces it (a
  regrade), and clears that grader's failure for the episode.
- rubric_failures: "could not grade", one row per (task_id, system, attempt, grader), apart
  from the grades: a failure is never a low score.
- rubric_qc: QC actions, append-only, numbered in the order they were recorded.

`final_grades` picks each episode's primary grade (the named grader; else the latest human
grade; else the latest LLM grade), drops grades whose episode_stamp no longer matches the
episode (stale: the episode was rerun or is gone; counted in `.stale`), and applies the QC
actions that reviewed that very grade; QC actions that reviewed another grade (a regrade by
the same grader replaced it, another grader's grade became primary, the episode was rerun) are
stale: not applied, flagged on the row and counted in `.stale_qc`. `final_grade` is the same
for one episode (the web QC screen: one episode's verifiers, not the system's).

`final_grades` also reads each task's SME-declared best response (the `best` column first,
else "Response N" in the comments: scoring/rubric_best.py) from the primary grades of every
system, whatever `system` filters.

Binding. A QC action names the grade it reviewed (QCAction.grader, .graded_at: the grade's
grader and created_at). `add_qc` binds an unbound action to the episode's primary grade at the
time it is recorded (the CLI / CSV import, a caller that names no grade), and refuses, in the
write transaction, an action whose grade is no longer the episode's primary (`StaleQC`: nothing
of the batch is written). The web QC form carries the grade it showed and is refused (409) when
that is no longer the primary grade.

Legacy rows (recorded before the binding, no grader / graded_at in their JSON) still load. The
rule: such an action reviewed the grade that was the episode's primary (latest human, else
latest LLM; the rule the QC screen and the CSV import used) among the episode's current grades
created at or before the action. A grade that was replaced since (a regrade) is gone from the
store and its replacement is newer than the action, so the action binds to an older grade of
another grader, or to none ("a grade no longer stored"): either way it is stale for the
current primary grade. Stored rows are not rewritten; the binding is inferred on every read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.sqlite import ThreadLocalDB
from deskbench.tracks.deliverables.scoring.rubric import GradeFailure, RubricGrade
from deskbench.tracks.deliverables.scoring.rubric_best import BestPick, CommentGrade, declared_best
from deskbench.tracks.deliverables.scoring.rubric_qc import apply_qc, placeholder_outputs
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import QCAction
from deskbench.tracks.deliverables.scoring.rubric_qc_checks import final_answer_in_files
from deskbench.tracks.deliverables.scoring.rubric_qc_citations import validate_citations
from deskbench.tracks.deliverables.scoring.rubric_qc_final import FinalGrade
from deskbench.tracks.deliverables.scoring.verifier_base import VerifierResult
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask

Key = tuple[str, str, int]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rubric_grades (
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    grader TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('llm', 'human')),
    episode_stamp TEXT NOT NULL,
    created_at TEXT NOT NULL,
    grade TEXT NOT NULL,
    PRIMARY KEY (task_id, system, attempt, grader)
);
CREATE TABLE IF NOT EXISTS rubric_failures (
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    grader TEXT NOT NULL,
    created_at TEXT NOT NULL,
    failure TEXT NOT NULL,
    PRIMARY KEY (task_id, system, attempt, grader)
);
CREATE TABLE IF NOT EXISTS rubric_qc (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    action TEXT NOT NULL
);
"""


class FinalGrades(dict[Key, FinalGrade]):
    """final_grades' answer: FinalGrade per (task_id, system, attempt), plus the stale grades
    it ignored (their episode was rerun or is gone) and the stale QC actions it did not apply
    (they reviewed a grade that is not the row's: replaced by a regrade, no longer primary, or
    of a rerun episode)."""

    def __init__(self, items: Iterable[tuple[Key, FinalGrade]] = (), *, stale: Sequence[RubricGrade] = (),
                 stale_qc: Sequence[QCAction] = (), best: Mapping[tuple[str, int], BestPick] | None = None) -> None:
        super().__init__(items)
        self.stale_grades = list(stale)
        self.stale_qc_actions = list(stale_qc)
        self.best = dict(best or {})  # (task, attempt) -> the SME's declared best, or why there is none

    @property
    def stale(self) -> int:
        return len(self.stale_grades)

    @property
    def stale_qc(self) -> int:
        return len(self.stale_qc_actions)


class StaleQC(UserError):
    """A QC action whose reviewed grade is no longer the episode's primary grade."""

    def __init__(self, action: QCAction, current: RubricGrade | None) -> None:
        now_ = f"the current grade is {current.grader}'s of {current.created_at}" if current else \
            "the episode has no current grade"
        super().__init__(f"QC of {action.task_id}/{action.system}/{action.attempt} reviewed {action.reviewed()}, "
                         f"but {now_}; nothing was recorded: review the current grade and record the QC again")
        self.action, self.current = action, current


def primary_of(grades: Iterable[RubricGrade]) -> RubricGrade | None:
    """The primary grade among one episode's grades given oldest first: the latest human grade,
    else the latest LLM grade."""
    chosen: RubricGrade | None = None
    for g in grades:  # oldest first: a later grade of the same rank replaces an earlier one
        if chosen is None or g.source == "human" or chosen.source == "llm":
            chosen = g
    return chosen


def bind_legacy(actions: Iterable[QCAction], current: Sequence[RubricGrade]) -> list[QCAction]:
    """Actions with each unbound (legacy) one bound to the grade that was primary when it was
    recorded: the primary of `current` (one or more episodes' current grades, oldest first)
    among those created at or before it. One with no such grade stays unbound (and reviews no
    current grade)."""
    by_key: dict[Key, list[RubricGrade]] = {}
    for g in current:
        by_key.setdefault(g.key, []).append(g)
    out = []
    for a in actions:
        if not a.bound:
            bound = primary_of(x for x in by_key.get(a.key, []) if x.created_at <= a.created_at)
            if bound is not None:
                a = a.bind(bound)
        out.append(a)
    return out


class GradeStore:
    def __init__(self, run_dir: Path) -> None:
        self.runs = RunStore(run_dir, create=False)
        self.dir = run_dir
        self._db = ThreadLocalDB(self.runs.path, timeout=60.0)
        self._db.conn().executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    # -- episodes and tasks ------------------------------------------------------------------

    def tasks(self) -> dict[str, DeliverableTask]:
        return {t.id: t for t in self.runs.tasks_of(DeliverableTask)}

    def episodes(self, system: str | None = None) -> dict[Key, Episode]:
        return {(e.task_id, e.system, e.attempt): e for e in self.runs.episodes(system)}

    # -- grades --------------------------------------------------------------------------------

    def save_grade(self, grade: RubricGrade) -> None:
        self.save_grades([grade])

    def save_grades(self, grades: Sequence[RubricGrade]) -> None:
        """All in one transaction; a grade replaces the same grader's grade of the episode."""
        with self._db.write() as con:
            for g in grades:
                con.execute(
                    "INSERT OR REPLACE INTO rubric_grades(task_id, system, attempt, grader, source, episode_stamp,"
                    " created_at, grade) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (g.task_id, g.system, g.attempt, g.grader, g.source, g.episode_stamp, g.created_at,
                     g.model_dump_json()))
                con.execute("DELETE FROM rubric_failures WHERE task_id = ? AND system = ? AND attempt = ?"
                            " AND grader = ?", (g.task_id, g.system, g.attempt, g.grader))

    def save_failure(self, failure: GradeFailure) -> None:
        """Record "could not grade"; an existing grade by the same grader is kept."""
        with self._db.write() as con:
            con.execute(
                "INSERT OR REPLACE INTO rubric_failures(task_id, system, attempt, grader, created_at, failure)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (failure.task_id, failure.system, failure.attempt, failure.grader, failure.created_at,
                 failure.model_dump_json()))

    def save(self, result: RubricGrade | GradeFailure) -> None:
        if isinstance(result, RubricGrade):
            self.save_grade(result)
        else:
            self.save_failure(result)

    def grades(self, system: str | None = None, grader: str | None = None, *, key: Key | None = None
               ) -> list[RubricGrade]:
        """Stored grades, oldest first; `key` keeps one episode's."""
        sql = "SELECT grade FROM rubric_grades WHERE 1=1"
        params: list[str | int] = []
        if system is not None:
            sql, params = sql + " AND system = ?", [*params, system]
        if grader is not None:
            sql, params = sql + " AND grader = ?", [*params, grader]
        if key is not None:
            sql, params = sql + " AND task_id = ? AND system = ? AND attempt = ?", [*params, *key]
        rows = self._conn().execute(sql + " ORDER BY created_at, rowid", params).fetchall()
        return [RubricGrade.model_validate_json(r[0]) for r in rows]

    def failures(self, system: str | None = None) -> list[GradeFailure]:
        sql = "SELECT failure FROM rubric_failures"
        params: tuple[str, ...] = ()
        if system is not None:
            sql, params = sql + " WHERE system = ?", (system,)
        return [GradeFailure.model_validate_json(r[0])
                for r in self._conn().execute(sql + " ORDER BY created_at", params)]

    def current_grades(self, system: str | None = None, grader: str | None = None, *, key: Key | None = None
                       ) -> tuple[list[RubricGrade], list[RubricGrade]]:
        """(current, stale), oldest first: a grade is stale when its episode is gone or was rerun.
        `key`: one episode's grades (its stamp read alone, no episode loaded)."""
        if key is not None:
            stamp = _ok_stamp(self._conn(), key)
            stamps = {key: stamp} if stamp is not None else {}
        else:
            stamps = {k: e.finished_at for k, e in self.episodes(system).items() if e.status == "ok"}
        current: list[RubricGrade] = []
        stale: list[RubricGrade] = []
        for g in self.grades(system, grader, key=key):
            (current if stamps.get(g.key) == g.episode_stamp else stale).append(g)
        return current, stale

    def graded(self, grader: str, system: str | None = None) -> set[Key]:
        """Episodes holding a current (not stale) grade by `grader`."""
        return {g.key for g in self.current_grades(system, grader)[0]}

    # -- QC --------------------------------------------------------------------------------------

    def add_qc(self, actions: Sequence[QCAction]) -> list[int]:
        """Append actions in one transaction, in order; their ids. An unbound action is bound to
        its episode's primary grade now; an action whose grade is not (or no longer) the
        episode's primary grade raises StaleQC, checked in the write transaction, and nothing of
        the batch is written."""
        bound = []
        for a in actions:
            if not a.bound:
                g = self.primary_grade(a.key)
                if g is None:
                    raise UserError(f"QC of {a.task_id}/{a.system}/{a.attempt}: the episode has no current grade "
                                    "to review; grade it first")
                a = a.bind(g)
            bound.append(a)
        ids = []
        with self._db.write() as con:
            primaries: dict[Key, RubricGrade | None] = {}
            for a in bound:
                if a.key not in primaries:
                    primaries[a.key] = _primary_in(con, a.key)
                current = primaries[a.key]
                if current is None or not a.reviews(current):
                    raise StaleQC(a, current)
                cur = con.execute(
                    "INSERT INTO rubric_qc(task_id, system, attempt, created_at, action) VALUES (?, ?, ?, ?, ?)",
                    (a.task_id, a.system, a.attempt, a.created_at, a.model_dump_json(exclude={"id"})))
                assert cur.lastrowid is not None
                ids.append(cur.lastrowid)
        return ids

    def qc_actions(self, system: str | None = None, *, key: Key | None = None) -> list[QCAction]:
        """The QC log as stored, oldest first (legacy rows unbound; see `resolved_qc`)."""
        sql = "SELECT id, action FROM rubric_qc WHERE 1=1"
        params: list[str | int] = []
        if system is not None:
            sql, params = sql + " AND system = ?", [*params, system]
        if key is not None:
            sql, params = sql + " AND task_id = ? AND system = ? AND attempt = ?", [*params, *key]
        return [QCAction.model_validate_json(a).model_copy(update={"id": i})
                for i, a in self._conn().execute(sql + " ORDER BY id", params)]

    def resolved_qc(self, system: str | None = None, *, key: Key | None = None,
                    current: Sequence[RubricGrade] | None = None) -> list[QCAction]:
        """The QC log, oldest first, legacy rows bound by `bind_legacy` (`current`: the current
        grades, of every grader, when the caller has them)."""
        if current is None:
            current = self.current_grades(system, key=key)[0]
        return bind_legacy(self.qc_actions(system, key=key), current)

    # -- final grades ----------------------------------------------------------------------------

    def primary(self, system: str | None = None, grader: str | None = None
                ) -> tuple[dict[Key, RubricGrade], list[RubricGrade]]:
        """The primary current grade per episode (named grader; else latest human; else latest
        llm), and the stale grades."""
        current, stale = self.current_grades(system, grader)
        return _primaries(current), stale

    def primary_grade(self, key: Key, grader: str | None = None) -> RubricGrade | None:
        """One episode's primary current grade (as `primary`), reading that episode only."""
        current, _ = self.current_grades(key[1], grader, key=key)
        return primary_of(current)

    def final_grades(self, system: str | None = None, grader: str | None = None, *,
                     verifiers: bool = True) -> FinalGrades:
        """FinalGrade per episode with a current grade, QC applied. `verifiers` runs the task's
        verifiers on each episode (no judge: llm_check is unobservable) so that QC verifier
        edits override them and V, ACCEPT and the C.1 triggers can be computed, and the C.3
        citations are validated (reading the episode's files); without it the checks that need
        neither still run (C.2's required verifiers: the status is the same either way)."""
        current, stale = self.current_grades(system)
        if grader is not None:
            stale = [g for g in stale if g.grader == grader]
        chosen = _primaries(g for g in current if grader is None or g.grader == grader)
        tasks = self.tasks() if chosen else {}
        episodes = self.episodes(system) if chosen else {}
        qc: dict[Key, list[QCAction]] = {}
        for a in self.resolved_qc(system, current=current):
            qc.setdefault(a.key, []).append(a)
        every = chosen if system is None else _primaries(
            g for g in self.current_grades()[0] if grader is None or g.grader == grader)
        picks = declared_best((_comment_grade(g) for g in every.values()), self.runs.systems()) if chosen else {}
        out, stale_qc = [], []
        for key, g in chosen.items():
            final = self._final(g, episodes[key], tasks.get(g.task_id), qc.get(key, []), verifiers=verifiers)
            stale_qc.extend(final.stale_qc)
            pick = picks.get((key[0], key[2]))
            final = final.model_copy(update={
                "declared_best": pick is not None and pick.system == key[1],
                "best_source": pick.source if pick is not None else None,
                "best_evidence": pick.evidence if pick is not None else ""})
            out.append((key, final))
        # the QC of episodes without a final row here: stale when it reviewed no current grade
        current_ids = {(g.key, g.grader, g.created_at) for g in current}
        for key, actions in qc.items():
            if key not in chosen:
                stale_qc.extend(a for a in actions if (a.key, a.grader, a.graded_at) not in current_ids)
        return FinalGrades(sorted(out, key=lambda kv: kv[0]), stale=stale,
                           stale_qc=sorted(stale_qc, key=lambda a: a.id or 0), best=picks)

    def final_grade(self, key: Key, grader: str | None = None, *, verifiers: bool = True,
                    episode: Episode | None = None,
                    verifier_results: Sequence[VerifierResult] | None = None) -> FinalGrade | None:
        """One episode's FinalGrade, as `final_grades` gives it, reading and verifying that
        episode only; None when it has no current grade (by `grader`). `episode` and
        `verifier_results` (its automatic verifier results) spare reading and running them."""
        current, _ = self.current_grades(key[1], key=key)
        g = primary_of(x for x in current if grader is None or x.grader == grader)
        if g is None:
            return None
        if episode is None or (episode.task_id, episode.system, episode.attempt) != key:
            episode = next(e for e in self.runs.episodes(key[1]) if (e.task_id, e.system, e.attempt) == key)
        actions = self.resolved_qc(key[1], key=key, current=current)
        return self._final(g, episode, self.tasks().get(key[0]), actions, verifiers=verifiers,
                           verifier_results=verifier_results)

    def _final(self, g: RubricGrade, ep: Episode, task: DeliverableTask | None, actions: Sequence[QCAction], *,
               verifiers: bool, verifier_results: Sequence[VerifierResult] | None = None) -> FinalGrade:
        from deskbench.runs.outputs import episode_outputs
        from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers

        sub = ep.submission if isinstance(ep.submission, DeliverableSubmission) else None
        if task is None or sub is None:
            return apply_qc(g, actions, None)
        outputs = episode_outputs(self.dir, ep)  # the episode's own folder only
        results: list[VerifierResult] | None = None
        if verifiers:
            results = (list(verifier_results) if verifier_results is not None
                       else run_verifiers(task.verifiers, sub.response, outputs))
        return apply_qc(g, actions, results, rubric=task.rubric,
                        verifier_ids=[v.id for v in task.verifiers] if verifiers else None,
                        required_outputs=[o.name for o in task.required_outputs], produced_files=sub.files,
                        placeholder_files=placeholder_outputs(task, sub, outputs), task=task,
                        citations=validate_citations(task, sub, outputs, ep.trajectory) if verifiers else None,
                        file_decisions=final_answer_in_files(task, sub.response, outputs) if verifiers else None)

    def close(self) -> None:
        self._db.close()
        self.runs.close()


def change_times(store: RunStore, system: str) -> dict[tuple[str, int], str]:
    """When each (task id, attempt) of `system` last got a grade, a grade failure or a QC action:
    a stored scoring older than that no longer holds (`Track.scoring_change_times`)."""
    grades = GradeStore(store.dir)
    try:
        out: dict[tuple[str, int], str] = {}
        rows: list[tuple[str, int, str]] = [(x.task_id, x.attempt, x.created_at) for x in grades.grades(system)]
        rows += [(x.task_id, x.attempt, x.created_at) for x in grades.qc_actions(system)]
        rows += [(x.task_id, x.attempt, x.created_at) for x in grades.failures(system)]
        for task_id, attempt, at in rows:
            out[(task_id, attempt)] = max(out.get((task_id, attempt), ""), at)
        return out
    finally:
        grades.close()


def _comment_grade(g: RubricGrade) -> CommentGrade:
    return CommentGrade(task_id=g.task_id, system=g.system, attempt=g.attempt, comment=g.comment,
                        declared_best=g.declared_best, responses=g.responses)


def _primaries(grades: Iterable[RubricGrade]) -> dict[Key, RubricGrade]:
    by_key: dict[Key, list[RubricGrade]] = {}
    for g in grades:
        by_key.setdefault(g.key, []).append(g)
    out = {k: primary_of(gs) for k, gs in by_key.items()}
    return {k: g for k, g in out.items() if g is not None}


def _ok_stamp(con: sqlite3.Connection, key: Key) -> str | None:
    """The episode's finished_at when it is stored and ok (its grades' episode_stamp), else None."""
    row = con.execute("SELECT status, finished_at FROM episodes WHERE task_id = ? AND system = ? AND attempt = ?",
                      key).fetchone()
    return row[1] if row is not None and row[0] == "ok" else None


def _primary_in(con: sqlite3.Connection, key: Key) -> RubricGrade | None:
    """One episode's primary current grade, read on `con` (inside a write transaction: what the
    transaction will commit against)."""
    stamp = _ok_stamp(con, key)
    if stamp is None:
        return None
    rows = con.execute("SELECT grade FROM rubric_grades WHERE task_id = ? AND system = ? AND attempt = ?"
                       " AND episode_stamp = ? ORDER BY created_at, rowid", (*key, stamp)).fetchall()
    return primary_of(RubricGrade.model_validate_json(r[0]) for r in rows)
