"""What a path the user named is, and which paths near it were meant: the run directories,
corpora and tasks files beside a typo, closest name first (deskbench/paths.py words the messages).

Standard library only and no deskbench import: errors.py reads a user's file with it, every
command may import it cheaply.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable
from pathlib import Path

RUN_FILE = "run.sqlite"  # runs/store.py RunStore.FILENAME
CORPUS_FILE = "pages.sqlite"  # corpus/store.py PageStore.FILENAME
PACKAGE_FILE = "task.yaml"  # a deliverables task package (tracks/deliverables/tasks.py)

_SKIP = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache",
                   ".ruff_cache", ".tox", "site-packages"})
_DEPTH = 3  # how far below the nearest existing folder `nearby` looks
_BUDGET = 300  # folders listed at most: a typo's message must not walk a home directory
_SHOWN = 4  # paths named in a message


def is_run(path: Path) -> bool:
    """A run directory: the --out of `deskbench run`."""
    return (path / RUN_FILE).is_file()


def is_corpus(path: Path) -> bool:
    """A corpus: the --corpus of `deskbench ingest`."""
    return (path / CORPUS_FILE).is_file()


def is_tasks(path: Path) -> bool:
    """What `deskbench run --tasks` takes: a JSON Lines file or a deliverables package (folder)."""
    return (path.suffix == ".jsonl" and path.is_file()) or (path / PACKAGE_FILE).is_file()


def _has_packages(path: Path) -> bool:
    if (path / PACKAGE_FILE).is_file():
        return True
    try:
        return any((child / PACKAGE_FILE).is_file() for child in path.iterdir() if child.is_dir())
    except OSError:
        return False


def _has_pdfs(path: Path) -> bool:
    """Whether a folder holds a PDF (itself or below, the first ones looked at only)."""
    try:
        for seen, found in enumerate(path.rglob("*")):
            if found.suffix.lower() == ".pdf" and found.is_file():
                return True
            if seen > 2000:
                return False
    except OSError:
        return False
    return False


def what_is(path: Path) -> str | None:
    """What `path` holds that is not what its flag wants, in words ("a run directory"), or None."""
    if path.is_dir():
        if is_run(path):
            return "a run directory"
        if is_corpus(path):
            return "a corpus"
        if not _has_packages(path) and _has_pdfs(path):
            return "a folder of PDFs"
    elif path.suffix.lower() == ".pdf" and path.is_file():
        return "a PDF file"
    return None


def nearby(path: Path, accept: Callable[[Path], bool], *, root: Path | None = None) -> list[Path]:
    """The paths `accept` takes near `path`: below the nearest folder of it that exists (or below
    `root`), at most a few levels deep, closest name to `path`'s first."""
    start = root if root is not None else _existing_ancestor(path)
    if start is None or start.resolve() == Path(start.resolve().anchor):
        return []
    found: list[tuple[int, Path]] = []
    queue: deque[tuple[Path, int]] = deque([(start, 0)])
    listed = 0
    while queue and listed < _BUDGET:
        folder, depth = queue.popleft()
        listed += 1
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name in _SKIP:
                continue
            try:
                if accept(entry):
                    found.append((depth, entry))
                    continue
                if depth + 1 < _DEPTH and entry.is_dir() and not entry.is_symlink() and not is_run(entry) \
                        and not is_corpus(entry):
                    queue.append((entry, depth + 1))
            except OSError:
                continue
    name = path.name
    return [p for _, p in sorted(found, key=lambda dp: (-_likeness(name, dp[1].name), dp[0], str(dp[1])))]


def _existing_ancestor(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.is_dir():
            return parent
    return None


def _likeness(a: str, b: str) -> float:
    """How alike two names are, suffixes aside (every tasks file ends in .jsonl)."""
    return difflib.SequenceMatcher(None, Path(a).stem.lower(), Path(b).stem.lower()).ratio()


def hint(path: Path, found: list[Path], what: str) -> str:
    """" (did you mean X? other WHAT nearby: ...)", " (WHAT nearby: ...)", or "" when none was found."""
    if not found:
        return ""
    best = found[0]
    if _likeness(path.name, best.name) >= 0.6:
        others = found[1:_SHOWN]
        return f" (did you mean {best}?" + (f" other {what} nearby: {', '.join(map(str, others))})" if others else ")")
    more = f", and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    return f" ({what} nearby: {', '.join(map(str, found[:_SHOWN]))}{more})"


def first_line(path: Path) -> bytes | None:
    """A file's first non-blank line (a UTF-8 BOM removed), or None for a file with none."""
    with path.open("rb") as f:
        for number, line in enumerate(f):
            if number == 0:
                line = line.removeprefix(b"\xef\xbb\xbf")
            if line.strip():
                return line
    return None
