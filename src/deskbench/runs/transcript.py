"""An episode's full transcript: every model call's request and reply, every tool call with its
arguments and result, as the run store keeps it (compressed, beside the episode).

The trajectory (`Episode.trajectory`) says what happened in numbers: tokens, seconds, pages; the
transcript keeps the text, so a number can be audited down to what the model was sent and what it
said. Kept small without losing anything:
- a conversation grows by appending, so a model call stores only the messages its request adds to
  the previous call's (`prefix`: how many it shares with it); a request that is not an extension
  (a new conversation, a judge) stores them all;
- an image is stored once, by reference: a corpus page as `page:<document>#<page>@<dpi>` (the
  corpus renders it again), anything else by the sha256 of its bytes in the store's `blobs` table;
- a corpus page's text (the text view) is stored by reference too, as
  `{"type": "text", "ref": "pagetext:<document>#<page>", "sha256": <hex of the text>}`: the text
  is the corpus's, which the run records per system (`remember_corpus`); `expand` fills it back
  in, checking the sha256, so what is shown is what was sent or a marker saying why it is not;
- a reply's reasoning ("thinking") is kept on its message as `"reasoning": [{"text", "signature"?,
  "redacted"?}]`, apart from the content, exactly as the provider returned it;
- the whole episode is one zlib-compressed JSON document (the codec is stored with it).

Collecting costs one dict per new message and call; compression happens once, when the episode
is written."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field

from deskbench.models.types import ChatRequest, ChatResponse, ImagePart, Message, TextPart

if TYPE_CHECKING:  # the corpus is read only when a transcript is expanded
    from deskbench.corpus import Corpus

CODEC = "zlib+json"
_LEVEL = 6


class Blob(BaseModel):
    """An image (or file) stored once per run, by the sha256 of its bytes."""

    sha256: str
    mime: str
    data: bytes


class ModelCallEvent(BaseModel):
    """One model call: the messages its request added (`prefix` shared with the previous call's
    request), the request's other fields, and the reply or the error."""

    kind: Literal["model_call"] = "model_call"
    at: float  # seconds since the episode began, when the call was sent
    seconds: float
    model: str
    prefix: int
    messages: list[dict[str, Any]]
    options: dict[str, Any] = Field(default_factory=dict)  # tools, tool_choice, response_schema, sampling
    reply: dict[str, Any] | None = None  # the message, finish_reason, model, usage, cached
    error: str | None = None


class ToolEvent(BaseModel):
    """A tool the agent ran (search, a page view, execute_code, the answer): its arguments and
    what it returned, in full where the trajectory step keeps a summary."""

    kind: Literal["tool"] = "tool"
    at: float
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)


TranscriptEvent = Annotated[ModelCallEvent | ToolEvent, Field(discriminator="kind")]


class TranscriptDoc(BaseModel):
    """What is stored for one episode."""

    version: int = 1
    events: list[TranscriptEvent] = Field(default_factory=list)

    def conversation(self, index: int) -> list[dict[str, Any]]:
        """The full message list of the `index`-th model call's request, rebuilt from the deltas."""
        calls = [e for e in self.events if isinstance(e, ModelCallEvent)]
        messages: list[dict[str, Any]] = []
        for call in calls[: index + 1]:
            messages = messages[: call.prefix] + call.messages
        return messages


PAGETEXT = "pagetext:"


def part_json(part: TextPart | ImagePart, blobs: dict[str, Blob]) -> dict[str, Any]:
    if isinstance(part, TextPart):
        if part.ref:
            return {"type": "text", "ref": part.ref, "sha256": hashlib.sha256(part.text.encode()).hexdigest()}
        return {"type": "text", "text": part.text}
    if part.ref:
        return {"type": "image", "mime": part.mime, "ref": part.ref}
    data = base64.b64decode(part.data_b64)
    digest = hashlib.sha256(data).hexdigest()
    blobs.setdefault(digest, Blob(sha256=digest, mime=part.mime, data=data))
    return {"type": "image", "mime": part.mime, "ref": f"blob:{digest}"}


