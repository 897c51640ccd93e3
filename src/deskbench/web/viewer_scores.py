"""Per-episode scores for the episode viewer, never through the network: each episode shows the
latest scoring stored in its run (`deskbench score` or `run` keep what they computed, judges'
verdicts included: runs/scorings.py) that covered it, naming it; an episode no stored scoring
covers (the run was never scored, or the episode or its grade changed since) is scored offline
by the track's default scorer (no judge) and labelled so.

What a track shows is its own (Track.viewer_views, contract/viewer.py): its offline scorer with
the item's details, and how a stored `--items-out` row reads back (the same function shows both,
so no rule is written twice), and the tables its scores are also computed from. A track without
them (a plugin's) is scored with `Track.outcomes` and shows no details. Anything that cannot be
decided is "unscored" with the reason, never "wrong"."""

from __future__ import annotations

from deskbench.contract.viewer import OFFLINE, EpisodeScore, Scores, ViewerViews
from deskbench.errors import UserError
from deskbench.runs.current_scorings import current_items
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.scorings import Scoring, StoredItem
from deskbench.runs.store import RunStore

__all__ = ["OFFLINE", "OFFLINE_SHORT", "EpisodeScore", "Scores", "stamp", "stored_score", "system_scores", "views_of"]

CONCURRENCY = 4  # the outcomes of a track whose views give no scorer; no judge calls
OFFLINE_SHORT = "the track's default scorer, offline (no judge)"

# what a score is computed from, by table (-> its rows' time column): a write to any of them makes
# the viewer score again (RunStore.stamp); a track adds its own tables (ViewerViews.stamped)
STAMPED: dict[str, str | None] = {"tasks": None, "episodes": "finished_at", "scorings": "created"}


def views_of(track: str) -> ViewerViews:
    """The track's viewer views; the core's defaults for a track that has none or is not
    installed (its runs still show, as JSON)."""
    from deskbench.contract.registry import get_track

    try:
        views = get_track(track).viewer_views()
    except UserError:
        return ViewerViews()
    return views if views is not None else ViewerViews()


def stamp(store: RunStore) -> tuple[object, ...]:
    """Changes whenever anything a score of this run is computed from is written."""
    return store.stamp({**STAMPED, **views_of(store.track()).stamped})


def outcome_scores(store: RunStore, system: str) -> Scores:
    """A track whose views give no scorer: its outcomes, on its default (no-judge) scorer."""
    from deskbench.contract.registry import get_track

    return {(o.task_id, o.attempt): EpisodeScore().with_outcome(o)
            for o in get_track(store.track()).outcomes(store, system, OutcomeOptions(concurrency=CONCURRENCY))}


def stored_score(track: str, scoring: Scoring, item: StoredItem) -> EpisodeScore:
    """An item of a stored scoring, as the viewer shows it: the row's details, the stored outcome."""
    try:
        shown = views_of(track).stored(item.row) or EpisodeScore()
    except ValueError:  # a row another deskbench wrote: the outcome still holds
        shown = EpisodeScore()
    return shown.model_copy(update={
        "source": scoring.label(), "stored": True, "scoring": scoring.id, "status": item.status, "score": item.score, "correct": item.correct,
        "why_unscored": item.reason if item.status != "scored" else ""})


def system_scores(store: RunStore, system: str) -> tuple[Scores, str]:
    """Every episode's score of `system`, and why none could be computed offline ("" when they
    were): the latest stored scoring that still holds for each episode, else the offline scorer's
    (a run it cannot read, e.g. a package folder moved, shows those episodes unscored with that
    reason instead of failing the page)."""
    track = store.track()
    held, stale = current_items(store, system)
    out: Scores = {key: stored_score(track, scoring, item) for key, (scoring, item) in held.items()}
    if set(out) >= store.done(system):
        return out, ""
    try:
        offline = views_of(track).scores(store, system)
        if offline is None:
            offline = outcome_scores(store, system)
    except (UserError, OSError) as exc:
        return out, f"could not score: {exc}"
    for key, shown in offline.items():
        if key not in out:
            note = stale[key].note() if key in stale else ""
            out[key] = shown.model_copy(update={"source": f"{OFFLINE_SHORT}: {note}" if note else OFFLINE})
    return out, ""

