"""What the generator writes next to tasks.jsonl: one ManifestRecord per question, and the report.

The manifest is what makes the collection checkable: each fact a question uses, the page it
sits on and how it is shown, and for derived answers the computation, so `validate_docqa` can
recompute every answer without trusting the generator.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from deskbench.tracks.docqa.tasks import HopType

Vision = Literal["table", "form", "checkbox", "colour", "multi_column", "scanned"]


class FactRecord(BaseModel):
    id: str
    document: str
    page: int = Field(ge=1)
    subject: str
    attribute: str
    value: str
    number: float | None = None
    layout: Literal["text", "table", "form", "checkbox", "colour", "multi_column"]
    scanned: bool = False
    options: list[str] = Field(default_factory=list)  # checkbox options / colour levels


class ManifestRecord(BaseModel):
    id: str
    kind: str
    hop_type: HopType
    facts: list[FactRecord]
    needs_vision: bool
    vision: list[Vision] = Field(default_factory=list)
    computation: dict[str, Any] | None = None
    injection_kind: str | None = None


class DocQAGenReport(BaseModel):
    """Counts for the CLI and the benchmark: what was generated, and the proportions hit."""

    documents: int
    distractors: int
    pages: int
    scanned_pages: int
    questions: int
    by_kind: dict[str, int]
    by_hop_type: dict[str, int]
    by_vision: dict[str, int]
    multi_hop_share: float
    vision_share: float
    injected: int
