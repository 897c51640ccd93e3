"""`--agent gemini-file-search`: MADQA's Gemini File Search baseline (github OxRML/MADQA
baselines/gemini-file-search/gemini_file_search_agent.py at 978fa76), over the REST API the
script's google-genai SDK speaks (https://ai.google.dev/api/file-search/file-search-stores,
.../documents, https://ai.google.dev/api/generate-content), with the standard library's HTTP.

As the script: a File Search store (found by displayName, else created), each PDF uploaded into it
with `uploadToFileSearchStore` (the SDK's resumable upload: a start request with the config
{"displayName": file name}, then the bytes with "upload, finalize") and its long-running operation
polled every 2 s (up to 300 s) until done, then per question one generateContent call: the
script's prompt and the question as one user turn, the file_search tool on the store; the reply's
text read by `_parse_answer` (the citations are the JSON's only), the grounding metadata recorded
(retrieval queries, the first five chunks' uri and title, their count).

Where it differs, and why: the store is named per corpus content and recorded in the corpus folder
(stores.py); the documents are listed to the end (the script reads them all too, through the
SDK's pager); an operation that ends in an error, or a document whose state is STATE_FAILED, ends
every episode as an error naming the file (the script goes on without it); a failed call is an
episode error (the script writes the answer "Error occurred").

Key: GEMINI_API_KEY, else GOOGLE_API_KEY (models/gemini_native.py); endpoint root:
GOOGLE_GEMINI_BASE_URL (a simulator in the tests), as the SDK reads it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import quote

from deskbench.agents.base import AgentContext, AgentResult, Recorder
from deskbench.corpus import Corpus
from deskbench.models.gemini_native import KEY_ENVS, key_from_env
from deskbench.models.gemini_rest import GeminiApiError, GeminiRest
from deskbench.models.types import ChatModel, Message
from deskbench.requirements import Need
from deskbench.tracks.docqa.agents.managed_rag import stores
from deskbench.tracks.docqa.agents.managed_rag.costs import GEMINI_STORAGE_USD_PER_GB_DAY
from deskbench.tracks.docqa.agents.managed_rag.episode import (
    Reply,
    check_model,
    finish,
    model_name,
    unsent_settings,
)
from deskbench.tracks.docqa.agents.managed_rag.openai_fs import StoreError
from deskbench.tracks.docqa.agents.managed_rag.prompts import gemini_contents
from deskbench.tracks.docqa.tasks import DocQATask

SERVICE = "gemini-file-search"
VERSION = "v1beta"
PROVIDERS = ("google", "gemini")
OPERATION_POLL = 2.0  # the script's time.sleep(2)
OPERATION_TIMEOUT = 300.0  # the script's _wait_for_operations timeout
PENDING_BATCH = 10  # the script waits for its pending uploads every 10


ApiError = GeminiApiError  # the API refused a request: its status and message


class Api(GeminiRest):
    """The REST API at one root with one key, and its list methods' pages."""

    @classmethod
    def from_env(cls) -> Self:
        api = super().from_env()
        if api is None:
            raise StoreError(f"gemini-file-search needs an API key: set {' or '.join(KEY_ENVS)}")
        return api

    def pages(self, path: str, field: str) -> list[dict[str, Any]]:
        """Every item of a list method, page after page (pageSize 20, the most it takes)."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = "pageSize=20" + (f"&pageToken={quote(token)}" if token else "")
            reply, _ = self.request("GET", f"{VERSION}/{path}?{query}")
            items += reply.get(field, [])
            token = reply.get("nextPageToken", "")
            if not token:
                return items


def _upload(api: Api, store: str, doc_id: str, data: bytes) -> dict[str, Any]:
    """The SDK's upload_to_file_search_store: start a resumable upload, send the bytes; the operation."""
    _, headers = api.request("POST", f"upload/{VERSION}/{store}:uploadToFileSearchStore", {"displayName": doc_id},
                             headers={"X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
                                      "X-Goog-Upload-Header-Content-Length": str(len(data)),
                                      "X-Goog-Upload-Header-Content-Type": "application/pdf"})
    upload_url = headers.get("x-goog-upload-url")
    if not upload_url:
        raise ApiError(0, "the upload's start had no x-goog-upload-url header")
    operation: dict[str, Any]
    operation, _ = api.request("POST", "", data=data, url=upload_url,
                               headers={"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "0",
                                        "Content-Length": str(len(data))})
    return operation


