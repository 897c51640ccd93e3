"""`--agent claude-research`: the consulting paper's Claude agent (§3.4, Table 5) as Anthropic
deploys it: the Messages API with Anthropic's server-side tools, the code running in
Anthropic's sandbox, the output files read back from it. No deskbench sandbox and no
deskbench tool loop are involved (what Table 5 calls "Code execution: Anthropic sandbox",
"File retrieval: from sandbox").

The conversation, over the REST API (https://platform.claude.com/docs/en/api/messages, the
Files API and the code execution and web search tool pages; the field names are the ones of
the anthropic SDK's generated types):

1. each input file uploaded once (POST /v1/files, multipart `file`);
2. one user turn: a `container_upload` block per input (the files land in the container's
   input directory) and the prompt; tools `code_execution_20250825` (bash and file editing in
   the container) and, where the task allows the web, `web_search_20250305`;
3. the reply's `container.id` is sent back with every later request, so the same container
   (and what the code wrote in it) serves the whole episode; a `pause_turn` reply (a long
   server-tool turn the API paused) is continued by sending its content back as the
   assistant turn (a second pause extends that turn); `end_turn` ends the episode;
4. every file the code created comes back as a `bash_code_execution_output` block (file id);
   each is read through the Files API (GET /v1/files/{id} for its name, .../content for its
   bytes) into the episode's result folder, a later file of one name replacing an earlier.

Web search control (Table 5: "We inject/omit"): the harness decides whether the tool is there.
Without `--web`, Anthropic's `web_search` is injected on hybrid and open tasks and omitted on
closed ones (their discipline forbids the web). With `--web recorded:DIR` or a live backend,
deskbench's web_search and fetch are offered instead, as client tools (Table 5: Claude takes
"any Python function"), so a frozen web replays the same pages every time; that is deskbench's
setting, not the paper's, and the system is named `claude-research[web-...]`.

Resume: the Messages API has no background mode; each request is answered within its HTTP
call. What outlives a process is the uploaded files, the container and the turns already
answered: all three are kept in the pending record (pending.py) after every step, so a run
killed mid-episode resumes in the same container with the same files and sends only the turn
that was in flight when it died (it is sent again: an answer lost with its process cannot be
fetched back). A finished episode deletes its uploads and the files it read back.

Costs: each reply's usage (input tokens with cache writes and reads, output tokens) priced by
the run's price table; web searches at $10 per 1,000 (usage.server_tool_use.web_search_requests);
code execution by container time at $0.05 an hour with a 5-minute minimum, estimated as the
time the requests took (the API reports no container time). The organisation's free container
hours are not subtracted.

Citations: a text block's `web_search_result_location` citations are written after the text
as numbered markdown links and kept as a `citations` step (url, title, the cited text the API
quotes), and the search results are ToolCallSteps named `web_search` (as deskbench's own web
tool records them), so the citation verifiers and the C.3 checks see what was cited, on what
text, and what was found. Every server tool call and its result is a step of the episode's
trajectory; a bash run is an `execute_code` step (its command as the code, exit code, files, the
tail of a failed run's stderr), as the other agents' code runs are, so `deskbench diagnose`
classifies a failed file-writing run alike for every agent (§3.4: only the execution environment
differs).

Key: ANTHROPIC_API_KEY; endpoint root: ANTHROPIC_BASE_URL (a simulator in the tests), as the
anthropic SDK reads them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import httpx

from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.code_loop import AnalystContext, Deliverables
from deskbench.models.types import ChatRequest, ChatResponse, Message, ToolCall, Usage
from deskbench.runs.protocol import ProtocolNote, deskbench, paper
from deskbench.tasks.outputs import StopReason
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions, inline_inputs
from deskbench.tracks.deliverables.deep_research.pending import (
    PendingRequest,
    clear_pending,
    load_pending,
    save_pending,
)
from deskbench.tracks.deliverables.prompts import (
    INLINE_HEADER,
    TRAP_HINTS,
    TRAP_PREAMBLE,
    TRUNCATED,
)
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.deliverables.web_access import web_tools
from deskbench.tracks.deliverables.web_backend import WebBackend, WebUnavailable

NAME = "claude-research"
API_ROOT = "https://api.anthropic.com"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
KEY_ENV = "ANTHROPIC_API_KEY"
API_VERSION = "2023-06-01"
CODE_TOOL = {"type": "code_execution_20250825", "name": "code_execution"}
SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search"}
WEB_DISCIPLINES = ("hybrid", "open")  # the tasks Anthropic's web_search is injected on
MAX_TOKENS = 16_000  # per reply unless --max-tokens: a non-streamed request must end within the HTTP timeout
TIMEOUT = 900.0  # seconds per request: a reply with many server-tool calls takes minutes
RETRIES = 3  # a 429, 5xx or lost connection is retried, after retry-after or 2**n seconds
WEB_SEARCH_USD = 0.01  # $10 per 1,000 searches (the web search tool page, "Usage and pricing")
CONTAINER_USD_PER_HOUR = 0.05  # code execution tool page, "Usage and pricing"
CONTAINER_MIN_SECONDS = 300.0  # "a minimum of 5 minutes" billed per container
CODE_RUNS = ("bash_code_execution", "code_execution")  # server tool calls that run a program (20250825, 20250522)
CONTINUED = ("pause_turn", "tool_use")  # stop reasons after which the episode sends another request
SETTINGS_SENT = ("temperature", "top_p", "top_k", "max_tokens")  # what the request carries of --temperature etc.
NOT_SENT = ("decoding",)  # a preset's name: its values are the fields above

PROMPT = """{task_prompt}

