"""`--agent openai-file-search`: MADQA's OpenAI File Search baseline (github OxRML/MADQA
baselines/openai-file-search/openai_file_search_agent.py at 978fa76), through the openai SDK.

As the official script: a vector store (found by name, else created), the PDFs uploaded as files
(purpose "assistants") and added in batches of 100 (`file_batches` create, then polled until no
file is in progress, as the SDK's upload_and_poll does), an assistant "DocQA-<store name>" with
the script's instructions and the file_search tool on the store (updated when found), then per
question a thread, the question as its one user message, a run polled each second up to 120 s,
the newest message's text read by `_parse_answer`, its file_citation annotations (each file's
name from `files.retrieve`) the citations when the JSON names none, and the thread deleted.

Where it differs, and why: the store is named per corpus content and recorded in the corpus folder
(stores.py), so a rerun reuses it and `deskbench stores delete` removes it; the stores' and files'
lists are read to the end (the script reads their first page, 20 items, and uploads the rest
again); a file that fails to upload or to index ends every episode as an error naming it (the
script counts the completed ones and goes on without it); the assistant found by name is also
given the run's model and instructions (the script keeps the model it was created with); a run
that does not complete, or a failed call, is an episode error (the script writes the answer
"Error: Run did not complete" or "Error occurred").

The key and endpoint are the SDK's: OPENAI_API_KEY, OPENAI_BASE_URL (a simulator in the tests)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from deskbench.agents.base import AgentContext, AgentResult, Recorder
from deskbench.corpus import Corpus
from deskbench.models.types import ChatModel, Message
from deskbench.requirements import EnvKey, Need
from deskbench.tracks.docqa.agents.managed_rag import stores
from deskbench.tracks.docqa.agents.managed_rag.costs import openai_storage_per_day
from deskbench.tracks.docqa.agents.managed_rag.episode import (
    Reply,
    check_model,
    finish,
    model_name,
    unsent_settings,
)
from deskbench.tracks.docqa.agents.managed_rag.prompts import OPENAI_INSTRUCTIONS
from deskbench.tracks.docqa.tasks import DocQATask

SERVICE = "openai-file-search"
BATCH = 100  # the script's --batch-size default
RUN_TIMEOUT = 120.0  # seconds a run is polled, as the script
POLL = 1.0  # the script's time.sleep(1) between polls of a run
PROVIDERS = ("openai",)


class StoreError(Exception):
    """The store could not be made ready: every episode of the run ends with this."""


@dataclass(frozen=True)
class Ready:
    store_id: str
    assistant_id: str
    filenames: dict[str, str]  # file id -> file name, as uploaded


def client() -> Any:
    """The SDK's client, reading OPENAI_API_KEY and OPENAI_BASE_URL as the script's OpenAI() does."""
    from openai import OpenAI

    return OpenAI()


def endpoint(api: Any) -> str:
    return str(api.base_url).rstrip("/")


def _status_error(exc: Exception) -> str:
    """An SDK error as one line: the status and the API's own message (the SDK keeps the body's `error`)."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    message = message or getattr(exc, "message", None) or str(exc)
    status = getattr(exc, "status_code", None)
    return f"{status} {message}" if status else message


