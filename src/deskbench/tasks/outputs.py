"""What a code episode leaves behind, in every track whose agents write code (the shared code loop,
agents/code_loop.py): the files it saved to /mnt/result and why it stopped. Kept in the core because
the analytics and deliverables submissions both carry them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class OutputFileRecord(BaseModel):
    """A file the agent saved to /mnt/result, kept in the run directory."""

    model_config = ConfigDict(extra="forbid")
    name: str  # posix path relative to /mnt/result
    size: int = Field(ge=0)
    sha256: str


StopReason = Literal["answer", "round_limit", "error"]
