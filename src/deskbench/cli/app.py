"""The `deskbench` command: one Typer app assembled from the command modules in this package.

Each command module is a thin shell over a module's Python API and adds its commands with
`register(app)`; the list below is the only place that knows the core's. A track adds its own
commands (`rubric`, `analyse`, `generate <track>`, ...) through `Track.cli_commands`, built when a
command line names them (cli/root.py)."""

from __future__ import annotations

import importlib
import sys

import typer
from rich.markup import escape

import deskbench.cli.grammar as grammar
import deskbench.cli.root as root
from deskbench.console import err
from deskbench.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Evaluate AI agents on analysts' desk work: document QA, analytics, deliverables.",
)

COMMAND_MODULES = (
    "corpus",  # ingest, search, page, info
    "run",
    "score",
    "compare",
    "diagnose",
    "report",
    "demo",
    "generate",  # generate demo; each track adds `generate <track>`
    "fetch",  # fetch <benchmark>: each track adds its own (docqa: fetch madqa, from the hub or a snapshot)
    "analyse",  # analyse <analysis>: each track adds its own over its runs and tasks
    "calibrate",
    "sandbox",
    "serve",
    "view",  # the episode viewer
    "export",  # export RUNDIR --format inspect
    "schema",  # schema TRACK [--submission]: the JSON Schema of the formats
    "init",  # init DIR --track docqa|analytics [--from PATH]: a task set over your files
    "mcp",  # mcp --corpus DIR --out RUNDIR: docqa's tools over MCP for an agent built elsewhere
    "plugins",  # list agents|scorers|tracks|models: built-ins and installed plugins
    "retrievers",  # convert ADAPTER --out DIR: a colpali_engine checkpoint as a transformers model
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"deskbench.cli.{_name}").register(app)
grammar.apply(app)  # one flag grammar (cli/grammar.py): earlier names accepted with a line, --version
root.build_lazily(app, open_groups=("generate", "fetch", "analyse"))  # each command built when used; --help lists them from cli/panels.py


def main() -> None:
    """The console script: a UserError is one line and exit code 2, never a traceback."""
    try:
        app()
    except UserError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted: work committed so far is kept; run the command again to continue")
        sys.exit(130)
