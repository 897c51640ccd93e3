"""The run store: one SQLite file (WAL) per run directory.

An episode (task x system x attempt) is written in one transaction when it ends, with its
submission, trajectory, usage and status, so a kill at any moment loses only the episodes in
flight. The primary key makes a second write of the same episode a no-op: a resumed run, or two
processes racing on one run, never duplicate an episode. Several systems may write the same run
(merge-on-write); the run also keeps its tasks, so it can be re-scored on its own.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, SerializeAsAny, TypeAdapter, ValidationError, model_validator

from deskbench.contract import formats
from deskbench.errors import UserError
from deskbench.models.types import Usage
from deskbench.runs import scorings as _scorings
from deskbench.runs.scorings import Headline, Scoring, ScoringSettings, StoredItem
from deskbench.runs.transcript import CODEC, Blob, Transcript, TranscriptDoc, decode, encode
from deskbench.sqlite import ThreadLocalDB
from deskbench.tasks.trajectory import ModelCallStep, TrajectoryStep

EpisodeStatus = Literal["ok", "error", "limit"]
TaskT = TypeVar("TaskT", bound=BaseModel)
Track = str  # a registered track's name (contract/formats.py)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, ord INTEGER NOT NULL, task TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error', 'limit')),
    error TEXT,
    submission TEXT,
    trajectory TEXT NOT NULL,
    usage TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    task_hash TEXT,
    PRIMARY KEY (task_id, system, attempt)
);
CREATE TABLE IF NOT EXISTS transcripts (
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    codec TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (task_id, system, attempt)
);
CREATE TABLE IF NOT EXISTS blobs (sha256 TEXT PRIMARY KEY, mime TEXT NOT NULL, data BLOB NOT NULL);
"""

