"""The registry of tracks (the contract itself: contract/track.py).

A track is what the harness needs to know about one benchmark system: its task and submission
types (how the run store writes and reads them), which `--tasks` it claims, and how one item of
a system scores as a track-independent `ItemOutcome` (what `compare` reads), and its section of
the report. The built-in tracks are found on first use as a plugin's are (the `deskbench.tracks`
entry points of deskbench's own pyproject.toml);
another track registers itself with `register_track` and needs no edit anywhere else: the store
keeps its tasks and episodes, the runner runs its `PreparedRun`, `compare` compares its systems,
`report` shows its section.

This module imports no track: every track is loaded from its entry point only when first asked for.
The table of tracks is contract/formats.py's, which the run store reads (the store sits below
the contract, whose hooks name it); this module hands the same tracks out typed as `Track`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.contract import formats
from deskbench.contract.track import Track
from deskbench.errors import UserError


def __getattr__(name: str) -> tuple[str, ...]:
    """`BUILTIN`: the names of the tracks deskbench ships, in their order, read from its installed
    entry points when first asked (contract/formats.py shipped): no list of names in the core."""
    if name == "BUILTIN":
        return formats.shipped()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_track(track: Track) -> None:
    """Add a track (a plugin's, a test's). A second track under a taken name is refused."""
    if not isinstance(track, Track):
        raise TypeError(f"{track!r} does not subclass deskbench.contract.track.Track")
    known = formats.registered(track.name)
    if known is not None and known is not track:
        raise UserError(f"a track named {track.name!r} is already registered ({known.title}); choose another name")
    formats.add(track)


def unregister_track(name: str) -> None:
    """Remove a registered track (tests that register their own clean up with this)."""
    if name in formats.shipped():
        raise ValueError(f"{name} is a built-in track")
    formats.remove(name)


def tracks() -> dict[str, Track]:
    """Every registered track by name, the built-ins first, then the installed plugin tracks
    (entry points, loaded on first use: contract/formats.py) and the registered ones by name."""
    found: dict[str, Track] = {}
    for name, track in formats.loaded().items():
        assert isinstance(track, Track)  # formats.py keeps only what subclasses Track
        found[name] = track
    return found


def get_track(name: str) -> Track:
    """A registered track by name, or a plugin's by package.module:NAME (registered on first use)."""
    from deskbench.plugins import instance, is_module_path, lookup

    if name not in tracks() and is_module_path(name):
        plugin = lookup("tracks", name)
        assert plugin is not None
        track = instance(plugin)
        if not isinstance(track, Track):
            raise UserError(f"track {name} does not subclass deskbench.contract.track.Track (contract/registry.py)")
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
    """The track a `deskbench run` is for. The tasks decide first: a tasks file whose first line
    is one track's task (or a folder a track claims) is that track's, and an agent of another
    track is one line naming both. Tasks no track recognises (a bad first line) go to the first
    track that claims them, a track that claims any tasks file (`claims_any_file`, docqa) after the others;
    a plugin agent no track names runs on the track it declares (deskbench/plugins.py), and the
    track's reader names the bad field."""
    from deskbench.paths import check_tasks_path

    check_tasks_path(tasks)  # missing, a run directory, a corpus, PDFs, empty: one line before any track
    agent = agents[0] if agents else None
    owners = tracks_of_tasks(tasks)
    if owners:
        return _agent_on(owners, agent, tasks)
    if agent is not None and not any(agent in t.agents for t in tracks().values()):
        from deskbench.plugins import agent_track

        declared_track = agent_track(agent)
        if declared_track is not None:
            return get_track(declared_track)
    ordered = sorted(tracks().values(), key=lambda t: t.claims_any_file)  # a catch-all last (stable)
    for track in ordered:
        if track.claims(tasks, agents):
            return track
    raise UserError(f"no track takes --tasks {tasks}: give a tasks JSONL or a deliverables package folder")


def tracks_of_tasks(tasks: Path) -> list[Track]:
    """The tracks whose tasks `tasks` holds, told from the tasks themselves: a folder, the tracks
    that claim it whatever the agent; a file, the tracks whose task type its first line validates
    as (else those whose required fields it has all of: a task with a bad value is still that
    track's, and its reader names the field). Empty when none recognises it."""
    if tasks.is_dir():
        return [t for t in tracks().values() if t.claims(tasks, ())]
    import json

    from pydantic import ValidationError

    from deskbench.nearby import first_line

    try:
        line = first_line(tasks)
        row = json.loads(line) if line is not None else None
    except (OSError, ValueError):
        return []
    if line is None or not isinstance(row, dict):
        return []
    valid = []
    for track in tracks().values():
        try:
            track.task_type.model_validate_json(line)  # as the track's reader reads it
        except (ValidationError, ValueError, TypeError):
            continue
        valid.append(track)
    return valid or [t for t in tracks().values() if _has_required_fields(t.task_type, row)]


def _has_required_fields(task_type: type[BaseModel], row: dict[str, object]) -> bool:
    required = [f.alias or name for name, f in task_type.model_fields.items() if f.is_required()]
    return bool(required) and all(name in row for name in required)


def _agent_on(owners: list[Track], agent: str | None, tasks: Path) -> Track:
    """Of the tracks whose tasks these are, the one `agent` runs on; an agent of another track
    (built-in or a plugin's declared track) is refused in one line naming both tracks."""
    if agent is None:
        return owners[0]
    for track in owners:
        if agent in track.agents:
            return track
    home = [t for t in tracks().values() if agent in t.agents]
    if home:
        raise UserError(_other_track(owners[0], tasks, f"{agent} is {_a(home[0].name)} agent"))
    from deskbench.plugins import agent_track

    declared = agent_track(agent)
    if declared is None:
        return owners[0]  # an unknown name: the track's prepare names its agents
    for track in owners:
        if track.name == declared:
            return track
    raise UserError(_other_track(owners[0], tasks, f"{agent} is a plugin agent of the {declared} track"))


def _other_track(track: Track, tasks: Path, why: str) -> str:
    return (f"these are {track.name} tasks ({tasks}); {why}; the {track.name} agents are: "
            f"{', '.join(track.agents)} (or a plugin of the {track.name} track)")


def _a(name: str) -> str:
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"
