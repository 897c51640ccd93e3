"""One item's outcome, the same shape for every track.

`ItemOutcome` is what a track says about one (task, attempt) of one system once scored: whether
it could be scored at all (`unscored` is kept apart from wrong: a judge that failed, a chart
without a vision judge, a deliverable nobody graded), its score in [0, 1] and a binary `correct`.
Everything that compares systems across tracks (`deskbench compare`, analysis/compare.py) reads
these and nothing track-specific. Each track defines its own, on top of its own scorer, in
tracks/<name>/outcomes.py (`Track.outcomes`, `Track.outcome_definition`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, model_validator

from deskbench.runs.store import RunStore

if TYPE_CHECKING:
    from deskbench.contract.track import Track
    from deskbench.runs.track import RunRequest


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


def outcomes_of(store: RunStore, system: str, options: OutcomeOptions | None = None) -> list[ItemOutcome]:
    """Every scored (task, attempt) of `system` in the run, by its track's definition."""
    from deskbench.contract.registry import get_track

    return get_track(store.track()).outcomes(store, system, options or OutcomeOptions())


def show_scores(track: Track, store: RunStore, systems: Sequence[str], request: RunRequest, *,
                as_json: bool) -> None:
    """What `deskbench run` (and `score RUN`) print: the track's own table (its `show_scores`
    hook), else per system the mean score and accuracy over the items that could be scored, and
    how many could not (never a zero)."""
    import json

    if track.show_scores(store, systems, request, as_json=as_json):
        return

    from deskbench.console import out

    with track.scorer_options({"judge": request.judge, "concurrency": request.concurrency}) as options:
        rows: dict[str, dict[str, float | int | None]] = {}
        for system in systems:
            items = track.outcomes(store, system, options)
            scored = [o for o in items if o.status == "scored"]
            rows[system] = {
                "scored": len(scored), "unscored": len(items) - len(scored),
                "mean_score": sum(o.score or 0.0 for o in scored) / len(scored) if scored else None,
                "accuracy": sum(bool(o.correct) for o in scored) / len(scored) if scored else None,
            }
    if as_json:
        print(json.dumps(rows))
        return
    for system, row in rows.items():
        acc = "n/a" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
        out.print(f"{system}: accuracy {acc} over {row['scored']} scored items"
                  + (f" ({row['unscored']} could not be scored)" if row["unscored"] else ""))
