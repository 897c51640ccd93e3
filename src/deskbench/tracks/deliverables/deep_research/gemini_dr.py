"""`--agent gemini-deep-research`: Gemini deep research as the consulting DRA paper ran it (§3.4,
Table 5): Google's Deep Research agent through the Interactions API, whose report embeds the
Python that writes the output files; the harness extracts that code and runs it locally over the
staged inputs (here: deskbench's sandbox, the inputs at /mnt/data, the files collected from
/mnt/result, as `deliverable-agent`'s are).

The request (REST, https://ai.google.dev/gemini-api/docs/deep-research; field names as the
google-genai SDK's Interactions types at googleapis/python-genai 16fffbd3, 2026-04-21):
  POST {root}/v1beta/interactions  {"agent": NAME, "input": TEXT, "background": true,
       "agent_config": {"type": "deep-research", "thinking_summaries": "auto"}}
  GET  {root}/v1beta/interactions/{id}  until `status` leaves "in_progress" ("completed",
       "failed", "cancelled", "incomplete", "requires_action"), every 10 s at first (the docs'
       example) growing to 60 s, for at most 60 minutes (the agent's documented longest run).
  The reply is read in either shape the API has had: `outputs` (content items; the SDK until
  2026-05) or `steps` (since 975d16a3, 2026-05-14: the text inside "model_output" steps).
The agent is `--model google/<agent>` (e.g. google/deep-research-pro-preview-12-2025); the key is
GEMINI_API_KEY or GOOGLE_API_KEY and the root GOOGLE_GEMINI_BASE_URL (a simulator in the tests),
as models/gemini_native.py reads them.

What the paper's adapter did and deskbench does the same way: the package's prompt (corpus
discipline first) with the inputs normalised to text (xlsx as annotated TSV, docx/pptx/pdf as
text) in the one input turn; Google's search is always on (Table 5: "Google controls, always
on"; "Custom Tools: None"), so `--web` is refused for this agent (no backend of deskbench's can
be plugged into it) and a closed-corpus task is only asked, not enforced, to stay closed (§3.2:
adherence is measured, not guaranteed).
What is deskbench's own (docs/deep-research-gemini.md): the wording of the file-generation
instructions (the adapter's "format-aware" text is not published); every ```python block of the
report is run, in order, each as its own program (the prompt asks for one self-contained block);
blocks run only for tasks with required output files; `--inline-chars` caps the inlined text
(raise it to send the inputs whole: the agent's context is 1M tokens).

Resumable: the interaction's id is saved beside the episode's folder (pending.py) before the
first poll, so a run killed while the research runs polls the same interaction when run again.
Recorded: the interaction as one model call (its input and report, tokens, cost), each output
item as a step (thought summaries, Google searches with their queries, URL-context fetches with
each URL's status), the url_citation annotations, and each code run with its files."""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deskbench.agents.base import AgentResult, Recorder
from deskbench.agents.code_loop import ERROR_TAIL_CHARS, AnalystContext, Deliverables
from deskbench.errors import UserError
from deskbench.models.gemini_native import KEY_ENVS
from deskbench.models.gemini_rest import GeminiApiError, GeminiRest
from deskbench.models.settings import unsent_refusal
from deskbench.models.types import ChatRequest, ChatResponse, Message, Usage
from deskbench.runs.protocol import ProtocolNote, deskbench, paper
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
from deskbench.tracks.deliverables.prompts import TRAP_HINTS, TRAP_PREAMBLE, TRUNCATED
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, DeliverableTask
from deskbench.tracks.deliverables.web_backend import WebBackend

SERVICE = "gemini-deep-research"
API_VERSION = "v1beta"
PROVIDERS = ("google", "gemini")
EXAMPLE_MODEL = "google/deep-research-pro-preview-12-2025"
AGENT_PREFIX = "deep-research"  # the Interactions API's agents: deep-research-pro-preview-12-2025, ...
RUNNING = "in_progress"


