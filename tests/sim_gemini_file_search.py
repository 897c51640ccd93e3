"""A strict local simulator of the Gemini API's File Search (v1beta): File Search stores, their
documents, the resumable upload into a store with its long-running operation, and generateContent
with the fileSearch tool, over real HTTP on 127.0.0.1 (GOOGLE_GEMINI_BASE_URL points the agent at it).

As tests/sim_gemini_native.py: requests are checked against what the API documents and refused
with its error body {"error": {"code", "message", "status"}}; only the model's reply to a
question comes from the test's script. Sources:
  STORES  https://ai.google.dev/api/file-search/file-search-stores (create, list: pageSize at most
          20, "values above 20 will be coerced to 20"; get; delete: "If false (the default), a
          FAILED_PRECONDITION error will be returned if FileSearchStore contains any Documents";
          uploadToFileSearchStore, operations.get)
  DOCS    https://ai.google.dev/api/file-search/documents (Document.state STATE_PENDING | STATE_ACTIVE |
          STATE_FAILED; list)
  FS      https://ai.google.dev/gemini-api/docs/file-search ("The maximum file size per document is
          100 MB"; supported file types; the tool {"file_search": {"file_search_store_names": [...]}}
          and groundingMetadata.groundingChunks[].retrievedContext {title, text, fileSearchStore})
  GC      https://ai.google.dev/api/generate-content (the request's fields; usageMetadata)
  UPLOAD  the resumable protocol the SDKs use (start: X-Goog-Upload-Protocol resumable, Command start,
          the answer's X-Goog-Upload-URL; then Command "upload, finalize" with X-Goog-Upload-Offset)
Error texts: "API key not valid. Please pass a valid API key." (400 INVALID_ARGUMENT), "Invalid JSON
payload received. Unknown name ..." and the unknown model's 404 are the API's, as
tests/sim_gemini_native.py cites them; the texts for a missing store or document, a file over the
size limit, an unsupported type and a failed indexing were not found in a page and are worded here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from http_double import JsonMethodDouble
from sim_gemini_native import error_body

MAX_FILE_BYTES = 100 * 1024 * 1024  # FS
MIME_TYPES = ("application/pdf", "text/plain", "text/markdown", "text/html", "text/csv", "application/json",
              "application/vnd.openxmlformats-officedocument.wordprocessingml.document")  # FS, a subset
MODELS = {"gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro-preview", "gemini-2.5-flash-lite"}
GENERATE_FIELDS = {"contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig",
                   "cachedContent"}  # GC
UPLOAD_CONFIG_FIELDS = {"displayName", "customMetadata", "chunkingConfig", "mimeType"}  # STORES, upload config

Reply = tuple[int, dict[str, Any]]
Answer = Callable[[str, dict[str, bytes]], dict[str, Any]]
"""(the user turn's text, the store's active documents by display name) -> {"text", "chunks": [display
names retrieved], "queries": [...], "usage": {"promptTokenCount", "candidatesTokenCount"}}."""


def err(status: int, message: str, status_name: str | None = None) -> Reply:
    """Google's error body, its status named by the HTTP status unless `status_name` says otherwise."""
    body = error_body(status, message)
    if status_name:
        body["error"]["status"] = status_name
    return status, body


@dataclass
class GeminiDouble(JsonMethodDouble):
    """What the Gemini API simulators share: the key, the root URL, Google's JSON content type."""

    CONTENT_TYPE: ClassVar[str] = "application/json; charset=UTF-8"
    api_key: str = field(default="test-key", kw_only=True)

    @property
    def root(self) -> str:
        return self._url

    def env(self) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": self.root, "GEMINI_API_KEY": self.api_key}


