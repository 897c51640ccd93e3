"""One writer per run directory: `deskbench run` holds an fcntl lock on RUNDIR/.deskbench-run.lock
for its whole length.

Why refuse rather than join: two runs on one `--out` each read `done()` before either stored an
episode, so both ran every task (84 model calls for 60 tasks) and raced on the tasks table
(`database is locked`, `UNIQUE tasks.id`). A joiner cannot know which episodes the other process
has in flight (they are stored only when they end), so joining would still redo work; a second
run is told in one line which process is writing and to run again when it ends, which resumes.
The kernel drops the lock when the holder dies (kill -9 included), so a stale lock file never
blocks a later run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deskbench.errors import UserError

LOCK_NAME = ".deskbench-run.lock"


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Held while the block runs; raises UserError at once if another process holds it. A full
    disk met by the run (sqlite's or the files') ends it in one line too: what is committed stays."""
    from deskbench.paths import check_run_out

    check_run_out(run_dir)  # a file or a corpus is no place for a run
    made = not run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UserError(f"{run_dir}: cannot create the run directory's lock file ({exc.strerror or exc}); "
                        "check the --out path and its permissions") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            who = f"run PID {holder}" if holder.isdigit() else "another deskbench run"
            raise UserError(f"{run_dir}: {who} is writing there; wait for it to end and run again "
                            "(it resumes), or give another --out") from None
        with contextlib.suppress(OSError):  # the PID only names the writer; a full disk is met below
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        except (sqlite3.OperationalError, OSError) as exc:
            if not _disk_full(exc):
                raise
            raise UserError(f"{run_dir}: the disk is full ({exc}); free space and run the same command "
                            f"again: the {_stored(run_dir)}episodes stored are kept and it resumes") from None
        except BaseException:
            if made:  # a run refused or stopped before its first episode leaves no run directory behind
                _remove_if_nothing_stored(run_dir)
            raise
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


_EMPTY_RUN = frozenset({LOCK_NAME, "run.sqlite", "run.sqlite-wal", "run.sqlite-shm", "run.sqlite-journal"})


def _remove_if_nothing_stored(run_dir: Path) -> None:
    """Remove a run directory this lock created when it holds no episode: nothing but the lock
    and a run store without episodes (the store a track opened before a check failed, e.g. a
    corpus opened when the run starts). Anything else in it is left where it is."""
    with contextlib.suppress(OSError):
        names = {p.name for p in run_dir.iterdir()}
        if not names <= _EMPTY_RUN or ("run.sqlite" in names and _stored(run_dir) != "0 "):
            return  # something else, or episodes (or a store that cannot be read): kept
        for name in names:
            (run_dir / name).unlink()
        run_dir.rmdir()


def _disk_full(exc: BaseException) -> bool:
    """sqlite's SQLITE_FULL, or a write refused for space (ENOSPC, a quota, the file size limit)."""
    if isinstance(exc, sqlite3.OperationalError):
        return "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _stored(run_dir: Path) -> str:
    """The episodes in the run store, read-only (the disk is full)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)) as con:
            return f"{int(con.execute('SELECT count(*) FROM episodes').fetchone()[0])} "
    except sqlite3.Error:
        return ""
