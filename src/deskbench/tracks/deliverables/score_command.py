"""The deliverables part of `deskbench score`: verifiers and stored grades applied, the paper's tables
printed (the command itself is cli/score.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.console import out
from deskbench.errors import UserError
from deskbench.runs.store import RunStore
from deskbench.tracks.deliverables.tasks import DeliverableTask

if TYPE_CHECKING:
    from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore


def score_deliverables(store: RunStore, *, systems: list[str] | None, judge: str | None, concurrency: int,
                       as_json: bool, items_out: Path | None = None, reviewed_only: bool = False) -> None:
    """Verifiers on every episode, the stored grades applied, the paper's tables printed, with
    which protocol produced them (score side, and each system's run side as the run stored it).
    `reviewed_only`: only QC-reviewed grades count (--reviewed-only)."""
    import asyncio

    from deskbench.scoring.judge_log import recording
    from deskbench.scoring.judges import close_models, open_judge
    from deskbench.tracks.deliverables.grades import GradeStore
    from deskbench.tracks.deliverables.scoring.deliverables_print import print_summary
    from deskbench.tracks.deliverables.scoring.deliverables_run import score_run
    from deskbench.tracks.deliverables.scoring.deliverables_summary import summarize
    from deskbench.tracks.deliverables.scoring.failure_tags import regex_tags, tag_counts

    judge_model = open_judge(judge, concurrency)
    try:
        with recording(store):  # the llm_check judge's calls, kept with each episode (judge_transcripts)
            items = asyncio.run(score_run(store, systems=systems, judge_model=judge_model, concurrency=concurrency))
    finally:
        close_models(judge_model)
    if not items:
        raise UserError(f"the run in {store.dir} has no episodes yet; run 'deskbench run' first")
    finals = GradeStore(store.dir).final_grades(None, verifiers=False)
    from deskbench.tracks.deliverables.scoring.deliverables_items import store_rows

    rows = store_rows(store, items, finals)  # each item with its prompt, gold, response and the judges' and grader's reasoning
    if items_out is not None:
        from deskbench.scoring.items_out import write_rows

        write_rows(items_out, rows)
    from deskbench.runs.protocol import stored_protocol

    report = summarize(items, store.tasks_of(DeliverableTask), reviewed_only=reviewed_only)
    from deskbench.tracks.deliverables.outcomes import deliverables_attempts

    report.attempts = deliverables_attempts(items, reviewed_only=reviewed_only)
    run_side = stored_protocol(store)
    report.run_protocol = {s: run_side[s] for s in report.systems if s in run_side}
    from deskbench.tracks.deliverables.web_deny import peeking_by_system

    report.peeking = peeking_by_system(store, report.systems)
    chosen = {k: f for k, f in finals.items() if systems is None or f.system in systems}
    report.failure_tags = tag_counts(chosen, regex_tags, name="regex")
    _record(store, judge, reviewed_only, report.model_dump(mode="json"), items, rows)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        print_summary(report, out)


def _record(store: RunStore, judge: str | None, reviewed_only: bool, report: dict[str, object],
            items: list[DeliverableItemScore], rows: list[dict[str, object]]) -> None:
    """Keep the scoring in the run store (runs/scorings.py): the tables over every system under
    "*" (deliverables' --json is one report), each item's outcome and row."""
    from deskbench.runs.scorings import ScoringSettings, StoredItem
    from deskbench.tracks.deliverables.outcomes import deliverables_outcomes

    def why(item: DeliverableItemScore) -> str:
        if reviewed_only and item.graded and item.grade_status != "reviewed":
            return f"the rubric grade is not QC-reviewed ({item.grade_status}; --reviewed-only)"
        return "not graded yet (grade it with 'deskbench serve --out RUNDIR' or 'deskbench rubric grade')"

    scorer = "verifiers with the llm_check judge and the rubric grades" if judge else "verifiers and the rubric grades, no judge"
    store.record_scoring("deliverables", ScoringSettings.of(scorer, {"judge": judge, "reviewed_only": reviewed_only}),
                         {"*": report},
                         [StoredItem.of(o, row, why(it)) for o, row, it in
                          zip(deliverables_outcomes(items, reviewed_only=reviewed_only), rows, items, strict=True)])
