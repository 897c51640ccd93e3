"""The echo track's command of `deskbench` (Track.cli_commands), in its folder: `deskbench
echo-say TEXT` prints TEXT as an echo agent answers it. `deskbench --help` lists it in the Tools
panel, the track loaded for that (it declares no light `deskbench.cli` entry point) or read from
`COMMANDS` when a distribution declares `echo = echo_track.cli:COMMANDS` there."""

from __future__ import annotations

from typing import Annotated

import typer

from deskbench.cli.panels import TOOLS
from deskbench.contract.cli import TrackCommand

COMMANDS: tuple[TrackCommand, ...] = (
    TrackCommand("echo-say", "echo_track.cli:register", panel=TOOLS, after="sandbox",
                 summary="Say a text as the echo agents answer it"),
)


def register(app: typer.Typer) -> None:
    """Add `echo-say`."""
    app.command("echo-say")(echo_say)


def echo_say(
    text: Annotated[str, typer.Argument(help="The text to echo.")],
    agent: Annotated[str, typer.Option(help="echo-upper | echo-lower.")] = "echo-upper",
) -> None:
    """Print TEXT as the echo agent AGENT answers it."""
    from deskbench.errors import UserError
    from echo_track import AGENTS

    if agent not in AGENTS:
        raise UserError(f"--agent {agent!r} is not an echo agent; choose one of: {', '.join(AGENTS)}")
    typer.echo(AGENTS[agent](text))
