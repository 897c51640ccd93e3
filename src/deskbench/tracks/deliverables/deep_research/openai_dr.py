"""`--agent openai-deep-research`: OpenAI's deep-research model as the consulting DRA paper ran
it (§3.4, Table 5; Appendix D `adapters/openai_adapter.py`, whose code is not public): the
Responses API in background mode, web search on, the code interpreter in an OpenAI Container whose
input files are pre-loaded (`container.file_ids`), the output files read back through the
Containers API. The model writes and runs its own code in OpenAI's container; deskbench's sandbox
runs nothing.

One episode:
1. each input file uploaded through the Files API (purpose "assistants", the code interpreter's);
2. `POST /v1/responses` with `background: true`, the task's prompt as input, the tools
   `web_search_preview` (deep research requires a data source; Table 5: "we configure, soft
   enforcement": the corpus discipline is the prompt's line, the browser cannot be switched off)
   and `code_interpreter` with `container: {"type": "auto", "file_ids": [...]}`, and
   `reasoning: {"summary": "auto"}` (OpenAI's deep-research guide and cookbook), and `include` for
   the searches' sources and the code runs' logs (left out of a response otherwise);
3. the response's id written beside the episode folder (pending.py) before the first poll, so a
   run killed while OpenAI works polls the same response when rerun, never pays for a second;
4. `GET /v1/responses/{id}` until its status is completed, failed, cancelled or incomplete;
5. every container the code interpreter used is listed (`GET /v1/containers/{id}/files`) and each
   file the model made (source other than "user") is downloaded into the episode's result folder,
   as agents/code_loop.py Deliverables keeps the deliverable agent's;
6. the uploaded input files are deleted, the pending record removed.

What is recorded: every output item as a step (web_search_call as `web_search` with the sources it
returned, or `fetch` / `find_in_page` for the page actions, in the shapes web_access.py gives the
deliverable agent's web tools; code_interpreter_call as `execute_code` with its code and logs), the
url_citation annotations as a `url_citations` step, the reasoning summaries on the reply in the
transcript, and the usage with its cost: tokens at the run's price table (models/prices.py), plus OpenAI's
tool fees (web search per call, code interpreter per container). URLs the model cited in
annotations but not in its text are listed under the response (CITED_HEADER), so the citation
verifiers read what it cited.

The key and endpoint are the SDK's: OPENAI_API_KEY, OPENAI_BASE_URL (a simulator in the tests), as
docqa's managed-RAG agents read them. DESKBENCH_DEEP_RESEARCH_POLL sets the first wait between
polls in seconds (default 10, growing by half up to 60; the tests set milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.code_loop import ERROR_TAIL_CHARS, AnalystContext, Deliverables
from deskbench.errors import UserError
from deskbench.models.prices import PriceTable
from deskbench.models.settings import unsent_refusal
from deskbench.models.types import ChatRequest, ChatResponse, Message, Reasoning, Usage
from deskbench.requirements import EnvKey, Need
from deskbench.runs.protocol import ProtocolNote, deskbench, paper
from deskbench.tasks.outputs import StopReason
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions, inline_inputs
from deskbench.tracks.deliverables.deep_research.pending import (
    PendingRequest,
    PollTimeout,
    clear_pending,
    load_pending,
    poll_until,
    save_pending,
)
from deskbench.tracks.deliverables.prompts import INLINE_HEADER
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.deliverables.web_backend import WebBackend

NAME = "openai-deep-research"
PROVIDER = "openai"
EXAMPLE = "openai/o3-deep-research"
MODELS = ("o3-deep-research", "o4-mini-deep-research")  # and their dated names (…-2025-06-26)
PURPOSE = "assistants"  # Files API purpose of a file given to the code interpreter
TERMINAL = ("completed", "failed", "cancelled", "incomplete")
# a search's sources and a code run's outputs are in a response only when asked for (the Responses API's `include`)
INCLUDE = ["web_search_call.action.sources", "code_interpreter_call.outputs"]
POLL_ENV = "DESKBENCH_DEEP_RESEARCH_POLL"
POLL = 10.0
MAX_POLL = 60.0
MAX_WAIT = 3 * 3600.0  # OpenAI: a deep-research request "can take tens of minutes"
TRACEBACK = "Traceback (most recent call last)"
CITED_HEADER = "Sources cited (the response's url_citation annotations):"

# platform.openai.com/docs/pricing, "Built-in tools" (2025-11-24): web search $10 per 1,000 calls;
# code interpreter $0.03 per container (the default 1 GB memory). Every web_search_call item is
# counted as a call, whatever its action (the page does not say whether open_page is billed apart).
WEB_SEARCH_CALL_USD = 0.01
CONTAINER_USD = 0.03


class ResearchFailed(Exception):
    """A request OpenAI refused, or one that ended without a deliverable."""


class Gone(ResearchFailed):
    """The pending response is unknown to OpenAI (deleted, another account): nothing to poll."""


def model_name(model_id: str) -> str:
    """The deep-research model's name at OpenAI; a UserError naming the fix when it is not one."""
    provider, _, name = model_id.partition("/")
    if provider != PROVIDER or not name.startswith(MODELS):
        raise UserError(f"--agent {NAME} runs OpenAI's deep-research models ({', '.join(MODELS)}); --model "
                        f"{model_id or '(none)'} is not one: give e.g. --model {EXAMPLE}")
    return name