INPUT FILES
These files are in your code-execution container's input directory: {names}.
{inline}
{outputs}HOW TO WORK
- Read the files and run every calculation with your code execution tool.
{web}- When you are done, reply with the deliverable itself, in markdown, as your final message.
"""
OUTPUTS = ("REQUIRED OUTPUT FILES\nWrite each file below with your code execution tool, under exactly this name "
           "(the files your code creates are collected from the container):\n{lines}\n\n")
WEB_SERVER = "- You may search the web (web_search) within the task's corpus discipline; cite every external figure.\n"
WEB_CLIENT = ("- web_search finds pages on the web (titles, URLs, snippets); fetch returns a page's text by URL; "
              "cite every external figure by its URL.\n")


class ApiError(Exception):
    """A request the API refused or could not answer: its status and the API's own message."""

    def __init__(self, status: int, message: str, *, transient: bool) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.transient = transient


def protocol_notes(options: DeliverableOptions) -> list[ProtocolNote]:
    """What this agent runs, for the run's protocol notes (runs/protocol.py)."""
    web = (deskbench("web access", f"Anthropic's web_search replaced by deskbench's client tools over "
                     f"{options.web.describe()}") if options.web is not None else
           paper("web access", "§3.4, Table 5 (\"we inject/omit\"): Anthropic's web_search_20250305 injected on "
                 "hybrid and open tasks, omitted on closed ones"))
    return [paper("agent", "§3.4, Table 5: Claude through the Messages API, code in Anthropic's sandbox "
                  "(code_execution_20250825), output files read back from it (Files API)"),
            deskbench("agent prompt", "the task's prompt with its corpus discipline (§3.2), the input files' "
                      "names and normalised text, the required outputs; the paper's adapter prompt is not released"),
            web]


@dataclass
class Conversation:
    """What outlives a killed process: kept in the pending record after every step."""

    files: dict[str, str] = field(default_factory=dict)  # input file name -> uploaded file id
    container: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # every reply, in order, as received
    busy: float = 0.0  # seconds the requests took: the container's time in use, as far as it is seen

    def dump(self) -> dict[str, Any]:
        return {"files": self.files, "container": self.container, "messages": self.messages,
                "replies": self.replies, "busy": self.busy}

    @classmethod
    def load(cls, data: dict[str, Any]) -> Conversation:
        return cls(files=dict(data.get("files", {})), container=data.get("container"),
                   messages=list(data.get("messages", [])), replies=list(data.get("replies", [])),
                   busy=float(data.get("busy", 0.0)))