@dataclass
class SimGeminiFileSearch(GeminiDouble):
    answer: Answer
    fail_indexing: set[str] = field(default_factory=set)  # display names whose indexing fails
    index_polls: int = 1  # operation polls before the document is indexed
    max_file_bytes: int = MAX_FILE_BYTES
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    early_queries: list[str] = field(default_factory=list)  # generateContent while a document was pending
    stores: dict[str, dict[str, Any]] = field(default_factory=dict)
    documents: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # store -> name -> document
    blobs: dict[str, bytes] = field(default_factory=dict)
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)  # upload id -> its start
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)

    def generate_bodies(self) -> list[Any]:
        return [b for m, p, _, b in self.requests if m == "POST" and ":generateContent" in p]

    # -- dispatch ----------------------------------------------------------------------------------
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        url = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        p = unquote(url.path)
        if headers.get("x-goog-api-key") != self.api_key:
            return *err(400, "API key not valid. Please pass a valid API key."), []
        if p.startswith("/upload/v1beta/") and "upload_id" in query:
            return self._finalize(query["upload_id"], headers, raw)
        body: Any = None
        if method == "POST":
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return *err(400, "Invalid JSON payload received."), []
        self.requests.append((method, path, headers, body))
        if p.startswith("/upload/v1beta/") and p.endswith(":uploadToFileSearchStore") and method == "POST":
            return self._start(p[len("/upload/v1beta/"):-len(":uploadToFileSearchStore")], headers, body)
        if not p.startswith("/v1beta/"):
            return *err(404, f"Method not found: {p}"), []
        rest = p[len("/v1beta/"):]
        parts = rest.split("/")
        if method == "POST" and rest.startswith("models/") and rest.endswith(":generateContent"):
            return *self._generate(rest[len("models/"):-len(":generateContent")], body), []
        if parts[0] != "fileSearchStores":
            return *err(404, f"Method not found: {p}"), []
        if method == "POST" and len(parts) == 1:
            extra = sorted(set(body) - {"displayName"})
            if extra:
                return *err(400, f'Invalid JSON payload received. Unknown name "{extra[0]}": Cannot find field.'), []
            sid = f"fileSearchStores/{self._id('store-')}"
            self.stores[sid] = {"name": sid, "displayName": body.get("displayName", ""), "createTime": "2026-11-28T00:00:00Z",
                                "updateTime": "2026-11-28T00:00:00Z"}
            self.documents[sid] = {}
            return 200, self._store_view(sid), []
        if method == "GET" and len(parts) == 1:
            return *self._page([self._store_view(s) for s in self.stores], "fileSearchStores", query), []
        sid = "/".join(parts[:2])
        if sid not in self.stores:
            return *err(404, f"FileSearchStore {sid} not found." if method != "DELETE" else
                        f"FileSearchStore {sid} not found."), []
        if len(parts) == 2 and method == "GET":
            return 200, self._store_view(sid), []
        if len(parts) == 2 and method == "DELETE":
            if self.documents[sid] and query.get("force") != "true":
                return *err(400, f"FileSearchStore {sid} is not empty: delete its Documents, or use force=true.",
                            "FAILED_PRECONDITION"), []
            del self.stores[sid], self.documents[sid]
            return 200, {}, []
        if len(parts) == 3 and parts[2] == "documents" and method == "GET":
            return *self._page(list(self.documents[sid].values()), "documents", query), []
        if len(parts) == 5 and parts[2:4] == ["upload", "operations"] and method == "GET":
            return *self._operation("/".join(parts)), []
        return *err(404, f"Method not found: {p}"), []

    @staticmethod
    def _page(items: list[dict[str, Any]], name: str, query: dict[str, str]) -> Reply:
        size = min(int(query.get("pageSize", 10)), 20)  # STORES, DOCS: default 10, coerced to 20
        start = int(query.get("pageToken") or 0)
        out: dict[str, Any] = {name: items[start:start + size]} if items[start:start + size] else {}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return 200, out

    def _store_view(self, sid: str) -> dict[str, Any]:
        docs = self.documents[sid].values()
        view = dict(self.stores[sid])
        for state, key in (("STATE_ACTIVE", "activeDocumentsCount"), ("STATE_PENDING", "pendingDocumentsCount"),
                           ("STATE_FAILED", "failedDocumentsCount")):
            n = sum(1 for d in docs if d["state"] == state)
            if n:
                view[key] = str(n)
        size = sum(int(d["sizeBytes"]) for d in docs if d["state"] == "STATE_ACTIVE")
        if size:
            view["sizeBytes"] = str(size)
        return view

    # -- upload --------------------------------------------------------------------------------------
    def _start(self, sid: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        if sid not in self.stores:
            return *err(404, f"FileSearchStore {sid} not found."), []
        if headers.get("x-goog-upload-protocol") != "resumable" or headers.get("x-goog-upload-command") != "start":
            return *err(400, "Upload requests must set X-Goog-Upload-Protocol: resumable and X-Goog-Upload-Command: start."), []
        extra = sorted(set(body or {}) - UPLOAD_CONFIG_FIELDS)
        if extra:
            return *err(400, f'Invalid JSON payload received. Unknown name "{extra[0]}": Cannot find field.'), []
        mime = headers.get("x-goog-upload-header-content-type") or (body or {}).get("mimeType", "")
        if mime not in MIME_TYPES:
            return *err(400, f"Unsupported MIME type: {mime or '(none)'}"), []
        uid = self._id("up")
        self.uploads[uid] = {"store": sid, "config": body or {}, "mime": mime,
                             "length": int(headers.get("x-goog-upload-header-content-length", -1))}
        url = f"{self.root}/upload/v1beta/{sid}:uploadToFileSearchStore?upload_id={uid}&upload_protocol=resumable"
        return 200, {}, [("X-Goog-Upload-URL", url), ("X-Goog-Upload-Status", "active")]

    def _finalize(self, uid: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        self.requests.append(("POST", f"upload:{uid}", headers, None))
        up = self.uploads.pop(uid, None)
        if up is None:
            return *err(404, "Upload session not found."), []
        if headers.get("x-goog-upload-command") != "upload, finalize" or headers.get("x-goog-upload-offset") != "0":
            return *err(400, "The upload must be sent whole: X-Goog-Upload-Command: upload, finalize at offset 0."), []
        if up["length"] != len(raw):
            return *err(400, f"The upload's length {len(raw)} is not the announced {up['length']}."), []
        if len(raw) > self.max_file_bytes:
            return *err(400, f"File size {len(raw)} exceeds the maximum of {self.max_file_bytes} bytes."), []
        sid, name = up["store"], up["config"].get("displayName", "")
        did = f"{sid}/documents/{self._id('doc-')}"
        self.documents[sid][did] = {"name": did, "displayName": name, "state": "STATE_PENDING",
                                    "sizeBytes": str(len(raw)), "mimeType": up["mime"],
                                    "createTime": "2026-11-28T00:00:00Z", "updateTime": "2026-11-28T00:00:00Z"}
        self.blobs[did] = raw
        oid = f"{sid}/upload/operations/{self._id('op-')}"
        self.operations[oid] = {"name": oid, "_doc": did, "_polls": 0}
        return 200, {"name": oid}, [("X-Goog-Upload-Status", "final")]

    def _operation(self, oid: str) -> Reply:
        op = self.operations.get(oid)
        if op is None:
            return err(404, f"Operation {oid} not found.")
        op["_polls"] += 1
        sid = oid.split("/upload/")[0]
        doc = self.documents.get(sid, {}).get(op["_doc"])
        if op["_polls"] >= self.index_polls and doc is not None and doc["state"] == "STATE_PENDING":
            failed = doc["displayName"] in self.fail_indexing or not self.blobs[doc["name"]].startswith(b"%PDF")
            doc["state"] = "STATE_FAILED" if failed else "STATE_ACTIVE"
        out: dict[str, Any] = {"name": oid}
        if doc is not None and doc["state"] != "STATE_PENDING":
            out["done"] = True
            if doc["state"] == "STATE_FAILED":
                out["error"] = {"code": 3, "message": f"Failed to process {doc['displayName']}: the file could not be parsed."}
            else:
                out["response"] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.UploadToFileSearchStoreResponse",
                                   "parent": sid, "documentName": doc["name"], "mimeType": doc["mimeType"],
                                   "sizeBytes": doc["sizeBytes"]}
        return 200, out

    # -- generateContent -----------------------------------------------------------------------------
    def _generate(self, model: str, body: Any) -> Reply:
        extra = sorted(set(body) - GENERATE_FIELDS)
        if extra:
            return err(400, f'Invalid JSON payload received. Unknown name "{extra[0]}": Cannot find field.')
        if model not in MODELS:
            return err(404, f"models/{model} is not found for API version v1beta, or is not supported for "
                       "generateContent. Call ListModels to see the list of available models and their supported methods.")
        contents = body.get("contents") or []
        if not contents or not all(isinstance(c, dict) and c.get("parts") for c in contents):
            return err(400, "* GenerateContentRequest.contents: contents is not specified\n")
        names = [n for t in body.get("tools") or [] for n in (t.get("fileSearch") or {}).get("fileSearchStoreNames", [])]
        for n in names:
            if n not in self.stores:
                return err(404, f"FileSearchStore {n} not found.")
        if any(d["state"] == "STATE_PENDING" for n in names for d in self.documents[n].values()):
            self.early_queries.append(model)
        active = {d["displayName"]: self.blobs[d["name"]] for n in names for d in self.documents[n].values()
                  if d["state"] == "STATE_ACTIVE"}
        text = "".join(p.get("text", "") for c in contents for p in c["parts"])
        reply = self.answer(text, active)
        chunks = [{"retrievedContext": {"title": t, "text": f"(a chunk of {t})", "fileSearchStore": names[0]}}
                  for t in reply.get("chunks", [])]
        candidate: dict[str, Any] = {"content": {"parts": [{"text": reply["text"]}], "role": "model"},
                                     "finishReason": "STOP", "index": 0}
        if names:
            candidate["groundingMetadata"] = {"groundingChunks": chunks, "retrievalQueries": reply.get("queries", [])}
        usage = reply.get("usage", {"promptTokenCount": 0, "candidatesTokenCount": 0})
        return 200, {"candidates": [candidate], "usageMetadata": {**usage, "totalTokenCount": sum(usage.values())},
                     "modelVersion": model, "responseId": self._id("resp-")}
