"""SQLite as deskbench's stores use it: WAL, one connection per thread, short write transactions.

The corpus page store and the run store both live in one file each, are read from many threads
and written by several processes; this is the one place that knows how.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ThreadLocalDB:
    def __init__(self, path: Path, *, timeout: float = 30.0, foreign_keys: bool = False) -> None:
        self.path = path
        self.timeout = timeout
        self.foreign_keys = foreign_keys
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (autocommit; transactions are explicit, see `write`)."""
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            if self.foreign_keys:
                con.execute("PRAGMA foreign_keys=ON")
            self._local.con = con
        return con

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: BEGIN IMMEDIATE, then COMMIT, or ROLLBACK on any exception."""
        con = self.conn()
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def close(self) -> None:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None
