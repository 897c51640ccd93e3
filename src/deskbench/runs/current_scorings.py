"""Which stored verdicts still hold: the items of a system whose latest stored scoring
(runs/scorings.py) is still what a rescore would read, and those whose episode was run again or
whose track says something else the scoring reads changed since (`Track.scoring_change_times`:
deliverables' rubric grades and QC actions). The viewer and the exports show the held ones and
rescore the stale ones offline, saying why.

Why apart from runs/scorings.py: that module sits below the run store (the store writes its
tables), and asking the track needs the registry, which sits above it (contract/registry.py)."""

from __future__ import annotations

from pydantic import BaseModel

from deskbench.contract.registry import get_track
from deskbench.runs.scorings import Key, Scoring, StoredItem
from deskbench.runs.store import RunStore


class Stale(BaseModel):
    """A stored item that no longer holds: what changed after which scoring."""

    scoring: Scoring
    what: str  # "the episode was run again", "its grade changed"

    def note(self) -> str:
        return f"{self.what} after {self.scoring.label()}; run 'deskbench score' again to store its verdict"


def current_items(store: RunStore, system: str) -> tuple[dict[Key, tuple[Scoring, StoredItem]], dict[Key, Stale]]:
    """The items of `system` whose latest stored scoring still holds, and those whose episode
    (or, by the track's `scoring_change_times`, grade) changed since: those are the offline
    scorer's to show."""
    stored = store.scored_items(system)
    if not stored:
        return {}, {}
    finished = store.finished_times(system)
    others = get_track(store.track()).scoring_change_times(store, system)
    held: dict[Key, tuple[Scoring, StoredItem]] = {}
    stale: dict[Key, Stale] = {}
    for key, (scoring, item) in stored.items():
        if key not in finished:
            continue  # the episode is gone
        if finished[key] > scoring.created:
            stale[key] = Stale(scoring=scoring, what="the episode was run again")
        elif others.get(key, "") > scoring.created:
            stale[key] = Stale(scoring=scoring, what="its grade changed")
        else:
            held[key] = (scoring, item)
    return held, stale
