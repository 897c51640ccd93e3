"""`deskbench import PRED.jsonl --tasks T.jsonl --system NAME --out RUNDIR`: a predictions file
(the official MADQA agents', a third party's, deskbench's own) as a system of a run, so that
`score`, `report` and every `analyse` command read it as they read `deskbench run`'s systems.

The file is read and matched exactly as `deskbench score PRED --tasks T` reads and matches it
(`tracks.docqa.tasks.read_submissions`, `scoring.docqa_match.match`: question text first, then id), so the
run scores as the file does. Each matched prediction becomes one episode (attempt 0) holding the
prediction as written (answer, citations, search_history, iterations, steps, llm_calls, usage,
the agent's own trajectory under `external_trajectory`, its id set to the task it matched), with
a deskbench trajectory made from what it carries (a model call per step of the official BM25
agent's trajectory, a search_documents call per search), so `analyse drift` sees its queries:

- an error row (an `error` and no answer: the official agents' crashed or timed-out questions)
  is an episode with status "error": counted as an agent error and scored 0, as the official
  evaluator scores it (in --official, as an answerless row);
- a task without a prediction gets no episode, so it is scored as missing, as a run's unrun task;
- a prediction that matches no task is left out and listed in one warning.

Costs are unknown (no price is known for another's model) unless the file gives them; times are
the import's (the predictions carry none), with the row's own seconds in the usage when given.

The system's configuration (run meta "imported": source path, sha256, tasks file, counts; its
record and readers are the core's, runs/imported.py, as `report` and the viewer read it for any
track) says it was imported and from what; no agent or model is recorded. The same file imported again under
the same name is a no-op (an import cut short is completed); another file under a name already in
the run is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.models.types import Usage
from deskbench.runs.imported import META_KEY, ImportRecord, imported_systems
from deskbench.runs.store import Episode, RunStore, now
from deskbench.tasks.jsonl import PREDICTIONS, LineError, iter_jsonl, open_capped
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep, TrajectoryStep
from deskbench.tracks.docqa.scoring.docqa_match import Matched, match
from deskbench.tracks.docqa.tasks import (
    DocQASubmission,
    DocQATask,
    read_tasks,
    submission_context,
    submission_shape,
)

SEARCH_TOOL = "search_documents"  # the official BM25 agent's tool, and deskbench's
BATCH = 50  # episodes built and written at a time: memory holds one batch, never the whole file


class ImportSummary(BaseModel):
    """What `deskbench import --json` prints."""

    run: str
    system: str
    record: ImportRecord
    new_episodes: int  # written by this command (0: the same file was imported before)
    pages_coerced: int = 0
    citations_dropped: int = 0
    id_disagrees: list[str] = []


def is_error_row(sub: DocQASubmission) -> bool:
    """An official error row: an error and no answer (the BM25 agent writes no answer, the RLM []).
    A row with an error and an answer keeps its answer."""
    return bool(sub.error) and not any(sub.answer)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _step_tokens(usage: Any) -> tuple[int, int] | None:
    """A step's tokens from an official trajectory step's usage (OpenAI's or Anthropic's names)."""
    if not isinstance(usage, dict):
        return None
    inp = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
    out = _int(usage.get("completion_tokens", usage.get("output_tokens")))
    return inp, out


def _searches_of_step(step: dict[str, Any]) -> list[ToolCallStep]:
    calls = []
    for result in step.get("tool_results") or []:
        if isinstance(result, dict) and result.get("name", SEARCH_TOOL) == SEARCH_TOOL and "query" in result:
            pages = [[r.get("file") or r.get("document"), r.get("page")] for r in result.get("results") or []
                     if isinstance(r, dict)]
            calls.append(ToolCallStep(name=SEARCH_TOOL, arguments={"query": str(result["query"])},
                                      result={"pages": pages}))
    return calls


def trajectory_of(sub: DocQASubmission) -> list[TrajectoryStep]:
    """What the prediction carries, as deskbench steps: deskbench's own trajectory as it is; the
    official BM25 agent's steps as a model call (with its tokens) and its searches (with the pages
    returned); else one search_documents call per search_history entry."""
    if sub.trajectory:
        return list(sub.trajectory)
    steps: list[TrajectoryStep] = []
    external = sub.external_trajectory
    if isinstance(external, list):
        for step in external:
            if not isinstance(step, dict):
                continue
            tokens = _step_tokens(step.get("usage"))
            if tokens is not None or step.get("role") == "assistant":
                inp, out = tokens or (0, 0)
                steps.append(ModelCallStep(input_tokens=inp, output_tokens=out, cost_usd=None))
            steps.extend(_searches_of_step(step))
    if any(isinstance(s, ToolCallStep) for s in steps):
        return steps
    for entry in sub.search_history or []:
        query = entry.get("query") if isinstance(entry, dict) else entry
        if query is not None:
            steps.append(ToolCallStep(name=SEARCH_TOOL, arguments={"query": str(query)}))
    return steps


def usage_of(sub: DocQASubmission, steps: list[TrajectoryStep]) -> Usage:
    """The prediction's usage (the RLM's tokens and seconds), else the model calls of its
    trajectory; the cost is unknown unless the prediction states one."""
    calls = [s for s in steps if isinstance(s, ModelCallStep)]
    if sub.usage is not None:
        return Usage(calls=sub.llm_calls or len(calls), input_tokens=sub.usage.input_tokens,
                     output_tokens=sub.usage.output_tokens, seconds=sub.usage.seconds,
                     cost_usd=sub.usage.cost_usd if "cost_usd" in sub.usage.model_fields_set else None)
    return Usage(calls=sub.llm_calls or len(calls), input_tokens=sum(s.input_tokens for s in calls),
                 output_tokens=sum(s.output_tokens for s in calls), cost_usd=None)


def episode_of(task: DocQATask, sub: DocQASubmission, system: str, at: str) -> Episode:
    sub = sub.model_copy(update={"id": task.id})
    steps = trajectory_of(sub)
    error = is_error_row(sub)
    return Episode(task_id=task.id, system=system, attempt=0, status="error" if error else "ok",
                   error=sub.error if error else None, submission=sub, trajectory=steps,
                   usage=usage_of(sub, steps), started_at=at, finished_at=at)


def _match(tasks: list[DocQATask], subs: list[DocQASubmission], pred: Path) -> Matched:
    try:
        return match(tasks, subs)
    except UserError:
        repeated = match(tasks, subs, official=True).repeated
        if not repeated:
            raise
        raise UserError(f"{pred}: {len(repeated)} tasks are answered by more than one prediction (matched by question "
                        f"text, then id), e.g. {repeated[0]!r}; keep one prediction a task, then import again") from None


@dataclass
class _Scan:
    """What the first pass over a predictions file keeps: per valid line its number, the id and
    question matching needs, whether it is an error row; the counts the warnings need; the sha256."""

    rows: list[tuple[int, DocQASubmission, bool]] = field(default_factory=list)
    skipped: list[LineError] = field(default_factory=list)
    coerced: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    sha256: str = ""


def _scan(pred: Path, skip_invalid: bool) -> _Scan:
    """Read every line once, validating it as `score` does, keeping only what matching needs."""
    scan, digest = _Scan(), hashlib.sha256()
    context = submission_context(False, scan.coerced, scan.dropped)
    for number, sub in iter_jsonl(pred, DocQASubmission, caps=PREDICTIONS, skip_invalid=skip_invalid,
                                  skipped=scan.skipped, context=context, shape=submission_shape, digest=digest):
        scan.rows.append((number, DocQASubmission(id=sub.id, question=sub.question),
                          is_error_row(sub)))
    scan.sha256 = digest.hexdigest()
    return scan


def _episodes(pred: Path, wanted: dict[int, DocQATask], system: str, sha: str, skip_invalid: bool,
              ) -> Iterator[list[Episode]]:
    """The second pass: the matched lines as episodes, BATCH at a time; the file must be the one
    the first pass read (same sha256)."""
    digest = hashlib.sha256()
    batch: list[Episode] = []
    context = submission_context(False, [], [])
    for number, sub in iter_jsonl(pred, DocQASubmission, caps=PREDICTIONS, skip_invalid=skip_invalid,
                                  skipped=[], context=context, shape=submission_shape, digest=digest):
        task = wanted.get(number)
        if task is not None:
            batch.append(episode_of(task, sub, system, now()))
            if len(batch) >= BATCH:
                yield batch
                batch = []
    if digest.hexdigest() != sha:
        raise UserError(f"{pred} changed while it was being imported (its sha256 is not the one first read); "
                        "import it again once nothing writes to it")
    yield batch


def import_predictions(pred: Path, tasks_file: Path, system: str, out: Path, *, skip_invalid: bool = False,
                       ) -> tuple[ImportSummary, list[str]]:
    """Import `pred` as `system` into the run at `out`; the summary, and the warnings to print.
    The file is read twice, a line at a time (once to validate and match, once to write the
    episodes in batches), so memory holds the matching keys and one batch, not the file."""
    if not system.strip() or system != system.strip():
        raise UserError(f"--system {system!r} is not a usable name; give a name without surrounding spaces, "
                        "e.g. --system bm25-gpt5-official")
    open_capped(pred, PREDICTIONS).close()  # a missing, odd or oversized file first, as before
    tasks = read_tasks(tasks_file, skip_invalid=skip_invalid).items
    if not tasks:
        raise UserError(f"{tasks_file} holds no tasks; give the MADQA tasks the predictions answer")
    scan = _scan(pred, skip_invalid)
    sha = scan.sha256
    subs = [sub for _, sub, _ in scan.rows]
    matched = _match(tasks, subs, pred)
    task_of = {id(s): t for t, s in matched.pairs if s is not None}
    if subs and not task_of:
        raise UserError(f"none of the {len(subs)} predictions in {pred} match a task of {tasks_file} (by question "
                        "text, then id); give the tasks file these predictions answer")
    wanted = {number: task_of[id(sub)] for number, sub, _ in scan.rows if id(sub) in task_of}
    errors = sum(error for _, sub, error in scan.rows if id(sub) in task_of)
    warnings = [str(line) for line in scan.skipped]
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a run directory")
    store = RunStore(out)
    try:
        known = imported_systems(store)
        previous = known.get(system)
        if previous is not None and previous.sha256 != sha:
            raise UserError(f"{out} already holds system {system!r}, imported from {previous.source} (sha256 "
                            f"{previous.sha256[:12]}), not this file; give another --system name, or another --out")
        if previous is None and system in store.systems():
            raise UserError(f"{out} already holds system {system!r} from 'deskbench run'; give another --system name, "
                            "or another --out")
        store.save_tasks(tasks, allow_new=False)  # predictions over another task file: a mistake
        if store.meta("tasks_file") is None:
            store.set_meta("tasks_file", str(tasks_file))
        record = ImportRecord(
            source=str(pred.resolve()), sha256=sha, tasks_file=str(tasks_file.resolve()),
            imported_at=previous.imported_at if previous else now(), rows=len(subs), episodes=len(wanted),
            errors=errors, unmatched=list(matched.extra), missing=len(matched.missing))
        # The record first: an import cut short is completed by the same command (same file).
        store.set_meta(META_KEY, {**{k: v.model_dump() for k, v in known.items()}, system: record.model_dump()})
        new = 0
        for batch in _episodes(pred, wanted, system, sha, skip_invalid):
            new += sum(store.record(e) for e in batch)
    finally:
        store.close()
    if matched.extra:
        shown = ", ".join(matched.extra[:5]) + (" …" if len(matched.extra) > 5 else "")
        warnings.append(f"{len(matched.extra)} predictions match no task (by question text, then id) and were "
                        f"not imported: {shown}")
    if scan.dropped:
        warnings.append(f"{len(scan.dropped)} citations could not be read and were dropped from their "
                        f"predictions (the answers are kept), e.g. {scan.dropped[0]}")
    if scan.coerced:
        warnings.append(f"{len(scan.coerced)} citation pages were strings and were read as numbers")
    if matched.id_disagrees:
        warnings.append(f"{len(matched.id_disagrees)} predictions carry the id of another task than their question "
                        f"text; matched by the text, as the official evaluator: {', '.join(matched.id_disagrees[:5])}")
    summary = ImportSummary(run=str(out), system=system, record=record, new_episodes=new,
                            pages_coerced=len(scan.coerced), citations_dropped=len(scan.dropped),
                            id_disagrees=list(matched.id_disagrees))
    return summary, warnings

