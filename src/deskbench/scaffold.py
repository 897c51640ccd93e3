"""`deskbench init`: a small task set over the user's own files, to edit before a first run.

A user who has PDFs or spreadsheets but no tasks file should not have to learn the formats before
seeing a run: init writes valid tasks (every docqa evidence page exists in the ingested corpus,
every analytics input is copied beside the tasks), marked TODO where only the user knows the
question and answer, and the command that runs them with a baseline that needs no key.
Each track writes its own task set (`Track.scaffolder`: tracks/docqa/scaffold.py,
tracks/analytics/scaffold.py) with the helpers here; this module names no track.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from deskbench.contract.cli import Scaffolded
from deskbench.errors import UserError

TODO = "TODO"


def found_files(source: Path, suffixes: tuple[str, ...], what: str, flag_hint: str) -> list[Path]:
    """The files under `source` (a file or a folder searched recursively) with one of `suffixes`."""
    if not source.exists():  # a typo: the files or folders of that kind nearby
        from deskbench.nearby import hint, nearby

        def holds(p: Path) -> bool:
            return p.suffix.lower() in suffixes or (p.is_dir() and any(c.suffix.lower() in suffixes for c in p.iterdir()))

        near = hint(source, nearby(source, holds), what)
        raise UserError(f"--from {source}: no such file or folder{near}; give the folder holding your {what}")
    if source.is_file():
        files = [source] if source.suffix.lower() in suffixes else []
    else:
        files = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)
    if not files:
        raise UserError(f"--from {source}: no {what} ({', '.join(suffixes)}) found; {flag_hint}")
    return files


def slug(name: str) -> str:
    """A file's stem as a task id part: lower-case letters, digits and dashes."""
    return re.sub(r"[^A-Za-z0-9]+", "-", Path(name).stem).strip("-").lower() or "doc"


def unique(wanted: str, taken: set[str]) -> str:
    """`wanted`, or `wanted-2`, `-3`, ...: two files may slug alike (non-Latin names, folders)."""
    found, n = wanted, 1
    while found in taken:
        n += 1
        found = f"{wanted}-{n}"
    taken.add(found)
    return found


def write_readme(dest: Path, track: str, lines: list[str], command: list[str], note: str) -> None:
    """README.txt of a task set: what each file is (`lines`), the formats, and how to run it."""
    text = "\n".join([
        f"A deskbench {track} task set made by `deskbench init`. Lines marked TODO are placeholders:",
        "replace them with your own questions and answers before trusting a score.",
        "",
        *lines,
        "",
        f"The formats: `deskbench schema {track}` (JSON Schema) and docs/formats.md.",
        "Run it:",
        "",
        "    " + shlex.join(command),
        "",
        note,
        "",
    ])
    (dest / "README.txt").write_text(text, encoding="utf-8")


def scaffold(track: str, dest: Path, source: Path | None, *, workers: int = 1,
             on_file: Callable[[str], None] | None = None) -> Scaffolded:
    """Make the task set; refuses a `dest` that holds anything (init never mixes with a user's files).
    A failure removes the folder it created, so the command can be run again as it was."""
    from deskbench.contract.registry import get_track, tracks

    maker = get_track(track).scaffolder()
    if maker is None:
        takers = [name for name, t in tracks().items() if t.scaffolder() is not None]
        raise UserError(f"--track {track!r}: init scaffolds {' or '.join(takers)}; "
                        f"for {track} tasks, start from 'deskbench generate {track}'")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest} exists and is not an empty folder; give a new folder for the task set")
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return maker(dest, source, workers=workers, on_file=on_file)
    except BaseException:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        raise
