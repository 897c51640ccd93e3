"""The `Track` protocol and the registry of tracks.

A track is what the harness needs to know about one benchmark system: its task and submission
types (how the run store writes and reads them), which `--tasks` it claims, and how one item of
a system scores as a track-independent `ItemOutcome` (what `compare` reads), and its section of
the report. The built-in tracks (docqa, analytics, deliverables) are registered on first use;
another track registers itself with `register_track` and needs no edit anywhere else: the store
keeps its tasks and episodes, the runner runs its `PreparedRun`, `compare` compares its systems,
`report` shows its section.

This module imports no track: the store (a core module) asks it for a track by name or by task
type, and the built-ins are imported only when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.report.models import ReportSection
    from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
    from deskbench.runs.store import Episode, RunStore
    from deskbench.runs.track import PreparedRun, RunRequest

BUILTIN = ("docqa", "analytics", "deliverables")  # modules deskbench.tracks.<name>.track, each with TRACK


@runtime_checkable
class Track(Protocol):
    """One benchmark system of the harness."""

    name: str  # as stored in a run's meta and shown to users
    title: str  # "docqa (MADQA)"
    task_type: type[BaseModel]
    submission_type: type[BaseModel]
    outcome_definition: str  # how an item's score and binary outcome are defined, in words (compare shows it)
    agents: tuple[str, ...]  # the --agent names it runs (`deskbench run` lists them all for an unknown one)
    limit_category: str  # what `diagnose` calls an episode that ran out of its budget ("step_limit", "round_limit")
    run_options: frozenset[str]  # the flags of `deskbench run` it takes beyond every track's (runs/track_options.py)
    score_options: frozenset[str]  # the same for `deskbench score`
    compare_options: frozenset[str]  # and for `deskbench compare`

    def claims(self, tasks: Path, agents: Sequence[str]) -> bool:
        """Whether `deskbench run --tasks TASKS --agent ...` is this track's."""
        ...

    def task_json(self, task: BaseModel) -> str:
        """A task as the run store keeps it (a task may carry more than its model: a folder)."""
        ...

    def load_task(self, text: str) -> BaseModel:
        """The inverse of task_json."""
        ...

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        """Every scored (task, attempt) of `system`, unscored kept apart from wrong."""
        ...

    def scorer_options(self, params: Mapping[str, object]) -> AbstractContextManager[OutcomeOptions]:
        """The scorer `outcomes` takes, built from a command's flags (`params`: its parameters by
        name: judge, concurrency and the track's own) as `deskbench score` builds it; the judges it
        opens are closed when the context exits."""
        ...

    def report_section(self, stores: Sequence[RunStore], options: OutcomeOptions,
                       params: Mapping[str, object]) -> ReportSection:
        """This track's part of `deskbench report` over its runs (`stores`, in the order given, each
        with episodes): its data, the template that draws it, its Comparison and the judges it
        called. `options` is what `scorer_options(params)` built (open while this runs); `params`
        are the report command's parameters by name (pool_humans, corpus, reviewed_only, ...). A
        track with no tables of its own returns `deskbench.report.sections.outcomes_section(self,
        stores, options)`: a leaderboard and the pairwise tests from its outcomes."""
        ...

    def diagnose_output(self, episode: Episode, task: BaseModel | None) -> tuple[str, str]:
        """`diagnose`'s category (and a detail) for an episode that ended ok: "ok" when it produced
        what the task asks for, else why not ("no_answer", "file_not_produced", ...)."""
        ...

    def prepare(self, request: RunRequest) -> PreparedRun:
        """Check the request, open the store and the models, and hand the one runner the run
        (runs/track.py execute_run). A user's mistake is a UserError before anything is created."""
        ...

    def show_scores(self, store: RunStore, systems: Sequence[str], request: RunRequest, *, as_json: bool) -> None:
        """What `deskbench run` prints once the episodes are done: the systems' scores."""
        ...


_TRACKS: dict[str, Track] = {}
_builtins_loaded = False


def register_track(track: Track) -> None:
    """Add a track (a plugin's, a test's). A second track under a taken name is refused."""
    if not isinstance(track, Track):
        raise TypeError(f"{track!r} does not implement the Track protocol")
    known = _TRACKS.get(track.name)
    if known is not None and known is not track:
        raise UserError(f"a track named {track.name!r} is already registered ({known.title}); choose another name")
    _TRACKS[track.name] = track


def unregister_track(name: str) -> None:
    """Remove a registered track (tests that register their own clean up with this)."""
    if name in BUILTIN:
        raise ValueError(f"{name} is a built-in track")
    _TRACKS.pop(name, None)


def tracks() -> dict[str, Track]:
    """Every registered track by name, the built-ins first."""
    global _builtins_loaded
    if not _builtins_loaded:
        for name in BUILTIN:
            _TRACKS.setdefault(name, importlib.import_module(f"deskbench.tracks.{name}.track").TRACK)
        _builtins_loaded = True
        _load_plugin_tracks()
    return dict(sorted(_TRACKS.items(), key=lambda kv: (kv[0] not in BUILTIN, BUILTIN.index(kv[0])
                                                         if kv[0] in BUILTIN else 0, kv[0])))


def _load_plugin_tracks() -> None:
    """The installed `deskbench.tracks` entry points, registered after the built-ins (a broken one
    is one line naming it: deskbench/plugins.py)."""
    from deskbench.plugins import declared, instance, lookup

    for name in declared("tracks"):
        plugin = lookup("tracks", name)
        assert plugin is not None
        track = instance(plugin)
        if not isinstance(track, Track):
            raise UserError(f"track plugin {name!r} ({plugin.origin}) does not implement the Track protocol "
                            "(tracks/registry.py)")
        register_track(track)


def get_track(name: str) -> Track:
    """A registered track by name, or a plugin's by package.module:NAME (registered on first use)."""
    from deskbench.plugins import instance, is_module_path, lookup

    if name not in tracks() and is_module_path(name):
        plugin = lookup("tracks", name)
        assert plugin is not None
        track = instance(plugin)
        if not isinstance(track, Track):
            raise UserError(f"track {name} does not implement the Track protocol (tracks/registry.py)")
        register_track(track)
        return track
    found = tracks().get(name)
    if found is None:
        raise UserError(f"unknown track {name!r}; the tracks are: {', '.join(tracks())}")
    return found


def track_of_task(task: BaseModel) -> Track:
    """The track whose task type `task` is (the store files a run's tasks under it)."""
    for track in tracks().values():
        if type(task) is track.task_type:
            return track
    raise TypeError(f"no registered track has tasks of type {type(task).__name__}")


def track_for(tasks: Path, agents: Sequence[str]) -> Track:
    """The track a `deskbench run` is for: the first that claims it, other tracks before the
    built-in docqa, which claims any tasks file (it is the default). A plugin agent no track
    names runs on the track it declares (deskbench/plugins.py)."""
    if agents and not any(agents[0] in t.agents for t in tracks().values()):
        from deskbench.plugins import agent_track

        declared_track = agent_track(agents[0])
        if declared_track is not None:
            return get_track(declared_track)
    ordered = [t for t in tracks().values() if t.name != "docqa"] + [tracks()["docqa"]]
    for track in ordered:
        if track.claims(tasks, agents):
            return track
    raise UserError(f"no track takes --tasks {tasks}: give a tasks JSONL or a deliverables package folder")
