"""The one `run` command: the track that owns the tasks prepares the run; one runner executes it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deskbench.cli import batch_flag
from deskbench.cli.batch_flag import HELP_RUN
from deskbench.cli.common import JsonOpt, QuietOpt, execute_with_progress
from deskbench.cli.settings import (
    CapabilitiesOpt,
    DecodingOpt,
    JudgeMaxTokensOpt,
    JudgeReasoningEffortOpt,
    JudgeTemperatureOpt,
    JudgeTopPOpt,
    MaxTokensOpt,
    ReasoningEffortOpt,
    TemperatureOpt,
    TopKOpt,
    TopPOpt,
    agent_sampling,
    use_model_flags,
)
from deskbench.cli.track_flags import with_track_flags
from deskbench.errors import UserError

if TYPE_CHECKING:
    from pydantic import BaseModel


def register(app: typer.Typer) -> None:
    """Add `run`, with every track's own flags (their option models: cli/track_flags.py)."""
    app.command(name="run")(with_track_flags(run, "run", after="concurrency"))


def run(
    ctx: typer.Context,
    tasks: Annotated[Path, typer.Option("--tasks", "-t", help="Tasks JSONL; for deliverables, a task package folder or a folder of packages.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Run directory (created; an existing run is resumed).")],
    agent: Annotated[list[str] | None, typer.Option(help="docqa: bm25-agent (default); analytics: analyst-agent (default); deliverables: deliverable-agent (default); every track: external (your agent over MCP, with --command or --url) or package.module:Name (a plugin); `deskbench list agents` names them all. Deliverables take several --agent/--model pairs.")] = None,
    model: Annotated[list[str] | None, typer.Option("--model", "-m", help="openai/<model> (default openai/gpt-5-mini), openai-compat/<name>@<url>, anthropic/<model>, local (ignored by lexical); repeat with --agent for several systems (deliverables)")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM judge model for the scores (else ANLS*).")] = None,
    concurrency: Annotated[int, typer.Option(help="Episodes in flight at once.")] = 16,
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse and store the agent's model responses in the response cache.")] = False,
    prices: Annotated[Path | None, typer.Option(help="Extra prices (JSON; docs/cost.md).")] = None,
    attempts: Annotated[int, typer.Option(help="Attempts per task (3 for pass@3 and avg@3); a resumed run adds the missing ones.")] = 1,
    retry_errors: Annotated[bool, typer.Option("--retry-errors", help="Run the episodes stored with an error again (not those that reached a limit), each as a new try; the earlier tries are kept.")] = False,
    batch: Annotated[bool, typer.Option("--batch-api", help=HELP_RUN)] = False,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    sampling_top_k: TopKOpt = None,
    decoding: DecodingOpt = None,
    reasoning_effort: ReasoningEffortOpt = None,
    max_tokens: MaxTokensOpt = None,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
    executor: Annotated[str, typer.Option("--executor", help="local (this process) | ray (pip install 'deskbench[ray]').")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="--executor ray: the head's host:port (default: a local one).")] = None,
    max_cost: Annotated[list[str] | None, typer.Option("--max-cost", metavar="USD", help="Run's cost limit, or episode=USD")] = None,
    token_budget: Annotated[list[str] | None, typer.Option("--token-budget", metavar="N", help="Run's token limit, or episode=N")] = None,
    on_budget: Annotated[str, typer.Option("--on-budget", metavar="MODE", help="finish | cancel episodes in flight", show_default=False)] = "finish",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run an agent over tasks, storing every episode; resumes an interrupted run; then scores it."""
    from deskbench.contract.registry import track_for
    from deskbench.runs.budget import parse_limits
    from deskbench.runs.track import RunRequest, ready
    from deskbench.runs.track_options import (
        check_options,
        given_flags,
        preflight_judges,
        track_options,
    )

    track = track_for(tasks, agent or [])
    check_options("run", track.name, given_flags(ctx, "run"))  # a flag the track does not take is named, not ignored
    options = track_options("run", track, ctx.params)
    _external_flags_need_an_external_agent(agent or [], track.agents, options)
    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    preflight_judges(judge, options)  # a judge's key and settings before the run, not after it
    if batch:
        batch_flag.check([*(model or ["openai/gpt-5-mini"]), *([judge] if judge else [])], what="run")
    concurrency = batch_flag.run_concurrency(ctx, batch, concurrency, executor)
    sampling = agent_sampling(temperature, top_p, reasoning_effort, max_tokens, top_k=sampling_top_k, decoding=decoding)
    limits = parse_limits(max_cost or [], token_budget or [], on_budget)
    if limits.on_budget == "cancel" and executor == "ray":
        raise UserError("--on-budget cancel is for --executor local (a Ray worker's episode is not stopped from here); "
                        "drop it to let the episodes in flight finish")
    request = RunRequest(tasks=tasks, out=out_dir, agents=agent or [], models=model or [], attempts=attempts,
                         concurrency=concurrency, sampling=sampling,
                         cache=cache, prices=prices, judge=judge, options=options, capabilities=capabilities,
                         ray_address=ray_address, limits=limits)
    from deskbench.runs.executors import get_executor
    from deskbench.runs.lock import run_lock
    from deskbench.runs.track_outcomes import show_scores

    get_executor(executor)  # an unknown name before anything is created
    if ray_address is not None and executor != "ray":
        raise UserError("--ray-address is for --executor ray; add --executor ray or drop --ray-address")

    # one writer per run directory: a second run on this --out stops in one line; under --batch-api the
    # models opened inside batch their calls (cli/batch_flag.py)
    with run_lock(out_dir), batch_flag.batching(batch, ("agent", "judge")) as batches:
        _holds_no_other_track(out_dir, track.name)  # before the track writes anything into it
        prep = ready(track.prepare(request).limited_by(limits))  # the runner files the tasks, records each system, counts what is done
        if batches is not None:
            batches.journal.target = prep.store  # batch ids are kept in the run store: a killed run resumes them
            if prep.budget is not None and limits.on_budget == "cancel":
                prep.budget.on_reached(batches.cancel_open)  # the episodes in flight stop, and their batches
        if retry_errors:
            prep.retrying_errors()
        systems = execute_with_progress(prep, quiet, request, executor)
        show_scores(track, prep.store, systems, request, as_json=as_json)
        batch_flag.finish(batches, prep.store)


def _holds_no_other_track(out_dir: Path, name: str) -> None:
    """A run directory that holds another track's tasks is refused before the track's `prepare`
    writes its systems' settings into it (the runner files the tasks after `prepare`)."""
    from deskbench.nearby import is_run

    if not is_run(out_dir):
        return
    from deskbench.runs.store import RunStore

    store = RunStore(out_dir, create=False)
    try:
        held = store.track() if store.task_hashes() else name
    finally:
        store.close()
    if held != name:
        raise UserError(f"{out_dir} holds a {held} run; use a new --out directory for {name} tasks")


def _external_flags_need_an_external_agent(agents: list[str], built_in: tuple[str, ...], options: BaseModel) -> None:
    """--command, --url and --timeout configure `--agent external` (or a plugin, which may read
    them): given with the track's other built-in agents only, they would be recorded and do nothing."""
    from deskbench.contract.options import ExternalAgentOptions

    given = options.external_given() if isinstance(options, ExternalAgentOptions) else {}
    used = [f"--{name}" for name in given]
    if used and all(a in built_in and a != "external" for a in agents or [built_in[0]]):
        raise UserError(f"{', '.join(used)} configure(s) --agent external, which this run does not have; "
                        f"add --agent external or drop {used[0]}")