@dataclass(frozen=True)
class Polling:
    """How the interaction is waited for; tests pass milliseconds."""

    interval: float = 10.0  # the docs' example: time.sleep(10) between gets
    max_interval: float = 60.0
    max_wait: float = 3600.0  # "maximum research time is 60 minutes" (the docs' limitations)


# Cost: the pricing page bills the Deep Research agent at the list rates of the Gemini model it
# runs on (Gemini 3 Pro: $2 / $12 per million input / output tokens, prompts up to 200k tokens)
# and its Google Search queries at $14 per 1,000 (ai.google.dev/gemini-api/docs/pricing, as of
# 2026-04). A --prices entry for the agent's name replaces the token rates. Cached input is
# billed at a discount the usage does not itemise per call: counted here at the full rate.
USD_PER_MTOK = (2.0, 12.0)
USD_PER_SEARCH_QUERY = 14.0 / 1000

PROMPT = """{preamble}THE TASK
{task_prompt}

{files}
HOW YOUR OUTPUT FILES ARE MADE
{code}"""
INPUTS_HEADER = "Input files (staged under /mnt/data/ when your code runs):"
INLINE_HEADER = "Their contents, normalised to text (spreadsheets as annotated TSV):"
OUTPUTS_HEADER = "Required output files (your code writes them under /mnt/result/):"
TRUNCATED_HERE = "[... truncated: the rest of this file is in /mnt/data/ for your code]"
CODE_RULES = (
    "You do not run code yourself. After you finish, the harness takes every fenced ```python block "
    "of your report and runs each one, in order, as its own Python 3 program, with the input files "
    "above under /mnt/data/ and an empty folder /mnt/result/. Include ONE self-contained ```python "
    "block (its imports, reading the inputs it needs from /mnt/data/) that writes every required "
    "output file under /mnt/result/ with exactly the name given, using {libraries}. The rest of "
    "your report is the deliverable itself, in markdown.")
NO_FILES_RULES = "No output files are required: your report itself, in markdown, is the deliverable."
LIBRARIES = {"docx": "python-docx (import docx)", "xlsx": "openpyxl", "pptx": "python-pptx (import pptx)",
             "json": "the json module", "csv": "the csv module", "md": "plain file writes"}
SOURCES_NOTE = "Sources (the reply's url_citation annotations):"

_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def research_prompt(task: DeliverableTask, inputs: list[Path], *, inline_chars: int, trap_hints: bool = False) -> str:
    """The one input turn: the package's prompt (discipline first), the inputs as text, and how
    the report's code becomes the output files."""
    lines = [INPUTS_HEADER, *(f"- /mnt/data/{p.name}" for p in inputs), ""]
    if task.required_outputs:
        lines.append(OUTPUTS_HEADER)
        for o in task.required_outputs:
            sections = f" with sections/sheets/slides: {', '.join(o.sections)}" if o.sections else ""
            lines.append(f"- /mnt/result/{o.name} ({o.format}){sections}")
        lines.append("")
    inlined = inline_inputs(inputs, inline_chars).replace(TRUNCATED, TRUNCATED_HERE)
    if inlined:
        lines += [INLINE_HEADER, inlined, ""]
    if task.required_outputs:
        libs = list(dict.fromkeys(LIBRARIES[o.format] for o in task.required_outputs))
        code = CODE_RULES.format(libraries=", ".join(libs))
    else:
        code = NO_FILES_RULES
    preamble = TRAP_PREAMBLE.format(hints=", ".join(TRAP_HINTS.values())) if trap_hints else ""
    return PROMPT.format(preamble=preamble, task_prompt=task.full_prompt, files="\n".join(lines), code=code)


def python_blocks(report: str) -> list[str]:
    """The fenced Python blocks of a report, in order (the paper's adapter: 'extracts and
    executes this code'); blank ones dropped."""
    return [b for b in (m.group(1) for m in _BLOCK.finditer(report)) if b.strip()]


