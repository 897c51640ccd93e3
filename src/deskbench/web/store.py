"""The web app's tables, in the run directory's run.sqlite beside the run store's own.

    web_users     annotators: name and the sha256 of their token (the token is shown once)
    web_sessions  logged-in browsers: sha256 of the session id, the user, the CSRF token
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


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Session:
    user: str
    csrf: str


class WebStore:
    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self._db = ThreadLocalDB(run_dir / RunStore.FILENAME, timeout=60.0)
        self._db.conn().executescript(_SCHEMA)

    # -- users and sessions ---------------------------------------------------------------

    def add_user(self, name: str, batches: list[str] | None = None) -> str:
        """Create an annotator with their batches in one transaction (a bad batch name leaves
        nothing behind); returns the token (only its hash is stored)."""
        if not NAME_RE.match(name):
            raise UserError(f"user name {name!r} is not valid; use letters, digits, '.', '_' or '-' (max 64)")
        token = secrets.token_urlsafe(24)
        with self._db.write() as con:
            if con.execute("SELECT 1 FROM web_users WHERE name = ?", (name,)).fetchone():
                raise UserError(f"user {name!r} already exists in this run")
            con.execute("INSERT INTO web_users(name, token_sha256, created_at) VALUES (?, ?, ?)",
                        (name, sha256(token), now()))
            self._assign(con, name, batches or [], remove=False)
        return token

    def users(self) -> list[str]:
        return [r[0] for r in self._db.conn().execute("SELECT name FROM web_users ORDER BY name")]

    def login(self, token: str) -> tuple[str, str] | None:
        """A new session for the token's user: (session id, user), or None for a wrong token."""
        row = self._db.conn().execute("SELECT name FROM web_users WHERE token_sha256 = ?",
                                      (sha256(token.strip()),)).fetchone()
        if row is None:
            return None
        sid = secrets.token_urlsafe(32)
        with self._db.write() as con:
            con.execute("INSERT INTO web_sessions(sid_sha256, user, csrf, created_at) VALUES (?, ?, ?, ?)",
                        (sha256(sid), row[0], secrets.token_urlsafe(32), now()))
        return sid, row[0]

    def session(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        row = self._db.conn().execute(
            "SELECT s.user, s.csrf FROM web_sessions s JOIN web_users u ON u.name = s.user"
            " WHERE s.sid_sha256 = ?", (sha256(sid),)).fetchone()
        return Session(user=row[0], csrf=row[1]) if row else None

    def logout(self, sid: str) -> None:
        with self._db.write() as con:
            con.execute("DELETE FROM web_sessions WHERE sid_sha256 = ?", (sha256(sid),))

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
