"""The deliverables part of `deskbench score`: verifiers and stored grades applied, the paper's tables
printed (the command itself is cli/score.py)."""

from __future__ import annotations

from pathlib import Path

from deskbench.console import out
from deskbench.errors import UserError
from deskbench.runs.store import RunStore


def score_deliverables(store: RunStore, *, systems: list[str] | None, judge: str | None, concurrency: int,
                       as_json: bool, items_out: Path | None = None, reviewed_only: bool = False) -> None:
    """Verifiers on every episode, the stored grades applied, the paper's tables printed, with
    which protocol produced them (score side, and each system's run side as the run stored it).
    `reviewed_only`: only QC-reviewed grades count (--reviewed-only)."""
    import asyncio

    from deskbench.scoring.judge_log import recording
    from deskbench.tracks.analytics.score_command import _judge_model, close_models
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.deliverables_print import print_summary
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run
    from deskbench.tracks.deliverables.scoring.deliverables_summary import summarize
    from deskbench.tracks.deliverables.scoring.failure_tags import regex_tags, tag_counts

    judge_model = _judge_model(judge, concurrency)
    try:
        with recording(store):  # the llm_check judge's calls, kept with each episode (judge_transcripts)
            items = asyncio.run(score_run(store, systems=systems, judge_model=judge_model, concurrency=concurrency))
    finally:
        close_models(judge_model)
    if not items:
        raise UserError(f"the run in {store.dir} has no episodes yet; run 'deskbench run' first")
    finals = GradeStore(store.dir).final_grades(None, verifiers=False)
    if items_out is not None:  # each item with its prompt, gold, response and the judges' and grader's reasoning
        from deskbench.scoring.items_out import write_rows
        from deskbench.tracks.deliverables.scoring.deliverables_items import store_rows

        write_rows(items_out, store_rows(store, items, finals))
    from deskbench.runs.protocol import stored_protocol

    report = summarize(items, store.deliverable_tasks(), reviewed_only=reviewed_only)
    run_side = stored_protocol(store)
    report.run_protocol = {s: run_side[s] for s in report.systems if s in run_side}
    chosen = {k: f for k, f in finals.items() if systems is None or f.system in systems}
    report.failure_tags = tag_counts(chosen, regex_tags, name="regex")
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        print_summary(report, out)
