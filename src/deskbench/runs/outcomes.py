"""One item's outcome, the same shape for every track.

`ItemOutcome` is what a track says about one (task, attempt) of one system once scored: whether
it could be scored at all (`unscored` is kept apart from wrong: a judge that failed, a chart
without a vision judge, a deliverable nobody graded), its score in [0, 1] and a binary `correct`.
Everything that compares systems across tracks (`deskbench compare`, analysis/compare.py) reads
these and nothing track-specific. Each track defines its own, on top of its own scorer, in
tracks/<name>/outcomes.py (`Track.outcomes`, `Track.outcome_definition`); runs/track_outcomes.py
asks a run's track for them. This module imports nothing of deskbench: the contract names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator


class ItemOutcome(BaseModel):
    """One (task, attempt) of one system, scored: the track-independent view."""

    task_id: str
    attempt: int = 0
    system: str
    status: Literal["scored", "unscored"]
    score: float | None = Field(default=None, ge=0.0, le=1.0)  # None exactly when unscored
    correct: bool | None = None  # None exactly when unscored

    @model_validator(mode="after")
    def _unscored_has_no_score(self) -> ItemOutcome:
        present = (self.score is not None, self.correct is not None)
        if present != ((True, True) if self.status == "scored" else (False, False)):
            raise ValueError(f"{self.system} / {self.task_id}: a scored item has a score and a correct flag, "
                             "an unscored one neither")
        return self


@dataclass
class OutcomeOptions:
    """What a track's scorer takes to turn a system's episodes into outcomes. `scorer` is the track's
    own (docqa's ScoreOptions, analytics' judges, ...), built by the track from a command's flags
    (`Track.scorer_options`); None is the track's default scorer (no judge)."""

    scorer: object | None = None
    concurrency: int = 8