InteractionsError = GeminiApiError  # the API refused a request: its HTTP status and the error body's message


class InteractionsApi(GeminiRest):
    """The Interactions API at one root with one key (standard-library HTTP, in a worker thread)."""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request to {root}/v1beta/{path}: the reply, a JSON object; InteractionsError otherwise."""
        reply, _ = self.request(method, f"{API_VERSION}/{path}", body)
        if not isinstance(reply, dict):
            raise InteractionsError(0, f"expected a JSON object, got {type(reply).__name__}")
        return reply

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self.call, "POST", "interactions", body)

    async def get(self, interaction_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.call, "GET", f"interactions/{interaction_id}")


TRANSIENT = {429, 500, 502, 503, 504}  # a get answered so is asked again at the next poll
MAX_TRANSIENT = 5  # consecutive failed gets before the episode gives up (its record kept for a rerun)


class Poller:
    """One interaction's gets: a transient failure (a 429 or 5xx, a connection that failed) reads as
    "still running" and is asked again at the next poll, MAX_TRANSIENT times in a row at most. A
    create is never retried: one that timed out may have been made."""

    def __init__(self, api: InteractionsApi, interaction_id: str) -> None:
        self.api = api
        self.id = interaction_id
        self.failures = 0

    async def get(self) -> dict[str, Any]:
        try:
            got = await self.api.get(self.id)
        except (InteractionsError, OSError) as exc:
            if isinstance(exc, InteractionsError) and exc.status not in TRANSIENT:
                raise
            self.failures += 1
            if self.failures >= MAX_TRANSIENT:
                raise
            return {"id": self.id, "status": RUNNING}
        self.failures = 0
        return got


def agent_name(model_id: str) -> str:
    """The Interactions API's agent from --model; ValueError with the fix otherwise."""
    provider, _, name = model_id.partition("/")
    if provider not in PROVIDERS or not name.startswith(AGENT_PREFIX):
        raise ValueError(f"--agent {SERVICE} runs a Gemini deep-research agent through the Interactions API; "
                         f"--model {model_id or '(none)'} is not one: give e.g. --model {EXAMPLE_MODEL}")
    return name


def unsent_settings(model: object) -> str | None:
    """An agent interaction takes no generation_config: a sampling flag would be recorded but not sent."""
    return unsent_refusal(model, f"--agent {SERVICE} sends no generation settings (the Interactions API's agents "
                          "take none)")


# ---- reading a finished interaction -------------------------------------------------------------

@dataclass
class Report:
    """What a finished interaction says: the report, what it searched, fetched and cited, its usage."""

    text: str
    cited: list[dict[str, Any]]
    queries: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int


def _ints(usage: dict[str, Any], *names: str) -> int:
    return sum(int(usage.get(n) or 0) for n in names)


