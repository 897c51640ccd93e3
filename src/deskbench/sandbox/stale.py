"""Temp folders (and cgroups) named after the process that owns them, so a later process can
tell which ones a dead process left behind (kill -9 runs no cleanup) and remove them.

An owner tag is `<pid>.<start>.<pidns>`: the pid, the process's start time in clock ticks since
boot (/proc/<pid>/stat field 22), so a reused pid does not keep a dead owner's folder alive, and
the inode of its pid namespace: a folder (or a cgroup: the pids hierarchy is machine-wide) made
in another pid namespace, whose pids mean nothing here, is never judged. Where /proc is absent
the start is 0 and only the pid is checked.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

PREFIX = "deskbench-"
# deskbench-<kind>-<pid>.<start>[.<pidns>]-<random>; kinds are lowercase words joined by "-"
TAGGED = re.compile(r"^deskbench-[a-z]+(?:-[a-z]+)*-(\d+)\.(\d+)(?:\.(\d+))?-[A-Za-z0-9_]+$")


def start_time(pid: int) -> int | None:
    """The process's start time in ticks since boot; None when no such process; 0 when /proc
    cannot tell (then only the pid is checked)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    except OSError:
        return 0
    # the command name (field 2) may hold spaces and parentheses: split after the last ")"
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[19])


@functools.cache
def pid_namespace() -> int:
    """The inode of this process's pid namespace (0 where /proc cannot tell)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


@functools.cache
def owner_tag() -> str:
    """This process's tag (cached per process: a forked child computes its own, see below)."""
    return f"{os.getpid()}.{start_time(os.getpid()) or 0}.{pid_namespace()}"


def my_tag() -> str:
    """The tag of the calling process; recomputed after a fork."""
    tag = owner_tag()
    if not tag.startswith(f"{os.getpid()}."):
        owner_tag.cache_clear()
        tag = owner_tag()
    return tag


def owner_alive(pid: int, start: int) -> bool:
    now = start_time(pid)
    return now is not None and (start == 0 or now == 0 or now == start)


def tagged_prefix(kind: str) -> str:
    """The prefix for tempfile's `prefix=`: deskbench-<kind>-<pid>.<start>-"""
    return f"{PREFIX}{kind}-{my_tag()}-"


def tagged_tempdir(kind: str) -> Path:
    """A fresh private temp folder owned by this process (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=tagged_prefix(kind)))


def stale_entries(names: Iterator[str] | list[str]) -> Iterator[str]:
    """The names among `names` tagged by a process that is gone."""
    for name in names:
        m = TAGGED.match(name)
        if m is None or (m.group(3) is not None and int(m.group(3)) != pid_namespace()):
            continue
        if not owner_alive(int(m.group(1)), int(m.group(2))):
            yield name


def sweep(root: Path, remove: Callable[[Path], None]) -> list[Path]:
    """Remove every tagged entry under `root` whose owner is gone; returns what was removed."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in stale_entries(names):
        with contextlib.suppress(OSError):
            remove(root / name)
            removed.append(root / name)
    return removed


def _rmtree(path: Path) -> None:
    if path.is_symlink():  # a link under our name: removed, never followed
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def sweep_tempdirs(root: Path | None = None) -> list[Path]:
    """Remove the deskbench temp folders of dead processes from the temp dir."""
    return sweep(Path(root or tempfile.gettempdir()), _rmtree)