class Api:
    """The REST API at one root with one key (x-api-key, anthropic-version)."""

    def __init__(self, root: str, key: str) -> None:
        self.http = httpx.AsyncClient(base_url=root.rstrip("/"), timeout=TIMEOUT, headers={
            "x-api-key": key, "anthropic-version": API_VERSION})

    @classmethod
    def from_env(cls) -> Api:
        key = os.environ.get(KEY_ENV, "")
        if not key:
            raise ApiError(0, f"--agent {NAME} needs ${KEY_ENV}: export the key of the Anthropic account to use",
                           transient=False)
        return cls(os.environ.get(BASE_URL_ENV) or API_ROOT, key)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried on 429, 5xx and lost connections; any other refusal raised with its message."""
        for attempt in range(RETRIES + 1):
            try:
                resp = await self.http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if attempt == RETRIES:
                    raise ApiError(0, f"{method} {path}: {type(exc).__name__}: {exc}", transient=True) from exc
                await asyncio.sleep(2 ** attempt)
                continue
            if resp.status_code < 400:
                return resp
            transient = resp.status_code == 429 or resp.status_code >= 500
            if not transient or attempt == RETRIES:
                raise ApiError(resp.status_code, _message(resp), transient=transient)
            await asyncio.sleep(_retry_after(resp, attempt))
        raise AssertionError("unreachable")

    async def json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        data = (await self.call(method, path, **kwargs)).json()
        if not isinstance(data, dict):
            raise ApiError(0, f"{method} {path}: the reply is not a JSON object", transient=False)
        return data


def _message(resp: httpx.Response) -> str:
    """The API's error message ({"type": "error", "error": {"type", "message"}})."""
    try:
        err = resp.json().get("error", {})
        return f"{err.get('type', 'error')}: {err.get('message', '')}"
    except (ValueError, AttributeError):
        return resp.text[:300]


def _retry_after(resp: httpx.Response, attempt: int) -> float:
    try:
        return max(0.0, float(resp.headers.get("retry-after", "")))
    except ValueError:
        return float(2 ** attempt)


def build_prompt(task: DeliverableTask, inputs: list[Path], *, inline_chars: int, web: str,
                 trap_hints: bool = False) -> str:
    """The task's prompt (corpus discipline first), the inputs and outputs, and how to work; with
    `trap_hints` the deliverable agent's preamble naming the trap kinds first (--trap-hints)."""
    inlined = inline_inputs(inputs, inline_chars)
    inline = f"\n{INLINE_HEADER}\n{inlined}\n".replace(TRUNCATED, "[... truncated: read the file in your container]") \
        if inlined else ""
    lines = []
    for o in task.required_outputs:
        sections = f" with sections/sheets/slides: {', '.join(o.sections)}" if o.sections else ""
        lines.append(f"- {o.name} ({o.format}){sections}")
    outputs = OUTPUTS.format(lines="\n".join(lines)) if lines else ""
    web_line = {"server": WEB_SERVER, "client": WEB_CLIENT}.get(web, "")
    preamble = TRAP_PREAMBLE.format(hints=", ".join(TRAP_HINTS.values())) if trap_hints else ""
    return preamble + PROMPT.format(task_prompt=task.full_prompt, names=", ".join(p.name for p in inputs),
                                    inline=inline, outputs=outputs, web=web_line)


def reply_text(reply: dict[str, Any]) -> str:
    """A reply's text blocks joined, each cited source written after its text as a numbered
    markdown link and listed under "Sources" (what a reader of Claude's answer is shown)."""
    parts: list[str] = []
    sources: dict[str, tuple[int, str]] = {}
    for block in reply.get("content", []):
        if block.get("type") != "text":
            continue
        text = block.get("text", "")
        marks = []
        for c in block.get("citations") or []:
            url = c.get("url")
            if not url:
                continue
            n = sources.setdefault(url, (len(sources) + 1, c.get("title") or url))[0]
            marks.append(f"[{n}]({url})")
        parts.append(text + ("".join(f" {m}" for m in dict.fromkeys(marks)) if marks else ""))
    text = "".join(parts).strip()
    if sources:
        text += "\n\nSources:\n" + "\n".join(f"{n}. [{title}]({url})" for url, (n, title) in sources.items())
    return text