def unsent_settings(model: object) -> str | None:
    """The refusal of sampling flags: the paper's request sets none, and OpenAI refuses
    temperature and top_p on its reasoning models."""
    return unsent_refusal(model, f"--agent {NAME} sends the deep-research request as the paper did, with no {{flags}}")


def prices(model: object) -> PriceTable:
    """The run's price table (models/prices.py names o3-deep-research apart from o3)."""
    table = getattr(model, "prices", None)
    return table if isinstance(table, PriceTable) else PriceTable()


def research_prompt(task: DeliverableTask, inputs: Sequence[Path], inline_chars: int) -> str:
    """The paper's prompt (corpus discipline first, then the SME prompt) and the mechanics of this
    deployment: where the inputs are in the container, where the outputs go, which reply counts."""
    lines = [task.full_prompt, "",
             "Input files (uploaded to your python tool's container, under /mnt/data/; list that folder "
             "if a name differs):",
             *(f"- {p.name}" for p in inputs), ""]
    if task.required_outputs:
        lines.append("Required output files: write each with the python tool under /mnt/data/ with exactly "
                     "this name:")
        for o in task.required_outputs:
            sections = f" with sections/sheets/slides: {', '.join(o.sections)}" if o.sections else ""
            lines.append(f"- /mnt/data/{o.name} ({o.format}){sections}")
        lines.append("")
    inlined = inline_inputs(list(inputs), inline_chars)
    if inlined:
        lines += [INLINE_HEADER, inlined, ""]
    lines.append("Your final reply is the deliverable itself, in markdown.")
    return "\n".join(lines)


def poll_interval() -> float:
    raw = os.environ.get(POLL_ENV)
    if not raw:
        return POLL
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"${POLL_ENV}={raw!r} is not a number of seconds; unset it or give e.g. 10") from None
    if not value > 0:
        raise UserError(f"${POLL_ENV}={raw!r} must be more than 0 seconds")
    return value


def client() -> Any:
    """The SDK's async client, reading OPENAI_API_KEY and OPENAI_BASE_URL."""
    from openai import AsyncOpenAI

    return AsyncOpenAI()


