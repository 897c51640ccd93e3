"""`deskbench rubric ...`: the SME rubric layer of a deliverables run.

grade   grade each ok episode with an LLM grader (verifier results shown to it)
import  human grades from a CSV          export  a grading template CSV for SMEs
qc      QC actions from a CSV            show    final grades per episode (after QC), the QC report
qc-sheet  the Appendix C checks' findings as a QC CSV worksheet
tags    failure-mode tags of the justifications (Table 11), regex and optionally an LLM

Bad input (a run that is not a deliverables run, a bad CSV row) is one line on stderr and
exit code 2 (deskbench's main turns the UserError into that).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.console import out as _out
from deskbench.errors import UserError, is_one_of

if TYPE_CHECKING:
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.failure_tags import LlmTagging
    from deskbench.tracks.deliverables.scoring.rubric_run import GradingCounts

RunDirArg = Annotated[Path, typer.Argument(help="The run directory (the --out of a deliverables run).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def _store(run_dir: Path) -> GradeStore:
    from deskbench.tracks.deliverables.grades import GradeStore

    store = GradeStore(run_dir)
    store.tasks()  # a UserError if the run is not a deliverables run
    return store


def register(app: typer.Typer) -> None:
    """Add the `rubric` command group to `app`."""
    rubric_app = typer.Typer(no_args_is_help=True,
                             help="SME rubric grades (DI, AR, RF, EP, FD), QC and failure tags of deliverables runs.")
    app.add_typer(rubric_app, name="rubric")

    @rubric_app.command("grade")
    def grade_cmd(
        run_dir: RunDirArg,
        model: Annotated[str, typer.Option("--model", "-m", help="The grader model, e.g. openai/gpt-5-mini or local.")],
        mode: Annotated[str, typer.Option(help="all (one call for the five criteria) | per-criterion (five calls)")] = "all",
        system: Annotated[str | None, typer.Option(help="Grade only this system's episodes.")] = None,
        concurrency: Annotated[int, typer.Option(help="Episodes graded at once.")] = 4,
        regrade: Annotated[bool, typer.Option("--regrade", help="Grade again episodes this grader already graded.")] = False,
        max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="Output limit of each grader call (default: not sent; Anthropic: 4096).")] = None,
        temperature: Annotated[float | None, typer.Option("--temperature", help="Grader temperature (default: 0 where the model takes one).")] = None,
        top_p: Annotated[float | None, typer.Option("--top-p", help="Grader nucleus sampling (default: not sent).")] = None,
        reasoning_effort: Annotated[str | None, typer.Option("--reasoning-effort", help="Grader reasoning effort (default: not sent).")] = None,
        cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse cached grader replies (a retried "
                                                                       "failure then fails the same way).")] = True,
        as_json: JsonOpt = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ) -> None:
        """Grade each ok episode with an LLM on the five criteria; failures are kept apart from grades."""
        import asyncio

        from deskbench.cli.common import progress_bars
        from deskbench.models.registry import open_model
        from deskbench.models.settings import Sampling
        from deskbench.tracks.deliverables.scoring.rubric import GRADE_MODES
        from deskbench.tracks.deliverables.scoring.rubric_run import episodes_to_grade, grade_run

        if not is_one_of(mode, GRADE_MODES):
            raise UserError(f"--mode {mode} is not valid; use all or per-criterion")
        if concurrency < 1:
            raise UserError(f"--concurrency {concurrency} is not valid; use 1 or more")
        store = _store(run_dir)
        if system is not None and system not in store.runs.systems():
            raise UserError(f"no episodes of system {system!r} in {run_dir}; systems: "
                            + (", ".join(store.runs.systems()) or "none"))
        grader = open_model(model, role="judge", concurrency=concurrency * (5 if mode == "per-criterion" else 1),
                            cache=cache, sampling=Sampling(temperature=temperature, top_p=top_p,
                                                           reasoning_effort=reasoning_effort, max_tokens=max_tokens))
        todo, skipped = episodes_to_grade(store, grader.id, system=system, regrade=regrade)

        async def go() -> GradingCounts:
            with progress_bars(quiet) as progress:
                bar = progress.add_task("grading", total=len(todo), current="")
                try:
                    return await grade_run(
                        store, grader, todo, mode=mode, concurrency=concurrency,
                        on_graded=lambda ep: progress.update(bar, advance=1, current=f"{ep.system} {ep.task_id}"))
                finally:
                    await grader.aclose()

        result = asyncio.run(go())
        counts = {"graded": result.graded, "failed": result.failed, "skipped": skipped}
        failures = result.failures
        if as_json:
            _out.print_json(json.dumps({"grader": grader.id, "mode": mode, **counts, "failures": failures}))
            return
        _out.print(f"graded {counts['graded']}, failed {counts['failed']} (grader {escape(grader.id)}, mode {mode}"
                   + (f"; {counts['skipped']} already graded, --regrade to grade again" if counts["skipped"] else "")
                   + ")")
        for f in failures:
            _out.print(f"  could not grade {escape(f['system'])} {escape(f['task_id'])}/{f['attempt']}: "
                       f"{escape(f['error'])}")

    @rubric_app.command("import")
    def import_cmd(
        run_dir: RunDirArg,
        file: Annotated[Path, typer.Argument(help="Grades CSV (columns of 'deskbench rubric export').")],
    ) -> None:
        """Import human grades from a CSV; nothing is written when any row is bad."""
        from deskbench.tracks.deliverables.scoring.rubric_csv import import_grades

        grades = import_grades(_store(run_dir), file)
        _out.print(f"imported {len(grades)} grade(s) from {escape(str(file))}")

    @rubric_app.command("qc")
    def qc_cmd(
        run_dir: RunDirArg,
        file: Annotated[Path, typer.Argument(help="QC CSV: task_id, system, attempt, target, action, score, "
                                                  "justification, reason, reviewer.")],
    ) -> None:
        """Record QC actions (confirm, edit, reject) from a CSV; nothing is written when any row is bad."""
        from deskbench.tracks.deliverables.scoring.rubric_csv import import_qc

        actions = import_qc(_store(run_dir), file)
        _out.print(f"recorded {len(actions)} QC action(s) from {escape(str(file))}")

    @rubric_app.command("qc-sheet")
    def qc_sheet_cmd(
        run_dir: RunDirArg,
        out_file: Annotated[Path, typer.Option("--output", help="The QC CSV to write.")],
        system: Annotated[str | None, typer.Option(help="Only this system's episodes.")] = None,
    ) -> None:
        """Write the QC worksheet: the Appendix C checks' findings (C.2 verifiers to re-derive, C.3
        citations, C.4 A-C) as QC CSV lines; fill in the actions and record it with 'rubric qc'."""
        from deskbench.tracks.deliverables.scoring.rubric_csv import qc_worksheet

        n = qc_worksheet(_store(run_dir), out_file, system=system)
        _out.print(f"wrote {n} finding(s) to {escape(str(out_file))}")

    @rubric_app.command("export")
    def export_cmd(
        run_dir: RunDirArg,
        out_file: Annotated[Path, typer.Option("--output", help="The CSV to write.")],
        system: Annotated[str | None, typer.Option(help="Only this system's episodes.")] = None,
    ) -> None:
        """Write a grading template for SMEs: one row per ok episode, scores empty."""
        from deskbench.tracks.deliverables.scoring.rubric_csv import export_template

        n = export_template(_store(run_dir), out_file, system=system)
        _out.print(f"wrote {n} row(s) to {escape(str(out_file))}")

    @rubric_app.command("show")
    def show_cmd(
        run_dir: RunDirArg,
        system: Annotated[str | None, typer.Option(help="Only this system.")] = None,
        grader: Annotated[str | None, typer.Option(help="Use this grader's grades (default: latest human, "
                                                        "else latest LLM).")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Final grades per episode after QC: the five scores, V, ACCEPT, status and flags."""
        store = _store(run_dir)
        finals = store.final_grades(system, grader)
        graded = set(finals)
        failures = [f for f in store.failures(system) if (f.task_id, f.system, f.attempt) not in graded]
        if as_json:
            _out.print_json(json.dumps({
                "grades": [g.model_dump(mode="json") for g in finals.values()],
                "failures": [f.model_dump(mode="json") for f in failures],
                "stale": finals.stale,
                "stale_qc": finals.stale_qc,
                "best": [p.model_dump(mode="json") for _, p in sorted(finals.best.items())],
            }))
            return
        from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

        console = _out if _out.is_terminal else Console(highlight=False, width=180)
        table = Table(title=f"rubric grades: {run_dir}")
        for col in ("task", "system", "att", "grader", *RUBRIC_CODES, "mean", "V", "accept", "status", "flags"):
            table.add_column(col, justify="right" if col in (*RUBRIC_CODES, "mean", "V", "att") else "left")
        for g in finals.values():
            accept = {True: "yes", False: "no", None: "–"}[g.accept]
            table.add_row(escape(g.task_id), escape(g.system), str(g.attempt), escape(g.grader),
                          *(str(g.scores[c]) + ("*" if g.scores[c] != g.primary_scores[c] else "") for c in RUBRIC_CODES),
                          f"{g.mean:.2f}", "–" if g.v is None else f"{g.v:.0f}", accept, g.status, str(len(g.flags)))
        console.print(table)
        for g in finals.values():
            for flag in g.flags:
                console.print(f"  {escape(g.system)} {escape(g.task_id)}/{g.attempt}: {escape(flag)}")
        from deskbench.tracks.deliverables.scoring.rubric_qc_final import CHECKS

        checks = [c for g in finals.values() for c in g.checks]
        if checks:  # the QC report: what each Appendix C check found and what QC changed
            report = Table(title="QC checks (Appendix C): findings and what QC did")
            for col in ("check", "findings", "open", "confirmed", "edited", "returned"):
                report.add_column(col, justify="left" if col == "check" else "right")
            for name in CHECKS:
                mine = [c for c in checks if c.check == name]
                report.add_row(name, str(len(mine)), *(str(sum(c.outcome.startswith(w) for c in mine))
                                                       for w in ("open", "confirmed", "edited", "returned")))
            console.print(report)
            for g in finals.values():
                for c in g.checks:
                    if c.outcome.startswith("edited") or c.outcome.startswith("returned"):
                        console.print(f"  {escape(g.system)} {escape(g.task_id)}/{g.attempt} {c.check} "
                                      f"{escape(c.target)}: {escape(c.outcome)}")
        for (task_id, attempt), pick in sorted(finals.best.items()):
            who = pick.system or "none"
            console.print(f"best response of {escape(task_id)}/{attempt}: {escape(who)}"
                          + (f" ({pick.source}; {escape(pick.evidence)})" if pick.evidence else ""))
        if finals.stale:
            console.print(f"{finals.stale} stale grade(s) ignored (their episode was rerun); grade again")
        if finals.stale_qc:
            console.print(f"{finals.stale_qc} stale QC action(s) not applied (they reviewed an earlier or another "
                          "grade than the final one); QC the current grade again")
        for f in failures:
            console.print(f"could not grade {escape(f.system)} {escape(f.task_id)}/{f.attempt} "
                          f"({escape(f.grader)}): {escape(f.error)}")
        if not finals and not failures:
            console.print("no grades yet: run 'deskbench rubric grade' or 'rubric import'")

    @rubric_app.command("tags")
    def tags_cmd(
        run_dir: RunDirArg,
        model: Annotated[str | None, typer.Option("--model", "-m", help="Also tag with this LLM and report the "
                                                                        "Jaccard agreement with the regex tagger.")] = None,
        system: Annotated[str | None, typer.Option(help="Only this system.")] = None,
        concurrency: Annotated[int, typer.Option(help="LLM calls at once.")] = 4,
        as_json: JsonOpt = False,
    ) -> None:
        """Failure-mode tag counts per system (Table 11): once per (system, task) if any justification carries it."""
        from deskbench.tracks.deliverables.scoring.failure_tags import (
            jaccard,
            llm_tag_cells,
            regex_tags,
            tag_cells,
            tag_counts,
            tag_table,
        )

        if concurrency < 1:
            raise UserError(f"--concurrency {concurrency} is not valid; use 1 or more")
        store = _store(run_dir)
        finals = store.final_grades(system, verifiers=False)
        reports = {"regex": tag_counts(finals, regex_tags, name="regex")}
        agreement = None
        failed = 0
        if model:
            import asyncio

            from deskbench.models.registry import open_model

            tagger = open_model(model, role="judge", concurrency=concurrency, cache=True)

            async def go() -> LlmTagging:
                try:
                    return await llm_tag_cells(tagger, finals, concurrency=concurrency)
                finally:
                    await tagger.aclose()

            tagged = asyncio.run(go())
            failed = len(tagged.failed)
            reports["llm"] = tag_counts(finals, tagged.tags, name=tagger.id)
            agreement = jaccard(tag_cells(finals, regex_tags), tagged.tags)
        if as_json:
            _out.print_json(json.dumps({"counts": {k: r.model_dump() for k, r in reports.items()},
                                        "jaccard": agreement, "llm_failed_cells": failed}))
            return
        for label, r in reports.items():
            _out.print(tag_table(r, agreement if label == "llm" else None))
        if failed:
            _out.print(f"the LLM tagger could not tag {failed} cell(s); they count as untagged")
        if not finals:
            _out.print("no grades yet: run 'deskbench rubric grade' or 'rubric import'")
