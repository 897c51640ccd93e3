"""The messages for a path of the wrong kind or one that does not exist.

A typo in a run directory, a corpus or a tasks file is the commonest first-hour mistake. Its
message names the path as missing and the run directories (corpora, tasks files) that do exist
nearby (deskbench/nearby.py), instead of a message about something else (`--tasks is needed to
score a predictions file`) or advice to create the typo (`deskbench ingest ... --corpus corpsu`).
A path of the wrong kind (a run directory given as a corpus, a folder of PDFs given as tasks) is
named as what it is, with the command that fits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deskbench.errors import UserError
from deskbench.nearby import (
    CORPUS_FILE,
    RUN_FILE,
    first_line,
    hint,
    is_corpus,
    is_run,
    is_tasks,
    nearby,
    what_is,
)

_SHOWN = 4  # runs named in a message


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


def check_run_out(path: Path, flag: str = "--out") -> None:
    """One line when `path` cannot hold a run: a file, or a corpus (a run there would mix its
    store into the corpus's folder)."""
    if path.is_file():
        raise UserError(f"{_named(path, flag)} is a file; give a folder for the run (e.g. runs/NAME)")
    if is_corpus(path):
        raise UserError(f"{_named(path, flag)} is a corpus, not a run directory; give it as --corpus and a new folder "
                        "for --out (e.g. runs/NAME)")