# Score-time model calls (judges, graders), one transcript per (episode, scorer) per scoring:
# a re-score appends, the latest per scorer is what is read. No foreign key to episodes: an
# episode replaced by a rerun keeps its old judges' rows until it is scored again (older `created`).
_JUDGE_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_transcripts (
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    scorer TEXT NOT NULL,
    created TEXT NOT NULL,
    codec TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS judge_transcripts_episode ON judge_transcripts(task_id, system, attempt, scorer, created);
"""

# Earlier tries of an episode (`deskbench run --retry-errors`): an errored episode run again is
# moved here, with its transcript, in the transaction that stores its new try; `episodes` keeps
# the latest try (what every reader and scorer reads), this table the ones before it, try 1 first.
_TRIES_SCHEMA = """
CREATE TABLE IF NOT EXISTS episode_tries (
    task_id TEXT NOT NULL,
    system TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    try INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    submission TEXT,
    trajectory TEXT NOT NULL,
    usage TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    task_hash TEXT,
    transcript_codec TEXT,
    transcript_body BLOB,
    PRIMARY KEY (task_id, system, attempt, try)
);
"""
_EPISODE_COLUMNS = "status, error, submission, trajectory, usage, started_at, finished_at, task_hash"

_STEPS = TypeAdapter(list[TrajectoryStep])


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@lru_cache(maxsize=1)
def deskbench_version() -> str | None:
    """The installed deskbench's version (what a stored scoring and a system's identity record)."""
    try:
        return metadata.version("deskbench")
    except metadata.PackageNotFoundError:
        return None


class Episode(BaseModel):
    task_id: str
    system: str
    attempt: int = 0
    status: EpisodeStatus
    error: str | None = None  # the exception text, or why the limit was reached
    # the run's track's submission type (the store reads it as that; contract/formats.py)
    submission: SerializeAsAny[BaseModel] | None = None
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    started_at: str = Field(default_factory=now)
    finished_at: str = Field(default_factory=now)
    # sha256 of the task's content (its track's task_json) when the episode ran; None: stored
    # before task hashes were kept. `record` fills it in from the run's tasks when not given.
    task_hash: str | None = None

    @model_validator(mode="after")
    def _unknown_step_costs(self) -> Episode:
        """Episodes stored before unknown costs were None: their usage loads as unknown (Usage
        sees to that) but their model calls read cost_usd 0.0. In such an episode (unknown cost,
        no step already None), a call that used tokens has the unknown cost; a call without
        tokens was answered from the cache and cost nothing."""
        steps = self.trajectory
        calls = [s for s in steps if isinstance(s, ModelCallStep)]
        if self.usage.cost_usd is not None or not calls or any(s.cost_usd is None for s in calls):
            return self
        self.trajectory = [s.model_copy(update={"cost_usd": None})
                           if isinstance(s, ModelCallStep) and s.cost_usd == 0 and (s.input_tokens or s.output_tokens)
                           else s for s in steps]
        return self


# -- reading one row at a time ---------------------------------------------------------------
# What a stored row that cannot be read raises while it is decoded (the one home of that list):
# a number that is not one (inf, NaN, text), JSON nested past the parser's limit, text that is not
# UTF-8, a truncated or corrupt zlib body, JSON its pydantic model refuses. Such a row is an
# UnreadableEpisode, named; every other row is read as usual.
UNREADABLE_ERRORS: tuple[type[BaseException], ...] = (ValueError, RecursionError, UnicodeDecodeError, zlib.error,
                                                      ValidationError)


class UnreadableEpisode(BaseModel):
    """A stored episode whose row cannot be read: named by (task, system, attempt) and what is
    wrong, in one line. Readers leave it out of what they compute (never a zero, never done
    without a word) and say so; `deskbench run --retry-errors` runs it again."""

    task_id: str
    system: str
    attempt: str  # as stored, shown as text: the stored value may be what is broken
    problem: str  # one line

    def line(self) -> str:
        return (f"episode {self.task_id!r} of {self.system!r} (attempt {self.attempt}) could not be read: "
                f"{self.problem}; it is left out (add --retry-errors to 'deskbench run' to run it again)")


def _problem(exc: BaseException) -> str:
    """What is wrong with a row, in one line (a validation error's first error, short)."""
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        text = f"{first.get('msg', 'invalid')}" + (f" at {where}" if where else "")
    elif isinstance(exc, RecursionError):
        text = "nested too deep"
    else:
        text = str(exc)
    kind = "zlib.error" if isinstance(exc, zlib.error) else type(exc).__name__
    text = " ".join(f"{kind}: {text}".split())
    return text if len(text) <= 200 else text[:199] + "…"


def _text(value: object) -> str | None:
    """A TEXT column read as its bytes (CAST AS BLOB), decoded strictly: invalid UTF-8 is an
    error of this row, not of the query (sqlite3 raises it for the whole result otherwise)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    raise ValueError(f"a text column holds {type(value).__name__} {value!r:.40}")


def _name(value: object) -> str:
    """A key column as text for a line naming the row, whatever it holds."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _finite(episode: Episode) -> Episode:
    """pydantic reads inf and NaN into a float field: a stored seconds or cost that is not a
    number would make every total it is added to one too."""
    for where, usage in [("usage", episode.usage), *((f"trajectory[{n}]", s) for n, s in enumerate(episode.trajectory))]:
        for name in ("seconds", "cost_usd"):
            value = getattr(usage, name, None)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{where}.{name} is {value}, not a finite number")
    return episode


def _utf8(value: object) -> str | None:
    """A TEXT key read as bytes: the text, or None when it is not UTF-8."""
    if not isinstance(value, bytes):
        return value if isinstance(value, str) else None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


_KEY = "CAST(task_id AS BLOB)"  # a key column read as bytes, decoded by _keyed


def _keyed(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(key, the rest) of each row whose key (its first column: a task id or a system, read as
    bytes) is UTF-8; a row whose key is not is an unreadable episode, which `episodes` names."""
    for row in rows:
        key = _utf8(row[0])
        if key is not None:
            yield key, tuple(row[1:])


# the episodes columns a reader decodes, TEXT ones read as bytes (see _text)
_ROW_SQL = ("SELECT CAST(task_id AS BLOB), CAST(system AS BLOB), attempt, CAST(status AS BLOB), CAST(error AS BLOB),"
            " CAST(submission AS BLOB), CAST(trajectory AS BLOB), CAST(usage AS BLOB), CAST(started_at AS BLOB),"
            " CAST(finished_at AS BLOB) FROM episodes")


def _decode_row(row: Sequence[object], kind: type[BaseModel]) -> Episode | UnreadableEpisode:
    """One stored episode row, or what makes it unreadable (catching only decoding errors)."""
    t, s, a, st, err, sub, traj, usage, started, finished = row
    column = "task_id"  # the one being read, to name in the line
    try:
        fields: dict[str, object] = {}
        for column, value in zip(("task_id", "system", "status", "error", "started_at", "finished_at"),
                                 (t, s, st, err, started, finished), strict=True):
            fields[column] = _text(value)
        column = "submission"
        submission = _text(sub)
        fields["submission"] = kind.model_validate_json(submission) if submission else None
        column = "trajectory"
        fields["trajectory"] = _STEPS.validate_json(_text(traj) or "")
        column = "usage"
        fields["usage"] = Usage.model_validate_json(_text(usage) or "")
        column = "attempt"
        if not isinstance(a, int) or isinstance(a, bool):
            raise ValueError(f"{_name(a)!r} is not a whole number")
        fields["attempt"] = a
        column = "episode"
        return _finite(Episode.model_validate(fields))
    except UNREADABLE_ERRORS as exc:
        return UnreadableEpisode(task_id=_name(t), system=_name(s), attempt=_name(a),
                                 problem=f"{column}: {_problem(exc)}")


def report_unreadable(episode: UnreadableEpisode) -> None:
    """The one line a command prints for an unreadable episode, on stderr."""
    from rich.markup import escape

    from deskbench.console import err

    err.print(f"[yellow]warning:[/yellow] {escape(episode.line())}")


class UnreadableTranscript(Exception):
    """An episode's transcript (or a judge's) that cannot be decoded: its episode is named."""

    def __init__(self, episode: UnreadableEpisode) -> None:
        super().__init__(episode.line())
        self.episode = episode


def _unreadable_part(task_id: str, system: str, attempt: int, part: str, exc: BaseException) -> UnreadableTranscript:
    return UnreadableTranscript(UnreadableEpisode(task_id=task_id, system=system, attempt=str(attempt),
                                                  problem=f"{part}: {_problem(exc)}"))


def task_id(task: BaseModel) -> str:
    """A track's task's id (every track's task type has `id: str`): what the store files it under."""
    found = getattr(task, "id", None)
    if not isinstance(found, str):
        raise TypeError(f"a {type(task).__name__} has no str `id`; a track's task type needs one")
    return found


def task_hash(task_json: str) -> str:
    """A task's content hash: sha256 of its track's task_json."""
    return hashlib.sha256(task_json.encode()).hexdigest()


def _check_size(con: sqlite3.Connection, path: Path) -> None:
    """A truncated file opens and reads its first pages; the header's page count tells."""
    wanted = con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
    wal = path.with_name(path.name + "-wal")
    if path.stat().st_size < wanted and not (wal.exists() and wal.stat().st_size):
        raise sqlite3.DatabaseError(f"truncated: {path.stat().st_size:,} of {wanted:,} bytes")


class RunStore:
    FILENAME = "run.sqlite"

    def __init__(self, run_dir: Path, *, create: bool = True) -> None:
        self.dir = run_dir
        path = run_dir / self.FILENAME
        if not path.exists():
            if not create:
                from deskbench.paths import run_dir_error

                raise run_dir_error(run_dir)  # a typo names the runs nearby; a corpus is named as one
            run_dir.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = ThreadLocalDB(path, timeout=60.0)
        try:
            self._db.conn().executescript(_SCHEMA)  # executescript manages its own transaction
            self._migrate()
            _check_size(self._db.conn(), path)
        except sqlite3.DatabaseError as exc:  # not a database, truncated, malformed: one line
            if "disk is full" in str(exc):
                raise
            raise UserError(f"{path} is not a readable run store ({exc}); move it aside and run into a new "
                            "--out (the run's other files are untouched)") from None
        self._task_hashes: dict[str, str] | None = None
        # the unreadable episodes `episodes` has named on stderr (once each), by (task, system, attempt)
        self.skipped: dict[tuple[str, str, str], UnreadableEpisode] = {}

    def _migrate(self) -> None:
        """Run files made before a column or table was added get it (nullable: old rows read None;
        a new table starts empty)."""
        con = self._db.conn()
        con.executescript(_JUDGE_SCHEMA)
        con.executescript(_TRIES_SCHEMA)
        con.executescript(_scorings.SCHEMA)
        columns = {r[1] for r in con.execute("PRAGMA table_info(episodes)")}
        if "task_hash" not in columns:
            try:
                con.execute("ALTER TABLE episodes ADD COLUMN task_hash TEXT")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    # -- tasks and settings ---------------------------------------------------------------

    def track(self) -> Track:
        """Which track the run belongs to (docqa unless its tasks said otherwise)."""
        value = self.meta("track")
        if not isinstance(value, str):
            return "docqa"
        if value not in formats.loaded():  # a plugin's track not installed here: never read it as another track
            raise UserError(f"{self.dir} is a run of the {value!r} track, which is not installed here; install the "
                            "plugin that provides it (`deskbench list tracks` shows the installed ones)")
        return value

    def save_tasks(self, tasks: Sequence[BaseModel], *, allow_new: bool = True) -> None:
        """Remember the run's tasks (of one track). A resumed run may give a subset (--limit),
        new ids (`allow_new`: stored after the others, and run), or fewer ids (the missing ones
        are not run); a task whose content changed under its id is refused if any episode ran
        it (its stored version is replaced if none did)."""
        track: Track = formats.of_task(tasks[0]).name if tasks else "docqa"
        t = formats.named(track)
        rows = self._conn().execute("SELECT id, ord, task FROM tasks ORDER BY ord").fetchall()
        if rows and self.track() != track:
            raise UserError(f"{self.dir} holds a {self.track()} run; use a new --out directory for {track} tasks")
        stored = {r[0]: r[2] for r in rows}
        given = {task_id(task): t.task_json(task) for task in tasks}
        if len(given) < len(tasks):  # the readers name the file and line; this catches any other source
            ids = [task_id(task) for task in tasks]
            twice = next(i for n, i in enumerate(ids) if i in ids[:n])
            raise UserError(f"task id {twice!r} is given twice; give each task its own id")
        new = [i for i in given if i not in stored]
        if new and rows and not allow_new:
            raise UserError(
                f"{self.dir} already holds a run over other tasks ({len(new)} new ids, e.g. "
                f"{sorted(new)[0]!r}); use a new --out directory for a different task file"
            )
        known = self.task_hashes()
        changed = [i for i in given if i in stored and known.get(i) != task_hash(given[i])]
        ran = {r[0] for r in self._conn().execute("SELECT DISTINCT task_id FROM episodes")}
        refused = [i for i in changed if i in ran]
        if refused:
            shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
            raise UserError(f"{self.dir} already ran {len(refused)} task(s) whose content is now different under "
                            f"the same id ({shown}); use a new --out directory for the edited tasks (or the "
                            f"original task file to resume)")
        if not new and not changed and rows:
            return
        start = max((r[1] for r in rows), default=-1) + 1
        with self._db.write() as con:
            con.executemany("UPDATE tasks SET task = ? WHERE id = ?", [(given[i], i) for i in changed])
            con.executemany("INSERT OR IGNORE INTO tasks(id, ord, task) VALUES (?, ?, ?)",
                            [(i, start + n, given[i]) for n, i in enumerate(new)])
            # in the same transaction: a run's tasks are never read as the wrong track
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('track', ?)", (json.dumps(track),))
        self._task_hashes = None

    def task_hashes(self) -> dict[str, str]:
        """Each stored task's content hash: sha256 of its track's task_json, the stored text read
        back as the task and written again (so a field added with a default changes no hash)."""
        if self._task_hashes is None:
            track = formats.named(self.track())
            self._task_hashes = {i: task_hash(track.task_json(track.load_task(text)))
                                 for i, text in self._conn().execute("SELECT id, task FROM tasks")}
        return self._task_hashes

    def episode_task_hashes(self, system: str | None = None) -> dict[tuple[str, str, int], str | None]:
        """The task hash each episode was run with, by (task, system, attempt) (a row whose attempt
        is not a whole number is no episode's: `episodes` names it as unreadable)."""
        sql = (f"SELECT {_KEY}, CAST(system AS BLOB), attempt, task_hash FROM episodes"
               " WHERE typeof(attempt) = 'integer'")
        params: tuple[str, ...] = ()
        if system is not None:
            sql, params = sql + " AND system = ?", (system,)
        return {(t, name, a): h for t, (s, a, h) in _keyed(self._conn().execute(sql, params))
                if (name := _utf8(s)) is not None}

    def _load_tasks(self) -> list[BaseModel]:
        track = formats.named(self.track())
        return [track.load_task(r[0]) for r in self._conn().execute("SELECT task FROM tasks ORDER BY ord")]

    def all_tasks(self) -> list[BaseModel]:
        """The run's tasks, of its track's task type (any track)."""
        return self._load_tasks()

    def tasks_of(self, kind: type[TaskT]) -> list[TaskT]:
        """The run's tasks, read as `kind`: the task type of the track whose scorers and analyses
        ask (docqa's `DocQATask`, ...). A run of another track is one line naming both tracks."""
        track = self.track()
        wanted = formats.of_task_type(kind)
        if wanted is None or wanted.name != track:
            name = wanted.name if wanted is not None else kind.__name__
            raise UserError(f"{self.dir} is {_a(track)} run, not {_a(name)} run")
        return [t for t in self._load_tasks() if isinstance(t, kind)]

    def set_meta(self, key: str, value: object) -> None:
        with self._db.write() as con:
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def update_meta(self, key: str, change: Callable[[object | None], object]) -> object:
        """Read, change and write one meta value in one write transaction (two processes
        resuming one run never lose each other's change); returns the value written."""
        with self._db.write() as con:
            row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            value = change(json.loads(row[0]) if row else None)
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        return value

    def meta(self, key: str) -> object | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    # -- episodes -------------------------------------------------------------------------

    def record(self, episode: Episode, *, replace: bool = False, transcript: Transcript | None = None,
               retry: bool = False) -> bool:
        """Commit one finished episode, with its transcript; False if it was already there (it is
        kept as it was), unless `replace` (a deliberate rerun): then the new episode takes the old
        one's place in the same transaction, so a rerun cut short keeps the old episode. `retry`
        (--retry-errors): a stored episode whose status is "error" becomes an earlier try
        (`episode_tries`) and the new one its latest, in the same transaction; an episode stored
        with another status is kept, as without `retry`."""
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        body = encode(transcript.doc()) if transcript is not None else None  # compressed outside the lock
        hashed = episode.task_hash or self.task_hashes().get(episode.task_id)
        broken = retry and not replace and self._unreadable_row(episode.task_id, episode.system, episode.attempt)
        with self._db.write() as con:
            if retry and not replace:
                _keep_errored_try(con, (episode.task_id, episode.system, episode.attempt), unreadable=broken)
            cur = con.execute(
                f"{verb} INTO episodes(task_id, system, attempt, status, error, submission,"
                " trajectory, usage, started_at, finished_at, task_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    episode.task_id,
                    episode.system,
                    episode.attempt,
                    episode.status,
                    episode.error,
                    episode.submission.model_dump_json() if episode.submission else None,
                    _STEPS.dump_json(episode.trajectory).decode(),
                    episode.usage.model_dump_json(),
                    episode.started_at,
                    episode.finished_at,
                    hashed,
                ),
            )
            if cur.rowcount != 1:
                return False
            key = (episode.task_id, episode.system, episode.attempt)
            con.execute("DELETE FROM transcripts WHERE task_id = ? AND system = ? AND attempt = ?", key)
            if transcript is not None and body is not None:
                con.execute("INSERT INTO transcripts(task_id, system, attempt, codec, body) VALUES (?, ?, ?, ?, ?)",
                            (*key, CODEC, body))
                con.executemany("INSERT OR IGNORE INTO blobs(sha256, mime, data) VALUES (?, ?, ?)",
                                [(b.sha256, b.mime, b.data) for b in transcript.blobs.values()])
            return True

    def earlier_tries(self, task_id: str, system: str, attempt: int = 0) -> list[tuple[Episode, TranscriptDoc | None]]:
        """The tries of an episode before its latest (--retry-errors), first try first, each with
        its transcript ([] for an episode run once)."""
        kind = formats.named(self.track()).submission_type
        rows = self._conn().execute(
            f"SELECT {_EPISODE_COLUMNS}, transcript_codec, transcript_body FROM episode_tries"
            " WHERE task_id = ? AND system = ? AND attempt = ? ORDER BY try", (task_id, system, attempt)).fetchall()
        try:
            return [(Episode(task_id=task_id, system=system, attempt=attempt, status=st, error=err,
                             submission=kind.model_validate_json(sub) if sub else None,
                             trajectory=_STEPS.validate_json(traj), usage=Usage.model_validate_json(usage),
                             started_at=started, finished_at=finished, task_hash=hashed),
                     decode(codec, body) if codec is not None else None)
                    for st, err, sub, traj, usage, started, finished, hashed, codec, body in rows]
        except UNREADABLE_ERRORS as exc:
            raise _unreadable_part(task_id, system, attempt, "an earlier try", exc) from None

    def try_counts(self, system: str | None = None) -> dict[tuple[str, str, int], int]:
        """How many tries each episode run more than once had before its latest, by (task,
        system, attempt) (episodes run once are not in it)."""
        sql = "SELECT task_id, system, attempt, COUNT(*) FROM episode_tries"
        params: tuple[str, ...] = ()
        if system is not None:
            sql, params = sql + " WHERE system = ?", (system,)
        return {(t, s, a): n for t, s, a, n in self._conn().execute(sql + " GROUP BY task_id, system, attempt", params)}

    def transcript(self, task_id: str, system: str, attempt: int = 0) -> TranscriptDoc | None:
        """The episode's transcript; None for an episode stored without one (before transcripts,
        an imported prediction, a human's answer)."""
        row = self._conn().execute("SELECT codec, body FROM transcripts WHERE task_id = ? AND system = ? AND attempt = ?",
                                   (task_id, system, attempt)).fetchone()
        try:
            return decode(row[0], row[1]) if row else None
        except UNREADABLE_ERRORS as exc:  # truncated or corrupt zlib, JSON the model refuses
            raise _unreadable_part(task_id, system, attempt, "its transcript", exc) from None

    def record_judge_transcript(self, task_id: str, system: str, attempt: int, scorer: str,
                                transcript: Transcript | TranscriptDoc) -> None:
        """Keep the model calls one scorer made while scoring one episode (a judge, a grader),
        with the images they sent (as blobs). Appended: scoring again adds a newer row, and
        `judge_transcripts` reads the latest per scorer, so an earlier verdict stays auditable in
        the file."""
        doc = transcript.doc() if isinstance(transcript, Transcript) else transcript
        blobs = list(transcript.blobs.values()) if isinstance(transcript, Transcript) else []
        body = encode(doc)
        with self._db.write() as con:
            con.execute("INSERT INTO judge_transcripts(task_id, system, attempt, scorer, created, codec, body)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)", (task_id, system, attempt, scorer, now(), CODEC, body))
            con.executemany("INSERT OR IGNORE INTO blobs(sha256, mime, data) VALUES (?, ?, ?)",
                            [(b.sha256, b.mime, b.data) for b in blobs])

    def judge_transcripts(self, task_id: str, system: str, attempt: int = 0) -> dict[str, TranscriptDoc]:
        """The latest transcript of each scorer that made model calls scoring this episode, by
        scorer name ({} when none did: deterministic scoring, or never scored with a store)."""
        rows = self._conn().execute(
            "SELECT scorer, codec, body FROM judge_transcripts WHERE task_id = ? AND system = ? AND attempt = ?"
            " ORDER BY created, rowid", (task_id, system, attempt)).fetchall()
        try:
            return {scorer: decode(codec, body) for scorer, codec, body in rows}  # later rows win
        except UNREADABLE_ERRORS as exc:
            raise _unreadable_part(task_id, system, attempt, "a judge's transcript", exc) from None

    # -- stored scorings (runs/scorings.py) ------------------------------------------------

    def record_scoring(self, track: str, settings: ScoringSettings, reports: dict[str, object],
                       items: Sequence[StoredItem]) -> int:
        """Keep what one `score` computed (its settings, report per system, every item's outcome
        and --items-out row) in one transaction; returns the scoring's id."""
        version = deskbench_version()
        with self._db.write() as con:
            return _scorings.insert(con, created=now(), track=track, settings=settings, deskbench=version,
                                    reports=reports, items=items)

    def scorings(self) -> list[Scoring]:
        """Every stored scoring, oldest first ([] for a run never scored with a store)."""
        return _scorings.scorings(self._conn())

    def latest_scoring(self) -> Scoring | None:
        return _scorings.latest(self._conn())

    def scored_items(self, system: str) -> dict[tuple[str, int], tuple[Scoring, StoredItem]]:
        """Each (task, attempt) of `system` with the latest scoring that covered it."""
        return _scorings.latest_items(self._conn(), system)

    def scored_item(self, task_id: str, system: str, attempt: int = 0) -> tuple[Scoring, StoredItem] | None:
        """One episode's item in the latest scoring that covered it; None when none did."""
        return self.scored_items(system).get((task_id, attempt))

    def finished_times(self, system: str) -> dict[tuple[str, int], str]:
        """When each episode of `system` ended, by (task, attempt) (a rerun replaces it)."""
        return {(t, a): f for t, (a, f) in _keyed(self._conn().execute(
            f"SELECT {_KEY}, attempt, finished_at FROM episodes WHERE system = ? AND typeof(attempt) = 'integer'",
            (system,)))}

    def stamp(self, tables: Mapping[str, str | None]) -> tuple[object, ...]:
        """Something that changes with every write to `tables` (table -> a column holding each
        row's time, or None): per table present, its row count, max rowid and latest time. A
        reader that caches what it computed from them (the viewer) compares stamps."""
        present = {r[0] for r in self._conn().execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out: list[object] = []
        for table, column in tables.items():
            if table in present:
                out += self._conn().execute(
                    f"SELECT count(*), max(rowid), {f'max({column})' if column else 'NULL'} FROM {table}").fetchone()
        return tuple(out)

    def scoring_items(self, scoring_id: int) -> list[StoredItem]:
        return _scorings.items_of(self._conn(), scoring_id)

    def scoring_headlines(self, scoring_id: int) -> dict[str, Headline]:
        return _scorings.headlines(self._conn(), scoring_id)

    def blob(self, sha256: str) -> Blob | None:
        """An image the transcripts refer to as blob:<sha256>."""
        row = self._conn().execute("SELECT mime, data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
        return Blob(sha256=sha256, mime=row[0], data=row[1]) if row else None

    def done(self, system: str) -> set[tuple[str, int]]:
        rows = self._conn().execute(
            f"SELECT {_KEY}, attempt FROM episodes WHERE system = ? AND typeof(attempt) = 'integer'", (system,)
        ).fetchall()  # a row whose attempt is not a whole number is no (task, attempt): unreadable
        return {(t, a) for t, (a,) in _keyed(rows)}

    def errored(self, system: str, unreadable: Sequence[UnreadableEpisode] | None = None) -> set[tuple[str, int]]:
        """The (task, attempt) of `system`'s episodes stored with status "error" (not "limit"),
        and of those that cannot be read (`unreadable`, when the caller has them already): what
        --retry-errors runs again."""
        rows = self._conn().execute(
            f"SELECT {_KEY}, attempt FROM episodes WHERE system = ? AND status = 'error'"
            " AND typeof(attempt) = 'integer'", (system,)).fetchall()
        broken = self.unreadable(system) if unreadable is None else unreadable
        return {(t, a) for t, (a,) in _keyed(rows)} | {(u.task_id, int(u.attempt)) for u in broken
                                                      if u.attempt.isdigit()}

    def usages(self) -> Iterator[Usage]:
        """The usage of every stored episode and earlier try (what the run has spent: runs/budget.py);
        a row whose usage cannot be read is left out."""
        for (raw,) in self._conn().execute("SELECT usage FROM episodes UNION ALL SELECT usage FROM episode_tries"):
            try:
                yield Usage.model_validate_json(raw)
            except ValueError:
                continue

    def episode_counts(self) -> dict[str, dict[str, int]]:
        """Per system, its stored episodes by status (ok, error, limit)."""
        out: dict[str, dict[str, int]] = {}
        for system, (status, n) in _keyed(self._conn().execute(
                "SELECT CAST(system AS BLOB), CAST(status AS BLOB), COUNT(*) FROM episodes GROUP BY system, status"
                " ORDER BY system")):
            out.setdefault(system, {})[_utf8(status) or "unreadable"] = n
        return out

    def systems(self) -> list[str]:
        """The systems that ran, by name; a name that is not UTF-8 is no system's: its episodes are
        named as unreadable (once, on stderr) and left out."""
        names = [r[0] for r in self._conn().execute("SELECT DISTINCT CAST(system AS BLOB) FROM episodes ORDER BY system")]
        good = [n for n in map(_utf8, names) if n is not None]
        if len(good) < len(names):
            known = set(good)
            for row in self.unreadable():
                if row.system not in known:
                    self.note_unreadable(row)
        return good

    def _decoded(self, system: str | None) -> Iterator[Episode | UnreadableEpisode]:
        """Every stored episode (of `system`) in the order stored, one row decoded at a time."""
        sql = _ROW_SQL
        params: tuple[str, ...] = ()
        if system is not None:
            sql, params = sql + " WHERE system = ?", (system,)
        kind = formats.named(self.track()).submission_type
        for raw in self._conn().execute(sql + " ORDER BY rowid", params):
            yield _decode_row(raw, kind)

    def episode_rows(self, system: str | None = None) -> list[Episode | UnreadableEpisode]:
        """Every stored episode (of `system`) in the order stored, each row read on its own: one
        that cannot be read is an UnreadableEpisode in its place (the viewer marks it)."""
        return list(self._decoded(system))

    def episodes(self, system: str | None = None) -> list[Episode]:
        """The episodes that can be read; each unreadable one is named once on stderr (one line:
        task, system, attempt, what is wrong) and kept in `skipped`, so that every command that
        reads a run goes on with the rest and says what it left out."""
        return list(self.iter_episodes(system))

    def iter_episodes(self, system: str | None = None) -> Iterator[Episode]:
        """`episodes`, one row decoded at a time (an export of a run bigger than memory)."""
        for row in self._decoded(system):
            if isinstance(row, Episode):
                yield row
            else:
                self.note_unreadable(row)

    def note_unreadable(self, episode: UnreadableEpisode) -> None:
        """Name an unreadable episode on stderr, once per store, and keep it in `skipped`."""
        key = (episode.task_id, episode.system, episode.attempt)
        if key not in self.skipped:
            self.skipped[key] = episode
            report_unreadable(episode)

    def _unreadable_row(self, task_id: str, system: str, attempt: int) -> bool:
        """Whether the stored episode (task, system, attempt) is there and cannot be read."""
        row = self._conn().execute(_ROW_SQL + " WHERE task_id = ? AND system = ? AND attempt = ?",
                                   (task_id, system, attempt)).fetchone()
        return row is not None and isinstance(_decode_row(row, formats.named(self.track()).submission_type),
                                              UnreadableEpisode)

    def unreadable(self, system: str | None = None) -> list[UnreadableEpisode]:
        """The stored episodes (of `system`) that cannot be read, without a word on stderr."""
        return [r for r in self.episode_rows(system) if isinstance(r, UnreadableEpisode)]

    def close(self) -> None:
        self._db.close()


def _keep_errored_try(con: sqlite3.Connection, key: tuple[str, str, int], *, unreadable: bool = False) -> None:
    """Inside `record`'s transaction: the stored episode `key`, when its status is "error" (or it
    cannot be read: `unreadable`), moves with its transcript to `episode_tries` as the next earlier
    try, as stored, leaving its place to the new one."""
    row = con.execute("SELECT status FROM episodes WHERE task_id = ? AND system = ? AND attempt = ?", key).fetchone()
    if row is None or (row[0] != "error" and not unreadable):
        return
    n = con.execute("SELECT COUNT(*) FROM episode_tries WHERE task_id = ? AND system = ? AND attempt = ?",
                    key).fetchone()[0]
    con.execute(
        f"INSERT INTO episode_tries(task_id, system, attempt, try, {_EPISODE_COLUMNS}, transcript_codec, transcript_body)"
        f" SELECT e.task_id, e.system, e.attempt, ?, {', '.join('e.' + c.strip() for c in _EPISODE_COLUMNS.split(','))},"
        " t.codec, t.body FROM episodes e LEFT JOIN transcripts t"
        " ON t.task_id = e.task_id AND t.system = e.system AND t.attempt = e.attempt"
        " WHERE e.task_id = ? AND e.system = ? AND e.attempt = ?", (n + 1, *key))
    con.execute("DELETE FROM episodes WHERE task_id = ? AND system = ? AND attempt = ?", key)
    con.execute("DELETE FROM transcripts WHERE task_id = ? AND system = ? AND attempt = ?", key)


def _a(name: str) -> str:
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"
