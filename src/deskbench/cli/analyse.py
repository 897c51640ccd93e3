"""`deskbench analyse`: analyses over stored runs and over task sets, one subcommand an analysis,
each added by its track through Track.cli_commands (cli/root.py builds them into this group: a
track's command named `analyse` in the group `analyse` brings its whole family of subcommands)."""

from __future__ import annotations

import typer

analyse_app = typer.Typer(no_args_is_help=True, help="Analyses over stored runs and task sets; each track adds its "
                          "own (the list below names them by what they analyse).")


def register(app: typer.Typer) -> None:
    """Add the `analyse` group."""
    app.add_typer(analyse_app, name="analyse")
