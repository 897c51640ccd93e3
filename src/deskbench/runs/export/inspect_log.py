"""`deskbench export RUNDIR --format inspect -o DIR`: one Inspect AI eval log per system of the
run, written with inspect_ai itself (`write_eval_log`), so `inspect view --log-dir DIR` opens
deskbench runs.

Per system, one `.eval` log (task = the track, model = the system's model, the system's
configuration and builds from the run identity, its protocol notes and the outcome definition
in the log's metadata); every episode is a sample: id = task id, epoch = attempt + 1, input = the
task's question or prompt, target = the gold answer, messages and events from the transcript
(runs/export/inspect_chat.py), output = the submission's answer, scores = the item's outcome from
the latest scoring `deskbench score` (or `run`) stored in the run that covered it (runs/scorings.py:
the judges' verdicts the user saw; each score's explanation is the judges' reasoning and its
metadata names the scoring), else from the track's own scoring path with no flags
(`Track.outcomes`: offline, no judge), labelled so: `score` (in [0, 1]) and `correct` (C / I). An
item left unscored (or not scored: docqa's offline path scores attempt 0) has no score, says why
in its metadata and is counted in each score's `unscored_samples`, never as wrong. A failed episode is
a sample with its error; one that hit its budget has a `limit`.

The network. inspect_ai was checked (0.3.285) with the network cut off (`unshare -n`) and a
Python audit hook on every socket connect and DNS lookup: importing `inspect_ai.log`,
`write_eval_log` and `read_eval_log` (.eval and .json) open no network connection (only the
local socket pair of an asyncio event loop) and write nothing outside the log's path. Its
network paths are elsewhere: model providers, `inspect view`'s bundle fetch (inspect_ai/_lfs,
used by the viewer's dist when not bundled), tiktoken token estimates for model calls, and
telemetry and key-override hooks (INSPECT_TELEMETRY, INSPECT_API_KEY_OVERRIDE), which inspect_ai
loads only for model calls. Nothing here reaches them; the export also drops those two variables
for its own process, so a user's environment cannot turn one on through some later code path.
`inspect view` serves its bundled viewer offline too (checked the same way).
`tests/runs/test_export_inspect.py` writes and reads back with every non-loopback connect refused.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbench.contract.export import ExportOptions
from deskbench.errors import UserError
from deskbench.runs.export.samples import SampleSource, Scored, SystemSource, image_bytes, systems

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample, EvalSampleLimit

INSTALL = "pip install 'deskbench[inspect]'"
_HOOK_VARS = ("INSPECT_TELEMETRY", "INSPECT_API_KEY_OVERRIDE")


def require_inspect() -> None:
    """inspect_ai is an optional extra: without it, one line saying how to install it."""
    for var in _HOOK_VARS:  # user hooks load arbitrary code (and may send telemetry): not for an export
        os.environ.pop(var, None)
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError as exc:
        raise UserError(f"--format inspect needs the inspect_ai library ({exc.name or 'inspect_ai'} is not "
                        f"installed); install it with: {INSTALL}") from None


def _time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _id(*parts: str) -> str:
    """A stable id (the same run exported twice gives the same ids)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:22]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "system"


