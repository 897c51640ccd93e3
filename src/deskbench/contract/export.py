"""What a track says of its tasks in an export (`deskbench export`: runs/export/samples.py), through
the `export_task` hook of contract/track.py. Plain data: it imports nothing of deskbench."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskText:
    """A task as an export shows it: what was asked, what the gold answer is, and the rest of the
    gold (evidence pages, key points) as metadata."""

    input: str
    target: list[str]
    gold: dict[str, Any] = field(default_factory=dict)
