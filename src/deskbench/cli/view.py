"""`deskbench view RUNDIR [RUNDIR...]`: the episode viewer (web/viewer.py), served like `serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.serve import CertOpt, IdleOpt, KeyOpt, MaxAgeOpt, Serving, TrustProxyOpt, _run
from deskbench.errors import UserError

DEFAULT_PORT = 8770


def register(app: typer.Typer) -> None:
    app.command()(view)


def view(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories (the --out of 'deskbench run'); the users are the first one's.")],
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="docqa runs: the corpus they searched, to show the pages (thumbnails) each search returned.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; 127.0.0.1 keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = DEFAULT_PORT,
    session_idle: IdleOpt = "8h",
    session_max: MaxAgeOpt = "7d",
    ssl_keyfile: KeyOpt = None,
    ssl_certfile: CertOpt = None,
    trust_proxy: TrustProxyOpt = False,
) -> None:
    """Browse every episode of the runs: a table with filters and sorting, each episode's question,
    gold, answer, score and full transcript (with the pages each search returned), two systems side
    by side. Log in with a token from: deskbench serve add-user NAME --out FIRST_RUNDIR."""
    from deskbench.web.viewer import create_viewer_app

    if not 0 < port < 65536:
        raise UserError(f"--port {port} is not valid; use 1-65535")
    serving = Serving(session_idle, session_max, ssl_keyfile, ssl_certfile, trust_proxy)
    serving.security()  # bad durations stop here, before the runs are opened
    web_app = create_viewer_app(run_dirs, corpus)
    first = web_app.state.catalog.runs[0].dir
    _run(web_app, first, host, port, what="episode viewer", serving=serving)
