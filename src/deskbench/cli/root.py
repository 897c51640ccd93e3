"""`deskbench` itself: a command group that builds a command only when it is used.

Typer turns every command function into a click command (reading its signature and evaluating
its annotations) each time the app is called: for 50-odd commands, most of the CPU that
`deskbench --version` or `deskbench run ...` would spend before doing anything. Here the
commands the modules registered (cli/app.py) are kept aside, each in a small Typer app of its
own, and built with typer's public `get_command` when the command line names them. `--help`
lists them from the table in cli/panels.py without building any (and draws that one page itself,
see panels.print_root_help); code that walks the whole tree (`.commands`, as the tests do) gets
every command, built.

A track adds its commands through `Track.cli_commands` (contract/cli.py): a command the core does
not hold is looked up there when it is built (the tracks are loaded then, not before), and a core
group open to the tracks (`generate`) gets their subcommands when it is built. `--help` lists
every track's top-level commands, the plugins' too: from the light `deskbench.cli` entry points
the tracks declare beside their `deskbench.tracks` one, so it imports no track, or from the hook
itself when a track declares none (its track loaded then: `listed_track_commands`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, ClassVar

import typer
from typer.core import TyperGroup
from typer.main import get_command

import deskbench.cli.panels as panels
from deskbench.cli.grammar import GrammarGroup, give_classes

if TYPE_CHECKING:
    from deskbench.contract.cli import TrackCommand


class RootGroup(GrammarGroup):
    """The top-level group: its commands built on first use (`builders`: name -> a Typer app
    holding just that command or group)."""

    builders: ClassVar[dict[str, typer.Typer]] = {}
    open_groups: ClassVar[frozenset[str]] = frozenset()  # core groups the tracks add subcommands to

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._built: dict[str, Any] = {}
        super().__init__(*args, **kwargs)

    @property  # a click Group's attribute, here built on first use
    def commands(self) -> MutableMapping[str, Any]:
        """Every command, built (for code that walks the tree)."""
        names = self.list_commands(None)
        for name in names:
            self._build(name)
        return {name: self._built[name] for name in names if name in self._built}

    @commands.setter
    def commands(self, value: MutableMapping[str, Any]) -> None:  # the constructor sets it (to no command)
        self._built.update(value)

    def list_commands(self, ctx: Any) -> list[str]:
        """The core's commands and the tracks' top-level ones (`listed_track_commands`), in the
        order `--help` lists them (cli/panels.py layout), then any other built one."""
        names = {**dict.fromkeys(self.builders), **dict.fromkeys(self._built)}
        shown = [name for _, rows in panels.layout(listed_track_commands()) for name, _ in rows]
        return shown + [n for n in names if n not in shown]

    def add_command(self, cmd: Any, name: str | None = None) -> None:
        self._built[name or cmd.name] = cmd

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return self._build(cmd_name)

    def _build(self, name: str) -> Any:
        if name not in self._built:
            holder = self.builders.get(name) or track_holder(name, None)
            if holder is None:
                return None
            built = _built_from(holder, name)
            if name in self.open_groups:  # the tracks' subcommands first, in the tracks' order
                subs = {}
                for command in track_commands():
                    holder = track_holder(command.name, name) if command.group == name else None
                    if holder is None:
                        continue
                    built_sub = _built_from(holder, command.name)
                    if command.name == name:  # a track's family of subcommands (contract/cli.py TrackCommand)
                        subs.update(built_sub.commands)
                    else:
                        subs[command.name] = built_sub
                built.commands = {**subs, **built.commands}
            self._built[name] = built
        return self._built[name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The commands in their panels, one line each (cli/panels.py), none of them built."""
        panels.print_root_help(self, ctx, self.list_commands(ctx), listed_track_commands())


def _built_from(holder: typer.Typer, name: str) -> Any:
    """The command (or group) `name` of a holder, built as typer builds it."""
    built = get_command(holder)
    if holder.registered_groups or len(holder.registered_commands) > 1:  # the holder's subcommand `name`
        if not isinstance(built, TyperGroup):
            raise TypeError(f"the holder of {name!r} has several commands but typer built no group of them")
        built = built.commands[name]
    built.name = name
    return built


def track_commands() -> list[TrackCommand]:
    """Every registered track's commands (contract/cli.py), the tracks loaded if they were not."""
    from deskbench.contract.registry import tracks

    return [command for track in tracks().values() for command in track.cli_commands()]


def listed_track_commands() -> list[TrackCommand]:
    """Every track's top-level commands, as `--help` lists them: from the hooks when this process
    has the registry already; else from the light `deskbench.cli` entry points (a tuple of
    TrackCommand each, contract/cli.py), so `--help` imports no track nor pydantic, unless an
    installed track declares none: then the tracks are loaded and their hooks asked. Without the
    tracks, their order (Track.order) is not known: deskbench's own come first, then the plugins',
    each by name (it only tells apart two commands a panel lists at the same place)."""
    from deskbench.plugins import builtin_entry_points, declared, lookup

    if "deskbench.contract.registry" in sys.modules or set(declared("tracks")) - set(declared("cli")):
        return [command for command in track_commands() if command.group is None]
    found: list[TrackCommand] = []
    own = builtin_entry_points("cli")
    for name in sorted(declared("tracks"), key=lambda n: (n not in own, n)):
        plugin = lookup("cli", name)
        assert plugin is not None
        commands = plugin.value
        if not isinstance(commands, (tuple, list)):
            from deskbench.errors import UserError

            raise UserError(f"the {name} track's deskbench.cli entry point ({plugin.origin}) is not a tuple of "
                            "TrackCommand (contract/cli.py); fix or reinstall that package")
        found += [command for command in commands if command.group is None]
    return found


def track_holder(name: str, group: str | None) -> typer.Typer | None:
    """A Typer app holding the track command `name` (of `group`), registered by the function its
    track names (imported now); None when no track adds it."""
    for command in track_commands():
        if command.name == name and command.group == group:
            module, _, function = command.register.partition(":")
            holder = typer.Typer(add_completion=False)
            try:
                register = getattr(importlib.import_module(module), function)
            except (ImportError, AttributeError) as exc:  # a plugin track's broken declaration: one line
                from deskbench.errors import UserError

                raise UserError(f"deskbench {' '.join(filter(None, (group, name)))}: its track declares "
                                f"{command.register}, which cannot be loaded ({exc}); reinstall the package "
                                "that provides the track") from None
            register(holder)
            give_classes(holder)
            return holder
    return None


def build_lazily(app: typer.Typer, open_groups: tuple[str, ...] = ()) -> None:
    """Move the commands and groups registered on `app` into holders its group builds on first
    use. Called once, when the app is assembled, after cli/grammar.py gave them their classes.
    `open_groups`: the core groups a track adds subcommands to (`generate`)."""
    builders: dict[str, typer.Typer] = {}
    for command in app.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.lower().replace("_", "-")
        holder = typer.Typer(add_completion=False)
        holder.registered_commands.append(command)
        builders[name] = holder
    for group in app.registered_groups:
        assert group.name, "a group needs a name"
        holder = typer.Typer(add_completion=False)
        holder.registered_groups.append(group)
        builders[group.name] = holder
    app.registered_commands = []
    app.registered_groups = []
    app.info.cls = type("DeskbenchGroup", (RootGroup,), {"builders": builders, "open_groups": frozenset(open_groups)})
