"""`deskbench serve`: the web app (a Typer group whose default action serves) and its users
(`add-user`, `users`, `remove-user`, `rotate-token`). The TLS, proxy and session options are
shared with `deskbench view`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.errors import UserError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from deskbench.contract.web import WebScreens
    from deskbench.web.common import WebSecurity

PANEL = "Access"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

ServedRunOpt = Annotated[Path, typer.Option("--out", "-o", help="Run directory the app serves.")]
IdleOpt = Annotated[str, typer.Option(
    "--session-idle", envvar="DESKBENCH_SESSION_IDLE", rich_help_panel=PANEL,
    help="A session ends after this long without a request (e.g. 30m, 8h, 2d; plain numbers are seconds).")]
MaxAgeOpt = Annotated[str, typer.Option(
    "--session-max", envvar="DESKBENCH_SESSION_MAX", rich_help_panel=PANEL,
    help="A session ends this long after its login, active or not.")]
KeyOpt = Annotated[Path | None, typer.Option(
    "--ssl-keyfile", rich_help_panel=PANEL, help="Serve over TLS with this private key (PEM), with --ssl-certfile.")]
CertOpt = Annotated[Path | None, typer.Option(
    "--ssl-certfile", rich_help_panel=PANEL, help="Serve over TLS with this certificate chain (PEM), with --ssl-keyfile.")]
TrustProxyOpt = Annotated[bool, typer.Option(
    "--trust-proxy", rich_help_panel=PANEL,
    help="Behind a TLS proxy that sets X-Forwarded-For and X-Forwarded-Proto: believe them for the client's "
         "address (login throttling) and https (Secure cookies). Without a proxy, clients could set them.")]


def parse_duration(text: str, flag: str) -> float:
    """'90', '90s', '30m', '8h', '7d' as seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not found or float(found.group(1)) <= 0:
        raise UserError(f"{flag} {text!r} is not a duration; use e.g. 90s, 30m, 8h or 7d")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


@dataclass(frozen=True)
class Serving:
    """How `_run` serves an app: session rules, TLS files, whether a proxy is trusted."""

    idle: str = "8h"
    max_age: str = "7d"
    keyfile: Path | None = None
    certfile: Path | None = None
    trust_proxy: bool = False

    def security(self) -> WebSecurity:
        from deskbench.web.common import WebSecurity
        from deskbench.web.store import SessionLimits

        return WebSecurity(limits=SessionLimits(idle=parse_duration(self.idle, "--session-idle"),
                                                absolute=parse_duration(self.max_age, "--session-max")),
                           trust_proxy=self.trust_proxy)

    def tls(self) -> tuple[str, str] | None:
        """(keyfile, certfile) for uvicorn, after checking the pair loads (a bad file is one line,
        not a traceback); None: plain http."""
        import ssl

        if self.keyfile is None and self.certfile is None:
            return None
        if self.keyfile is None or self.certfile is None:
            raise UserError("TLS needs both --ssl-keyfile and --ssl-certfile")
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"cannot load --ssl-certfile {self.certfile} with --ssl-keyfile {self.keyfile}: "
                            f"{exc}; give a PEM certificate and its private key") from exc
        return str(self.keyfile), str(self.certfile)


def _run_track(out: Path | None) -> str | None:
    """The track of the run at --out when it holds one (a track serves its run's screens: rubric grading)."""
    from deskbench.runs.store import RunStore

    if out is None or not (out / RunStore.FILENAME).is_file():
        return None
    return RunStore(out, create=False).track()


def _screens() -> list[WebScreens]:
    """Every registered track's screens for people, in the registry's order."""
    from deskbench.contract.registry import tracks

    return [s for t in tracks().values() if (s := t.web_screens()) is not None]


