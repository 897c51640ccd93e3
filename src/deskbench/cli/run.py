"""The one `run` command: the track that owns the tasks prepares the run; one runner executes it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deskbench.cli.common import JsonOpt, QuietOpt, execute_with_progress
from deskbench.cli.settings import (
    CapabilitiesOpt,
    JudgeMaxTokensOpt,
    JudgeReasoningEffortOpt,
    JudgeTemperatureOpt,
    JudgeTopPOpt,
    MaxTokensOpt,
    ReasoningEffortOpt,
    TemperatureOpt,
    TopPOpt,
    agent_sampling,
    use_model_flags,
)
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `run`."""
    for command in (run,):
        app.command()(command)


def run(
    ctx: typer.Context,
    tasks: Annotated[Path, typer.Option("--tasks", "-t", help="Tasks JSONL; for deliverables, a task package folder or a folder of packages.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Run directory (created; an existing run is resumed).")],
    agent: Annotated[list[str] | None, typer.Option(help="docqa: bm25-agent (default) | rag | oracle | guess | lexical (no model) | rlm (REPL in the sandbox) | external (your agent over MCP, with --command or --url); analytics: analyst-agent (default) | external; deliverables: deliverable-agent (default) | external; every track: package.module:Name (a plugin). Deliverables take several --agent/--model pairs.")] = None,
    model: Annotated[list[str] | None, typer.Option("--model", "-m", help="openai/<model> (default openai/gpt-5-mini), openai-compat/<name>@<url>, anthropic/<model>, local (ignored by lexical); repeat with --agent for several systems (deliverables)")] = None,
    corpus: Annotated[Path | None, typer.Option("--corpus", "-c", help="Corpus directory (not needed by guess).")] = None,
    judge: Annotated[str | None, typer.Option(help="LLM judge model for the scores (else ANLS*).")] = None,
    concurrency: Annotated[int, typer.Option(help="Episodes in flight at once.")] = 16,
    limit: Annotated[int | None, typer.Option(help="docqa and analytics: only the first N tasks (deliverables: --task).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Iterations per episode (T); default: bm25-agent its preset's (official 5, paper 10), rlm 30 root iterations (the official RLM's).")] = None,
    max_sub_calls: Annotated[int | None, typer.Option(help="rlm: llm_query sub-calls per episode (default: no cap, as the official RLM).")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Pages per search (default: bm25-agent its preset's, official 4, paper 5; the other agents 5).")] = None,
    protocol: Annotated[str | None, typer.Option("--protocol", help="bm25-agent's loop: official (the provider's official MADQA script: openai_agent.py, ...) | paper (Prompt 5, every provider) | a script's protocol by name (default: the preset's).")] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="bm25-agent's defaults: official (process_dataset.py: the official protocol, T=5, k=4; the default) | paper (Appendix G.1: Prompt 5 loop, T=10, k=5).")] = None,
    view: Annotated[str | None, typer.Option(help="Pages shown as image | text (default: image; text for a model without vision).")] = None,
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse and store the agent's model responses in the response cache.")] = False,
    prices: Annotated[Path | None, typer.Option(help="JSON price table to extend the built-in one.")] = None,
    attempts: Annotated[int, typer.Option(help="Attempts per task (3 for pass@3 and avg@3); a resumed run adds the missing ones.")] = 1,
    max_rounds: Annotated[int, typer.Option(help="analytics and deliverables: execute_code calls per episode.")] = 20,
    no_summary: Annotated[bool, typer.Option("--no-summary", help="analytics: leave out the auxiliary spreadsheet summary (the paper's ablation).")] = False,
    last_round_note: Annotated[bool, typer.Option("--last-round-note", help="analytics: the last execute_code result tells the model to answer now (not the paper's protocol; the system becomes analyst-agent[last-round-note]).")] = False,
    cjk_font_hint: Annotated[bool, typer.Option("--cjk-font-hint", help="analytics: the tool description says CJK fonts are installed (not the paper's protocol; the system becomes analyst-agent[cjk-font-hint]).")] = False,
    unsafe_local: Annotated[bool, typer.Option("--unsafe-local", help="analytics and rlm: run model code without bubblewrap (unsafe; debugging only).")] = False,
    chart_judge: Annotated[str | None, typer.Option(help="analytics: vision judge for charts (default: --judge).")] = None,
    file_judge: Annotated[str | None, typer.Option("--file-judge", help="analytics: the agentic File Judge model (AIDABench Listing 5: sandboxed code, at most 20 calls per file); it decides every output file (see --file-judge-deferred); off by default: the spreadsheet comparator decides.")] = None,
    file_judge_all: Annotated[bool | None, typer.Option("--file-judge-all/--file-judge-deferred", help="analytics: with --file-judge, every output file goes to the File Judge, the comparator's verdict kept beside it (the paper's protocol; the default) | only files the comparator cannot read (cheaper; not the paper's protocol).")] = None,
    only_task: Annotated[list[str] | None, typer.Option("--task", help="deliverables: run only these package ids (repeat).")] = None,
    only_system: Annotated[list[str] | None, typer.Option("--system", help="deliverables: run only these systems (agent:model as stored; repeat).")] = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="deliverables: run the selected episodes again, replacing the stored ones (others are kept).")] = False,
    retry_errors: Annotated[bool, typer.Option("--retry-errors", help="Run the episodes stored with an error again (not those that reached a limit), each as a new try; the earlier tries are kept.")] = False,
    inline_chars: Annotated[int, typer.Option(help="deliverables: characters of normalised input text put in the prompt.")] = 24_000,
    trap_hints: Annotated[bool, typer.Option("--trap-hints", help="deliverables: the prompt names the trap kinds (footnotes, units, weighting...): not the paper's prompt; the system becomes deliverable-agent[trap-hints].")] = False,
    web: Annotated[str | None, typer.Option("--web", help="deliverables: web_search and fetch tools: recorded:DIR (saved pages, offline) or brave (Brave Search API, key in $BRAVE_SEARCH_API_KEY). Off by default.")] = None,
    command: Annotated[str | None, typer.Option("--command", help="--agent external (every track): your agent's command, run once per task ({question} is replaced; the MCP server's URL is in $DESKBENCH_MCP_URL).")] = None,
    url: Annotated[str | None, typer.Option("--url", help="--agent external (every track): your agent as a service, POSTed {task_id, question, mcp_url} once per task; it answers over MCP (instead of --command).")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="--agent external (every track): an episode's wall-time limit in seconds (default 600); part of the run's configuration.")] = None,
    web_record: Annotated[Path | None, typer.Option("--web-record", help="deliverables: with a live --web, also save every search and page to DIR (replay with --web recorded:DIR).")] = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    reasoning_effort: ReasoningEffortOpt = None,
    max_tokens: MaxTokensOpt = None,
    judge_temperature: JudgeTemperatureOpt = None,
    judge_top_p: JudgeTopPOpt = None,
    judge_reasoning_effort: JudgeReasoningEffortOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
    capabilities: CapabilitiesOpt = None,
    executor: Annotated[str, typer.Option("--executor", help="Where episodes run: local (this process; the default) | ray (a Ray cluster; pip install 'deskbench[ray]').")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="--executor ray: the cluster's head as host:port (default: start one on this machine).")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run an agent over tasks, storing every episode; resumes an interrupted run; then scores it."""
    from deskbench.contract.registry import track_for
    from deskbench.models.registry import preflight
    from deskbench.runs.track import RunRequest
    from deskbench.runs.track_options import check_options, given_flags

    track = track_for(tasks, agent or [])
    check_options("run", track.name, given_flags(ctx, "run"))  # a flag the track does not take is named, not ignored
    _external_flags_need_an_external_agent(agent or [], track.agents, command=command, url=url, timeout=timeout)
    use_model_flags(capabilities, judge_temperature=judge_temperature, judge_top_p=judge_top_p,
                    judge_reasoning_effort=judge_reasoning_effort, judge_max_tokens=judge_max_tokens)
    for name in (judge, chart_judge, file_judge):  # a judge's key and settings before the run, not after it
        if name:
            preflight(name, role="judge")
    request = RunRequest(tasks=tasks, out=out_dir, agents=agent or [], models=model or [], attempts=attempts,
                         concurrency=concurrency, sampling=agent_sampling(temperature, top_p, reasoning_effort, max_tokens),
                         cache=cache, prices=prices, judge=judge, options=dict(ctx.params))
    from deskbench.runs.executors import get_executor
    from deskbench.runs.lock import run_lock
    from deskbench.runs.outcomes import show_scores

    get_executor(executor)  # an unknown name before anything is created
    if ray_address is not None and executor != "ray":
        raise UserError("--ray-address is for --executor ray; add --executor ray or drop --ray-address")

    with run_lock(out_dir):  # one writer per run directory: a second run on this --out stops in one line
        prep = track.prepare(request)
        if retry_errors:
            prep.retrying_errors()
        systems = execute_with_progress(prep, quiet, request, executor)
        show_scores(track, prep.store, systems, request, as_json=as_json)


def _external_flags_need_an_external_agent(agents: list[str], built_in: tuple[str, ...], **given: object) -> None:
    """--command, --url and --timeout configure `--agent external` (or a plugin, which may read
    them): given with the track's other built-in agents only, they would be recorded and do nothing."""
    used = [f"--{name}" for name, value in given.items() if value is not None]
    if used and all(a in built_in and a != "external" for a in agents or [built_in[0]]):
        raise UserError(f"{', '.join(used)} configure(s) --agent external, which this run does not have; "
                        f"add --agent external or drop {used[0]}")
