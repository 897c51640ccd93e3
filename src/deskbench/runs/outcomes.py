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
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, model_validator

OptionsT = TypeVar("OptionsT", bound=BaseModel)


class ItemOutcome(BaseModel):
    """One (task, attempt) of one system, scored: the track-independent view."""

    task_id: str
    attempt: int = 0
    system: str
    status: Literal["scored", "unscored"]
    score: float | None = Field(default=None, ge=0.0, le=1.0)  # None exactly when unscored
    correct: bool | None = None  # None exactly when unscored
    # the answer as the track compares two attempts' answers (docqa the normalised answer text,
    # analytics the final value, deliverables the verifiers' outcomes): the consistency across
    # attempts (scoring/attempts.py) reads it; None: not known. Kept apart from score: two wrong
    # attempts may agree, two right ones may differ.
    answer: str | None = None

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


def options_as(options: BaseModel | None, model: type[OptionsT]) -> OptionsT:
    """A command's track options as the track's model (`RunRequest.options_as`,
    `ScorerRequest.options_as`): the model's defaults when none were given."""
    if options is None:
        return model()
    if isinstance(options, model):
        return options
    raise TypeError(f"this request carries {type(options).__name__}, not {model.__name__}")


@dataclass(frozen=True)
class ScorerRequest:
    """What a track builds its scorer from (`Track.scorer_options`), as `prepare` gets a RunRequest:
    --judge, the judge calls in flight, and in `options` the track's own options of `deskbench
    score`, a validated instance of its `score_options` model (built once by the core from a
    command's flags, runs/track_outcomes.py scorer_request); None: the model's defaults."""

    judge: str | None = None
    concurrency: int = 8
    options: BaseModel | None = None

    def options_as(self, model: type[OptionsT]) -> OptionsT:
        """The track's score options as its model (the track that declared `model` asks)."""
        return options_as(self.options, model)
