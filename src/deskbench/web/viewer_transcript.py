"""An episode's transcript as the viewer draws it: step by step, each model call with the messages
its request added and its reply (text, tool calls with their arguments, the provider's reasoning
folded), each tool with its full
result; the pages a search returned (and the page images a request carried) as thumbnails marked
cited / gold; execute_code's code, stdout and stderr apart.

Model output is hostile: everything here is plain data, and the templates escape it (autoescape).
The transcript is expanded first (`deskbench.runs.transcript.expand`: a corpus page's text stored
by reference is filled in from the corpus, or a marker saying why not)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal
from urllib.parse import urlencode

from pydantic import BaseModel, Field

from deskbench.runs.transcript import ModelCallEvent, TranscriptDoc
from deskbench.web.viewer_data import Page, pretty

_PAGE_REF = re.compile(r"^page:(?P<doc>.+)#(?P<page>\d+)(?:@(?P<dpi>\d+))?$")
_BLOB_REF = re.compile(r"^blob:(?P<sha>[0-9a-f]{64})$")


class Thumb(BaseModel):
    """A corpus page shown small, marked when the answer cited it or it is gold evidence."""

    document: str
    page: int
    url: str | None  # None: no corpus given, the page is named only
    cited: bool = False
    gold: bool = False
    score: float | None = None  # a search hit's score

    @property
    def css(self) -> str:
        return " ".join(c for c, on in (("cited", self.cited), ("gold", self.gold)) if on)


class Part(BaseModel):
    kind: Literal["text", "page", "image"]
    text: str = ""
    thumb: Thumb | None = None
    url: str = ""  # an image stored by hash


class ShownMessage(BaseModel):
    role: str
    parts: list[Part] = Field(default_factory=list)
    # (name, arguments exactly as sent, the same indented when they parse as JSON and read differently)
    tool_calls: list[tuple[str, str, str]] = Field(default_factory=list)
    tool_call_id: str | None = None
    reasoning: list[str] = Field(default_factory=list)  # the provider's reasoning text, shown folded


class Step(BaseModel):
    n: int
    kind: Literal["model_call", "tool"]
    at: float
    seconds: float | None = None
    title: str
    # model calls
    added: list[ShownMessage] = Field(default_factory=list)
    prefix: int = 0
    reply: ShownMessage | None = None
    finish: str = ""
    usage: str = ""
    error: str | None = None
    options: str = ""
    # tools
    arguments: str = ""
    code: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    hits: list[Thumb] = Field(default_factory=list)
    result: str = ""


class Marks(BaseModel):
    """What makes a page special in this episode, and how its thumbnail is fetched."""

    cited: set[Page] = Field(default_factory=set)
    gold: set[Page] = Field(default_factory=set)
    corpus: str = ""  # the viewer's key of the corpus the pages are shown from ("": none, pages are named)
    run: str = ""

    def thumb(self, document: str, page: int, score: float | None = None) -> Thumb:
        url = ("/page-image?" + urlencode({"corpus": self.corpus, "doc": document, "page": page})) if self.corpus else None
        return Thumb(document=document, page=page, url=url, cited=(document, page) in self.cited,
                     gold=(document, page) in self.gold, score=score)


def _arguments(text: object) -> tuple[str, str]:
    """Tool-call arguments byte for byte as the model sent them (a broken reply is the thing to
    see), and indented when they parse as JSON ("" when that reads the same)."""
    if not isinstance(text, str):
        return pretty(text), ""
    try:
        indented = pretty(json.loads(text))
    except ValueError:
        return text, ""
    return text, indented if indented != text else ""


def _parts(content: object, marks: Marks) -> list[Part]:
    if isinstance(content, str):
        return [Part(kind="text", text=content)] if content else []
    out: list[Part] = []
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, dict):
            out.append(Part(kind="text", text=pretty(p)))
        elif p.get("type") == "image":
            ref = str(p.get("ref", ""))
            page, blob = _PAGE_REF.match(ref), _BLOB_REF.match(ref)
            if page:
                out.append(Part(kind="page", thumb=marks.thumb(page["doc"], int(page["page"]))))
            elif blob:
                out.append(Part(kind="image", url="/blob?" + urlencode({"run": marks.run, "sha": blob["sha"]})))
            else:
                out.append(Part(kind="text", text=f"[image {ref or 'without a reference'}]"))
        elif "text" in p and not p["text"]:
            continue
        elif "text" in p:
            out.append(Part(kind="text", text=str(p["text"])))
        else:  # a page's text stored by reference and not expanded
            out.append(Part(kind="text", text=f"[text by reference: {p.get('ref', '?')}]"))
    return out


def shown_message(m: dict[str, Any], marks: Marks) -> ShownMessage:
    return ShownMessage(role=str(m.get("role", "?")), parts=_parts(m.get("content"), marks),
                        tool_calls=[(str(c.get("name", "")), *_arguments(c.get("arguments", "")))
                                    for c in m.get("tool_calls") or []],
                        tool_call_id=m.get("tool_call_id"), reasoning=_reasoning(m.get("reasoning")))


def _reasoning(blocks: object) -> list[str]:
    """Each reasoning block's text; a redacted one (encrypted by the provider) is named, not shown."""
    out: list[str] = []
    for r in blocks if isinstance(blocks, list) else []:
        if not isinstance(r, dict):
            out.append(pretty(r))
        elif r.get("text"):
            out.append(str(r["text"]))
        elif r.get("redacted"):
            out.append(f"[redacted thinking: encrypted by the provider, {len(str(r['redacted']))} characters]")
    return out