def prepare_store(api: Any, corpus: Corpus, model: str, *, progress: Any = None) -> Ready:
    """The corpus's vector store with every document indexed, and the assistant on it."""
    import openai

    corpus_key = stores.corpus_key(corpus)
    name, url = stores.store_name(corpus_key), endpoint(api)
    record = stores.find(corpus.root, SERVICE, url, corpus_key)
    if record is not None:
        try:
            api.vector_stores.retrieve(record.id)
        except openai.NotFoundError:  # deleted elsewhere: found by name or made again
            stores.forget(corpus.root, record)
            record = None
    if record is None:
        found = next((s for s in api.vector_stores.list() if s.name == name), None)
        store = found or api.vector_stores.create(name=name)
        record = stores.StoreRecord(service=SERVICE, endpoint=url, name=name, id=store.id, corpus_key=corpus_key)
        stores.save(corpus.root, record)
    filenames = _indexed(api, record)
    docs = {d.doc_id: d for d in corpus.documents()}
    missing = [d for d in sorted(docs) if d not in filenames.values()]
    for start in range(0, len(missing), BATCH):
        batch = missing[start:start + BATCH]
        if progress:
            progress(f"openai-file-search: uploading {len(batch)} PDFs to vector store {record.id}")
        uploaded: dict[str, str] = {}
        for doc_id in batch:
            try:
                data = corpus.stored_file(docs[doc_id]).read_bytes()
                obj = api.files.create(file=(doc_id, data, "application/pdf"), purpose="assistants")
            except openai.APIStatusError as exc:
                raise StoreError(f"openai-file-search: uploading {doc_id} failed ({_status_error(exc)})") from exc
            uploaded[obj.id] = doc_id
        record.files.update({doc: fid for fid, doc in uploaded.items()})
        stores.save(corpus.root, record)  # uploaded files are recorded before indexing: a delete finds them
        fb = api.vector_stores.file_batches.create_and_poll(vector_store_id=record.id, file_ids=list(uploaded))
        if fb.file_counts.failed or fb.file_counts.cancelled:
            bad = [f for status in ("failed", "cancelled") for f in api.vector_stores.file_batches.list_files(
                batch_id=fb.id, vector_store_id=record.id, filter=status)]
            raise StoreError("openai-file-search: indexing failed for " + "; ".join(
                f"{uploaded.get(f.id, f.id)} ({f.status}: {f.last_error.message if f.last_error else 'no reason given'})"
                for f in bad) + f" in vector store {record.id}; fix or remove the file, then run again")
        filenames.update(uploaded)
    store = api.vector_stores.retrieve(record.id)
    record.size_bytes = int(getattr(store, "usage_bytes", 0) or 0)
    record.assistant_id = _assistant(api, record, model)
    stores.save(corpus.root, record)
    return Ready(store_id=record.id, assistant_id=record.assistant_id, filenames=filenames)


def _indexed(api: Any, record: stores.StoreRecord) -> dict[str, str]:
    """The files in the store: file id -> file name (the script's list_indexed_files); a file whose
    indexing failed is an error, one still in progress is waited for."""
    known = {fid: doc for doc, fid in record.files.items()}
    out: dict[str, str] = {}
    for f in api.vector_stores.files.list(vector_store_id=record.id):
        name = known.get(f.id) or api.files.retrieve(f.id).filename
        if f.status == "in_progress":
            f = api.vector_stores.files.poll(f.id, vector_store_id=record.id)
        if f.status in ("failed", "cancelled"):
            reason = f.last_error.message if f.last_error else "no reason given"
            raise StoreError(f"openai-file-search: indexing failed for {name} ({f.status}: {reason}) in vector store "
                             f"{record.id}; run `deskbench stores delete --corpus DIR` and run again")
        out[f.id] = name
        if name not in record.files:
            record.files[name] = f.id
    return out


def _assistant(api: Any, record: stores.StoreRecord, model: str) -> str:
    """The assistant answering from the store: the recorded one, else found by the script's name,
    else created with the script's request."""
    import openai

    name = f"DocQA-{record.name}"
    resources = {"file_search": {"vector_store_ids": [record.id]}}
    found = None
    if record.assistant_id:
        try:
            found = api.beta.assistants.retrieve(record.assistant_id)
        except openai.NotFoundError:
            found = None
    if found is None:
        found = next((a for a in api.beta.assistants.list() if a.name == name), None)
    if found is not None:
        api.beta.assistants.update(assistant_id=found.id, model=model, instructions=OPENAI_INSTRUCTIONS,
                                   tool_resources=resources)
        return str(found.id)
    created = api.beta.assistants.create(name=name, instructions=OPENAI_INSTRUCTIONS, model=model,
                                         tools=[{"type": "file_search"}], tool_resources=resources)
    return str(created.id)


class RunIncomplete(Exception):
    """The assistant's run ended in another state than completed."""


