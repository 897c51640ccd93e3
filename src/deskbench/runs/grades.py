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
actions recorded after that grade (older ones reviewed an earlier grade and are not applied).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from deskbench.runs.store import Episode, RunStore
from deskbench.scoring.rubric import GradeFailure, RubricGrade
from deskbench.scoring.rubric_qc import FinalGrade, QCAction, apply_qc, placeholder_outputs
from deskbench.scoring.verifier_base import VerifierResult
from deskbench.sqlite import ThreadLocalDB
from deskbench.tasks.deliverables import DeliverableSubmission, DeliverableTask

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
    it ignored (their episode was rerun or is gone)."""

    def __init__(self, items: Iterable[tuple[Key, FinalGrade]] = (), *, stale: Sequence[RubricGrade] = ()) -> None:
        super().__init__(items)
        self.stale_grades = list(stale)

    @property
    def stale(self) -> int:
        return len(self.stale_grades)


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
        return {t.id: t for t in self.runs.deliverable_tasks()}

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

    def grades(self, system: str | None = None, grader: str | None = None) -> list[RubricGrade]:
        sql, params = "SELECT grade FROM rubric_grades WHERE 1=1", []
        if system is not None:
            sql, params = sql + " AND system = ?", [*params, system]
        if grader is not None:
            sql, params = sql + " AND grader = ?", [*params, grader]
        rows = self._conn().execute(sql + " ORDER BY created_at, rowid", params).fetchall()
        return [RubricGrade.model_validate_json(r[0]) for r in rows]

    def failures(self, system: str | None = None) -> list[GradeFailure]:
        sql, params = "SELECT failure FROM rubric_failures", ()
        if system is not None:
            sql, params = sql + " WHERE system = ?", (system,)
        return [GradeFailure.model_validate_json(r[0])
                for r in self._conn().execute(sql + " ORDER BY created_at", params)]

    def current_grades(self, system: str | None = None, grader: str | None = None
                       ) -> tuple[list[RubricGrade], list[RubricGrade]]:
        """(current, stale): a grade is stale when its episode is gone or was rerun."""
        stamps = {k: e.finished_at for k, e in self.episodes(system).items() if e.status == "ok"}
        current, stale = [], []
        for g in self.grades(system, grader):
            (current if stamps.get(g.key) == g.episode_stamp else stale).append(g)
        return current, stale

    def graded(self, grader: str, system: str | None = None) -> set[Key]:
        """Episodes holding a current (not stale) grade by `grader`."""
        return {g.key for g in self.current_grades(system, grader)[0]}

    # -- QC --------------------------------------------------------------------------------------

    def add_qc(self, actions: Sequence[QCAction]) -> list[int]:
        """Append actions in one transaction, in order; their ids."""
        ids = []
        with self._db.write() as con:
            for a in actions:
                cur = con.execute(
                    "INSERT INTO rubric_qc(task_id, system, attempt, created_at, action) VALUES (?, ?, ?, ?, ?)",
                    (a.task_id, a.system, a.attempt, a.created_at, a.model_dump_json(exclude={"id"})))
                assert cur.lastrowid is not None
                ids.append(cur.lastrowid)
        return ids

    def qc_actions(self, system: str | None = None) -> list[QCAction]:
        sql, params = "SELECT id, action FROM rubric_qc", ()
        if system is not None:
            sql, params = sql + " WHERE system = ?", (system,)
        return [QCAction.model_validate_json(a).model_copy(update={"id": i})
                for i, a in self._conn().execute(sql + " ORDER BY id", params)]

    # -- final grades ----------------------------------------------------------------------------

    def primary(self, system: str | None = None, grader: str | None = None
                ) -> tuple[dict[Key, RubricGrade], list[RubricGrade]]:
        """The primary current grade per episode (named grader; else latest human; else latest
        llm), and the stale grades."""
        current, stale = self.current_grades(system, grader)
        chosen: dict[Key, RubricGrade] = {}
        for g in current:  # oldest first: a later grade of the same rank replaces an earlier one
            have = chosen.get(g.key)
            if have is None or g.source == "human" or have.source == "llm":
                chosen[g.key] = g
        return chosen, stale

    def final_grades(self, system: str | None = None, grader: str | None = None, *,
                     verifiers: bool = True) -> FinalGrades:
        """FinalGrade per episode with a current grade, QC applied. `verifiers` runs the task's
        verifiers on each episode (no judge: llm_check is unobservable) so that QC verifier
        edits override them and V, ACCEPT and the C.1 triggers can be computed."""
        from deskbench.scoring.verifiers import run_verifiers

        chosen, stale = self.primary(system, grader)
        tasks = self.tasks() if chosen else {}
        episodes = self.episodes(system) if chosen else {}
        qc: dict[Key, list[QCAction]] = {}
        for a in self.qc_actions(system):
            qc.setdefault(a.key, []).append(a)
        out = []
        for key, g in chosen.items():
            task, ep = tasks.get(g.task_id), episodes[key]
            sub = ep.submission if isinstance(ep.submission, DeliverableSubmission) else None
            actions = [a for a in qc.get(key, []) if a.created_at >= g.created_at]
            early = len(qc.get(key, [])) - len(actions)
            results: list[VerifierResult] | None = None
            extra: dict[str, object] = {}
            if task is not None and sub is not None:
                if verifiers:
                    results = run_verifiers(task.verifiers, sub.response, self.dir / sub.files_dir)
                extra = {
                    "rubric": task.rubric,
                    "verifier_ids": [v.id for v in task.verifiers] if verifiers else None,
                    "required_outputs": [o.name for o in task.required_outputs],
                    "produced_files": sub.files,
                    "placeholder_files": placeholder_outputs(task, sub, self.dir),
                }
            final = apply_qc(g, actions, results, **extra)  # type: ignore[arg-type]
            if early:
                final.flags.append(f"{early} QC action(s) predate this grade (they reviewed an earlier one) "
                                   "and were not applied")
            out.append((key, final))
        return FinalGrades(sorted(out, key=lambda kv: kv[0]), stale=stale)

    def close(self) -> None:
        self._db.close()
        self.runs.close()

