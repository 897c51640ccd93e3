"""`semtools-agent`: MADQA's Claude agent with Semtools (Appendix G.4, Prompt 8), the paper's tools
and prompt on deskbench's loop.

The paper ran the Claude Agents SDK (its `claude_code` system prompt preset; tools Bash, Read,
Glob, Grep) with semtools' parse / search / workspace installed and the corpus's PDFs plus their
Markdown on disk. Here the same tools run in deskbench's bubblewrap sandbox (shell.py, cli.py,
host.py), the model is any deskbench chat model, and the loop is deskbench's, not the SDK's: the
model calls tools until it replies without one, and that reply is the answer JSON of CLAUDE.md's
"Expected Output Format" (answer, citations, search_history), read with one repair turn. Two
parts differ from the paper and are named so wherever the agent is described: the system prompt
is a short stand-in for the `claude_code` preset (which ships inside the Claude Code CLI), and
`parse` returns the corpus's own page text (LlamaParse is a paid service), each page under a
`<!-- page N -->` line.

Effort: `steps` = len(search_history) of the answer (what the official evaluator reads first),
`iterations` = `llm_calls` = model calls. Turns: --max-steps, else MAX_TURNS (the SDK's own
default is no limit); on the last turn the model is told to answer and tool_choice is "none".
The static model: $DESKBENCH_SEMTOOLS_MODEL (a model2vec folder or a hub name), else semtools'
minishlab/potion-multilingual-128M from the local Hugging Face cache; never downloaded here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    AnswerArgs,
    Recorder,
    describe_problem,
    recorded,
)
from deskbench.models.types import ChatRequest, Message, ToolCall
from deskbench.requirements import Extra, Need
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.agents.semtools import cli
from deskbench.tracks.docqa.agents.semtools.host import JAIL, Machine, StagedCorpus
from deskbench.tracks.docqa.agents.semtools.prompts import (
    CLAUDE_MD,
    LAST_TURN,
    REPAIR,
    SYSTEM,
    TOOLS,
    USER_PROMPT,
)
from deskbench.tracks.docqa.tasks import DocQATask

MODEL_ENV = "DESKBENCH_SEMTOOLS_MODEL"
MAX_TURNS = 50
LOOP = "the paper's tools and prompt (MADQA G.4, Prompt 8) on deskbench's loop, not the Claude Agent SDK's"
PARSE_BACKEND = "the corpus's page text as Markdown (fallback; the paper's parse backend: LlamaParse)"
SYSTEM_PROMPT = "a stand-in for the Claude Agent SDK's claude_code preset (not reproduced), then CLAUDE.md"


def hub_cache() -> Path:
    """The Hugging Face hub cache as huggingface_hub finds it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.expanduser("~/.cache"), "huggingface")
    return Path(home) / "hub"


def has_model_files(folder: Path) -> bool:
    return all((folder / f).is_file() for f in ("config.json", "tokenizer.json", "model.safetensors"))


def resolve_model(name: str) -> Path | None:
    """A model2vec folder: `name` itself when it is a folder, else the hub model's snapshot in the
    local cache (refs/main, else the only snapshot); None when there is none with the files."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path if has_model_files(path) else None
    repo = hub_cache() / f"models--{name.replace('/', '--')}"
    ref = repo / "refs" / "main"
    candidates = [repo / "snapshots" / ref.read_text().strip()] if ref.is_file() else \
        sorted((repo / "snapshots").glob("*"))
    return next((c for c in candidates if has_model_files(c)), None)


def model_name() -> str:
    return os.environ.get(MODEL_ENV) or cli.DEFAULT_MODEL


@dataclass(frozen=True)
class StaticModelNeed:
    """The static embedding model `search` uses, present on this machine."""

    def problem(self, what: str) -> str | None:
        name = model_name()
        if resolve_model(name) is not None:
            return None
        if Path(name).expanduser().is_dir():
            return (f"{what}: {name} is not a model2vec folder (it needs config.json, tokenizer.json and "
                    f"model.safetensors); point ${MODEL_ENV} at one")
        return (f"{what}: the static embedding model {name} is not in the local Hugging Face cache ({hub_cache()}); "
                f"fetch it with `huggingface-cli download {name}`, or set ${MODEL_ENV}=DIR (a model2vec folder)")


class FinalAnswer(AnswerArgs):
    search_history: list[str] = []


def read_final(text: str, documents: set[str]) -> FinalAnswer:
    """The answer JSON of CLAUDE.md's Expected Output Format (the first {...} in the reply): an
    answer string becomes a one-item list; a cited Markdown path or name becomes its PDF's name."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    payload = json.loads(text[start:end + 1])
    if not isinstance(payload, dict):
        raise ValueError("the reply's JSON is not an object")
    answer = payload.get("answer")
    if isinstance(answer, str):
        answer = [answer]
    citations = []
    for c in payload.get("citations") or []:
        if isinstance(c, dict):
            c = dict(c)
            for key in ("document", "file", "doc"):
                if isinstance(c.get(key), str):
                    c[key] = cited_document(c[key], documents)
        citations.append(c)
    history = [str(q) for q in payload.get("search_history") or [] if isinstance(q, str | int | float)]
    return FinalAnswer.model_validate({"answer": answer, "citations": citations, "search_history": history})


