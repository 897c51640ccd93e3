"""Plugins: agents, scorers, tracks and model providers from outside the package.

Two ways in, both consulted only after the built-ins and only when a name is looked up:
- an entry point in the groups `deskbench.agents`, `deskbench.scorers`, `deskbench.tracks`,
  `deskbench.models`, `deskbench.retrievers` of an installed distribution (`deskbench list KIND` shows them);
- a module path `package.module:Name`, imported from sys.path and the current directory, so an
  agent under evaluation needs no install (`--agent my_agent:KeywordAgent`).

A plugin that fails to import or is not what its group needs is one line naming it (UserError,
exit 2), never a traceback. deskbench's own tracks are entry points of `deskbench.tracks` too
(`builtin_entry_points`), loaded the same way. The per-track agent registries, `models/registry.py`
PROVIDERS and `contract/formats.py` call `lookup`; this module imports nothing of deskbench but its errors
(the run store loads plugin tracks through it, so it sits below the store: no import cycles).

What each group's object is:
- agents: a class (or factory) built with no arguments, whose instances follow the agent
  Protocol of their track; its `track` attribute names the track (default "docqa"). A docqa agent
  gets the same `AgentContext` (model, corpus with `search`, settings) the built-ins get. Every
  call it makes through `ctx.model` is recorded by the harness (transcript, model-call steps,
  usage), as a built-in's Recorder records them (agents/plugin_calls.py agent_factory).
- scorers: a `Scorer` (scoring/plugin_scores.py): an object, or a class built with no arguments.
- tracks: an instance of `deskbench.contract.track.Track` (a subclass built with no arguments).
- models: a callable `(ModelSpec, timeout) -> ChatModel`, addressed by its provider prefix
  (`--model NAME/model-id`).
- retrievers: a `deskbench.search.retriever.RetrieverKind` (an object, or a class built with no
  arguments), addressed by name in `--retriever NAME[=MODEL]`.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Literal

from deskbench.errors import UserError

Kind = Literal["agents", "scorers", "tracks", "models", "retrievers", "cli"]
KINDS: tuple[Kind, ...] = ("agents", "scorers", "tracks", "models", "retrievers")  # what `deskbench list` lists
# "cli": a track's top-level commands for `deskbench --help`, a tuple of contract/cli.py
# TrackCommand in a light module, by track name (cli/root.py), so the help loads no track
GROUP: dict[Kind, str] = {kind: f"deskbench.{kind}" for kind in (*KINDS, "cli")}


@dataclass(frozen=True)
class Plugin:
    """One plugin found: its name, where it came from (shown by `deskbench list`), the object."""

    kind: Kind
    name: str
    origin: str  # "entry point of DIST VERSION" or "module path"
    value: object


_entry_points: dict[Kind, dict[str, EntryPoint]] = {}
_loaded: dict[tuple[Kind, str], Plugin] = {}


def is_module_path(name: str) -> bool:
    """`package.module:Name` (a model spec's `provider/model` and `NAME@URL` are not)."""
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr and "/" not in module and all(p.isidentifier() for p in module.split("."))
                and all(p.isidentifier() for p in attr.split(".")))


def declared(kind: Kind) -> dict[str, EntryPoint]:
    """The entry points of `kind` installed, by name (read once per process; nothing imported)."""
    if kind not in _entry_points:
        _entry_points[kind] = {ep.name: ep for ep in entry_points(group=GROUP[kind])}
    return _entry_points[kind]


def builtin_entry_points(kind: Kind) -> dict[str, EntryPoint]:
    """The entry points of `kind` deskbench itself declares (its pyproject.toml: the built-in
    tracks are found as any plugin's are), told by the module they point into."""
    package = __name__.partition(".")[0]
    return {name: ep for name, ep in declared(kind).items() if ep.module.partition(".")[0] == package}


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"entry point of {dist.name} {dist.version}" if dist is not None else "entry point"


def _import_attr(spec: str, what: str) -> object:
    """`package.module:Name` imported with the current directory on sys.path."""
    module_name, _, attr = spec.partition(":")
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        value: object = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except ModuleNotFoundError as exc:
        raise UserError(f"{what} {spec}: no module named {exc.name!r} on the Python path; run from the folder "
                        "holding it or add that folder to PYTHONPATH") from None
    except AttributeError:
        raise UserError(f"{what} {spec}: module {module_name} has no {attr!r}; check the name after the colon") from None
    except Exception as exc:  # a plugin's own import error: named, not a traceback
        raise UserError(f"{what} {spec} failed to import: {type(exc).__name__}: {exc}") from None
    return value


def lookup(kind: Kind, name: str) -> Plugin | None:
    """The plugin `name` of `kind` (an entry point's name or a module path), loaded on first
    lookup and kept; None when no entry point has that name and it is not a module path."""
    key = (kind, name)
    if key in _loaded:
        return _loaded[key]
    what = kind[:-1] if kind != "cli" else "track commands"
    if name in declared(kind):
        ep = declared(kind)[name]
        try:
            value = ep.load()
        except Exception as exc:
            raise UserError(f"{what} plugin {name!r} ({ep.value}, {_origin(ep)}) failed to load: "
                            f"{type(exc).__name__}: {exc}; fix or uninstall that package") from None
        found = Plugin(kind, name, _origin(ep), value)
    elif is_module_path(name):
        found = Plugin(kind, name, "module path", _import_attr(name, what))
    else:
        return None
    _loaded[key] = found
    return found


def instance(plugin: Plugin) -> object:
    """A class is built with no arguments (an agent, a scorer); anything else is used as it is."""
    if isinstance(plugin.value, type):
        try:
            return plugin.value()
        except Exception as exc:
            raise UserError(f"{plugin.kind[:-1]} plugin {plugin.name!r} ({plugin.origin}) could not be built "
                            f"with no arguments: {type(exc).__name__}: {exc}") from None
    return plugin.value


def agent_track(name: str) -> str | None:
    """The track a plugin agent declares (its `track`, default docqa), so `deskbench run --agent
    NAME` finds the track of a plugin no built-in track names; None when `name` is no plugin."""
    plugin = lookup("agents", name)
    if plugin is None:
        return None
    its_track = getattr(plugin.value, "track", "docqa")
    return its_track if isinstance(its_track, str) else "docqa"


def listing(kind: Kind) -> list[tuple[str, str]]:
    """(name, origin) of every installed plugin of `kind` (deskbench's own entry points are its
    built-ins, not plugins), without importing any."""
    own = builtin_entry_points(kind)
    return [(name, _origin(ep)) for name, ep in sorted(declared(kind).items()) if name not in own]
