"""`deskbench list agents|scorers|tracks|models|retrievers`: what can be chosen by name, and where from
(built-in, an installed distribution's entry point). Module paths (`package.module:Name`) are not
listed: they are found when named."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.console import out
from deskbench.errors import UserError

if TYPE_CHECKING:  # deskbench.plugins reads entry points: imported when the command runs
    from deskbench.plugins import Kind


def register(app: typer.Typer) -> None:
    """Add `list`."""
    app.command("list")(list_plugins)


def _builtin_agents() -> list[tuple[str, str]]:
    from deskbench.contract.formats import shipped
    from deskbench.contract.registry import tracks

    builtin = shipped()
    return [(a, f"built-in ({t.name})" if t.name in builtin else f"track {t.name}")
            for t in tracks().values() for a in t.agents]


def _builtin_scorers() -> list[tuple[str, str]]:
    from deskbench.contract.registry import tracks

    return [(f"{t.name} (default)", "built-in: the track's own scorer and its --judge flags") for t in tracks().values()]


def _builtin_tracks() -> list[tuple[str, str]]:
    from deskbench.contract.formats import shipped
    from deskbench.contract.registry import tracks
    from deskbench.plugins import declared

    builtin = shipped()
    plugged = set(declared("tracks")) - set(builtin)  # deskbench's own entry points are its built-ins
    return [(name, "built-in" if name in builtin else "registered") for name in tracks() if name not in plugged]


def _builtin_models() -> list[tuple[str, str]]:
    from deskbench.models.registry import BUILTIN_PROVIDERS

    return [(f"{p}/...", "built-in") for p in BUILTIN_PROVIDERS]


def _retrievers() -> list[tuple[str, str]]:
    """Every retriever kind: the built-ins with their summary, then the installed plugins."""
    from deskbench.search.retriever_use import listing

    return listing()


BUILTINS: dict[Kind, Callable[[], list[tuple[str, str]]]] = {
    "agents": _builtin_agents, "scorers": _builtin_scorers, "tracks": _builtin_tracks, "models": _builtin_models,
    "retrievers": _retrievers,
}
PLUGINS_LISTED_BY_BUILTINS: set[Kind] = {"retrievers"}  # its function lists the plugins too


def list_plugins(
    kind: Annotated[str, typer.Argument(help="agents, scorers, tracks, models or retrievers.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print [{name, origin}] as JSON.")] = False,
) -> None:
    """List the agents, scorers, tracks, model providers or retriever kinds deskbench can use, and
    where each comes from. A plugin is also addressable without installing it as package.module:Name."""
    from deskbench.plugins import KINDS, listing

    if kind not in KINDS:
        raise UserError(f"deskbench list {kind}: choose one of {', '.join(KINDS)}")
    rows = BUILTINS[kind]() + ([] if kind in PLUGINS_LISTED_BY_BUILTINS else
                               [(name if kind != "models" else f"{name}/...", origin) for name, origin in listing(kind)])
    if as_json:
        print(json.dumps([{"name": n, "origin": o} for n, o in rows]))
        return
    width = max(len(n) for n, _ in rows) if rows else 0
    for name, origin in rows:
        out.print(f"{name:<{width}}  {origin}", markup=False, highlight=False)
