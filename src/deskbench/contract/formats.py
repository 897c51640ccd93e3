"""The tracks this process knows, as the run store sees them: by name, with the few members it
uses to write and read a run (its task and submission types, `task_json`, `load_task`).

Why a module of its own: the contract (contract/track.py) names the run store in its hooks, so
the store sits below the contract and the registry (contract/registry.py) and may not import
them. It asks this module instead, which imports nothing above the store: it loads every
installed `deskbench.tracks` entry point (deskbench/plugins.py) on first use, the built-in tracks
too (deskbench's pyproject.toml declares them as any plugin does: no list of their names here);
the registry adds the others (`register_track`) and hands every one out typed as `Track`. The
objects kept here are the registry's tracks: one table, two views of it, in the order each track
declares (`Track.order`, then the name).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from deskbench.errors import UserError

DEFAULT_ORDER = 100  # Track.order of a track that says none: after the built-ins (10, 20, 30), by name


@runtime_checkable
class TrackFormat(Protocol):
    """What the run store reads of a track (every `contract.track.Track` has these members)."""

    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def task_type(self) -> type[BaseModel]: ...

    @property
    def submission_type(self) -> type[BaseModel]: ...

    def task_json(self, task: BaseModel) -> str: ...

    def load_task(self, text: str) -> BaseModel: ...


_TRACKS: dict[str, TrackFormat] = {}
_loaded = False


def add(track: TrackFormat) -> None:
    """Keep a track under its name (the registry checks it and refuses a taken name first)."""
    _TRACKS[track.name] = track


def remove(name: str) -> None:
    _TRACKS.pop(name, None)


def registered(name: str) -> TrackFormat | None:
    """The track kept under `name`, without loading any (the registry's check of a taken name)."""
    return _TRACKS.get(name)


def order_of(track: TrackFormat) -> tuple[int, str]:
    """Where a track is listed: its declared `order` (contract/track.py), then its name."""
    order = getattr(track, "order", DEFAULT_ORDER)
    return (order if isinstance(order, int) else DEFAULT_ORDER, track.name)


def loaded() -> dict[str, TrackFormat]:
    """Every track by name, in the order the tracks declare (`order_of`); the installed tracks
    (the built-ins among them) are loaded on the first call."""
    global _loaded
    if not _loaded:
        _loaded = True
        _load_installed_tracks()
    return dict(sorted(_TRACKS.items(), key=lambda kv: order_of(kv[1])))


def shipped() -> tuple[str, ...]:
    """The names of the tracks deskbench itself ships (its own `deskbench.tracks` entry points),
    in their order: what `deskbench list` calls built-in and what cannot be unregistered."""
    from deskbench.plugins import builtin_entry_points

    own = set(builtin_entry_points("tracks"))
    return tuple(name for name, track in loaded().items() if name in own)


def _load_installed_tracks() -> None:
    """The installed `deskbench.tracks` entry points, deskbench's own and the plugins' (a broken
    one is one line naming it: deskbench/plugins.py). Without deskbench's own the install is
    stale (its metadata predates them): one line saying how to refresh it."""
    from deskbench.plugins import builtin_entry_points, declared, instance, lookup

    if not builtin_entry_points("tracks"):
        raise UserError("deskbench's installed metadata declares none of its tracks (entry points "
                        "`deskbench.tracks`, read from pyproject.toml at install time); reinstall it: "
                        "pip install -e . (from the checkout) or pip install --force-reinstall deskbench")
    for name in declared("tracks"):
        plugin = lookup("tracks", name)
        assert plugin is not None
        track = instance(plugin)
        if not subclasses_track(track):
            raise UserError(f"track plugin {name!r} ({plugin.origin}) does not subclass deskbench.contract.track.Track "
                            "(contract/registry.py)")
        assert isinstance(track, TrackFormat)
        known = _TRACKS.get(track.name)
        if known is not None and known is not track:
            raise UserError(f"a track named {track.name!r} is already registered ({known.title}); choose another name")
        _TRACKS[track.name] = track


def subclasses_track(value: object) -> bool:
    """Whether `value` is an instance of contract.track.Track, told without importing it (that
    module names the store in its hooks: importing it here would be a cycle)."""
    return any(c.__module__ == "deskbench.contract.track" and c.__qualname__ == "Track" for c in type(value).__mro__)


def named(name: str) -> TrackFormat:
    """The track called `name` (a run's meta says it; the store checks it is installed first)."""
    found = loaded().get(name)
    if found is None:
        raise UserError(f"unknown track {name!r}; the tracks are: {', '.join(loaded())}")
    return found


def of_task_type(kind: type[BaseModel]) -> TrackFormat | None:
    """The track whose task type is `kind`, if any."""
    return next((t for t in loaded().values() if t.task_type is kind), None)


def of_task(task: BaseModel) -> TrackFormat:
    """The track whose task type `task` is (the store files a run's tasks under it)."""
    for track in loaded().values():
        if type(task) is track.task_type:
            return track
    raise TypeError(f"no registered track has tasks of type {type(task).__name__}")
