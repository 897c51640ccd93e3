"""The web app's tables, in the run directory's run.sqlite beside the run store's own.

    web_users     annotators: name and the sha256 of their token (the token is shown once)
    web_sessions  logged-in browsers: sha256 of the session id, the user, the CSRF token, when it
                  started and was last seen (epoch seconds; idle and absolute expiry)
    web_login_failures  failed logins per client address and per user: count, last, blocked until
    web_work      a question in progress per (system, task): the screen's state as JSON
    web_actions   every action, timestamped, in order: the trajectory so far
    web_batches   annotator batches: code name, position, the ordered task ids (web/batches.py)
    web_assign    which user works on which batch (a batch may go to several users)

Every action is one write transaction (state + action together), so a closed tab loses nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deskbench.errors import UserError
from deskbench.runs.store import RunStore, now
from deskbench.sqlite import ThreadLocalDB
from deskbench.web.batches import Batch, cut_batches

_SCHEMA = """
CREATE TABLE IF NOT EXISTS web_users (
    name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS web_sessions (
    sid_sha256 TEXT PRIMARY KEY, user TEXT NOT NULL, csrf TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS web_login_failures (
    key TEXT PRIMARY KEY, failures INTEGER NOT NULL, last_at REAL NOT NULL, blocked_until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS web_work (
    system TEXT NOT NULL, task_id TEXT NOT NULL, state TEXT NOT NULL, updated_at TEXT NOT NULL,
    PRIMARY KEY (system, task_id));
CREATE TABLE IF NOT EXISTS web_actions (
    system TEXT NOT NULL, task_id TEXT NOT NULL, seq INTEGER NOT NULL, at TEXT NOT NULL,
    step TEXT NOT NULL, PRIMARY KEY (system, task_id, seq));
CREATE TABLE IF NOT EXISTS web_batches (
    name TEXT PRIMARY KEY, position INTEGER NOT NULL, task_ids TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS web_assign (
    batch TEXT NOT NULL, user TEXT NOT NULL, assigned_at TEXT NOT NULL, PRIMARY KEY (batch, user));
"""

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ANYONE = "user:*"  # the throttle key of a token that names no known user (older tokens, guesses)
FORGET_AFTER = 24 * 3600.0  # a failure count untouched this long starts again from zero


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def new_token(name: str) -> str:
    """`NAME:secret`: the public prefix lets a failed login count against the user it names
    (per-user throttling needs a name, and the login form asks for the token only)."""
    return f"{name}:{secrets.token_urlsafe(24)}"


@dataclass(frozen=True)
class Session:
    user: str
    csrf: str


@dataclass(frozen=True)
class Expired:
    """A session that existed but ended: `reason` is "idle" or "absolute"."""

    reason: str


@dataclass(frozen=True)
class SessionLimits:
    """How long a session lives: `idle` seconds without a request, `absolute` seconds in all."""

    idle: float = 8 * 3600.0
    absolute: float = 7 * 24 * 3600.0

    @property
    def touch_every(self) -> float:
        """Seen-times are written at most this often (a page load makes dozens of requests)."""
        return min(60.0, self.idle / 4)


@dataclass(frozen=True)
class Backoff:
    """Failed logins per key: the `after`-th failure blocks for `first` seconds, each further one
    doubles it, up to `cap` seconds."""

    after: int = 5
    first: float = 1.0
    cap: float = 15 * 60.0

    def block(self, failures: int) -> float:
        return 0.0 if failures < self.after else min(self.cap, self.first * 2.0 ** min(failures - self.after, 60))


@dataclass(frozen=True)
class UserInfo:
    name: str
    created_at: str
    sessions: int
    batches: tuple[str, ...]


class WebStore:
    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self._db = ThreadLocalDB(run_dir / RunStore.FILENAME, timeout=60.0)
        con = self._db.conn()
        con.executescript(_SCHEMA)
        have = {r[1] for r in con.execute("PRAGMA table_info(web_sessions)")}
        for column in ("started", "seen"):  # run files from before expiry: their sessions end
            if column not in have:
                con.execute(f"ALTER TABLE web_sessions ADD COLUMN {column} REAL")

    @classmethod
    def existing(cls, run_dir: Path) -> WebStore:
        """The web tables of a run directory that must exist already (the user commands)."""
        if not (run_dir / RunStore.FILENAME).is_file():
            raise UserError(f"{run_dir} is not a run directory (no {RunStore.FILENAME}); "
                            "give the --out the app serves")
        return cls(run_dir)

    # -- users ----------------------------------------------------------------------------

    def add_user(self, name: str, batches: list[str] | None = None) -> str:
        """Create an annotator with their batches in one transaction (a bad batch name leaves
        nothing behind); returns the token (only its hash is stored)."""
        if not NAME_RE.match(name):
            raise UserError(f"user name {name!r} is not valid; use letters, digits, '.', '_' or '-' (max 64)")
        token = new_token(name)
        with self._db.write() as con:
            if con.execute("SELECT 1 FROM web_users WHERE name = ?", (name,)).fetchone():
                raise UserError(f"user {name!r} already exists in this run")
            con.execute("INSERT INTO web_users(name, token_sha256, created_at) VALUES (?, ?, ?)",
                        (name, sha256(token), now()))
            self._assign(con, name, batches or [], remove=False)
        return token

    def users(self) -> list[str]:
        return [r[0] for r in self._db.conn().execute("SELECT name FROM web_users ORDER BY name")]

    def user_infos(self) -> list[UserInfo]:
        """Every user with when they were added, their open sessions and batches (no token)."""
        con = self._db.conn()
        batches: dict[str, list[str]] = {}
        for batch, user in con.execute("SELECT a.batch, a.user FROM web_assign a JOIN web_batches b "
                                       "ON b.name = a.batch ORDER BY b.position"):
            batches.setdefault(user, []).append(batch)
        rows = con.execute("SELECT u.name, u.created_at, COUNT(s.sid_sha256) FROM web_users u "
                           "LEFT JOIN web_sessions s ON s.user = u.name GROUP BY u.name ORDER BY u.name")
        return [UserInfo(name, created, n, tuple(batches.get(name, ()))) for name, created, n in rows]

    def remove_user(self, name: str) -> None:
        """The user and their sessions go at once; their work, answers and batch assignments stay
        (adding the name again gives them back)."""
        with self._db.write() as con:
            self._known(con, name)
            con.execute("DELETE FROM web_sessions WHERE user = ?", (name,))
            con.execute("DELETE FROM web_users WHERE name = ?", (name,))
            con.execute("DELETE FROM web_login_failures WHERE key = ?", (f"user:{name}",))

    def rotate_token(self, name: str) -> str:
        """A new token for the user; the old one and every session it opened stop working."""
        token = new_token(name)
        with self._db.write() as con:
            self._known(con, name)
            con.execute("UPDATE web_users SET token_sha256 = ? WHERE name = ?", (sha256(token), name))
            con.execute("DELETE FROM web_sessions WHERE user = ?", (name,))
        return token

    @staticmethod
    def _known(con: sqlite3.Connection, name: str) -> None:
        if not con.execute("SELECT 1 FROM web_users WHERE name = ?", (name,)).fetchone():
            raise UserError(f"no user {name!r} in this run; list them with: deskbench serve users --out RUNDIR")

    # -- sessions -------------------------------------------------------------------------

    def login(self, token: str, *, at: float, limits: SessionLimits = SessionLimits()) -> tuple[str, str] | None:
        """A new session for the token's user: (session id, user), or None for a wrong token.
        Sessions past their limits are cleared here, so the table never grows with dead ones."""
        row = self._db.conn().execute("SELECT name FROM web_users WHERE token_sha256 = ?",
                                      (sha256(token.strip()),)).fetchone()
        if row is None:
            return None
        sid = secrets.token_urlsafe(32)
        with self._db.write() as con:
            con.execute("DELETE FROM web_sessions WHERE started IS NULL OR started < ? OR seen < ?",
                        (at - limits.absolute, at - limits.idle))
            con.execute("INSERT INTO web_sessions(sid_sha256, user, csrf, created_at, started, seen)"
                        " VALUES (?, ?, ?, ?, ?, ?)", (sha256(sid), row[0], secrets.token_urlsafe(32), now(), at, at))
        return sid, row[0]

    def session(self, sid: str | None, *, at: float,
                limits: SessionLimits = SessionLimits()) -> Session | Expired | None:
        """The live session of `sid`; Expired (and deleted) past either limit; None if unknown."""
        if not sid:
            return None
        key = sha256(sid)
        row = self._db.conn().execute(
            "SELECT s.user, s.csrf, s.started, s.seen FROM web_sessions s JOIN web_users u ON u.name = s.user"
            " WHERE s.sid_sha256 = ?", (key,)).fetchone()
        if row is None:
            return None
        user, csrf, started, seen = row
        reason = ("absolute" if started is None or at - started > limits.absolute
                  else "idle" if seen is None or at - seen > limits.idle else None)
        if reason is not None:
            self.logout(sid)
            return Expired(reason)
        if at - seen >= limits.touch_every:
            with self._db.write() as con:
                con.execute("UPDATE web_sessions SET seen = ? WHERE sid_sha256 = ?", (at, key))
        return Session(user=user, csrf=csrf)

    def logout(self, sid: str) -> None:
        with self._db.write() as con:
            con.execute("DELETE FROM web_sessions WHERE sid_sha256 = ?", (sha256(sid),))

    # -- failed logins --------------------------------------------------------------------

    def claimed_user(self, token: str) -> str:
        """The throttle key of the user a token names (`NAME:secret`), ANYONE when it names
        no known user: guesses cannot spread over made-up names."""
        name, sep, _ = token.strip().partition(":")
        if sep and NAME_RE.match(name) and self._db.conn().execute(
                "SELECT 1 FROM web_users WHERE name = ?", (name,)).fetchone():
            return f"user:{name}"
        return ANYONE

    def blocked_for(self, keys: list[str], *, at: float) -> float:
        """Seconds until every key may try again (0: none is blocked)."""
        marks = ",".join("?" * len(keys))
        row = self._db.conn().execute(f"SELECT MAX(blocked_until) FROM web_login_failures WHERE key IN ({marks})",
                                      keys).fetchone()
        return max(0.0, (row[0] or 0.0) - at)

    def login_failed(self, keys: list[str], *, at: float, backoff: Backoff = Backoff()) -> float:
        """Count one failure against every key; returns the longest block it starts (seconds)."""
        wait = 0.0
        with self._db.write() as con:
            con.execute("DELETE FROM web_login_failures WHERE last_at < ? AND blocked_until < ?",
                        (at - FORGET_AFTER, at))
            for key in keys:
                row = con.execute("SELECT failures FROM web_login_failures WHERE key = ?", (key,)).fetchone()
                failures = (row[0] if row else 0) + 1
                block = backoff.block(failures)
                con.execute("INSERT OR REPLACE INTO web_login_failures(key, failures, last_at, blocked_until)"
                            " VALUES (?, ?, ?, ?)", (key, failures, at, at + block))
                wait = max(wait, block)
        return wait

    def login_succeeded(self, keys: list[str]) -> None:
        with self._db.write() as con:
            con.executemany("DELETE FROM web_login_failures WHERE key = ?", [(k,) for k in keys])

    # -- work in progress -----------------------------------------------------------------

    def state(self, system: str, task_id: str) -> dict[str, Any] | None:
        row = self._db.conn().execute("SELECT state FROM web_work WHERE system = ? AND task_id = ?",
                                      (system, task_id)).fetchone()
        return json.loads(row[0]) if row else None

    def save(self, system: str, task_id: str, state: dict[str, Any], step: dict[str, Any] | None = None) -> str:
        """Save the state and (if given) append one timestamped action, in one transaction."""
        at = now()
        with self._db.write() as con:
            con.execute("INSERT OR REPLACE INTO web_work(system, task_id, state, updated_at) VALUES (?, ?, ?, ?)",
                        (system, task_id, json.dumps(state), at))
            if step is not None:
                seq = con.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM web_actions WHERE system = ? AND task_id = ?",
                                  (system, task_id)).fetchone()[0]
                con.execute("INSERT INTO web_actions(system, task_id, seq, at, step) VALUES (?, ?, ?, ?, ?)",
                            (system, task_id, seq, at, json.dumps(step)))
        return at

    def actions(self, system: str, task_id: str) -> list[tuple[str, dict[str, Any]]]:
        rows = self._db.conn().execute(
            "SELECT at, step FROM web_actions WHERE system = ? AND task_id = ? ORDER BY seq", (system, task_id))
        return [(at, json.loads(step)) for at, step in rows]

    # -- batches --------------------------------------------------------------------------

    def batches(self) -> list[Batch]:
        con = self._db.conn()
        users: dict[str, list[str]] = {}
        for batch, user in con.execute("SELECT batch, user FROM web_assign ORDER BY user"):
            users.setdefault(batch, []).append(user)
        return [Batch(name=name, task_ids=tuple(json.loads(ids)), users=tuple(users.get(name, ())))
                for name, ids in con.execute("SELECT name, task_ids FROM web_batches ORDER BY position")]

    def add_batches(self, task_ids: list[str], size: int, seed: int | None = None) -> list[Batch]:
        """Batch the given tasks that are in no batch yet; existing batches never change."""
        if size < 1:
            raise UserError(f"batch size {size} is not valid; use 1 or more")
        with self._db.write() as con:
            batched: set[str] = set()
            taken: set[str] = set()
            for name, ids in con.execute("SELECT name, task_ids FROM web_batches"):
                taken.add(name)
                batched.update(json.loads(ids))
            fresh = [t for t in dict.fromkeys(task_ids) if t not in batched]
            new = cut_batches(fresh, size, taken, seed)
            start = con.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM web_batches").fetchone()[0]
            for i, b in enumerate(new):
                con.execute("INSERT INTO web_batches(name, position, task_ids, created_at) VALUES (?, ?, ?, ?)",
                            (b.name, start + i, json.dumps(list(b.task_ids)), now()))
        return new

    def assign(self, user: str, batch_names: list[str], *, remove: bool = False) -> None:
        with self._db.write() as con:
            if not con.execute("SELECT 1 FROM web_users WHERE name = ?", (user,)).fetchone():
                raise UserError(f"no user {user!r} in this run; create it with: deskbench serve add-user {user} --out RUNDIR")
            self._assign(con, user, batch_names, remove=remove)

    @staticmethod
    def _assign(con: sqlite3.Connection, user: str, batch_names: list[str], *, remove: bool) -> None:
        known = {r[0] for r in con.execute("SELECT name FROM web_batches")}
        unknown = [b for b in batch_names if b not in known]
        if unknown:
            raise UserError(f"no batch {', '.join(map(repr, unknown))} in this run; list them with "
                            "'deskbench serve batches --out RUNDIR', cut them with '... --tasks T.jsonl'")
        for b in batch_names:
            if remove:
                con.execute("DELETE FROM web_assign WHERE batch = ? AND user = ?", (b, user))
            else:
                con.execute("INSERT OR IGNORE INTO web_assign(batch, user, assigned_at) VALUES (?, ?, ?)",
                            (b, user, now()))

    def batches_of(self, user: str) -> list[Batch]:
        return [b for b in self.batches() if user in b.users]
