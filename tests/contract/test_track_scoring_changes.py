"""What else a track's scoring reads is the track's to say (Track.scoring_change_times), not a
table keyed by track name in the core: a stored verdict older than it no longer holds, for a
fourth track as for deliverables' grades (runs/current_scorings.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from echo_track import EchoSubmission, EchoTask, EchoTrack

from deskbench.contract.registry import register_track, unregister_track
from deskbench.contract.track import Track
from deskbench.runs.current_scorings import current_items
from deskbench.runs.outcomes import ItemOutcome
from deskbench.runs.scorings import ScoringSettings, StoredItem
from deskbench.runs.store import Episode, RunStore

SYSTEM = "echo-upper"
TASKS = [EchoTask(id=f"e{i}", text=t, expected=t.upper()) for i, t in enumerate(["a", "b", "c"])]


class ReviewedEcho(EchoTrack):
    """The echo track with a reviewer whose verdicts its scoring reads (as deliverables' grades)."""

    name = "echo-reviewed"
    reviewed: dict[tuple[str, int], str] = {}

    def scoring_change_times(self, store: RunStore, system: str) -> Mapping[tuple[str, int], str]:
        return self.reviewed if system == SYSTEM else {}


@pytest.fixture
def reviewed() -> Iterator[ReviewedEcho]:
    track = ReviewedEcho()
    register_track(track)
    yield track
    unregister_track(track.name)


def _scored_run(out: Path) -> RunStore:
    store = RunStore(out)
    store.save_tasks(TASKS)
    for t in TASKS:
        store.record(Episode(task_id=t.id, system=SYSTEM, status="ok",
                             submission=EchoSubmission(id=t.id, answer=t.text.upper()), finished_at="2000-01-01T00:00:00+00:00"))
    items = [StoredItem.of(ItemOutcome(task_id=t.id, system=SYSTEM, status="scored", score=1.0, correct=True), {})
             for t in TASKS]
    store.record_scoring(store.track(), ScoringSettings(scorer="exact"), {SYSTEM: {}}, items)
    return store


def test_the_default_reads_nothing_else() -> None:
    assert EchoTrack().scoring_change_times(RunStore.__new__(RunStore), SYSTEM) == {}
    assert "scoring_change_times" in vars(Track)


def test_a_change_the_track_names_makes_its_stored_verdict_stale(reviewed: ReviewedEcho, tmp_path: Path) -> None:
    store = _scored_run(tmp_path / "run")
    assert store.track() == "echo-reviewed"
    held, stale = current_items(store, SYSTEM)
    assert sorted(held) == [("e0", 0), ("e1", 0), ("e2", 0)] and stale == {}
    reviewed.reviewed = {("e1", 0): "2999-01-01T00:00:00+00:00", ("e2", 0): "2000-01-02T00:00:00+00:00"}
    held, stale = current_items(store, SYSTEM)
    assert sorted(held) == [("e0", 0), ("e2", 0)]  # reviewed before the scoring: it still holds
    assert list(stale) == [("e1", 0)] and stale[("e1", 0)].what == "its grade changed"
    assert "run 'deskbench score' again" in stale[("e1", 0)].note()