def output_items(interaction: dict[str, Any]) -> list[dict[str, Any]]:
    """The interaction's items in order, from either shape the API has had: `outputs` (content
    items, until 2026-05) or `steps` (since: the model's content inside "model_output" steps, the
    tool calls and thoughts as steps of the same fields, the input as a "user_input" step)."""
    steps = interaction.get("steps")
    if not isinstance(steps, list):
        outputs = interaction.get("outputs")
        return [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []
    items: list[dict[str, Any]] = []
    for step in steps:
        if not isinstance(step, dict) or step.get("type") == "user_input":
            continue
        if step.get("type") == "model_output":
            items += [c for c in step.get("content") or [] if isinstance(c, dict)]
        else:
            items.append(step)
    return items


def read_outputs(interaction: dict[str, Any], rec: Recorder) -> Report:
    """Each output item as a step (in the order given), the report's text (its text items joined),
    and the URLs its url_citation annotations cite."""
    outputs = output_items(interaction)
    searches: dict[str, ToolCallStep] = {}
    fetches: dict[str, list[str]] = {}
    texts: list[str] = []
    cited: dict[str, dict[str, Any]] = {}
    queries = 0
    for item in outputs:
        kind = item.get("type")
        if kind == "text":
            texts.append(str(item.get("text") or ""))
            for note in item.get("annotations") or []:
                if note.get("type") == "url_citation" and note.get("url"):
                    cited.setdefault(note["url"], {"url": note["url"], "title": note.get("title") or ""})
                elif note.get("type") == "file_citation":
                    name = note.get("file_name") or note.get("document_uri") or ""
                    if name:
                        cited.setdefault(name, {"file": name, "source": note.get("source") or ""})
        elif kind == "thought":
            summary = [s.get("text", "") for s in item.get("summary") or [] if s.get("type") == "text"]
            rec.add(ToolCallStep(name="thought", result={"summary": "\n".join(summary)}))
        elif kind == "google_search_call":
            asked = list((item.get("arguments") or {}).get("queries") or [])
            queries += len(asked)
            step = ToolCallStep(name="web_search", arguments={"queries": asked},
                                result={"backend": "gemini-google-search", "call_id": item.get("id", "")})
            searches[str(item.get("id", ""))] = step
            rec.add(step)
        elif kind == "google_search_result":
            hits = [{k: r[k] for k in ("title", "url") if r.get(k)} for r in item.get("result") or []]
            found = searches.get(str(item.get("call_id", "")))
            if found is not None:  # the hits go with their call (the search suggestions widget is not kept)
                found.result["results"] = [h for h in hits if h]
                found.result["is_error"] = bool(item.get("is_error"))
        elif kind == "url_context_call":
            fetches[str(item.get("id", ""))] = list((item.get("arguments") or {}).get("urls") or [])
        elif kind == "url_context_result":
            asked = fetches.pop(str(item.get("call_id", "")), [])
            seen = set()
            for r in item.get("result") or []:
                url = r.get("url") or ""
                seen.add(url)
                rec.add(ToolCallStep(name="fetch", arguments={"url": url},
                                     result={"backend": "gemini-url-context", "url": url, "status": r.get("status")}))
            for url in asked:
                if url not in seen:
                    rec.add(ToolCallStep(name="fetch", arguments={"url": url},
                                         result={"backend": "gemini-url-context", "url": url, "status": None}))
        else:  # an item this reader does not interpret is still kept, as the API gave it
            rec.add(ToolCallStep(name=str(kind or "output"), result={"item": item}))
    for urls in fetches.values():  # a call whose result never came
        for url in urls:
            rec.add(ToolCallStep(name="fetch", arguments={"url": url},
                                 result={"backend": "gemini-url-context", "url": url, "status": None}))
    usage = interaction.get("usage") or {}
    if not queries:  # no search call items given: the usage's count of Google Search uses, when it has one
        queries = sum(int(g.get("count") or 0) for g in usage.get("grounding_tool_count") or []
                      if g.get("type") == "google_search")
    return Report(text="\n\n".join(t for t in texts if t), cited=list(cited.values()), queries=queries,
                  input_tokens=_ints(usage, "total_input_tokens", "total_tool_use_tokens"),
                  output_tokens=_ints(usage, "total_output_tokens", "total_thought_tokens"),
                  thought_tokens=_ints(usage, "total_thought_tokens"))


def with_sources(report: str, cited: list[dict[str, Any]]) -> str:
    """The report, and the cited URLs its text does not show listed after it, so the citation
    verifiers (which read the text) see every URL the agent cited."""
    missing = [c["url"] for c in cited if "url" in c and c["url"] not in report]
    if not missing:
        return report
    return report.rstrip() + "\n\n" + SOURCES_NOTE + "\n" + "\n".join(f"- {u}" for u in missing) + "\n"


def cost(rec: Recorder, model_id: str, report: Report) -> float:
    """USD: the tokens at the run's price for the agent's name (--prices), else the Gemini 3 Pro
    list rates, and each Google Search query."""
    prices = getattr(rec.model, "prices", None)
    found = prices.price(model_id) if prices is not None else None
    rate_in, rate_out = found if found is not None else USD_PER_MTOK
    return ((report.input_tokens * rate_in + report.output_tokens * rate_out) / 1_000_000
            + report.queries * USD_PER_SEARCH_QUERY)


# ---- the agent ----------------------------------------------------------------------------------

class GeminiDeepResearchAgent:
    name = SERVICE

    def __init__(self, options: DeliverableOptions | None = None, web: WebBackend | None = None, *,
                 polling: Polling | None = None) -> None:
        """`--web` is refused: the agent searches with Google's own search, always on (Table 5)."""
        self.options = options or DeliverableOptions()
        if self.options.web is not None or web is not None:
            raise UserError(f"--agent {SERVICE} searches with Google's own search, always on, as the paper's Gemini "
                            "did (Table 5); --web cannot be plugged into it: drop --web for this agent")
        self.polling = polling or Polling()

    def protocol_notes(self) -> list[ProtocolNote]:
        return protocol_notes(self.options)

    async def run(self, task: DeliverableTask, ctx: AnalystContext, workdir: Path) -> AgentResult:
        rec = Recorder(ctx.model)
        model_id = ctx.model.id if ctx.model is not None else ""
        try:
            agent = agent_name(model_id)
        except ValueError as exc:
            return rec.result("error", error=str(exc))
        if (refused := unsent_settings(ctx.model) or task.missing_input()) is not None:
            return rec.result("error", error=refused)
        inputs = task.input_paths()
        api = InteractionsApi.from_env()
        if api is None:
            return rec.result("error", error=f"{SERVICE} needs an API key: set {' or '.join(KEY_ENVS)}")
        prompt = research_prompt(task, inputs, inline_chars=self.options.inline_chars,
                                 trap_hints=self.options.trap_hints)
        files = Deliverables(workdir)
        started = time.monotonic()
        at = rec.transcript.elapsed()
        try:
            interaction_id, resumed = await self._submit(api, agent, model_id, prompt, workdir)
            rec.add(ToolCallStep(name="interaction", arguments={"agent": agent, "resumed": resumed},
                                 result={"id": interaction_id}))
            done = await poll_until(Poller(api, interaction_id).get, lambda i: i.get("status") != RUNNING,
                                    interval=self.polling.interval, max_interval=self.polling.max_interval,
                                    max_wait=self.polling.max_wait)
        except PollTimeout as exc:  # the record stays: a rerun polls the same interaction
            return rec.result("error", error=f"{SERVICE}: the research is {exc}; run again to keep "
                              "waiting for the same interaction")
        except InteractionsError as exc:
            if exc.status == 404 and (pending := load_pending(workdir)) is not None:
                clear_pending(workdir)
                return rec.result("error", error=f"{SERVICE}: interaction {pending.id} is gone ({exc.message}); "
                                  "its record is removed: run again to start a new one")
            again = "; run again to keep waiting for the same interaction" if load_pending(workdir) else ""
            if exc.status in TRANSIENT:
                return rec.result("error", error=f"{SERVICE}: the Interactions API is unavailable ({exc}){again}")
            return rec.result("error", error=f"{SERVICE}: the Interactions API refused the request ({exc})")
        except (OSError, ValueError) as exc:  # unreachable, or not JSON: the record stays for a rerun
            again = "; run again to keep waiting for the same interaction" if load_pending(workdir) else ""
            return rec.result("error", error=f"{SERVICE}: the Interactions API could not be read ({exc}){again}")
        seconds = time.monotonic() - started
        report = read_outputs(done, rec)
        usd = cost(rec, model_id, report)
        usage = Usage(calls=1, input_tokens=report.input_tokens, output_tokens=report.output_tokens,
                      reasoning_tokens=report.thought_tokens, seconds=seconds, cost_usd=usd)
        rec.transcript.model_call(model_id, ChatRequest(messages=[Message(role="user", content=prompt)]),
                                  ChatResponse(message=Message(role="assistant", content=report.text),
                                               usage=usage, model=model_id), at=at, seconds=seconds)
        rec.usage = rec.usage + usage
        rec.add(ModelCallStep(input_tokens=report.input_tokens, output_tokens=report.output_tokens,
                              seconds=round(seconds, 4), cost_usd=usd))
        rec.add(ToolCallStep(name="citations", result={"cited": report.cited, "search_queries": report.queries}))
        status = str(done.get("status"))
        if status != "completed":
            clear_pending(workdir)
            why = done.get("error") or {}
            detail = why.get("message") if isinstance(why, dict) else str(why)
            return rec.result("error", error=f"{SERVICE}: interaction {done.get('id')} ended {status}"
                              + (f" ({detail})" if detail else ""))
        if task.required_outputs:
            for n, code in enumerate(python_blocks(report.text), 1):
                await self._execute(code, n, ctx, inputs, files, rec)
        sub = DeliverableSubmission(
            id=task.id, response=with_sources(report.text, report.cited), files=files.records(),
            files_dir=os.path.relpath(files.result, ctx.run_dir), rounds=1, stop="answer")
        clear_pending(workdir)
        return rec.result("ok", sub)

    async def _submit(self, api: InteractionsApi, agent: str, model_id: str, prompt: str,
                      workdir: Path) -> tuple[str, bool]:
        """The pending interaction of this episode, else a new one (its id saved before any poll)."""
        pending = load_pending(workdir)
        if pending is not None and pending.provider == "gemini" and pending.api == "interactions" \
                and pending.model == model_id:
            return pending.id, True
        body = {"agent": agent, "input": prompt, "background": True,
                "agent_config": {"type": "deep-research", "thinking_summaries": "auto"}}
        created = await api.create(body)
        interaction_id = created.get("id")
        if not isinstance(interaction_id, str) or not interaction_id:
            raise ValueError("the created interaction has no id")
        save_pending(workdir, PendingRequest(provider="gemini", api="interactions", id=interaction_id, model=model_id,
                                             data={"agent": agent}))
        return interaction_id, False

    async def _execute(self, code: str, n: int, ctx: AnalystContext, inputs: list[Path], files: Deliverables,
                       rec: Recorder) -> None:
        """One block of the report, run as its own program over the staged inputs."""
        started = time.monotonic()
        res = await ctx.sandbox.arun(code, inputs=inputs, collect_to=files.next_call_dir())
        files.merge(res)
        rec.add(ToolCallStep(
            name="execute_code", arguments={"code": code, "source": f"report block {n}"},
            result={"exit_code": res.exit_code, "signal": res.signal, "limit_hits": res.limit_hits,
                    "files": [[f.name, f.size] for f in res.files], "stdout_chars": len(res.stdout),
                    "stderr_chars": len(res.stderr),
                    **({"error_tail": res.stderr[-ERROR_TAIL_CHARS:]} if res.exit_code or res.signal else {})},
            seconds=round(time.monotonic() - started, 4)), detail={"stdout": res.stdout, "stderr": res.stderr})


def protocol_notes(options: DeliverableOptions) -> list[ProtocolNote]:
    """How this system differs from the deliverable agent's protocol (for the run's notes); the
    options change nothing (--web is refused)."""
    return [paper("agent", "§3.4, Table 5: Gemini's Deep Research agent through the Interactions API "
                  "(background), the Python its report embeds run locally over the staged inputs"),
            paper("web access", "Table 5: Google Search, controlled by Google, always on (the corpus "
                  "discipline is the prompt's line)"),
            deskbench("agent prompt", "§3.2's discipline line + SME prompt and the inputs' normalised text, then "
                      "deskbench's lines on the embedded code (the adapter's format-aware text is not public)"),
            deskbench("code run", "every ```python block of the report, in order, each its own program in "
                      "deskbench's sandbox (no network); the paper ran the extracted code in a local subprocess")]