def cited_document(name: str, documents: set[str]) -> str:
    """fleet.pdf, /mnt/corpus/pdfs/fleet.pdf, /mnt/corpus/markdown/fleet.pdf.md, fleet.md -> fleet.pdf
    (a name that matches no document is kept as written: the scorer judges it)."""
    base = name.strip().rsplit("/", 1)[-1]
    if base.endswith(".md"):
        base = base[:-3]
    if base in documents:
        return base
    return f"{base}.pdf" if f"{base}.pdf" in documents else base


def identity() -> dict[str, object]:
    """What the system is beyond the model, for the run's configuration: the loop, the system
    prompt, the parse backend, the tools, and the static model by name and weights (sha256 of its
    files; a path would differ from machine to machine)."""
    from deskbench.search.retriever import model_fingerprint

    folder = resolve_model(model_name())
    return {"loop": LOOP, "system_prompt": SYSTEM_PROMPT, "parse_backend": PARSE_BACKEND,
            "tools": [t.name for t in TOOLS], "static_model": model_name(),
            "static_model_sha256": model_fingerprint(folder) if folder is not None else None,
            "max_turns": MAX_TURNS}


class SemtoolsAgent:
    name = "semtools-agent"

    def __init__(self) -> None:
        self.staged = StagedCorpus()

    def requires(self) -> Sequence[Need]:
        return [Extra("tokenizers", "embeddings"), StaticModelNeed()]

    def identity(self) -> dict[str, object]:
        return identity()

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        assert ctx.corpus is not None, "semtools-agent needs a corpus"
        if ctx.sandbox is None:
            return rec.result("error", error="semtools-agent runs shell commands: the run has no sandbox")
        model = resolve_model(model_name())
        if model is None:
            return rec.result("error", error=StaticModelNeed().problem("semtools-agent"))
        jail = not ctx.sandbox.unsafe_local
        st = await self.staged.get(ctx.corpus, model, ctx.sandbox.layout.executable, jail)
        machine = Machine(ctx.sandbox, st, CLAUDE_MD)
        problem = await machine.start()
        if problem is not None:
            return rec.result("error", error=f"the tool sandbox {problem}")
        try:
            documents = {d.doc_id for d in ctx.corpus.documents()}
            cwd = JAIL["cwd"] if jail else "the working directory"
            messages = [Message(role="system", content=SYSTEM.format(cwd=cwd, claude_md=CLAUDE_MD)),
                        Message(role="user", content=USER_PROMPT.format(
                            pdf_path=st.pdfs, markdown_path=st.markdown, question=task.question))]
            return await self._loop(task, ctx, rec, machine, messages, documents)
        finally:
            machine.close()

    async def _loop(self, task: DocQATask, ctx: AgentContext, rec: Recorder, machine: Machine,
                    messages: list[Message], documents: set[str]) -> AgentResult:
        max_turns = ctx.settings.max_steps or MAX_TURNS
        repairs = 1
        for turn in range(1, max_turns + 1):
            last = turn == max_turns
            response = await rec.complete(ChatRequest(messages=messages, tools=TOOLS,
                                                      tool_choice="none" if last else "auto"))
            messages.append(response.message)
            calls = response.message.tool_calls
            if not calls or last:
                try:
                    final = read_final(response.message.text(), documents)
                except (ValueError, ValidationError) as exc:
                    if repairs == 0 or last:
                        return rec.result("error", error=f"unparseable answer: {describe_problem(exc)}")
                    repairs -= 1
                    messages.extend(self._answer_calls(calls))
                    messages.append(Message(role="user", content=REPAIR.format(problem=describe_problem(exc))))
                    continue
                args = AnswerArgs(answer=final.answer, citations=final.citations)
                return rec.result("ok", submission_of(task, args, steps=len(final.search_history),
                                                      search_history=final.search_history, iterations=turn,
                                                      llm_calls=turn))
            for call in calls:
                messages.append(await self._tool(call, machine, rec))
            if turn + 1 == max_turns:
                messages.append(Message(role="user", content=LAST_TURN))
        return rec.result("limit", error=f"no answer after {max_turns} turns")

    @staticmethod
    def _answer_calls(calls: list[ToolCall]) -> list[Message]:
        """Tool calls left unanswered (a last-turn reply that still called tools) get a result, as
        every provider wants one per call."""
        return [Message(role="tool", tool_call_id=c.id, content="not run: answer now", is_error=True) for c in calls]

    @staticmethod
    async def _tool(call: ToolCall, machine: Machine, rec: Recorder) -> Message:
        try:
            args: Any = json.loads(call.arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("the arguments are not a JSON object")
        except ValueError as exc:
            text = f"error: {call.name}'s arguments could not be read ({exc})"
            rec.add(ToolCallStep(name=call.name, arguments={"raw": call.arguments}, result={"is_error": True}))
            return Message(role="tool", tool_call_id=call.id, content=text, is_error=True)
        outcome = await machine.call(call.name, args)
        result: dict[str, Any] = {"is_error": outcome.is_error, "output_chars": len(outcome.output)}
        if outcome.lost is not None:
            result["process_lost"] = outcome.lost
        rec.add(ToolCallStep(name=call.name, arguments=args, result=result, seconds=outcome.seconds),
                detail={"output": outcome.output})
        return Message(role="tool", tool_call_id=call.id, content=outcome.output or "(no output)",
                       is_error=outcome.is_error)
