"""An episode's output files, read only from inside that episode's own folder.

A submission stores `files_dir` relative to the run, and a row of run.sqlite is data: a
`files_dir` of "." would serve run.sqlite as an episode's file, and one naming another
episode's folder would score that episode's files as this one's (a forged episode). Every
reader (the viewer's /output, the grading screens, score of analytics and deliverables, the
verifiers, calibration) goes through `episode_outputs` and `output_file` here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from deskbench.runs.names import folder_name


class Episode(Protocol):
    """What is read of a stored episode (runs/store.py's Episode): a protocol, not an import,
    because the store imports the tracks' scorings, which read their outputs here."""

    @property
    def system(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def submission(self) -> object: ...


def episode_dir(run_dir: Path, system: str, task_id: str, attempt: int) -> Path:
    """Where a new episode's output files go: RUNDIR/outputs/<system>/<task>/<attempt>/, each
    name from `folder_name`. The one home of that layout. Readers never rebuild it: a submission
    stores its `files_dir` relative to the run, so runs written with the older slug-only names
    (before issue 22) keep reading their own folders."""
    return run_dir / "outputs" / folder_name(system) / folder_name(task_id) / str(attempt)


def legacy_episode_dir(run_dir: Path, system: str, task_id: str, attempt: int) -> Path:
    """The folder runs written before issue 22 gave the episode (slug-only names), still read."""
    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "_"

    return run_dir / "outputs" / slug(system) / slug(task_id) / str(attempt)


def episode_outputs(run_dir: Path | str, episode: Episode) -> Path | None:
    """The stored episode's files folder, confined as `outputs_folder` confines it."""
    files_dir = getattr(episode.submission, "files_dir", None)
    if not isinstance(files_dir, str):
        return None
    return outputs_folder(run_dir, episode.system, episode.task_id, episode.attempt, files_dir)


def outputs_folder(run_dir: Path | str, system: str, task_id: str, attempt: int, files_dir: str) -> Path | None:
    """A submission's files folder, symlinks resolved, when it lies inside the episode's own
    folder (episode_dir's for its system, task and attempt, or the older slug-only one) and is a
    directory; None otherwise (no files_dir, or one pointing anywhere else in the run or outside)."""
    if not files_dir:
        return None
    try:
        root = Path(run_dir).resolve()
        folder = (root / files_dir).resolve()
        own = [d.resolve() for d in (episode_dir(root, system, task_id, attempt),
                                     legacy_episode_dir(root, system, task_id, attempt))]
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        return None
    return folder if any(folder.is_relative_to(d) for d in own) and folder.is_dir() else None


def output_file(folder: Path | str | None, name: str) -> Path | None:
    """`folder / name` when it resolves (symlinks too) inside `folder` and is a regular file;
    None otherwise. The path returned keeps the recorded name (a reader matches on it)."""
    if folder is None or not name:
        return None
    path = Path(folder) / name
    try:
        resolved, inside = path.resolve(), Path(folder).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return path if resolved.is_relative_to(inside) and resolved.is_file() else None
