"""`deskbench export RUN --format madqa -o DIR`: a docqa run as the predictions files the official
MADQA baselines write (github OxRML/MADQA, baselines/bm25-mllm-agent/process_dataset.py with its
agents, commit 978fa76), so the official `eval/evaluate.py` reads them (the leaderboard's file) and
`deskbench import` takes them back.

One JSON Lines file per system: `<system>.jsonl` holds attempt 0 (the one MADQA's numbers read),
`<system>.attempt-K.jsonl` attempt K of a run made with --attempts. One line per episode, in the
order the episodes ended (the official writer writes as its questions complete); a task the system
did not run has no line. The lines are process_dataset.py's, key for key and in its order:

- an answered episode: `question`, `answer`, `citations` [{file, page}], `iterations`,
  `search_history` [{iteration, query, num_results}], `trajectory`, `model` (the provider's model
  name, as the script's --model), `id`. `iterations` and the queries of `search_history` are the
  submission's, so the official evaluator's effort (len(search_history), else iterations) is the
  one `deskbench score --official` reads; each query's iteration and result count come from the
  trajectory.
- an episode that failed or hit its limit: the script's error row, `question`, `id`, `error` (the
  episode's error text), `error_traceback`, `ground_truth_answers`, `category`. deskbench keeps no
  traceback (`error_traceback` is null); the last two are null as the script writes them on MADQA
  (it reads `answers` and `category`, which MADQA's rows do not have). Never an empty answer: the
  evaluator scores an error row 0 and counts it, as `deskbench score --official` scores a failed
  episode.

`trajectory` is one step per model call in the shape of the official agent the system followed:
the official script whose protocol a bm25-agent system ran (`SCRIPT_SHAPES`), else the one for
its model's provider (`STEP_SHAPES`: openai_agent.py by default, also for Mistral, whose script is
not in the repository; anthropic_agent.py; gemini_agent.py for Gemini; vllm_agent.py for
OpenAI-compatible servers), built from the episode's transcript: the reply's finish (stop) reason, usage, text, tool calls with
their arguments parsed, reasoning text as `thinking`; the searches the step ran with the pages each
returned as `tool_results` (a tool call the agent refused, e.g. a malformed answer, as an `error`
entry with the message the model was sent); the answering step's `parsed_answer`. What cannot be
reconstructed: a step's tool results for a call deskbench did not run as a search have only that
message; a model call that failed and was retried inside the model wrapper is not a step (the
script would have stopped); gemini_agent.py's iteration holds two calls (the turn, then the
function responses), written here as two steps, without its `forced_answer` and
`after_tool_response` flags; an episode stored without a transcript gets steps from its trajectory
(tokens and searches; `content`, `finish_reason` and tool call ids null). An imported system
(`deskbench import`) is written back as it was read: its own trajectory, search history and model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from deskbench.contract.export import ExportOptions
from deskbench.errors import UserError
from deskbench.runs.identity import stored_identities
from deskbench.runs.store import Episode, RunStore, UnreadableTranscript
from deskbench.runs.transcript import ModelCallEvent, ToolEvent, TranscriptDoc
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

SEARCH = "search_documents"


@dataclass
class ToolResult:
    """What one tool call of a step returned: a search's query and pages, or an error."""

    call_id: str | None
    name: str
    query: str | None = None
    pages: list[tuple[str, int]] | None = None
    error: str | None = None


@dataclass
class Call:
    """One model call as the official step needs it (None: not stored)."""

    iteration: int
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None  # (input, output) tokens
    content: str | None = None
    tool_calls: list[tuple[str | None, str, Any]] = field(default_factory=list)  # (id, name, arguments)
    thinking: str | None = None
    searches: list[ToolResult] = field(default_factory=list)  # the searches it led to, in order
    refused: dict[str, str] = field(default_factory=dict)  # call id -> the tool message the model got
    results: list[ToolResult] = field(default_factory=list)
    answer: dict[str, Any] | None = None  # parsed_answer: the answering step's


# --- the official step shapes, one per provider script -------------------------------------------

def _openai_usage(c: Call) -> dict[str, int] | None:
    if c.usage is None:
        return None
    return {"prompt_tokens": c.usage[0], "completion_tokens": c.usage[1], "total_tokens": sum(c.usage)}


def _search_result(r: ToolResult, id_key: str | None) -> dict[str, Any]:
    head: dict[str, Any] = {id_key: r.call_id} if id_key else {}
    if r.error is not None:
        return {**head, "name": r.name, "error": r.error}
    return {**head, "name": r.name, "query": r.query, "results": [{"file": f, "page": p} for f, p in r.pages or []]}


