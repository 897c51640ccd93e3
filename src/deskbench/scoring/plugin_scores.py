"""`deskbench score RUN --scorer NAME`: a plugin `Scorer` (below; found by deskbench/plugins.py) in
place of the track's own. It is asked for each stored episode's outcome; the summary is what every track's
outcomes share (items, scored, unscored, mean score, share correct), unscored items left out of
the means and counted, as everywhere in deskbench. What it computed is stored as a scoring
(runs/scorings.py), as the track's own scoring is, so `deskbench view`, `export` and `info` show
the plugin's verdicts labelled with its name; its settings are the scorer's name and description
(a plugin has no flags of the track's)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from deskbench.console import out
from deskbench.errors import UserError
from deskbench.plugins import declared, instance, lookup
from deskbench.runs.outcomes import ItemOutcome
from deskbench.runs.scorings import ScoringSettings, StoredItem
from deskbench.runs.store import Episode, RunStore


@runtime_checkable
class Scorer(Protocol):
    """A plugin scorer for one track: `deskbench score RUN --scorer NAME` asks it for each stored
    episode's outcome in place of the track's default scorer. It sees the task and the episode
    (its `submission`, `status`, `trajectory`) as the store keeps them; an item it cannot decide
    is returned unscored, never as wrong."""

    track: str  # the track whose runs it scores
    description: str  # in words, for `deskbench list scorers` and the protocol note

    def score(self, task: BaseModel, episode: Episode) -> ItemOutcome: ...


def scorer(name: str) -> Scorer:
    """A plugin scorer by name, checked against the Scorer protocol."""
    plugin = lookup("scorers", name)
    if plugin is None:
        known = ", ".join(declared("scorers")) or "none installed"
        raise UserError(f"unknown scorer {name!r}; give an installed scorer ({known}) or package.module:Name")
    found = instance(plugin)
    if not isinstance(found, Scorer):
        raise UserError(f"scorer plugin {name!r} ({plugin.origin}) lacks track, description or score(task, episode)")
    return found


class PluginScores(BaseModel):
    """One system's numbers under a plugin scorer, as `--json` prints them."""

    scorer: str
    description: str
    n: int
    n_scored: int
    n_unscored: int
    mean_score: float | None
    accuracy: float | None


def plugin_outcomes(store: RunStore, name: str, system: str) -> list[ItemOutcome]:
    """Each episode of `system` scored by the plugin scorer `name` (which must be for the run's track)."""
    found = scorer(name)
    if found.track != store.track():
        raise UserError(f"scorer {name!r} scores {found.track} runs; {store.dir} is a {store.track()} run")
    tasks = {str(getattr(t, "id")): t for t in store.all_tasks()}  # noqa: B009 (every track's task has an id; BaseModel does not say so)
    outcomes = []
    for episode in store.episodes(system):
        outcome = found.score(tasks[episode.task_id], episode)
        if not isinstance(outcome, ItemOutcome):
            raise UserError(f"scorer {name!r} returned {type(outcome).__name__}, not an ItemOutcome")
        outcomes.append(outcome)
    return outcomes


def summarise(name: str, description: str, outcomes: Sequence[ItemOutcome]) -> PluginScores:
    scored = [o for o in outcomes if o.status == "scored"]
    return PluginScores(
        scorer=name, description=description, n=len(outcomes), n_scored=len(scored),
        n_unscored=len(outcomes) - len(scored),
        mean_score=sum(o.score or 0.0 for o in scored) / len(scored) if scored else None,
        accuracy=sum(bool(o.correct) for o in scored) / len(scored) if scored else None,
    )


def item_row(name: str, outcome: ItemOutcome) -> dict[str, object]:
    """A plugin item's stored row: the outcome the plugin gave, under its name (the track's
    item score is not known to a plugin; the viewer shows the stored outcome)."""
    return {"task_id": outcome.task_id, "system": outcome.system, "attempt": outcome.attempt, "scorer": name,
            "status": outcome.status, "score": outcome.score, "correct": outcome.correct}


def record_plugin_scoring(store: RunStore, name: str, description: str, reports: dict[str, PluginScores],
                          outcomes: Sequence[ItemOutcome]) -> int:
    """Keep the plugin's scoring in the run (one `record_scoring` transaction); returns its id."""
    settings = ScoringSettings(scorer=f"plugin scorer {name}: {description}", flags={"scorer": name})
    items = [StoredItem.of(o, item_row(name, o), reason=f"the plugin scorer {name} did not score it")
             for o in outcomes]
    return store.record_scoring(store.track(), settings, {s: r.model_dump(mode="json") for s, r in reports.items()},
                                items)


def show_plugin_scores(store: RunStore, name: str, systems: Sequence[str], *, as_json: bool) -> None:
    description = scorer(name).description
    outcomes = {s: plugin_outcomes(store, name, s) for s in systems}
    reports = {s: summarise(name, description, found) for s, found in outcomes.items()}
    record_plugin_scoring(store, name, description, reports, [o for found in outcomes.values() for o in found])
    if as_json:
        print(json.dumps({s: r.model_dump() for s, r in reports.items()}))
        return
    for s, r in reports.items():
        mean = "n/a" if r.mean_score is None else f"{r.mean_score:.3f}"
        acc = "n/a" if r.accuracy is None else f"{r.accuracy:.3f}"
        out.print(f"{s}: score {mean}, correct {acc} over {r.n_scored} items ({r.n_unscored} unscored)",
                  markup=False)
    out.print(f"scorer: {name} (plugin): {description}", markup=False)
