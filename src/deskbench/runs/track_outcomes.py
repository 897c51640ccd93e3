"""A run's outcomes through its track: `outcomes_of` (the store's track's scorer) and
`show_scores` (what `run` and `score RUN` print, the track's table or the core's default).

Why apart from runs/outcomes.py: `ItemOutcome` is named by the contract (contract/track.py), so
its module sits below the contract; asking a run's track needs the registry, above it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deskbench.contract.registry import get_track
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
from deskbench.runs.store import RunStore

if TYPE_CHECKING:
    from deskbench.contract.track import Track
    from deskbench.runs.track import RunRequest


def outcomes_of(store: RunStore, system: str, options: OutcomeOptions | None = None) -> list[ItemOutcome]:
    """Every scored (task, attempt) of `system` in the run, by its track's definition."""
    return get_track(store.track()).outcomes(store, system, options or OutcomeOptions())


def show_scores(track: Track, store: RunStore, systems: Sequence[str], request: RunRequest, *,
                as_json: bool) -> None:
    """What `deskbench run` (and `score RUN`) print: the track's own table (its `show_scores`
    hook), else per system the mean score and accuracy over the items that could be scored, and
    how many could not (never a zero)."""
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
