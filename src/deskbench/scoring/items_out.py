"""`score --items-out`: one JSON line per scored item, in one frame for every track.

A row is the track's item score (every metric, as its model dumps it) plus what a reader needs to
audit the number without the run: `question` (what the agent was asked), `gold` (what a right
answer is: answers, evidence pages, reference files, rubrics), `prediction` (what the agent gave:
answer text, citations, output files) and `judge` (each model judge's verdict and reasoning,
keyed by the scorer names the run store's judge_transcripts uses, so a row leads to the judge's
full calls). Each track builds its rows in its own `*_items.py`; this module holds the frame."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class ItemAudit(BaseModel):
    """What a row adds to the item's metrics."""

    question: str
    gold: dict[str, Any]
    prediction: dict[str, Any] | None  # None: the episode gave nothing (it failed, or no submission)
    judge: dict[str, dict[str, Any]] = Field(default_factory=dict)  # scorer name -> verdict, reasoning, error


class FileLike(BaseModel):
    """The fields of an output file record that a row shows."""

    name: str
    size: int
    sha256: str


def item_row(metrics: dict[str, Any], audit: ItemAudit, system: str | None = None) -> dict[str, Any]:
    """The metrics first (the keys the tracks wrote before), then the audit fields; `system`
    leads when the metrics do not name it."""
    row: dict[str, Any] = {"system": system} if system is not None and "system" not in metrics else {}
    row.update(metrics)
    row.update(audit.model_dump(mode="json"))
    return row


def output_files(files: Sequence[BaseModel], files_dir: str) -> list[dict[str, Any]]:
    """An episode's output files: name, size, sha256 and the path in the run directory."""
    out = []
    for f in files:
        rec = FileLike.model_validate(f, from_attributes=True)
        out.append({**rec.model_dump(), "path": f"{files_dir}/{rec.name}" if files_dir else rec.name})
    return out


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