def _run(web_app: FastAPI, out: Path, host: str, port: int, what: str = "human baseline",
         serving: Serving = Serving()) -> None:
    """Serve one of the apps, after the warnings every app shares. uvicorn's own proxy-header
    handling is off: the app believes X-Forwarded-* only with --trust-proxy."""
    import uvicorn

    from deskbench.web.common import use_security
    from deskbench.web.store import WebStore

    use_security(web_app, serving.security())
    tls = serving.tls()
    users = WebStore(out).users()
    if not users:
        typer.echo(f"warning: no users yet; create one with: deskbench serve add-user NAME --out {out}", err=True)
    if host not in ("127.0.0.1", "localhost", "::1") and not tls and not serving.trust_proxy:
        typer.echo(f"warning: binding {host}: reachable from other machines; serve over TLS "
                   "(--ssl-keyfile/--ssl-certfile) or behind a TLS proxy (--trust-proxy)", err=True)
    scheme = "https" if tls else "http"
    typer.echo(f"deskbench serve: {what} at {scheme}://{host}:{port}/ ({len(users)} users, run {out})", err=True)
    uvicorn.run(web_app, host=host, port=port, log_level="warning", proxy_headers=False,
                ssl_keyfile=tls[0] if tls else None, ssl_certfile=tls[1] if tls else None)


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
        top_k: Annotated[int, typer.Option("--top-k", "-k", help="Pages per search (the agents' default is 5).")] = 5,
        calibration: Annotated[Path | None, typer.Option(help="Items JSONL of 'deskbench calibrate sample --judge': adds the /calibration labelling screens.")] = None,
        batch_size: Annotated[int, typer.Option(help="Questions per batch for tasks in no batch yet (see 'serve batches').")] = 25,
        session_idle: IdleOpt = "8h",
        session_max: MaxAgeOpt = "7d",
        ssl_keyfile: KeyOpt = None,
        ssl_certfile: CertOpt = None,
        trust_proxy: TrustProxyOpt = False,
    ) -> None:
        """Serve the annotation app: deskbench serve --corpus DIR --tasks T.jsonl --out RUNDIR.
        Create annotators first with: deskbench serve add-user NAME --out RUNDIR."""
        if ctx.invoked_subcommand is not None:
            return
        serving = Serving(session_idle, session_max, ssl_keyfile, ssl_certfile, trust_proxy)
        serving.security()  # bad durations stop here, before an app is built
        from deskbench.contract.web import ServeRequest

        request = ServeRequest(out=out, corpus=corpus, tasks=tasks, oracle=oracle, top_k=top_k,
                               calibration=calibration, batch_size=batch_size, run_track=_run_track(out))
        for screens in _screens():  # a track's screens: the human baseline, rubric grading
            served = screens.app(request)
            if served is not None:
                assert out is not None  # every track's app saves its work in the run directory
                for warning in served.warnings:
                    typer.echo(warning, err=True)
                return _run(served.app, out, host, port, what=served.what, serving=serving)
        if out is not None and calibration is not None and corpus is None and tasks is None:
            from deskbench.web.calibration import create_calibration_app

            return _run(create_calibration_app(out, calibration), out, host, port, what="judge calibration",
                        serving=serving)
        missing = [flag for flag, v in (("--corpus", corpus), ("--tasks", tasks), ("--out", out)) if v is None]
        raise UserError(f"deskbench serve needs {', '.join(missing) or 'the tasks of a track with screens for people'}: "
                        "deskbench serve --corpus DIR --tasks T.jsonl --out RUNDIR")

    @serve_app.command("add-user")
    def add_user(
        name: Annotated[str, typer.Argument(help="Annotator name (letters, digits, . _ -).")],
        out: ServedRunOpt,
        batch: Annotated[list[str] | None, typer.Option("--batch", "-b", help="Assign this batch too (repeatable).")] = None,
    ) -> None:
        """Create an annotator and print their token once (only its sha256 is stored)."""
        from deskbench.web.store import WebStore

        token = WebStore(out).add_user(name, batch)
        typer.echo(token)
        typer.echo(f"user {name} added to {out}{' with batches ' + ', '.join(batch) if batch else ''};"
                   " the token above is shown only once", err=True)

    @serve_app.command("users")
    def users(out: ServedRunOpt) -> None:
        """List the users: name, when added, open sessions, batches (tokens are never shown again)."""
        from deskbench.web.store import WebStore

        infos = WebStore.existing(out).user_infos()
        for u in infos:
            typer.echo(f"{u.name}\tadded {u.created_at[:19]}\t{u.sessions} sessions\t{', '.join(u.batches) or 'no batch'}")
        if not infos:
            typer.echo(f"no users; create one with: deskbench serve add-user NAME --out {out}", err=True)

    @serve_app.command("remove-user")
    def remove_user(
        name: Annotated[str, typer.Argument(help="The user to remove.")],
        out: ServedRunOpt,
    ) -> None:
        """Remove a user: their sessions end at once; their answers and work stay in the run."""
        from deskbench.web.store import WebStore

        WebStore.existing(out).remove_user(name)
        typer.echo(f"user {name} removed from {out}; their sessions ended, their work stays", err=True)

    @serve_app.command("rotate-token")
    def rotate_token(
        name: Annotated[str, typer.Argument(help="The user whose token is replaced.")],
        out: ServedRunOpt,
    ) -> None:
        """Print a new token for a user once; the old token and its sessions stop working."""
        from deskbench.web.store import WebStore

        token = WebStore.existing(out).rotate_token(name)
        typer.echo(token)
        typer.echo(f"new token for {name} in {out}; the old one and its sessions no longer work;"
                   " the token above is shown only once", err=True)

    @serve_app.command("batches")
    def batches(
        out: ServedRunOpt,
        tasks: Annotated[Path | None, typer.Option("--tasks", "-t", help="docqa tasks JSONL: batch those not in a batch yet.")] = None,
        size: Annotated[int, typer.Option("--batch-size", help="Questions per batch (MADQA: 25).")] = 25,
        seed: Annotated[int | None, typer.Option(help="Shuffle the new tasks under this seed first (default: file order).")] = None,
    ) -> None:
        """Cut the tasks into batches with constellation code names (MADQA C.2) and list every
        batch with its users and their progress. Existing batches never change."""
        from deskbench.runs.store import RunStore
        from deskbench.web.store import WebStore

        screens = _screens()
        web = WebStore(out)
        if tasks is not None:
            items = next((got for s in screens if (got := s.batch_tasks(tasks)) is not None), None)
            if items is None:
                raise UserError(f"--tasks {tasks}: no installed track answers tasks in batches; "
                                "give a docqa tasks file")
            RunStore(out).save_tasks(list(items))
            new = web.add_batches([str(getattr(t, "id", "")) for t in items], size, seed)
            typer.echo(f"{len(new)} new batches" + (f": {', '.join(b.name for b in new)}" if new else ""), err=True)
        run = RunStore(out)
        for b in web.batches():
            progress = []
            for user in b.users:
                done = {t for s in screens for system in s.people_systems(user) for t, a in run.done(system) if a == 0}
                progress.append(f"{user} {len(done & set(b.task_ids))}/{len(b.task_ids)}")
            typer.echo(f"{b.name}\t{len(b.task_ids)} questions\t{', '.join(progress) or 'unassigned'}")

    @serve_app.command("assign")
    def assign(
        batch: Annotated[list[str], typer.Argument(help="Batch code names (see: deskbench serve batches --out RUNDIR).")],
        user: Annotated[str, typer.Option("--user", "-u", help="The annotator.")],
        out: ServedRunOpt,
        remove: Annotated[bool, typer.Option("--remove", help="Take the batches away instead (work done stays).")] = False,
    ) -> None:
        """Give batches to an annotator (a batch may go to several, e.g. to measure agreement)."""
        from deskbench.web.store import WebStore

        WebStore(out).assign(user, batch, remove=remove)
        typer.echo(f"{'removed' if remove else 'assigned'} {', '.join(batch)} {'from' if remove else 'to'} {user}", err=True)

    app.add_typer(serve_app, name="serve")
