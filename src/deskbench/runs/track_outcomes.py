"""A run's outcomes through its track: `outcomes_of` (the store's track's scorer), `scorer_request`
(what a track's scorer is built from, its score options validated once) and `show_scores` (what
`run` and `score RUN` print, the track's table or the core's default).

Why apart from runs/outcomes.py: `ItemOutcome` is named by the contract (contract/track.py), so
its module sits below the contract; asking a run's track needs the registry, above it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from deskbench.contract.registry import get_track
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
from deskbench.runs.store import RunStore
from deskbench.scoring.attempts import Attempt, Reliability, attempt_metrics

if TYPE_CHECKING:
    from deskbench.contract.track import Track
    from deskbench.runs.track import RunRequest


def outcomes_of(store: RunStore, system: str, options: OutcomeOptions | None = None) -> list[ItemOutcome]:
    """Every scored (task, attempt) of `system` in the run, by its track's definition."""
    return get_track(store.track()).outcomes(store, system, options or OutcomeOptions())


def scorer_request(track: Track, params: Mapping[str, object], *, judge: str | None = None,
                   concurrency: int = 8) -> ScorerRequest:
    """What a judging command (`compare`, `report`) builds `track`'s scorer from: --judge, the judge
    calls in flight, and the track's score options validated once from the command's parameters
    by name (runs/track_options.py: a value its `score_options` model refuses is one line naming
    the flag, exit 2; a parameter the model does not declare is not the track's, and left out)."""
    from deskbench.runs.track_options import track_options

    return ScorerRequest(judge=judge, concurrency=concurrency, options=track_options("score", track, params))


def show_scores(track: Track, store: RunStore, systems: Sequence[str], request: RunRequest, *,
                as_json: bool) -> None:
    """What `deskbench run` (and `score RUN`) print: the track's own table (its `show_scores`
    hook), else per system the mean score and accuracy over the items that could be scored, and
    how many could not (never a zero)."""
    if track.show_scores(store, systems, request, as_json=as_json):
        return

    from deskbench.console import out

    given = request.options if isinstance(request.options, track.score_options) else None  # from `run`: its run options
    with track.scorer_options(ScorerRequest(judge=request.judge, concurrency=request.concurrency, options=given)) as options:
        rows: dict[str, dict[str, float | int | None]] = {}
        held: dict[str, Reliability] = {}
        for system in systems:
            items = track.outcomes(store, system, options)
            scored = [o for o in items if o.status == "scored"]
            rows[system] = {
                "scored": len(scored), "unscored": len(items) - len(scored),
                "mean_score": sum(o.score or 0.0 for o in scored) / len(scored) if scored else None,
                "accuracy": sum(bool(o.correct) for o in scored) / len(scored) if scored else None,
            }
            k = max((o.attempt + 1 for o in items), default=1)
            if k > 1:  # --attempts K: pass^k (every attempt correct) and the consistency of answers
                r = attempt_metrics([Attempt(o.task_id, o.attempt, o.score, o.correct, o.answer) for o in items],
                                    k).reliability
                held[system] = r
                rows[system] |= {"k": k, "pass_hat": r.pass_hat, "consistency": r.consistency}
    if as_json:
        print(json.dumps(rows))
        return
    for system, row in rows.items():
        acc = "n/a" if row["accuracy"] is None else f"{row['accuracy']:.3f}"
        out.print(f"{system}: accuracy {acc} over {row['scored']} scored items"
                  + (f" ({row['unscored']} could not be scored)" if row["unscored"] else ""))
        if system in held:
            out.print(f"{system}: {held[system].line()}")
