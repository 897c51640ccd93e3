"""A model that answers from a file: `--model scripted:FILE` (or `scripted/FILE`).

Why: any agent (a built-in one, a plugin) can then reach a real score offline, without a key
or a local model that cannot follow the agent's answer format; the examples and the demo use it.

The file is JSON Lines, one entry a question (docs/formats.md, "Scripted model"):

    {"question": "How many staff ...?", "content": {"answer": ["186"], "citations": [...]}}
    {"question": "Which suppliers ...?", "turns": [
        {"tool_calls": [{"name": "search_documents", "arguments": {"query": "suppliers"}}]},
        {"tool_calls": [{"name": "provide_answer", "arguments": {"answer": ["..."], "citations": []}}]}]}

A request is matched by the question its user messages contain (compared case-folded, NFKC
normalised, runs of white space as one; the longest question found wins); the reply is the
entry's turn numbered by how many assistant turns the request already holds, so an agent that
loops (search, then answer) gets each turn in order. A request whose question is in no entry,
or that asks for more turns than the entry has, is a model error naming the question and the
file, never an empty reply. Calls cost nothing and count no tokens. The model is `scripted/<file
stem>`; `source` (the file's sha256) is kept in the run's identity, so a run resumed after the
file changed is refused (runs/identity.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deskbench.errors import UserError
from deskbench.models.types import ChatRequest, ChatResponse, Message, ModelError, ToolCall, Usage

EXAMPLE = '{"question": "...", "content": "the reply"}'
"""The shape of one line, for error messages."""


CONTENT = "The reply's text; a JSON object or list is sent as its JSON text."
TOOL_CALLS = "Tool calls the reply makes, in order."


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The tool's name, as the agent offers it (e.g. search_documents).")
    arguments: dict[str, Any] | str = Field(default_factory=dict, description="The arguments: a JSON object, or "
                                            "the raw text to send (to test how an agent takes malformed ones).")


class ScriptedReply(BaseModel):
    """One assistant turn: text (a JSON object or list is sent as its JSON text) and/or tool calls."""

    model_config = ConfigDict(extra="forbid")

    content: str | dict[str, Any] | list[Any] = Field(default="", description=CONTENT)
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list, description=TOOL_CALLS)

    @model_validator(mode="after")
    def _says_something(self) -> ScriptedReply:
        if self.content in ("", {}, []) and not self.tool_calls:
            raise ValueError("a reply needs content or tool_calls")
        return self

    def message(self, turn: int) -> Message:
        text = self.content if isinstance(self.content, str) else json.dumps(self.content, ensure_ascii=False)
        calls = [ToolCall(id=f"scripted-{turn}-{i}", name=c.name,
                          arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments))
                 for i, c in enumerate(self.tool_calls)]
        return Message(role="assistant", content=text, tool_calls=calls)


class ScriptedEntry(BaseModel):
    """One line of the file: a question and its reply (or its turns, in order)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="The question, as the task gives it: a request whose user "
                          "messages contain it (case-folded, white space collapsed) gets this entry's reply.")
    task: str | None = Field(default=None, description="The task's id, for the reader; matching is by question.")
    content: str | dict[str, Any] | list[Any] = Field(default="", description=CONTENT)
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list, description=TOOL_CALLS)
    turns: list[ScriptedReply] = Field(default_factory=list, description="Replies in order, for an agent that "
                                       "loops: the reply to a request is the turn numbered by the assistant turns "
                                       "it already holds. Instead of content and tool_calls.")

    @model_validator(mode="after")
    def _one_form(self) -> ScriptedEntry:
        inline = self.content not in ("", {}, []) or bool(self.tool_calls)
        if inline and self.turns:
            raise ValueError("give either turns or content/tool_calls, not both")
        if not inline and not self.turns:
            raise ValueError("no reply: give content, tool_calls or turns")
        return self

    def replies(self) -> list[ScriptedReply]:
        return self.turns or [ScriptedReply(content=self.content, tool_calls=self.tool_calls)]


def normalise(text: str) -> str:
    """How questions are compared: NFKC, case folded, runs of white space as one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()


class Script(BaseModel):
    """A scripted model's file, read and checked: its entries by normalised question."""

    path: str  # as the user gave it (messages name it so)
    sha256: str
    entries: dict[str, tuple[int, ScriptedEntry]]  # normalised question -> (line number, entry)


def read_script(path: Path) -> Script:
    """The file, checked whole: a problem is one UserError naming the file and the line."""
    shown = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"scripted model file {shown} not found; give an existing JSON Lines file "
                        f"(--model scripted:FILE, each line {EXAMPLE})") from None
    except IsADirectoryError:
        raise UserError(f"scripted model file {shown} is a directory; give a JSON Lines file "
                        f"(each line {EXAMPLE})") from None
    except OSError as exc:
        raise UserError(f"scripted model file {shown} cannot be read ({exc.strerror or exc})") from None

    def bad(line: int, problem: str) -> UserError:
        return UserError(f"scripted model file {shown} line {line}: {problem}; each line is a JSON object "
                         f"like {EXAMPLE} (see docs/formats.md, Scripted model)")

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"scripted model file {shown} is not UTF-8 text; give a JSON Lines file") from None
    entries: dict[str, tuple[int, ScriptedEntry]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = ScriptedEntry.model_validate_json(line)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            msg = str(first["msg"]).removeprefix("Value error, ")
            raise bad(n, f"{where + ': ' if where else ''}{msg}") from None
        key = normalise(entry.question)
        if key in entries:
            raise bad(n, f"the question {entry.question[:80]!r} is already on line {entries[key][0]}")
        entries[key] = (n, entry)
    if not entries:
        raise bad(1, "no entries")
    return Script(path=shown, sha256=hashlib.sha256(raw).hexdigest(), entries=entries)


def _question_like(request: ChatRequest) -> str:
    """What to call an unmatched request's question: its first user line that ends with "?",
    else the start of its first user message."""
    texts = [m.text() for m in request.messages if m.role == "user"]
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if line.endswith("?"):
                return line[-200:]
    return (texts[0] if texts else "").strip()[:200] or "(no user message)"


class ScriptedChat:
    """The ChatModel of `--model scripted:FILE`."""

    def __init__(self, script: Script, name: str) -> None:
        self.script = script
        self.id = f"scripted/{name}"
        self.source = f"sha256:{script.sha256}"  # what decides its replies: kept in the run's identity

    def find(self, request: ChatRequest) -> tuple[int, ScriptedEntry] | None:
        """The entry whose question the request's user messages contain (the longest, in the
        first user message that holds one)."""
        for message in request.messages:
            if message.role != "user":
                continue
            text = normalise(message.text())
            found = [key for key in self.script.entries if key in text]
            if found:
                return self.script.entries[max(found, key=len)]
        return None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        found = self.find(request)
        if found is None:
            raise ModelError(f"no reply in {self.script.path} for the question {_question_like(request)!r}; "
                             f"add a line for it ({EXAMPLE})", retryable=False)
        line, entry = found
        turn = sum(m.role == "assistant" for m in request.messages)
        replies = entry.replies()
        if turn >= len(replies):
            raise ModelError(f"{self.script.path} line {line} has {len(replies)} turn(s) for {entry.question[:80]!r}; "
                             f"the agent asked for turn {turn + 1}: add turns to that line", retryable=False)
        message = replies[turn].message(turn)
        return ChatResponse(message=message, model=self.id, usage=Usage(calls=1, cost_usd=0.0),
                            finish_reason="tool_calls" if message.tool_calls else "stop")

    async def aclose(self) -> None:
        return None