def _sample(src: SystemSource, s: SampleSource, images: Any) -> EvalSample:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    from deskbench.runs.export.inspect_chat import chat, events, judge_events

    ep = s.episode
    start, end = _time(ep.started_at), _time(ep.finished_at)
    model = (src.identity.config.model if src.identity and src.identity.config.model else None) or src.system
    messages = chat(s.transcript, images) if s.transcript is not None else []
    evts = events(s.transcript, images, start) if s.transcript is not None else []
    evts += judge_events(s.judges, images, end)
    scores = None
    outcome = s.outcome
    scored = s.scored
    status: str = "not scored: the track's scoring does not score this attempt" if outcome is None else outcome.status
    if outcome is not None and outcome.status == "scored":
        about = {"scored_by": scored.by if scored else None, "scoring": scored.scoring if scored else None,
                 "judge": scored.verdicts if scored else {}, "definition": src.track.outcome_definition}
        scores = {"score": Score(value=float(outcome.score or 0.0), answer=s.answer,
                                 explanation=_explanation(scored) or src.track.outcome_definition, metadata=about),
                  "correct": Score(value=CORRECT if outcome.correct else INCORRECT, answer=s.answer,
                                   explanation=_explanation(scored), metadata=about)}
    elif outcome is not None:
        status = ("unscored: " + (scored.reason if scored and scored.reason else
                                  "the scorer could not decide (no judge offline, a failed judge call, an ungraded item)"))
    usage = ep.usage
    model_usage = {model: ModelUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                                     total_tokens=usage.input_tokens + usage.output_tokens, total_cost=usage.cost_usd)}
    metadata: dict[str, Any] = {
        "task_id": ep.task_id, "attempt": ep.attempt, "system": ep.system, "status": ep.status,
        "error": ep.error, "score_status": status, "scored_by": scored.by if scored else None,
        "scoring": scored.scoring if scored else None, "gold": s.task.gold, "answer": s.answer,
        "submission": ep.submission.model_dump(mode="json", exclude_none=True) if ep.submission is not None else None,
        "trajectory": s.summary, "judges": sorted(s.judges), "transcript": s.transcript is not None,
        "task_hash": ep.task_hash,
    }
    from inspect_ai._util.error import EvalError

    return EvalSample(
        id=ep.task_id, epoch=ep.attempt + 1, input=s.task.input, target=s.task.target, messages=messages,
        output=ModelOutput.from_content(model, s.answer), scores=scores, metadata=metadata, events=evts,
        model_usage=model_usage, started_at=start.isoformat(), completed_at=end.isoformat(),
        total_time=round((end - start).total_seconds(), 3), working_time=round(usage.seconds, 3),
        uuid=_id(str(src.run_dir.resolve()), src.system, ep.task_id, str(ep.attempt)),
        error=EvalError(message=ep.error or "the episode failed", traceback="", traceback_ansi="")
        if ep.status == "error" else None,
        limit=_limit(ep.error) if ep.status == "limit" else None,
    )


def _limit(error: str | None) -> EvalSampleLimit:
    """A limit episode as Inspect's sample limit: the cost or token limit deskbench's budget stopped
    it at (runs/budget.py), else the agent's own (its steps or rounds: "custom")."""
    from inspect_ai.log import EvalSampleLimit

    from deskbench.runs.budget import stopped_at

    found = stopped_at(error)
    if found is None:
        return EvalSampleLimit(type="custom", limit=0, reason=error)
    return EvalSampleLimit(type=found[0], limit=found[1], reason=error)


def _explanation(scored: Scored | None) -> str | None:
    """The judges' reasoning of a stored item, one paragraph per judge (None: no judge decided it)."""
    if scored is None:
        return None
    parts = []
    for name, said in scored.verdicts.items():
        why = said.get("reasoning") if isinstance(said, dict) else None
        if isinstance(why, dict):
            why = "; ".join(f"{k}: {v}" for k, v in why.items())
        if why:
            parts.append(f"{name} ({said.get('verdict')}): {why}")
    return "\n\n".join(parts) or None


def _results(src: SystemSource) -> Any:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    scored = [s.outcome for s in src.samples if s.outcome is not None and s.outcome.status == "scored"]
    unscored = len(src.samples) - len(scored)
    n = len(scored)
    mean = sum(o.score or 0.0 for o in scored) / n if n else 0.0
    accuracy = sum(bool(o.correct) for o in scored) / n if n else 0.0
    by = sorted({s.scored.by for s in src.samples if s.scored is not None})
    note = {"definition": src.track.outcome_definition,
            "scorer": by[0] if len(by) == 1 else (by or "the track's default, offline (no judge)")}
    return EvalResults(
        total_samples=len(src.samples), completed_samples=sum(s.episode.status == "ok" for s in src.samples),
        scores=[EvalScore(name="score", scorer="score", scored_samples=n, unscored_samples=unscored,
                          metrics={"mean": EvalMetric(name="mean", value=mean)}, metadata=note),
                EvalScore(name="correct", scorer="correct", scored_samples=n, unscored_samples=unscored,
                          metrics={"accuracy": EvalMetric(name="accuracy", value=accuracy)}, metadata=note)])


