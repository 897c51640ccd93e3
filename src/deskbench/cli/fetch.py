"""`deskbench fetch`: a released benchmark onto this machine, one subcommand a benchmark, each
added by its track through Track.cli_commands (cli/root.py builds them into this group; docqa:
`fetch madqa`)."""

from __future__ import annotations

import typer

fetch_app = typer.Typer(no_args_is_help=True, help="Download a released benchmark: its tasks, its documents, "
                        "a corpus over them. Resumable: run it again to complete what is missing.")


def register(app: typer.Typer) -> None:
    """Add the `fetch` group."""
    app.add_typer(fetch_app, name="fetch")
