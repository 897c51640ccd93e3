"""Stored scorings: what `deskbench score` (and `run`, which scores at the end) computed, kept in
the run store so that a number a user saw leads back to its episodes.

Why: the viewer and the exports cannot call a judge, so without this they rescore offline with
the track's default scorer and a judged run shows another verdict than the one `score` printed.
Each scoring is one row of `scorings` (when, the track, the settings that decide a verdict: the
judges and flags, the deskbench version, the report per system as `score --json` gives it) and
one row of `scoring_items` per item it scored: the item's outcome (scored or unscored with the
reason; score in [0, 1]; correct) and its row exactly as `score --items-out` writes it (every
metric, the question, gold, prediction and each judge's verdict and reasoning). Scorings are
appended, never replaced: the latest one that covered an item is what is shown, older ones stay
auditable. A predictions file has no store and records nothing.

This module holds the tables and their models; the run store (runs/store.py) creates them on
open (older run files get them empty) and reads and writes them through the functions here.
Which stored items still hold is runs/current_scorings.py's (it asks the track)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from deskbench.runs.outcomes import ItemOutcome

SCHEMA = """
CREATE TABLE IF NOT EXISTS scorings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    track TEXT NOT NULL,
    settings TEXT NOT NULL,
    deskbench TEXT,
    reports TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scoring_items (
    scoring_id INTEGER NOT NULL REFERENCES scorings(id),
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('scored', 'unscored')),
    score REAL,
    correct INTEGER,
    reason TEXT NOT NULL DEFAULT '',
    item TEXT NOT NULL,
    PRIMARY KEY (scoring_id, task_id, system, attempt)
);
CREATE INDEX IF NOT EXISTS scoring_items_episode ON scoring_items(system, task_id, attempt, scoring_id);
"""

# what decides a verdict, as a command's parameters name it; anything else (concurrency, caches,
# output paths, --json) changes no number and is not a setting
SETTING_KEYS = ("judge", "chart_judge", "file_judge", "file_judge_all", "official", "kuiper_ties", "effort",
                "q0", "q1", "m0", "m1", "judge_calibration", "pool_humans", "reviewed_only", "by")
# flags whose default value `describe` leaves out (they are still recorded)
_DEFAULTS: dict[str, object] = {"kuiper_ties": "robust", "effort": "steps", "file_judge_all": True}
# the judge's name under each key, as the viewer's label says it
_JUDGE_LABELS = (("judge", "judge"), ("chart_judge", "chart judge"), ("file_judge", "File Judge"))

Key = tuple[str, int]  # (task id, attempt)


class ScoringSettings(BaseModel):
    """What a scoring ran with: the track's scorer in words, and the flags that decide a verdict
    (only those given: a flag left at its default is absent)."""

    scorer: str
    flags: dict[str, Any] = Field(default_factory=dict)
    judge_sampling: dict[str, Any] = Field(default_factory=dict)  # --judge-temperature etc., when a judge was used

    @classmethod
    def of(cls, scorer: str, params: Mapping[str, object]) -> ScoringSettings:
        """From a command's parameters by name (its click params, or a track's score args)."""
        flags = {k: _plain(params[k]) for k in SETTING_KEYS if params.get(k) not in (None, False, (), [])}
        sampling: dict[str, Any] = {}
        if any(flags.get(k) for k, _ in _JUDGE_LABELS):
            from deskbench.models.settings import asked_for

            sampling = dict(asked_for("judge").given())
        return cls(scorer=scorer, flags=flags, judge_sampling=sampling)

    def describe(self) -> str:
        """One line: the judges by name, else the scorer (`judge openai/gpt-4.1`, `ANLS* >= 0.5, no judge`)."""
        judges = [f"{label} {self.flags[k]}" for k, label in _JUDGE_LABELS if self.flags.get(k)]
        rest = [f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in self.flags.items()
                if k not in {k for k, _ in _JUDGE_LABELS} and k != "by" and _DEFAULTS.get(k, ...) != v]
        return ", ".join((judges or [self.scorer]) + rest)


def _plain(value: object) -> object:
    """A parameter as JSON holds it (paths as text, tuples as lists)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


class Scoring(BaseModel):
    """One stored scoring of a run."""

    id: int
    created: str  # UTC, ISO 8601
    track: str
    settings: ScoringSettings
    deskbench: str | None = None
    reports: dict[str, Any] = Field(default_factory=dict)  # system -> its report as `score --json` gives it

    @property
    def when(self) -> str:
        """The time, to the minute (`2026-11-24 12:00 UTC`)."""
        return self.created[:16].replace("T", " ") + " UTC"

    def label(self) -> str:
        """What the viewer and the export say produced a number."""
        return f"scoring #{self.id} ({self.settings.describe()}), scored {self.when}"