def eval_log(src: SystemSource, options: ExportOptions) -> EvalLog:
    """One system of the run as an Inspect eval log."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalPlan,
        EvalPlanStep,
        EvalRevision,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage

    from deskbench.runs.export.inspect_chat import Images

    images = Images((lambda ref: image_bytes(ref, src.store, src.corpus)) if options.images else None)
    samples = [_sample(src, s, images) for s in src.samples]
    identity = src.identity
    config = identity.config if identity is not None else None
    builds = [b for b in (identity.first, identity.latest) if b is not None] if identity is not None else []
    starts = sorted(s.episode.started_at for s in src.samples)
    ends = sorted(s.episode.finished_at for s in src.samples)
    created = builds[0].at if builds and builds[0].at else (starts[0] if starts else datetime.now(UTC).isoformat())
    usage: dict[str, ModelUsage] = {}
    for sample in samples:
        for name, u in sample.model_usage.items():
            usage[name] = usage[name] + u if name in usage else u
    attempts = Counter(s.episode.attempt for s in src.samples)
    sha = next((b.git_sha for b in reversed(builds) if b.git_sha), None)
    version = next((b.deskbench for b in reversed(builds) if b.deskbench), None)
    spec = EvalSpec(
        eval_id=_id("eval", str(src.run_dir.resolve()), src.system), run_id=_id("run", str(src.run_dir.resolve())),
        created=_time(created).isoformat(), task=src.track.name, task_id=_id("task", src.track.name, src.system),
        task_display_name=f"{src.track.name}: {src.system}", task_description=src.track.title,
        solver=config.agent if config else src.system.split(":")[0],
        solver_args=dict(config.settings) if config else None, tags=[src.system],
        dataset=EvalDataset(name=Path(src.tasks_file).name if src.tasks_file else src.track.name,
                            location=src.tasks_file, samples=src.task_count,
                            sample_ids=sorted({s.episode.task_id for s in src.samples})),
        model=(config.model if config and config.model else src.system), config=EvalConfig(epochs=max(len(attempts), 1)),
        revision=EvalRevision(type="git", origin="deskbench", commit=sha) if sha else None,
        packages={"deskbench": version} if version else {},
        metadata={"deskbench_run": str(src.run_dir.resolve()), "system": src.system, "track": src.track.name,
                  "configuration": config.model_dump(mode="json") if config else None,
                  "builds": {"first": identity.first.model_dump(mode="json") if identity and identity.first else None,
                             "latest": identity.latest.model_dump(mode="json") if identity else None},
                  "protocol": [n.model_dump(mode="json") for n in src.protocol],
                  "outcome_definition": src.track.outcome_definition,
                  "corpus": str(src.corpus.root) if src.corpus is not None else None,
                  "images": "corpus pages rendered again from the corpus at the recorded dpi; other images from the "
                            "run's blobs" if options.images else "off: text placeholders"},
    )
    plan = EvalPlan(steps=[EvalPlanStep(solver=spec.solver or "agent", params=spec.solver_args or {})])
    stats = EvalStats(started_at=starts[0] if starts else "", completed_at=ends[-1] if ends else "", model_usage=usage)
    return EvalLog(status="success", eval=spec, plan=plan, results=_results(src), stats=stats, samples=samples)


class InspectExporter:
    name = "inspect"
    summary = "one Inspect AI eval log (.eval) per system; open with `inspect view --log-dir DIR`"

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> list[Path]:
        require_inspect()
        from inspect_ai.log import write_eval_log

        out.mkdir(parents=True, exist_ok=True)
        written = []
        for src in systems(run_dir, options.corpus):
            log = eval_log(src, options)
            stamp = _time(str(log.eval.created)).strftime("%Y-%m-%dT%H-%M-%S")
            path = out / f"{stamp}_{src.track.name}_{_slug(src.system)}_{log.eval.task_id}.eval"
            write_eval_log(log, str(path))
            written.append(path)
        return written


EXPORTER = InspectExporter()
