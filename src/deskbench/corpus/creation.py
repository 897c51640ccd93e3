"""A new corpus appears whole or not at all, and a store that is not one is said in one line.

Why: a `deskbench ingest` killed in its first milliseconds left a 0 or 4,096-byte pages.sqlite
without tables, and every later ingest failed with a traceback `no such table: documents`
(issue 22). Now a new corpus is built under a temporary name in the same parent
(`.NAME.creating-PID-RANDOM`) and renamed into place once its schema and index exist; a folder
left by a killed process is swept when its process is gone, and a corpus folder made by an older
deskbench that holds a table-less page store (it can hold no data) is rebuilt.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sqlite3
from pathlib import Path
from typing import Protocol

from deskbench.errors import UserError

STORE = "pages.sqlite"
_TEMP = re.compile(r"^\.(?P<name>.+)\.creating-(?P<pid>\d+)-[0-9a-f]+$")
_HALF_MADE_PARTS = {STORE, f"{STORE}-wal", f"{STORE}-shm", f"{STORE}-journal", "docs", "index", "cache"}


class Builder(Protocol):
    """Makes a new corpus's files (schema, index) in a folder."""

    def __call__(self, root: Path) -> None: ...


class HalfMadeCorpus(UserError):
    """A page store without its tables: a corpus whose creation was interrupted."""


def not_a_store(path: Path, exc: BaseException | str) -> UserError:
    return UserError(f"{path} is not a readable page store ({exc}); move the corpus folder aside and "
                     "ingest the PDFs again into a new --corpus")


def check_store(path: Path, con: sqlite3.Connection) -> None:
    """One line, not a traceback, for a page store that is not a database, is truncated or never
    got its tables. Cheap: the schema and the header's page count against the file's size."""
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        pages = con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise not_a_store(path, exc) from None
    if "documents" not in tables:
        raise HalfMadeCorpus(f"{path} has no tables: the corpus's creation was interrupted; run "
                             "'deskbench ingest' on it again to rebuild it")
    wal = path.with_name(path.name + "-wal")
    if path.stat().st_size < pages and not (wal.exists() and wal.stat().st_size):
        raise not_a_store(path, f"truncated: {path.stat().st_size:,} of {pages:,} bytes")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_leftovers(root: Path) -> None:
    """Remove the temporary folders of `root` whose creating process is gone (a kill -9)."""
    with contextlib.suppress(OSError):
        for entry in root.parent.iterdir():
            found = _TEMP.match(entry.name)
            if found and found["name"] == root.name and not _alive(int(found["pid"])):
                shutil.rmtree(entry, ignore_errors=True)


def is_half_made(root: Path) -> bool:
    """A corpus folder an older deskbench left when killed while creating it: a page store
    without tables and nothing else that could hold data (no stored PDF)."""
    db = root / STORE
    if not db.is_file() or not {p.name for p in root.iterdir()} <= _HALF_MADE_PARTS:
        return False
    if (root / "docs").is_dir() and any((root / "docs").iterdir()):
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            check_store(db, con)
    except HalfMadeCorpus:
        return True
    except UserError:
        return False
    return False


def build_atomically(root: Path, build: Builder) -> None:
    """Run `build` on a temporary sibling of `root`, then rename it to `root` (an empty `root`
    folder is replaced, as rename(2) allows)."""
    sweep_leftovers(root)
    if root.is_dir() and is_half_made(root):
        shutil.rmtree(root)
    temp = root.parent / f".{root.name}.creating-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        temp.mkdir()
        build(temp)
        os.rename(temp, root)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if root.is_dir() and (root / STORE).exists():  # another process created it meanwhile
            return
        raise UserError(f"cannot create the corpus at {root} ({exc.strerror or exc}); "
                        "check the path, its permissions and the free disk space") from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