def openai_step(c: Call) -> dict[str, Any]:
    """openai_agent.py (the script process_dataset.py runs by default)."""
    step: dict[str, Any] = {"iteration": c.iteration, "role": "assistant", "finish_reason": c.finish_reason,
                            "usage": _openai_usage(c), "content": c.content}
    if c.tool_calls:
        step["tool_calls"] = [{"id": i, "name": n, "arguments": a} for i, n, a in c.tool_calls]
    if c.thinking:
        step["thinking"] = c.thinking
    if c.answer is not None:
        step["parsed_answer"] = c.answer
    else:
        step["tool_results"] = [_search_result(r, "tool_call_id") for r in c.results]
    return step


def vllm_step(c: Call) -> dict[str, Any]:
    """vllm_agent.py (an OpenAI-compatible server; answers through provide_answer)."""
    step: dict[str, Any] = {"iteration": c.iteration, "role": "assistant", "finish_reason": c.finish_reason,
                            "content": c.content, "usage": _openai_usage(c)}
    if c.tool_calls:
        step["tool_calls"] = [{"id": i, "name": n, "arguments": a} for i, n, a in c.tool_calls]
    if c.answer is not None:
        step["parsed_answer"] = c.answer
    else:
        step["tool_results"] = [_search_result(r, "tool_call_id") for r in c.results]
    return step


def anthropic_step(c: Call) -> dict[str, Any]:
    """anthropic_agent.py: stop_reason, Anthropic's token names, tool calls with `input`, and
    `thinking` always present; its answering step carries no parsed_answer."""
    step: dict[str, Any] = {
        "iteration": c.iteration, "role": "assistant", "stop_reason": c.finish_reason,
        "usage": {"input_tokens": c.usage[0], "output_tokens": c.usage[1]} if c.usage is not None else None,
        "content": c.content,
        "tool_calls": [{"id": i, "name": n, "input": a} for i, n, a in c.tool_calls] or None,
        "thinking": c.thinking}
    if c.answer is None:
        step["tool_results"] = [_search_result(r, "tool_use_id") for r in c.results]
    return step


def gemini_step(c: Call) -> dict[str, Any]:
    """gemini_agent.py: no usage, tool calls as {name, args} without ids."""
    step: dict[str, Any] = {"iteration": c.iteration, "role": "assistant", "finish_reason": c.finish_reason,
                            "content": c.content,
                            "tool_calls": [{"name": n, "args": a} for _, n, a in c.tool_calls] or None}
    if c.answer is not None:
        step["parsed_answer"] = c.answer
    else:
        step["tool_results"] = [_search_result(r, None) for r in c.results]
    return step


StepShape = Callable[[Call], dict[str, Any]]
SCRIPT_SHAPES: dict[str, StepShape] = {
    "openai_agent.py": openai_step, "anthropic_agent.py": anthropic_step, "gemini_agent.py": gemini_step,
    "vllm_agent.py": vllm_step,
}
"""A bm25-agent system that ran an official script's protocol (its config's `protocol`) is written
in that script's steps."""
STEP_SHAPES: dict[str, StepShape] = {
    "openai": openai_step, "anthropic": anthropic_step, "gemini": gemini_step, "google": gemini_step,
    "vllm": vllm_step, "openai-compat": vllm_step, "llamacpp": vllm_step, "ollama": vllm_step,
}
"""Otherwise (the paper's loop, another agent) the steps of the official script for the model's
provider; any other provider (mistral, scripted, local, a plugin's) gets openai_agent.py's,
process_dataset.py's default."""


def step_shape(protocol: object, model_id: str | None) -> StepShape:
    """The official script whose steps a system's lines are written in."""
    if isinstance(protocol, str) and protocol in SCRIPT_SHAPES:
        return SCRIPT_SHAPES[protocol]
    provider = model_id.split("/", 1)[0] if model_id else ""
    return STEP_SHAPES.get(provider, openai_step)


# --- steps from what the run stored --------------------------------------------------------------

def _text(content: Any) -> str | None:
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) and content else None