def _hits(result: dict[str, Any], marks: Marks) -> list[Thumb]:
    if isinstance(result.get("hits"), list):
        return [marks.thumb(str(h.get("file") or h.get("document")), int(h["page"]), h.get("score"))
                for h in result["hits"] if isinstance(h, dict) and isinstance(h.get("page"), int)]
    pages = result.get("pages")
    if isinstance(pages, list):
        return [marks.thumb(str(p[0]), p[1]) for p in pages
                if isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[1], int)]
    return []


def steps(doc: TranscriptDoc, marks: Marks) -> list[Step]:
    """The transcript's events in order, ready to draw."""
    out: list[Step] = []
    calls = 0
    for n, event in enumerate(doc.events, 1):
        if isinstance(event, ModelCallEvent):
            calls += 1
            reply = event.reply or {}
            usage = reply.get("usage") or {}
            out.append(Step(
                n=n, kind="model_call", at=event.at, seconds=event.seconds, title=f"model call {calls}: {event.model}",
                added=[shown_message(m, marks) for m in event.messages], prefix=event.prefix,
                reply=shown_message(reply["message"], marks) if reply.get("message") else None,
                finish=str(reply.get("finish_reason") or ""), error=event.error,
                usage=", ".join(f"{k} {round(v, 6) if isinstance(v, float) else v}" for k, v in usage.items()
                                if v not in (None, 0, 0.0)),
                options=", ".join(f"{k}: {v}" for k, v in event.options.items())))
            continue
        result = dict(event.result)
        args = dict(event.arguments)
        code = args.pop("code", None) if isinstance(args.get("code"), str) else None
        stdout = result.pop("stdout", None)
        stderr = result.pop("stderr", None)
        hits = _hits(result, marks)
        if hits:
            result.pop("hits", None)
            result.pop("pages", None)
        out.append(Step(n=n, kind="tool", at=event.at, title=f"tool: {event.name}",
                        arguments=pretty(args) if args else "", code=code,
                        stdout=stdout if isinstance(stdout, str) else None,
                        stderr=stderr if isinstance(stderr, str) else None,
                        hits=hits, result=pretty(result) if result else ""))
    return out


def judge_steps(judges: dict[str, TranscriptDoc], marks: Marks) -> list[tuple[str, list[Step]]]:
    """Score-time judge and grader calls (RunStore.judge_transcripts), one list per judge."""
    return [(name, steps(doc, marks)) for name, doc in sorted(judges.items())]


def pages_seen(all_steps: Iterable[Step]) -> set[Page]:
    """Every page a search returned or a request showed (for tests and the summary)."""
    seen: set[Page] = set()
    for s in all_steps:
        seen |= {(t.document, t.page) for t in s.hits}
        for m in [*s.added, *([s.reply] if s.reply else [])]:
            seen |= {(p.thumb.document, p.thumb.page) for p in m.parts if p.thumb}
    return seen
