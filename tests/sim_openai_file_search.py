"""A strict local simulator of the OpenAI APIs the File Search baseline uses: Files, Vector Stores
(files, file batches) and the Assistants API (assistants, threads, messages, runs), over real HTTP
on 127.0.0.1 (the openai SDK talks to it through OPENAI_BASE_URL).

As tests/sim_openai.py: each request is checked against what the real API documents, and refused
as it refuses (status, error body {"error": {"message", "type", "param", "code"}}); only the
assistant's reply to a question comes from the test's script. Sources:
  FILES   https://platform.openai.com/docs/api-reference/files (purpose, the 512 MB limit)
  VS      https://platform.openai.com/docs/api-reference/vector-stores, .../vector-stores-files,
          .../vector-stores-file-batches (objects, statuses, file_counts, list filter)
  ASST    https://platform.openai.com/docs/api-reference/assistants, .../threads, .../messages, .../runs
  FS      https://platform.openai.com/docs/assistants/tools/file-search (supported file types; "we've
          built a 60 second maximum wait in the Run object when the thread's vector store contains files
          that are still being processed": such a run is not refused, it is noted in `early_runs`)
  ERR     https://platform.openai.com/docs/guides/error-codes
Error texts: "Unrecognized request argument supplied: X" (400) and "Incorrect API key provided"
(401) as tests/sim_openai.py cites them; "No vector store found with id '...'", "No assistant found
with id '...'", "No thread found with id '...'", "No run found with id '...'" and "No such File
object: ..." (404) are the API's wording as recalled, not found in a page; the OpenAI-Beta header
text is the API's 400 for an Assistants call without it.

    with SimFileSearch(answer=lambda question, files: {...}) as sim:
        env OPENAI_BASE_URL=sim.base_url, OPENAI_API_KEY=sim.api_key
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from http_double import JsonMethodDouble, multipart
from sim_openai import openai_body

Reply = tuple[int, dict[str, Any]]

MAX_FILE_BYTES = 512 * 1024 * 1024  # FILES: "Individual files can be up to 512 MB"
FILE_SEARCH_TYPES = (".pdf", ".txt", ".md", ".docx", ".doc", ".html", ".json", ".pptx", ".tex", ".c", ".cpp",
                     ".cs", ".css", ".go", ".java", ".js", ".php", ".py", ".rb", ".sh", ".ts")  # FS, supported files
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")  # FILES: purpose
MODELS = {"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-5", "gpt-5-mini"}


def err(status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
        code: str | None = None) -> Reply:
    return status, openai_body(message, type=type, param=param, code=code)


# the request fields each endpoint takes (VS, ASST); anything else is refused as unrecognized
FIELDS = {
    "vector_stores.create": {"name", "file_ids", "expires_after", "chunking_strategy", "metadata", "description"},
    "file_batches.create": {"file_ids", "files", "attributes", "chunking_strategy"},
    "assistants.create": {"model", "name", "description", "instructions", "tools", "tool_resources", "metadata",
                          "temperature", "top_p", "response_format", "reasoning_effort"},
    "threads.create": {"messages", "tool_resources", "metadata"},
    "messages.create": {"role", "content", "attachments", "metadata"},
    "runs.create": {"assistant_id", "model", "instructions", "additional_instructions", "additional_messages",
                    "tools", "metadata", "temperature", "top_p", "stream", "max_prompt_tokens",
                    "max_completion_tokens", "truncation_strategy", "tool_choice", "parallel_tool_calls",
                    "response_format", "reasoning_effort"},
}
FIELDS["assistants.update"] = FIELDS["assistants.create"]

def list_page(ordered: list[dict[str, Any]], query: dict[str, str], limit: int) -> Reply:
    """A list answer of OpenAI's APIs: the items of `ordered` after the `after` cursor, at most
    `limit`, with first_id, last_id and has_more."""
    if "after" in query:
        ids = [x["id"] for x in ordered]
        ordered = ordered[ids.index(query["after"]) + 1:] if query["after"] in ids else []
    page = ordered[:limit]
    return 200, {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                 "last_id": page[-1]["id"] if page else None, "has_more": len(ordered) > limit}


@dataclass
class Call:
    """An accepted request: the path's parts after /v1, the query (last value of each name, and
    all of them), the JSON body or the multipart form of a POST."""

    parts: list[str]
    query: dict[str, str]
    multi: dict[str, list[str]]
    body: dict[str, Any] | None
    form: dict[str, tuple[str | None, bytes]] | None


@dataclass
class OpenAIDouble(JsonMethodDouble):
    """What the OpenAI simulators share: the key, the base URL, and the checks every request meets
    before its endpoint's (ERR: the key; a path under /v1; a POST's JSON or multipart body)."""

    api_key: str = field(default="sk-test", kw_only=True)
    max_file_bytes: int = field(default=MAX_FILE_BYTES, kw_only=True)
    requests: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list, kw_only=True)  # (method, path, JSON body)
    files: dict[str, dict[str, Any]] = field(default_factory=dict, kw_only=True)  # FILES: the File objects
    blobs: dict[str, bytes] = field(default_factory=dict, kw_only=True)  # file id -> its bytes

    @property
    def base_url(self) -> str:
        return f"{self._url}/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key}

    def _gate(self, parts: list[str], headers: dict[str, str]) -> Reply | None:
        """A refusal of the path's API before its body is read (none by default)."""
        return None

    def _call(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply | Call:
        """The request, accepted and logged in `requests`, or the API's refusal of it."""
        if headers.get("authorization") != f"Bearer {self.api_key}":  # ERR
            return err(401, "Incorrect API key provided: check your key at https://platform.openai.com/account/api-keys.",
                       code="invalid_api_key")
        url = urlsplit(path)
        multi = parse_qs(url.query)
        parts = url.path.strip("/").split("/")
        if parts[:1] != ["v1"] or len(parts) < 2:
            return err(404, f"Invalid URL ({method} {url.path})")
        refused = self._gate(parts[1:], headers)
        if refused is not None:
            return refused
        body: dict[str, Any] | None = None
        form = None
        if method == "POST":
            form = multipart(headers, raw)
            if form is None:
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    return err(400, "We could not parse the JSON body of your request. (HINT: This likely means "
                               "you aren't using your HTTP library correctly.)")
        self.requests.append((method, path, body))
        return Call(parts[1:], {k: v[-1] for k, v in multi.items()}, multi, body, form)

    def _created_at(self) -> int:
        """An object's created_at: the clock's second."""
        return int(time.time())

    def _upload(self, form: dict[str, tuple[str | None, bytes]] | None) -> Reply:
        """POST /v1/files (FILES): a multipart form with a `purpose` and a `file`."""
        if form is None:
            return err(400, "'file' is a required property", param="file")
        if "purpose" not in form:
            return err(400, "'purpose' is a required property", param="purpose")
        purpose = form["purpose"][1].decode()
        if purpose not in PURPOSES:
            return err(400, f"'{purpose}' is not one of {list(PURPOSES)} - 'purpose'", param="purpose")
        if "file" not in form or not form["file"][0]:
            return err(400, "'file' is a required property", param="file")
        name, data = form["file"]
        if len(data) > self.max_file_bytes:
            return err(400, f"File is too large. The maximum file size is {self.max_file_bytes // (1024 * 1024)} MB.",
                       param="file")
        fid = self._id("file-")
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": self._created_at(),
                           "filename": name, "purpose": purpose, "status": "processed", "expires_at": None,
                           "status_details": None}
        self.blobs[fid] = data
        return 200, self.files[fid]