def output_file_ids(replies: list[dict[str, Any]]) -> list[str]:
    """The file ids of every file the code created, in the order the replies gave them."""
    ids: list[str] = []
    for reply in replies:
        for block in reply.get("content", []):
            if block.get("type") not in ("bash_code_execution_tool_result", "code_execution_tool_result"):
                continue
            result = block.get("content")
            if isinstance(result, dict):
                for out in result.get("content") or []:
                    if out.get("type") in ("bash_code_execution_output", "code_execution_output") and out.get("file_id"):
                        ids.append(out["file_id"])
    return ids


def reply_cost(reply: dict[str, Any], rec: Recorder, model_id: str) -> tuple[Usage, float | None]:
    """The reply's usage priced: tokens by the run's price table, web searches by the API's fee."""
    usage = reply.get("usage") or {}
    tokens_in = int(usage.get("input_tokens") or 0) + int(usage.get("cache_creation_input_tokens") or 0) \
        + int(usage.get("cache_read_input_tokens") or 0)
    tokens_out = int(usage.get("output_tokens") or 0)
    searches = int((usage.get("server_tool_use") or {}).get("web_search_requests") or 0)
    prices = getattr(rec.model, "prices", None)
    if prices is None:
        from deskbench.models.prices import PriceTable

        prices = PriceTable()
    token_cost = prices.cost(model_id, tokens_in, tokens_out)
    cost = None if token_cost is None else token_cost + searches * WEB_SEARCH_USD
    return Usage(calls=1, input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost), token_cost


def record_reply(rec: Recorder, model_id: str, sent: list[dict[str, Any]], reply: dict[str, Any],
                 seconds: float) -> None:
    """The reply as the episode's steps: the model call (usage, cost) and each server tool call
    with its result, paired by tool_use_id; the whole reply in the transcript."""
    usage, _ = reply_cost(reply, rec, model_id)
    usage = usage.model_copy(update={"seconds": seconds})
    rec.usage = rec.usage + usage
    text = reply_text(reply)
    response = ChatResponse(message=Message(role="assistant", content=text), usage=usage,
                            finish_reason=reply.get("stop_reason"), model=str(reply.get("model", model_id)))
    rec.transcript.model_call(model_id, ChatRequest(messages=[_asked(sent)]),
                              response, at=max(0.0, rec.transcript.elapsed() - seconds), seconds=seconds)
    rec.add(ModelCallStep(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                          seconds=round(seconds, 4), cost_usd=usage.cost_usd))
    results = {b.get("tool_use_id"): b for b in reply.get("content", []) if b.get("type", "").endswith("_tool_result")}
    for block in reply.get("content", []):
        if block.get("type") == "server_tool_use":
            _record_server_tool(rec, block, results.get(block.get("id")))
    cited = [{"url": c.get("url"), "title": c.get("title"), "cited_text": c.get("cited_text")}
             for b in reply.get("content", []) if b.get("type") == "text" for c in b.get("citations") or []
             if c.get("url")]
    if cited:  # the page text each claim rests on, as the API quoted it (C.3 "supports" reads cited_text)
        rec.add(ToolCallStep(name="citations", arguments={}, result={"cited": cited}))
    rec.transcript.tool("anthropic_reply", {"stop_reason": reply.get("stop_reason"),
                                            "container": (reply.get("container") or {}).get("id")},
                        {"content": reply.get("content", []), "usage": reply.get("usage", {})})


def _asked(sent: list[dict[str, Any]]) -> Message:
    """What a request added, for the transcript: the user turn's text and blocks whole (the
    prompt, the client tools' results); a paused turn's continuation by its size (its blocks are
    the earlier replies, recorded already). A resumed episode's replayed replies show none."""
    if not sent:
        return Message(role="user", content="(a reply received before the run was resumed)")
    last = sent[-1]
    blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
    if last["role"] == "assistant":
        return Message(role="assistant", content=f"(the paused turn sent back to continue it: {len(blocks)} blocks)")
    parts = [b["text"] if b.get("type") == "text" else json.dumps(b, ensure_ascii=False) for b in blocks]
    return Message(role="user", content="\n\n".join(parts))