class StoredItem(BaseModel):
    """One item of a scoring: its outcome and its `--items-out` row."""

    task_id: str
    system: str
    attempt: int = 0
    status: Literal["scored", "unscored"]
    score: float | None = None
    correct: bool | None = None
    reason: str = ""  # why it is unscored ("" when scored)
    row: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, outcome: ItemOutcome, row: Mapping[str, Any], reason: str = "") -> StoredItem:
        """An item as its track's outcome converter saw it, with its --items-out row."""
        return cls(task_id=outcome.task_id, system=outcome.system, attempt=outcome.attempt, status=outcome.status,
                   score=outcome.score, correct=outcome.correct,
                   reason="" if outcome.status == "scored" else (reason or "not scored"), row=dict(row))

    @property
    def outcome(self) -> Literal["correct", "wrong", "unscored"]:
        if self.status != "scored":
            return "unscored"
        return "correct" if self.correct else "wrong"


class Headline(BaseModel):
    """One system's items in one scoring, counted (what `info` shows)."""

    items: int
    scored: int
    correct: int
    mean_score: float | None


# -- reading and writing (the run store calls these with its connection) -----------------------


def insert(con: sqlite3.Connection, *, created: str, track: str, settings: ScoringSettings, deskbench: str | None,
           reports: Mapping[str, Any], items: Sequence[StoredItem]) -> int:
    """Write one scoring and its items (the caller holds the write transaction)."""
    cur = con.execute("INSERT INTO scorings(created, track, settings, deskbench, reports) VALUES (?, ?, ?, ?, ?)",
                      (created, track, settings.model_dump_json(), deskbench, json.dumps(reports, ensure_ascii=False)))
    assert cur.lastrowid is not None
    sid = cur.lastrowid
    con.executemany(
        "INSERT OR REPLACE INTO scoring_items(scoring_id, task_id, system, attempt, status, score, correct, reason, item)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(sid, i.task_id, i.system, i.attempt, i.status, i.score, None if i.correct is None else int(i.correct),
          i.reason, json.dumps(i.row, ensure_ascii=False)) for i in items])
    return sid


_SCORING_COLUMNS = "id, created, track, settings, deskbench, reports"


def _scoring(row: tuple[Any, ...]) -> Scoring:
    sid, created, track, settings, version, reports = row
    return Scoring(id=sid, created=created, track=track, settings=ScoringSettings.model_validate_json(settings),
                   deskbench=version, reports=json.loads(reports))


def scorings(con: sqlite3.Connection) -> list[Scoring]:
    """Every stored scoring, oldest first."""
    return [_scoring(r) for r in con.execute(f"SELECT {_SCORING_COLUMNS} FROM scorings ORDER BY id")]


def latest(con: sqlite3.Connection) -> Scoring | None:
    row = con.execute(f"SELECT {_SCORING_COLUMNS} FROM scorings ORDER BY id DESC LIMIT 1").fetchone()
    return _scoring(row) if row else None


def _item(row: tuple[Any, ...]) -> StoredItem:
    task_id, system, attempt, status, score, correct, reason, item = row
    return StoredItem(task_id=task_id, system=system, attempt=attempt, status=status, score=score,
                      correct=None if correct is None else bool(correct), reason=reason, row=json.loads(item))


_ITEM_COLUMNS = "i.task_id, i.system, i.attempt, i.status, i.score, i.correct, i.reason, i.item"


def latest_items(con: sqlite3.Connection, system: str) -> dict[Key, tuple[Scoring, StoredItem]]:
    """Each item of `system` with the latest scoring that covered it (items no scoring covered
    are absent)."""
    rows = con.execute(
        f"SELECT i.scoring_id, {_ITEM_COLUMNS} FROM scoring_items i WHERE i.system = ? AND i.scoring_id ="
        " (SELECT max(j.scoring_id) FROM scoring_items j WHERE j.system = i.system AND j.task_id = i.task_id"
        " AND j.attempt = i.attempt)", (system,)).fetchall()
    wanted = {r[0] for r in rows}
    if not wanted:
        return {}
    by_id = {s.id: s for s in (_scoring(r) for r in con.execute(
        f"SELECT {_SCORING_COLUMNS} FROM scorings WHERE id IN ({','.join('?' * len(wanted))})", tuple(wanted)))}
    return {(r[1], r[3]): (by_id[r[0]], _item(r[1:])) for r in rows}


def items_of(con: sqlite3.Connection, scoring_id: int) -> list[StoredItem]:
    return [_item(r) for r in con.execute(f"SELECT {_ITEM_COLUMNS} FROM scoring_items i WHERE i.scoring_id = ?"
                                          " ORDER BY i.rowid", (scoring_id,))]


def headlines(con: sqlite3.Connection, scoring_id: int) -> dict[str, Headline]:
    """Per system of one scoring: its items, how many were scored, correct, and the mean score."""
    return {system: Headline(items=n, scored=scored or 0, correct=correct or 0, mean_score=mean)
            for system, n, scored, correct, mean in con.execute(
                "SELECT system, count(*), sum(status = 'scored'), sum(coalesce(correct, 0)), avg(score)"
                " FROM scoring_items WHERE scoring_id = ? GROUP BY system ORDER BY system", (scoring_id,))}