def _arguments(raw: Any) -> Any:
    """As the script reads them (json.loads); text that is not JSON is kept as it came."""
    if not isinstance(raw, str):
        return raw
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _call_of(event: ModelCallEvent, iteration: int) -> Call:
    reply = event.reply or {}
    message = reply.get("message") or {}
    usage = reply.get("usage")
    reasoning = [str(r.get("text", "")) for r in message.get("reasoning") or [] if isinstance(r, dict) and r.get("text")]
    return Call(
        iteration=iteration, finish_reason=reply.get("finish_reason"),
        usage=(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
        if isinstance(usage, dict) else None,
        content=_text(message.get("content")),
        tool_calls=[(c.get("id"), str(c.get("name", "")), _arguments(c.get("arguments")))
                    for c in message.get("tool_calls") or []],
        thinking="\n\n".join(reasoning) or None)


def _search(query: Any, result: dict[str, Any]) -> ToolResult:
    pages = [(str(p[0]), int(p[1])) for p in result.get("pages") or [] if isinstance(p, list | tuple) and len(p) == 2]
    return ToolResult(None, SEARCH, str(query), pages)


def calls_from_transcript(doc: TranscriptDoc) -> list[Call]:
    """One Call per model call that got a reply; the searches after it are its; the tool messages
    the next request carries say what became of its calls that ran no search."""
    calls: list[Call] = []
    for event in doc.events:
        if isinstance(event, ModelCallEvent):
            if event.reply is None:  # a failed call: not a step of an episode that went on
                continue
            if calls:
                for m in event.messages:
                    if m.get("role") == "tool" and m.get("tool_call_id") is not None:
                        calls[-1].refused[str(m["tool_call_id"])] = _text(m.get("content")) or ""
            calls.append(_call_of(event, len(calls) + 1))
        elif isinstance(event, ToolEvent) and event.name == SEARCH and calls:
            calls[-1].searches.append(_search(event.arguments.get("query"), event.result))
    for call in calls:
        searches = list(call.searches)
        for call_id, name, args in call.tool_calls:
            query = args.get("query") if isinstance(args, dict) else None
            found = next((s for s in searches if name == SEARCH and s.query == query), None)
            if found is not None:
                searches.remove(found)
                call.results.append(ToolResult(call_id, SEARCH, found.query, found.pages))
            elif call_id is not None and str(call_id) in call.refused:
                call.results.append(ToolResult(call_id, name, error=call.refused[str(call_id)]))
        call.results += searches  # a search no tool call names (not expected): kept, without an id
    return calls


def calls_from_trajectory(episode: Episode) -> list[Call]:
    """Without a transcript: a Call per model call step (its tokens), its searches as tool calls."""
    calls: list[Call] = []
    for step in episode.trajectory:
        if isinstance(step, ModelCallStep):
            calls.append(Call(iteration=len(calls) + 1, usage=(step.input_tokens, step.output_tokens)))
        elif isinstance(step, ToolCallStep) and step.name == SEARCH and calls:
            found = _search(step.arguments.get("query"), step.result)
            calls[-1].searches.append(found)
            calls[-1].tool_calls.append((None, SEARCH, dict(step.arguments)))
            calls[-1].results.append(found)
    return calls


def _citations(sub: DocQASubmission) -> list[dict[str, Any]]:
    return [{"file": c.document, "page": c.page} for c in sub.citations]


def search_history(sub: DocQASubmission, calls: list[Call]) -> list[Any]:
    """The submission's queries (what deskbench scores), each with the iteration that ran it and
    how many pages it returned (None when the run did not record that search)."""
    if sub.search_history is None:
        return []
    ran = [(c.iteration, s) for c in calls for s in c.searches]
    out: list[Any] = []
    for entry in sub.search_history:
        if isinstance(entry, dict):  # already the official shape (an imported row)
            out.append(entry)
            continue
        k = next((i for i, (_, s) in enumerate(ran) if s.query == str(entry)), None)
        iteration, found = ran.pop(k) if k is not None else (None, None)
        out.append({"iteration": iteration, "query": entry,
                    "num_results": len(found.pages or []) if found is not None else None})
    return out


def model_name(model_id: str | None) -> str | None:
    """The name the script's --model takes: the model id without its provider."""
    if not model_id:
        return None
    return model_id.split("/", 1)[1] if "/" in model_id else model_id


@dataclass(frozen=True)
class SystemInfo:
    """What every line of one system shares."""

    model: str | None
    shape: StepShape


def answered_row(question: str, episode: Episode, sub: DocQASubmission, doc: TranscriptDoc | None,
                 info: SystemInfo) -> dict[str, Any]:
    """An answered episode as the script's result dict, `id` added last as process_dataset.py adds it."""
    extra = sub.model_extra or {}
    calls = calls_from_transcript(doc) if doc is not None else calls_from_trajectory(episode)
    if calls:
        calls[-1].answer = {"answer": list(sub.answer), "citations": _citations(sub)}
    external = sub.external_trajectory
    trajectory = external if isinstance(external, list) else [info.shape(c) for c in calls]
    return {"question": question, "answer": list(sub.answer), "citations": _citations(sub),
            "iterations": sub.iterations, "search_history": search_history(sub, calls),
            "trajectory": trajectory, "model": extra.get("model", info.model), "id": episode.task_id}


def error_row(question: str, episode: Episode) -> dict[str, Any]:
    """process_question's row for a question that raised (keys and order as it writes them)."""
    sub = episode.submission
    extra = (sub.model_extra or {}) if isinstance(sub, DocQASubmission) else {}
    error = episode.error or (f"the episode ended with status {episode.status} and no answer")
    return {"question": question, "id": episode.task_id, "error": error,
            "error_traceback": extra.get("error_traceback"), "ground_truth_answers": extra.get("ground_truth_answers"),
            "category": extra.get("category")}


def _slug(system: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", system).strip("-.") or "system"


def file_names(systems: list[str]) -> dict[str, str]:
    """A file stem per system (the official evaluator names a system by its file's stem); two
    systems whose names differ only in punctuation get their name's hash appended."""
    slugs = {s: _slug(s) for s in systems}
    taken = list(slugs.values())
    return {s: (v if taken.count(v) == 1 else f"{v}-{hashlib.sha256(s.encode()).hexdigest()[:8]}")
            for s, v in slugs.items()}


def system_rows(store: RunStore, system: str, info: SystemInfo, questions: dict[str, str],
                ) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each episode's (attempt, line), in the order the episodes were stored (the order they
    ended), one episode read at a time."""
    for ep in store.iter_episodes(system):
        sub = ep.submission if isinstance(ep.submission, DocQASubmission) else None
        question = questions.get(ep.task_id) or (sub.question if sub is not None and sub.question else "")
        if ep.status == "ok" and sub is not None:
            try:
                doc = store.transcript(ep.task_id, system, ep.attempt)
            except UnreadableTranscript as exc:  # named in one line (store.py), left out; the others are written
                store.note_unreadable(exc.episode)
                continue
            row = answered_row(sub.question or question, ep, sub, doc, info)
        else:
            row = error_row(question, ep)
        yield ep.attempt, row


def _file(out: Path, stem: str, attempt: int) -> Path:
    return out / f"{stem}{'' if attempt == 0 else f'.attempt-{attempt}'}.jsonl"


class MadqaExporter:
    name = "madqa"
    summary = "the official MADQA predictions JSONL (process_dataset.py's lines), one file per system"

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> list[Path]:
        """The files are written as the episodes are read (one in memory at a time), each under a
        `.part` name until the whole export is done, so a failed export leaves no file behind."""
        store = RunStore(run_dir, create=False)
        parts: dict[Path, IO[str]] = {}
        try:
            track = store.track()
            if track != "docqa":
                raise UserError(f"{run_dir} is an {track} run; --format madqa writes docqa runs (MADQA predictions): "
                                "export it with --format inspect")
            systems = store.systems()
            if not systems:
                raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first, then export")
            identities = stored_identities(store)
            questions = {t.id: t.question for t in store.tasks_of(DocQATask)}
            stems = file_names(systems)
            attempts = {s: sorted({a for (_, _, a) in store.episode_task_hashes(s)}) for s in systems}
            files = [_file(out, stems[s], a) for s in systems for a in attempts[s]]
            existing = [p for p in files if p.exists()]
            if existing:
                raise UserError(f"{existing[0]} already exists; give another -o directory, or remove the "
                                f"{len(existing)} file(s) of an earlier export there")
            out.mkdir(parents=True, exist_ok=True)
            for system in systems:
                config = identity.config if (identity := identities.get(system)) is not None else None
                model_id = config.model if config is not None else None
                protocol = config.settings.get("protocol") if config is not None else None
                info = SystemInfo(model_name(model_id), step_shape(protocol, model_id))
                for attempt, row in system_rows(store, system, info, questions):
                    path = _file(out, stems[system], attempt)
                    fh = parts.get(path)
                    if fh is None:
                        fh = parts[path] = _part(path).open("w", encoding="utf-8")
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            for path, fh in parts.items():
                fh.close()
                _part(path).replace(path)
            return [p for p in files if p in parts]
        except BaseException:
            for path, fh in parts.items():
                fh.close()
                _part(path).unlink(missing_ok=True)
            raise
        finally:
            store.close()


def _part(path: Path) -> Path:
    return path.with_name(path.name + ".part")


EXPORTER = MadqaExporter()