def _record_server_tool(rec: Recorder, call: dict[str, Any], result: dict[str, Any] | None) -> None:
    name, args = str(call.get("name", "")), call.get("input") or {}
    content = (result or {}).get("content")
    if name == "web_search":
        if isinstance(content, list):
            hits = [{"title": h.get("title", ""), "url": h.get("url", ""), "page_age": h.get("page_age")}
                    for h in content if isinstance(h, dict) and h.get("type") == "web_search_result"]
            out: dict[str, Any] = {"backend": "anthropic", "results": hits}
        else:
            out = {"backend": "anthropic", "error": (content or {}).get("error_code", "no result")}
        rec.add(ToolCallStep(name="web_search", arguments={"query": args.get("query", "")}, result=out))
        return
    if not isinstance(content, dict):
        rec.add(ToolCallStep(name=name, arguments=args, result={"error": "no result in the reply"}))
        return
    if content.get("type", "").endswith("_error"):
        rec.add(ToolCallStep(name=name, arguments=args, result={"error": content.get("error_code", "error")}))
        return
    summary: dict[str, Any] = {"type": content.get("type")}
    detail: dict[str, Any] = {}
    if "return_code" in content:
        summary |= {"exit_code": content.get("return_code"), "stdout_chars": len(content.get("stdout") or ""),
                    "stderr_chars": len(content.get("stderr") or ""),
                    "files": [o.get("file_id") for o in content.get("content") or []]}
        if content.get("return_code"):
            summary["error_tail"] = (content.get("stderr") or "")[-600:]
        detail = {"stdout": content.get("stdout", ""), "stderr": content.get("stderr", "")}
    if name in CODE_RUNS:  # a program run in the sandbox: named as every agent's code runs are (diagnose reads them)
        name, args = "execute_code", {"code": args.get("command", args.get("code", "")), "tool": name,
                                      "sandbox": "anthropic"}
    rec.add(ToolCallStep(name=name, arguments=args, result=summary), detail=detail)