def ask(api: Any, ready: Ready, question: str, *, timeout: float = RUN_TIMEOUT, poll: float | None = None) -> Reply:
    """One question as the script's answer_question asks it (polling every POLL seconds, read when
    called, as the script sleeps)."""
    poll = POLL if poll is None else poll
    started = time.monotonic()
    thread = api.beta.threads.create()
    try:
        api.beta.threads.messages.create(thread_id=thread.id, role="user", content=question)
        run = api.beta.threads.runs.create(thread_id=thread.id, assistant_id=ready.assistant_id)
        while run.status in ("queued", "in_progress"):
            if time.monotonic() - started > timeout:
                break
            time.sleep(poll)
            run = api.beta.threads.runs.retrieve(thread_id=thread.id, run_id=run.id)
        if run.status != "completed":
            error = f": {run.last_error.code}: {run.last_error.message}" if run.last_error else ""
            raise RunIncomplete(f"the assistant's run ended with status {run.status}{error}")
        messages = api.beta.threads.messages.list(thread_id=thread.id, order="desc", limit=1)
        text, annotations = "", []
        for message in messages.data[:1]:
            for block in message.content:
                if block.type == "text":
                    text += block.text.value
                    annotations += [a for a in block.text.annotations if a.type == "file_citation"]
        api_citations = []
        for a in annotations:
            file_id = a.file_citation.file_id
            filename = api.files.retrieve(file_id).filename
            api_citations.append({"file": filename, "file_id": file_id})
        usage = run.usage
        return Reply(text=text, input_tokens=usage.prompt_tokens if usage else 0,
                     output_tokens=usage.completion_tokens if usage else 0, seconds=time.monotonic() - started,
                     retrieval={"annotations": api_citations, "num_citations": len(api_citations),
                                "vector_store": ready.store_id, "run": run.id},
                     api_citations=api_citations)
    finally:
        with contextlib.suppress(Exception):  # the script ignores a failed clean-up too
            api.beta.threads.delete(thread.id)


class OpenAIFileSearchAgent:
    """One vector store per corpus, made ready once per run (at its first episode)."""

    name = SERVICE

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._ready: Ready | None = None
        self._failed: str | None = None
        self._api: Any = None

    def requires(self) -> list[Need]:
        return [EnvKey("OPENAI_API_KEY", "export the key of the OpenAI account that will hold the vector store")]

    async def _prepare(self, ctx: AgentContext, model: str) -> Ready:
        async with self._lock:
            if self._failed is not None:
                raise StoreError(self._failed)
            if self._ready is None:
                assert ctx.corpus is not None, "openai-file-search needs a corpus"
                from deskbench.console import err

                try:
                    self._api = self._api or client()
                    self._ready = await asyncio.to_thread(prepare_store, self._api, ctx.corpus, model,
                                                          progress=lambda line: err.print(line))
                except StoreError as exc:
                    self._failed = str(exc)
                    raise
                except Exception as exc:  # an API error while making the store ready
                    self._failed = f"openai-file-search: preparing the vector store failed ({_status_error(exc)})"
                    raise StoreError(self._failed) from exc
            return self._ready

    def check_run(self, model: ChatModel | None) -> None:
        """Another provider's model or an unsent setting: one line before the run is created."""
        check_model(model, SERVICE, PROVIDERS, "openai/gpt-4o")

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        rec = Recorder(ctx.model)
        try:
            model = model_name(ctx, SERVICE, PROVIDERS, "openai/gpt-4o")
        except ValueError as exc:
            return rec.result("error", error=str(exc))
        if (refused := unsent_settings(ctx.model, SERVICE)) is not None:
            return rec.result("error", error=refused)
        try:
            ready = await self._prepare(ctx, model)
        except StoreError as exc:
            return rec.result("error", error=str(exc))
        try:
            reply = await asyncio.to_thread(ask, self._api, ready, task.question)
        except RunIncomplete as exc:
            return rec.result("error", error=f"openai-file-search: {exc}")
        except Exception as exc:
            return rec.result("error", error=f"openai-file-search: the question's request failed ({_status_error(exc)})")
        assert ctx.model is not None
        sent = [Message(role="system", content=OPENAI_INSTRUCTIONS), Message(role="user", content=task.question)]
        return finish(task, rec, ctx.model.id, sent, reply, tool="file_search")


def storage_cost_per_day(record: stores.StoreRecord) -> float:
    return openai_storage_per_day(record.size_bytes)


def delete_store(record: stores.StoreRecord) -> list[str]:
    """Delete what deskbench made for the record: the assistant, the vector store, the uploaded
    files. A thing already gone is skipped. Returns what was deleted."""
    import openai
    from openai import OpenAI

    api = OpenAI(base_url=record.endpoint)  # where the store is, whatever OPENAI_BASE_URL says now
    done: list[str] = []
    targets: list[tuple[str, Any]] = []
    if record.assistant_id:
        targets.append((f"assistant {record.assistant_id}", lambda: api.beta.assistants.delete(record.assistant_id)))
    targets.append((f"vector store {record.id}", lambda: api.vector_stores.delete(record.id)))
    for doc, fid in sorted(record.files.items()):
        targets.append((f"file {fid} ({doc})", lambda fid=fid: api.files.delete(fid)))
    for what, call in targets:
        try:
            call()
            done.append(what)
        except openai.NotFoundError:
            pass
    return done