def status_error(exc: Exception) -> str:
    """An SDK error as one line: the status and the API's own message."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    message = message or getattr(exc, "message", None) or str(exc)
    status = getattr(exc, "status_code", None)
    return f"{status} {message}" if status else str(message)


@dataclass
class Outcome:
    """What a finished response holds, read from its output items."""

    text: str = ""
    reasoning: list[str] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)  # url_citation annotations
    containers: list[str] = field(default_factory=list)  # in first-use order
    searches: int = 0  # web_search_call items (billed per call)
    tool_calls: int = 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def read_output(items: Sequence[Mapping[str, Any]], rec: Recorder) -> Outcome:
    """Each output item as the episode's step (in the response's order), and what the reply says."""
    out = Outcome()
    for item in items:
        kind = item.get("type")
        if kind == "web_search_call":
            out.searches += 1
            out.tool_calls += 1
            rec.add(_web_step(item))
        elif kind == "code_interpreter_call":
            out.tool_calls += 1
            container = _text(item.get("container_id"))
            if container and container not in out.containers:
                out.containers.append(container)
            outputs = item.get("outputs") or []
            logs = "".join(_text(o.get("logs")) for o in outputs if o.get("type") == "logs")
            images = [_text(o.get("url")) for o in outputs if o.get("type") == "image"]
            # the container gives no exit code: a failed call, or logs ending in a traceback, is a
            # failed run, so `deskbench diagnose` classifies it as it does the sandbox's (exit_code 1)
            failed = item.get("status") == "failed" or TRACEBACK in logs
            rec.add(ToolCallStep(name="execute_code", arguments={"code": _text(item.get("code"))},
                                 result={"backend": "openai-container", "container_id": container,
                                         "status": item.get("status"), "stdout": logs, "images": images,
                                         "id": item.get("id"),
                                         **({"exit_code": 1, "error_tail": logs[-ERROR_TAIL_CHARS:]} if failed else {})}))
        elif kind == "reasoning":
            out.reasoning += [_text(s.get("text")) for s in item.get("summary") or [] if s.get("text")]
        elif kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    out.text += _text(part.get("text"))
                    out.citations += [a for a in part.get("annotations") or [] if a.get("type") == "url_citation"]
                elif part.get("type") == "refusal":
                    out.text += _text(part.get("refusal"))
        elif kind is not None:  # an item this deployment does not ask for (mcp, file_search): kept as it came
            rec.transcript.tool(str(kind), {}, dict(item))
    return out


def _web_step(item: Mapping[str, Any]) -> ToolCallStep:
    """A web_search_call in the shape of the deliverable agent's web tools (web_access.py), so the
    sources an auditor or a citation check looks for are where they look."""
    action = item.get("action") or {}
    kind = action.get("type")
    base = {"backend": "openai-web-search", "status": item.get("status"), "id": item.get("id")}
    if kind == "open_page":
        return ToolCallStep(name="fetch", arguments={"url": action.get("url")}, result={**base, "url": action.get("url")})
    if kind == "find_in_page":
        return ToolCallStep(name="find_in_page", arguments={"url": action.get("url"), "pattern": action.get("pattern")},
                            result={**base, "url": action.get("url")})
    query = action.get("query") or "; ".join(action.get("queries") or [])
    sources = [{"title": "", "url": s.get("url"), "snippet": ""} for s in action.get("sources") or []
               if isinstance(s, Mapping)]
    return ToolCallStep(name="web_search", arguments={"query": query}, result={**base, "results": sources})


def with_cited_urls(text: str, citations: Sequence[Mapping[str, Any]]) -> str:
    """The reply with the annotated URLs it does not spell out listed under it, once each."""
    missing = list(dict.fromkeys(u for c in citations if (u := _text(c.get("url"))) and u not in text))
    if not missing:
        return text
    return text.rstrip() + "\n\n" + CITED_HEADER + "\n" + "\n".join(f"- {u}" for u in missing) + "\n"


class OpenAIDeepResearch:
    """One background response per episode; resumable from its pending record."""

    name = NAME

    def __init__(self, options: DeliverableOptions | None = None, web: WebBackend | None = None) -> None:
        self.options = options or DeliverableOptions()
        if self.options.web is not None or web is not None:
            raise UserError(f"--agent {NAME} searches with OpenAI's own web search, as the paper's o3 did "
                            "(Table 5); --web cannot be plugged into it: drop --web for this agent")
        self.poll = poll_interval()

    def requires(self) -> list[Need]:
        return [EnvKey("OPENAI_API_KEY", "export the key of the OpenAI account with deep-research access")]

    def protocol_notes(self) -> list[ProtocolNote]:
        return protocol_notes(self.options)

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        try:
            model = model_name(ctx.model.id if ctx.model is not None else "")
        except UserError as exc:
            return rec.result("error", error=str(exc))
        if (refused := unsent_settings(ctx.model) or task.missing_input()) is not None:
            return rec.result("error", error=refused)
        inputs = task.input_paths()
        files = Deliverables(workdir)  # clears what a killed attempt left; the pending record is beside it
        prompt = research_prompt(task, inputs, self.options.inline_chars)
        api = client()
        try:
            try:
                pending = await self._submit(api, model, prompt, inputs, workdir, rec)
                response = await poll_until(
                    lambda: self._retrieve(api, pending.id), lambda r: r.get("status") in TERMINAL,
                    interval=self.poll, max_interval=max(self.poll, MAX_POLL), max_wait=MAX_WAIT)
            except PollTimeout as exc:
                return rec.result("error", error=f"{NAME}: response {pending.id} {exc}; run again to keep "
                                  "polling it (its id is kept beside the episode)")
            return await self._finish(api, task, ctx, files, workdir, pending, response, prompt, rec)
        except ResearchFailed as exc:
            if isinstance(exc, Gone):
                clear_pending(workdir)
            return rec.result("error", error=f"{NAME}: {exc}")
        finally:
            await api.close()

    async def _submit(self, api: Any, model: str, prompt: str, inputs: Sequence[Path], workdir: Path,
                      rec: Recorder) -> PendingRequest:
        """The pending response of a killed attempt, or a new one (its id saved before any poll)."""
        import openai

        found = load_pending(workdir)
        if found is not None and found.provider == PROVIDER and found.api == "responses" and found.model == model:
            rec.transcript.tool("resume", {"response_id": found.id}, {"submitted_at": found.submitted_at})
            return found
        file_ids: list[str] = []
        try:
            for path in inputs:
                made = await api.files.create(file=(path.name, path.read_bytes()), purpose=PURPOSE)
                file_ids.append(str(made.id))
            rec.add(ToolCallStep(name="upload_inputs", arguments={"files": [p.name for p in inputs]},
                                 result={"file_ids": file_ids, "purpose": PURPOSE}))
            made = await api.responses.create(
                model=model, input=prompt, background=True, reasoning={"summary": "auto"}, include=INCLUDE,
                tools=[{"type": "web_search_preview"},
                       {"type": "code_interpreter", "container": {"type": "auto", "file_ids": file_ids}}])
        except openai.APIError as exc:
            await _delete_files(api, file_ids)
            raise ResearchFailed(f"the request was refused ({status_error(exc)})") from exc
        pending = PendingRequest(provider=PROVIDER, api="responses", id=str(made.id), model=model,
                                 data={"file_ids": file_ids})
        save_pending(workdir, pending)
        return pending

    async def _retrieve(self, api: Any, response_id: str) -> dict[str, Any]:
        import openai

        try:
            got = await api.responses.retrieve(response_id, include=INCLUDE)
        except openai.NotFoundError as exc:
            raise Gone(f"response {response_id} is not found at OpenAI ({status_error(exc)}); its record is "
                       "removed: run again to start a new one") from exc
        except openai.APIError as exc:
            raise ResearchFailed(f"polling response {response_id} failed ({status_error(exc)})") from exc
        data: dict[str, Any] = got.to_dict()
        return data

    async def _finish(self, api: Any, task: DeliverableTask, ctx: AnalystContext, files: Deliverables,
                      workdir: Path, pending: PendingRequest, response: Mapping[str, Any], prompt: str,
                      rec: Recorder) -> AgentResult:
        """The finished response as the episode: steps, files, usage and cost, the submission."""
        seconds = max(0.0, time.time() - pending.submitted_at)
        out = read_output(response.get("output") or [], rec)
        if out.citations:
            # "cited", not "url": a cited URL is not a source the run saw (C.3 reads `url` keys as sources)
            rec.add(ToolCallStep(name="url_citations", arguments={}, result={"citations": [
                {"cited": c.get("url"), "title": c.get("title"), "span": [c.get("start_index"), c.get("end_index")]}
                for c in out.citations]}))
        collected = await self._collect(api, out.containers, files, rec)
        self._record_usage(ctx, pending.model, response, out, prompt, seconds, rec)
        await _delete_files(api, [str(f) for f in pending.data.get("file_ids", [])])
        clear_pending(workdir)
        status = response.get("status")
        if status in ("failed", "cancelled"):
            error = response.get("error") or {}
            why = f": {error.get('code')}: {error.get('message')}" if error else ""
            return rec.result("error", error=f"{NAME}: response {pending.id} ended {status}{why}")
        if collected is not None:
            return rec.result("error", error=f"{NAME}: {collected}")
        stop: StopReason = "answer"
        limit: str | None = None
        if status == "incomplete":  # max_output_tokens or content_filter: the reply so far, if any
            reason = (response.get("incomplete_details") or {}).get("reason")
            if not out.text.strip():
                return rec.result("error", error=f"{NAME}: response {pending.id} incomplete ({reason}) with no reply")
            stop, limit = "round_limit", f"{NAME}: response {pending.id} incomplete ({reason})"
        sub = DeliverableSubmission(
            id=task.id, response=with_cited_urls(out.text.strip(), out.citations), files=files.records(),
            files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=out.tool_calls, stop=stop)
        return rec.result("ok" if limit is None else "limit", sub, error=limit)

    async def _collect(self, api: Any, containers: Sequence[str], files: Deliverables, rec: Recorder) -> str | None:
        """The model's files from each container into the result folder; the problem, or None."""
        import openai

        for container in containers:
            kept: list[dict[str, Any]] = []
            try:
                listed = [f async for f in api.containers.files.list(container, order="asc", limit=100)]
                for f in listed:
                    if f.source == "user":  # an input file the container was given
                        continue
                    name = PurePosixPath(f.path).name
                    if not name or name in (".", ".."):
                        continue
                    body = await api.containers.files.content.retrieve(f.id, container_id=container)
                    dest = files.result / name
                    dest.write_bytes(body.read())
                    kept.append({"name": name, "path": f.path, "bytes": dest.stat().st_size, "id": f.id})
            except openai.APIError as exc:
                rec.add(ToolCallStep(name="container_files", arguments={"container_id": container},
                                     result={"error": status_error(exc), "files": kept}))
                return (f"the output files of container {container} could not be read ({status_error(exc)}); "
                        "OpenAI expires a container 20 minutes after its last use")
            rec.add(ToolCallStep(name="container_files", arguments={"container_id": container},
                                 result={"files": kept}))
        return None

    def _record_usage(self, ctx: AnalystContext, model: str, response: Mapping[str, Any], out: Outcome,
                      prompt: str, seconds: float, rec: Recorder) -> None:
        """The response's usage once, priced: tokens, web search calls, containers."""
        usage = response.get("usage") or {}
        tokens_in = int(usage.get("input_tokens") or 0)
        tokens_out = int(usage.get("output_tokens") or 0)
        reasoning = int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0)
        model_id = ctx.model.id if ctx.model is not None else f"{PROVIDER}/{model}"
        token_cost = prices(ctx.model).cost(model_id, tokens_in, tokens_out)
        fees = out.searches * WEB_SEARCH_CALL_USD + len(out.containers) * CONTAINER_USD
        cost = token_cost + fees if token_cost is not None else None
        spent = Usage(calls=1, input_tokens=tokens_in, output_tokens=tokens_out, seconds=seconds,
                      cost_usd=cost, reasoning_tokens=reasoning)
        reply = Message(role="assistant", content=out.text, reasoning=[Reasoning(text=t) for t in out.reasoning])
        rec.transcript.model_call(model_id, ChatRequest(messages=[Message(role="user", content=prompt)]),
                                  ChatResponse(message=reply, usage=spent, model=model_id,
                                               finish_reason=str(response.get("status"))),
                                  at=0.0, seconds=seconds)
        rec.transcript.tool("costs", {"response_id": response.get("id")}, {
            "tokens_usd": token_cost, "web_search_calls": out.searches, "web_search_usd": out.searches * WEB_SEARCH_CALL_USD,
            "containers": len(out.containers), "containers_usd": len(out.containers) * CONTAINER_USD, "total_usd": cost})
        rec.usage = rec.usage + spent
        ledger = getattr(ctx.model, "ledger", None)  # the run summary's totals: this call bypassed the model
        if ledger is not None:
            ledger.total = ledger.total + spent
        rec.add(ModelCallStep(input_tokens=tokens_in, output_tokens=tokens_out, seconds=round(seconds, 4),
                              cost_usd=cost))


async def _delete_files(api: Any, file_ids: Sequence[str]) -> None:
    """The uploaded inputs removed (a file already gone, or a failed delete, is left as it is)."""
    import openai

    for file_id in file_ids:
        with contextlib.suppress(openai.APIError):
            await api.files.delete(file_id)


def protocol_notes(options: DeliverableOptions) -> list[ProtocolNote]:
    """What this agent runs, for the run's protocol notes (runs/protocol.py); `--web` is refused."""
    return [paper("agent", "§3.4, Table 5: o3-deep-research through the Responses API (background), code run in "
                  "an OpenAI Container pre-loaded with the inputs (container.file_ids), files read back through "
                  "the Containers API"),
            paper("web access", "§3.4, Table 5 (\"we configure, soft enforcement\"): OpenAI's web_search_preview on "
                  "every task; the corpus discipline is the prompt's line"),
            deskbench("agent prompt", "the task's prompt with its corpus discipline (§3.2), the input files' names "
                      "and normalised text, the required outputs under /mnt/data/; the paper's adapter prompt is "
                      "not released")]


def make(options: DeliverableOptions, web: WebBackend | None) -> OpenAIDeepResearch:
    return OpenAIDeepResearch(options, web)