Answer = Callable[[str, dict[str, bytes]], dict[str, Any]]
"""(question, the store's indexed files by name) -> {"text": ..., "cite": [file names], "usage":
{"prompt_tokens", "completion_tokens"}} or {"status": "failed", "last_error": {...}}."""


@dataclass
class SimFileSearch(OpenAIDouble):
    answer: Answer
    fail_indexing: set[str] = field(default_factory=set)  # file names whose indexing fails
    index_polls: int = 1  # polls of a batch (or file) before its files are done
    early_runs: list[str] = field(default_factory=list)  # runs made while the store had files in progress
    stores: dict[str, dict[str, Any]] = field(default_factory=dict)
    store_files: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    assistants: dict[str, dict[str, Any]] = field(default_factory=dict)
    threads: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def calls(self, method: str, prefix: str) -> list[dict[str, Any] | None]:
        """The bodies of the accepted requests of `method` whose path starts with /v1`prefix`."""
        return [b for m, p, b in self.requests if m == method and urlsplit(p).path.startswith("/v1" + prefix)]

    # -- dispatch ----------------------------------------------------------------------------------
    def _extra_headers(self, status: int, body: Any) -> list[tuple[str, str]]:
        return [("openai-poll-after-ms", "1")] if "status" in body else []  # the SDK's polling hint

    def _gate(self, parts: list[str], headers: dict[str, str]) -> Reply | None:
        if parts[0] in ("assistants", "threads") and headers.get("openai-beta") != "assistants=v2":
            return err(400, "You must provide the 'OpenAI-Beta' header to access the Assistants API. Please try "
                       "again by setting the header 'OpenAI-Beta: assistants=v2'.", code="invalid_beta")
        return None

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        call = self._call(method, path, headers, raw)
        if not isinstance(call, Call):
            return call
        parts = call.parts
        route = ROUTES.get((method, len(parts), parts[0], parts[2] if len(parts) > 2 else ""))
        if route is None:
            return err(404, f"Invalid URL ({method} {urlsplit(path).path})")
        return route(self, parts, call.query, call.body, call.form)

    @staticmethod
    def _unknown(kind: str, body: dict[str, Any] | None) -> Reply | None:
        extra = sorted(set(body or {}) - FIELDS[kind])
        return err(400, f"Unrecognized request argument supplied: {extra[0]}") if extra else None

    @staticmethod
    def _page(items: list[dict[str, Any]], query: dict[str, str]) -> Reply:
        """A list answer (`limit` 1-100, default 20; `after`; `order` asc|desc, default desc)."""
        limit = int(query.get("limit", 20))
        if not 1 <= limit <= 100:
            return err(400, f"Invalid 'limit': integer below minimum value. Expected a value >= 1, but got {limit} "
                       "instead.", param="limit", code="integer_below_min_value")
        ordered = sorted(items, key=lambda x: (x.get("created_at", 0), x["id"]), reverse=query.get("order", "desc") == "desc")
        return list_page(ordered, query, limit)

    # -- files -------------------------------------------------------------------------------------
    def _created_at(self) -> int:
        """A counter, not the clock: the lists' order by created_at is then the order of creation."""
        return next(self._ids)

    def files_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        return self._upload(form)

    def files_get(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if parts[1] not in self.files:
            return err(404, f"No such File object: {parts[1]}", param="id")
        return 200, self.files[parts[1]]

    def files_delete(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if parts[1] not in self.files:
            return err(404, f"No such File object: {parts[1]}", param="id")
        del self.files[parts[1]]
        for files in self.store_files.values():
            files.pop(parts[1], None)
        return 200, {"id": parts[1], "object": "file", "deleted": True}

    # -- vector stores -----------------------------------------------------------------------------
    def _store(self, sid: str) -> Reply | None:
        return None if sid in self.stores else err(404, f"No vector store found with id '{sid}'.")

    def _store_view(self, sid: str) -> dict[str, Any]:
        store = self.stores[sid]
        files = self.store_files[sid].values()
        counts = {s: sum(1 for f in files if f["status"] == s) for s in ("in_progress", "completed", "failed", "cancelled")}
        store["file_counts"] = {**counts, "total": len(files)}
        store["usage_bytes"] = sum(f["usage_bytes"] for f in files if f["status"] == "completed")
        store["status"] = "in_progress" if counts["in_progress"] else "completed"
        return store

    def stores_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._unknown("vector_stores.create", body):
            return refused
        sid = self._id("vs_")
        self.stores[sid] = {"id": sid, "object": "vector_store", "created_at": next(self._ids),
                            "name": body.get("name"), "metadata": body.get("metadata") or {}, "expires_after": None,
                            "expires_at": None, "last_active_at": None}
        self.store_files[sid] = {}
        return 200, self._store_view(sid)

    def stores_list(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        return self._page([self._store_view(s) for s in self.stores], query)

    def stores_get(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        return self._store(parts[1]) or (200, self._store_view(parts[1]))

    def stores_delete(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._store(parts[1]):
            return refused
        del self.stores[parts[1]], self.store_files[parts[1]]
        return 200, {"id": parts[1], "object": "vector_store.deleted", "deleted": True}

    def _advance(self, sid: str, fids: list[str]) -> None:
        """One poll of files being indexed: after `index_polls` they are completed (or failed)."""
        for fid in fids:
            f = self.store_files[sid].get(fid)
            if f is None or f["status"] != "in_progress":
                continue
            f["_polls"] += 1
            if f["_polls"] >= self.index_polls:
                name = self.files[fid]["filename"] if fid in self.files else ""
                if name in self.fail_indexing or not name.lower().endswith(FILE_SEARCH_TYPES):
                    f["status"], f["last_error"] = "failed", {"code": "unsupported_file",
                                                              "message": "The file type is not supported."}
                else:
                    f["status"], f["usage_bytes"] = "completed", self.files[fid]["bytes"]

    @staticmethod
    def _file_view(f: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in f.items() if not k.startswith("_")}

    def store_files_list(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._store(parts[1]):
            return refused
        files = list(self.store_files[parts[1]].values())
        if "filter" in query:
            files = [f for f in files if f["status"] == query["filter"]]
        return self._page([self._file_view(f) for f in files], query)

    def store_file_get(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._store(parts[1]):
            return refused
        if parts[3] not in self.store_files[parts[1]]:
            return err(404, f"No file found with id '{parts[3]}' in vector store '{parts[1]}'.")
        self._advance(parts[1], [parts[3]])
        return 200, self._file_view(self.store_files[parts[1]][parts[3]])

    def batches_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        sid = parts[1]
        if refused := self._store(sid) or self._unknown("file_batches.create", body):
            return refused
        fids = body.get("file_ids") or []
        if not fids:
            return err(400, "Invalid 'file_ids': empty array. Expected an array with minimum length 1, but got an "
                       "empty array instead.", param="file_ids", code="empty_array")
        for fid in fids:
            if fid not in self.files:
                return err(404, f"No such File object: {fid}", param="file_ids")
        bid = self._id("vsfb_")
        for fid in fids:
            self.store_files[sid][fid] = {"id": fid, "object": "vector_store.file", "created_at": next(self._ids),
                                          "vector_store_id": sid, "status": "in_progress", "last_error": None,
                                          "usage_bytes": 0, "chunking_strategy": {"type": "static", "static": {
                                              "max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}},
                                          "attributes": {}, "_polls": 0}
        self.batches[bid] = {"id": bid, "object": "vector_store.files_batch", "created_at": next(self._ids),
                             "vector_store_id": sid, "_files": list(fids)}
        return 200, self._batch_view(bid)

    def _batch_view(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        files = [self.store_files[b["vector_store_id"]].get(f) for f in b["_files"]]
        counts = {s: sum(1 for f in files if f and f["status"] == s) for s in ("in_progress", "completed", "failed", "cancelled")}
        status = "in_progress" if counts["in_progress"] else ("failed" if counts["failed"] and not counts["completed"] else "completed")
        return {**{k: v for k, v in b.items() if not k.startswith("_")}, "status": status,
                "file_counts": {**counts, "total": len(files)}}

    def batches_get(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        bid = parts[3]
        if refused := self._store(parts[1]):
            return refused
        if bid not in self.batches:
            return err(404, f"No file batch found with id '{bid}' in vector store '{parts[1]}'.")
        self._advance(parts[1], self.batches[bid]["_files"])
        return 200, self._batch_view(bid)

    def batch_files(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._store(parts[1]):
            return refused
        batch = self.batches.get(parts[3])
        if batch is None:
            return err(404, f"No file batch found with id '{parts[3]}' in vector store '{parts[1]}'.")
        files = [self.store_files[parts[1]][f] for f in batch["_files"] if f in self.store_files[parts[1]]]
        if "filter" in query:
            files = [f for f in files if f["status"] == query["filter"]]
        return self._page([self._file_view(f) for f in files], query)

    # -- assistants --------------------------------------------------------------------------------
    def _assistant_checks(self, kind: str, body: dict[str, Any]) -> Reply | None:
        if refused := self._unknown(kind, body):
            return refused
        if "model" in body and body["model"] not in MODELS:
            return err(400, f"The requested model '{body['model']}' does not exist.", param="model",
                       code="model_not_found")
        for sid in ((body.get("tool_resources") or {}).get("file_search") or {}).get("vector_store_ids", []):
            if sid not in self.stores:
                return err(404, f"No vector store found with id '{sid}'.")
        return None

    def assistants_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._assistant_checks("assistants.create", body):
            return refused
        if "model" not in body:
            return err(400, "Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
        aid = self._id("asst_")
        self.assistants[aid] = {"id": aid, "object": "assistant", "created_at": next(self._ids), "name": body.get("name"),
                                "description": None, "model": body["model"], "instructions": body.get("instructions"),
                                "tools": body.get("tools") or [], "tool_resources": body.get("tool_resources") or {},
                                "metadata": {}, "top_p": 1.0, "temperature": 1.0, "response_format": "auto"}
        return 200, self.assistants[aid]

    def assistants_list(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        return self._page(list(self.assistants.values()), query)

    def assistant_get(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if parts[1] not in self.assistants:
            return err(404, f"No assistant found with id '{parts[1]}'.")
        return 200, self.assistants[parts[1]]

    def assistant_update(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if parts[1] not in self.assistants:
            return err(404, f"No assistant found with id '{parts[1]}'.")
        if refused := self._assistant_checks("assistants.update", body):
            return refused
        self.assistants[parts[1]].update(body)
        return 200, self.assistants[parts[1]]

    def assistant_delete(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if self.assistants.pop(parts[1], None) is None:
            return err(404, f"No assistant found with id '{parts[1]}'.")
        return 200, {"id": parts[1], "object": "assistant.deleted", "deleted": True}

    # -- threads, messages, runs -------------------------------------------------------------------
    def threads_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if refused := self._unknown("threads.create", body):
            return refused
        tid = self._id("thread_")
        self.threads[tid] = {"id": tid, "object": "thread", "created_at": next(self._ids), "metadata": {},
                             "tool_resources": {}, "_messages": []}
        return 200, self._file_view(self.threads[tid])

    def thread_delete(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if self.threads.pop(parts[1], None) is None:
            return err(404, f"No thread found with id '{parts[1]}'.")
        return 200, {"id": parts[1], "object": "thread.deleted", "deleted": True}

    def _message(self, tid: str, role: str, text: str, annotations: list[dict[str, Any]],
                 run_id: str | None = None, assistant_id: str | None = None) -> dict[str, Any]:
        mid = self._id("msg_")
        message = {"id": mid, "object": "thread.message", "created_at": next(self._ids), "thread_id": tid,
                   "role": role, "status": "completed", "assistant_id": assistant_id, "run_id": run_id,
                   "attachments": [], "metadata": {},
                   "content": [{"type": "text", "text": {"value": text, "annotations": annotations}}]}
        self.threads[tid]["_messages"].append(message)
        return message

    def messages_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        tid = parts[1]
        if tid not in self.threads:
            return err(404, f"No thread found with id '{tid}'.")
        if refused := self._unknown("messages.create", body):
            return refused
        if body.get("role") not in ("user", "assistant"):
            return err(400, f"Invalid value: '{body.get('role')}'. Supported values are: 'user' and 'assistant'.",
                       param="role", code="invalid_value")
        if not isinstance(body.get("content"), str | list):
            return err(400, "Missing required parameter: 'content'.", param="content", code="missing_required_parameter")
        return 200, self._message(tid, body["role"], body["content"] if isinstance(body["content"], str) else "", [])

    def messages_list(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        if parts[1] not in self.threads:
            return err(404, f"No thread found with id '{parts[1]}'.")
        return self._page(self.threads[parts[1]]["_messages"], query)

    def runs_create(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        tid = parts[1]
        if tid not in self.threads:
            return err(404, f"No thread found with id '{tid}'.")
        if refused := self._unknown("runs.create", body):
            return refused
        assistant = self.assistants.get(body.get("assistant_id", ""))
        if assistant is None:
            return err(404, f"No assistant found with id '{body.get('assistant_id')}'.")
        rid = self._id("run_")
        store_ids = ((assistant["tool_resources"] or {}).get("file_search") or {}).get("vector_store_ids", [])
        if any(f["status"] == "in_progress" for s in store_ids for f in self.store_files.get(s, {}).values()):
            self.early_runs.append(rid)
        self.runs[rid] = {"id": rid, "object": "thread.run", "created_at": next(self._ids), "thread_id": tid,
                          "assistant_id": assistant["id"], "status": "queued", "model": assistant["model"],
                          "instructions": assistant["instructions"], "tools": assistant["tools"], "last_error": None,
                          "usage": None, "_stores": store_ids}
        return 200, self._file_view(self.runs[rid])

    def run_get(self, parts: list[str], query: dict[str, str], body: Any, form: Any) -> Reply:
        run = self.runs.get(parts[3])
        if run is None or run["thread_id"] != parts[1]:
            return err(404, f"No run found with id '{parts[3]}'.")
        if run["status"] == "queued":
            self._complete(run)
        return 200, self._file_view(run)

    def _complete(self, run: dict[str, Any]) -> None:
        """The run answers: the script's reply, from the files indexed in the assistant's stores."""
        tid = run["thread_id"]
        question = next(m["content"][0]["text"]["value"] for m in self.threads[tid]["_messages"] if m["role"] == "user")
        indexed = {self.files[fid]["filename"]: self.blobs[fid] for s in run["_stores"]
                   for fid, f in self.store_files.get(s, {}).items() if f["status"] == "completed" and fid in self.files}
        reply = self.answer(question, indexed)
        if reply.get("status") == "failed":
            run["status"], run["last_error"] = "failed", reply["last_error"]
            return
        by_name = {self.files[fid]["filename"]: fid for s in run["_stores"] for fid in self.store_files.get(s, {})
                   if fid in self.files}
        text = reply["text"]
        annotations = [{"type": "file_citation", "text": f"【4:{i}†source】", "start_index": len(text),
                        "end_index": len(text), "file_citation": {"file_id": by_name[name]}}
                       for i, name in enumerate(reply.get("cite", []))]
        self._message(tid, "assistant", text, annotations, run_id=run["id"], assistant_id=run["assistant_id"])
        usage = reply.get("usage", {"prompt_tokens": 0, "completion_tokens": 0})
        run["status"], run["usage"] = "completed", {**usage, "total_tokens": sum(usage.values())}


ROUTES: dict[tuple[str, int, str, str], Callable[..., Reply]] = {
    ("POST", 1, "files", ""): SimFileSearch.files_create,
    ("GET", 2, "files", ""): SimFileSearch.files_get,
    ("DELETE", 2, "files", ""): SimFileSearch.files_delete,
    ("POST", 1, "vector_stores", ""): SimFileSearch.stores_create,
    ("GET", 1, "vector_stores", ""): SimFileSearch.stores_list,
    ("GET", 2, "vector_stores", ""): SimFileSearch.stores_get,
    ("DELETE", 2, "vector_stores", ""): SimFileSearch.stores_delete,
    ("GET", 3, "vector_stores", "files"): SimFileSearch.store_files_list,
    ("GET", 4, "vector_stores", "files"): SimFileSearch.store_file_get,
    ("POST", 3, "vector_stores", "file_batches"): SimFileSearch.batches_create,
    ("GET", 4, "vector_stores", "file_batches"): SimFileSearch.batches_get,
    ("GET", 5, "vector_stores", "file_batches"): SimFileSearch.batch_files,
    ("POST", 1, "assistants", ""): SimFileSearch.assistants_create,
    ("GET", 1, "assistants", ""): SimFileSearch.assistants_list,
    ("GET", 2, "assistants", ""): SimFileSearch.assistant_get,
    ("POST", 2, "assistants", ""): SimFileSearch.assistant_update,
    ("DELETE", 2, "assistants", ""): SimFileSearch.assistant_delete,
    ("POST", 1, "threads", ""): SimFileSearch.threads_create,
    ("DELETE", 2, "threads", ""): SimFileSearch.thread_delete,
    ("POST", 3, "threads", "messages"): SimFileSearch.messages_create,
    ("GET", 3, "threads", "messages"): SimFileSearch.messages_list,
    ("POST", 3, "threads", "runs"): SimFileSearch.runs_create,
    ("GET", 4, "threads", "runs"): SimFileSearch.run_get,
}
