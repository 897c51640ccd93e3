"""What a track says in an export (`deskbench export`: runs/export/): its tasks as text (the
`export_task` hook of contract/track.py, read by runs/export/samples.py) and the formats it adds
(`export_formats`). Plain data and protocols: it imports nothing of deskbench."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class TaskText:
    """A task as an export shows it: what was asked, what the gold answer is, and the rest of the
    gold (evidence pages, key points) as metadata."""

    input: str
    target: list[str]
    gold: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportOptions:
    """What every format may take. `images`: render the images the transcripts refer to (corpus
    pages, stored blobs) into the export; False leaves a text placeholder naming the image.
    `corpus`: read corpus pages from here instead of the corpus each system recorded."""

    images: bool = True
    corpus: Path | None = None


@runtime_checkable
class Exporter(Protocol):
    """One export format: writes the run at `run_dir` under `out`, returns the files written."""

    name: str
    summary: str  # one line for `deskbench export --help`

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> list[Path]: ...