def _wait(api: Api, pending: list[tuple[str, dict[str, Any]]]) -> None:
    """The script's _wait_for_operations; an operation that fails, or does not end, is a StoreError."""
    for doc_id, operation in pending:
        started = time.monotonic()
        while not operation.get("done"):
            if time.monotonic() - started > OPERATION_TIMEOUT:
                raise StoreError(f"gemini-file-search: indexing {doc_id} did not finish in {OPERATION_TIMEOUT:.0f} s "
                                 f"({operation.get('name')}); run again to wait for it")
            time.sleep(OPERATION_POLL)
            operation, _ = api.request("GET", f"{VERSION}/{operation['name']}")
        if "error" in operation:
            error = operation["error"]
            raise StoreError(f"gemini-file-search: indexing failed for {doc_id} ({error.get('message', error)}); "
                             "fix or remove the file, then run again")


@dataclass(frozen=True)
class Ready:
    store: str


def prepare_store(api: Api, corpus: Corpus, *, progress: Any = None) -> Ready:
    """The corpus's File Search store with every document active."""
    key = stores.corpus_key(corpus)
    name = stores.store_name(key)
    record = stores.find(corpus.root, SERVICE, api.root, key)
    if record is not None:
        try:
            api.request("GET", f"{VERSION}/{record.id}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            stores.forget(corpus.root, record)
            record = None
    if record is None:
        found = next((s for s in api.pages("fileSearchStores", "fileSearchStores") if s.get("displayName") == name), None)
        store = found or api.request("POST", f"{VERSION}/fileSearchStores", {"displayName": name})[0]
        record = stores.StoreRecord(service=SERVICE, endpoint=api.root, name=name, id=store["name"], corpus_key=key)
        stores.save(corpus.root, record)
    documents = api.pages(f"{record.id}/documents", "documents")
    for d in documents:
        if d.get("state") == "STATE_FAILED":
            raise StoreError(f"gemini-file-search: indexing failed for {d.get('displayName')} ({d['name']} is "
                             "STATE_FAILED); run `deskbench stores delete --corpus DIR` and run again")
    indexed = {d.get("displayName") or d["name"] for d in documents}
    docs = {d.doc_id: d for d in corpus.documents()}
    missing = [d for d in sorted(docs) if d not in indexed]
    if missing and progress:
        progress(f"gemini-file-search: uploading {len(missing)} PDFs to {record.id}")
    pending: list[tuple[str, dict[str, Any]]] = []
    for doc_id in missing:
        try:
            operation = _upload(api, record.id, doc_id, corpus.stored_file(docs[doc_id]).read_bytes())
        except ApiError as exc:
            raise StoreError(f"gemini-file-search: uploading {doc_id} failed ({exc})") from exc
        pending.append((doc_id, operation))
        if len(pending) >= PENDING_BATCH:
            _wait(api, pending)
            pending = []
    _wait(api, pending)
    for d in api.pages(f"{record.id}/documents", "documents") if missing else documents:
        record.files[d.get("displayName") or d["name"]] = d["name"]
    store, _ = api.request("GET", f"{VERSION}/{record.id}")
    record.size_bytes = int(store.get("sizeBytes", 0) or 0)
    stores.save(corpus.root, record)
    return Ready(store=record.id)


def ask(api: Api, store: str, model: str, question: str) -> Reply:
    """The script's answer_question: one generateContent call with the file_search tool."""
    started = time.monotonic()
    body = {"contents": [{"parts": [{"text": gemini_contents(question)}], "role": "user"}],
            "tools": [{"fileSearch": {"fileSearchStoreNames": [store]}}], "generationConfig": {}}
    reply, _ = api.request("POST", f"{VERSION}/models/{model}:generateContent", body)
    candidates = reply.get("candidates") or []
    candidate = candidates[0] if candidates else {}
    text = "".join(p.get("text", "") for p in (candidate.get("content") or {}).get("parts") or []
                   if not p.get("thought"))
    metadata = candidate.get("groundingMetadata") or {}
    chunks = metadata.get("groundingChunks") or []
    grounding = {"retrieval_queries": list(metadata.get("retrievalQueries") or []),
                 "grounding_chunks": [{k: c.get("retrievedContext", {}).get(k) for k in ("uri", "title")}
                                      for c in chunks[:5]],
                 "num_chunks": len(chunks), "file_search_store": store}
    usage = reply.get("usageMetadata") or {}
    output = int(usage.get("candidatesTokenCount", 0)) + int(usage.get("thoughtsTokenCount", 0))
    return Reply(text=text, input_tokens=int(usage.get("promptTokenCount", 0)), output_tokens=output,
                 seconds=time.monotonic() - started, retrieval=grounding)


@dataclass(frozen=True)
class GeminiKey:
    """GEMINI_API_KEY or GOOGLE_API_KEY, as the SDK reads either."""

    def problem(self, what: str) -> str | None:
        return None if key_from_env() else f"{what} needs an API key: set {' or '.join(KEY_ENVS)}"


class GeminiFileSearchAgent:
    """One File Search store per corpus, made ready once per run (at its first episode)."""

    name = SERVICE

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._ready: Ready | None = None
        self._failed: str | None = None
        self._api: Api | None = None

    def requires(self) -> list[Need]:
        return [GeminiKey()]

    async def _prepare(self, ctx: AgentContext) -> tuple[Api, Ready]:
        async with self._lock:
            if self._failed is not None:
                raise StoreError(self._failed)
            if self._ready is None or self._api is None:
                assert ctx.corpus is not None, "gemini-file-search needs a corpus"
                from deskbench.console import err

                try:
                    self._api = self._api or Api.from_env()
                    self._ready = await asyncio.to_thread(prepare_store, self._api, ctx.corpus,
                                                          progress=lambda line: err.print(line))
                except StoreError as exc:
                    self._failed = str(exc)
                    raise
                except (ApiError, OSError) as exc:
                    self._failed = f"gemini-file-search: preparing the File Search store failed ({exc})"
                    raise StoreError(self._failed) from exc
            return self._api, self._ready

    def check_run(self, model: ChatModel | None) -> None:
        """Another provider's model or an unsent setting: one line before the run is created."""
        check_model(model, SERVICE, PROVIDERS, "google/gemini-2.5-flash")

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        rec = Recorder(ctx.model)
        try:
            model = model_name(ctx, SERVICE, PROVIDERS, "google/gemini-2.5-flash")
        except ValueError as exc:
            return rec.result("error", error=str(exc))
        if (refused := unsent_settings(ctx.model, SERVICE)) is not None:
            return rec.result("error", error=refused)
        try:
            api, ready = await self._prepare(ctx)
        except StoreError as exc:
            return rec.result("error", error=str(exc))
        try:
            reply = await asyncio.to_thread(ask, api, ready.store, model, task.question)
        except (ApiError, OSError, ValueError) as exc:
            return rec.result("error", error=f"gemini-file-search: the question's request failed ({exc})")
        assert ctx.model is not None
        return finish(task, rec, ctx.model.id, [Message(role="user", content=gemini_contents(task.question))], reply,
                      tool="file_search")


def storage_cost_per_day(record: stores.StoreRecord) -> float:
    return record.size_bytes / 1e9 * GEMINI_STORAGE_USD_PER_GB_DAY


def delete_store(record: stores.StoreRecord) -> list[str]:
    """Delete the store with its documents (force=true); already gone: nothing."""
    api = Api.from_env()
    if api.root != record.endpoint:
        api = Api(record.endpoint, api.key)
    try:
        api.request("DELETE", f"{VERSION}/{record.id}?force=true")
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise
    return [f"File Search store {record.id} ({len(record.files)} documents)"]
