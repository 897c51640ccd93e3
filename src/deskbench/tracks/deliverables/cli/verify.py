"""`deskbench verify PACKAGE_DIR RESPONSE.md`: a deliverables task's verifiers on one response.

Prints each verifier's status and evidence, the paper's V (unobservable counted as failed) and
each embedded trap: fell (one of its verifiers failed: the response fell into it), avoided
(all passed) or unobservable. `--judge MODEL` decides the `llm_check` verifiers; without it they
are unobservable. Exit codes: 0 whatever V is (it is a measurement), 2 for bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from deskbench.errors import UserError

_out = Console(highlight=False, soft_wrap=True)
_STYLE = {"pass": "green", "fail": "red", "unobservable": "yellow",
          "fell": "red", "avoided": "green"}


def read_response(path: Path) -> str:
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UserError(f"response file {path} {what}; give the agent's response as a markdown file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"response file {path} is not UTF-8 ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise UserError(f"response file {path} cannot be read: {exc.strerror or exc}") from None


def verify_package(package: Path, response_file: Path, outputs: Path | None,
                   judge: str | None, concurrency: int = 4) -> dict[str, Any]:
    """Load, check, judge: the report `--json` prints."""
    import asyncio

    from deskbench.tracks.deliverables.scoring.deliverables import (
        nothing_in,
        trap_results,
        verify_deliverable,
    )
    from deskbench.tracks.deliverables.scoring.verifiers import llm_check_judge, verifier_pass_rate
    from deskbench.tracks.deliverables.tasks import load_package

    if not package.is_dir():
        raise UserError(f"task package {package} is not a directory; give a folder with task.yaml")
    if outputs is not None and not outputs.is_dir():
        what = "is a file" if outputs.exists() else "does not exist"
        raise UserError(f"--outputs {outputs} {what}; give the folder holding the response's output files")
    task = load_package(package)
    response = read_response(response_file)
    delivered = not nothing_in(response, has_files=outputs is not None and any(outputs.iterdir()))
    model = None
    if judge:
        from deskbench.models.registry import open_model

        model = open_model(judge, role="judge", concurrency=concurrency, cache=True)

    async def go() -> list[Any]:
        try:
            return await verify_deliverable(task, response, outputs, delivered=delivered,
                                            judge=llm_check_judge(model) if model else None)
        finally:
            if model is not None:
                await model.aclose()  # in the loop that opened its connections

    results = asyncio.run(go())
    rate = verifier_pass_rate(results)
    by_id = {r.id: r.status for r in results}
    traps = [{"id": t.id, "kind": t.kind, "status": t.outcome, "verifiers": {v: by_id[v] for v in t.verifiers}}
             for t in trap_results(task, results, nothing_delivered=not delivered)]
    return {"task": task.id, "v": rate.v, "passed": rate.passed, "failed": rate.failed,
            "unobservable": rate.unobservable, "judged": rate.judged, "total": rate.total,
            "results": [r.model_dump(mode="json") for r in results], "traps": traps}


def print_report(report: dict[str, Any]) -> None:
    console = _out if _out.is_terminal else Console(highlight=False, width=160)
    table = Table(title=f"Verifiers of {report['task']}", title_justify="left")
    for name in ("id", "kind", "status", "judged", "evidence"):
        table.add_column(name, overflow="fold")
    for r in report["results"]:
        table.add_row(Text(r["id"]), Text(r["kind"]), Text(r["status"], style=_STYLE[r["status"]]),
                      "yes" if r["judged"] else "", Text(r["evidence"]))
    console.print(table)
    console.print(f"V = {report['passed']}/{report['total']} = {report['v']:.1f}% "
                  f"(failed {report['failed']}, unobservable {report['unobservable']}, judged "
                  f"{report['judged']}; unobservable counts as failed)")
    if report["traps"]:
        console.print("Traps (fell: a verifier tied to the trap failed, the verifiers caught the response "
                      "falling into it; avoided: all passed):")
    for t in report["traps"]:
        why = ", ".join(f"{v} {s}" for v, s in t["verifiers"].items())
        console.print(f"  {escape(t['id'])} {escape('[' + t['kind'] + ']')}: "
                      f"[{_STYLE.get(t['status'], 'yellow')}]{t['status']}[/] ({escape(why)})")


def register(app: typer.Typer) -> None:
    """Add the top-level `verify` command to `app`."""

    @app.command("verify")
    def verify_cmd(
        package: Annotated[Path, typer.Argument(help="The task package: a folder with task.yaml.")],
        response: Annotated[Path, typer.Argument(help="The agent's response (markdown).")],
        outputs: Annotated[Path | None, typer.Option("--outputs", help="Folder of the files the response produced (docx, xlsx, pptx, json).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: task, v, counts, results, traps.")] = False,
        judge: Annotated[str | None, typer.Option("--judge", help="Model deciding the llm_check verifiers (e.g. openai/gpt-5-mini); without it they are unobservable.")] = None,
    ) -> None:
        """Run a deliverables task's verifiers on one response: each result, V, and the traps (exit 0 whatever V is)."""
        report = verify_package(package, response, outputs, judge)
        if as_json:
            print(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            print_report(report)
