"""`deskbench serve`: the web app (a Typer group whose default action serves) and `serve add-user`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.errors import UserError


def _deliverables_run(out: Path) -> bool:
    """A deliverables run directory: served without --corpus/--tasks, for rubric grading."""
    from deskbench.runs.store import RunStore

    return (out / RunStore.FILENAME).is_file() and RunStore(out, create=False).track() == "deliverables"


def register(app: typer.Typer) -> None:
    serve_app = typer.Typer(
        help="The web app for people: the docqa human baseline (search, page viewer, citations, answers).")

    @serve_app.callback(invoke_without_command=True)
    def serve(
        ctx: typer.Context,
        corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="Corpus directory.")] = None,
        tasks: Annotated[Path | None, typer.Option("--tasks", "-t", help="docqa tasks JSONL.")] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (the run store the work is saved in).")] = None,
        host: Annotated[str, typer.Option(help="Address to bind; 127.0.0.1 keeps it on this machine.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port.")] = 8765,
        oracle: Annotated[bool, typer.Option("--oracle", help="Show the gold evidence pages instead of search (system human-oracle:NAME).")] = False,
        top_k: Annotated[int, typer.Option(help="Pages per search (the agents' default is 5).")] = 5,
        calibration: Annotated[Path | None, typer.Option(help="Items JSONL of 'deskbench calibrate sample --judge': adds the /calibration labelling screens.")] = None,
    ) -> None:
        """Serve the annotation app: deskbench serve --corpus DIR --tasks T.jsonl --out RUNDIR.
        Create annotators first with: deskbench serve add-user NAME --out RUNDIR."""
        if ctx.invoked_subcommand is not None:
            return
        if out is not None and corpus is None and tasks is None and _deliverables_run(out):
            from deskbench.web.grading import serve_grading

            return serve_grading(out, host, port)
        missing = [flag for flag, v in (("--corpus", corpus), ("--tasks", tasks), ("--out", out)) if v is None]
        if missing:
            raise UserError(f"deskbench serve needs {', '.join(missing)}: "
                            "deskbench serve --corpus DIR --tasks T.jsonl --out RUNDIR")
        if top_k < 1:
            raise UserError(f"--top-k {top_k} is not valid; use 1 or more")
        import uvicorn

        from deskbench.web.app import create_app
        from deskbench.web.store import WebStore

        assert corpus and tasks and out
        web_app = create_app(corpus, tasks, out, oracle=oracle, top_k=top_k, calibration=calibration)
        users = WebStore(out).users()
        if not users:
            typer.echo(f"warning: no users yet; create one with: deskbench serve add-user NAME --out {out}", err=True)
        if host not in ("127.0.0.1", "localhost", "::1"):
            typer.echo(f"warning: binding {host}: reachable from other machines; use TLS in front of it", err=True)
        typer.echo(f"deskbench serve: http://{host}:{port}/ ({len(users)} users, run {out})", err=True)
        uvicorn.run(web_app, host=host, port=port, log_level="warning")

    @serve_app.command("add-user")
    def add_user(
        name: Annotated[str, typer.Argument(help="Annotator name (letters, digits, . _ -).")],
        out: Annotated[Path, typer.Option("--out", "-o", help="Run directory the app serves.")],
    ) -> None:
        """Create an annotator and print their token once (only its sha256 is stored)."""
        from deskbench.web.store import WebStore

        token = WebStore(out).add_user(name)
        typer.echo(token)
        typer.echo(f"user {name} added to {out}; the token above is shown only once", err=True)

    app.add_typer(serve_app, name="serve")