class ClaudeResearch:
    """One Messages API conversation per episode, in one Anthropic container."""

    name = NAME

    def __init__(self, options: DeliverableOptions | None = None, web: WebBackend | None = None) -> None:
        self.options = options or DeliverableOptions()
        if (web is None) != (self.options.web is None):
            raise ValueError("a web backend is given exactly when options.web is set")
        self.tools = {t.spec.name: t for t in web_tools(web)} if web is not None else {}

    def protocol_notes(self) -> list[ProtocolNote]:
        return protocol_notes(self.options)

    def _request(self, task: DeliverableTask, model: str, conv: Conversation, sent: dict[str, Any]) -> dict[str, Any]:
        tools: list[dict[str, Any]] = [dict(CODE_TOOL)]
        if self.tools:
            tools += [{"name": t.spec.name, "description": t.spec.description, "input_schema": t.spec.parameters}
                      for t in self.tools.values()]
        elif task.corpus_discipline in WEB_DISCIPLINES:
            search: dict[str, Any] = dict(SEARCH_TOOL)
            if self.options.deny is not None:  # no peeking (web_deny.py): the benchmarks' own sources
                search["blocked_domains"] = self.options.deny.blocked_domains()
            tools.append(search)
        body: dict[str, Any] = {"model": model, "max_tokens": sent.get("max_tokens", MAX_TOKENS),
                                "messages": conv.messages, "tools": tools}
        body |= {k: v for k, v in sent.items() if k != "max_tokens"}
        if conv.container:
            body["container"] = conv.container
        return body

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        model_id = ctx.model.id if ctx.model is not None else ""
        provider, _, model = model_id.partition("/")
        if provider != "anthropic" or not model:
            return rec.result("error", error=f"--agent {NAME} runs on Anthropic models; --model {model_id or '(none)'} "
                              "is not one: give e.g. --model anthropic/claude-opus-4-6")
        settings = getattr(ctx.model, "settings", None)
        given = {k: v for k, v in (settings.sent.given() if settings is not None else {}).items() if k not in NOT_SENT}
        unsent = sorted(set(given) - set(SETTINGS_SENT))
        if unsent:
            flags = ", ".join(f"--{k.replace('_', '-')}" for k in unsent)
            return rec.result("error", error=f"--agent {NAME} sends no {flags} (the Messages API request here "
                              f"carries {', '.join(SETTINGS_SENT)}): drop {flags}")
        if (missing := task.missing_input()) is not None:
            return rec.result("error", error=missing)
        inputs = task.input_paths()
        pending = load_pending(workdir)
        resumed = pending is not None and pending.provider == "anthropic" and pending.model == model
        conv = Conversation.load(pending.data) if pending is not None and resumed else Conversation()
        files = Deliverables(workdir)  # the pending record sits beside the folder: it survives this
        try:
            api = Api.from_env()
        except ApiError as exc:
            return rec.result("error", error=str(exc))
        try:
            return await self._episode(task, ctx, workdir, rec, api, conv, files, model_id, model, inputs,
                                       given, resumed=resumed)
        finally:
            await api.aclose()

    def _save(self, workdir: Path, model: str, conv: Conversation) -> None:
        save_pending(workdir, PendingRequest(provider="anthropic", api="messages", id=conv.container or "",
                                             model=model, data=conv.dump()))

    async def _episode(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path, rec: Recorder, api: Api,
                       conv: Conversation, files: Deliverables, model_id: str, model: str, inputs: list[Path],
                       given: dict[str, Any], *, resumed: bool) -> AgentResult:
        if resumed:
            rec.transcript.tool("resumed", {"container": conv.container},
                                {"replies": len(conv.replies), "files": conv.files})
            for reply in conv.replies:  # the answered turns, recorded again from the saved replies
                record_reply(rec, model_id, [], reply, 0.0)
        try:
            for path in inputs:
                if path.name not in conv.files:
                    with path.open("rb") as fh:
                        meta = await api.json("POST", "/v1/files", files={"file": (path.name, fh.read())})
                    conv.files[path.name] = str(meta["id"])
                    rec.add(ToolCallStep(name="upload_file", arguments={"file": path.name},
                                         result={"file_id": meta["id"], "size_bytes": meta.get("size_bytes")}))
                    self._save(workdir, model, conv)
            if not conv.messages:
                web = "client" if self.tools else "server" if task.corpus_discipline in WEB_DISCIPLINES else ""
                prompt = build_prompt(task, inputs, inline_chars=self.options.inline_chars, web=web,
                                      trap_hints=self.options.trap_hints)
                conv.messages = [{"role": "user", "content": [
                    *({"type": "container_upload", "file_id": conv.files[p.name]} for p in inputs),
                    {"type": "text", "text": prompt}]}]
                self._save(workdir, model, conv)
            stop: StopReason = "round_limit"
            status = "limit"
            ended = conv.replies[-1].get("stop_reason") if conv.replies else None
            if ended is not None and ended not in CONTINUED:  # killed after the last reply: only the files are left
                stop, status = ("error", "error") if ended == "refusal" else ("answer", "ok")
            while status == "limit" and len(conv.replies) < ctx.settings.max_rounds:
                started = time.monotonic()
                body = self._request(task, model, conv, given)
                reply = await api.json("POST", "/v1/messages", json=body)
                seconds = time.monotonic() - started
                conv.replies.append(reply)
                conv.busy += seconds
                conv.container = (reply.get("container") or {}).get("id") or conv.container
                record_reply(rec, model_id, conv.messages, reply, seconds)
                reason = reply.get("stop_reason")
                conv.messages = _continued(conv.messages, _sendable(reply.get("content", [])))
                if reason == "tool_use":
                    conv.messages.append({"role": "user", "content": await self._client_tools(reply, rec)})
                elif reason not in CONTINUED:
                    stop, status = ("error", "error") if reason == "refusal" else ("answer", "ok")
                self._save(workdir, model, conv)
            error = {"ok": None, "error": "the model refused the request (stop_reason refusal)"}.get(
                status, f"request limit: the turn was still going after {ctx.settings.max_rounds} requests (--max-rounds)")
            return await self._finish(api, rec, conv, files, task, ctx, workdir, status, stop, error=error)
        except ApiError as exc:
            if not exc.transient:
                await self._cleanup(api, conv, [])
                clear_pending(workdir)
            return rec.result("error", error=f"{NAME}: {exc}" + (" (kept for a resume: run again)" if exc.transient else ""))
        except WebUnavailable as exc:
            return rec.result("error", error=f"web access failed: {exc}")

    async def _client_tools(self, reply: dict[str, Any], rec: Recorder) -> list[dict[str, Any]]:
        """deskbench's web tools (--web) answered as tool_result blocks, in the order called."""
        out = []
        for block in reply.get("content", []):
            if block.get("type") != "tool_use":
                continue
            tool = self.tools.get(str(block.get("name")))
            if tool is None:
                out.append({"type": "tool_result", "tool_use_id": block["id"], "is_error": True,
                            "content": f"unknown tool {block.get('name')!r}"})
                continue
            call = ToolCall(id=str(block["id"]), name=tool.spec.name, arguments=json.dumps(block.get("input") or {}))
            out.append({"type": "tool_result", "tool_use_id": block["id"], "content": await tool.run(call, rec)})
        return out

    async def _finish(self, api: Api, rec: Recorder, conv: Conversation, files: Deliverables, task: DeliverableTask,
                      ctx: AnalystContext, workdir: Path, status: str, stop: StopReason, *,
                      error: str | None) -> AgentResult:
        """The output files read back from the container, the container's time priced, the
        uploads and read-back files deleted, the pending record cleared."""
        ids = output_file_ids(conv.replies)
        fetched: list[list[Any]] = []
        for file_id in ids:
            meta = await api.json("GET", f"/v1/files/{file_id}")
            name = PurePosixPath(str(meta.get("filename") or "")).name
            name = name if name not in ("", ".", "..") else file_id  # a name is the model's choice: kept in the folder
            data = (await api.call("GET", f"/v1/files/{file_id}/content")).content
            (files.result / name).write_bytes(data)
            fetched.append([name, len(data), file_id])
        rec.add(ToolCallStep(name="read_back_files", arguments={"container": conv.container}, result={"files": fetched}))
        container_seconds = max(CONTAINER_MIN_SECONDS, conv.busy) if conv.container else 0.0
        fee = container_seconds / 3600 * CONTAINER_USD_PER_HOUR
        if fee:
            rec.usage = rec.usage + Usage(cost_usd=fee)
            rec.add(ToolCallStep(name="container_time", arguments={"container": conv.container},
                                 result={"seconds_estimated": round(container_seconds, 1), "usd": round(fee, 6)}))
        await self._cleanup(api, conv, ids)
        clear_pending(workdir)
        last = conv.messages[-1] if conv.messages and conv.messages[-1]["role"] == "assistant" else {"content": []}
        final = reply_text(last)  # the whole last assistant turn: a paused turn's replies are one message
        sub = DeliverableSubmission(id=task.id, response=final, files=files.records(),
                                    files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=len(conv.replies),
                                    stop=stop)
        return rec.result("ok" if status == "ok" else "limit" if status == "limit" else "error", sub, error=error)

    async def _cleanup(self, api: Api, conv: Conversation, outputs: list[str]) -> None:
        """Uploaded inputs and read-back outputs deleted; one already gone or refused is left."""
        for file_id in [*conv.files.values(), *outputs]:
            with contextlib.suppress(ApiError):
                await api.call("DELETE", f"/v1/files/{file_id}")


def _continued(messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with a reply's content as the assistant turn: a reply continuing a
    paused turn (pause_turn) extends that turn, as the API combines consecutive turns."""
    if messages and messages[-1]["role"] == "assistant":
        return [*messages[:-1], {"role": "assistant", "content": [*messages[-1]["content"], *content]}]
    return [*messages, {"role": "assistant", "content": content}]


_RESPONSE_ONLY = {"citations": None}  # a field a reply block may hold as null, which a request may not


def _sendable(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reply's content as the next request's assistant turn: as received, without null fields."""
    out = []
    for block in content:
        out.append({k: v for k, v in block.items() if not (k in _RESPONSE_ONLY and v is None)})
    return out


def make(options: DeliverableOptions, web: WebBackend | None) -> ClaudeResearch:
    """The factory deep_research.AGENTS names."""
    return ClaudeResearch(options, web)
