"""`deskbench` itself: a command group that builds a command only when it is used.

Typer turns every command function into a click command (reading its signature and evaluating
its annotations) each time the app is called: for 50-odd commands, most of the CPU that
`deskbench --version` or `deskbench run ...` would spend before doing anything. Here the
commands the modules registered (cli/app.py) are kept aside, each in a small Typer app of its
own, and built with typer's public `get_command` when the command line names them. `--help`
lists them from the table in cli/panels.py without building any (and draws that one page itself,
see panels.print_root_help); code that walks the whole tree (`.commands`, as the tests do) gets
every command, built.
"""

from __future__ import annotations

from typing import Any, ClassVar

import typer
from typer.main import get_command

import deskbench.cli.panels as panels
from deskbench.cli.grammar import GrammarGroup


class RootGroup(GrammarGroup):
    """The top-level group: its commands built on first use (`builders`: name -> a Typer app
    holding just that command or group)."""

    builders: ClassVar[dict[str, typer.Typer]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._built: dict[str, Any] = {}
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> dict[str, Any]:  # type: ignore[override]
        """Every command, built (for code that walks the tree)."""
        for name in self.builders:
            self._build(name)
        return {name: self._built[name] for name in self.list_commands(None)}

    @commands.setter
    def commands(self, value: Any) -> None:  # the group's constructor sets it (to no command)
        self._built.update(value)

    def list_commands(self, ctx: Any) -> list[str]:
        names = {**dict.fromkeys(self.builders), **dict.fromkeys(self._built)}
        return [n for n in panels.PANEL_OF if n in names] + [n for n in names if n not in panels.PANEL_OF]

    def add_command(self, cmd: Any, name: str | None = None) -> None:
        self._built[name or cmd.name] = cmd

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return self._build(cmd_name)

    def _build(self, name: str) -> Any:
        if name not in self._built:
            holder = self.builders.get(name)
            if holder is None:
                return None
            built = get_command(holder)
            if holder.registered_groups:  # a group: the holder's one subcommand, built as typer builds it
                built = built.commands[name]  # type: ignore[attr-defined]
            built.name = name
            self._built[name] = built
        return self._built[name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The commands in their panels, one line each (cli/panels.py), none of them built."""
        panels.print_root_help(self, ctx, self.list_commands(ctx))


def build_lazily(app: typer.Typer) -> None:
    """Move the commands and groups registered on `app` into holders its group builds on first
    use. Called once, when the app is assembled, after cli/grammar.py gave them their classes."""
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
    app.info.cls = type("DeskbenchGroup", (RootGroup,), {"builders": builders})