def message_json(m: Message, blobs: dict[str, Blob]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role}
    out["content"] = m.content if isinstance(m.content, str) else [part_json(p, blobs) for p in m.content]
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.reasoning:  # the provider's reasoning text, and the signature or redacted data it must get back
        out["reasoning"] = [r.model_dump(exclude_none=True) for r in m.reasoning]
    return out


class Transcript:
    """Collects an episode's events as they happen (the Recorder feeds it)."""

    def __init__(self) -> None:
        self.events: list[ModelCallEvent | ToolEvent] = []
        self.blobs: dict[str, Blob] = {}
        self._t0 = time.monotonic()
        self._sent: list[Message] = []  # the previous call's request messages, by identity

    def elapsed(self) -> float:
        return round(time.monotonic() - self._t0, 4)

    def model_call(self, model: str, request: ChatRequest, response: ChatResponse | None, *, at: float,
                   seconds: float, error: str | None = None) -> None:
        messages = request.messages
        prefix = 0
        for a, b in zip(self._sent, messages, strict=False):
            if a is not b:
                break
            prefix += 1
        self._sent = list(messages)
        options: dict[str, Any] = {}
        if request.tools:
            options["tools"] = [t.name for t in request.tools]
        for key in ("tool_choice", "temperature", "top_p", "reasoning_effort", "max_tokens", "seed"):
            value = getattr(request, key)
            if value is not None:
                options[key] = value
        if request.response_schema is not None:
            options["response_schema"] = request.response_schema
        reply = None
        if response is not None:
            reply = {"message": message_json(response.message, self.blobs), "finish_reason": response.finish_reason,
                     "model": response.model, "cached": response.cached,
                     "usage": response.usage.model_dump(exclude={"cost_known"})}
            if response.batch is not None:  # the provider batch the reply came through (models/batch/)
                reply["batch"] = response.batch
        # built from values made here, of the declared types: not validated again (a call's
        # messages would be copied dict by dict on every call)
        self.events.append(ModelCallEvent.model_construct(
            at=at, seconds=round(seconds, 4), model=model, prefix=prefix,
            messages=[message_json(m, self.blobs) for m in messages[prefix:]], options=options, reply=reply, error=error))

    def tool(self, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        self.events.append(ToolEvent(at=self.elapsed(), name=name, arguments=arguments, result=result))

    def take_tools(self, other: Transcript) -> None:
        """Add `other`'s tool events among this one's, in time order on this transcript's clock
        (a plugin agent's own transcript whose model calls the harness recorded itself:
        agents/plugin_calls.py). `other`'s model calls are not taken."""
        shift = other._t0 - self._t0
        tools = [e.model_copy(update={"at": round(e.at + shift, 4)}) for e in other.events if isinstance(e, ToolEvent)]
        # a call's `at` is when it was sent, a tool's when it ended: at a tie the tool came first
        self.events = sorted([*self.events, *tools], key=lambda e: (e.at, isinstance(e, ModelCallEvent)))

    def doc(self) -> TranscriptDoc:
        return TranscriptDoc(events=list(self.events))


def encode(doc: TranscriptDoc) -> bytes:
    return zlib.compress(doc.model_dump_json(exclude_defaults=False).encode(), _LEVEL)


MAX_DECODED_BYTES = 256 * 1024 * 1024  # a stored row is data: a zlib bomb must not fill memory


def decode(codec: str, body: bytes) -> TranscriptDoc:
    """The stored transcript; a ValueError (an unreadable row, runs/store.py) past
    MAX_DECODED_BYTES rather than decompressing whatever a forged row holds."""
    if codec != CODEC:
        raise ValueError(f"unknown transcript codec {codec!r}")
    inflate = zlib.decompressobj()
    raw = inflate.decompress(body, MAX_DECODED_BYTES)
    if inflate.unconsumed_tail:
        raise ValueError(f"the transcript decompresses past {MAX_DECODED_BYTES // 2**20} MB")
    if not inflate.eof:  # zlib.decompress's own error for a cut stream (the object form returns what it has)
        raise zlib.error("Error -5 while decompressing data: incomplete or truncated stream")
    return TranscriptDoc.model_validate_json(raw)


def texts(doc: TranscriptDoc) -> Sequence[str]:
    """Every text in the transcript (sent or received), for search and for tests."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(json.loads(doc.model_dump_json()))
    return out


def _page_key(ref: str) -> tuple[str, int] | None:
    """(document, page) of a `pagetext:<document>#<page>` reference; None when it is not one."""
    doc, sep, page = ref.removeprefix(PAGETEXT).rpartition("#")
    return (doc, int(page)) if ref.startswith(PAGETEXT) and sep and page.isdigit() else None


def _ref_parts(doc: TranscriptDoc) -> list[dict[str, Any]]:
    """Every text part stored by reference (no "text"), in the requests and the replies."""
    out: list[dict[str, Any]] = []
    for event in doc.events:
        if not isinstance(event, ModelCallEvent):
            continue
        messages = list(event.messages) + ([event.reply["message"]] if event.reply and "message" in event.reply else [])
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):
                out += [p for p in content if isinstance(p, dict) and p.get("type") == "text" and "text" not in p]
    return out


def expand(doc: TranscriptDoc, corpus: Corpus | None) -> TranscriptDoc:
    """A copy of `doc` with every page text stored by reference filled in from `corpus`, for
    display and export. The text is used only when its sha256 is the one stored, so it is
    byte for byte what the model was sent; otherwise the part gets a marker text saying why
    (the page changed, the page or the corpus is not available) and `"missing"`: "changed" |
    "unavailable", never another text silently. `doc` itself is not changed."""
    out = doc.model_copy(deep=True)
    parts = _ref_parts(out)
    if not parts:
        return out
    keys = {p["ref"]: _page_key(str(p.get("ref", ""))) for p in parts}
    wanted = sorted({k for k in keys.values() if k is not None})
    found = corpus.store.texts(wanted) if corpus is not None and wanted else {}
    for part in parts:
        key = keys[part["ref"]]
        text = found.get(key) if key is not None else None
        where = f"page {key[1]} of {key[0]}" if key is not None else repr(part["ref"])
        if text is not None and hashlib.sha256(text.encode()).hexdigest() == part.get("sha256"):
            part["text"] = text
        elif text is not None:
            part["text"] = (f"[deskbench: the text of {where} is not shown: the page changed in the corpus since "
                            "the run (its text no longer matches the sha256 stored with the transcript)]")
            part["missing"] = "changed"
        else:
            why = ("the corpus the run used is not available" if corpus is None
                   else f"the corpus at {corpus.root} has no such page")
            part["text"] = f"[deskbench: the text of {where} is not shown: {why}]"
            part["missing"] = "unavailable"
    return out


class MetaStore(Protocol):
    """The part of the run store that keeps the run's meta (runs/store.py RunStore)."""

    def meta(self, key: str) -> object | None: ...

    def update_meta(self, key: str, change: Callable[[object | None], object]) -> object: ...


CORPUS_META = "corpora"  # meta key: {system: the absolute path of the corpus its agent read}


def remember_corpus(store: MetaStore, system: str, root: Path | None) -> None:
    """Record which corpus a system's episodes read, so their page texts (stored by reference)
    can be shown later; the latest run of the system wins."""
    if root is None:
        return

    def change(known: object | None) -> object:
        table: dict[str, Any] = dict(known) if isinstance(known, dict) else {}
        table[system] = str(Path(root).resolve())
        return table

    store.update_meta(CORPUS_META, change)


def recorded_corpus(store: MetaStore, system: str) -> Path | None:
    """The corpus directory a system's episodes read, as the run recorded it (None: none recorded)."""
    table = store.meta(CORPUS_META)
    value = table.get(system) if isinstance(table, dict) else None
    return Path(value) if isinstance(value, str) else None


def open_recorded_corpus(store: MetaStore, system: str) -> Corpus | None:
    """The recorded corpus opened, for `expand`; None when none is recorded or it is gone (then
    `expand` marks each page text as not available)."""
    from deskbench.corpus import Corpus
    from deskbench.errors import UserError

    root = recorded_corpus(store, system)
    if root is None:
        return None
    try:
        return Corpus.open(root)
    except UserError:
        return None
