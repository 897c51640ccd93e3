"""What a path the user named is, and which paths nearby were meant.

A typo in a run directory, a corpus or a tasks file is the commonest first-hour mistake. Its
message names the path as missing and the run directories (corpora, tasks files) that do exist
nearby, instead of a message about something else (`--tasks is needed to score a predictions
file`) or advice to create the typo (`deskbench ingest ... --corpus corpsu`). A path of the wrong
kind (a run directory given as a corpus, a folder of PDFs given as tasks) is named as what it is,
with the command that fits. Standard library only: every command may import it cheaply.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable
from pathlib import Path

from deskbench.errors import UserError

RUN_FILE = "run.sqlite"  # runs/store.py RunStore.FILENAME
CORPUS_FILE = "pages.sqlite"  # corpus/store.py PageStore.FILENAME
PACKAGE_FILE = "task.yaml"  # a deliverables task package (tasks/deliverables.py)

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


def _named(path: Path, flag: str) -> str:
    return f"{flag} {path}" if flag else str(path)


def missing(path: Path, accept: Callable[[Path], bool], what: str, fix: str, flag: str = "") -> UserError:
    """"PATH does not exist; did you mean ...? ...; FIX": `what` names the paths `accept` takes."""
    return UserError(f"{_named(path, flag)} does not exist{hint(path, nearby(path, accept), what)}; {fix}")


def run_dir_error(path: Path, flag: str = "") -> UserError:
    """Why `path` is no run directory, and the ones that are nearby."""
    fix = "give the --out of a 'deskbench run'"
    if not path.exists():
        return missing(path, is_run, "run directories", fix, flag)
    kind = what_is(path)
    if kind is not None:
        return UserError(f"{_named(path, flag)} is {kind}, not a run directory; {fix}")
    if not path.is_dir():
        return UserError(f"{_named(path, flag)} is a file, not a run directory; {fix}")
    inside = nearby(path, is_run, root=path)
    if inside:
        shown = ", ".join(map(str, inside[:_SHOWN])) + (", ..." if len(inside) > _SHOWN else "")
        return UserError(f"{_named(path, flag)} is not a deskbench run (no {RUN_FILE}) but holds runs: {shown}; "
                         "give one of them")
    return UserError(f"{_named(path, flag)} is not a deskbench run (no {RUN_FILE}); {fix}")


def require_run(path: Path, flag: str = "") -> None:
    """A UserError unless `path` is a run directory (see run_dir_error)."""
    if not is_run(path):
        raise run_dir_error(path, flag)


MAKE_CORPUS = "make one with: deskbench ingest PDFS --corpus DIR"


def corpus_error(path: Path, flag: str = "") -> UserError | None:
    """Why `path` cannot be opened as a corpus when it is missing or something else (None: an
    empty or unknown folder, which the caller describes)."""
    if not path.exists():
        return missing(path, is_corpus, "corpora", MAKE_CORPUS, flag)
    kind = what_is(path)
    if kind == "a run directory":
        return UserError(f"{_named(path, flag)} is a run directory, not a corpus; give the corpus the run searched "
                         f"(deskbench info {path} names it) or {MAKE_CORPUS}")
    if kind in ("a folder of PDFs", "a PDF file"):
        return UserError(f"{_named(path, flag)} is {kind}, not a corpus: ingest it with deskbench ingest {path} "
                         "--corpus CORPUS and give --corpus CORPUS")
    if not path.is_dir():
        return UserError(f"{_named(path, flag)} is a file, not a corpus; {MAKE_CORPUS}")
    return None


def require_corpus(path: Path, flag: str = "") -> None:
    """A UserError unless `path` is a corpus."""
    if is_corpus(path):
        return
    error = corpus_error(path, flag)
    raise error if error is not None else UserError(
        f"{_named(path, flag)} is not a deskbench corpus (no {CORPUS_FILE}); {MAKE_CORPUS}")


def first_line(path: Path) -> bytes | None:
    """A file's first non-blank line (a UTF-8 BOM removed), or None for a file with none."""
    with path.open("rb") as f:
        for number, line in enumerate(f):
            if number == 0:
                line = line.removeprefix(b"\xef\xbb\xbf")
            if line.strip():
                return line
    return None


def check_tasks_path(path: Path, flag: str = "--tasks") -> None:
    """One line when `path` cannot be a run's tasks: missing (with the tasks nearby), a run
    directory, a corpus, PDFs, an empty file. Anything else is left to the track that reads it.
    Called before the run's flags are checked: which flags apply depends on the tasks' track."""
    named = _named(path, flag)
    make = "deskbench init DIR --from YOUR_PDFS writes a tasks file to edit over them"
    if not path.exists():
        raise tasks_missing(path, flag)
    kind = what_is(path)
    if kind == "a run directory":
        raise UserError(f"{named} is a run directory, not tasks: to resume it, give the tasks it ran "
                        f"(deskbench info {path} names them) with --out {path}; to score it: deskbench score {path}")
    if kind == "a corpus":
        raise UserError(f"{named} is a corpus, not tasks: give it as --corpus {path} and the questions as "
                        f"--tasks FILE.jsonl ({make})")
    if kind in ("a folder of PDFs", "a PDF file"):
        raise UserError(f"{named} is {kind}, not tasks: ingest it with deskbench ingest {path} --corpus CORPUS "
                        f"and give the questions as --tasks FILE.jsonl --corpus CORPUS (deskbench init DIR "
                        f"--from {path} does both and writes questions to edit)")
    if path.is_file():
        try:
            empty = first_line(path) is None
        except OSError as exc:
            raise UserError(f"{named}: cannot read it ({exc.strerror or exc}); check its permissions") from None
        if empty:
            raise UserError(f"{named} is empty: give one task a line (deskbench schema docqa prints the format; {make})")


def tasks_missing(path: Path, flag: str = "--tasks") -> UserError:
    """`--tasks PATH does not exist (did you mean ...?)`: for a track's reader."""
    return missing(path, is_tasks, "tasks", "give a tasks JSONL or a deliverables package folder", flag)


def no_such_file(path: Path, what: str) -> UserError:
    """`PATH: no such file (did you mean ...?); check the path of WHAT`: the files of its kind nearby."""
    near = hint(path, nearby(path, lambda p: p.is_file() and p.suffix == path.suffix), f"{path.suffix or 'such'} files")
    return UserError(f"{path}: no such file{near}; check the path of {what}")
